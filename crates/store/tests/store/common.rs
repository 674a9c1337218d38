//! Shared helpers: S3 settings from the environment, child processes, documents.

use cassette_store::conformance::document;
use cassette_store::{Created, DynStore, Key, StoreExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Set in a child process to the role it plays.
pub(crate) const CHILD_ENV: &str = "CASSETTE_STORE_CHILD";

/// The S3 URL for one test, with its own prefix so tests can run in parallel: `None` (after
/// printing why) when `CASSETTE_TEST_S3` is unset on a developer machine; a failure on CI.
pub(crate) fn s3_url(test: &str) -> Option<String> {
    let Ok(base) = std::env::var("CASSETTE_TEST_S3") else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "CASSETTE_TEST_S3 is not set but CI is: S3 tests must run on CI; start the server \
                 with `eval \"$(scripts/s3-server.sh start)\"` before `cargo test`"
            );
        }
        eprintln!(
            "SKIPPED {test}: CASSETTE_TEST_S3 is not set; run `eval \"$(scripts/s3-server.sh start)\"` \
             to test against a local SeaweedFS"
        );
        return None;
    };
    let (base, query) = match base.split_once('?') {
        Some((b, q)) => (b.trim_end_matches('/').to_owned(), format!("?{q}")),
        None => (base.trim_end_matches('/').to_owned(), String::new()),
    };
    Some(format!("{base}/{}{query}", unique(test)))
}

/// A name no other test or run uses.
pub(crate) fn unique(test: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "test-{test}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A small xorshift generator: enough randomness for kill timings without a dependency.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(1);
        let seed = (nanos as u64) ^ (u64::from(std::process::id()) << 32) | 1;
        eprintln!("rng seed {seed}");
        Self(seed)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Starts this test binary again as a child playing `role`, with `envs` set.
pub(crate) fn spawn_child(role: &str, envs: &[(&str, String)]) -> Child {
    spawn_child_with_args(role, envs, &[])
}

/// Like [`spawn_child`], with more words on the child's command line (extra test-name filters
/// that match nothing), as a real process might carry an upstream URL with a password.
pub(crate) fn spawn_child_with_args(role: &str, envs: &[(&str, String)], args: &[&str]) -> Child {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        "child_process_entry",
        "--nocapture",
        "--test-threads=1",
    ])
    .args(args)
    .env(CHILD_ENV, role)
    .stdin(Stdio::null())
    .stdout(Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn child test process")
}

/// Waits for a child, failing the test if it takes longer than `limit`.
pub(crate) fn wait_ok(child: &mut Child, limit: Duration, what: &str) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait for child") {
            assert!(status.success(), "{what}: child exited with {status}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what}: child still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `path` exists, failing after `limit`.
pub(crate) fn wait_for_file(path: &Path, limit: Duration, what: &str) {
    let deadline = Instant::now() + limit;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{what}: {} did not appear within {limit:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("child needs {name}"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The keys the concurrency test races on.
pub(crate) fn race_keys() -> Vec<Key> {
    (0..200)
        .map(|n| cassette_store::conformance::key(&format!("{:02x}", n % 256), n))
        .collect()
}

/// The size of the documents the crash test writes: large enough that a kill often lands
/// in the middle of a write.
pub(crate) const CRASH_DOC_SIZE: usize = 256 * 1024;

/// The keys the crash test rewrites.
pub(crate) fn crash_keys() -> Vec<Key> {
    (0..4)
        .map(|n| cassette_store::conformance::key("c0", n))
        .collect()
}

pub(crate) fn run_child(role: &str) {
    let url = env("STORE_URL");
    match role {
        // Opens the store, says it is ready, waits for the start signal, then create-only puts
        // every race key (in an order of its own) and writes `key won|lost` lines.
        "race" => {
            let id: u64 = env("CHILD_ID").parse().expect("CHILD_ID");
            let rt = runtime();
            let store: DynStore = cassette_store::open(&url).expect("open store in child");
            std::fs::write(env("READY_FILE"), b"").expect("ready file");
            wait_for_file(
                Path::new(&env("GO_FILE")),
                Duration::from_secs(120),
                "race child",
            );
            let mut keys = race_keys();
            let n = keys.len();
            keys.rotate_left((id as usize * 25) % n);
            let mut out = String::new();
            rt.block_on(async {
                for key in &keys {
                    let created = store
                        .put_if_absent(key, document(key, id, 2000))
                        .await
                        .unwrap_or_else(|e| panic!("child {id}: {e}"));
                    let word = if created == Created::Won {
                        "won"
                    } else {
                        "lost"
                    };
                    out.push_str(&format!("{key} {word}\n"));
                }
            });
            std::fs::write(env("OUT_FILE"), out).expect("out file");
        }
        // Rewrites the crash keys forever with increasing versions until killed.
        "crash" => {
            let rt = runtime();
            let store: DynStore = cassette_store::open(&url).expect("open store in child");
            let keys = crash_keys();
            let start: u64 = env("START_VERSION").parse().expect("START_VERSION");
            std::fs::write(env("READY_FILE"), b"").expect("ready file");
            rt.block_on(async {
                for version in start.. {
                    for key in &keys {
                        store
                            .put(key, document(key, version, CRASH_DOC_SIZE))
                            .await
                            .expect("put");
                    }
                }
            });
        }
        // Holds a sled database open until killed.
        "hold" => {
            let _store = cassette_store::open(&url).expect("open sled in child");
            std::fs::write(env("READY_FILE"), b"").expect("ready file");
            std::thread::sleep(Duration::from_secs(120));
        }
        other => panic!("unknown child role {other}"),
    }
}

/// Every temp file left under `dir`.
pub(crate) fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".tmp"))
            {
                found.push(path);
            }
        }
    }
    found
}
