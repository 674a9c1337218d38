//! Streaming against realistic provider fixtures: assembly under any chunking, synthesis
//! framing, and the round trip final -> stream -> final.

use cassette_keying::Profile;
use cassette_wire::{
    response_summary, synthesize, synthesize_into, Assembler, StreamError, StreamFormat,
    SynthesisOptions, BLOCK_SIZE,
};
use serde_json::{json, Value};
use std::path::PathBuf;

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn json_fixture(name: &str) -> Value {
    serde_json::from_slice(&bytes(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Recorded streams and the final response each must assemble into.
const STREAMS: &[(&str, StreamFormat, &str)] = &[
    (
        "openai_chat_text.sse",
        StreamFormat::OpenaiChat,
        "openai_chat_text.final.json",
    ),
    (
        "openai_chat_tool.sse",
        StreamFormat::OpenaiChat,
        "openai_chat_tool.final.json",
    ),
    (
        "openai_completions.sse",
        StreamFormat::OpenaiCompletions,
        "openai_completions.final.json",
    ),
    (
        "openai_responses.sse",
        StreamFormat::OpenaiResponses,
        "openai_responses.final.json",
    ),
    (
        "openai_responses_tool.sse",
        StreamFormat::OpenaiResponses,
        "openai_responses_tool.final.json",
    ),
    (
        "anthropic_tool_use.sse",
        StreamFormat::AnthropicMessages,
        "anthropic_tool_use.final.json",
    ),
    (
        "anthropic_thinking.sse",
        StreamFormat::AnthropicMessages,
        "anthropic_thinking.final.json",
    ),
    (
        "ollama_chat.ndjson",
        StreamFormat::OllamaNdjson,
        "ollama_chat.final.json",
    ),
    (
        "ollama_chat_tool.ndjson",
        StreamFormat::OllamaNdjson,
        "ollama_chat_tool.final.json",
    ),
    (
        "ollama_generate.ndjson",
        StreamFormat::OllamaNdjson,
        "ollama_generate.final.json",
    ),
    (
        "gemini_text.sse",
        StreamFormat::GeminiSse,
        "gemini_text.final.json",
    ),
    (
        "gemini_tool.sse",
        StreamFormat::GeminiSse,
        "gemini_tool.final.json",
    ),
    (
        "gemini_tool.stream.json",
        StreamFormat::GeminiJson,
        "gemini_tool.final.json",
    ),
    (
        "generic.sse",
        StreamFormat::GenericSse,
        "generic.final.json",
    ),
    (
        "generic.ndjson",
        StreamFormat::GenericNdjson,
        "generic_ndjson.final.json",
    ),
];

/// Real non-streaming API responses: synthesizing a stream from them must work too.
const NON_STREAMING: &[(&str, StreamFormat)] = &[
    ("openai_chat.response.json", StreamFormat::OpenaiChat),
    (
        "openai_responses.response.json",
        StreamFormat::OpenaiResponses,
    ),
    ("anthropic.response.json", StreamFormat::AnthropicMessages),
    ("ollama_chat.response.json", StreamFormat::OllamaNdjson),
    ("ollama_generate.response.json", StreamFormat::OllamaNdjson),
    ("gemini.response.json", StreamFormat::GeminiSse),
    ("gemini.response.json", StreamFormat::GeminiJson),
];

/// A small deterministic generator so "random" chunkings are the same on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn assemble(format: StreamFormat, pieces: &[&[u8]]) -> Result<Value, StreamError> {
    let mut assembler = Assembler::new(format);
    for piece in pieces {
        assembler.push(piece);
    }
    assembler.finish()
}

fn random_cuts(body: &[u8], seed: u64, max: usize) -> Vec<&[u8]> {
    let mut rng = Rng(seed);
    let mut pieces = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let n = (1 + rng.below(max)).min(rest.len());
        let (piece, tail) = rest.split_at(n);
        pieces.push(piece);
        rest = tail;
    }
    pieces
}

/// Cuts right after the first byte of every multi-byte UTF-8 character.
fn utf8_cuts(body: &[u8]) -> Vec<&[u8]> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, &b) in body.iter().enumerate() {
        if b >= 0xC0 {
            pieces.push(&body[start..=i]);
            start = i + 1;
        }
    }
    pieces.push(&body[start..]);
    pieces
}

