//! Recordings that can be trusted (issue 10): what an attacker or an unlucky user would try
//! against the proxy, over real sockets, with a fake upstream standing in for the vendor.
//! Each test names the item of the issue it holds to.

mod support;

use bytes::Bytes;
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
            Route::new("default", format!("{upstream}/v1")),
            Route::new("anthropic", upstream),
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
    std::fs::copy(
        cassette_path(dir.path(), &key_a),
        cassette_path(dir.path(), &key_b),
    )
    .unwrap();

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

fn encoded_fixture(name: &str) -> Bytes {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/encoded")
        .join(name);
    Bytes::from(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

async fn stored_document(store: &DynStore, key: &str) -> Value {
    let key = cassette_store::Key::parse(key).unwrap();
    serde_json::from_slice(&store.get(&key).await.unwrap().expect("stored")).unwrap()
}

// Item 1: an upstream that compresses whatever was asked is decoded before storing, and
// replay serves the JSON it says it is.
#[tokio::test]
async fn compressed_answers_are_stored_decoded_and_replay_as_json() {
    let plain: Value = serde_json::from_slice(&encoded_fixture("chat.json")).unwrap();
    for (encoding, file) in [
        ("gzip", "chat.json.gz"),
        ("deflate", "chat.json.zz"),
        ("br", "chat.json.br"),
    ] {
        let fake = FakeUpstream::start().await;
        fake.reply(
            CHAT,
            Reply::Raw {
                status: 200,
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("content-encoding".into(), encoding.into()),
                ],
                body: encoded_fixture(file),
            },
        );
        let store: DynStore = cassette_store::open("memory://").unwrap();
        let recording = proxy(Mode::Record, &fake.url, &store).await;
        let live = post(&recording, CHAT, &chat_body(encoding)).await;
        assert_eq!(live.status(), 200, "{encoding}");
        assert!(
            live.headers().get("content-encoding").is_none(),
            "{encoding}"
        );
        let key = key_of(&live);
        assert_eq!(live.json::<Value>().await.unwrap(), plain, "{encoding}");
        recording.stop().await.unwrap();
        assert_eq!(fake.seen()[0].headers["accept-encoding"], "identity");
        let document = stored_document(&store, &key).await;
        assert_eq!(document["response"]["body"]["json"], plain, "{encoding}");
        assert!(
            !document["response"]["headers"]
                .to_string()
                .contains(encoding),
            "{encoding}: {document}"
        );

        let replay = proxy(Mode::Replay, &fake.url, &store).await;
        let replayed = reqwest::Client::builder()
            .no_gzip()
            .no_deflate()
            .no_brotli()
            .build()
            .unwrap()
            .post(format!("{}{CHAT}", replay.url()))
            .json(&chat_body(encoding))
            .send()
            .await
            .unwrap();
        assert_eq!(replayed.headers()["content-type"], "application/json");
        assert!(replayed.headers().get("content-encoding").is_none());
        assert_eq!(replayed.json::<Value>().await.unwrap(), plain, "{encoding}");
        replay.stop().await.unwrap();
    }
}

// Item 1: an encoding cassette cannot decode is passed on as sent, never stored half-understood.
#[tokio::test]
async fn an_encoding_that_cannot_be_decoded_is_passed_on_and_not_stored() {
    let fake = FakeUpstream::start().await;
    fake.reply(
        CHAT,
        Reply::Raw {
            status: 200,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("content-encoding".into(), "x-custom".into()),
            ],
            body: Bytes::from_static(b"\x28\xb5\x2f\xfd binary"),
        },
    );
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let proxy = spawn(recorder.clone(), &ProxyConfig::ephemeral())
        .await
        .unwrap();
    let live = post(&proxy, CHAT, &chat_body("q")).await;
    assert_eq!(live.status(), 200);
    assert_eq!(live.headers()["content-encoding"], "x-custom");
    assert_eq!(live.headers()["x-cassette"], "passed-through");
    let key = key_of(&live);
    let stats = proxy.stop().await.unwrap();
    assert_eq!(stats.recorder.failed_recordings, 1);
    assert!(store.list("").await.unwrap().is_empty());
    let failures = recorder.recording_failures();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].key.as_str(), key);
    assert!(failures[0].reason.contains("x-custom"), "{failures:?}");
}

fn stream_reply() -> Reply {
    Reply::Stream {
        content_type: "text/event-stream".into(),
        body: Bytes::from(support::chat_stream_events().concat()),
        pieces: vec![7, 31, 64],
    }
}

fn streaming(question: &str) -> Value {
    let mut body = chat_body(question);
    body["stream"] = json!(true);
    body
}

