//! Sequence mode: repeats of one request within a session (one recorder) each get a recording of
//! their own, replayed in order; one more repeat than recorded is a miss that says so. The first
//! occurrence is the request's plain key, so recordings made without sequence mode keep working
//! and a recorder without it answers every repeat from the first.

mod support;

use cassette_keying::KeyConfig;
use cassette_recorder::proxy::{spawn, ProxyConfig};
use cassette_recorder::{
    Cassette, Error, Mode, Recorder, RecorderConfig, Repeats, Request, Route, Source,
};
use cassette_store::DynStore;
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

fn memory() -> DynStore {
    cassette_store::open("memory://").unwrap()
}

fn sample() -> Request {
    Request::post_json(
        CHAT,
        &json!({"model": "gpt-4o-mini", "temperature": 1,
                "messages": [{"role": "user", "content": "Name a colour."}]}),
    )
}

async fn answer(recorder: &Recorder) -> Result<(String, Source), Error> {
    let outcome = recorder.handle(sample()).await?;
    let source = outcome.source;
    let body: Value =
        serde_json::from_slice(&outcome.response.into_bytes().await.unwrap()).unwrap();
    Ok((
        body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_owned(),
        source,
    ))
}

/// Records `colours` as the answers to three repeats of one request, in sequence mode.
async fn record(store: &DynStore, fake: &FakeUpstream, colours: &[&str]) {
    let recorder = Recorder::new(
        config(Mode::Record, Repeats::Sequence, &fake.url),
        store.clone(),
    )
    .unwrap();
    for colour in colours {
        fake.reply(CHAT, Reply::json(200, completion(colour)));
        assert_eq!(
            answer(&recorder).await.unwrap(),
            ((*colour).to_owned(), Source::Recorded)
        );
    }
    assert_eq!(recorder.stats().recorded, colours.len() as u64);
}

#[tokio::test]
async fn each_repeat_is_recorded_under_its_own_key_and_the_first_under_the_plain_key() {
    let fake = FakeUpstream::start().await;
    let store = memory();
    record(&store, &fake, &["red", "green", "blue"]).await;
    let keys = store.list("").await.unwrap();
    assert_eq!(keys.len(), 3);
    let base = sample().key(&KeyConfig::default());
    for n in 1..=3u32 {
        let key = base.clone().occurrence(n).key;
        let doc = store.get(&key).await.unwrap().expect("occurrence stored");
        let cassette = Cassette::from_document(&doc).unwrap();
        assert_eq!(cassette.key, key);
        assert_eq!(cassette.occurrence(), n);
        // Only later occurrences are format 2 and say which request they repeat.
        assert_eq!(cassette.format, if n == 1 { 1 } else { 2 });
        assert_eq!(
            cassette.sequence.as_ref().map(|s| &s.base_key),
            (n > 1).then_some(&base.key)
        );
        // Each keys back to its own key from its stored request.
        assert_eq!(cassette.keyed_request(&KeyConfig::default()).key, key);
    }
}

#[tokio::test]
async fn replay_answers_repeats_in_order_and_one_more_is_a_miss_that_says_so() {
    let mut fake = FakeUpstream::start().await;
    let store = memory();
    record(&store, &fake, &["red", "green", "blue"]).await;
    fake.stop();
    let recorder = Recorder::new(
        config(Mode::Replay, Repeats::Sequence, &fake.url),
        store.clone(),
    )
    .unwrap();
    for colour in ["red", "green", "blue"] {
        assert_eq!(
            answer(&recorder).await.unwrap(),
            (colour.to_owned(), Source::Replayed)
        );
    }
    let err = answer(&recorder).await.unwrap_err();
    let Error::Miss(miss) = &err else {
        panic!("expected a miss, got {err}")
    };
    let repeat = miss.repeat.as_ref().expect("the miss names the repeat");
    assert_eq!((repeat.asked, repeat.recorded), (4, 3));
    assert_eq!(repeat.base_key, sample().key(&KeyConfig::default()).key);
    assert!(
        err.to_string().contains("recorded 3 times, asked a 4th"),
        "{err}"
    );
    assert_eq!(
        miss.key,
        sample().key(&KeyConfig::default()).occurrence(4).key
    );
    assert_eq!(recorder.stats().hits, 3);
    assert_eq!(recorder.stats().misses, 1);

    // A new session starts over from the first.
    let again = Recorder::new(config(Mode::Replay, Repeats::Sequence, &fake.url), store).unwrap();
    assert_eq!(answer(&again).await.unwrap().0, "red");
}