fn chunkings(body: &[u8]) -> Vec<(String, Vec<&[u8]>)> {
    let mut out = vec![
        ("whole".to_owned(), vec![body]),
        ("1-byte".to_owned(), body.chunks(1).collect()),
        ("utf8-split".to_owned(), utf8_cuts(body)),
    ];
    for seed in 1..=6u64 {
        out.push((
            format!("random seed {seed}"),
            random_cuts(body, seed * 7919, 48),
        ));
    }
    out
}

#[test]
fn fixtures_contain_multibyte_text() {
    // The UTF-8 cut tests only mean something if the fixtures hold multi-byte characters.
    for name in [
        "openai_chat_text.sse",
        "openai_responses.sse",
        "anthropic_thinking.sse",
        "gemini_text.sse",
    ] {
        assert!(bytes(name).iter().any(|&b| b >= 0xC0), "{name}");
    }
}

#[test]
fn fixtures_assemble_under_any_chunking() {
    for &(stream, format, expected) in STREAMS {
        let body = bytes(stream);
        let expected = json_fixture(expected);
        for (label, pieces) in chunkings(&body) {
            let got = assemble(format, &pieces).unwrap_or_else(|e| panic!("{stream} {label}: {e}"));
            assert_eq!(got, expected, "{stream} cut {label}");
        }
    }
}

#[test]
fn fixtures_assemble_with_crlf_and_cr_line_endings() {
    for &(stream, format, expected) in STREAMS {
        let text = String::from_utf8(bytes(stream)).unwrap();
        let expected = json_fixture(expected);
        for (label, ending) in [("CRLF", "\r\n"), ("CR", "\r")] {
            if format == StreamFormat::GenericSse && ending == "\r" {
                // The generic fixture's data has no bare CR to lose; it is covered by CRLF.
                continue;
            }
            let body = text.replace('\n', ending).into_bytes();
            for seed in [3u64, 11, 42] {
                let pieces = random_cuts(&body, seed, 9);
                let got =
                    assemble(format, &pieces).unwrap_or_else(|e| panic!("{stream} {label}: {e}"));
                assert_eq!(got, expected, "{stream} {label} seed {seed}");
            }
        }
    }
}

fn round_trip(format: StreamFormat, final_response: &Value, what: &str) {
    for chunk_size in [1, 3, 17, 64, 4096, 0] {
        let options = SynthesisOptions {
            chunk_size,
            include_usage: true,
        };
        let pieces = synthesize(format, final_response, &options)
            .unwrap_or_else(|e| panic!("{what}: synthesize: {e}"));
        if chunk_size > 0 {
            let (last, rest) = pieces.split_last().expect("a non-empty stream");
            assert!(
                rest.iter().all(|p| p.len() == chunk_size),
                "{what}: piece sizes"
            );
            assert!(
                !last.is_empty() && last.len() <= chunk_size,
                "{what}: last piece"
            );
        } else {
            assert_eq!(pieces.len(), 1, "{what}: chunk_size 0 sends one piece");
        }
        let slices: Vec<&[u8]> = pieces.iter().map(|p| p.as_ref()).collect();
        let back = assemble(format, &slices)
            .unwrap_or_else(|e| panic!("{what}: re-assemble at chunk size {chunk_size}: {e}"));
        assert_eq!(&back, final_response, "{what}: chunk size {chunk_size}");
    }
}

#[test]
fn recorded_finals_round_trip_through_synthesis() {
    for &(_, format, expected) in STREAMS {
        round_trip(format, &json_fixture(expected), expected);
    }
}

#[test]
fn real_non_streaming_responses_synthesize_and_round_trip() {
    for &(name, format) in NON_STREAMING {
        round_trip(format, &json_fixture(name), name);
    }
}

/// The body [`synthesize_into`] hands on, block by block, and the number of blocks.
fn blocks_of(format: StreamFormat, final_response: &Value) -> (Vec<u8>, usize) {
    let mut body = Vec::new();
    let mut blocks = 0;
    let mut sink = |block: bytes::Bytes| {
        assert!(!block.is_empty(), "no empty block");
        body.extend_from_slice(&block);
        blocks += 1;
        true
    };
    synthesize_into(
        format,
        final_response,
        &SynthesisOptions::default(),
        &mut sink,
    )
    .unwrap();
    (body, blocks)
}

