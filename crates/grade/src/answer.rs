//! What an LLM answered, in one shape whatever the provider: the text, the tool calls as
//! `{name, arguments}` and the finish reason, read with the wire crate's `response_summary` so
//! that graders, `show` and `diff` see exactly what the cassette metadata sees. A streamed
//! answer is read as a cassette stores it: assembled by the wire crate, then redacted.

use cassette_keying::Profile;
use cassette_tape::redact::Redactor;
use cassette_tape::StoredBody;
use cassette_wire::{response_summary, Assembler, ResponseSummary, StreamFormat};
use serde::Serialize;
use serde_json::Value;

pub use cassette_wire::ToolCall;

/// The meaning of a response body.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Answer {
    /// The generated text, text parts concatenated in order.
    pub text: String,
    /// Tool calls in order, `{name, arguments}` whatever the provider.
    pub tool_calls: Vec<ToolCall>,
    /// Finish or stop reason as the provider spelt it.
    pub finish: Option<String>,
    /// The model the answer names (it can differ from the requested alias).
    pub model: Option<String>,
}

/// A request answered: what a case's own request and each judge vote come back with.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The request's key, as its recording is stored under.
    pub key: String,
    /// Whether it was replayed rather than asked of the upstream.
    pub hit: bool,
    /// The HTTP status.
    pub status: u16,
    /// What it said.
    pub answer: Answer,
}

impl Reply {
    /// Whether the status is a success (2xx): only then is the answer graded.
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

impl From<ResponseSummary> for Answer {
    fn from(summary: ResponseSummary) -> Answer {
        Answer {
            text: summary.text,
            tool_calls: summary.tool_calls,
            finish: summary.finish_reason,
            model: summary.model,
        }
    }
}

/// Reads the answer out of a response body. Bodies that are not JSON are their own text.
pub fn from_bytes(profile: Profile, body: &[u8]) -> Answer {
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => from_json(profile, &value),
        Err(_) => Answer {
            text: String::from_utf8_lossy(body).into_owned(),
            ..Answer::default()
        },
    }
}

/// Reads the answer out of a response to a request for `path`, as a cassette would store it,
/// redacted by `redactor` (the recorder's, which seals the cassettes) before anything reads it:
/// an event stream (or NDJSON, or Gemini's JSON array) is assembled into its final response,
/// so a text streamed in deltas is one string, and a secret streamed in pieces is whole when
/// the credential shapes and the `[redact]` rules look for it. What a suite run grades, prints
/// and saves is never the stream's framing.
pub fn from_response(
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
    redactor: &Redactor,
) -> Answer {
    let profile = Profile::from_path(path);
    let detected = content_type.and_then(|content_type| {
        StreamFormat::detect_for_request(profile, Profile::path_streams(path), content_type)
    });
    let (mut stored, format) = match detected {
        Some(format) => assembled(format, content_type.unwrap_or_default(), body),
        None => (StoredBody::from_bytes(body), None),
    };
    redactor.response_body(&mut stored, format.map(StreamFormat::name), content_type);
    match stored {
        StoredBody::Json(value) if format.is_some_and(is_generic) => from_events(&value),
        StoredBody::Json(value) => from_json(profile, &value),
        StoredBody::Text(text) => Answer {
            text,
            ..Answer::default()
        },
        StoredBody::Empty => Answer::default(),
        // Not UTF-8: scanned for credential shapes as bytes, then read as its lossy text.
        binary @ StoredBody::Base64(_) => Answer {
            text: redactor.text(&String::from_utf8_lossy(
                &binary.to_bytes().unwrap_or_default(),
            )),
            ..Answer::default()
        },
    }
}

