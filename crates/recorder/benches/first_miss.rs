//! The first replay miss of a run at scale: how many store requests and how long it takes to
//! name the nearest recording with N cassettes in a store, without an index (the full scan: list
//! the keys, read every cassette), with the segments recorders write (not compacted), and with
//! a compacted base segment (`cassette index`), in the same run against the same store.
//!
//! Not a criterion bench: one cold miss is one measurement, and filling a bucket with 100,000
//! cassettes takes minutes. It prints a Markdown table.
//!
//! ```text
//! FIRST_MISS_STORE=s3://cassettes/bench-first-miss FIRST_MISS_N=100000 \
//!   cargo bench -p cassette-recorder --bench first_miss
//! ```
//!
//! The store's prefix is emptied before and after the run.

mod support;

use async_trait::async_trait;
use bytes::Bytes;
use cassette_recorder::miss::{compact, write_segment, IndexRecord, SegmentKind};
use cassette_recorder::{Error, Mode, Recorder, RecorderConfig, Request};
use cassette_store::{Created, DynStore, Key, PutMode, Result, SegmentName, Store, StoreExt};
use cassette_tape::document::Cassette;
use futures::StreamExt;
use serde_json::json;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// S3 lists at most this many names per request.
const PAGE: usize = 1000;

/// Records per writer segment, as a recorder flushing in batches writes them.
const WRITER_BATCH: usize = 256;

/// Counts the requests a store would send over HTTP (a listing costs one per page), and can
/// hide the segments, which is how the store looked to the index before segments existed.
#[derive(Debug)]
struct Counting {
    inner: DynStore,
    segments: bool,
    requests: AtomicU64,
}

impl Counting {
    fn new(inner: DynStore, segments: bool) -> Arc<Counting> {
        Arc::new(Counting {
            inner,
            segments,
            requests: AtomicU64::new(0),
        })
    }

    fn count(&self, n: usize) {
        self.requests.fetch_add(n as u64, Ordering::Relaxed);
    }
}

impl fmt::Display for Counting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.inner.location())
    }
}