#[test]
fn block_by_block_synthesis_is_the_same_body() {
    let finals = STREAMS
        .iter()
        .map(|&(_, format, name)| (format, name))
        .chain(NON_STREAMING.iter().map(|&(name, format)| (format, name)));
    for (format, name) in finals {
        let final_response = json_fixture(name);
        let whole = synthesize(format, &final_response, &SynthesisOptions::default())
            .unwrap()
            .concat();
        assert_eq!(blocks_of(format, &final_response).0, whole, "{name}");
    }
}

#[test]
fn a_long_answer_is_handed_on_in_blocks_until_nobody_reads() {
    let text = "All work and no play makes Jack a dull boy. ".repeat(20_000);
    let answers = [
        (
            StreamFormat::OpenaiChat,
            json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                   "choices": [{"index": 0, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": text}}]}),
        ),
        (
            StreamFormat::AnthropicMessages,
            json!({"id": "m", "type": "message", "role": "assistant", "model": "m",
                   "content": [{"type": "text", "text": text}],
                   "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}),
        ),
        (
            StreamFormat::GeminiSse,
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                                   "finishReason": "STOP", "index": 0}],
                   "modelVersion": "m"}),
        ),
        (
            StreamFormat::GeminiJson,
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                                   "finishReason": "STOP", "index": 0}],
                   "modelVersion": "m"}),
        ),
        (
            StreamFormat::OllamaNdjson,
            json!({"model": "m", "created_at": "t", "done": true,
                   "message": {"role": "assistant", "content": text}}),
        ),
    ];
    for (format, final_response) in answers {
        let (body, blocks) = blocks_of(format, &final_response);
        assert!(blocks > 10, "{format}: {blocks} blocks");
        let whole = synthesize(format, &final_response, &SynthesisOptions::default()).unwrap();
        assert!(body == whole.concat(), "{format}: the same body");

        // A reader that leaves after the first block gets no more, and synthesis ends cleanly.
        let mut handed = Vec::new();
        let mut sink = |block: bytes::Bytes| {
            handed.push(block.len());
            false
        };
        synthesize_into(
            format,
            &final_response,
            &SynthesisOptions::default(),
            &mut sink,
        )
        .unwrap();
        assert_eq!(handed.len(), 1, "{format}");
        assert!(
            handed[0] >= BLOCK_SIZE && handed[0] < 2 * BLOCK_SIZE,
            "{format}"
        );
    }
}

fn body_of(format: StreamFormat, final_response: &Value, include_usage: bool) -> String {
    let options = SynthesisOptions {
        chunk_size: 5,
        include_usage,
    };
    let pieces = synthesize(format, final_response, &options).unwrap();
    String::from_utf8(pieces.concat()).unwrap()
}

/// A deliberately simple SSE reader, independent of the module's: (event name, data).
fn sse_events(body: &str) -> Vec<(Option<String>, String)> {
    assert!(body.ends_with("\n\n"), "a stream ends with a blank line");
    body.trim_end_matches('\n')
        .split("\n\n")
        .map(|block| {
            let mut name = None;
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    name = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push(v);
                } else {
                    panic!("unexpected line {line:?}");
                }
            }
            (name, data.join("\n"))
        })
        .collect()
}

