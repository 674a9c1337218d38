//! Anthropic Messages streams: `message_start`, content blocks, `message_delta`, `message_stop`.

use super::framing::{members, SseEvent};
use super::{error_message, fragments, malformed, merge_field, parse_json, synthesis_error};
use super::{write_sse, Out, StreamError, StreamFormat};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

const FORMAT: StreamFormat = StreamFormat::AnthropicMessages;

#[derive(Debug, Default)]
pub(crate) struct Assembly {
    message: Option<Map<String, Value>>,
    blocks: BTreeMap<u64, Block>,
    stopped: bool,
}

#[derive(Debug)]
struct Block {
    block: Map<String, Value>,
    /// `input_json_delta` pieces; the input is only valid JSON once all have arrived.
    json: String,
    /// Where the block started, for errors found when its JSON is parsed.
    at: String,
}

impl Block {
    fn close(&mut self) -> Result<(), StreamError> {
        if self.json.is_empty() {
            return Ok(());
        }
        let input: Value = serde_json::from_str(&self.json).map_err(|e| {
            malformed(
                FORMAT.name(),
                self.at.clone(),
                format!("the tool input streamed by input_json_delta is not JSON ({e})"),
            )
        })?;
        self.block.insert("input".into(), input);
        self.json.clear();
        Ok(())
    }
}

impl Assembly {
    pub(super) fn event(&mut self, event: &SseEvent) -> Result<(), StreamError> {
        let format = FORMAT.name();
        let data = event.data.trim();
        if self.stopped || data.is_empty() {
            return Ok(());
        }
        let at = || event.at();
        let payload = parse_json(format, &at, data)?;
        let kind = payload
            .get("type")
            .and_then(Value::as_str)
            .or(event.name.as_deref())
            .unwrap_or("");
        match kind {
            "error" => Err(StreamError::Upstream {
                format,
                at: at(),
                message: error_message(payload.get("error").unwrap_or(&payload)),
            }),
            "ping" => Ok(()),
            "message_start" => {
                let message = object(&payload, "message", &at)?;
                self.message = Some(message.clone());
                Ok(())
            }
            _ if self.message.is_none() => {
                Err(malformed(format, at(), "event before `message_start`"))
            }
            "content_block_start" => {
                let index = block_index(&payload, &at)?;
                let block = Block {
                    block: object(&payload, "content_block", &at)?.clone(),
                    json: String::new(),
                    at: at(),
                };
                self.blocks.insert(index, block);
                Ok(())
            }
            "content_block_delta" => {
                let index = block_index(&payload, &at)?;
                let Some(block) = self.blocks.get_mut(&index) else {
                    return Err(malformed(
                        format,
                        at(),
                        format!("delta for content block {index} before its content_block_start"),
                    ));
                };
                apply_delta(block, object(&payload, "delta", &at)?);
                Ok(())
            }
            "content_block_stop" => match self.blocks.get_mut(&block_index(&payload, &at)?) {
                Some(block) => block.close(),
                None => Ok(()),
            },
            "message_delta" => {
                if let Some(message) = &mut self.message {
                    apply_message_delta(message, &payload);
                }
                Ok(())
            }
            "message_stop" => {
                self.stopped = true;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    pub(super) fn finish(self) -> Result<Value, StreamError> {
        let format = FORMAT.name();
        let Some(mut message) = self.message else {
            return Err(StreamError::Incomplete {
                format,
                missing: "`message_start`".into(),
            });
        };
        if !self.stopped {
            return Err(StreamError::Incomplete {
                format,
                missing: "`message_stop`".into(),
            });
        }
        let mut content = Vec::with_capacity(self.blocks.len());
        for mut block in self.blocks.into_values() {
            block.close()?;
            content.push(Value::Object(block.block));
        }
        message.insert("content".into(), Value::Array(content));
        Ok(Value::Object(message))
    }
}

/// The object member `name` of an event's payload; an error naming the event when it is missing.
fn object<'a>(
    payload: &'a Value,
    name: &str,
    at: &dyn Fn() -> String,
) -> Result<&'a Map<String, Value>, StreamError> {
    match payload.get(name) {
        Some(Value::Object(object)) => Ok(object),
        _ => Err(malformed(
            FORMAT.name(),
            at(),
            format!("`{name}` is missing or not an object"),
        )),
    }
}

/// The content block an event is about.
fn block_index(payload: &Value, at: &dyn Fn() -> String) -> Result<u64, StreamError> {
    payload
        .get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| malformed(FORMAT.name(), at(), "missing content block `index`"))
}

/// A `message_delta`: top-level members (stop reason, ...) replace the message's, and usage
/// counts, which are cumulative, replace the ones reported so far.
fn apply_message_delta(message: &mut Map<String, Value>, payload: &Value) {
    if let Some(Value::Object(delta)) = payload.get("delta") {
        for (key, value) in delta {
            message.insert(key.clone(), value.clone());
        }
    }
    if let Some(Value::Object(usage)) = payload.get("usage") {
        let total = message
            .entry("usage")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(total) = total {
            // Nulls mean "not reported here".
            for (key, value) in usage.iter().filter(|(_, v)| !v.is_null()) {
                total.insert(key.clone(), value.clone());
            }
        }
    }
}

