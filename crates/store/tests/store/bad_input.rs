//! Bad input and bad surroundings: corrupt files, truncated logs, stray temp files, an
//! unreachable bucket, a sled database held by another process.

use crate::common::{spawn_child_with_args, wait_for_file};
use async_trait::async_trait;
use bytes::Bytes;
use cassette_store::conformance::{document, key};
use cassette_store::fs::FileStore;
use cassette_store::jsonl::JsonlStore;
use cassette_store::sled::SledStore;
use cassette_store::tiered::TieredStore;
use cassette_store::{
    open, Created, DynStore, Error, Key, PutMode, Result, SegmentName, Store, StoreExt,
};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test]
async fn corrupt_file_names_file_and_key_and_list_lists_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    let keys: Vec<_> = (0..3).map(|n| key("ab", n)).collect();
    for k in &keys {
        store.put(k, document(k, 1, 100)).await.unwrap();
    }
    let broken = store.path_for(&keys[1]);
    let text = std::fs::read(&broken).unwrap();
    std::fs::write(&broken, &text[..text.len() / 2]).unwrap();

    let err = store.get(&keys[1]).await.unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains(&broken.display().to_string()),
        "names the file: {message}"
    );
    assert!(
        message.contains(keys[1].as_str()),
        "names the key: {message}"
    );
    assert_eq!(
        store.list("").await.unwrap(),
        keys,
        "list still lists every key"
    );
    // Unchecked, the bytes come back as stored: the hit path compares them with a fingerprint.
    let raw = store.get_raw(&keys[1]).await.unwrap();
    assert_eq!(raw.as_deref(), Some(&text[..text.len() / 2]));
    assert!(
        store.get(&keys[0]).await.unwrap().is_some()
            && store.get(&keys[2]).await.unwrap().is_some()
    );
    // Re-recording repairs it.
    store
        .put(&keys[1], document(&keys[1], 2, 10))
        .await
        .unwrap();
    assert_eq!(
        store.get(&keys[1]).await.unwrap(),
        Some(document(&keys[1], 2, 10))
    );
}

#[tokio::test]
async fn non_json_documents_are_refused_by_json_stores() {
    let dir = tempfile::tempdir().unwrap();
    let k = key("ab", 1);
    for store in [
        open(&dir.path().join("files").display().to_string()).unwrap(),
        open(&format!(
            "jsonl://{}",
            dir.path().join("log.jsonl").display()
        ))
        .unwrap(),
    ] {
        let err = store
            .put(&k, Bytes::from_static(b"{\"half\": "))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidDocument { .. }), "{err:?}");
        assert!(err.to_string().contains(k.as_str()));
        assert!(
            store.get(&k).await.unwrap().is_none(),
            "{}: nothing written",
            store.location()
        );
    }
}

#[tokio::test]
async fn stray_temp_files_are_ignored_then_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    let k = key("cd", 1);
    store.put(&k, document(&k, 1, 10)).await.unwrap();
    let stray = dir
        .path()
        .join("cd")
        .join(format!(".{k}.json.999999.0.tmp"));
    std::fs::write(&stray, b"{\"partial").unwrap();
    assert_eq!(store.list("").await.unwrap(), vec![k.clone()]);
    assert_eq!(store.get(&k).await.unwrap(), Some(document(&k, 1, 10)));
    // Young temp files may belong to a writer in another process: left alone.
    assert_eq!(
        store
            .remove_stale_temp_files(Duration::from_secs(600))
            .unwrap(),
        0
    );
    assert!(stray.exists());
    assert_eq!(store.remove_stale_temp_files(Duration::ZERO).unwrap(), 1);
    assert!(!stray.exists());
}

#[tokio::test]
async fn jsonl_truncated_last_line_is_skipped_then_terminated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.jsonl");
    let (a, b, c) = (key("01", 1), key("02", 2), key("03", 3));
    {
        let store = JsonlStore::open(&path).unwrap();
        store.put(&a, document(&a, 1, 10)).await.unwrap();
        store.put(&a, document(&a, 2, 10)).await.unwrap();
        store.put(&b, document(&b, 1, 10)).await.unwrap();
    }
    // A writer died mid-line.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(format!("{{\"key\":\"{c}\",\"cassette\":{{\"ver").as_bytes())
        .unwrap();
    drop(file);

    let store = JsonlStore::open(&path).unwrap();
    assert_eq!(store.list("").await.unwrap(), vec![a.clone(), b.clone()]);
    assert_eq!(
        store.get(&a).await.unwrap(),
        Some(document(&a, 2, 10)),
        "latest line wins"
    );
    assert!(store.get(&c).await.unwrap().is_none());
    // The next write ends the damaged line first, so its own line stays whole.
    assert_eq!(
        store.put_if_absent(&c, document(&c, 1, 10)).await.unwrap(),
        Created::Won
    );
    drop(store);
    let store = JsonlStore::open(&path).unwrap();
    assert_eq!(store.list("").await.unwrap(), vec![a, b, c.clone()]);
    assert_eq!(store.get(&c).await.unwrap(), Some(document(&c, 1, 10)));
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.lines().count(),
        5,
        "the damaged line is kept, not rewritten: {text}"
    );
}

