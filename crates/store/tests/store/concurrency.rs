//! Eight processes race create-only puts of the same 200 keys into one store.

use crate::common::{race_keys, s3_url, spawn_child, temp_files, wait_for_file, wait_ok};
use cassette_store::conformance::document;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const WRITERS: u64 = 8;

/// Runs the race on `url` and checks: every child succeeded, each key has exactly one winner,
/// the store holds exactly the 200 keys, and each holds the winner's complete document.
async fn race(url: &str, work: &Path) {
    let go = work.join("go");
    let mut children = Vec::new();
    for id in 0..WRITERS {
        let envs = [
            ("STORE_URL", url.to_owned()),
            ("CHILD_ID", id.to_string()),
            (
                "READY_FILE",
                work.join(format!("ready-{id}")).display().to_string(),
            ),
            ("GO_FILE", go.display().to_string()),
            (
                "OUT_FILE",
                work.join(format!("out-{id}")).display().to_string(),
            ),
        ];
        children.push(spawn_child("race", &envs));
    }
    for id in 0..WRITERS {
        wait_for_file(
            &work.join(format!("ready-{id}")),
            Duration::from_secs(60),
            "race child start",
        );
    }
    std::fs::write(&go, b"").unwrap();
    for child in &mut children {
        wait_ok(child, Duration::from_secs(180), "race child");
    }

    let mut winners: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut losses = 0;
    for id in 0..WRITERS {
        let out = std::fs::read_to_string(work.join(format!("out-{id}"))).unwrap();
        assert_eq!(out.lines().count(), 200, "writer {id} reported every key");
        for line in out.lines() {
            let (key, word) = line.split_once(' ').unwrap();
            match word {
                "won" => winners.entry(key.to_owned()).or_default().push(id),
                "lost" => losses += 1,
                other => panic!("unexpected outcome {other}"),
            }
        }
    }
    assert_eq!(losses, 200 * (WRITERS - 1), "every loser was told it lost");
    let store = cassette_store::open(url).unwrap();
    let keys = race_keys();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(
        store.list("").await.unwrap(),
        sorted,
        "exactly the 200 keys"
    );
    for key in &keys {
        let won = winners
            .get(key.as_str())
            .map(Vec::as_slice)
            .unwrap_or_default();
        assert_eq!(won.len(), 1, "key {key}: winners {won:?}");
        let stored = store
            .get(key)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{key} missing"));
        assert_eq!(
            stored,
            document(key, won[0], 2000),
            "{key}: the winner's complete document"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_processes_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cassettes");
    race(&format!("file://{}", root.display()), dir.path()).await;
    assert_eq!(
        temp_files(&root),
        Vec::<std::path::PathBuf>::new(),
        "no temp files left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_processes_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cassettes.jsonl");
    race(&format!("jsonl://{}", log.display()), dir.path()).await;
    // Exactly one line per key (the winners'), each one whole JSON document.
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().count(), 200);
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_processes_s3() {
    let Some(url) = s3_url("race") else { return };
    let dir = tempfile::tempdir().unwrap();
    race(&url, dir.path()).await;
}

/// A compaction of a `jsonl://` log while another handle writes and a third reads: the writer
/// loses no record (it waits on the lock and follows the renamed log), the reader is answered
/// every time, and the deleted cassettes' bytes are gone from the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_jsonl_compaction_beside_a_writer_and_a_reader_loses_nothing() {
    use cassette_store::conformance::key;
    use cassette_store::jsonl::JsonlStore;
    use cassette_store::{Store, StoreExt};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.jsonl");
    let reader = JsonlStore::open(&path).unwrap();
    for n in 0..20 {
        let k = key("ba", n);
        reader.put(&k, document(&k, 1, 200)).await.unwrap();
    }
    let secret = key("ba", 0);
    for n in 0..10 {
        reader.delete(&key("ba", n)).await.unwrap();
    }
    let writer = JsonlStore::open(&path).unwrap();
    let compactor = JsonlStore::open(&path).unwrap();
    let writes = tokio::spawn(async move {
        for n in 0..200 {
            let k = key("ee", n);
            writer.put(&k, document(&k, 1, 200)).await.unwrap();
        }
    });
    let reads = tokio::spawn({
        let reader = reader.clone();
        async move {
            for round in 0..400 {
                let k = key("ba", 10 + round % 10);
                assert!(reader.get(&k).await.unwrap().is_some(), "{k} vanished");
            }
        }
    });
    let mut compactions = 0;
    while !writes.is_finished() || compactions < 5 {
        compactor.compact().await.unwrap();
        compactions += 1;
    }
    writes.await.unwrap();
    reads.await.unwrap();
    let done = compactor.compact().await.unwrap();
    assert_eq!(done.kept, 210);
    assert_eq!(reader.list("").await.unwrap().len(), 210);
    assert_eq!(
        JsonlStore::open(&path)
            .unwrap()
            .list("")
            .await
            .unwrap()
            .len(),
        210
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 210);
    assert!(
        !text.contains(secret.as_str()),
        "a deleted key is still in the log"
    );
}
