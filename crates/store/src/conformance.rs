//! The conformance suite every backend and wrapper runs (feature `conformance`).
//!
//! Each check takes a `&dyn Store`, panics with a message naming the store and what differed,
//! and uses its own range of keys (a distinct first byte), so the checks can run one after the
//! other on one store; they expect the store to be empty at the start. [`run_all`] runs them all.
//!
//! Documents are pretty-printed JSON with a trailing newline, the form the recorder writes, so
//! every backend must hand them back byte for byte, including the ones that re-lay out JSON.

use crate::{Created, Error, Key, SegmentName, Store, StoreExt};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

/// A key made of `tag` (two hex characters) followed by `n` in hex, 64 characters in all.
///
/// # Panics
///
/// When `tag` is not two lowercase hex characters: a bug in the calling test.
pub fn key(tag: &str, n: u64) -> Key {
    let text = format!("{tag}{n:062x}");
    Key::parse(&text).unwrap_or_else(|| panic!("`{text}` is not a key: use a two-hex-digit tag"))
}

/// A cassette-like document for `key`, about `size` bytes of body, pretty-printed with a
/// trailing newline. `version` distinguishes recordings of the same key.
pub fn document(key: &Key, version: u64, size: usize) -> Bytes {
    let value = serde_json::json!({
        "key": key.as_str(),
        "version": version,
        "request": {"method": "POST", "url": "https://api.example.com/v1/chat/completions"},
        "response": {"status": 200, "body": "x".repeat(size), "big": 12345678901234567u64},
    });
    let mut bytes = serde_json::to_vec_pretty(&value).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

async fn get(store: &dyn Store, key: &Key) -> Option<Bytes> {
    store
        .get(key)
        .await
        .unwrap_or_else(|e| panic!("{}: get {key}: {e}", store.location()))
}

async fn put(store: &dyn Store, key: &Key, document: Bytes) {
    store
        .put(key, document)
        .await
        .unwrap_or_else(|e| panic!("{}: put {key}: {e}", store.location()))
}

async fn list(store: &dyn Store, prefix: &str) -> Vec<Key> {
    store
        .list(prefix)
        .await
        .unwrap_or_else(|e| panic!("{}: list {prefix:?}: {e}", store.location()))
}

fn same(store: &dyn Store, what: &str, got: Option<Bytes>, expected: &Bytes) {
    match got {
        Some(got) if got == *expected => {}
        Some(got) => panic!(
            "{}: {what}: got a different document ({} bytes, expected {}): {:?}",
            store.location(),
            got.len(),
            expected.len(),
            String::from_utf8_lossy(&got[..got.len().min(200)])
        ),
        None => panic!("{}: {what}: got a miss", store.location()),
    }
}

/// Put then get returns the same bytes, and `get_json` parses them.
pub async fn round_trip(store: &dyn Store) {
    let key = key("10", 1);
    let doc = document(&key, 1, 100);
    put(store, &key, doc.clone()).await;
    same(store, "round trip", get(store, &key).await, &doc);
    let raw = store
        .get_raw(&key)
        .await
        .unwrap_or_else(|e| panic!("{}: get_raw {key}: {e}", store.location()));
    same(store, "get_raw", raw, &doc);
    let json = store
        .get_json(&key)
        .await
        .unwrap_or_else(|e| panic!("{}: get_json: {e}", store.location()));
    assert_eq!(
        json.and_then(|v| v["version"].as_u64()),
        Some(1),
        "{}: get_json",
        store.location()
    );
    assert!(
        store.contains(&key).await.unwrap_or(false),
        "{}: contains",
        store.location()
    );
}

/// A key never stored is `Ok(None)`, not an error.
pub async fn miss_is_none(store: &dyn Store) {
    let key = key("20", 1);
    assert!(
        get(store, &key).await.is_none(),
        "{}: a never-stored key must be a miss",
        store.location()
    );
    assert!(
        store.get_raw(&key).await.ok().flatten().is_none(),
        "{}: get_raw of a never-stored key must be a miss",
        store.location()
    );
    assert!(
        !store.contains(&key).await.unwrap_or(true),
        "{}: contains on a miss",
        store.location()
    );
}

/// A second put replaces the first.
pub async fn overwrite(store: &dyn Store) {
    let key = key("30", 1);
    put(store, &key, document(&key, 1, 50)).await;
    let second = document(&key, 2, 10);
    put(store, &key, second.clone()).await;
    same(store, "overwrite", get(store, &key).await, &second);
    assert_eq!(
        list(store, "30").await,
        vec![key],
        "{}: overwrite must not duplicate",
        store.location()
    );
}

/// Create-only twice: the first wins, the second is told it lost, and the first content stays.
pub async fn create_only_twice(store: &dyn Store) {
    let key = key("40", 1);
    let first = document(&key, 1, 20);
    let created = store.put_if_absent(&key, first.clone()).await;
    assert!(
        matches!(created, Ok(Created::Won)),
        "{}: first create: {created:?}",
        store.location()
    );
    let created = store.put_if_absent(&key, document(&key, 2, 30)).await;
    assert!(
        matches!(created, Ok(Created::AlreadyExists)),
        "{}: second create must lose: {created:?}",
        store.location()
    );
    same(
        store,
        "create-only keeps the first",
        get(store, &key).await,
        &first,
    );
    // A create after a delete wins again.
    store
        .delete(&key)
        .await
        .unwrap_or_else(|e| panic!("{}: delete: {e}", store.location()));
    let third = document(&key, 3, 5);
    let created = store.put_if_absent(&key, third.clone()).await;
    assert!(
        matches!(created, Ok(Created::Won)),
        "{}: create after delete: {created:?}",
        store.location()
    );
    same(store, "create after delete", get(store, &key).await, &third);
}

/// `list` with and without a prefix, sorted, exactly the stored keys.
pub async fn list_prefix(store: &dyn Store) {
    let mut expected = Vec::new();
    for (tag, n) in [("50", 3), ("50", 1), ("51", 2), ("5a", 7), ("50", 0x10)] {
        let key = key(tag, n);
        put(store, &key, document(&key, 1, 10)).await;
        expected.push(key);
    }
    expected.sort();
    let in_5: Vec<_> = list(store, "5").await;
    assert_eq!(in_5, expected, "{}: list(\"5\")", store.location());
    let in_50: Vec<_> = expected
        .iter()
        .filter(|k| k.as_str().starts_with("50"))
        .cloned()
        .collect();
    assert_eq!(
        list(store, "50").await,
        in_50,
        "{}: list(\"50\")",
        store.location()
    );
    let long = key("50", 0x10);
    assert_eq!(
        list(store, long.as_str()).await,
        vec![long.clone()],
        "{}: list(full key)",
        store.location()
    );
    assert_eq!(
        list(store, &long.as_str()[..63]).await,
        vec![long.clone()],
        "{}: list(63 chars)",
        store.location()
    );
    assert!(
        list(store, "5b").await.is_empty(),
        "{}: list(\"5b\")",
        store.location()
    );
    let all = list(store, "").await;
    assert!(
        all.windows(2).all(|w| w[0] < w[1]),
        "{}: list(\"\") must be sorted",
        store.location()
    );
    assert!(
        expected.iter().all(|k| all.contains(k)),
        "{}: list(\"\") misses keys",
        store.location()
    );
    for bad in ["XY", "5/", "../5", &format!("{long}0")] {
        let invalid = store.list(bad).await;
        assert!(
            matches!(invalid, Err(Error::InvalidPrefix { .. })),
            "{}: list({bad:?}): {invalid:?}",
            store.location()
        );
    }
}

/// Delete removes the cassette and its listing; deleting a missing key is fine.
pub async fn delete(store: &dyn Store) {
    let (a, b) = (key("60", 1), key("60", 2));
    put(store, &a, document(&a, 1, 10)).await;
    put(store, &b, document(&b, 1, 10)).await;
    store
        .delete(&a)
        .await
        .unwrap_or_else(|e| panic!("{}: delete: {e}", store.location()));
    assert!(
        get(store, &a).await.is_none(),
        "{}: deleted key still readable",
        store.location()
    );
    assert_eq!(
        list(store, "60").await,
        vec![b.clone()],
        "{}: list after delete",
        store.location()
    );
    store
        .delete(&a)
        .await
        .unwrap_or_else(|e| panic!("{}: deleting twice: {e}", store.location()));
    let never = key("61", 1);
    store
        .delete(&never)
        .await
        .unwrap_or_else(|e| panic!("{}: deleting a missing key: {e}", store.location()));
    assert!(
        get(store, &b).await.is_some(),
        "{}: delete removed the wrong key",
        store.location()
    );
}

/// Keys starting with, and made of, every hex character work. (Anything else cannot be asked
/// for: a [`Key`] is 64 lowercase hex characters by construction.)
pub async fn every_hex_character(store: &dyn Store) {
    // Tag `7?` keeps this check's range apart; the 16 extra keys cover every first character
    // and are listed back by their own prefix.
    let digits = "0123456789abcdef";
    let mut texts = vec![format!("7{}", &digits.repeat(4)[..63])];
    for c in digits.chars() {
        texts.push(format!("7{c}{}", c.to_string().repeat(62)));
    }
    let keys: Vec<Key> = texts.iter().filter_map(|t| Key::parse(t)).collect();
    assert_eq!(keys.len(), texts.len(), "every test key parses");
    for (n, key) in keys.iter().enumerate() {
        put(store, key, document(key, n as u64, 10)).await;
    }
    for (n, key) in keys.iter().enumerate() {
        same(
            store,
            "hex key",
            get(store, key).await,
            &document(key, n as u64, 10),
        );
    }
    let mut expected = keys.clone();
    expected.sort();
    expected.dedup();
    assert_eq!(
        list(store, "7").await,
        expected,
        "{}: list of hex keys",
        store.location()
    );
}

/// A 5 MiB cassette round-trips intact.
pub async fn large_cassette(store: &dyn Store) {
    let key = key("80", 1);
    let doc = document(&key, 1, 5 * 1024 * 1024);
    put(store, &key, doc.clone()).await;
    same(store, "5 MiB cassette", get(store, &key).await, &doc);
}

/// 1,000 cassettes are all listed (no page limit drops any).
pub async fn thousand_listed(store: &dyn Store) {
    let keys: Vec<Key> = (0..1000).map(|n| key("90", n)).collect();
    futures::stream::iter(keys.iter().cloned())
        .map(|k| async move {
            let doc = document(&k, 1, 64);
            store.put(&k, doc).await.map_err(|e| (k, e))
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await
        .unwrap_or_else(|(k, e)| panic!("{}: put {k}: {e}", store.location()));
    let listed = list(store, "90").await;
    assert_eq!(
        listed.len(),
        1000,
        "{}: 1,000 cassettes stored, {} listed",
        store.location(),
        listed.len()
    );
    assert_eq!(
        listed,
        keys,
        "{}: 1,000 cassettes listed in order",
        store.location()
    );
    let all = list(store, "").await;
    assert!(
        all.len() >= 1000,
        "{}: list(\"\") returned {}",
        store.location(),
        all.len()
    );
}

fn segment(name: &str) -> SegmentName {
    SegmentName::parse(name).unwrap_or_else(|| panic!("`{name}` is not a segment name"))
}

/// Index segments: create-only, read back byte for byte (they need not be JSON), listed sorted,
/// deleted, and never among the cassettes. A store that does not keep them says so and holds
/// none.
pub async fn segments(store: &dyn Store) {
    let at = store.location();
    let (a, b) = (segment("w-2-b.jsonl"), segment("w-1-a.jsonl"));
    let first = Bytes::from_static(b"{\"cassette_index\":1}\nnot json\n");
    if !store.keeps_segments() {
        let refused = store.put_segment(&a, first).await;
        assert!(
            matches!(refused, Err(Error::Unsupported { .. })),
            "{at}: a store without segments must refuse one: {refused:?}"
        );
        assert!(store.list_segments().await.unwrap_or_default().is_empty());
        assert!(matches!(store.get_segment(&a).await, Ok(None)), "{at}");
        return;
    }
    let won = store.put_segment(&a, first.clone()).await;
    assert!(
        matches!(won, Ok(Created::Won)),
        "{at}: first segment write: {won:?}"
    );
    let lost = store.put_segment(&a, Bytes::from_static(b"other")).await;
    assert!(
        matches!(lost, Ok(Created::AlreadyExists)),
        "{at}: segments are written once: {lost:?}"
    );
    let read = store.get_segment(&a).await;
    assert!(
        matches!(&read, Ok(Some(bytes)) if *bytes == first),
        "{at}: segment read back: {read:?}"
    );
    let put_b = store.put_segment(&b, Bytes::from_static(b"b")).await;
    assert!(matches!(put_b, Ok(Created::Won)), "{at}: {put_b:?}");
    let listed = store.list_segments().await;
    assert!(
        matches!(&listed, Ok(names) if *names == [b.clone(), a.clone()]),
        "{at}: segments listed sorted: {listed:?}"
    );
    let keys = list(store, "").await;
    assert!(
        keys.iter().all(|k| k.as_str().len() == 64),
        "{at}: segments must not be listed as cassettes"
    );
    let deleted = store.delete_segment(&a).await;
    assert!(deleted.is_ok(), "{at}: delete segment: {deleted:?}");
    assert!(
        matches!(store.get_segment(&a).await, Ok(None)),
        "{at}: deleted segment read"
    );
    assert!(
        store.delete_segment(&a).await.is_ok(),
        "{at}: deleting twice"
    );
    let listed = store.list_segments().await;
    assert!(
        matches!(&listed, Ok(names) if *names == [b.clone()]),
        "{at}: after delete: {listed:?}"
    );
    let _ = store.delete_segment(&b).await;
}

/// Runs every check above on `store`, which should be empty.
pub async fn run_all(store: &dyn Store) {
    segments(store).await;
    round_trip(store).await;
    miss_is_none(store).await;
    overwrite(store).await;
    create_only_twice(store).await;
    list_prefix(store).await;
    delete(store).await;
    every_hex_character(store).await;
    large_cassette(store).await;
    thousand_listed(store).await;
}

/// Checks a read-only wrapper: reads see what `seeded` (the wrapped store) holds, and every
/// write is refused with [`Error::ReadOnly`] naming the key, leaving the wrapped store unchanged.
pub async fn read_only(store: &dyn Store, seeded: &dyn Store) {
    let key = key("a0", 1);
    let doc = document(&key, 1, 10);
    put(seeded, &key, doc.clone()).await;
    same(store, "read through", get(store, &key).await, &doc);
    assert_eq!(
        list(store, "a0").await,
        vec![key.clone()],
        "{}: list",
        store.location()
    );
    let other = key_b();
    let refused = [
        store.put(&key, document(&key, 2, 10)).await.err(),
        store
            .put_if_absent(&other, document(&other, 1, 10))
            .await
            .err(),
        store.delete(&key).await.err(),
    ];
    for err in refused {
        match err {
            Some(Error::ReadOnly { key: k, .. }) => assert!(k == key || k == other),
            other => panic!(
                "{}: expected a ReadOnly refusal, got {other:?}",
                store.location()
            ),
        }
    }
    same(
        seeded,
        "unchanged after refused writes",
        get(seeded, &key).await,
        &doc,
    );
    assert!(
        get(seeded, &other).await.is_none(),
        "{}: refused create wrote",
        store.location()
    );
    if seeded.keeps_segments() {
        let name = segment("w-1-a.jsonl");
        let _ = seeded.put_segment(&name, Bytes::from_static(b"seg")).await;
        assert!(
            store.keeps_segments(),
            "{}: keeps_segments",
            store.location()
        );
        let read = store.get_segment(&name).await;
        assert!(
            matches!(&read, Ok(Some(b)) if b.as_ref() == b"seg"),
            "{read:?}"
        );
        assert!(matches!(store.list_segments().await, Ok(n) if n == [name.clone()]));
        for refused in [
            store
                .put_segment(&segment("w-2-b.jsonl"), Bytes::from_static(b"x"))
                .await
                .err(),
            store.delete_segment(&name).await.err(),
        ] {
            assert!(
                matches!(refused, Some(Error::ReadOnlySegment { .. })),
                "{}: segment writes must be refused: {refused:?}",
                store.location()
            );
        }
        assert!(matches!(seeded.list_segments().await, Ok(n) if n == [name]));
    }
}

fn key_b() -> Key {
    key("a1", 1)
}
