//! Gemini through the recorder: a streamed answer (events or JSON array) is stored once as its
//! final response and replays as events, as a JSON array or as the plain answer, whichever the
//! request asks for; credentials never reach the tape; a tape keyed before the profile existed
//! is named on a miss.

mod support;

use cassette_recorder::{
    Cassette, Error, Mode, Recorder, RecorderConfig, Request, ResponseBody, Route, Source,
};
use cassette_store::{DynStore, StoreExt};
use cassette_wire::{Assembler, StreamFormat};
use futures::StreamExt;
use serde_json::{json, Value};
use support::{fixture, FakeUpstream, Reply};

const GENERATE: &str = "/v1beta/models/gemini-2.5-flash:generateContent";
const STREAM: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent";
const CLIENT_KEY: &str = "AIzaSyClientKey0123456789abcdefghijklmn";

fn recorder(mode: Mode, upstream: &str, store: &DynStore) -> Recorder {
    let config = RecorderConfig {
        mode,
        routes: vec![Route::new("gemini", upstream)],
        stream_chunk_size: 9,
        ..RecorderConfig::default()
    };
    Recorder::new(config, store.clone()).unwrap()
}

fn body(question: &str) -> Value {
    json!({
        "contents": [{"role": "user", "parts": [{"text": question}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [{"functionDeclarations": [{"name": "get_weather", "parameters": {"type": "OBJECT"}}]}],
        "generationConfig": {"temperature": 0.2}
    })
}

/// A request as google-genai sends it: the key in `x-goog-api-key`, or in `?key=`.
fn request(path: &str, query: &str, question: &str) -> Request {
    Request {
        target: "gemini".into(),
        query: query.into(),
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("x-goog-api-key".into(), CLIENT_KEY.into()),
        ],
        ..Request::post_json(path, &body(question))
    }
}

fn final_of(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

async fn pieces(body: ResponseBody) -> Vec<u8> {
    match body {
        ResponseBody::Stream(mut stream) => {
            let mut out = Vec::new();
            while let Some(piece) = stream.next().await {
                out.extend_from_slice(&piece.unwrap());
            }
            out
        }
        ResponseBody::Full(_) => panic!("expected a stream"),
    }
}

fn assemble(format: StreamFormat, bytes: &[u8]) -> Value {
    let mut assembler = Assembler::new(format);
    assembler.push(bytes);
    assembler.finish().unwrap()
}

#[tokio::test]
async fn a_stream_is_stored_once_and_replays_as_events_array_or_plain_answer() {
    let mut fake = FakeUpstream::start().await;
    let raw = fixture("gemini_tool.sse");
    fake.reply(
        STREAM,
        Reply::Stream {
            content_type: "text/event-stream".into(),
            body: raw.clone(),
            pieces: vec![1, 13, 5, 64, 2, 300, 17],
        },
    );
    let store = cassette_store::open("memory://").unwrap();
    let expected = final_of("gemini_tool.final.json");
    let question = "Weather in Paris and Tokyo?";

    let outcome = recorder(Mode::Record, &fake.url, &store)
        .handle(request(
            STREAM,
            &format!("alt=sse&key={CLIENT_KEY}"),
            question,
        ))
        .await
        .unwrap();
    assert_eq!(outcome.source, Source::Recording);
    assert_eq!(pieces(outcome.response.body).await, raw.to_vec());

    let document = store.get(&outcome.key).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&document);
    assert!(
        !text.contains(CLIENT_KEY),
        "the key reached the tape: {text}"
    );
    let cassette = Cassette::from_document(&document).unwrap();
    assert_eq!(cassette.response.stream.as_deref(), Some("gemini.sse"));
    assert_eq!(cassette.response.body.as_json(), Some(&expected));
    assert_eq!(cassette.request.query, "alt=sse");
    assert_eq!(cassette.meta.profile, "gemini.generate");
    assert_eq!(
        cassette.meta.requested_model.as_deref(),
        Some("gemini-2.5-flash")
    );
    assert_eq!(
        cassette.meta.response_model.as_deref(),
        Some("gemini-2.5-flash")
    );
    assert_eq!(cassette.meta.finish_reason.as_deref(), Some("STOP"));
    assert_eq!(cassette.meta.usage.as_ref().unwrap()["totalTokenCount"], 93);

    fake.stop();
    let connections = fake.connections();
    let replayer = recorder(Mode::Replay, &fake.url, &store);

    let events = replayer
        .handle(request(STREAM, "alt=sse", question))
        .await
        .unwrap();
    assert_eq!(events.key, outcome.key);
    assert_eq!(
        events.response.header("content-type"),
        Some("text/event-stream")
    );
    let body = pieces(events.response.body).await;
    assert_eq!(assemble(StreamFormat::GeminiSse, &body), expected);

    let array = replayer
        .handle(request(STREAM, "", question))
        .await
        .unwrap();
    assert_eq!(
        array.response.header("content-type"),
        Some("application/json")
    );
    let body = pieces(array.response.body).await;
    let chunks: Value = serde_json::from_slice(&body).unwrap();
    assert!(chunks.as_array().is_some_and(|c| c.len() > 2), "{chunks}");
    assert_eq!(assemble(StreamFormat::GeminiJson, &body), expected);

    let plain = replayer
        .handle(request(GENERATE, "", question))
        .await
        .unwrap();
    assert_eq!(
        plain.response.header("content-type"),
        Some("application/json")
    );
    let bytes = plain.response.into_bytes().await.unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), expected);
    assert_eq!(
        fake.connections(),
        connections,
        "replay called the upstream"
    );
}

