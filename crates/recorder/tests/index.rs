//! The nearest-recording index: recorders write segments, `compact` folds them into a base,
//! and the first miss of a replay run then costs a handful of store requests, whatever the
//! number of cassettes, while naming the same nearest recording as a full scan. Against the
//! memory store and, when `CASSETTE_TEST_S3` is set, a real S3-compatible server.

use bytes::Bytes;
use cassette_recorder::miss::{compact, Miss};
use cassette_recorder::{Error, Exchange, Mode, Recorder, RecorderConfig, Request, Route};
use cassette_store::{DynStore, StoreExt};
use serde_json::json;
use std::sync::Arc;

fn config(mode: Mode) -> RecorderConfig {
    RecorderConfig {
        mode,
        routes: vec![Route::new("default", "http://127.0.0.1:9")],
        ..RecorderConfig::default()
    }
}

fn chat(prompt: &str, temperature: f64) -> Request {
    Request::post_json(
        "/v1/chat/completions",
        &json!({"model": "m", "temperature": temperature,
                "messages": [{"role": "user", "content": prompt}]}),
    )
}

/// A prompt of its own for case `n`, unrelated to the others' words.
fn prompt(n: usize) -> String {
    const WORDS: &[&str] = &[
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra",
        "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
    ];
    let mut words = Vec::new();
    let mut x = n as u64 * 2_654_435_761 + 17;
    for _ in 0..14 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        words.push(WORDS[(x % WORDS.len() as u64) as usize]);
    }
    format!("Case {n}: {}.", words.join(" "))
}

/// Stores a recording of `request` (imported: nothing is sent anywhere).
async fn record(recorder: &Recorder, request: Request) {
    let exchange = Exchange {
        request,
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: Bytes::from(r#"{"choices":[{"message":{"content":"ok"}}]}"#),
        upstream: "https://api.openai.com".into(),
        recorded_at: "2026-01-01T00:00:00Z".into(),
        tool: "test".into(),
        occurrence: 1,
        test: None,
        source: None,
    };
    recorder
        .import(exchange, cassette_recorder::Write::Overwrite)
        .await
        .unwrap();
}

async fn miss(recorder: &Recorder, request: Request) -> Miss {
    match recorder.handle(request).await {
        Err(Error::Miss(miss)) => *miss,
        other => panic!("expected a miss, got {:?}", other.map(|o| o.key)),
    }
}

/// Fills `store` with `n` recordings plus a long prompt that is later reworded, through a
/// recording recorder that writes its index segments.
async fn fill(store: &DynStore, n: usize) -> String {
    let writer = Recorder::new(config(Mode::Record), store.clone()).unwrap();
    let long = format!(
        "{}Then summarise the quarterly revenue figures for the board.",
        "Read the report and keep every number exactly as written. ".repeat(20)
    );
    for i in 0..n {
        record(&writer, chat(&prompt(i), 0.0)).await;
    }
    record(&writer, chat(&long, 0.0)).await;
    writer.flush_index().await.unwrap();
    long
}

async fn first_miss_costs_a_handful_of_requests(store: DynStore) {
    let n = 300;
    let long = fill(&store, n).await;
    assert!(
        !store.list_segments().await.unwrap().is_empty(),
        "the writer left no segment"
    );

    // Before compaction: segments exist but no base, so the index lists the keys; every
    // cassette is in a segment, so none is read for the index itself.
    let replay = Recorder::new(config(Mode::Replay), store.clone()).unwrap();
    let reworded = long.replace("revenue", "income");
    let found = miss(&replay, chat(&reworded, 0.0)).await;
    let lines = found.explanation_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("[-revenue-]{+income+}"), "{lines:?}");
    assert!(
        replay.index_requests().await < 20,
        "{}",
        replay.index_requests().await
    );

    // A full scan, as before segments existed, for comparison: every cassette read.
    let compacted = compact(&store, &Default::default()).await.unwrap();
    assert_eq!(compacted.cassettes, n + 1);
    assert_eq!(compacted.read, 0, "the segments covered every cassette");
    assert_eq!(store.list_segments().await.unwrap().len(), 1);

    // After compaction: one LIST and one GET of the base, then the few candidates.
    let replay = Recorder::new(config(Mode::Replay), store.clone()).unwrap();
    let found = miss(&replay, chat(&prompt(7), 0.7)).await;
    assert_eq!(
        found.explanation_lines(),
        ["body.temperature: 0 -> 0.7"],
        "the nearest is the same prompt at another temperature"
    );
    let requests = replay.index_requests().await;
    assert!(
        requests <= 10,
        "{requests} store requests for the first miss"
    );
    let found = miss(&replay, chat(&reworded, 0.0)).await;
    assert!(found.explanation_lines()[0].contains("[-revenue-]{+income+}"));
}

