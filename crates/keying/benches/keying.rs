//! Keying cost against the floor it cannot beat: plain SHA-256 of the same request bytes.
//!
//! Run with `cargo bench -p cassette-keying --bench keying`. On a chat request, the `keying`
//! group measures `hit_key()` (the replay hit's path: the key only), `key()` (the key with its
//! explanation: material and canonical string) and `Sha256::digest` of the very same body
//! bytes, so the ratios to the hash do not depend on the machine's speed.
//!
//! Criterion measures one function after the other, each for seconds, and on a shared machine
//! the load can change in between. The `keying_vs_sha256` group therefore alternates SHA-256 and
//! the keying call on the same bytes in one loop and reports, per sample, the fastest keying
//! call in units of the fastest hash: its "time" of 1 ms means 1x.

use cassette_keying::{KeyConfig, Request};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// A realistic chat request of about `target` bytes: a system prompt and alternating turns of
/// prose with some trailing whitespace, so the whitespace rule has work to do.
fn chat_body(target: usize) -> Vec<u8> {
    let sentence = "The refund for order 4711 was issued on Tuesday and should arrive within five business days.  \n";
    let mut messages = vec![
        json!({"role": "system", "content": "You are a terse support agent.\t\nAnswer briefly."}),
    ];
    let mut size = 0;
    let mut turn = 0usize;
    while size < target {
        let role = if turn.is_multiple_of(2) {
            "user"
        } else {
            "assistant"
        };
        let content = sentence.repeat(4);
        size += content.len() + 40;
        messages.push(json!({"role": role, "content": content}));
        turn += 1;
    }
    let body: Value = json!({
        "model": "gpt-4o-mini",
        "messages": messages,
        "temperature": 0.2,
        "stream": true,
        "user": "u-42",
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

fn bench(c: &mut Criterion) {
    let config = KeyConfig::default();
    let mut group = c.benchmark_group("keying");
    for (name, size) in [("2KiB", 2 * 1024), ("1MiB", 1024 * 1024)] {
        let body = chat_body(size);
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::new("hit_key", name), &body, |b, body| {
            b.iter(|| {
                Request::new("POST", "/v1/chat/completions")
                    .header("authorization", "Bearer sk-test")
                    .body(black_box(body))
                    .hit_key(&config)
            })
        });
        group.bench_with_input(BenchmarkId::new("key", name), &body, |b, body| {
            b.iter(|| {
                Request::new("POST", "/v1/chat/completions")
                    .header("authorization", "Bearer sk-test")
                    .body(black_box(body))
                    .key(&config)
            })
        });
        group.bench_with_input(BenchmarkId::new("sha256", name), &body, |b, body| {
            b.iter(|| Sha256::digest(black_box(body)))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("keying_vs_sha256");
    for (name, size) in [("2KiB", 2 * 1024), ("1MiB", 1024 * 1024)] {
        let body = chat_body(size);
        group.bench_with_input(BenchmarkId::new("hit_key", name), &body, |b, body| {
            b.iter_custom(|iters| {
                in_sha256_units(iters, body, || {
                    Request::new("POST", "/v1/chat/completions")
                        .header("authorization", "Bearer sk-test")
                        .body(black_box(body))
                        .hit_key(&config)
                })
            })
        });
        group.bench_with_input(BenchmarkId::new("key", name), &body, |b, body| {
            b.iter_custom(|iters| {
                in_sha256_units(iters, body, || {
                    Request::new("POST", "/v1/chat/completions")
                        .header("authorization", "Bearer sk-test")
                        .body(black_box(body))
                        .key(&config)
                })
            })
        });
    }
    group.finish();
}

/// Runs SHA-256 of `body` and `keying` alternately `iters` times and returns the fastest
/// keying call as a multiple of the fastest hash, scaled so that 1x reads as 1 ms per
/// iteration. The fastest of each is the one no other process interrupted, which on a shared
/// machine is what makes the ratio repeatable.
fn in_sha256_units<T>(iters: u64, body: &[u8], mut keying: impl FnMut() -> T) -> Duration {
    let (mut hashing, mut keyed) = (Duration::MAX, Duration::MAX);
    for _ in 0..iters {
        let start = Instant::now();
        black_box(Sha256::digest(black_box(body)));
        hashing = hashing.min(start.elapsed());
        let start = Instant::now();
        black_box(keying());
        keyed = keyed.min(start.elapsed());
    }
    let ratio = keyed.as_secs_f64() / hashing.as_secs_f64().max(f64::MIN_POSITIVE);
    Duration::from_secs_f64(ratio * 1e-3 * iters as f64)
}

criterion_group! {
    name = benches;
    // Short on purpose: the machine's cores are shared, and the ratio is stable well before
    // criterion's default five seconds.
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