#[tokio::test]
async fn jsonl_handles_see_each_others_appends() {
    // Two handles on one log behave like two processes: separate descriptors and locks.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.jsonl");
    let (one, two) = (
        JsonlStore::open(&path).unwrap(),
        JsonlStore::open(&path).unwrap(),
    );
    let k = key("ee", 1);
    assert_eq!(
        one.put_if_absent(&k, document(&k, 1, 10)).await.unwrap(),
        Created::Won
    );
    assert_eq!(
        two.put_if_absent(&k, document(&k, 2, 10)).await.unwrap(),
        Created::AlreadyExists
    );
    assert_eq!(two.get(&k).await.unwrap(), Some(document(&k, 1, 10)));
    two.delete(&k).await.unwrap();
    assert!(one.get(&k).await.unwrap().is_none());
    assert!(one.list("").await.unwrap().is_empty());
}

async fn assert_unreachable_fails_fast(endpoint: &str) {
    let store = open(&format!(
        "s3://cassettes/x?endpoint={endpoint}&allow_http=true"
    ))
    .unwrap();
    let k = key("ab", 1);
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(60), store.get(&k)).await;
    let elapsed = started.elapsed();
    let err = result
        .expect("no answer within 60 s: the S3 client hangs")
        .unwrap_err();
    eprintln!("{endpoint}: failed after {elapsed:?}: {err}");
    assert!(elapsed < Duration::from_secs(15), "took {elapsed:?}");
    let message = err.to_string();
    assert!(message.contains(endpoint), "names the endpoint: {message}");
    assert!(message.contains(k.as_str()), "names the key: {message}");
    let err = store
        .put_if_absent(&k, document(&k, 1, 10))
        .await
        .unwrap_err();
    assert!(err.to_string().contains(endpoint), "{err}");
}

#[tokio::test]
async fn unreachable_bucket_fails_fast_naming_the_endpoint() {
    // Nothing listens on port 1: connections are refused at once.
    assert_unreachable_fails_fast("http://127.0.0.1:1").await;
}

#[tokio::test]
async fn unroutable_bucket_fails_fast_naming_the_endpoint() {
    // A reserved test address (RFC 5737): connections hang until the connect timeout.
    assert_unreachable_fails_fast("http://192.0.2.1:9000").await;
}

#[test]
fn sled_second_opener_is_told_who_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let ready = dir.path().join("ready");
    // The holder's command line carries a secret, as `cassette proxy --upstream
    // https://user:password@host` would: the message names the process, never its arguments.
    let secret = "https://ci:opaque-upstream-password@gateway.example/v1";
    let mut child = spawn_child_with_args(
        "hold",
        &[
            ("STORE_URL", format!("sled://{}", db.display())),
            ("READY_FILE", ready.display().to_string()),
        ],
        &[secret],
    );
    wait_for_file(&ready, Duration::from_secs(60), "sled holder start");
    let err = SledStore::open(&db).unwrap_err();
    let message = err.to_string();
    let _ = child.kill();
    let _ = child.wait();
    match &err {
        Error::Locked { location, holder } => {
            assert!(location.contains(&db.display().to_string()), "{message}");
            let holder = holder
                .as_deref()
                .unwrap_or_else(|| panic!("holder unknown: {message}"));
            assert!(holder.contains(&format!("pid {}", child.id())), "{message}");
            // The program is named (the kernel's short name of this test binary).
            let exe = std::env::current_exe().unwrap();
            let program = exe.file_name().unwrap().to_string_lossy();
            assert!(
                holder.contains(&program[..program.len().min(15)]),
                "{message}"
            );
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    assert!(!message.contains("opaque-upstream-password"), "{message}");
    assert!(!message.contains("child_process_entry"), "{message}");
    assert!(
        message.contains("in use by another process")
            && message.contains(&db.display().to_string()),
        "{message}"
    );
    // Once the holder is gone the database opens again.
    SledStore::open(&db).unwrap();
}

#[test]
fn sled_second_opener_in_the_same_process() {
    let dir = tempfile::tempdir().unwrap();
    let _first = SledStore::open(dir.path()).unwrap();
    match SledStore::open(dir.path()) {
        Err(Error::Locked {
            holder: Some(holder),
            ..
        }) => assert!(holder.contains("this process"), "{holder}"),
        other => panic!("expected Locked naming this process, got {other:?}"),
    }
}

/// Counts reads that reach the remote tier.
#[derive(Debug)]
struct CountingStore {
    inner: DynStore,
    gets: AtomicUsize,
}

impl std::fmt::Display for CountingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "counting {}", self.inner.location())
    }
}