#[async_trait]
impl Store for Counting {
    async fn get(&self, key: &Key) -> Result<Option<Bytes>> {
        self.count(1);
        self.inner.get(key).await
    }
    async fn get_raw(&self, key: &Key) -> Result<Option<Bytes>> {
        self.count(1);
        self.inner.get_raw(key).await
    }
    async fn put_with(&self, key: &Key, document: Bytes, mode: PutMode) -> Result<Created> {
        self.inner.put_with(key, document, mode).await
    }
    async fn delete(&self, key: &Key) -> Result<()> {
        self.inner.delete(key).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<Key>> {
        let keys = self.inner.list(prefix).await?;
        self.count(keys.len().div_ceil(PAGE).max(1));
        Ok(keys)
    }
    fn location(&self) -> String {
        self.inner.location()
    }
    fn keeps_segments(&self) -> bool {
        self.segments && self.inner.keeps_segments()
    }
    async fn put_segment(&self, name: &SegmentName, document: Bytes) -> Result<Created> {
        self.inner.put_segment(name, document).await
    }
    async fn get_segment(&self, name: &SegmentName) -> Result<Option<Bytes>> {
        self.count(1);
        self.inner.get_segment(name).await
    }
    async fn list_segments(&self) -> Result<Vec<SegmentName>> {
        let names = self.inner.list_segments().await?;
        self.count(names.len().div_ceil(PAGE).max(1));
        Ok(names)
    }
    async fn delete_segment(&self, name: &SegmentName) -> Result<()> {
        self.inner.delete_segment(name).await
    }
}

fn request(i: usize) -> Request {
    Request::post_json(
        "/v1/chat/completions",
        &json!({
            "model": "gpt-4o-mini",
            "temperature": 0,
            "messages": [
                {"role": "system", "content": "You are a support agent for an online shop. Be brief."},
                {"role": "user", "content": format!("Question number {i}: where is my refund for order {i}? I paid by card and the parcel came back to you last week.")}
            ]
        }),
    )
}

fn cassette(i: usize) -> Cassette {
    support::recorded(&request(i), i, "https://api.openai.com")
}

/// Times the first miss of a fresh replay recorder over `store`: milliseconds, requests, and
/// the nearest recording it named.
async fn first_miss(store: Arc<Counting>, missed: &Request) -> (f64, u64, String) {
    let config = RecorderConfig {
        mode: Mode::Replay,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::new(config, store.clone()).expect("a replay recorder");
    let started = Instant::now();
    let outcome = recorder.handle(missed.clone()).await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let named = match outcome {
        Err(Error::Miss(miss)) => miss
            .explanation
            .nearest
            .map(|n| n.key.short().to_owned())
            .unwrap_or_else(|| "(none)".into()),
        other => panic!("expected a miss: {:?}", other.map(|o| o.key)),
    };
    (ms, store.requests.load(Ordering::Relaxed), named)
}

async fn empty(store: &DynStore) {
    let keys = store.list("").await.expect("listing");
    futures::stream::iter(keys)
        .for_each_concurrent(64, |key| async move {
            let _ = store.delete(&key).await;
        })
        .await;
    for name in store.list_segments().await.expect("listing segments") {
        let _ = store.delete_segment(&name).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` and `cargo bench -- --list` only ask whether it runs.
    }
    let url = std::env::var("FIRST_MISS_STORE").unwrap_or_else(|_| "memory://".into());
    let n: usize = std::env::var("FIRST_MISS_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let store = cassette_store::open(&url).expect("opening the store");
    empty(&store).await;

    eprintln!("filling {} with {n} cassettes...", store.location());
    let started = Instant::now();
    let records: Vec<IndexRecord> = futures::stream::iter(0..n)
        .map(|i| {
            let store = store.clone();
            async move {
                let cassette = cassette(i);
                store
                    .put(&cassette.key, serde_json::to_vec(&cassette).unwrap().into())
                    .await
                    .expect("writing a cassette");
                IndexRecord::of(&cassette, &Default::default())
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    eprintln!("filled in {:.1}s", started.elapsed().as_secs_f64());
    for batch in records.chunks(WRITER_BATCH) {
        write_segment(&store, batch, SegmentKind::Writer)
            .await
            .expect("writing a segment");
    }

    // A reworded prompt of a case in the middle: its nearest is that case.
    let mut missed = request(n / 2);
    let body = String::from_utf8_lossy(&missed.body).replace("last week", "two weeks ago");
    missed.body = Bytes::from(body);
    let expected = cassette(n / 2).key.short().to_owned();

    let mut rows = Vec::new();
    let (ms, requests, named) = first_miss(Counting::new(store.clone(), false), &missed).await;
    rows.push((
        "no index: list the keys, read every cassette (before)",
        ms,
        requests,
        named,
    ));
    let (ms, requests, named) = first_miss(Counting::new(store.clone(), true), &missed).await;
    rows.push(("writer segments, not compacted", ms, requests, named));
    let started = Instant::now();
    let compacted = compact(&store, &Default::default())
        .await
        .expect("compacting");
    let compact_s = started.elapsed().as_secs_f64();
    let (ms, requests, named) = first_miss(Counting::new(store.clone(), true), &missed).await;
    rows.push((
        "compacted base segment (`cassette index`)",
        ms,
        requests,
        named,
    ));

    println!("first miss with {n} cassettes in {}", store.location());
    println!("| index | store requests | time | vs no index | nearest named |");
    println!("|---|---:|---:|---:|---|");
    let baseline = rows[0].1;
    for (what, ms, requests, named) in &rows {
        let ok = if *named == expected { "right" } else { "WRONG" };
        println!(
            "| {what} | {requests} | {ms:.0} ms | {:.3}x | {named} ({ok}) |",
            ms / baseline
        );
    }
    println!(
        "compaction: {:.1}s, {} cassettes, {} read, {} segments folded in",
        compact_s, compacted.cassettes, compacted.read, compacted.absorbed
    );
    eprintln!("emptying {}...", store.location());
    empty(&store).await;
}