// Item 4: a stream that cannot be stored says `recording` when its headers go out, and is
// counted and named as a failed recording.
#[tokio::test]
async fn a_stream_the_store_refuses_is_a_failed_recording_naming_its_key() {
    let fake = FakeUpstream::start().await;
    fake.reply(CHAT, stream_reply());
    // A store that refuses every write, as a read-only or full disk would.
    let store: DynStore = std::sync::Arc::new(cassette_store::readonly::ReadOnlyStore::new(
        cassette_store::open("memory://").unwrap(),
    ));
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let proxy = spawn(recorder.clone(), &ProxyConfig::ephemeral())
        .await
        .unwrap();
    let live = post(&proxy, CHAT, &streaming("q")).await;
    assert_eq!(live.status(), 200);
    assert_eq!(live.headers()["x-cassette"], "recording");
    let key = key_of(&live);
    let text = live.text().await.unwrap();
    assert!(
        text.contains("[DONE]"),
        "the client still gets the live answer"
    );
    let stats: Value = reqwest::get(format!("{}/_cassette/stats", proxy.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["failed_recordings"], 1, "{stats}");
    assert_eq!(stats["recorded"], 0, "{stats}");
    // A whole answer the store refuses is an error for the client, and a failure too.
    fake.reply(CHAT, Reply::json(200, completion("whole")));
    let whole = post(&proxy, CHAT, &chat_body("whole")).await;
    assert_eq!(whole.status(), 500);
    proxy.stop().await.unwrap();
    let failures = recorder.recording_failures();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert_eq!(failures[0].key.as_str(), key);
    assert!(failures[0].reason.contains("read-only"), "{failures:?}");
}

// Items 4 and 6: a stream cut off by the upstream is never stored, and counts as failed.
#[tokio::test]
async fn a_cut_off_stream_is_not_stored_and_counts_as_a_failed_recording() {
    let fake = FakeUpstream::start().await;
    let events = support::chat_stream_events();
    fake.reply(
        CHAT,
        Reply::CutStream {
            content_type: "text/event-stream".into(),
            body: Bytes::from(events[..3].concat()),
            pieces: vec![40],
        },
    );
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let recorder = Recorder::new(config(Mode::Auto, &fake.url), store.clone()).unwrap();
    let proxy = spawn(recorder.clone(), &ProxyConfig::ephemeral())
        .await
        .unwrap();
    let live = post(&proxy, CHAT, &streaming("q")).await;
    assert_eq!(live.headers()["x-cassette"], "recording");
    assert!(live.bytes().await.is_err(), "the client sees the break");
    let stats = proxy.stop().await.unwrap();
    assert_eq!(stats.recorder.failed_recordings, 1);
    assert_eq!(stats.recorder.recorded, 0);
    assert!(store.list("").await.unwrap().is_empty());
    assert!(recorder.recording_failures()[0]
        .reason
        .contains("broke off"));
}

// Item 6: a generic stream (a Gemini-style `alt=sse` answer on the `http` profile) that ends
// in the middle of an event was cut off: not stored.
#[tokio::test]
async fn a_generic_stream_that_ends_mid_event_is_not_stored() {
    let fake = FakeUpstream::start().await;
    let path = "/v1beta/models/gemini-2.0-flash:streamGenerateContent";
    let events = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}]}}]}\n\n\
                  data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"lo, wor";
    fake.reply(
        &format!("/v1{path}"),
        Reply::Stream {
            content_type: "text/event-stream".into(),
            body: Bytes::from(events),
            pieces: vec![50],
        },
    );
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let proxy = proxy(Mode::Record, &fake.url, &store).await;
    let live = reqwest::Client::new()
        .post(format!("{}{path}?alt=sse", proxy.url()))
        .json(&json!({"contents": [{"parts": [{"text": "hi"}]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    live.bytes().await.unwrap();
    let stats = proxy.stop().await.unwrap();
    assert_eq!(stats.recorder.failed_recordings, 1);
    assert!(store.list("").await.unwrap().is_empty());
}

// Item 6: a 200 that declares JSON but does not parse is an upstream error: passed on, not
// recorded. Issue 25, item 17: not even when error answers are recorded, or it replays as a
// broken success forever; the lost recording is counted and named.
#[tokio::test]
async fn a_200_that_claims_json_but_does_not_parse_is_an_upstream_error() {
    for errors in [
        cassette_recorder::ErrorRecording::Record,
        cassette_recorder::ErrorRecording::PassThrough,
    ] {
        let fake = FakeUpstream::start().await;
        fake.reply(
            CHAT,
            Reply::Raw {
                status: 200,
                headers: vec![("content-type".into(), "application/json".into())],
                body: Bytes::from_static(b"{\"id\": \"chatcmpl-1\", \"choices\": [{\"mess"),
            },
        );
        let store: DynStore = cassette_store::open("memory://").unwrap();
        let config = RecorderConfig {
            errors,
            ..config(Mode::Record, &fake.url)
        };
        let recorder = Recorder::new(config.clone(), store.clone()).unwrap();
        let proxy = spawn(recorder.clone(), &ProxyConfig::ephemeral())
            .await
            .unwrap();
        let live = post(&proxy, CHAT, &chat_body("q")).await;
        assert_eq!(live.status(), 200);
        assert_eq!(live.headers()["x-cassette"], "passed-through", "{errors:?}");
        assert!(live.text().await.unwrap().ends_with("\"mess"));
        let failures = recorder.recording_failures();
        let stats = proxy.stop().await.unwrap();
        assert_eq!(stats.recorder.upstream_errors, 1);
        assert!(store.list("").await.unwrap().is_empty(), "{errors:?}");
        assert_eq!(stats.recorder.failed_recordings, 1, "{errors:?}");
        assert!(
            failures[0].reason.contains("does not parse"),
            "{}",
            failures[0]
        );
        // So replay misses instead of answering a broken success.
        let replay = proxy_with(
            RecorderConfig {
                mode: Mode::Replay,
                ..config
            },
            &store,
        )
        .await;
        let again = post(&replay, CHAT, &chat_body("q")).await;
        assert_eq!(again.status(), 409, "{errors:?}");
        replay.stop().await.unwrap();
    }
}

// Item 5: identical requests in flight at once share one upstream call, and every one of them
// gets the answer that is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn identical_requests_in_flight_share_one_upstream_call() {
    for mode in [Mode::Auto, Mode::Record] {
        let fake = FakeUpstream::start().await;
        fake.reply(CHAT, Reply::Numbered);
        let store: DynStore = cassette_store::open("memory://").unwrap();
        let proxy = proxy(mode, &fake.url, &store).await;
        let url = format!("{}{CHAT}", proxy.url());
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let tasks: Vec<_> = (0..500)
            .map(|i| {
                let (client, url) = (client.clone(), url.clone());
                tokio::spawn(async move {
                    let question = format!("question {}", i % 50);
                    let response = client
                        .post(url)
                        .json(&chat_body(&question))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), 200);
                    let key = key_of(&response);
                    let body: Value = response.json().await.unwrap();
                    (question, key, body)
                })
            })
            .collect();
        // The upstream answers nothing until all 500 requests reached the proxy, so they are
        // provably in flight at once.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while proxy.stats().requests < 500 {
            assert!(std::time::Instant::now() < deadline, "{:?}", proxy.stats());
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        fake.release(500);
        let mut answers: std::collections::HashMap<String, (String, Value)> = Default::default();
        for task in tasks {
            let (question, key, body) = task.await.unwrap();
            let content = body["choices"][0]["message"]["content"].clone();
            let first = answers
                .entry(question.clone())
                .or_insert((key.clone(), content.clone()));
            assert_eq!(first.1, content, "{mode}: {question} got two answers");
        }
        let stats = proxy.stop().await.unwrap();
        assert_eq!(fake.requests(), 50, "{mode}");
        assert_eq!(stats.recorder.upstream_requests, 50, "{mode}");
        assert_eq!(stats.recorder.recorded, 50, "{mode}");
        for (key, content) in answers.values() {
            let document = stored_document(&store, key).await;
            assert_eq!(
                &document["response"]["body"]["json"]["choices"][0]["message"]["content"], content,
                "{mode}: the stored answer is the one every client got"
            );
        }
    }
}

// Item 5: streams too: the followers wait for the stream to be stored and replay it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_streaming_requests_share_one_upstream_stream() {
    let fake = FakeUpstream::start().await;
    fake.reply(
        CHAT,
        Reply::Delayed(
            std::time::Duration::from_millis(200),
            Box::new(stream_reply()),
        ),
    );
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let proxy = proxy(Mode::Auto, &fake.url, &store).await;
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let url = format!("{}{CHAT}", proxy.url());
            tokio::spawn(async move {
                let response = reqwest::Client::new()
                    .post(url)
                    .json(&streaming("same"))
                    .send()
                    .await
                    .unwrap();
                let source = response.headers()["x-cassette"]
                    .to_str()
                    .unwrap()
                    .to_owned();
                (source, response.text().await.unwrap())
            })
        })
        .collect();
    let mut sources = Vec::new();
    for task in tasks {
        let (source, text) = task.await.unwrap();
        let content: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|v| {
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(content, "Hello", "{text}");
        sources.push(source);
    }
    assert_eq!(fake.requests(), 1);
    sources.sort();
    assert_eq!(sources.iter().filter(|s| *s == "recording").count(), 1);
    assert_eq!(sources.iter().filter(|s| *s == "replayed").count(), 19);
    proxy.stop().await.unwrap();
}

