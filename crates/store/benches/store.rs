//! Criterion benchmarks of get (hit, miss) and put for every backend at 100 and 100,000
//! cassettes, reported as ratios to the plain file backend measured in the same run.
//!
//! Run: `eval "$(scripts/s3-server.sh start)"; cargo bench -p cassette-store --bench store`
//! (S3 is included when `CASSETTE_TEST_S3` is set). The 100,000-cassette stores are built once
//! per run, directly in each backend's on-disk format, so that building them does not pay one
//! fsync per cassette; the benchmarks then go through the public `Store` API only.

use cassette_store::conformance::{document, key};
use cassette_store::{open, DynStore, Key, StoreExt};
use criterion::{BenchmarkId, Criterion};
use futures::StreamExt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const SIZES: [usize; 2] = [100, 100_000];
/// About the size of a small chat completion cassette.
const BODY: usize = 1000;

fn keys(n: usize) -> Vec<Key> {
    // Spread keys over every shard, like real SHA-256 keys.
    (0..n as u64)
        .map(|i| key(&format!("{:02x}", (i * 37) % 256), i))
        .collect()
}

fn compact(doc: &[u8]) -> Vec<u8> {
    let value: serde_json::Value = serde_json::from_slice(doc).expect("bench document");
    serde_json::to_vec(&value).expect("bench document")
}

fn build_file(root: &Path, keys: &[Key]) {
    for k in keys {
        let dir = root.join(&k.as_str()[..2]);
        std::fs::create_dir_all(&dir).expect("shard folder");
        std::fs::write(dir.join(format!("{k}.json")), document(k, 1, BODY)).expect("fixture");
    }
}

fn build_jsonl(path: &Path, keys: &[Key]) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("log"));
    for k in keys {
        out.write_all(format!("{{\"key\":\"{k}\",\"cassette\":").as_bytes())
            .expect("log");
        out.write_all(&compact(&document(k, 1, BODY))).expect("log");
        out.write_all(b"}\n").expect("log");
    }
    out.flush().expect("log");
}

fn build_sled(path: &Path, keys: &[Key]) {
    let db = sled::open(path).expect("sled");
    for k in keys {
        db.insert(k.as_str().as_bytes(), document(k, 1, BODY).as_ref())
            .expect("sled");
    }
    db.flush().expect("sled");
}

async fn build_remote(store: &DynStore, keys: &[Key]) {
    futures::stream::iter(keys.iter())
        .map(|k| {
            let store = store.clone();
            async move {
                store
                    .put(k, document(k, 1, BODY))
                    .await
                    .expect("fixture put")
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
}

struct Fixture {
    backend: &'static str,
    size: usize,
    store: DynStore,
    keys: Vec<Key>,
}

fn fixtures(rt: &tokio::runtime::Runtime, work: &Path) -> Vec<Fixture> {
    let s3 = std::env::var("CASSETTE_TEST_S3").ok();
    if s3.is_none() {
        eprintln!("S3 not benchmarked: CASSETTE_TEST_S3 is unset (see scripts/s3-server.sh)");
    }
    let run = std::process::id();
    let mut out = Vec::new();
    for size in SIZES {
        let keys = keys(size);
        let started = std::time::Instant::now();
        let file = work.join(format!("file-{size}"));
        build_file(&file, &keys);
        let jsonl = work.join(format!("log-{size}.jsonl"));
        build_jsonl(&jsonl, &keys);
        let sled_dir = work.join(format!("sled-{size}"));
        build_sled(&sled_dir, &keys);
        eprintln!(
            "built local fixtures of {size} cassettes in {:?}",
            started.elapsed()
        );
        let mut stores: Vec<(&'static str, String)> = vec![
            ("file", format!("file://{}", file.display())),
            ("jsonl", format!("jsonl://{}", jsonl.display())),
            ("sled", format!("sled://{}", sled_dir.display())),
            ("memory", "memory://".to_owned()),
        ];
        if let Some(base) = &s3 {
            stores.push((
                "s3",
                format!("{}/bench-{run}-{size}", base.trim_end_matches('/')),
            ));
        }
        for (backend, url) in stores {
            let started = std::time::Instant::now();
            let store = open(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
            if matches!(backend, "memory" | "s3") {
                rt.block_on(build_remote(&store, &keys));
            }
            eprintln!(
                "opened {backend} with {size} cassettes in {:?}",
                started.elapsed()
            );
            out.push(Fixture {
                backend,
                size,
                store,
                keys: keys.clone(),
            });
        }
    }
    out
}

fn target_dir() -> PathBuf {
    // target/release/deps/store-HASH -> target
    std::env::current_exe()
        .ok()
        .and_then(|p| p.ancestors().nth(3).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target"))
}

fn mean_ns(dir: &Path, group: &str, id: &str) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join(group).join(id).join("new/estimates.json")).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["mean"]["point_estimate"].as_f64()
}

fn human(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let work = tempfile::Builder::new()
        .prefix("cassette-store-bench")
        .tempdir_in(target_dir())
        .expect("work dir");
    let fixtures = fixtures(&rt, work.path());
    let criterion_dir = target_dir().join("criterion");
    let mut c = Criterion::default()
        .output_directory(&criterion_dir)
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let ops = ["get_hit", "get_miss", "put"];
    for op in ops {
        let mut group = c.benchmark_group(format!("store_{op}"));
        for f in &fixtures {
            let next = AtomicUsize::new(0);
            // A stride walks the whole key space, so a large store is not read from one hot key.
            let pick = || {
                let i = next.fetch_add(1, Ordering::Relaxed);
                &f.keys[(i * 7919) % f.keys.len()]
            };
            let miss = key("ff", u64::MAX);
            group.bench_function(BenchmarkId::new(f.backend, f.size), |b| {
                b.to_async(&rt).iter(|| async {
                    match op {
                        "get_hit" => {
                            let k = pick();
                            assert!(f.store.get(k).await.expect("get").is_some(), "{k} missing");
                        }
                        "get_miss" => assert!(f.store.get(&miss).await.expect("get").is_none()),
                        _ => {
                            let k = pick();
                            f.store.put(k, document(k, 2, BODY)).await.expect("put");
                        }
                    }
                })
            });
        }
        group.finish();
    }
    c.final_summary();

    println!("\n| operation | cassettes | backend | mean | ratio to file |");
    println!("|---|---:|---|---:|---:|");
    for op in ops {
        for size in SIZES {
            let group = format!("store_{op}");
            let Some(file) = mean_ns(&criterion_dir, &group, &format!("file/{size}")) else {
                continue;
            };
            for f in fixtures.iter().filter(|f| f.size == size) {
                if let Some(ns) = mean_ns(&criterion_dir, &group, &format!("{}/{size}", f.backend))
                {
                    println!(
                        "| {op} | {size} | {} | {} | {:.2} |",
                        f.backend,
                        human(ns),
                        ns / file
                    );
                }
            }
        }
    }
}
