//! The replay hit cache never answers for a tape that changed: edited in place (same size,
//! same modification time), replaced, deleted, or overwritten with another key's tape (refused,
//! as every replay refuses a tape stored under another key); each way of asking (a stream or
//! not) gets its own answer; memory stays within `replay_memory`.

mod support;

use cassette_keying::Key;
use cassette_recorder::{Error, Mode, Outcome, Recorder, RecorderConfig, Request, Route, Source};
use cassette_store::DynStore;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use support::{FakeUpstream, Reply};

const CHAT: &str = "/v1/chat/completions";

fn config(mode: Mode, upstream: &str) -> RecorderConfig {
    RecorderConfig {
        mode,
        routes: vec![Route::new("default", format!("{upstream}/v1"))],
        ..RecorderConfig::default()
    }
}

fn chat(content: &str, stream: bool) -> Request {
    Request::post_json(
        CHAT,
        &json!({
            "model": "gpt-4o-mini",
            "stream": stream,
            "messages": [{"role": "user", "content": content}]
        }),
    )
}

fn completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
    })
}

fn file_store(dir: &Path) -> DynStore {
    cassette_store::open(&format!("file://{}", dir.display())).unwrap()
}

/// Where the file store keeps the cassette of `key`.
fn tape(dir: &Path, key: &Key) -> PathBuf {
    let key = key.as_str();
    dir.join(&key[..2]).join(format!("{key}.json"))
}

async fn text(outcome: Outcome) -> String {
    let body: Value =
        serde_json::from_slice(&outcome.response.into_bytes().await.unwrap()).unwrap();
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Records one answer per question into a file store; returns the store's folder and each key.
async fn recorded(answers: &[(&str, &str)]) -> (tempfile::TempDir, FakeUpstream, Vec<Key>) {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeUpstream::start().await;
    let recorder = Recorder::new(config(Mode::Record, &fake.url), file_store(dir.path())).unwrap();
    let mut keys = Vec::new();
    for (question, answer) in answers {
        fake.reply(CHAT, Reply::json(200, completion(answer)));
        let outcome = recorder.handle(chat(question, false)).await.unwrap();
        assert_eq!(outcome.source, Source::Recorded);
        keys.push(outcome.key.clone());
        text(outcome).await;
    }
    (dir, fake, keys)
}

fn replayer(dir: &Path, fake: &FakeUpstream, memory: usize) -> Recorder {
    let config = RecorderConfig {
        replay_memory: memory,
        ..config(Mode::Replay, &fake.url)
    };
    Recorder::new(config, file_store(dir)).unwrap()
}

/// Rewrites a tape in place, keeping its size and modification time, so only its bytes say
/// that it changed.
fn edit_in_place(path: &Path, from: &str, to: &str) {
    assert_eq!(from.len(), to.len());
    let before = std::fs::metadata(path).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{text}");
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    std::io::Write::write_all(&mut &file, text.replace(from, to).as_bytes()).unwrap();
    file.set_modified(before.modified().unwrap()).unwrap();
    drop(file);
    let after = std::fs::metadata(path).unwrap();
    assert_eq!(after.len(), before.len());
    assert_eq!(after.modified().unwrap(), before.modified().unwrap());
}

#[tokio::test]
async fn a_changed_tape_is_never_answered_from_memory() {
    let (dir, fake, keys) = recorded(&[
        ("Where is my refund?", "Refunds take 5 days."),
        ("Where is my parcel?", "It left on Monday."),
    ])
    .await;
    let recorder = replayer(dir.path(), &fake, 1 << 20);
    let ask = || recorder.handle(chat("Where is my refund?", false));
    let path = tape(dir.path(), &keys[0]);

    assert_eq!(text(ask().await.unwrap()).await, "Refunds take 5 days.");
    assert_eq!(text(ask().await.unwrap()).await, "Refunds take 5 days.");
    let stats = recorder.stats().hit_cache;
    assert_eq!((stats.served, stats.entries), (1, 1), "{stats:?}");

    // Edited in place: same size, same modification time, other bytes.
    edit_in_place(&path, "5 days", "7 days");
    assert_eq!(text(ask().await.unwrap()).await, "Refunds take 7 days.");
    assert_eq!(recorder.stats().hit_cache.refreshed, 1);
    assert_eq!(text(ask().await.unwrap()).await, "Refunds take 7 days.");

    // Replaced (a new file renamed over it, as the store and editors write).
    let replaced = std::fs::read_to_string(&path)
        .unwrap()
        .replace("7 days", "9 days, sorry");
    let temp = dir.path().join("replacement.tmp");
    std::fs::write(&temp, replaced).unwrap();
    std::fs::rename(&temp, &path).unwrap();
    assert_eq!(
        text(ask().await.unwrap()).await,
        "Refunds take 9 days, sorry."
    );

    // Another key's tape copied over this one: refused naming both keys, never this key's
    // cached answer nor the other key's.
    std::fs::copy(tape(dir.path(), &keys[1]), &path).unwrap();
    let err = ask().await.unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains(keys[0].as_str()) && message.contains(keys[1].as_str()),
        "{message}"
    );

    // Deleted: a miss, whatever was cached.
    std::fs::remove_file(&path).unwrap();
    let err = ask().await.unwrap_err();
    assert!(matches!(err, Error::Miss(_)), "{err}");
    assert_eq!(fake.requests(), 2, "replay never calls the upstream");
}