#[tokio::test]
async fn memory_store() {
    first_miss_costs_a_handful_of_requests(cassette_store::open("memory://").unwrap()).await;
}

#[tokio::test]
async fn s3_store() {
    let Ok(base) = std::env::var("CASSETTE_TEST_S3") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CASSETTE_TEST_S3 must be set on CI"
        );
        eprintln!("SKIPPED s3_store: CASSETTE_TEST_S3 is not set");
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let url = format!(
        "{}/index-{}-{nanos}",
        base.trim_end_matches('/'),
        std::process::id()
    );
    first_miss_costs_a_handful_of_requests(cassette_store::open(&url).unwrap()).await;
}

#[tokio::test]
async fn deleted_and_unindexed_cassettes_are_handled() {
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let writer = Recorder::new(config(Mode::Record), store.clone()).unwrap();
    record(&writer, chat("What is the capital of France?", 0.0)).await;
    record(&writer, chat("What is the capital of Spain?", 0.0)).await;
    writer.flush_index().await.unwrap();
    compact(&store, &Default::default()).await.unwrap();

    // The nearest recording was deleted after indexing: the next one is named instead.
    let france = chat("What is the capital of France?", 0.0)
        .key(&Default::default())
        .key;
    store.delete(&france).await.unwrap();
    let replay = Recorder::new(config(Mode::Replay), store.clone()).unwrap();
    let found = miss(&replay, chat("What is the capital of France?", 0.5)).await;
    let nearest = found.explanation.nearest.expect("a nearest recording");
    assert_ne!(nearest.key, france);

    // A cassette at another path that no segment covers (written by an older tool): the
    // index has no candidate there, so it looks at the store itself.
    let plain: DynStore = Arc::new(cassette_store::memory::MemoryStore::new());
    let old_writer = Recorder::new(config(Mode::Record), plain.clone()).unwrap();
    let mut embeddings =
        Request::post_json("/v1/embeddings", &json!({"model": "e", "input": "hi"}));
    embeddings.target = "default".into();
    record(&old_writer, embeddings).await;
    let document = plain
        .get(&plain.list("").await.unwrap()[0])
        .await
        .unwrap()
        .unwrap();
    let key = plain.list("").await.unwrap()[0].clone();
    store.put(&key, document).await.unwrap();
    let found = miss(
        &replay,
        Request::post_json("/v1/embeddings", &json!({"model": "e", "input": "hello"})),
    )
    .await;
    assert_eq!(found.explanation.nearest.map(|n| n.key), Some(key));
}

/// Templated prompts that differ only in their numbers: the ranking must still find the one
/// the missed request rewords, not merely one of its many look-alikes.
#[tokio::test]
async fn the_nearest_among_look_alike_prompts_is_the_reworded_one() {
    let templated = |i: usize, when: &str| {
        chat(
            &format!(
                "Question number {i}: where is my refund for order {i}? I paid by card and the \
                 parcel came back to you {when}."
            ),
            0.0,
        )
    };
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let writer = Recorder::new(config(Mode::Record), store.clone()).unwrap();
    for i in 0..2000 {
        record(&writer, templated(i, "last week")).await;
    }
    writer.flush_index().await.unwrap();
    let expected = templated(1000, "last week").key(&Default::default()).key;
    for compacted in [false, true] {
        if compacted {
            compact(&store, &Default::default()).await.unwrap();
        }
        let replay = Recorder::new(config(Mode::Replay), store.clone()).unwrap();
        let found = miss(&replay, templated(1000, "two weeks ago")).await;
        assert_eq!(
            found.explanation.nearest.map(|n| n.key),
            Some(expected.clone()),
            "compacted: {compacted}"
        );
    }
}