fn apply_delta(block: &mut Block, delta: &Map<String, Value>) {
    let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
    let text = |key: &str| {
        delta
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    match kind {
        "text_delta" => merge_field(&mut block.block, "text", json!(text("text"))),
        "thinking_delta" => merge_field(&mut block.block, "thinking", json!(text("thinking"))),
        "signature_delta" => {
            block
                .block
                .insert("signature".into(), json!(text("signature")));
        }
        "input_json_delta" => block.json.push_str(&text("partial_json")),
        "citations_delta" => {
            let citation = delta.get("citation").cloned().unwrap_or(Value::Null);
            match block.block.get_mut("citations") {
                Some(Value::Array(citations)) => citations.push(citation),
                _ => {
                    block
                        .block
                        .insert("citations".into(), Value::Array(vec![citation]));
                }
            }
        }
        _ => {
            // Delta types newer than this code: string fields grow, others replace.
            for (key, value) in delta.iter().filter(|(k, _)| *k != "type") {
                merge_field(&mut block.block, key, value.clone());
            }
        }
    }
}

fn event(out: &mut Out<'_>, kind: &str, mut fields: Map<String, Value>) {
    if out.is_closed() {
        return;
    }
    fields.insert("type".into(), json!(kind));
    write_sse(out, Some(kind), &Value::Object(fields).to_string());
}

/// A Message object as the stream a client would have received.
pub(crate) fn synthesize(final_response: &Value, out: &mut Out<'_>) -> Result<(), StreamError> {
    let Some(message) = final_response.as_object() else {
        return Err(synthesis_error(
            FORMAT,
            "the final response is not a JSON object",
        ));
    };
    let blocks = match message.get("content") {
        Some(Value::Array(blocks)) => blocks.as_slice(),
        None | Some(Value::Null) => &[],
        Some(_) => return Err(synthesis_error(FORMAT, "`content` is not an array")),
    };
    let usage = message.get("usage").cloned();

    let mut start = message.clone();
    start.insert("content".into(), json!([]));
    start.insert("stop_reason".into(), Value::Null);
    start.insert("stop_sequence".into(), Value::Null);
    // Like the real API: message_start reports the input side, output is counted at the end.
    if let Some(Value::Object(usage)) = start.get_mut("usage") {
        if let Some(output) = usage.get("output_tokens").and_then(Value::as_u64) {
            usage.insert("output_tokens".into(), json!(output.min(1)));
        }
    }
    event(out, "message_start", members(json!({ "message": start })));

    for (index, block) in blocks.iter().enumerate() {
        let Some(block) = block.as_object() else {
            return Err(synthesis_error(
                FORMAT,
                format!("content[{index}] is not an object"),
            ));
        };
        block_events(out, index, block)?;
        if index == 0 {
            event(out, "ping", Map::new());
        }
    }

    let mut delta = Map::new();
    delta.insert(
        "stop_reason".into(),
        message.get("stop_reason").cloned().unwrap_or(Value::Null),
    );
    delta.insert(
        "stop_sequence".into(),
        message.get("stop_sequence").cloned().unwrap_or(Value::Null),
    );
    let mut fields = members(json!({ "delta": delta }));
    fields.insert("usage".into(), usage.unwrap_or_else(|| json!({})));
    event(out, "message_delta", fields);
    event(out, "message_stop", Map::new());
    Ok(())
}

fn block_events(
    out: &mut Out<'_>,
    index: usize,
    block: &Map<String, Value>,
) -> Result<(), StreamError> {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    // What streams in starts empty.
    let mut start = block.clone();
    match kind {
        "text" => {
            start.insert("text".into(), json!(""));
            if let Some(Value::Array(_)) = block.get("citations") {
                start.insert("citations".into(), json!([]));
            }
        }
        "thinking" => {
            start.insert("thinking".into(), json!(""));
            if block.contains_key("signature") {
                start.insert("signature".into(), json!(""));
            }
        }
        "tool_use" | "server_tool_use" | "mcp_tool_use" => {
            start.insert("input".into(), json!({}));
        }
        _ => {}
    }
    event(
        out,
        "content_block_start",
        members(json!({ "index": index, "content_block": start })),
    );
    // Each delta is written as it is made: a long text is never held as a list of events.
    let mut delta = |delta: Value| {
        event(
            out,
            "content_block_delta",
            members(json!({ "index": index, "delta": delta })),
        )
    };
    match kind {
        "text" => {
            let text = block.get("text").and_then(Value::as_str).unwrap_or("");
            for piece in fragments(text) {
                delta(json!({ "type": "text_delta", "text": piece }));
            }
            if let Some(Value::Array(citations)) = block.get("citations") {
                for citation in citations {
                    delta(json!({ "type": "citations_delta", "citation": citation }));
                }
            }
        }
        "thinking" => {
            let thinking = block.get("thinking").and_then(Value::as_str).unwrap_or("");
            for piece in fragments(thinking) {
                delta(json!({ "type": "thinking_delta", "thinking": piece }));
            }
            if let Some(signature) = block.get("signature") {
                delta(json!({ "type": "signature_delta", "signature": signature }));
            }
        }
        "tool_use" | "server_tool_use" | "mcp_tool_use" => {
            let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
            let json_text = input.to_string();
            delta(json!({ "type": "input_json_delta", "partial_json": "" }));
            for piece in fragments(&json_text) {
                delta(json!({ "type": "input_json_delta", "partial_json": piece }));
            }
        }
        _ => {}
    }
    event(
        out,
        "content_block_stop",
        members(json!({ "index": index })),
    );
    Ok(())
}
