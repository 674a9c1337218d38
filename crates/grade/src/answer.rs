//! What an LLM answered, in one shape whatever the provider: the text, the tool calls as
//! `{name, arguments}` and the finish reason, read with the wire crate's `response_summary` so
//! that graders, `show` and `diff` see exactly what the cassette metadata sees.

use cassette_keying::Profile;
use cassette_wire::{response_summary, ResponseSummary};
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
