//! Recordings that can be trusted (issue 10): what an attacker or an unlucky user would try
//! against the proxy, over real sockets, with a fake upstream standing in for the vendor.
//! Each test names the item of the issue it holds to.

mod support;

use cassette_recorder::proxy::{spawn, ProxyConfig, RunningProxy};
use cassette_recorder::{Mode, Recorder, RecorderConfig, Route};
use cassette_store::DynStore;
use serde_json::{json, Value};
use std::path::Path;
use support::{FakeUpstream, Reply};

const CHAT: &str = "/v1/chat/completions";

fn config(mode: Mode, upstream: &str) -> RecorderConfig {
    RecorderConfig {
        mode,
        routes: vec![
            Route {
                name: "default".into(),
                base_url: format!("{upstream}/v1"),
            },
            Route {
                name: "anthropic".into(),
                base_url: upstream.to_owned(),
            },
        ],
        ..RecorderConfig::default()
    }
}

async fn proxy_with(config: RecorderConfig, store: &DynStore) -> RunningProxy {
    let recorder = Recorder::new(config, store.clone()).unwrap();
    spawn(recorder, &ProxyConfig::ephemeral()).await.unwrap()
}

async fn proxy(mode: Mode, upstream: &str, store: &DynStore) -> RunningProxy {
    proxy_with(config(mode, upstream), store).await
}

fn file_store(dir: &Path) -> DynStore {
    cassette_store::open(&format!("file://{}", dir.display())).unwrap()
}

fn completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop", "logprobs": null}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    })
}

fn chat_body(question: &str) -> Value {
    json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": question}]})
}

async fn post(proxy: &RunningProxy, path: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}", proxy.url()))
        .json(body)
        .send()
        .await
        .unwrap()
}

fn key_of(response: &reqwest::Response) -> String {
    response.headers()["x-cassette-key"]
        .to_str()
        .unwrap()
        .to_owned()
}

fn cassette_path(dir: &Path, key: &str) -> std::path::PathBuf {
    dir.join(&key[..2]).join(format!("{key}.json"))
}

// Item 2: a tape copied over another key's file is never served as that key's answer.
#[tokio::test]
async fn a_tape_copied_over_another_keys_file_is_refused_naming_both_keys() {
    let fake = FakeUpstream::start().await;
    fake.reply(CHAT, Reply::json(200, completion("answer")));
    let dir = tempfile::tempdir().unwrap();
    let store = file_store(dir.path());
    let recording = proxy(Mode::Record, &fake.url, &store).await;
    let a = post(&recording, CHAT, &chat_body("question A")).await;
    let b = post(&recording, CHAT, &chat_body("question B")).await;
    let (key_a, key_b) = (key_of(&a), key_of(&b));
    recording.stop().await.unwrap();
    std::fs::copy(cassette_path(dir.path(), &key_a), cassette_path(dir.path(), &key_b)).unwrap();

    let replay = proxy(Mode::Replay, &fake.url, &store).await;
    let response = post(&replay, CHAT, &chat_body("question B")).await;
    assert_eq!(response.status(), 500);
    assert_eq!(response.headers()["x-should-retry"], "false");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "cassette_corrupt", "{body}");
    assert_eq!(body["error"]["key"], key_b.as_str());
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&key_a) && message.contains(&key_b),
        "{message}"
    );
    // The untouched tape still answers.
    let ok = post(&replay, CHAT, &chat_body("question A")).await;
    assert_eq!(ok.status(), 200);
    let stats = replay.stop().await.unwrap();
    assert_eq!(stats.recorder.hits, 1);
}

// Item 18: one error-code scheme: a damaged document is `cassette_corrupt` whichever layer
// noticed it, with the key.
#[tokio::test]
async fn a_truncated_cassette_is_cassette_corrupt_with_its_key() {
    let fake = FakeUpstream::start().await;
    fake.reply(CHAT, Reply::json(200, completion("answer")));
    let dir = tempfile::tempdir().unwrap();
    let store = file_store(dir.path());
    let recording = proxy(Mode::Record, &fake.url, &store).await;
    let key = key_of(&post(&recording, CHAT, &chat_body("q")).await);
    recording.stop().await.unwrap();
    let path = cassette_path(dir.path(), &key);
    let text = std::fs::read(&path).unwrap();
    std::fs::write(&path, &text[..text.len() / 2]).unwrap();

    let replay = proxy(Mode::Replay, &fake.url, &store).await;
    let response = post(&replay, CHAT, &chat_body("q")).await;
    assert_eq!(response.status(), 500);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "cassette_corrupt", "{body}");
    assert_eq!(body["error"]["key"], key.as_str());
    replay.stop().await.unwrap();
}
