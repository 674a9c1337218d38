//! Recorded streams are forwarded as they arrive, stored as one final response, and replay as a
//! re-synthesized stream or as the final JSON object.

mod support;

use cassette_recorder::{
    Cassette, Mode, Recorder, RecorderConfig, Request, ResponseBody, Route, Source,
};
use cassette_store::DynStore;
use cassette_wire::{Assembler, StreamFormat};
use futures::StreamExt;
use serde_json::{json, Value};
use support::{fixture, FakeUpstream, Reply};

struct Case {
    fixture: &'static str,
    final_json: &'static str,
    path: &'static str,
    content_type: &'static str,
    format: StreamFormat,
    /// The request body; `stream` is set per call.
    body: Value,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            fixture: "openai_chat_tool.sse",
            final_json: "openai_chat_tool.final.json",
            path: "/v1/chat/completions",
            content_type: "text/event-stream; charset=utf-8",
            format: StreamFormat::OpenaiChat,
            body: json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "Weather and time in Paris?"}],
                          "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}),
        },
        Case {
            fixture: "openai_responses.sse",
            final_json: "openai_responses.final.json",
            path: "/v1/responses",
            content_type: "text/event-stream",
            format: StreamFormat::OpenaiResponses,
            body: json!({"model": "gpt-4o", "input": "Say hello"}),
        },
        Case {
            fixture: "anthropic_tool_use.sse",
            final_json: "anthropic_tool_use.final.json",
            path: "/v1/messages",
            content_type: "text/event-stream",
            format: StreamFormat::AnthropicMessages,
            body: json!({"model": "claude-sonnet-4-5", "max_tokens": 256, "messages": [{"role": "user", "content": "Weather?"}]}),
        },
        Case {
            fixture: "ollama_chat.ndjson",
            final_json: "ollama_chat.final.json",
            path: "/api/chat",
            content_type: "application/x-ndjson",
            format: StreamFormat::OllamaNdjson,
            body: json!({"model": "llama3.2", "messages": [{"role": "user", "content": "Hi"}]}),
        },
    ]
}

fn recorder(mode: Mode, upstream: &str, store: &DynStore) -> Recorder {
    let config = RecorderConfig {
        mode,
        routes: vec![Route::new("default", upstream)],
        stream_chunk_size: 7,
        ..RecorderConfig::default()
    };
    Recorder::new(config, store.clone()).unwrap()
}

fn request(case: &Case, stream: bool) -> Request {
    let mut body = case.body.clone();
    body["stream"] = json!(stream);
    Request::post_json(case.path, &body)
}

fn final_of(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

/// Reads a streamed body piece by piece; fails on a complete body.
async fn pieces(body: ResponseBody) -> Vec<bytes::Bytes> {
    match body {
        ResponseBody::Stream(mut stream) => {
            let mut out = Vec::new();
            while let Some(piece) = stream.next().await {
                out.push(piece.unwrap());
            }
            out
        }
        ResponseBody::Full(_) => panic!("expected a stream"),
    }
}

#[tokio::test]
async fn each_stream_format_records_once_and_replays_both_ways() {
    for case in cases() {
        let mut fake = FakeUpstream::start().await;
        let raw = fixture(case.fixture);
        fake.reply(
            case.path,
            Reply::Stream {
                content_type: case.content_type.into(),
                body: raw.clone(),
                pieces: vec![1, 13, 5, 64, 2, 300, 17],
            },
        );
        let store = cassette_store::open("memory://").unwrap();
        let expected = final_of(case.final_json);

        // Record: the client gets the upstream's bytes as they arrive, in several pieces.
        let outcome = recorder(Mode::Record, &fake.url, &store)
            .handle(request(&case, true))
            .await
            .unwrap();
        assert_eq!(outcome.source, Source::Recording, "{}", case.fixture);
        let forwarded = pieces(outcome.response.body).await;
        assert!(
            forwarded.len() > 1,
            "{}: not forwarded piece by piece",
            case.fixture
        );
        assert_eq!(forwarded.concat(), raw.to_vec(), "{}", case.fixture);

        // Stored: one final response, not the transport's chunks.
        let document = store.get(&outcome.key).await.unwrap().unwrap();
        let cassette = Cassette::from_document(&document).unwrap();
        assert_eq!(
            cassette.response.stream.as_deref(),
            Some(case.format.name())
        );
        assert_eq!(
            cassette.response.body.as_json(),
            Some(&expected),
            "{}",
            case.fixture
        );

        // Replay with the upstream gone: (a) a stream whose events assemble into the same
        // final response, (b) the final JSON object for a non-streaming request.
        fake.stop();
        let connections = fake.connections();
        let replayer = recorder(Mode::Replay, &fake.url, &store);
        let replayed = replayer.handle(request(&case, true)).await.unwrap();
        assert_eq!(
            replayed.response.header("content-type"),
            Some(case.format.content_type())
        );
        let synthesized = pieces(replayed.response.body).await;
        assert!(synthesized.iter().all(|p| p.len() <= 7), "{}", case.fixture);
        let mut assembler = Assembler::new(case.format);
        for piece in &synthesized {
            assembler.push(piece);
        }
        assert_eq!(assembler.finish().unwrap(), expected, "{}", case.fixture);

        let plain = replayer.handle(request(&case, false)).await.unwrap();
        assert_eq!(
            plain.response.header("content-type"),
            Some("application/json")
        );
        let bytes = plain.response.into_bytes().await.unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), expected);
        assert_eq!(
            fake.connections(),
            connections,
            "{}: replay called the upstream",
            case.fixture
        );
    }
}