#[test]
fn openai_chat_framing() {
    let final_response = json_fixture("openai_chat.response.json");
    for include_usage in [false, true] {
        let events = sse_events(&body_of(
            StreamFormat::OpenaiChat,
            &final_response,
            include_usage,
        ));
        let (last, chunks) = events.split_last().unwrap();
        assert_eq!(last, &(None, "[DONE]".to_owned()));
        let chunks: Vec<Value> = chunks
            .iter()
            .map(|(name, data)| {
                assert_eq!(name, &None, "chat chunks have no event names");
                serde_json::from_str(data).unwrap()
            })
            .collect();
        for chunk in &chunks {
            assert_eq!(chunk["object"], "chat.completion.chunk");
            assert_eq!(chunk["id"], final_response["id"]);
            assert_eq!(chunk["model"], final_response["model"]);
            assert_eq!(chunk.get("usage").is_some(), include_usage);
        }
        let first = &chunks[0]["choices"][0]["delta"];
        assert_eq!(first["role"], "assistant");
        assert_eq!(first["content"], "");
        let usage_chunks: Vec<&Value> = chunks
            .iter()
            .filter(|c| c["choices"] == json!([]))
            .collect();
        if include_usage {
            assert_eq!(usage_chunks.len(), 1);
            assert_eq!(usage_chunks[0]["usage"], final_response["usage"]);
            assert_eq!(chunks.last().unwrap()["usage"], final_response["usage"]);
        } else {
            assert!(usage_chunks.is_empty());
        }
        let finish: Vec<&Value> = chunks
            .iter()
            .filter_map(|c| c["choices"].get(0))
            .filter(|c| !c["finish_reason"].is_null())
            .collect();
        assert_eq!(finish.len(), 1);
        assert_eq!(finish[0]["finish_reason"], "tool_calls");
        assert_eq!(finish[0]["delta"], json!({}));
        // The tool call opens with id, type and name, then only argument pieces follow.
        let calls: Vec<&Value> = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"].get("tool_calls"))
            .map(|t| &t[0])
            .collect();
        assert!(calls.len() > 2);
        assert_eq!(calls[0]["id"], "call_Zx81kQ0vNm3LbT4rW7yHs2Pd");
        assert_eq!(calls[0]["function"]["name"], "lookup_order");
        assert_eq!(calls[0]["function"]["arguments"], "");
        assert!(calls[1..]
            .iter()
            .all(|c| c.get("id").is_none() && c["function"].get("name").is_none()));
    }
}

#[test]
fn openai_chat_without_usage_in_final_sends_no_usage_chunk() {
    let final_response = json_fixture("openai_chat_tool.final.json");
    let events = sse_events(&body_of(StreamFormat::OpenaiChat, &final_response, true));
    assert!(events.iter().all(|(_, data)| data == "[DONE]"
        || !serde_json::from_str::<Value>(data).unwrap()["choices"]
            .as_array()
            .unwrap()
            .is_empty()));
}

#[test]
fn openai_responses_framing() {
    let final_response = json_fixture("openai_responses.response.json");
    let events = sse_events(&body_of(
        StreamFormat::OpenaiResponses,
        &final_response,
        false,
    ));
    let mut types = Vec::new();
    for (index, (name, data)) in events.iter().enumerate() {
        let data: Value = serde_json::from_str(data).unwrap();
        assert_eq!(
            name.as_deref(),
            data["type"].as_str(),
            "event line matches type"
        );
        assert_eq!(
            data["sequence_number"],
            json!(index),
            "sequence numbers count up"
        );
        types.push(data["type"].as_str().unwrap().to_owned());
    }
    assert_eq!(types[0], "response.created");
    assert_eq!(types[1], "response.in_progress");
    assert_eq!(types.last().unwrap(), "response.completed");
    for expected in [
        "response.output_item.added",
        "response.reasoning_summary_text.delta",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ] {
        assert!(types.iter().any(|t| t == expected), "missing {expected}");
    }
    let created: Value = serde_json::from_str(&events[0].1).unwrap();
    assert_eq!(created["response"]["status"], "in_progress");
    assert_eq!(created["response"]["output"], json!([]));
    let completed: Value = serde_json::from_str(&events.last().unwrap().1).unwrap();
    assert_eq!(completed["response"], final_response);
}

#[test]
fn gemini_framing() {
    let final_response = json_fixture("gemini.response.json");
    let events = sse_events(&body_of(StreamFormat::GeminiSse, &final_response, false));
    let chunks: Vec<Value> = events
        .iter()
        .map(|(name, data)| {
            assert_eq!(name, &None, "Gemini events have no names");
            serde_json::from_str(data).unwrap()
        })
        .collect();
    assert!(chunks.len() > 3, "the text is cut into pieces");
    let (last, rest) = chunks.split_last().unwrap();
    for chunk in &chunks {
        assert_eq!(chunk["modelVersion"], final_response["modelVersion"]);
        assert_eq!(chunk["responseId"], final_response["responseId"]);
        let candidate = &chunk["candidates"][0];
        assert_eq!(candidate["content"]["role"], "model");
        assert_eq!(candidate["content"]["parts"].as_array().unwrap().len(), 1);
    }
    for chunk in rest {
        let candidate = &chunk["candidates"][0];
        assert!(candidate.get("finishReason").is_none(), "{chunk}");
        assert!(chunk.get("usageMetadata").is_none(), "{chunk}");
        assert!(
            candidate["content"]["parts"][0]["text"].is_string(),
            "{chunk}"
        );
    }
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"], final_response["usageMetadata"]);
    assert_eq!(
        last["candidates"][0]["content"]["parts"][0]["functionCall"]["name"],
        "get_weather"
    );

    // Without `alt=sse`: the same chunks as one JSON array.
    let array: Value =
        serde_json::from_str(&body_of(StreamFormat::GeminiJson, &final_response, false)).unwrap();
    assert_eq!(array, Value::Array(chunks));
    assert_eq!(StreamFormat::GeminiJson.content_type(), "application/json");
}