/// A stream as a cassette stores it, and the format it was read as: the final response its
/// format assembles into (a generic stream on a path that names no API is tried as each known
/// API's stream first, as [`from_json`] tries a body); its events verbatim when it does not
/// assemble (cut off, or ended by the upstream's error event); its bytes when it is not even
/// framed as events.
fn assembled(
    format: StreamFormat,
    content_type: &str,
    body: &[u8],
) -> (StoredBody, Option<StreamFormat>) {
    let guesses = GUESSES
        .iter()
        .filter(|_| is_generic(format))
        .filter_map(|p| Some((*p, StreamFormat::detect(*p, content_type)?)))
        .filter(|(_, guess)| !is_generic(*guess));
    for (profile, guess) in guesses {
        let mut assembler = Assembler::new(guess);
        assembler.push(body);
        if let Ok(value) = assembler.finish() {
            if !is_empty(&response_summary(profile, &value)) {
                return (StoredBody::Json(value), Some(guess));
            }
        }
    }
    let framing = (!is_generic(format)).then(|| format.framing());
    for format in std::iter::once(format).chain(framing) {
        let mut assembler = Assembler::new(format);
        assembler.push(body);
        if let Ok(value) = assembler.finish() {
            return (StoredBody::Json(value), Some(format));
        }
    }
    (StoredBody::from_bytes(body), None)
}

/// Whether a format keeps its events as they are (`{"events": [...]}`), with no meaning read.
fn is_generic(format: StreamFormat) -> bool {
    format.framing() == format
}

/// The answer of a stream kept event by event: each event's data (an NDJSON line, an SSE
/// event's `data`), one a line, without the framing.
fn from_events(value: &Value) -> Answer {
    let data: Vec<&str> = value["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|event| match event {
            Value::String(line) => Some(line.as_str()),
            Value::Object(event) => event.get("data")?.as_str(),
            _ => None,
        })
        .collect();
    Answer {
        text: data.join("\n"),
        ..Answer::default()
    }
}

/// Profiles tried, in order, for a body on a route whose path names no known API: a generic
/// `http` route may well serve an OpenAI-compatible or Anthropic-shaped API.
const GUESSES: &[Profile] = &[
    Profile::OpenaiChat,
    Profile::AnthropicMessages,
    Profile::OpenaiResponses,
    Profile::OllamaChat,
    Profile::OllamaGenerate,
    Profile::GeminiGenerate,
];

/// Reads the answer out of a JSON response with the wire crate's normalization (the one the
/// cassette metadata uses).
pub fn from_json(profile: Profile, value: &Value) -> Answer {
    let summary = response_summary(profile, value);
    if !is_empty(&summary) {
        return summary.into();
    }
    let guessed = GUESSES
        .iter()
        .filter(|p| **p != profile)
        .map(|p| response_summary(*p, value))
        .find(|s| !is_empty(s));
    match guessed {
        Some(summary) => summary.into(),
        // Not an LLM answer at all: grade the JSON text itself.
        None => Answer {
            text: match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
            finish: summary.finish_reason,
            model: summary.model,
            ..Answer::default()
        },
    }
}

