//! Test-scoped keys (`docs/keying.md`, "Test-scoped keys"): in adopt (a scope that keeps its own
//! answers, `Sharing::Own`), a test whose request another test's recording answers differently
//! gets its own answer, stored under its test-scoped key; the same answer is not stored twice;
//! replay with a test scope answers a test from its test-scoped recording first. And error
//! answers, a stream ending in the upstream's error event included, are recorded when error
//! recording is on.

mod support;

use cassette_keying::KeyConfig;
use cassette_recorder::{
    Cassette, Error, ErrorRecording, Mode, Recorder, RecorderConfig, Repeats, Request, Route,
    Scope, Sharing, Source,
};
use cassette_store::{DynStore, StoreExt};
use serde_json::{json, Value};
use support::{completion, FakeUpstream, Reply};

const CHAT: &str = "/v1/chat/completions";

fn config(mode: Mode, repeats: Repeats, upstream: &str) -> RecorderConfig {
    RecorderConfig {
        mode,
        repeats,
        routes: vec![Route::new("default", format!("{upstream}/v1"))],
        ..RecorderConfig::default()
    }
}

fn sample() -> Request {
    Request::post_json(
        CHAT,
        &json!({"model": "gpt-4o-mini", "temperature": 1,
                "messages": [{"role": "user", "content": "Pick a number."}]}),
    )
}

fn own(test: &str) -> Scope {
    Scope {
        sharing: Sharing::Own,
        ..Scope::test(test)
    }
}

async fn answer(recorder: &Recorder, scope: &Scope) -> Result<(String, Source), Error> {
    let outcome = recorder.handle_in(sample(), scope).await?;
    let source = outcome.source;
    let body: Value =
        serde_json::from_slice(&outcome.response.into_bytes().await.unwrap()).unwrap();
    let text = body["choices"][0]["message"]["content"].as_str().unwrap();
    Ok((text.to_owned(), source))
}

fn said(text: &str, source: Source) -> (String, Source) {
    (text.to_owned(), source)
}

async fn cassette(store: &DynStore, key: &cassette_keying::Key) -> Option<Cassette> {
    let document = store.get(key).await.unwrap()?;
    Some(Cassette::from_document(&document).unwrap())
}

/// Adopts three tests sending one request: `a` first (answer 5), `b` with another answer (6),
/// `c` with `a`'s answer (5).
async fn adopt(store: &DynStore, fake: &FakeUpstream, repeats: Repeats) {
    let recorder = Recorder::new(config(Mode::Auto, repeats, &fake.url), store.clone()).unwrap();
    fake.reply(CHAT, Reply::json(200, completion("answer 5")));
    assert_eq!(
        answer(&recorder, &own("a")).await.unwrap(),
        said("answer 5", Source::Recorded)
    );
    fake.reply(CHAT, Reply::json(200, completion("answer 6")));
    assert_eq!(
        answer(&recorder, &own("b")).await.unwrap(),
        said("answer 6", Source::Recorded)
    );
    fake.reply(CHAT, Reply::json(200, completion("answer 5")));
    assert_eq!(
        answer(&recorder, &own("c")).await.unwrap(),
        said("answer 5", Source::PassedThrough)
    );
    // `a` run again is answered by its own recording, without the upstream.
    recorder.begin_test("a");
    let asked = fake.requests();
    assert_eq!(
        answer(&recorder, &own("a")).await.unwrap(),
        said("answer 5", Source::Replayed)
    );
    assert_eq!(fake.requests(), asked);
}

#[tokio::test]
async fn adopt_stores_another_answer_under_the_test_scoped_key_and_the_same_one_once() {
    for repeats in [Repeats::Same, Repeats::Sequence] {
        let fake = FakeUpstream::start().await;
        let store = cassette_store::open("memory://").unwrap();
        adopt(&store, &fake, repeats).await;
        let keyed = sample().key(&KeyConfig::default());
        let mut keys = store.list("").await.unwrap();
        keys.sort();
        let scoped = keyed.clone().for_test(Some("b")).key;
        let mut expected = vec![keyed.key.clone(), scoped.clone()];
        expected.sort();
        // `c`'s answer was `a`'s: the one cassette serves both, nothing else is stored.
        assert_eq!(keys, expected, "{repeats:?}");
        let plain = cassette(&store, &keyed.key).await.unwrap();
        assert_eq!(plain.meta.test.as_deref(), Some("a"));
        assert_eq!((plain.format, plain.test_scope.as_ref()), (1, None));
        let theirs = cassette(&store, &scoped).await.unwrap();
        assert_eq!(theirs.format, 3);
        assert_eq!(theirs.meta.test.as_deref(), Some("b"));
        let scope = theirs.test_scope.as_ref().unwrap();
        assert_eq!((scope.test.as_str(), &scope.plain_key), ("b", &keyed.key));
        // Its stored request keys back to its own key (verify and rekey rely on it).
        assert_eq!(theirs.keyed_request(&KeyConfig::default()).key, scoped);
        assert!(!theirs.meta.request_redacted);
    }
}

