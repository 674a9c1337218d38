//! A writer killed with SIGKILL at random points leaves every store openable and every
//! cassette either an old or a new complete document.

use crate::common::{crash_keys, spawn_child, temp_files, wait_for_file, Rng, CRASH_DOC_SIZE};
use cassette_store::conformance::document;
use cassette_store::fs::FileStore;
use std::path::Path;
use std::time::Duration;

const KILLS: u64 = 25;

/// Waits (at most a minute) until the store holds a document.
async fn wait_for_a_put(url: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let store = cassette_store::open(url).expect("open the store");
        if !store.list("").await.unwrap_or_default().is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Kills a rewriting child `KILLS` times and checks the store after each kill.
async fn kill_repeatedly(url: &str, work: &Path) -> u64 {
    let mut rng = Rng::new();
    let mut max_seen = 0;
    for round in 0..KILLS {
        let ready = work.join(format!("ready-{round}"));
        let envs = [
            ("STORE_URL", url.to_owned()),
            ("READY_FILE", ready.display().to_string()),
            ("START_VERSION", (max_seen + 1).to_string()),
        ];
        let mut child = spawn_child("crash", &envs);
        wait_for_file(&ready, Duration::from_secs(60), "crash child start");
        std::thread::sleep(Duration::from_millis(rng.below(60)));
        if round + 1 == KILLS && max_seen == 0 {
            // On a loaded machine every random kill may come before the first put completes:
            // the last round waits for one, so that the rounds check whole documents at all.
            wait_for_a_put(url).await;
        }
        child.kill().unwrap();
        child.wait().unwrap();

        let store =
            cassette_store::open(url).unwrap_or_else(|e| panic!("round {round}: reopen: {e}"));
        for key in crash_keys() {
            let Some(stored) = store
                .get(&key)
                .await
                .unwrap_or_else(|e| panic!("round {round}: {key}: {e}"))
            else {
                continue;
            };
            let value: serde_json::Value = serde_json::from_slice(&stored)
                .unwrap_or_else(|e| panic!("round {round}: {key} is not whole JSON: {e}"));
            let version = value["version"].as_u64().unwrap();
            assert_eq!(
                stored,
                document(&key, version, CRASH_DOC_SIZE),
                "round {round}: {key}"
            );
            max_seen = max_seen.max(version);
        }
        let listed = store.list("").await.unwrap();
        assert!(
            listed.iter().all(|k| crash_keys().contains(k)),
            "round {round}: {listed:?}"
        );
    }
    max_seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cassettes");
    let versions = kill_repeatedly(&format!("file://{}", root.display()), dir.path()).await;
    assert!(versions > 0, "the writer never completed a put");
    // Killed writers leave temp files behind: ignored above, removed by the cleanup.
    let strays = temp_files(&root).len();
    eprintln!("{strays} stray temp files after {KILLS} kills");
    let store = FileStore::open(&root).unwrap();
    assert_eq!(
        store.remove_stale_temp_files(Duration::ZERO).unwrap(),
        strays
    );
    assert!(temp_files(&root).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cassettes.jsonl");
    let versions = kill_repeatedly(&format!("jsonl://{}", log.display()), dir.path()).await;
    assert!(versions > 0, "the writer never completed a put");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_sled() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let versions = kill_repeatedly(&format!("sled://{}", db.display()), dir.path()).await;
    assert!(versions > 0, "the writer never completed a put");
}