// Item 7: a recorded redirect never points a replaying client at the real upstream.
#[tokio::test]
async fn recorded_redirects_point_at_the_proxy_or_nowhere() {
    let fake = FakeUpstream::start().await;
    let redirect = |location: String| Reply::Raw {
        status: 307,
        headers: vec![
            ("location".into(), location),
            ("content-type".into(), "application/json".into()),
        ],
        body: Bytes::from_static(b"{}"),
    };
    fake.reply(
        "/v1/files",
        redirect(format!("{}/v1/files/f1?part=2", fake.url)),
    );
    fake.reply("/v1/away", redirect("https://elsewhere.example/x".into()));
    fake.reply("/v1/messages", redirect(format!("{}/v1/other", fake.url)));
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let config = RecorderConfig {
        errors: cassette_recorder::ErrorRecording::Record,
        ..config(Mode::Record, &fake.url)
    };
    let recording = proxy_with(config, &store).await;
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let send = |client: &reqwest::Client, url: String| {
        client.post(url).json(&json!({"purpose": "x"})).send()
    };
    let live = send(&no_redirects, format!("{}/v1/files", recording.url()))
        .await
        .unwrap();
    assert_eq!(live.headers()["location"], "/v1/files/f1?part=2");
    let files_key = key_of(&live);
    let away = send(&no_redirects, format!("{}/v1/away", recording.url()))
        .await
        .unwrap();
    assert_eq!(away.headers()["location"], "https://elsewhere.example/x");
    let away_key = key_of(&away);
    let named = send(
        &no_redirects,
        format!("{}/anthropic/v1/messages", recording.url()),
    )
    .await
    .unwrap();
    assert_eq!(named.headers()["location"], "/anthropic/v1/other");
    recording.stop().await.unwrap();
    assert_eq!(
        stored_document(&store, &files_key).await["response"]["headers"]["location"],
        "/v1/files/f1?part=2"
    );
    assert!(
        stored_document(&store, &away_key).await["response"]["headers"]
            .get("location")
            .is_none()
    );

    let connections = fake.connections();
    let replay = proxy(Mode::Replay, &fake.url, &store).await;
    let replayed = send(&no_redirects, format!("{}/v1/files", replay.url()))
        .await
        .unwrap();
    assert_eq!(replayed.status(), 307);
    assert_eq!(replayed.headers()["location"], "/v1/files/f1?part=2");
    // A client that follows it stays with the proxy (and misses there, loudly).
    let followed = send(
        &reqwest::Client::new(),
        format!("{}/v1/files", replay.url()),
    )
    .await
    .unwrap();
    assert_eq!(followed.status(), 409);
    assert!(followed.url().as_str().starts_with(&replay.url()));
    let away = send(&no_redirects, format!("{}/v1/away", replay.url()))
        .await
        .unwrap();
    assert!(away.headers().get("location").is_none());
    replay.stop().await.unwrap();
    assert_eq!(
        fake.connections(),
        connections,
        "replay never reached the upstream"
    );
}