#[tokio::test]
async fn replay_answers_each_test_from_its_own_recording_first() {
    for repeats in [Repeats::Same, Repeats::Sequence] {
        let mut fake = FakeUpstream::start().await;
        let store = cassette_store::open("memory://").unwrap();
        adopt(&store, &fake, repeats).await;
        fake.stop();
        let connections = fake.connections();
        let replaying = || Recorder::new(config(Mode::Replay, repeats, &fake.url), store.clone());
        let same = replaying().unwrap();
        // Twice each, so the hit cache answers the second time: it must not mix them up (in
        // sequence mode a fresh session, where each asks its first occurrence again).
        for _ in 0..2 {
            let recorder = match repeats {
                Repeats::Same => same.clone(),
                Repeats::Sequence => replaying().unwrap(),
            };
            for (scope, text) in [
                (Scope::test("b"), "answer 6"),
                (Scope::test("a"), "answer 5"),
                (Scope::test("c"), "answer 5"),
                (Scope::default(), "answer 5"),
                (own("b"), "answer 6"),
                (own("c"), "answer 5"),
            ] {
                if let Some(test) = &scope.test {
                    recorder.begin_test(test);
                }
                let got = answer(&recorder, &scope).await.unwrap();
                assert_eq!(got, said(text, Source::Replayed), "{repeats:?} {scope:?}");
            }
        }
        assert_eq!(fake.connections(), connections);
        // With the plain recording gone, `b` still has its own; the others miss as ever.
        let keyed = sample().key(&KeyConfig::default());
        let store2 = cassette_store::open("memory://").unwrap();
        let scoped = keyed.clone().for_test(Some("b")).key;
        let document = store.get(&scoped).await.unwrap().unwrap();
        store2.put(&scoped, document).await.unwrap();
        let recorder = Recorder::new(config(Mode::Replay, repeats, &fake.url), store2).unwrap();
        assert_eq!(
            answer(&recorder, &Scope::test("b")).await.unwrap(),
            said("answer 6", Source::Replayed)
        );
        for scope in [Scope::test("a"), Scope::default()] {
            let err = answer(&recorder, &scope).await.unwrap_err();
            let Error::Miss(miss) = err else {
                panic!("not a miss: {err}")
            };
            assert_eq!(miss.key, keyed.key, "a miss names the plain key");
            // Explained against `b`'s recording, whose test is no difference of the request:
            // said as what that recording is.
            let lines = miss.explanation_lines().join("\n");
            assert!(!lines.contains("test: "), "{lines}");
            assert!(
                miss.explanation.summary.contains("kept for test `b` alone"),
                "{}",
                miss.explanation.summary
            );
        }
    }
}

#[tokio::test]
async fn a_test_scope_alone_changes_nothing_for_plain_recordings() {
    // Outside adopt (`Sharing::Shared`), auto mode replays whatever test recorded the request,
    // as before: test-scoped recordings exist only where adopt put them.
    let fake = FakeUpstream::start().await;
    let store = cassette_store::open("memory://").unwrap();
    let recorder =
        Recorder::new(config(Mode::Auto, Repeats::Same, &fake.url), store.clone()).unwrap();
    fake.reply(CHAT, Reply::json(200, completion("answer 5")));
    assert_eq!(
        answer(&recorder, &Scope::test("a")).await.unwrap(),
        said("answer 5", Source::Recorded)
    );
    fake.reply(CHAT, Reply::json(200, completion("answer 6")));
    assert_eq!(
        answer(&recorder, &Scope::test("b")).await.unwrap(),
        said("answer 5", Source::Replayed)
    );
    assert_eq!(store.list("").await.unwrap().len(), 1);
}

const ERROR_STREAM: &str = "event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n\
event: error\n\
data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";

fn story() -> Request {
    Request::post_json(
        "/v1/messages",
        &json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": true,
                "messages": [{"role": "user", "content": "Tell a long story."}]}),
    )
}

#[tokio::test]
async fn a_stream_ending_in_the_upstreams_error_event_is_recorded_when_errors_are() {
    for errors in [ErrorRecording::PassThrough, ErrorRecording::Record] {
        let mut fake = FakeUpstream::start().await;
        fake.reply(
            "/v1/messages",
            Reply::Stream {
                content_type: "text/event-stream".into(),
                body: ERROR_STREAM.into(),
                pieces: vec![40],
            },
        );
        let store = cassette_store::open("memory://").unwrap();
        let recording = RecorderConfig {
            errors,
            ..config(Mode::Record, Repeats::Same, &fake.url)
        };
        let recorder = Recorder::new(recording, store.clone()).unwrap();
        let live = recorder.handle(story()).await.unwrap();
        let sent = live.response.into_bytes().await.unwrap();
        assert_eq!(&sent[..], ERROR_STREAM.as_bytes(), "passed on as sent");
        fake.stop();
        let keys = store.list("").await.unwrap();
        if errors == ErrorRecording::PassThrough {
            assert!(keys.is_empty(), "{keys:?}");
            assert_eq!(recorder.stats().failed_recordings, 1);
            continue;
        }
        assert_eq!(keys.len(), 1);
        assert_eq!(recorder.stats().failed_recordings, 0);
        let replaying = Recorder::new(
            config(Mode::Replay, Repeats::Same, &fake.url),
            store.clone(),
        )
        .unwrap();
        let replayed = replaying.handle(story()).await.unwrap();
        assert_eq!(replayed.source, Source::Replayed);
        let text =
            String::from_utf8(replayed.response.into_bytes().await.unwrap().to_vec()).unwrap();
        // The events as sent: the client raises the vendor's error again.
        assert!(text.contains("event: error"), "{text}");
        assert!(text.contains("overloaded_error"), "{text}");
        assert!(
            text.find("message_start") < text.find("overloaded_error"),
            "{text}"
        );
    }
}