#[test]
fn anthropic_framing() {
    let final_response = json_fixture("anthropic.response.json");
    let events = sse_events(&body_of(
        StreamFormat::AnthropicMessages,
        &final_response,
        false,
    ));
    let mut types = Vec::new();
    for (name, data) in &events {
        let data: Value = serde_json::from_str(data).unwrap();
        assert_eq!(
            name.as_deref(),
            data["type"].as_str(),
            "event line matches type"
        );
        types.push(data["type"].as_str().unwrap().to_owned());
    }
    assert_eq!(types.first().unwrap(), "message_start");
    assert_eq!(types.last().unwrap(), "message_stop");
    assert_eq!(types[types.len() - 2], "message_delta");
    assert!(types.iter().any(|t| t == "ping"));
    let count = |t: &str| types.iter().filter(|x| *x == t).count();
    assert_eq!(count("content_block_start"), 2);
    assert_eq!(count("content_block_stop"), 2);
    let start: Value = serde_json::from_str(&events[0].1).unwrap();
    assert_eq!(start["message"]["content"], json!([]));
    assert_eq!(start["message"]["stop_reason"], Value::Null);
    let delta: Value = serde_json::from_str(&events[events.len() - 2].1).unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 88);
    let json_deltas = events
        .iter()
        .filter(|(_, d)| d.contains("input_json_delta"))
        .count();
    assert!(json_deltas > 2, "tool input streams in pieces");
}

#[test]
fn ollama_framing() {
    for name in ["ollama_chat.response.json", "ollama_generate.response.json"] {
        let final_response = json_fixture(name);
        let body = body_of(StreamFormat::OllamaNdjson, &final_response, false);
        assert!(body.ends_with('\n'));
        let lines: Vec<Value> = body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let (last, rest) = lines.split_last().unwrap();
        assert!(rest.len() > 3, "{name}: text streams in pieces");
        assert!(rest
            .iter()
            .all(|l| l["done"] == false && l["model"] == "llama3.2"));
        assert_eq!(last["done"], true);
        assert_eq!(last["done_reason"], "stop");
        assert_eq!(last["eval_count"], final_response["eval_count"]);
    }
}

#[test]
fn generic_events_survive_verbatim() {
    let final_response = json_fixture("generic.final.json");
    let body = body_of(StreamFormat::GenericSse, &final_response, false);
    assert!(body.contains("data: {\"pct\": 100,\ndata:  \"note\": \"multi-line\"}\n"));
    assert!(body.contains("id: 2\n"));
    assert!(body.contains("retry: 5000\n"));
    let ndjson = json_fixture("generic_ndjson.final.json");
    let body = body_of(StreamFormat::GenericNdjson, &ndjson, false);
    let original = String::from_utf8(bytes("generic.ndjson")).unwrap();
    assert_eq!(
        body,
        original.replace("\n\n", "\n"),
        "lines come back byte for byte"
    );
    let err = synthesize(
        StreamFormat::GenericSse,
        &json!({"choices": []}),
        &SynthesisOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("events"), "{err}");
}