#[tokio::test]
async fn a_json_array_stream_is_stored_as_its_final_response() {
    let fake = FakeUpstream::start().await;
    fake.reply(
        STREAM,
        Reply::Stream {
            content_type: "application/json; charset=UTF-8".into(),
            body: fixture("gemini_tool.stream.json"),
            pieces: vec![7, 100, 3],
        },
    );
    let store = cassette_store::open("memory://").unwrap();
    let question = "Weather in Paris and Tokyo?";
    let outcome = recorder(Mode::Record, &fake.url, &store)
        .handle(request(STREAM, "", question))
        .await
        .unwrap();
    pieces(outcome.response.body).await;
    let cassette =
        Cassette::from_document(&store.get(&outcome.key).await.unwrap().unwrap()).unwrap();
    assert_eq!(cassette.response.stream.as_deref(), Some("gemini.json"));
    let expected = final_of("gemini_tool.final.json");
    assert_eq!(cassette.response.body.as_json(), Some(&expected));

    // A plain request for the same content gets the plain answer, never the array.
    let plain = recorder(Mode::Replay, &fake.url, &store)
        .handle(request(GENERATE, "", question))
        .await
        .unwrap();
    let bytes = plain.response.into_bytes().await.unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), expected);
}

#[tokio::test]
async fn a_plain_recording_replays_as_a_stream() {
    let fake = FakeUpstream::start().await;
    let response = final_of("gemini.response.json");
    fake.reply(GENERATE, Reply::json(200, response.clone()));
    let store = cassette_store::open("memory://").unwrap();
    recorder(Mode::Record, &fake.url, &store)
        .handle(request(GENERATE, "", "When did A-1042 ship?"))
        .await
        .unwrap();
    let replayed = recorder(Mode::Replay, &fake.url, &store)
        .handle(request(STREAM, "alt=sse", "When did A-1042 ship?  "))
        .await
        .unwrap();
    let body = pieces(replayed.response.body).await;
    assert!(
        body.starts_with(b"data: {"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(assemble(StreamFormat::GeminiSse, &body), response);
}

#[tokio::test]
async fn a_streamed_request_that_misses_is_compared_with_the_plain_recording() {
    let fake = FakeUpstream::start().await;
    fake.reply(GENERATE, Reply::json(200, final_of("gemini.response.json")));
    let store = cassette_store::open("memory://").unwrap();
    recorder(Mode::Record, &fake.url, &store)
        .handle(request(GENERATE, "", "When did A-1042 ship?"))
        .await
        .unwrap();
    let Err(Error::Miss(miss)) = recorder(Mode::Replay, &fake.url, &store)
        .handle(request(STREAM, "alt=sse", "When did A-1043 ship?"))
        .await
    else {
        panic!("expected a miss")
    };
    assert_eq!(miss.profile, "gemini.generate");
    assert_eq!(miss.model.as_deref(), Some("gemini-2.5-flash"));
    let lines = miss.explanation_lines();
    assert_eq!(
        lines,
        [r#"body.contents[0].parts[0].text: "When did A-1042 ship?" -> "When did A-1043 ship?""#],
        "{miss}"
    );
}

#[tokio::test]
async fn a_tape_keyed_before_the_profile_existed_is_named_on_a_miss() {
    let fake = FakeUpstream::start().await;
    fake.reply(GENERATE, Reply::json(200, final_of("gemini.response.json")));
    let store = cassette_store::open("memory://").unwrap();
    let question = "When did A-1042 ship?";
    let key = recorder(Mode::Record, &fake.url, &store)
        .handle(request(GENERATE, "", question))
        .await
        .unwrap()
        .key;
    // The same tape as cassette stored it when Gemini requests fell to the `http` profile:
    // another key, `meta.profile` "http", key version 1 all the same.
    let mut cassette = Cassette::from_document(&store.get(&key).await.unwrap().unwrap()).unwrap();
    store.delete(&key).await.unwrap();
    cassette.key = cassette_keying::Key::parse(&"e".repeat(64)).unwrap();
    cassette.meta.profile = "http".into();
    store
        .put(&cassette.key, serde_json::to_vec(&cassette).unwrap().into())
        .await
        .unwrap();

    let Err(Error::Miss(miss)) = recorder(Mode::Replay, &fake.url, &store)
        .handle(request(GENERATE, "", question))
        .await
    else {
        panic!("expected a miss")
    };
    assert_eq!(
        miss.explanation_lines(),
        ["keyed under the `http` profile; this tool keys these requests with the `gemini.generate` profile, re-record it"],
        "{miss}"
    );
}