#[tokio::test]
async fn without_sequence_mode_every_repeat_gets_the_first_recording() {
    let mut fake = FakeUpstream::start().await;
    let store = memory();
    record(&store, &fake, &["red", "green"]).await;
    fake.stop();
    let recorder = Recorder::new(
        config(Mode::Replay, Repeats::Same, &fake.url),
        store.clone(),
    )
    .unwrap();
    for _ in 0..4 {
        assert_eq!(answer(&recorder).await.unwrap().0, "red");
    }
    // And a recording made without sequence mode is the first of a sequence.
    let plain = memory();
    let fake = FakeUpstream::start().await;
    fake.reply(CHAT, Reply::json(200, completion("plain")));
    let recorder = Recorder::new(
        config(Mode::Record, Repeats::Same, &fake.url),
        plain.clone(),
    )
    .unwrap();
    answer(&recorder).await.unwrap();
    answer(&recorder).await.unwrap();
    assert_eq!(
        plain.list("").await.unwrap().len(),
        1,
        "one recording per request"
    );
    let sequence = Recorder::new(
        config(Mode::Replay, Repeats::Sequence, &fake.url),
        plain.clone(),
    )
    .unwrap();
    assert_eq!(answer(&sequence).await.unwrap().0, "plain");
    let err = answer(&sequence).await.unwrap_err();
    assert!(
        err.to_string().contains("recorded 1 time, asked a 2nd"),
        "{err}"
    );
}

#[tokio::test]
async fn auto_replays_the_recorded_repeats_and_records_the_next() {
    let fake = FakeUpstream::start().await;
    let store = memory();
    record(&store, &fake, &["red", "green"]).await;
    let before = fake.requests();
    let recorder = Recorder::new(
        config(Mode::Auto, Repeats::Sequence, &fake.url),
        store.clone(),
    )
    .unwrap();
    fake.reply(CHAT, Reply::json(200, completion("blue")));
    let answers: Vec<(String, Source)> = vec![
        answer(&recorder).await.unwrap(),
        answer(&recorder).await.unwrap(),
        answer(&recorder).await.unwrap(),
    ];
    assert_eq!(
        answers,
        [
            ("red".to_owned(), Source::Replayed),
            ("green".to_owned(), Source::Replayed),
            ("blue".to_owned(), Source::Recorded)
        ]
    );
    assert_eq!(fake.requests(), before + 1);
    assert_eq!(store.list("").await.unwrap().len(), 3);
}

#[tokio::test]
async fn a_missing_first_occurrence_is_explained_as_the_request_itself() {
    let fake = FakeUpstream::start().await;
    let recorder =
        Recorder::new(config(Mode::Replay, Repeats::Sequence, &fake.url), memory()).unwrap();
    for _ in 0..2 {
        let err = answer(&recorder).await.unwrap_err();
        let Error::Miss(miss) = &err else {
            panic!("expected a miss, got {err}")
        };
        assert!(miss.repeat.is_none(), "{err}");
        assert!(!err.to_string().contains("asked a"), "{err}");
    }
    assert_eq!(fake.connections(), 0);
}

#[tokio::test]
async fn the_proxy_answers_the_repeat_in_its_miss() {
    let mut fake = FakeUpstream::start().await;
    let store = memory();
    record(&store, &fake, &["red"]).await;
    fake.stop();
    let recorder =
        Recorder::new(config(Mode::Replay, Repeats::Sequence, &fake.url), store).unwrap();
    let proxy = spawn(recorder, &ProxyConfig::ephemeral()).await.unwrap();
    let client = reqwest::Client::new();
    let url = format!("{}{CHAT}", proxy.url());
    let first = client.post(&url).json(&sample_body()).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let second = client.post(&url).json(&sample_body()).send().await.unwrap();
    assert_eq!(second.status(), 409);
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["error"]["repeat"]["asked"], 2);
    assert_eq!(body["error"]["repeat"]["recorded"], 1);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("recorded 1 time, asked a 2nd"),
        "{body}"
    );
    proxy.stop().await.unwrap();
}

fn sample_body() -> Value {
    serde_json::from_slice(&sample().body).unwrap()
}