#[test]
fn summaries_of_recorded_finals() {
    let chat = response_summary(
        Profile::OpenaiChat,
        &json_fixture("openai_chat_tool.final.json"),
    );
    assert_eq!(chat.model.as_deref(), Some("gpt-4o-2024-08-06"));
    assert_eq!(chat.finish_reason.as_deref(), Some("tool_calls"));
    let names: Vec<&str> = chat.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["get_weather", "get_time"]);
    assert_eq!(
        chat.tool_calls[0].arguments,
        json!({"city": "Paris", "unit": "celsius"})
    );

    let text = response_summary(
        Profile::OpenaiChat,
        &json_fixture("openai_chat_text.final.json"),
    );
    assert_eq!(text.text, "Bonjour ! Ça va très bien, merci. 😊 Et vous ?");
    assert_eq!(text.usage.unwrap()["total_tokens"], 32);

    let anthropic = response_summary(
        Profile::AnthropicMessages,
        &json_fixture("anthropic_tool_use.final.json"),
    );
    assert_eq!(anthropic.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(anthropic.usage.unwrap()["output_tokens"], 74);
    assert_eq!(
        anthropic.tool_calls[0].arguments,
        json!({"city": "Paris", "unit": "celsius"})
    );

    let responses = response_summary(
        Profile::OpenaiResponses,
        &json_fixture("openai_responses_tool.final.json"),
    );
    assert_eq!(responses.finish_reason.as_deref(), Some("completed"));
    assert_eq!(responses.tool_calls[0].name, "get_weather");
    assert_eq!(responses.tool_calls[0].arguments, json!({"city": "Paris"}));

    let ollama = response_summary(
        Profile::OllamaChat,
        &json_fixture("ollama_chat_tool.final.json"),
    );
    assert_eq!(ollama.tool_calls[0].id.as_deref(), Some("call_k2m9x1qz"));
    assert_eq!(ollama.usage.unwrap()["eval_count"], 27);

    let gemini = response_summary(
        Profile::GeminiGenerate,
        &json_fixture("gemini_tool.final.json"),
    );
    assert_eq!(gemini.model.as_deref(), Some("gemini-2.5-flash"));
    assert_eq!(gemini.finish_reason.as_deref(), Some("STOP"));
    assert_eq!(gemini.text, "I'll check the weather in Paris and Tokyo.");
    assert_eq!(gemini.tool_calls.len(), 2);
    assert_eq!(
        gemini.tool_calls[1].arguments,
        json!({"city": "Tokyo", "unit": "celsius"})
    );
    assert_eq!(gemini.usage.unwrap()["totalTokenCount"], 93);
    let thinking = response_summary(
        Profile::GeminiGenerate,
        &json_fixture("gemini_text.final.json"),
    );
    assert!(
        thinking.text.starts_with("Your refund"),
        "thoughts are not text"
    );
}

fn error_of(format: StreamFormat, body: &[u8]) -> StreamError {
    match assemble(format, &[body]) {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e,
    }
}

#[test]
fn truncated_streams_are_incomplete() {
    for &(stream, format, _) in STREAMS {
        if matches!(
            format,
            StreamFormat::GenericSse | StreamFormat::GenericNdjson
        ) {
            continue;
        }
        let body = bytes(stream);
        let err = error_of(format, &body[..body.len() / 2]);
        assert!(
            matches!(err, StreamError::Incomplete { .. }),
            "{stream}: {err}"
        );
        assert!(matches!(
            error_of(format, b""),
            StreamError::Incomplete { .. }
        ));
    }
}

#[test]
fn malformed_streams_name_the_place() {
    let err = error_of(
        StreamFormat::OpenaiChat,
        b"data: {\"id\":\"x\",\"choices\":[]}\n\ndata: {not json\n\n",
    );
    let message = err.to_string();
    assert!(matches!(err, StreamError::Malformed { .. }), "{message}");
    assert!(
        message.contains("event 2") && message.contains("line 4"),
        "{message}"
    );

    let err = error_of(
        StreamFormat::AnthropicMessages,
        b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n",
    );
    assert!(err.to_string().contains("before `message_start`"), "{err}");

    let body = String::from_utf8(bytes("anthropic_tool_use.sse"))
        .unwrap()
        .replace("elsius\\\"}", "elsius\\\"");
    let err = error_of(StreamFormat::AnthropicMessages, body.as_bytes());
    assert!(err.to_string().contains("tool input"), "{err}");

    let err = error_of(
        StreamFormat::OllamaNdjson,
        b"{\"model\":\"m\",\"done\":false}\n[1,2]\n",
    );
    assert!(err.to_string().contains("line 2"), "{err}");

    let err = error_of(
        StreamFormat::OpenaiResponses,
        b"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":[]}\n\n",
    );
    assert!(matches!(err, StreamError::Malformed { .. }), "{err}");
    assert!(err.to_string().contains("`response.completed`"), "{err}");

    // A delta the assembler cannot place is no reason to refuse the recording: the terminal
    // event carries the whole answer.
    let body = String::from_utf8(bytes("openai_responses.sse"))
        .unwrap()
        .replace("event: response.content_part.added\n", "event: ignored\n")
        .replace(
            "\"type\":\"response.content_part.added\"",
            "\"type\":\"ignored\"",
        );
    let got = assemble(StreamFormat::OpenaiResponses, &[body.as_bytes()]).unwrap();
    assert_eq!(got, json_fixture("openai_responses.final.json"));

    let err = error_of(
        StreamFormat::OpenaiChat,
        b"data: {\"choices\":[]}\n\ndata: \xff\n\n",
    );
    assert_eq!(
        err,
        StreamError::InvalidUtf8 {
            format: "openai.chat",
            line: 3
        }
    );
}

