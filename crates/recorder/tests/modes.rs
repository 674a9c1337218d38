//! The recorder's modes, misses, upstream errors and redaction, against a fake upstream.

mod support;

use bytes::Bytes;
use cassette_keying::KeyConfig;
use cassette_recorder::{
    Cassette, Error, ErrorRecording, Mode, Recorder, RecorderConfig, Request, Route, Source,
};
use cassette_store::{DynStore, StoreExt};
use serde_json::{json, Value};
use std::sync::Arc;
use support::{FakeUpstream, Reply};

const CHAT: &str = "/v1/chat/completions";

fn config(mode: Mode, upstream: &str) -> RecorderConfig {
    RecorderConfig {
        mode,
        routes: vec![Route::new("default", format!("{upstream}/v1"))],
        ..RecorderConfig::default()
    }
}

fn memory() -> DynStore {
    cassette_store::open("memory://").unwrap()
}

fn chat(content: &str, temperature: f64) -> Request {
    Request::post_json(
        CHAT,
        &json!({
            "model": "gpt-4o-mini",
            "temperature": temperature,
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": content}
            ]
        }),
    )
}

fn completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
    })
}

async fn body_json(outcome: cassette_recorder::Outcome) -> Value {
    serde_json::from_slice(&outcome.response.into_bytes().await.unwrap()).unwrap()
}

async fn fake_with_chat(text: &str) -> FakeUpstream {
    let fake = FakeUpstream::start().await;
    fake.reply(CHAT, Reply::json(200, completion(text)));
    fake
}

#[tokio::test]
async fn replay_miss_is_an_error_and_never_calls_the_upstream() {
    let fake = fake_with_chat("Refunds take 5 days.").await;
    let recorder = Recorder::new(config(Mode::Replay, &fake.url), memory()).unwrap();
    let err = recorder
        .handle(chat("Where is my refund?", 0.0))
        .await
        .unwrap_err();
    let Error::Miss(miss) = &err else {
        panic!("expected a miss, got {err}")
    };
    assert_eq!(miss.path, CHAT);
    assert_eq!(miss.model.as_deref(), Some("gpt-4o-mini"));
    assert_eq!(miss.profile, "openai.chat");
    assert!(err.to_string().contains(miss.key.as_str()), "{err}");
    assert_eq!(err.http_status(), 409);
    assert_eq!(fake.connections(), 0);
    assert_eq!(recorder.stats().misses, 1);
}