#[async_trait]
impl Store for CountingStore {
    async fn get(&self, key: &Key) -> Result<Option<Bytes>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(key).await
    }
    async fn get_raw(&self, key: &Key) -> Result<Option<Bytes>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get_raw(key).await
    }
    async fn put_with(&self, key: &Key, document: Bytes, mode: PutMode) -> Result<Created> {
        self.inner.put_with(key, document, mode).await
    }
    async fn delete(&self, key: &Key) -> Result<()> {
        self.inner.delete(key).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<Key>> {
        self.inner.list(prefix).await
    }
    fn location(&self) -> String {
        self.to_string()
    }
    fn keeps_segments(&self) -> bool {
        self.inner.keeps_segments()
    }
    async fn put_segment(&self, name: &SegmentName, document: Bytes) -> Result<Created> {
        self.inner.put_segment(name, document).await
    }
    async fn get_segment(&self, name: &SegmentName) -> Result<Option<Bytes>> {
        self.inner.get_segment(name).await
    }
    async fn list_segments(&self) -> Result<Vec<SegmentName>> {
        self.inner.list_segments().await
    }
    async fn delete_segment(&self, name: &SegmentName) -> Result<()> {
        self.inner.delete_segment(name).await
    }
}

#[tokio::test]
async fn tiered_second_run_reads_nothing_from_the_remote() {
    let remote_url = crate::common::s3_url("tiered-second-run");
    let remote_dir = tempfile::tempdir().unwrap();
    // The real bucket when one is configured, else a folder standing in for it.
    let remote = match &remote_url {
        Some(url) => open(url).unwrap(),
        None => open(&remote_dir.path().display().to_string()).unwrap(),
    };
    let keys: Vec<_> = (0..20).map(|n| key("77", n)).collect();
    for k in &keys {
        remote.put(k, document(k, 1, 100)).await.unwrap();
    }
    let cache = tempfile::tempdir().unwrap();
    let cache_url = format!("sled://{}", cache.path().display());
    for run in 0..2 {
        let counting = Arc::new(CountingStore {
            inner: remote.clone(),
            gets: AtomicUsize::new(0),
        });
        let local = open(&cache_url).unwrap();
        let tiered = TieredStore::new(local, counting.clone());
        for k in &keys {
            assert_eq!(
                tiered.get(k).await.unwrap(),
                Some(document(k, 1, 100)),
                "run {run}"
            );
        }
        let expected = if run == 0 { keys.len() } else { 0 };
        assert_eq!(
            counting.gets.load(Ordering::SeqCst),
            expected,
            "remote reads in run {run}"
        );
    }
}

#[tokio::test]
async fn tiered_create_only_caches_the_remote_winner() {
    let remote: DynStore = Arc::new(cassette_store::memory::MemoryStore::new());
    let cache = tempfile::tempdir().unwrap();
    let local = open(&cache.path().display().to_string()).unwrap();
    let tiered = TieredStore::new(local.clone(), remote.clone());
    let k = key("88", 1);
    // Another runner recorded it first, straight into the bucket.
    remote.put(&k, document(&k, 1, 10)).await.unwrap();
    assert_eq!(
        tiered.put_if_absent(&k, document(&k, 2, 10)).await.unwrap(),
        Created::AlreadyExists
    );
    assert_eq!(
        local.get(&k).await.unwrap(),
        Some(document(&k, 1, 10)),
        "local holds the winner"
    );
    // A deliberate re-record overwrites both tiers.
    tiered.put(&k, document(&k, 3, 10)).await.unwrap();
    assert_eq!(remote.get(&k).await.unwrap(), Some(document(&k, 3, 10)));
    assert_eq!(local.get(&k).await.unwrap(), Some(document(&k, 3, 10)));
}