#[test]
fn upstream_errors_inside_streams() {
    let cases: &[(StreamFormat, &[u8], &str)] = &[
        (
            StreamFormat::AnthropicMessages,
            b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
            "overloaded_error: Overloaded",
        ),
        (
            StreamFormat::OpenaiChat,
            b"data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\"}}\n\n",
            "server_error: The server had an error",
        ),
        (
            StreamFormat::OpenaiResponses,
            b"event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Slow down\",\"sequence_number\":0}\n\n",
            "Slow down",
        ),
        (
            StreamFormat::OllamaNdjson,
            b"{\"error\":\"model 'nope' not found\"}\n",
            "model 'nope' not found",
        ),
    ];
    for (format, body, expected) in cases {
        let err = error_of(*format, body);
        assert!(matches!(err, StreamError::Upstream { .. }), "{err}");
        assert!(err.to_string().contains(expected), "{err}");
    }
}

#[test]
fn responses_terminal_event_without_output_is_filled_from_items() {
    let body = String::from_utf8(bytes("openai_responses_tool.sse")).unwrap();
    let mut final_response = json_fixture("openai_responses_tool.final.json");
    let mut stripped = final_response.clone();
    stripped.as_object_mut().unwrap().remove("output");
    let last_event = body.rfind("event: response.completed").unwrap();
    let completed =
        json!({"type": "response.completed", "sequence_number": 11, "response": stripped});
    let body = format!(
        "{}event: response.completed\ndata: {}\n\n",
        &body[..last_event],
        completed
    );
    let got = assemble(StreamFormat::OpenaiResponses, &[body.as_bytes()]).unwrap();
    assert_eq!(got, final_response);
    final_response["output"] = json!([]);
    assert_ne!(got, final_response, "the items really came from the stream");
}

#[test]
fn events_after_the_end_are_ignored_and_missing_final_blank_line_is_tolerated() {
    let mut body = bytes("openai_chat_tool.sse");
    body.extend_from_slice(b"data: {\"garbage\": true}\n\n");
    let got = assemble(StreamFormat::OpenaiChat, &[&body]).unwrap();
    assert_eq!(got, json_fixture("openai_chat_tool.final.json"));

    let body = bytes("anthropic_tool_use.sse");
    let trimmed = body.strip_suffix(b"\n\n").unwrap();
    let got = assemble(StreamFormat::AnthropicMessages, &[trimmed]).unwrap();
    assert_eq!(got, json_fixture("anthropic_tool_use.final.json"));
}