// Item 7: tapes recorded before locations were rewritten are kept in the sandbox on replay.
#[tokio::test]
async fn old_tapes_with_absolute_locations_are_sandboxed_on_replay() {
    let fake = FakeUpstream::start().await;
    fake.reply("/v1/files", Reply::json(201, json!({"id": "f1"})));
    let dir = tempfile::tempdir().unwrap();
    let store = file_store(dir.path());
    let recording = proxy(Mode::Record, &fake.url, &store).await;
    let key = key_of(&post(&recording, "/v1/files", &json!({"a": 1})).await);
    recording.stop().await.unwrap();
    let path = cassette_path(dir.path(), &key);
    let mut document: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    document["response"]["headers"]["location"] = json!(format!("{}/v1/files/f1", fake.url));
    std::fs::write(&path, serde_json::to_vec_pretty(&document).unwrap()).unwrap();
    let replay = proxy(Mode::Replay, &fake.url, &store).await;
    let replayed = post(&replay, "/v1/files", &json!({"a": 1})).await;
    assert_eq!(replayed.headers()["location"], "/v1/files/f1");
    document["response"]["headers"]["location"] = json!("https://elsewhere.example/f1");
    std::fs::write(&path, serde_json::to_vec_pretty(&document).unwrap()).unwrap();
    let replayed = post(&replay, "/v1/files", &json!({"a": 1})).await;
    assert!(replayed.headers().get("location").is_none());
    replay.stop().await.unwrap();
}

