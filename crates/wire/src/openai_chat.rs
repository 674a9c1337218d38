//! OpenAI chat completions (and legacy text completions) streams: `data:` chunks, `[DONE]`.

use super::framing::SseEvent;
use super::{error_message, fragments, merge_field, parse_json, synthesis_error, write_sse, Out};
use super::{StreamError, StreamFormat};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Top-level chunk members that describe the transport, not the answer.
const TRANSPORT_MEMBERS: &[&str] = &["choices", "object", "usage", "obfuscation"];

#[derive(Debug)]
pub(crate) struct Assembly {
    legacy: bool,
    top: Map<String, Value>,
    choices: BTreeMap<u64, Choice>,
    usage: Option<Value>,
    chunks: u64,
    done: bool,
}

#[derive(Debug, Default)]
struct Choice {
    message: Map<String, Value>,
    text: String,
    tool_calls: BTreeMap<u64, Map<String, Value>>,
    finish_reason: Value,
    logprobs: Value,
    extra: Map<String, Value>,
}

impl Assembly {
    pub(super) fn new(legacy: bool) -> Self {
        Assembly {
            legacy,
            top: Map::new(),
            choices: BTreeMap::new(),
            usage: None,
            chunks: 0,
            done: false,
        }
    }

    fn format(&self) -> &'static str {
        if self.legacy {
            StreamFormat::OpenaiCompletions.name()
        } else {
            StreamFormat::OpenaiChat.name()
        }
    }

    pub(super) fn event(&mut self, event: &SseEvent) -> Result<(), StreamError> {
        let format = self.format();
        let data = event.data.trim();
        if self.done || data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let at = || event.at();
        let Value::Object(chunk) = parse_json(format, &at, data)? else {
            return Err(super::malformed(format, at(), "chunk is not a JSON object"));
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(StreamError::Upstream {
                format,
                at: at(),
                message: error_message(error),
            });
        }
        self.chunks += 1;
        for (key, value) in chunk {
            match key.as_str() {
                "usage" => {
                    if !value.is_null() {
                        self.usage = Some(value);
                    }
                }
                "choices" => {
                    let Value::Array(choices) = value else {
                        if value.is_null() {
                            continue;
                        }
                        return Err(super::malformed(format, at(), "`choices` is not an array"));
                    };
                    for (position, choice) in choices.into_iter().enumerate() {
                        let Value::Object(choice) = choice else {
                            return Err(super::malformed(
                                format,
                                at(),
                                format!("choices[{position}] is not an object"),
                            ));
                        };
                        self.choice(choice, position as u64, &at)?;
                    }
                }
                k if TRANSPORT_MEMBERS.contains(&k) => {}
                _ => {
                    // Ids and models repeat in every chunk; the latest one that says something
                    // wins (Azure opens with a chunk whose model is "").
                    let empty = value.is_null() || value.as_str() == Some("");
                    if !empty || !self.top.contains_key(&key) {
                        self.top.insert(key, value);
                    }
                }
            }
        }
        Ok(())
    }

    fn choice(
        &mut self,
        choice: Map<String, Value>,
        position: u64,
        at: &dyn Fn() -> String,
    ) -> Result<(), StreamError> {
        let format = self.format();
        let index = choice
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position);
        let acc = self.choices.entry(index).or_default();
        for (key, value) in choice {
            match key.as_str() {
                "index" => {}
                "finish_reason" => {
                    if !value.is_null() {
                        acc.finish_reason = value;
                    }
                }
                "logprobs" => merge_logprobs(&mut acc.logprobs, value),
                "text" if self.legacy => {
                    if let Value::String(text) = value {
                        acc.text.push_str(&text);
                    }
                }
                "delta" if !self.legacy => {
                    let Value::Object(delta) = value else {
                        if value.is_null() {
                            continue;
                        }
                        return Err(super::malformed(
                            format,
                            at(),
                            format!("choice {index}: `delta` is not an object"),
                        ));
                    };
                    for (key, value) in delta {
                        match key.as_str() {
                            "role" => {
                                if !value.is_null() {
                                    acc.message.insert(key, value);
                                }
                            }
                            "tool_calls" => tool_call_deltas(acc, value, index, format, at)?,
                            _ => merge_field(&mut acc.message, &key, value),
                        }
                    }
                }
                _ => merge_field(&mut acc.extra, &key, value),
            }
        }
        Ok(())
    }

    pub(super) fn finish(self) -> Result<Value, StreamError> {
        let format = self.format();
        if self.chunks == 0 {
            return Err(StreamError::Incomplete {
                format,
                missing: "its first chunk".into(),
            });
        }
        let finished = self.choices.values().any(|c| !c.finish_reason.is_null());
        if !self.done && !finished {
            return Err(StreamError::Incomplete {
                format,
                missing: "a finish_reason or `data: [DONE]`".into(),
            });
        }
        let mut out = self.top;
        let choices: Vec<Value> = self
            .choices
            .into_iter()
            .map(|(index, c)| {
                let mut choice = c.extra;
                choice.insert("index".into(), json!(index));
                if self.legacy {
                    choice.insert("text".into(), Value::String(c.text));
                } else {
                    let mut message = c.message;
                    message
                        .entry("role")
                        .or_insert_with(|| Value::String("assistant".into()));
                    message.entry("content").or_insert(Value::Null);
                    if !c.tool_calls.is_empty() {
                        let calls = c.tool_calls.into_values().map(Value::Object).collect();
                        message.insert("tool_calls".into(), Value::Array(calls));
                    }
                    choice.insert("message".into(), Value::Object(message));
                }
                choice.insert("logprobs".into(), c.logprobs);
                choice.insert("finish_reason".into(), c.finish_reason);
                Value::Object(choice)
            })
            .collect();
        let object = if self.legacy {
            "text_completion"
        } else {
            "chat.completion"
        };
        out.insert("object".into(), json!(object));
        out.insert("choices".into(), Value::Array(choices));
        if let Some(usage) = self.usage {
            out.insert("usage".into(), usage);
        }
        Ok(Value::Object(out))
    }
}