#[test]
fn less_common_shapes_round_trip() {
    let cases = [
        (
            StreamFormat::OpenaiChat,
            json!({
                "id": "chatcmpl-n2", "object": "chat.completion", "created": 1, "model": "deepseek-reasoner",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "Four.", "reasoning_content": "2 + 2 is 4, said briefly."},
                     "logprobs": {"content": [{"token": "Four", "logprob": -0.1, "bytes": [70, 111, 117, 114], "top_logprobs": []}], "refusal": null},
                     "finish_reason": "stop"},
                    {"index": 1, "message": {"role": "assistant", "content": null, "refusal": "I can't help with that."},
                     "logprobs": null, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}
            }),
        ),
        (
            StreamFormat::OpenaiResponses,
            json!({
                "id": "resp_1", "object": "response", "created_at": 1, "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"}, "model": "gpt-4.1",
                "output": [
                    {"id": "msg_1", "type": "message", "status": "incomplete", "role": "assistant", "content": [
                        {"type": "refusal", "refusal": "No."},
                        {"type": "output_text", "annotations": [{"type": "url_citation", "url": "https://example.com", "start_index": 0, "end_index": 4, "title": "Ex"}], "logprobs": [], "text": "Half an ans"}
                    ]},
                    {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}}
                ],
                "usage": {"input_tokens": 5, "output_tokens": 16, "total_tokens": 21}
            }),
        ),
        (
            StreamFormat::AnthropicMessages,
            json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-4-1",
                "content": [
                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
                    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "weather Paris"}},
                    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"type": "web_search_result", "title": "Météo", "url": "https://example.com", "encrypted_content": "abc", "page_age": null}]},
                    {"type": "text", "text": "It is sunny.", "citations": [{"type": "web_search_result_location", "cited_text": "sunny", "url": "https://example.com", "title": "Météo", "encrypted_index": "x"}]},
                    {"type": "tool_use", "id": "toolu_2", "name": "noop", "input": {}}
                ],
                "stop_reason": "max_tokens", "stop_sequence": null, "container": null,
                "usage": {"input_tokens": 10, "output_tokens": 0, "server_tool_use": {"web_search_requests": 1}}
            }),
        ),
        (
            StreamFormat::OllamaNdjson,
            json!({
                "model": "qwen3", "created_at": "2025-01-01T00:00:00Z", "response": "", "thinking": "Nothing to say.",
                "done": true, "done_reason": "length", "eval_count": 3
            }),
        ),
    ];
    for (format, final_response) in cases {
        round_trip(format, &final_response, format.name());
    }
}

#[test]
fn compatible_servers_tool_calls_without_index() {
    let body = concat!(
        "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":\"}}]}}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let got = assemble(StreamFormat::OpenaiChat, &[body.as_bytes()]).unwrap();
    assert_eq!(
        got["choices"][0]["message"]["tool_calls"],
        json!([
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}
        ])
    );
    assert_eq!(got["choices"][0]["message"]["content"], Value::Null);
    assert_eq!(got["choices"][0]["finish_reason"], "tool_calls");
}

#[test]
fn azure_style_prelude_and_empty_model_do_not_erase_the_model() {
    let body = concat!(
        "data: {\"choices\":[],\"created\":0,\"id\":\"\",\"model\":\"\",\"object\":\"\",\"prompt_filter_results\":[{\"prompt_index\":0,\"content_filter_results\":{}}]}\n\n",
        "data: {\"choices\":[{\"content_filter_results\":{},\"delta\":{\"content\":\"\",\"role\":\"assistant\"},\"finish_reason\":null,\"index\":0,\"logprobs\":null}],\"created\":1753961234,\"id\":\"chatcmpl-az\",\"model\":\"gpt-4o-2024-11-20\",\"object\":\"chat.completion.chunk\",\"system_fingerprint\":\"fp_ee1d74bde0\"}\n\n",
        "data: {\"choices\":[{\"content_filter_results\":{\"hate\":{\"filtered\":false,\"severity\":\"safe\"}},\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null,\"index\":0,\"logprobs\":null}],\"created\":1753961234,\"id\":\"chatcmpl-az\",\"model\":\"gpt-4o-2024-11-20\",\"object\":\"chat.completion.chunk\",\"system_fingerprint\":\"fp_ee1d74bde0\"}\n\n",
        "data: {\"choices\":[{\"content_filter_results\":{},\"delta\":{},\"finish_reason\":\"stop\",\"index\":0,\"logprobs\":null}],\"created\":1753961234,\"id\":\"chatcmpl-az\",\"model\":\"\",\"object\":\"chat.completion.chunk\",\"system_fingerprint\":\"fp_ee1d74bde0\"}\n\n",
        "data: [DONE]\n\n",
    );
    let got = assemble(StreamFormat::OpenaiChat, &[body.as_bytes()]).unwrap();
    assert_eq!(got["model"], "gpt-4o-2024-11-20");
    assert_eq!(got["id"], "chatcmpl-az");
    assert_eq!(got["choices"][0]["message"]["content"], "Hi");
    assert_eq!(got["choices"][0]["finish_reason"], "stop");
    assert_eq!(got["object"], "chat.completion");
}
