//! Ollama streams: one JSON object per line (`message` fragments for chat, `response`
//! fragments for generate), the last one `done: true` with the reason, counts and durations.

use super::framing::{members, Line};
use super::{error_message, fragments, malformed, merge_field, parse_json, synthesis_error};
use super::{Out, StreamError, StreamFormat};
use serde_json::{json, Map, Value};

const FORMAT: StreamFormat = StreamFormat::OllamaNdjson;

/// Fields of a generate line that stream in pieces.
const GENERATE_TEXT: &[&str] = &["response", "thinking"];

#[derive(Debug, Default)]
pub(crate) struct Assembly {
    /// Chat: the message grown from every line's fragments.
    message: Option<Map<String, Value>>,
    /// Generate: the text fields grown from every line.
    text: Map<String, Value>,
    last: Option<Map<String, Value>>,
    done: bool,
}

impl Assembly {
    pub(super) fn line(&mut self, line: &Line) -> Result<(), StreamError> {
        let format = FORMAT.name();
        let text = line.text.trim();
        if self.done || text.is_empty() {
            return Ok(());
        }
        let at = || format!("line {}", line.no);
        let Value::Object(mut object) = parse_json(format, &at, text)? else {
            return Err(malformed(format, at(), "line is not a JSON object"));
        };
        if let Some(error) = object.get("error").filter(|e| !e.is_null()) {
            return Err(StreamError::Upstream {
                format,
                at: at(),
                message: error_message(error),
            });
        }
        match object.remove("message") {
            Some(Value::Object(fragment)) => {
                let message = self.message.get_or_insert_with(Map::new);
                for (key, value) in fragment {
                    if key == "role" {
                        message.insert(key, value);
                    } else {
                        merge_field(message, &key, value);
                    }
                }
            }
            Some(Value::Null) | None => {}
            Some(_) => return Err(malformed(format, at(), "`message` is not an object")),
        }
        for key in GENERATE_TEXT {
            if let Some(value) = object.remove(*key) {
                merge_field(&mut self.text, key, value);
            }
        }
        self.done = object.get("done").and_then(Value::as_bool).unwrap_or(false);
        self.last = Some(object);
        Ok(())
    }

    pub(super) fn finish(self) -> Result<Value, StreamError> {
        let (Some(mut last), true) = (self.last, self.done) else {
            return Err(StreamError::Incomplete {
                format: FORMAT.name(),
                missing: "the `\"done\": true` line".into(),
            });
        };
        if let Some(message) = self.message {
            last.insert("message".into(), Value::Object(message));
        }
        last.extend(self.text);
        Ok(Value::Object(last))
    }
}

/// An Ollama chat or generate response as the NDJSON stream a client would have received.
pub(crate) fn synthesize(final_response: &Value, out: &mut Out<'_>) -> Result<(), StreamError> {
    let Some(response) = final_response.as_object() else {
        return Err(synthesis_error(
            FORMAT,
            "the final response is not a JSON object",
        ));
    };
    let mut head = Map::new();
    for key in ["model", "created_at"] {
        if let Some(value) = response.get(key) {
            head.insert(key.into(), value.clone());
        }
    }
    let mut line = |fields: Map<String, Value>| {
        if out.is_closed() {
            return;
        }
        let mut object = head.clone();
        object.extend(fields);
        object.insert("done".into(), json!(false));
        let mut text = Value::Object(object).to_string();
        text.push('\n');
        out.write(text.as_bytes());
    };
    let mut last = response.clone();
    match response.get("message") {
        Some(Value::Object(message)) => {
            let rest = chat_lines(message, &mut line);
            last.insert("message".into(), Value::Object(rest));
        }
        Some(_) => return Err(synthesis_error(FORMAT, "`message` is not an object")),
        None if !response.contains_key("response") => {
            return Err(synthesis_error(
                FORMAT,
                "the final response has neither `message` (chat) nor `response` (generate)",
            ))
        }
        None => generate_lines(response, &mut last, &mut line),
    }
    last.insert("done".into(), json!(true));
    let mut text = Value::Object(last).to_string();
    text.push('\n');
    out.write(text.as_bytes());
    Ok(())
}

/// The lines of a chat answer: thinking and content in pieces, then the tool calls at once.
/// Returns the message the last line carries: what was not streamed.
fn chat_lines(
    message: &Map<String, Value>,
    line: &mut dyn FnMut(Map<String, Value>),
) -> Map<String, Value> {
    let role = message
        .get("role")
        .cloned()
        .unwrap_or_else(|| json!("assistant"));
    let mut rest = message.clone();
    for key in ["thinking", "content"] {
        let Some(text) = message.get(key).and_then(Value::as_str) else {
            continue;
        };
        for piece in fragments(text) {
            let mut msg = Map::new();
            msg.insert("role".into(), role.clone());
            msg.insert("content".into(), json!(""));
            msg.insert(key.into(), json!(piece));
            line(members(json!({ "message": msg })));
        }
        if key == "content" {
            rest.insert(key.into(), json!(""));
        } else if !text.is_empty() {
            rest.remove(key);
        }
    }
    if let Some(calls @ Value::Array(list)) = message.get("tool_calls") {
        if !list.is_empty() {
            line(members(json!({
                "message": { "role": role, "content": "", "tool_calls": calls }
            })));
            rest.remove("tool_calls");
        }
    }
    rest.entry("content").or_insert_with(|| json!(""));
    rest
}

/// The lines of a generate answer: thinking and response in pieces, taken out of `last`.
fn generate_lines(
    response: &Map<String, Value>,
    last: &mut Map<String, Value>,
    line: &mut dyn FnMut(Map<String, Value>),
) {
    for key in ["thinking", "response"] {
        let Some(text) = response.get(key).and_then(Value::as_str) else {
            continue;
        };
        for piece in fragments(text) {
            let mut fields = Map::new();
            fields.insert("response".into(), json!(""));
            fields.insert(key.into(), json!(piece));
            line(fields);
        }
        if key == "response" {
            last.insert(key.into(), json!(""));
        } else if !text.is_empty() {
            last.remove(key);
        }
    }
}