// Item 8: a streaming request the upstream answered with plain JSON (a gateway ignoring
// `stream`) replays as JSON: the live client saw no events, neither does the replaying one.
#[tokio::test]
async fn a_streaming_request_answered_with_json_replays_as_json() {
    let fake = FakeUpstream::start().await;
    fake.reply(CHAT, Reply::json(200, completion("plain")));
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let recording = proxy(Mode::Record, &fake.url, &store).await;
    let live = post(&recording, CHAT, &streaming("q")).await;
    assert_eq!(live.headers()["content-type"], "application/json");
    let live_body: Value = live.json().await.unwrap();
    recording.stop().await.unwrap();

    let replay = proxy(Mode::Replay, &fake.url, &store).await;
    let replayed = post(&replay, CHAT, &streaming("q")).await;
    assert_eq!(replayed.headers()["content-type"], "application/json");
    assert_eq!(replayed.json::<Value>().await.unwrap(), live_body);
    // A non-streaming request with the same key gets the JSON too.
    let plain = post(&replay, CHAT, &chat_body("q")).await;
    assert_eq!(plain.json::<Value>().await.unwrap(), live_body);
    replay.stop().await.unwrap();
}

fn sse_data(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            e.lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

// Item 8: exact stream replay keeps a gateway's own framing (extra members, its own usage
// chunk); the default re-synthesizes the provider's reference framing.
#[tokio::test]
async fn exact_streams_replay_the_events_as_recorded() {
    let gateway_events = [
        r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","provider_specific_fields":{"gw":1},"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"gateway_cost":0.01}}"#,
        "[DONE]",
    ];
    let body: String = gateway_events
        .iter()
        .map(|e| format!(": keep-alive\ndata: {e}\n\n"))
        .collect();
    for replay_mode in [
        cassette_recorder::StreamReplay::Exact,
        cassette_recorder::StreamReplay::Synthesize,
    ] {
        let fake = FakeUpstream::start().await;
        fake.reply(
            CHAT,
            Reply::Stream {
                content_type: "text/event-stream".into(),
                body: Bytes::from(body.clone()),
                pieces: vec![13, 50],
            },
        );
        let store: DynStore = cassette_store::open("memory://").unwrap();
        let config = RecorderConfig {
            stream_replay: replay_mode,
            ..config(Mode::Record, &fake.url)
        };
        let recording = proxy_with(config, &store).await;
        let live = post(&recording, CHAT, &streaming("q")).await;
        let key = key_of(&live);
        assert_eq!(sse_data(&live.text().await.unwrap()), gateway_events);
        recording.stop().await.unwrap();
        let document = stored_document(&store, &key).await;
        let exact = replay_mode == cassette_recorder::StreamReplay::Exact;
        assert_eq!(document["response"]["events"].is_array(), exact);

        let replay = proxy(Mode::Replay, &fake.url, &store).await;
        let replayed = post(&replay, CHAT, &streaming("q")).await;
        assert_eq!(replayed.headers()["content-type"], "text/event-stream");
        let events = sse_data(&replayed.text().await.unwrap());
        if exact {
            assert_eq!(events, gateway_events);
        } else {
            // The provider's reference framing: a role chunk, text in pieces, a finish chunk.
            assert_ne!(events, gateway_events);
            assert!(events.len() > gateway_events.len(), "{events:?}");
            assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
        }
        // Either way the final response is stored, and a non-streaming request gets it.
        let plain = post(&replay, CHAT, &chat_body("q")).await;
        let plain: Value = plain.json().await.unwrap();
        assert_eq!(plain["choices"][0]["message"]["content"], "Hi");
        replay.stop().await.unwrap();
    }
}

// Item 18: in record mode each piece of a stream reaches the client as soon as it arrives.
#[tokio::test]
async fn stream_pieces_reach_the_client_as_they_arrive() {
    let fake = FakeUpstream::start().await;
    let events = support::chat_stream_events();
    fake.reply(
        CHAT,
        Reply::Gated {
            content_type: "text/event-stream".into(),
            pieces: events.iter().cloned().map(Bytes::from).collect(),
        },
    );
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let proxy = proxy(Mode::Record, &fake.url, &store).await;
    fake.release(1);
    let live = post(&proxy, CHAT, &streaming("q")).await;
    let mut body = live.bytes_stream();
    let mut received = String::new();
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            fake.release(1);
        }
        // The upstream has sent exactly the pieces up to this one: the client must hold them
        // all, without waiting for the next.
        while received.len() < events[..=i].concat().len() {
            let piece = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                futures::StreamExt::next(&mut body),
            )
            .await
            .unwrap_or_else(|_| panic!("piece {i} ({event:?}) did not reach the client"))
            .unwrap()
            .unwrap();
            received.push_str(std::str::from_utf8(&piece).unwrap());
        }
    }
    assert_eq!(received, events.concat());
    assert!(futures::StreamExt::next(&mut body).await.is_none());
    let stats = proxy.stop().await.unwrap();
    assert_eq!(stats.recorder.recorded, 1);
}