/// The hit path reads tapes without the file store's JSON check (a fingerprint match means the
/// document was checked when its answer was cached): a tape damaged after its answer was
/// cached is still refused, naming the damaged file, and one that is JSON but no cassette is
/// refused naming the key.
#[tokio::test]
async fn a_tape_damaged_after_it_was_cached_is_refused_naming_the_file() {
    let (dir, fake, keys) = recorded(&[("Where is my refund?", "Refunds take 5 days.")]).await;
    let recorder = replayer(dir.path(), &fake, 1 << 20);
    let ask = || recorder.handle(chat("Where is my refund?", false));
    assert_eq!(text(ask().await.unwrap()).await, "Refunds take 5 days.");
    assert_eq!(text(ask().await.unwrap()).await, "Refunds take 5 days.");
    assert_eq!(recorder.stats().hit_cache.served, 1);

    let path = tape(dir.path(), &keys[0]);
    let whole = std::fs::read(&path).unwrap();
    std::fs::write(&path, &whole[..whole.len() - 20]).unwrap();
    let err = ask().await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("corrupt cassette"), "{message}");
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains(keys[0].as_str()), "{message}");

    std::fs::write(&path, b"{\"version\": 1}\n").unwrap();
    let err = ask().await.unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains(keys[0].as_str()), "{err}");

    // Restored, it is answered again (checked afresh, then cached).
    std::fs::write(&path, &whole).unwrap();
    assert_eq!(text(ask().await.unwrap()).await, "Refunds take 5 days.");
    assert_eq!(recorder.stats().hit_cache.served, 1);
    assert_eq!(fake.requests(), 1, "replay never calls the upstream");
}

/// A tiered store's hit is read unchecked from its cache too (`get_raw` reaches the cache's
/// file store), yet a damaged cache file costs only time: the checked read that follows falls
/// back to the remote, whose sound copy answers and repairs the cache.
#[tokio::test]
async fn a_damaged_cache_file_of_a_tiered_store_is_answered_from_the_remote() {
    let (remote_dir, fake, keys) =
        recorded(&[("Where is my refund?", "Refunds take 5 days.")]).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let tiered: DynStore = std::sync::Arc::new(cassette_store::tiered::TieredStore::new(
        file_store(cache_dir.path()),
        file_store(remote_dir.path()),
    ));
    let recorder = Recorder::new(config(Mode::Replay, &fake.url), tiered).unwrap();
    let ask = || recorder.handle(chat("Where is my refund?", false));
    assert_eq!(text(ask().await.unwrap()).await, "Refunds take 5 days.");
    let cached = tape(cache_dir.path(), &keys[0]);
    let whole = std::fs::read(&cached).unwrap();
    std::fs::write(&cached, &whole[..whole.len() - 20]).unwrap();

    assert_eq!(text(ask().await.unwrap()).await, "Refunds take 5 days.");
    assert_eq!(
        std::fs::read(&cached).unwrap(),
        whole,
        "the cache is repaired"
    );
    assert_eq!(text(ask().await.unwrap()).await, "Refunds take 5 days.");
    assert_eq!(fake.requests(), 1, "replay never calls the upstream");
}

#[tokio::test]
async fn each_way_of_asking_gets_its_own_answer() {
    let (dir, fake, _) = recorded(&[("Where is my refund?", "Refunds take 5 days.")]).await;
    let recorder = replayer(dir.path(), &fake, 1 << 20);
    for _ in 0..2 {
        let plain = recorder
            .handle(chat("Where is my refund?", false))
            .await
            .unwrap();
        assert_eq!(text(plain).await, "Refunds take 5 days.");
        let streamed = recorder
            .handle(chat("Where is my refund?", true))
            .await
            .unwrap();
        let content_type = streamed
            .response
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            .map(|(_, v)| v.clone());
        assert_eq!(content_type.as_deref(), Some("text/event-stream"));
        let sse =
            String::from_utf8(streamed.response.into_bytes().await.unwrap().to_vec()).unwrap();
        assert!(sse.starts_with("data: ") && sse.contains("[DONE]"), "{sse}");
    }
    assert_eq!(recorder.stats().hits, 4);
    assert_eq!(
        recorder.stats().hit_cache.served,
        1,
        "the plain answer, once cached"
    );
}

#[tokio::test]
async fn memory_stays_within_the_setting_and_zero_keeps_nothing() {
    let questions: Vec<(String, String)> = (0..40)
        .map(|n| (format!("Question {n}?"), format!("Answer {n}.")))
        .collect();
    let pairs: Vec<(&str, &str)> = questions
        .iter()
        .map(|(q, a)| (q.as_str(), a.as_str()))
        .collect();
    let (dir, fake, _) = recorded(&pairs).await;

    let budget = 16 * 1024;
    let recorder = replayer(dir.path(), &fake, budget);
    for _ in 0..2 {
        for (question, answer) in &pairs {
            let outcome = recorder.handle(chat(question, false)).await.unwrap();
            assert_eq!(text(outcome).await, *answer);
            let stats = recorder.stats().hit_cache;
            assert!(stats.bytes <= budget as u64, "{stats:?}");
        }
    }
    let stats = recorder.stats().hit_cache;
    assert!(stats.evicted > 0 && stats.entries > 0, "{stats:?}");
    assert_eq!(stats.budget_bytes, budget as u64);

    let off = replayer(dir.path(), &fake, 0);
    for _ in 0..2 {
        let outcome = off.handle(chat("Question 3?", false)).await.unwrap();
        assert_eq!(text(outcome).await, "Answer 3.");
    }
    assert_eq!(off.stats().hit_cache.served, 0);
    assert_eq!(off.stats().hit_cache.entries, 0);
}
