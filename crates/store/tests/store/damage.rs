//! Damage done around a store that is open: a JSON Lines log rewritten, replaced or deleted
//! under a running process, a damaged line in the middle of a log, a user's own dot-files in a
//! shard folder, a damaged sled cache in front of a good store (issue 10, items 3 and 18).

use bytes::Bytes;
use cassette_store::conformance::{document, key};
use cassette_store::fs::FileStore;
use cassette_store::jsonl::JsonlStore;
use cassette_store::{open, open_tiered, Error, Store, StoreExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// A log holding `docs` (key, version) pairs, written by its own handle as another process
/// would.
async fn write_log(path: &Path, docs: &[(u64, u64)]) {
    let writer = JsonlStore::open(path).unwrap();
    for &(n, version) in docs {
        let k = key("aa", n);
        writer.put(&k, document(&k, version, 40)).await.unwrap();
    }
}

#[tokio::test]
async fn jsonl_replaced_by_rename_is_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.jsonl");
    write_log(&path, &[(1, 1), (2, 1)]).await;
    let store = JsonlStore::open(&path).unwrap();
    let (one, two, three) = (key("aa", 1), key("aa", 2), key("aa", 3));
    assert_eq!(store.get(&one).await.unwrap(), Some(document(&one, 1, 40)));

    // `git checkout`, an editor or `mv new.jsonl log.jsonl`: a new file under the same name.
    let replacement = dir.path().join("new.jsonl");
    write_log(&replacement, &[(1, 2), (3, 1)]).await;
    std::fs::rename(&replacement, &path).unwrap();

    assert_eq!(store.get(&one).await.unwrap(), Some(document(&one, 2, 40)));
    assert_eq!(store.get(&two).await.unwrap(), None);
    assert_eq!(store.list("").await.unwrap(), vec![one.clone(), three]);
    // Writes go to the file the name holds now.
    let four = key("aa", 4);
    store.put(&four, document(&four, 1, 40)).await.unwrap();
    let fresh = JsonlStore::open(&path).unwrap();
    assert_eq!(
        fresh.get(&four).await.unwrap(),
        Some(document(&four, 1, 40))
    );
}

#[tokio::test]
async fn jsonl_rewritten_in_place_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.jsonl");
    write_log(&path, &[(1, 1), (2, 1)]).await;
    let store = JsonlStore::open(&path).unwrap();
    let (one, two) = (key("aa", 1), key("aa", 2));
    assert_eq!(store.get(&two).await.unwrap(), Some(document(&two, 1, 40)));

    // Same size: versions 1 -> 2 keep every length, so only the bytes (and mtime) change.
    let other = dir.path().join("other.jsonl");
    write_log(&other, &[(1, 2), (2, 2)]).await;
    let rewritten = std::fs::read(&other).unwrap();
    assert_eq!(
        rewritten.len() as u64,
        std::fs::metadata(&path).unwrap().len()
    );
    // Let the clock move on so the rewrite has its own modification time, as it would.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&path, &rewritten).unwrap();
    assert_eq!(store.get(&one).await.unwrap(), Some(document(&one, 2, 40)));
    assert_eq!(store.get(&two).await.unwrap(), Some(document(&two, 2, 40)));

    // Larger, and different before the old end: not an append.
    let larger = dir.path().join("larger.jsonl");
    write_log(&larger, &[(2, 3), (5, 1), (6, 1)]).await;
    std::fs::write(&path, std::fs::read(&larger).unwrap()).unwrap();
    assert_eq!(store.get(&one).await.unwrap(), None);
    assert_eq!(store.get(&two).await.unwrap(), Some(document(&two, 3, 40)));
    assert_eq!(store.list("").await.unwrap().len(), 3);
}

#[tokio::test]
async fn jsonl_deleted_while_open_fails_loudly_instead_of_swallowing_recordings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.jsonl");
    let store = JsonlStore::open(&path).unwrap();
    let (one, two) = (key("aa", 1), key("aa", 2));
    store.put(&one, document(&one, 1, 40)).await.unwrap();
    std::fs::remove_file(&path).unwrap();

    let err = store.put(&two, document(&two, 1, 40)).await.unwrap_err();
    assert!(matches!(err, Error::Vanished { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains(&path.display().to_string()) && message.contains("deleted"),
        "{message}"
    );
    assert!(matches!(
        store.get(&one).await.unwrap_err(),
        Error::Vanished { .. }
    ));
    assert!(
        !path.exists(),
        "nothing recreated it behind the user's back"
    );
}

#[tokio::test]
async fn jsonl_damaged_line_in_the_middle_is_reported_and_the_rest_served() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.jsonl");
    write_log(&path, &[(1, 1), (2, 1), (3, 1)]).await;
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // A bit flipped in the second line's cassette: the line no longer parses.
    lines[1] = lines[1].replacen("{", "{{", 2);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();

    let store = JsonlStore::open(&path).unwrap();
    let damaged = store.damaged_lines().await.unwrap();
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    assert_eq!(damaged[0].line, 2);
    assert_eq!(damaged[0].offset, lines[0].len() as u64 + 1);
    assert!(!damaged[0].reason.is_empty());
    assert_eq!(
        store.list("").await.unwrap(),
        vec![key("aa", 1), key("aa", 3)]
    );

    // A truncated last line is damage too (a writer died); a good log has none.
    write_log(&dir.path().join("good.jsonl"), &[(1, 1)]).await;
    let good = JsonlStore::open(dir.path().join("good.jsonl")).unwrap();
    assert!(good.damaged_lines().await.unwrap().is_empty());
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("good.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut file, b"{\"key\":\"aa").unwrap();
    let damaged = good.damaged_lines().await.unwrap();
    assert_eq!(damaged.len(), 1);
    assert_eq!(damaged[0].line, 2);
    assert!(damaged[0].reason.contains("truncated"), "{damaged:?}");
}

#[tokio::test]
async fn only_the_stores_own_temp_files_are_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    let k = key("cd", 1);
    store.put(&k, document(&k, 1, 10)).await.unwrap();
    let shard = dir.path().join("cd");
    let ours = shard.join(format!(".{k}.json.999999.0.tmp"));
    let theirs = [shard.join(".notes.tmp"), shard.join(".swap.json.tmp")];
    let old = SystemTime::now() - Duration::from_secs(3600);
    for path in theirs.iter().chain([&ours]) {
        std::fs::write(path, b"keep me").unwrap();
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    assert_eq!(store.list("").await.unwrap(), vec![k]);
    assert!(!ours.exists(), "an old temp file of ours is cleaned");
    for path in &theirs {
        assert!(path.exists(), "{} was deleted", path.display());
    }
}

#[tokio::test]
async fn a_damaged_sled_cache_is_bypassed_and_the_store_still_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store_url = dir.path().join("cassettes").display().to_string();
    let remote = open(&store_url).unwrap();
    let k = key("ab", 1);
    remote.put(&k, document(&k, 1, 10)).await.unwrap();
    // A cache folder whose database files are garbage (a disk error, a half-copied cache).
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    for name in ["db", "conf"] {
        std::fs::write(cache.join(name), vec![0xA5u8; 4096]).unwrap();
    }
    let tiered = open_tiered(&store_url, Some(&format!("sled://{}", cache.display()))).unwrap();
    assert_eq!(tiered.get(&k).await.unwrap(), Some(document(&k, 1, 10)));
    let other = key("ab", 2);
    tiered
        .put(&other, Bytes::from_static(b"{\"a\": 1}\n"))
        .await
        .unwrap();
    assert!(remote.get(&other).await.unwrap().is_some());
}