/// Sends `request` as raw bytes and returns the status line and the rest of the answer.
async fn raw(addr: std::net::SocketAddr, request: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut answer),
    )
    .await
    .expect("the proxy answers and closes")
    .unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (status, rest) = answer.split_once("\r\n").unwrap_or((&answer, ""));
    (status.to_owned(), rest.to_owned())
}

fn recording_with_key(upstream: &str) -> RecorderConfig {
    let mut config = config(Mode::Record, upstream);
    for route in &mut config.routes {
        route.api_key =
            cassette_recorder::config::ApiKey::new("sk-upstream-key-never-for-strangers");
    }
    config
}

// Item 14: a hostile web page's cross-site POST (text/plain, so no preflight) is refused: no
// upstream call, no key spent, nothing recorded.
#[tokio::test]
async fn a_cross_site_post_from_a_web_page_is_refused() {
    let fake = FakeUpstream::start().await;
    fake.reply(CHAT, Reply::json(200, completion("spent")));
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let proxy = proxy_with(recording_with_key(&fake.url), &store).await;
    let body = chat_body("free tokens").to_string();
    let attacks = [
        format!(
            "POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: https://evil.example\r\n\
             Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len(),
            port = proxy.addr().port()
        ),
        format!(
            "POST {CHAT} HTTP/1.1\r\nHost: localhost:{port}\r\nOrigin: null\r\n\
             Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len(),
            port = proxy.addr().port()
        ),
        // A simple cross-site GET (an image, a link) carries no Origin, but says where it is
        // from.
        "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nSec-Fetch-Site: cross-site\r\n\
         Sec-Fetch-Mode: no-cors\r\nConnection: close\r\n\r\n"
            .to_owned(),
    ];
    for attack in &attacks {
        let (status, rest) = raw(proxy.addr(), attack).await;
        assert!(status.contains(" 403 "), "{status}\n{rest}");
        assert!(rest.contains("cassette_forbidden"), "{rest}");
    }
    // A CORS preflight is never forwarded.
    let preflight = format!(
        "OPTIONS {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example\r\n\
         Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\n\
         Connection: close\r\n\r\n"
    );
    let (status, _) = raw(proxy.addr(), &preflight).await;
    assert!(status.contains(" 403 "), "{status}");
    let stats = proxy.stop().await.unwrap();
    assert_eq!(fake.requests(), 0, "no upstream call");
    assert_eq!(stats.recorder.upstream_requests, 0);
    assert!(store.list("").await.unwrap().is_empty());
}