#[tokio::test]
async fn record_then_replay_answers_from_the_tape() {
    let mut fake = fake_with_chat("Refunds take 5 days.").await;
    let store = memory();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let recorded = recorder
        .handle(chat("Where is my refund?", 0.0))
        .await
        .unwrap();
    assert_eq!(recorded.source, Source::Recorded);
    let key = recorded.key.clone();
    assert_eq!(
        body_json(recorded).await,
        completion("Refunds take 5 days.")
    );
    assert_eq!(fake.requests(), 1);
    assert_eq!(recorder.stats().recorded, 1);

    let cassette = Cassette::from_document(&store.get(&key).await.unwrap().unwrap()).unwrap();
    assert_eq!(cassette.key, key);
    assert_eq!(
        cassette.meta.requested_model.as_deref(),
        Some("gpt-4o-mini")
    );
    assert_eq!(
        cassette.meta.response_model.as_deref(),
        Some("gpt-4o-mini-2024-07-18")
    );
    assert_eq!(cassette.meta.finish_reason.as_deref(), Some("stop"));
    assert_eq!(
        cassette.meta.usage,
        Some(json!({"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}))
    );
    assert_eq!(cassette.upstream, format!("{}/v1", fake.url));

    fake.stop();
    let connections = fake.connections();
    let replayer = Recorder::new(config(Mode::Replay, &fake.url), store).unwrap();
    let replayed = replayer
        .handle(chat("Where is my refund?", 0.0))
        .await
        .unwrap();
    assert_eq!(replayed.source, Source::Replayed);
    assert_eq!(replayed.key, key);
    assert_eq!(
        body_json(replayed).await,
        completion("Refunds take 5 days.")
    );
    assert_eq!(fake.connections(), connections);
    assert_eq!(replayer.stats().hits, 1);
}

#[tokio::test]
async fn auto_records_a_miss_once_then_replays() {
    let fake = fake_with_chat("Hello").await;
    let recorder = Recorder::new(config(Mode::Auto, &fake.url), memory()).unwrap();
    let first = recorder.handle(chat("Hi", 1.0)).await.unwrap();
    assert_eq!(first.source, Source::Recorded);
    let second = recorder.handle(chat("Hi", 1.0)).await.unwrap();
    assert_eq!(second.source, Source::Replayed);
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn record_overwrites_and_off_stores_nothing() {
    let fake = fake_with_chat("first").await;
    let store = memory();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let key = recorder.handle(chat("Hi", 1.0)).await.unwrap().key;
    fake.reply(CHAT, Reply::json(200, completion("second")));
    // A new record session re-records what an earlier one stored.
    let again = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    again.handle(chat("Hi", 1.0)).await.unwrap();
    let stored = store.get_json(&key).await.unwrap().unwrap();
    assert_eq!(
        stored["response"]["body"]["json"]["choices"][0]["message"]["content"],
        "second"
    );

    let off_store = memory();
    let off = Recorder::new(config(Mode::Off, &fake.url), off_store.clone()).unwrap();
    let outcome = off.handle(chat("Hi", 1.0)).await.unwrap();
    assert_eq!(outcome.source, Source::PassedThrough);
    assert!(off_store.list("").await.unwrap().is_empty());
    assert_eq!(fake.requests(), 3);
}

#[tokio::test]
async fn a_record_session_asks_the_upstream_each_request_once() {
    // Two tests sending one request in one record run: the upstream answers differently each
    // time (a judge's verdict, a sampled answer), and a replay of the run gives both the one
    // stored answer, so the record run must have given both that answer too.
    let fake = fake_with_chat("PASS: polite").await;
    let store = memory();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let first = recorder.handle(chat("Judge this", 1.0)).await.unwrap();
    assert_eq!(first.source, Source::Recorded);
    let key = first.key.clone();
    assert_eq!(body_json(first).await, completion("PASS: polite"));
    fake.reply(CHAT, Reply::json(200, completion("FAIL: rude")));
    let second = recorder.handle(chat("Judge this", 1.0)).await.unwrap();
    assert_eq!(second.source, Source::Replayed);
    assert_eq!(second.key, key);
    assert_eq!(body_json(second).await, completion("PASS: polite"));
    assert_eq!(fake.requests(), 1);
    let stats = recorder.stats();
    assert_eq!((stats.recorded, stats.hits), (1, 1));

    // Another request is still recorded, and what replay answers is what the run answered.
    recorder.handle(chat("Judge that", 1.0)).await.unwrap();
    assert_eq!(fake.requests(), 2);
    let replay = Recorder::new(config(Mode::Replay, &fake.url), store.clone()).unwrap();
    let replayed = replay.handle(chat("Judge this", 1.0)).await.unwrap();
    assert_eq!(body_json(replayed).await, completion("PASS: polite"));
}

#[tokio::test]
async fn a_miss_explains_what_differs_from_the_nearest_recording() {
    let fake = fake_with_chat("ok").await;
    let store = memory();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    recorder
        .handle(chat("Where is my refund?", 0.0))
        .await
        .unwrap();
    recorder
        .handle(chat("Something else entirely, nothing alike", 1.0))
        .await
        .unwrap();

    let replayer = Recorder::new(config(Mode::Replay, &fake.url), store.clone()).unwrap();
    let Err(Error::Miss(miss)) = replayer.handle(chat("Where's my refund?", 0.7)).await else {
        panic!("expected a miss")
    };
    let lines = miss.explanation_lines();
    assert!(
        lines.contains(
            &r#"body.messages[1].content: "Where is my refund?" -> "Where's my refund?""#
                .to_owned()
        ),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"body.temperature: 0 -> 0.7".to_owned()),
        "{lines:?}"
    );

    let mut changed_system = chat("Where is my refund?", 0.0);
    changed_system.body = Bytes::from(
        json!({"model": "gpt-4o-mini", "temperature": 0.0, "messages": [
            {"role": "system", "content": "You are verbose."},
            {"role": "user", "content": "Where is my refund?"}]})
        .to_string(),
    );
    let Err(Error::Miss(miss)) = replayer.handle(changed_system).await else {
        panic!("expected a miss")
    };
    assert!(
        miss.explanation_lines()
            .contains(&"system_sha256 changed".to_owned()),
        "{miss}"
    );

    let mut elsewhere = chat("Where is my refund?", 0.0);
    elsewhere.path = "/v1/responses".into();
    let Err(Error::Miss(miss)) = replayer.handle(elsewhere).await else {
        panic!("expected a miss")
    };
    assert!(miss.explanation.nearest.is_none());
    assert!(
        miss.explanation
            .summary
            .contains("No recording exists at /v1/responses"),
        "{miss}"
    );
}

#[tokio::test]
async fn a_miss_under_other_keying_settings_names_the_difference() {
    let fake = fake_with_chat("ok").await;
    let store = memory();
    let seeded = |mode| RecorderConfig {
        key: KeyConfig {
            extra_volatile: vec!["seed".into()],
            ..KeyConfig::default()
        },
        ..config(mode, &fake.url)
    };
    let mut request = chat("Where is my refund?", 0.0);
    request.body = Bytes::from(
        json!({"model": "gpt-4o-mini", "seed": 7, "messages": [{"role": "user", "content": "Where is my refund?"}]})
            .to_string(),
    );
    let recorder = Recorder::new(seeded(Mode::Record), store.clone()).unwrap();
    let recorded = recorder.handle(request.clone()).await.unwrap();
    let cassette =
        Cassette::from_document(&store.get(&recorded.key).await.unwrap().unwrap()).unwrap();
    let settings = cassette.key_settings.expect("the settings are recorded");
    assert_eq!(settings.volatile, ["seed"]);
    assert_eq!(settings.fingerprint, seeded(Mode::Replay).key.fingerprint());

    // Replayed without the setting: the seed now counts, the key differs, and the miss says
    // why instead of blaming a key version.
    let replayer = Recorder::new(config(Mode::Replay, &fake.url), store.clone()).unwrap();
    let Err(Error::Miss(miss)) = replayer.handle(request.clone()).await else {
        panic!("expected a miss")
    };
    assert_eq!(
        miss.explanation_lines(),
        ["recorded with volatile [seed]; now []"],
        "{miss}"
    );
    let text = miss.to_string();
    assert!(
        text.contains("recorded with volatile [seed]; now []"),
        "{text}"
    );
    assert!(!text.contains("key version"), "{text}");

    // With the same settings it replays.
    let replayer = Recorder::new(seeded(Mode::Replay), store.clone()).unwrap();
    assert_eq!(
        replayer.handle(request).await.unwrap().source,
        Source::Replayed
    );
}

#[tokio::test]
async fn a_miss_names_another_key_version_only_when_the_versions_differ() {
    let fake = fake_with_chat("ok").await;
    let store = memory();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let key = recorder
        .handle(chat("Where is my refund?", 0.0))
        .await
        .unwrap()
        .key;
    // The same tape, as an older key contract would have stored it: another key, version 0.
    let mut cassette = Cassette::from_document(&store.get(&key).await.unwrap().unwrap()).unwrap();
    store.delete(&key).await.unwrap();
    cassette.key = cassette_keying::Key::parse(&"0".repeat(64)).unwrap();
    cassette.key_version = 0;
    store
        .put(&cassette.key, serde_json::to_vec(&cassette).unwrap().into())
        .await
        .unwrap();

    let replayer = Recorder::new(config(Mode::Replay, &fake.url), store.clone()).unwrap();
    let Err(Error::Miss(miss)) = replayer.handle(chat("Where is my refund?", 0.0)).await else {
        panic!("expected a miss")
    };
    assert_eq!(
        miss.explanation_lines(),
        ["keyed under key version 0; this tool keys with version 1"],
        "{miss}"
    );
}

#[tokio::test]
async fn a_hand_edited_key_field_never_panics_a_miss_report() {
    let fake = fake_with_chat("ok").await;
    let store = memory();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let key = recorder
        .handle(chat("Where is my refund?", 0.0))
        .await
        .unwrap()
        .key;
    // Someone edits the key field by hand: multi-byte characters put byte 16 inside a char,
    // where slicing the first 16 bytes for a short form would panic.
    let document = store.get(&key).await.unwrap().unwrap();
    let edited = String::from_utf8_lossy(&document)
        .replace(key.as_str(), &format!("a{}", "\u{e9}".repeat(20)));
    store.put(&key, Bytes::from(edited)).await.unwrap();

    let replayer = Recorder::new(config(Mode::Replay, &fake.url), store.clone()).unwrap();
    let Err(Error::Miss(miss)) = replayer.handle(chat("Where's my refund?", 0.7)).await else {
        panic!("expected a miss")
    };
    // The edited tape cannot be read, so it is no one's nearest recording.
    assert!(miss.explanation.nearest.is_none(), "{miss}");
    let err = replayer
        .handle(chat("Where is my refund?", 0.0))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("64 lowercase hex"), "{err}");
}

#[tokio::test]
async fn upstream_errors_pass_through_and_are_stored_only_when_asked() {
    let fake = FakeUpstream::start().await;
    fake.reply(
        CHAT,
        Reply::json(429, json!({"error": {"message": "slow down"}})),
    );
    let store = memory();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let outcome = recorder.handle(chat("Hi", 1.0)).await.unwrap();
    assert_eq!(outcome.response.status, 429);
    assert_eq!(outcome.source, Source::PassedThrough);
    assert!(store.list("").await.unwrap().is_empty());

    let keep = RecorderConfig {
        errors: ErrorRecording::Record,
        ..config(Mode::Record, &fake.url)
    };
    let recorder = Recorder::new(keep, store.clone()).unwrap();
    let outcome = recorder.handle(chat("Hi", 1.0)).await.unwrap();
    assert_eq!(outcome.source, Source::Recorded);
    let replayer = Recorder::new(config(Mode::Replay, &fake.url), store).unwrap();
    assert_eq!(
        replayer
            .handle(chat("Hi", 1.0))
            .await
            .unwrap()
            .response
            .status,
        429
    );
}

#[tokio::test]
async fn an_unreachable_upstream_is_named_and_nothing_is_stored() {
    // Bind then drop a listener: the port is free and refuses connections.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let store = memory();
    let recorder = Recorder::new(config(Mode::Record, &base), store.clone()).unwrap();
    let err = recorder.handle(chat("Hi", 1.0)).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Upstream {
                timed_out: false,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.http_status(), 502);
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(store.list("").await.unwrap().is_empty());
    assert_eq!(recorder.stats().upstream_errors, 1);
}

#[tokio::test]
async fn a_target_without_a_route_names_the_setting_to_fix() {
    let recorder = Recorder::new(
        RecorderConfig {
            mode: Mode::Record,
            ..RecorderConfig::default()
        },
        memory(),
    )
    .unwrap();
    let err = recorder.handle(chat("Hi", 1.0)).await.unwrap_err();
    // In the recorder's terms; the CLI adds which flag or variable sets that route.
    assert!(
        matches!(&err, Error::NoUpstream { target } if target == "default"),
        "{err}"
    );
    assert!(err.to_string().contains("route named `default`"), "{err}");
}

#[tokio::test]
async fn bodies_over_the_limit_are_refused_before_anything_else() {
    let fake = fake_with_chat("ok").await;
    let small = RecorderConfig {
        max_body: 10,
        ..config(Mode::Record, &fake.url)
    };
    let recorder = Recorder::new(small, memory()).unwrap();
    let err = recorder.handle(chat("Hi", 1.0)).await.unwrap_err();
    assert_eq!(err.http_status(), 413);
    assert_eq!(fake.requests(), 0);
}

#[tokio::test]
async fn binary_and_non_utf8_bodies_replay_byte_for_byte() {
    let fake = FakeUpstream::start().await;
    let audio: Vec<u8> = (0..=255u8).chain([0xff, 0xfe, 0x00, 0x80]).collect();
    fake.reply(
        "/v1/audio/speech",
        Reply::Body {
            status: 200,
            content_type: "audio/mpeg".into(),
            body: Bytes::from(audio.clone()),
        },
    );
    let latin1 = b"caf\xe9 \xff not utf-8".to_vec();
    fake.reply(
        "/v1/files/content",
        Reply::Body {
            status: 200,
            content_type: "text/plain".into(),
            body: Bytes::from(latin1.clone()),
        },
    );
    let store = memory();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let replayer = Recorder::new(config(Mode::Replay, &fake.url), store).unwrap();
    for (path, expected) in [("/v1/audio/speech", &audio), ("/v1/files/content", &latin1)] {
        let request = Request {
            headers: vec![(
                "content-type".to_owned(),
                "application/octet-stream".to_owned(),
            )],
            body: Bytes::from_static(b"\x00\x01raw request"),
            ..Request::new("POST", path)
        };
        let recorded = recorder.handle(request.clone()).await.unwrap();
        assert_eq!(
            &recorded.response.into_bytes().await.unwrap()[..],
            &expected[..]
        );
        let replayed = replayer.handle(request).await.unwrap();
        assert!(replayed.response.header("content-type").is_some());
        assert_eq!(
            &replayed.response.into_bytes().await.unwrap()[..],
            &expected[..]
        );
    }
}

#[tokio::test]
async fn planted_secrets_never_reach_the_store_and_max_tokens_survives() {
    let fake = FakeUpstream::start().await;
    fake.reply(
        CHAT,
        Reply::json(200, json!({
            "id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "your key is sk-proj-RESPONSESECRET0123456789abcdef"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        })),
    );
    let secrets = [
        "sk-HEADERSECRET0123456789abcdefABCDEF",
        "sk-ant-XAPIKEYSECRET0123456789abcdef",
        "QUERYSECRET0123456789",
        "BODYAPIKEYSECRET0123456789",
        "sk-proj-CONTENTSECRET0123456789abcdef",
        "hunter2-PASSWORD-SECRET",
        "AKIAIOSFODNN7EXAMPLE",
        "sk-proj-RESPONSESECRET0123456789abcdef",
        "fake-upstream-cookie-secret",
    ];
    let store = memory();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let request = Request {
        query: format!("api-version=1&key={}", secrets[2]),
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("authorization".into(), format!("Bearer {}", secrets[0])),
            ("x-api-key".into(), secrets[1].into()),
            ("cookie".into(), "session=abc".into()),
        ],
        ..Request::post_json(
            CHAT,
            &json!({
                "model": "gpt-4o-mini",
                "max_tokens": 256,
                "api_key": secrets[3],
                "messages": [{"role": "user", "content": format!("my key is {} and aws {}", secrets[4], secrets[6])}],
                "tools": [{"type": "function", "function": {"name": "login", "parameters": {"password": secrets[5]}}}]
            }),
        )
    };
    let key = recorder.handle(request).await.unwrap().key;
    let mut all = Vec::new();
    for k in store.list("").await.unwrap() {
        all.extend_from_slice(&store.get(&k).await.unwrap().unwrap());
    }
    let text = String::from_utf8_lossy(&all);
    for secret in secrets {
        assert!(
            !text.contains(secret),
            "{secret} reached the store:\n{text}"
        );
    }
    let stored = store.get_json(&key).await.unwrap().unwrap();
    assert_eq!(stored["request"]["body"]["json"]["max_tokens"], 256);
    assert_eq!(stored["request"]["query"], "api-version=1");
    assert!(stored["request"]["headers"].get("authorization").is_none());
    // Redaction changed keyed parts of the body, and the cassette says so.
    assert_eq!(stored["meta"]["request_redacted"], true);
}

#[tokio::test]
async fn an_undamaged_request_is_not_marked_redacted() {
    let fake = fake_with_chat("ok").await;
    let store: DynStore = Arc::new(cassette_store::memory::MemoryStore::new());
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let key = recorder.handle(chat("Hi", 1.0)).await.unwrap().key;
    let stored = store.get_json(&key).await.unwrap().unwrap();
    assert!(stored["meta"].get("request_redacted").is_none(), "{stored}");
}

#[tokio::test]
async fn a_silent_upstream_times_out_as_a_gateway_timeout() {
    let fake = FakeUpstream::start().await;
    fake.reply(CHAT, Reply::Silent);
    let store = memory();
    let impatient = RecorderConfig {
        upstream_timeout: std::time::Duration::from_millis(300),
        ..config(Mode::Record, &fake.url)
    };
    let recorder = Recorder::new(impatient, store.clone()).unwrap();
    let err = recorder.handle(chat("Hi", 1.0)).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Upstream {
                timed_out: true,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.http_status(), 504);
    assert!(err.to_string().contains(&fake.url), "{err}");
    assert!(store.list("").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_corrupt_cassette_is_an_error_naming_the_key_and_store() {
    let store = memory();
    let request = chat("Hi", 1.0);
    let key = request.key(&Default::default()).key;
    store
        .put(
            &key,
            Bytes::from_static(b"{\"format\": 1, \"key\": \"trunc"),
        )
        .await
        .unwrap();
    let recorder = Recorder::new(config(Mode::Replay, "http://127.0.0.1:9"), store).unwrap();
    let err = recorder.handle(request).await.unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains(key.as_str()) && message.contains("memory://"),
        "{message}"
    );
    assert!(message.contains("re-record"), "{message}");
}

/// Records `raw` as the upstream's answer, then replays it from the tape: what the client got
/// each time.
async fn recorded_and_replayed(raw: &'static str) -> (Bytes, Bytes) {
    let mut fake = FakeUpstream::start().await;
    fake.reply(
        CHAT,
        Reply::Body {
            status: 200,
            content_type: "application/json".into(),
            body: Bytes::from_static(raw.as_bytes()),
        },
    );
    let store = memory();
    let recorder = Recorder::new(config(Mode::Record, &fake.url), store.clone()).unwrap();
    let recorded = recorder.handle(chat("Order?", 0.0)).await.unwrap();
    assert_eq!(recorded.source, Source::Recorded);
    let recorded = recorded.response.into_bytes().await.unwrap();
    fake.stop();
    let replayer = Recorder::new(config(Mode::Replay, &fake.url), store).unwrap();
    let replayed = replayer.handle(chat("Order?", 0.0)).await.unwrap();
    assert_eq!(replayed.source, Source::Replayed);
    (recorded, replayed.response.into_bytes().await.unwrap())
}

#[tokio::test]
async fn replay_gives_the_recorded_bytes_of_a_json_answer() {
    // Members out of alphabetical order, Python's spacing, a trailing newline.
    let raw = "{\"id\": \"chatcmpl-29\", \"object\": \"chat.completion\", \"created\": 1,  \
               \"model\": \"gpt-4o-mini\", \"choices\": [{\"message\": {\"role\": \"assistant\", \
               \"content\": \"Refunds take 5 days.\"}, \"index\": 0, \"finish_reason\": \"stop\"}]}\n";
    let (recorded, replayed) = recorded_and_replayed(raw).await;
    assert_eq!(recorded, raw.as_bytes());
    assert_eq!(
        String::from_utf8_lossy(&replayed),
        String::from_utf8_lossy(&recorded)
    );
}

#[tokio::test]
async fn a_redacted_answer_replays_in_the_recorded_member_order() {
    let raw = "{\"id\": \"chatcmpl-30\", \"object\": \"chat.completion\", \"choices\": [{\"message\": \
               {\"role\": \"assistant\", \"content\": \"use sk-proj-7Fh2kQ9xLm3Np8Rs5Tv1Wy4Za6Bc0De2Fg\"}, \
               \"index\": 0}], \"created\": 2}";
    let (_, replayed) = recorded_and_replayed(raw).await;
    let replayed = String::from_utf8_lossy(&replayed);
    assert!(!replayed.contains("sk-proj-"), "{replayed}");
    assert_eq!(
        replayed,
        "{\"id\":\"chatcmpl-30\",\"object\":\"chat.completion\",\"choices\":[{\"message\":\
         {\"role\":\"assistant\",\"content\":\"use [REDACTED]\"},\"index\":0}],\"created\":2}"
    );
}