/// A prefix of an answer's text short enough for a one-line reason.
pub fn shorten(text: &str) -> String {
    const MAX: usize = 120;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn is_empty(summary: &ResponseSummary) -> bool {
    summary.text.is_empty() && summary.tool_calls.is_empty() && summary.finish_reason.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_and_anthropic_tool_calls_normalize_alike() {
        let openai = json!({"choices": [{"finish_reason": "tool_calls", "message": {
            "content": null,
            "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}}]});
        let anthropic = json!({"type": "message", "stop_reason": "tool_use", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}}]});
        let a = from_json(Profile::OpenaiChat, &openai);
        let b = from_json(Profile::AnthropicMessages, &anthropic);
        let shape = |a: &Answer| -> Vec<(String, Value)> {
            a.tool_calls
                .iter()
                .map(|c| (c.name.clone(), c.arguments.clone()))
                .collect()
        };
        assert_eq!(shape(&a), shape(&b));
        assert_eq!(a.tool_calls[0].arguments, json!({"city": "Paris"}));
        assert_eq!(a.finish.as_deref(), Some("tool_calls"));
        assert_eq!(b.text, "Checking.");
    }

    const KEY: &str = "sk-ant-api03-Q9x2Lm7Vb4Kp1Zt8Rw3Yc6Hn0Js5Fd2Ga9Ue4Oi7_AA";

    /// `text` in OpenAI chat chunks of four characters; `done` ends the stream.
    fn chat_stream(text: &str, done: bool) -> String {
        let chars: Vec<char> = text.chars().collect();
        let mut out = String::new();
        for piece in chars.chunks(4) {
            let piece: String = piece.iter().collect();
            let chunk = json!({"object": "chat.completion.chunk", "model": "m",
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]});
            out.push_str(&format!("data: {chunk}\n\n"));
        }
        if done {
            let last = json!({"object": "chat.completion.chunk", "model": "m",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
            out.push_str(&format!("data: {last}\n\ndata: [DONE]\n\n"));
        }
        out
    }

    fn read(path: &str, content_type: &str, body: &str) -> Answer {
        from_response(
            path,
            Some(content_type),
            body.as_bytes(),
            &Redactor::default(),
        )
    }

    #[test]
    fn a_stream_is_read_assembled_and_a_key_streamed_in_pieces_redacted_whole() {
        let body = chat_stream(&format!("Your key is {KEY}. Keep it."), true);
        let answer = read("/v1/chat/completions", "text/event-stream", &body);
        assert_eq!(answer.text, "Your key is [REDACTED]. Keep it.");
        assert_eq!(answer.finish.as_deref(), Some("stop"));
        assert_eq!(answer.model.as_deref(), Some("m"));

        let events = [
            (
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_1",
                "type": "message", "role": "assistant", "model": "claude-x", "content": [],
                "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 0}}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": format!("Key: {}", &KEY[..10])}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": &KEY[10..]}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta",
                "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ];
        let body: String = events
            .iter()
            .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
            .collect();
        let answer = read("/v1/messages", "text/event-stream", &body);
        assert_eq!(answer.text, "Key: [REDACTED]");
        assert_eq!(answer.finish.as_deref(), Some("end_turn"));
    }

    #[test]
    fn a_generic_stream_is_tried_as_each_api_s_then_read_without_its_framing() {
        // An OpenAI-compatible stream on a path that names no API.
        let body = chat_stream("Hello there, friend.", true);
        let answer = read("/gateway/generate", "text/event-stream", &body);
        assert_eq!(answer.text, "Hello there, friend.");
        // Events of no known API: their data, one a line, a key split across them redacted.
        let body = format!(
            "event: delta\ndata: token {}\n\nevent: delta\ndata: {}\n\n",
            &KEY[..12],
            &KEY[12..]
        );
        let answer = read("/gateway/generate", "text/event-stream", &body);
        assert_eq!(answer.text, "token [REDACTED]\n");
        // A stream cut off before its end: its events' data, never the framing.
        let body = chat_stream("Cut", false);
        let answer = read("/v1/chat/completions", "text/event-stream", &body);
        assert!(!answer.text.contains("data:"), "{}", answer.text);
        assert!(
            answer.text.contains(r#""content":"Cut""#),
            "{}",
            answer.text
        );
        // A JSON answer reads as before, redacted.
        let body = json!({"choices": [{"message": {"content": format!("k {KEY}")},
            "finish_reason": "stop"}]});
        let answer = read(
            "/v1/chat/completions",
            "application/json",
            &body.to_string(),
        );
        assert_eq!(answer.text, "k [REDACTED]");
    }

    #[test]
    fn responses_ollama_and_plain_text() {
        let responses = json!({"status": "completed", "output": [
            {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
            {"type": "function_call", "name": "f", "arguments": "{}"}]});
        let r = from_json(Profile::OpenaiResponses, &responses);
        assert_eq!((r.text.as_str(), r.tool_calls.len()), ("Hi", 1));
        let ollama =
            json!({"message": {"role": "assistant", "content": "Yo"}, "done_reason": "stop"});
        let o = from_json(Profile::OllamaChat, &ollama);
        assert_eq!((o.text.as_str(), o.finish.as_deref()), ("Yo", Some("stop")));
        assert_eq!(from_bytes(Profile::Http, b"plain").text, "plain");
        // An OpenAI-compatible body on a generic route still reads as chat.
        let chat = json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]});
        assert_eq!(from_json(Profile::Http, &chat).text, "ok");
    }
}