// Item 14: a page reaching the proxy through DNS rebinding names its own host: refused. The
// proxy's own names and addresses are served.
#[tokio::test]
async fn dns_rebinding_hosts_are_refused_and_loopback_names_served() {
    let fake = FakeUpstream::start().await;
    fake.reply(CHAT, Reply::json(200, completion("ok")));
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let proxy = proxy_with(recording_with_key(&fake.url), &store).await;
    let port = proxy.addr().port();
    let body = chat_body("hi").to_string();
    let request = |host: &str| {
        format!(
            "POST {CHAT} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    for host in [
        format!("rebind.evil.example:{port}"),
        "evil.example".to_owned(),
        format!("192.168.1.1.nip.io:{port}"),
        format!("localhost.evil.example:{port}"),
    ] {
        let (status, rest) = raw(proxy.addr(), &request(&host)).await;
        assert!(status.contains(" 403 "), "{host}: {status}");
        assert!(rest.contains(&host), "names the host: {rest}");
    }
    assert_eq!(fake.requests(), 0);
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "LOCALHOST".to_owned(),
        format!("app.localhost:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.2".to_owned(),
    ] {
        let (status, _) = raw(proxy.addr(), &request(&host)).await;
        assert!(status.contains(" 200 "), "{host}: {status}");
    }
    proxy.stop().await.unwrap();
}

// Item 14: an origin allowed explicitly gets CORS answers from the proxy itself.
#[tokio::test]
async fn an_allowed_origin_is_served_with_cors_and_its_preflight_answered_locally() {
    let fake = FakeUpstream::start().await;
    fake.reply(CHAT, Reply::json(200, completion("ok")));
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let proxy_config = ProxyConfig {
        allowed_origins: vec!["http://localhost:5173".into()],
        ..ProxyConfig::ephemeral()
    };
    let proxy = spawn(recorder, &proxy_config).await.unwrap();
    let client = reqwest::Client::new();
    let preflight = client
        .request(reqwest::Method::OPTIONS, format!("{}{CHAT}", proxy.url()))
        .header("origin", "http://localhost:5173")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type, authorization",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 204);
    assert_eq!(
        preflight.headers()["access-control-allow-origin"],
        "http://localhost:5173"
    );
    assert_eq!(preflight.headers()["access-control-allow-methods"], "POST");
    assert_eq!(fake.requests(), 0, "the preflight was not forwarded");
    let post = client
        .post(format!("{}{CHAT}", proxy.url()))
        .header("origin", "http://localhost:5173")
        .json(&chat_body("q"))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 200);
    assert_eq!(
        post.headers()["access-control-allow-origin"],
        "http://localhost:5173"
    );
    let other = client
        .post(format!("{}{CHAT}", proxy.url()))
        .header("origin", "http://localhost:5174")
        .json(&chat_body("q"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 403);
    proxy.stop().await.unwrap();
    assert_eq!(fake.requests(), 1);
}

// Item 16: slowloris: connections that never finish their headers are closed after the header
// timeout, at most `max_connections` are served at once, and real clients still get through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_connections_are_closed_and_real_clients_still_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fake = FakeUpstream::start().await;
    fake.reply(CHAT, Reply::json(200, completion("ok")));
    let store: DynStore = cassette_store::open("memory://").unwrap();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let proxy_config = ProxyConfig {
        header_timeout: std::time::Duration::from_millis(500),
        body_timeout: std::time::Duration::from_millis(500),
        max_connections: 64,
        ..ProxyConfig::ephemeral()
    };
    let proxy = spawn(recorder, &proxy_config).await.unwrap();
    // 300 connections that send half a request and then nothing, more than can be served.
    let mut slow = Vec::new();
    for i in 0..300 {
        let mut stream = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
        let partial = if i % 2 == 0 {
            format!("POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        } else {
            // Headers complete, the body never comes.
            format!("POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{{")
        };
        stream.write_all(partial.as_bytes()).await.unwrap();
        slow.push(stream);
    }
    let started = std::time::Instant::now();
    let response = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        post(&proxy, CHAT, &chat_body("real client")),
    )
    .await
    .expect("a real client is served while slow connections are held");
    assert_eq!(response.status(), 200);
    // Every slow connection is closed by the proxy (a stalled body gets its 408 first).
    let mut answered_408 = 0;
    for mut stream in slow {
        let mut answer = Vec::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(20),
            stream.read_to_end(&mut answer),
        )
        .await
        .expect("the proxy closes a slow connection")
        .ok();
        answered_408 += usize::from(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408"));
    }
    assert!(answered_408 > 0);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    proxy.stop().await.unwrap();
}

// Issue 25, item 5: answers have a size limit, like request bodies.

/// An OpenAI chat stream of `n` content events, then its end.
fn long_chat_stream(n: usize) -> Bytes {
    let events = support::chat_stream_events();
    let (first, rest) = events.split_first().unwrap();
    let mut out = first.clone();
    for _ in 0..n {
        out.push_str(&rest[0]);
    }
    out.push_str(&rest[2..].concat());
    Bytes::from(out)
}