#[tokio::test]
async fn a_non_streamed_recording_also_replays_as_a_stream() {
    let fake = FakeUpstream::start().await;
    let response = final_of("openai_chat.response.json");
    fake.reply("/v1/chat/completions", Reply::json(200, response.clone()));
    let store = cassette_store::open("memory://").unwrap();
    let chat = &cases()[0];
    recorder(Mode::Record, &fake.url, &store)
        .handle(request(chat, false))
        .await
        .unwrap();
    let replayed = recorder(Mode::Replay, &fake.url, &store)
        .handle(request(chat, true))
        .await
        .unwrap();
    let synthesized = pieces(replayed.response.body).await.concat();
    assert!(synthesized.ends_with(b"data: [DONE]\n\n"));
    let mut assembler = Assembler::new(StreamFormat::OpenaiChat);
    assembler.push(&synthesized);
    let assembled = assembler.finish().unwrap();
    assert_eq!(
        assembled["choices"][0]["message"]["content"],
        response["choices"][0]["message"]["content"]
    );
}

#[tokio::test]
async fn generic_streams_replay_as_recorded() {
    let fake = FakeUpstream::start().await;
    let raw = fixture("generic.sse");
    fake.reply(
        "/events",
        Reply::Stream {
            content_type: "text/event-stream".into(),
            body: raw.clone(),
            pieces: vec![3, 11],
        },
    );
    let store = cassette_store::open("memory://").unwrap();
    let get = Request {
        method: "GET".into(),
        body: bytes::Bytes::new(),
        ..Request::post_json("/events", &json!({}))
    };
    let recorded = recorder(Mode::Record, &fake.url, &store)
        .handle(get.clone())
        .await
        .unwrap();
    recorded.response.into_bytes().await.unwrap();
    let replayed = recorder(Mode::Replay, &fake.url, &store)
        .handle(get)
        .await
        .unwrap();
    let replayed = pieces(replayed.response.body).await.concat();
    let mut assembler = Assembler::new(StreamFormat::GenericSse);
    assembler.push(&replayed);
    assert_eq!(assembler.finish().unwrap(), final_of("generic.final.json"));
}

#[tokio::test]
async fn a_json_answer_on_a_non_llm_path_replays_as_json_even_when_stream_is_asked() {
    let fake = FakeUpstream::start().await;
    fake.reply("/v1/custom/run", Reply::json(200, json!({"ok": true})));
    let store = cassette_store::open("memory://").unwrap();
    let asks_stream = Request::post_json("/v1/custom/run", &json!({"stream": true}));
    recorder(Mode::Record, &fake.url, &store)
        .handle(asks_stream.clone())
        .await
        .unwrap();
    let replayed = recorder(Mode::Replay, &fake.url, &store)
        .handle(asks_stream)
        .await
        .unwrap();
    assert!(matches!(replayed.response.body, ResponseBody::Full(_)));
    let bytes = replayed.response.into_bytes().await.unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&bytes).unwrap(),
        json!({"ok": true})
    );
}
