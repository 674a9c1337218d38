//! The shared conformance suite, run against every backend and every wrapper.

use crate::common::s3_url;
use cassette_store::conformance::{read_only, run_all};
use cassette_store::fs::FileStore;
use cassette_store::jsonl::JsonlStore;
use cassette_store::memory::MemoryStore;
use cassette_store::readonly::ReadOnlyStore;
use cassette_store::sled::SledStore;
use cassette_store::tiered::TieredStore;
use cassette_store::{open, DynStore, Store, StoreExt};
use std::sync::Arc;

#[tokio::test]
async fn memory() {
    run_all(&MemoryStore::new()).await;
}

#[tokio::test]
async fn file() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path().join("cassettes")).unwrap();
    run_all(&store).await;
    // The layout the docs promise: sharded, pretty-printed, trailing newline.
    let key = cassette_store::conformance::key("10", 1);
    let text = std::fs::read_to_string(store.path_for(&key)).unwrap();
    assert!(store.path_for(&key).ends_with(format!("10/{key}.json")));
    assert!(
        text.starts_with("{\n  \"") && text.ends_with("}\n"),
        "{text}"
    );
    // Nothing else in the folder is a cassette, and a listing can say so.
    assert!(store.unrecognised().unwrap().is_empty());
    let root = store.root();
    std::fs::write(root.join("0123456789abcdef.json"), "{}").unwrap();
    std::fs::write(root.join("openai.yaml"), "interactions: []").unwrap();
    std::fs::write(root.join("10").join("notes.txt"), "x").unwrap();
    std::fs::write(root.join("90").join(format!("{key}.json")), "{}").unwrap();
    std::fs::write(root.join(".gitattributes"), "").unwrap();
    std::fs::create_dir_all(root.join("_index")).unwrap();
    std::fs::create_dir_all(root.join("abc")).unwrap();
    let found: Vec<String> = store
        .unrecognised()
        .unwrap()
        .iter()
        .map(|p| p.strip_prefix(root).unwrap().display().to_string())
        .collect();
    assert_eq!(
        found,
        [
            "0123456789abcdef.json".to_owned(),
            "10/notes.txt".to_owned(),
            format!("90/{key}.json"),
            "abc".to_owned(),
            "openai.yaml".to_owned(),
        ]
    );
}

#[tokio::test]
async fn file_by_url_and_bare_path() {
    let dir = tempfile::tempdir().unwrap();
    run_all(&*open(&format!("file://{}", dir.path().join("a").display())).unwrap()).await;
    run_all(&*open(&dir.path().join("b").display().to_string()).unwrap()).await;
}

#[tokio::test]
async fn jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rec/cassettes.jsonl");
    run_all(&*open(&format!("jsonl://{}", path.display())).unwrap()).await;
    // Reopening rebuilds the same view from the log.
    let reopened = JsonlStore::open(&path).unwrap();
    assert_eq!(reopened.list("90").await.unwrap().len(), 1000);
    let key = cassette_store::conformance::key("40", 1);
    let expected = cassette_store::conformance::document(&key, 3, 5);
    assert_eq!(reopened.get(&key).await.unwrap(), Some(expected));
    assert!(reopened
        .get(&cassette_store::conformance::key("60", 1))
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn sled() {
    let dir = tempfile::tempdir().unwrap();
    run_all(&*open(&format!("sled://{}", dir.path().join("db").display())).unwrap()).await;
    // Everything was flushed: a fresh handle sees it.
    let reopened = SledStore::open(dir.path().join("db")).unwrap();
    assert_eq!(reopened.list("90").await.unwrap().len(), 1000);
}

#[tokio::test]
async fn s3() {
    let Some(url) = s3_url("conformance") else {
        return;
    };
    run_all(&*open(&url).unwrap()).await;
}

#[tokio::test]
async fn s3_options_in_the_url() {
    // The same server reached only through URL options (the AWS_* credentials still apply).
    let Some(url) = s3_url("url-options") else {
        return;
    };
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let url = format!("{url}?endpoint={endpoint}&allow_http=true&path_style=true&region=us-east-1");
    let store = open(&url).unwrap();
    cassette_store::conformance::round_trip(&*store).await;
    cassette_store::conformance::create_only_twice(&*store).await;
    assert!(store.location().contains(&endpoint), "{}", store.location());
}

#[tokio::test]
async fn tiered_file_over_memory() {
    let dir = tempfile::tempdir().unwrap();
    let local: DynStore = Arc::new(FileStore::open(dir.path()).unwrap());
    run_all(&TieredStore::new(local, Arc::new(MemoryStore::new()))).await;
}

#[tokio::test]
async fn tiered_sled_over_s3() {
    let Some(url) = s3_url("tiered-sled") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cache = format!("sled://{}", dir.path().join("cache").display());
    run_all(&*cassette_store::open_tiered(&url, Some(&cache)).unwrap()).await;
}

#[tokio::test]
async fn tiered_file_over_s3() {
    let Some(url) = s3_url("tiered-file") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cache = format!("file://{}", dir.path().join("cache").display());
    run_all(&*cassette_store::open_tiered(&url, Some(&cache)).unwrap()).await;
}

/// A wrapper reads `get_raw` through to the store it wraps: a damaged file, which the file
/// store's checked `get` refuses, comes back as it is stored (the replay hit path checks what
/// it reads itself). The tiered store once answered `get_raw` with its own checked `get`, so
/// every replay hit through it checked the whole JSON, and this file read as a miss.
#[tokio::test]
async fn wrappers_read_raw_through() {
    let dir = tempfile::tempdir().unwrap();
    let file = FileStore::open(dir.path()).unwrap();
    let key = cassette_store::conformance::key("b0", 1);
    let damaged: &[u8] = b"{\"key\": \"cut off";
    let path = file.path_for(&key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, damaged).unwrap();
    let inner: DynStore = Arc::new(file);
    assert!(inner.get(&key).await.is_err());
    let wrappers: [(&str, DynStore); 2] = [
        (
            "tiered",
            Arc::new(TieredStore::new(
                inner.clone(),
                Arc::new(MemoryStore::new()),
            )),
        ),
        ("read-only", Arc::new(ReadOnlyStore::new(inner.clone()))),
    ];
    for (name, store) in wrappers {
        let raw = store.get_raw(&key).await.unwrap();
        assert_eq!(raw.as_deref(), Some(damaged), "{name}");
    }
}

#[tokio::test]
async fn read_only_over_memory() {
    let inner: DynStore = Arc::new(MemoryStore::new());
    read_only(&ReadOnlyStore::new(inner.clone()), &*inner).await;
}

#[tokio::test]
async fn read_only_over_file() {
    let dir = tempfile::tempdir().unwrap();
    let inner: DynStore = Arc::new(FileStore::open(dir.path()).unwrap());
    let store = ReadOnlyStore::new(inner.clone());
    read_only(&store, &*inner).await;
    let err = store
        .put(&cassette_store::conformance::key("a0", 1), "{}".into())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("read-only") && message.contains(&dir.path().display().to_string()),
        "{message}"
    );
}

#[tokio::test]
async fn read_only_over_s3() {
    let Some(url) = s3_url("read-only") else {
        return;
    };
    let inner = open(&url).unwrap();
    read_only(&ReadOnlyStore::new(inner.clone()), &*inner).await;
}
