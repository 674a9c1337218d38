//! Replay costs with 10,000 cassettes in a file store: a hit, a miss with its explanation (cold:
//! the first miss indexes the store; warm: later misses reuse the index), against the baseline
//! of reading the same cassette straight from the store.

use cassette_recorder::cassette::{Cassette, Meta, StoredBody, StoredRequest, StoredResponse};
use cassette_recorder::{Mode, Recorder, RecorderConfig, Request};
use cassette_store::DynStore;
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

const CASSETTES: usize = 10_000;

fn request(i: usize) -> Request {
    Request::post_json(
        "/v1/chat/completions",
        &json!({
            "model": "gpt-4o-mini",
            "temperature": 0,
            "messages": [
                {"role": "system", "content": "You are a support agent for an online shop. Be brief."},
                {"role": "user", "content": format!("Question number {i}: where is my refund for order {i}?")}
            ]
        }),
    )
}

fn cassette(i: usize) -> Cassette {
    let incoming = request(i);
    let keyed = incoming.key(&Default::default());
    Cassette {
        format: 1,
        key: keyed.key.clone(),
        key_version: cassette_keying::KEY_VERSION,
        key_settings: None,
        sequence: None,
        recorded_at: "2026-11-29T09:00:00Z".into(),
        tool: "bench".into(),
        target: "default".into(),
        upstream: "http://127.0.0.1:1".into(),
        request: StoredRequest {
            method: "POST".into(),
            path: incoming.path.clone(),
            query: String::new(),
            headers: BTreeMap::new(),
            body: StoredBody::from_bytes(&incoming.body),
        },
        response: StoredResponse {
            status: 200,
            headers: BTreeMap::new(),
            body: StoredBody::Json(json!({
                "object": "chat.completion", "model": "gpt-4o-mini",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": format!("Refund {i} is on its way.")}}]
            })),
            stream: None,
            events: None,
        },
        meta: Meta::default(),
    }
}

fn replay(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let folder = tempfile::tempdir().unwrap();
    let url = format!("file://{}", folder.path().display());
    let store: DynStore = cassette_store::open(&url).unwrap();
    runtime.block_on(async {
        for i in 0..CASSETTES {
            let c = cassette(i);
            store.put(&c.key, c.to_document()).await.unwrap();
        }
    });
    let config = RecorderConfig {
        mode: Mode::Replay,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::new(config.clone(), store.clone()).unwrap();
    let hit = request(42);
    let hit_key = hit.key(&Default::default()).key;
    let miss = request(CASSETTES + 1);

    let mut group = c.benchmark_group("replay_10k");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("baseline_store_get", |b| {
        b.to_async(&runtime)
            .iter(|| async { store.get(&hit_key).await.unwrap().unwrap() })
    });
    group.bench_function("hit", |b| {
        b.to_async(&runtime).iter(|| async {
            let outcome = recorder.handle(hit.clone()).await.unwrap();
            outcome.response.into_bytes().await.unwrap()
        })
    });
    group.bench_function("miss_explained_warm_index", |b| {
        b.to_async(&runtime)
            .iter(|| async { recorder.handle(miss.clone()).await.unwrap_err() })
    });
    group.sample_size(10);
    group.bench_function("miss_explained_cold_index", |b| {
        b.to_async(&runtime).iter(|| async {
            // A fresh recorder has no index yet: this is the first miss of a run.
            let fresh = Recorder::new(config.clone(), store.clone()).unwrap();
            fresh.handle(miss.clone()).await.unwrap_err()
        })
    });
    group.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