fn tool_call_deltas(
    acc: &mut Choice,
    value: Value,
    choice: u64,
    format: &'static str,
    at: &dyn Fn() -> String,
) -> Result<(), StreamError> {
    let Value::Array(calls) = value else {
        if value.is_null() {
            return Ok(());
        }
        return Err(super::malformed(
            format,
            at(),
            format!("choice {choice}: `delta.tool_calls` is not an array"),
        ));
    };
    for call in calls {
        let Value::Object(call) = call else {
            return Err(super::malformed(
                format,
                at(),
                format!("choice {choice}: a tool call delta is not an object"),
            ));
        };
        let has_id = call
            .get("id")
            .and_then(Value::as_str)
            .is_some_and(|id| !id.is_empty());
        // Some compatible servers omit `index`: a new id opens a call, otherwise the delta
        // continues the last one.
        let index = match call.get("index").and_then(Value::as_u64) {
            Some(index) => index,
            None => match acc.tool_calls.keys().next_back() {
                Some(&last) if !has_id => last,
                Some(&last) => last + 1,
                None => 0,
            },
        };
        let entry = acc.tool_calls.entry(index).or_default();
        for (key, value) in call {
            match key.as_str() {
                "index" => {}
                "id" | "type" => {
                    if value.as_str().is_some_and(|s| !s.is_empty()) || !entry.contains_key(&key) {
                        entry.insert(key, value);
                    }
                }
                "function" => {
                    let function = entry
                        .entry("function")
                        .or_insert_with(|| Value::Object(Map::new()));
                    match (function, value) {
                        (Value::Object(function), Value::Object(delta)) => {
                            for (key, value) in delta {
                                merge_field(function, &key, value);
                            }
                        }
                        (_, Value::Null) => {}
                        _ => {
                            return Err(super::malformed(
                                format,
                                at(),
                                format!(
                                "choice {choice}: tool call {index}: `function` is not an object"
                            ),
                            ))
                        }
                    }
                }
                _ => merge_field(entry, &key, value),
            }
        }
    }
    Ok(())
}

/// Logprobs arrive per chunk; their token lists concatenate.
fn merge_logprobs(acc: &mut Value, value: Value) {
    match (acc, value) {
        (_, Value::Null) => {}
        (Value::Object(acc), Value::Object(delta)) => {
            for (key, value) in delta {
                merge_field(acc, &key, value);
            }
        }
        (acc, value) => *acc = value,
    }
}

/// A chat or text completion as a stream of chunks.
pub(crate) fn synthesize(
    final_response: &Value,
    legacy: bool,
    include_usage: bool,
    out: &mut Out<'_>,
) -> Result<(), StreamError> {
    let format = if legacy {
        StreamFormat::OpenaiCompletions
    } else {
        StreamFormat::OpenaiChat
    };
    let Some(response) = final_response.as_object() else {
        return Err(synthesis_error(
            format,
            "the final response is not a JSON object",
        ));
    };
    let Some(choices) = response.get("choices").and_then(Value::as_array) else {
        return Err(synthesis_error(
            format,
            "the final response has no `choices` array",
        ));
    };
    let base = chunk_base(response, legacy, include_usage);

    let mut emit = |choice: Value| {
        if out.is_closed() {
            return;
        }
        let mut chunk = base.clone();
        chunk.insert("choices".into(), Value::Array(vec![choice]));
        write_sse(out, None, &Value::Object(chunk).to_string());
    };
    for (position, choice) in choices.iter().enumerate() {
        let Some(choice) = choice.as_object() else {
            return Err(synthesis_error(
                format,
                format!("choices[{position}] is not an object"),
            ));
        };
        choice_chunks(choice, position, legacy, &mut emit)?;
    }
    if include_usage {
        if let Some(usage) = response.get("usage").filter(|u| !u.is_null()) {
            let mut chunk = base.clone();
            chunk.insert("choices".into(), json!([]));
            chunk.insert("usage".into(), usage.clone());
            write_sse(out, None, &Value::Object(chunk).to_string());
        }
    }
    write_sse(out, None, "[DONE]");
    Ok(())
}