/// A stream over the answer limit: the client gets its whole events up to the limit and an
/// error event naming the limit in the provider's framing; nothing is stored, and the lost
/// recording is counted and named. In mode `off` nothing was to be stored: it passes whole.
#[tokio::test]
async fn a_stream_over_the_answer_limit_is_cut_with_an_error_event_and_not_stored() {
    let ndjson_line =
        r#"{"model":"llama3.2","message":{"role":"assistant","content":"Hel"},"done":false}"#;
    let ndjson = format!(
        "{}{}\n",
        format!("{ndjson_line}\n").repeat(400),
        r#"{"model":"llama3.2","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}"#
    );
    let cases = [
        (
            CHAT,
            "default",
            "text/event-stream",
            long_chat_stream(400),
            json!({"model": "gpt-4o-mini", "stream": true, "messages": [{"role": "user", "content": "q"}]}),
        ),
        (
            "/api/chat",
            "default",
            "application/x-ndjson",
            Bytes::from(ndjson),
            json!({"model": "llama3.2", "messages": [{"role": "user", "content": "q"}]}),
        ),
    ];
    for (path, _, content_type, stream, body) in cases {
        for (mode, pieces) in [
            (Mode::Record, vec![7, 300, 1024]),
            (Mode::Record, vec![4096]),
            (Mode::Off, vec![1000]),
        ] {
            let fake = FakeUpstream::start().await;
            let upstream_path = if path == CHAT {
                CHAT.to_owned()
            } else {
                path.to_owned()
            };
            fake.reply(
                &upstream_path,
                Reply::Stream {
                    content_type: content_type.into(),
                    body: stream.clone(),
                    pieces,
                },
            );
            let store: DynStore = cassette_store::open("memory://").unwrap();
            let mut config = config(mode, &fake.url);
            config.routes[0].base_url = fake.url.clone();
            config.max_answer = 8192;
            let recorder = Recorder::new(config, store.clone()).unwrap();
            let proxy = spawn(recorder.clone(), &ProxyConfig::ephemeral())
                .await
                .unwrap();
            let live = post(&proxy, path, &body).await;
            assert_eq!(live.status(), 200);
            let text = live.text().await.unwrap();
            let stats = proxy.stop().await.unwrap();
            assert!(store.list("").await.unwrap().is_empty(), "{mode} {path}");
            if mode == Mode::Off {
                assert_eq!(text.len(), stream.len(), "passed on whole in mode off");
                assert_eq!(stats.recorder.failed_recordings, 0);
                continue;
            }
            let (before, error) = if content_type == "text/event-stream" {
                let (before, error) = text.rsplit_once("event: error\ndata: ").expect(&text);
                // Whole events only before the error event.
                assert!(before.ends_with("\n\n"), "{before}");
                for event in before.split("\n\n").filter(|e| !e.is_empty()) {
                    let data = event.strip_prefix("data: ").expect(event);
                    serde_json::from_str::<Value>(data).expect(data);
                }
                let error: Value = serde_json::from_str(error.trim_end()).unwrap();
                assert_eq!(error["type"], "error");
                assert_eq!(error["error"]["type"], "cassette_answer_too_large");
                (before.to_owned(), error["error"]["message"].clone())
            } else {
                let mut lines: Vec<&str> = text.lines().collect();
                let error: Value = serde_json::from_str(lines.pop().unwrap()).unwrap();
                for line in &lines {
                    serde_json::from_str::<Value>(line).expect(line);
                }
                (lines.join("\n"), error["error"].clone())
            };
            // Up to the limit, and at most the rest of the event under way.
            assert!(before.len() <= 8192 + 200, "{}", before.len());
            let message = error.as_str().unwrap();
            assert!(
                message.contains("over the answer limit of 8192 bytes")
                    && message.contains("nothing was recorded"),
                "{message}"
            );
            assert_eq!(stats.recorder.failed_recordings, 1);
            let failures = recorder.recording_failures();
            assert!(
                failures[0].reason.contains("answer limit of 8192 bytes"),
                "{}",
                failures[0]
            );
        }
    }
}

/// An answer read whole that is over the answer limit is not read further: the client gets a
/// 502 naming the limit (not to be retried), and nothing is stored.
#[tokio::test]
async fn a_whole_answer_over_the_answer_limit_is_refused_and_not_stored() {
    for (content_length, mode) in [
        (true, Mode::Record),
        (false, Mode::Record),
        (true, Mode::Off),
    ] {
        let fake = FakeUpstream::start().await;
        let big = completion(&"word ".repeat(4000));
        let reply = if content_length {
            Reply::json(200, big)
        } else {
            Reply::Stream {
                content_type: "application/json".into(),
                body: Bytes::from(big.to_string()),
                pieces: vec![1000],
            }
        };
        fake.reply(CHAT, reply);
        let store: DynStore = cassette_store::open("memory://").unwrap();
        let mut config = config(mode, &fake.url);
        config.max_answer = 8192;
        let proxy = proxy_with(config, &store).await;
        let live = post(&proxy, CHAT, &chat_body("q")).await;
        assert_eq!(live.status(), 502, "{mode}");
        assert_eq!(live.headers()["x-should-retry"], "false");
        let error: Value = live.json().await.unwrap();
        assert_eq!(error["error"]["type"], "cassette_answer_too_large");
        assert_eq!(error["error"]["limit"], 8192);
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("over the answer limit of 8192 bytes"),
            "{message}"
        );
        assert!(message.contains(&fake.url), "names the upstream: {message}");
        let stats = proxy.stop().await.unwrap();
        assert!(store.list("").await.unwrap().is_empty());
        let failed = u64::from(mode == Mode::Record);
        assert_eq!(stats.recorder.failed_recordings, failed, "{mode}");
    }
    let zero = RecorderConfig {
        max_answer: 0,
        ..RecorderConfig::default()
    };
    let err = zero.validate().unwrap_err();
    assert!(err.to_string().contains("answer limit"), "{err}");
}
