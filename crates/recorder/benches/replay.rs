//! Replay costs with 10,000 cassettes in a file store: a hit, a miss with its explanation (cold:
//! the first miss indexes the store; warm: later misses reuse the index), against the baseline
//! of reading the same cassette straight from the store.
//!
//! The `replay_vs_store_get` group is the one the regression check judges: it alternates
//! `Store::get` of the cassette and a replay hit of it in one loop, on one thread, and reports
//! per sample the fastest hit in units of the fastest read (its "time" of 1 ms means 1x), so
//! the load of a shared machine, which moves both alike, cancels out. `hit` is the default path
//! (the answer from the hit cache, checked against the stored bytes); `hit_no_cache` parses and
//! renders the cassette every time (`replay_memory = 0`); `hit_tiered` is `hit` through a
//! tiered store whose cache tier is the same folder (a CI runner's warm cache in front of a
//! bucket, here a memory store holding the same cassettes), still in units of the file store's
//! `get`.

mod support;

use cassette_recorder::{Mode, Recorder, RecorderConfig, Request};
use cassette_store::{DynStore, StoreExt};
use cassette_tape::document::Cassette;
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use std::hint::black_box;
use std::time::{Duration, Instant};

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
    support::recorded(&request(i), i, "http://127.0.0.1:1")
}

fn replay(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let folder = tempfile::tempdir().unwrap();
    let url = format!("file://{}", folder.path().display());
    let store: DynStore = cassette_store::open(&url).unwrap();
    runtime.block_on(async {
        for i in 0..CASSETTES {
            let c = cassette(i);
            store
                .put(&c.key, serde_json::to_vec(&c).unwrap().into())
                .await
                .unwrap();
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

    // Interleaved, on a current-thread runtime: the store's read and the hit in one loop.
    let local = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let uncached = Recorder::new(
        RecorderConfig {
            replay_memory: 0,
            ..config.clone()
        },
        store.clone(),
    )
    .unwrap();
    let remote: DynStore = cassette_store::open("memory://").unwrap();
    runtime.block_on(async {
        for i in 0..CASSETTES {
            let c = cassette(i);
            remote
                .put(&c.key, serde_json::to_vec(&c).unwrap().into())
                .await
                .unwrap();
        }
    });
    let tiered: DynStore = std::sync::Arc::new(cassette_store::tiered::TieredStore::new(
        store.clone(),
        remote,
    ));
    let through_cache = Recorder::new(config.clone(), tiered).unwrap();
    let mut group = c.benchmark_group("replay_vs_store_get");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (name, recorder) in [
        ("hit", &recorder),
        ("hit_no_cache", &uncached),
        ("hit_tiered", &through_cache),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let (mut read, mut replayed) = (Duration::MAX, Duration::MAX);
                for _ in 0..iters {
                    let start = Instant::now();
                    black_box(local.block_on(store.get(&hit_key)).unwrap());
                    read = read.min(start.elapsed());
                    let start = Instant::now();
                    black_box(local.block_on(async {
                        let outcome = recorder.handle(hit.clone()).await.unwrap();
                        outcome.response.into_bytes().await.unwrap()
                    }));
                    replayed = replayed.min(start.elapsed());
                }
                let ratio = replayed.as_secs_f64() / read.as_secs_f64().max(f64::MIN_POSITIVE);
                Duration::from_secs_f64(ratio * 1e-3 * iters as f64)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