/// What every chunk repeats: the response's own members (id, model, created, ...) under the
/// chunk object type, with `usage: null` until the usage chunk when the client asked for one.
fn chunk_base(
    response: &Map<String, Value>,
    legacy: bool,
    include_usage: bool,
) -> Map<String, Value> {
    let mut base: Map<String, Value> = response
        .iter()
        .filter(|(k, _)| !TRANSPORT_MEMBERS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let object = if legacy {
        "text_completion"
    } else {
        "chat.completion.chunk"
    };
    base.insert("object".into(), json!(object));
    if include_usage {
        base.insert("usage".into(), Value::Null);
    }
    base
}

/// The chunks of one choice: its text or message in pieces, then a last chunk carrying the
/// choice's other members (finish reason, logprobs).
fn choice_chunks(
    choice: &Map<String, Value>,
    position: usize,
    legacy: bool,
    emit: &mut dyn FnMut(Value),
) -> Result<(), StreamError> {
    let index = choice
        .get("index")
        .cloned()
        .unwrap_or_else(|| json!(position));
    let open = |delta_or_text: (&str, Value)| {
        json!({
            "index": index,
            delta_or_text.0: delta_or_text.1,
            "logprobs": null,
            "finish_reason": null,
        })
    };
    if legacy {
        let text = choice.get("text").and_then(Value::as_str).unwrap_or("");
        for piece in fragments(text) {
            emit(open(("text", json!(piece))));
        }
    } else {
        let empty = Map::new();
        let message = choice
            .get("message")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        chat_deltas(message, &mut |delta| emit(open(("delta", delta))), position)?;
    }
    let mut last = Map::new();
    for (key, value) in choice {
        if !matches!(key.as_str(), "message" | "text") {
            last.insert(key.clone(), value.clone());
        }
    }
    last.insert("index".into(), index.clone());
    if legacy {
        last.insert("text".into(), json!(""));
    } else {
        last.insert("delta".into(), json!({}));
    }
    last.entry("logprobs").or_insert(Value::Null);
    last.entry("finish_reason").or_insert(Value::Null);
    emit(Value::Object(last));
    Ok(())
}

/// The deltas of one assistant message: the role chunk first, then streamed text fields
/// (reasoning, content, refusal), then each tool call.
fn chat_deltas(
    message: &Map<String, Value>,
    emit: &mut dyn FnMut(Value),
    position: usize,
) -> Result<(), StreamError> {
    let mut first = Map::new();
    first.insert(
        "role".into(),
        message
            .get("role")
            .cloned()
            .unwrap_or_else(|| json!("assistant")),
    );
    let mut streamed: Vec<(&str, &str)> = Vec::new();
    for (key, value) in message {
        match (key.as_str(), value) {
            ("role" | "tool_calls", _) => {}
            // Text streams in pieces; an empty string in the first chunk makes clients start
            // from "" rather than null.
            (_, Value::String(text)) if !text.is_empty() => {
                if key == "content" {
                    first.insert(key.clone(), json!(""));
                }
                streamed.push((key, text));
            }
            _ => {
                first.insert(key.clone(), value.clone());
            }
        }
    }
    first.entry("content").or_insert(Value::Null);
    // Reasoning before the answer, the answer before a refusal: the order models produce them.
    streamed.sort_by_key(|(key, _)| match *key {
        "content" => 1,
        "refusal" => 2,
        _ => 0,
    });
    emit(json!(first));
    for (key, text) in streamed {
        // `content` already started as "" above; other fields start with their first piece.
        for piece in fragments(text) {
            emit(json!({ key: piece }));
        }
    }
    match message.get("tool_calls") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(calls)) => tool_call_chunks(calls, emit, position),
        Some(_) => Err(synthesis_error(
            StreamFormat::OpenaiChat,
            format!("choices[{position}].message.tool_calls is not an array"),
        )),
    }
}

/// Each tool call: its id, type and name once, then its arguments in pieces.
fn tool_call_chunks(
    calls: &[Value],
    emit: &mut dyn FnMut(Value),
    position: usize,
) -> Result<(), StreamError> {
    for (index, call) in calls.iter().enumerate() {
        let Some(call) = call.as_object() else {
            return Err(synthesis_error(
                StreamFormat::OpenaiChat,
                format!("choices[{position}].message.tool_calls[{index}] is not an object"),
            ));
        };
        let mut opening = Map::new();
        opening.insert("index".into(), json!(index));
        let arguments = call
            .get("function")
            .and_then(|f| f.get("arguments"))
            .and_then(Value::as_str)
            .unwrap_or("");
        for (key, value) in call {
            if key == "function" {
                let mut function = value.as_object().cloned().unwrap_or_default();
                if function.get("arguments").is_some_and(Value::is_string) {
                    function.insert("arguments".into(), json!(""));
                }
                opening.insert(key.clone(), Value::Object(function));
            } else {
                opening.insert(key.clone(), value.clone());
            }
        }
        emit(json!({ "tool_calls": [opening] }));
        for piece in fragments(arguments) {
            emit(json!({
                "tool_calls": [{ "index": index, "function": { "arguments": piece } }]
            }));
        }
    }
    Ok(())
}
