//! OpenAI Responses streams: named `response.*` events carrying `type` and `sequence_number`.

use super::framing::{members, SseEvent};
use super::{error_message, fragments, malformed, parse_json, synthesis_error, write_sse, Out};
use super::{StreamError, StreamFormat};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

const FORMAT: StreamFormat = StreamFormat::OpenaiResponses;

#[derive(Debug, Default)]
pub(crate) struct Assembly {
    snapshot: Option<Value>,
    /// Items as announced by `output_item.added` and grown by deltas.
    items: BTreeMap<u64, Value>,
    /// Items as finalized by `output_item.done`.
    done_items: BTreeMap<u64, Value>,
    terminal: Option<Value>,
}

impl Assembly {
    pub(super) fn event(&mut self, event: &SseEvent) -> Result<(), StreamError> {
        let format = FORMAT.name();
        let data = event.data.trim();
        if self.terminal.is_some() || data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let at = || event.at();
        let payload = parse_json(format, &at, data)?;
        let kind = payload
            .get("type")
            .and_then(Value::as_str)
            .or(event.name.as_deref())
            .unwrap_or("")
            .to_owned();
        let output_index = || {
            payload
                .get("output_index")
                .and_then(Value::as_u64)
                .ok_or_else(|| malformed(format, at(), "missing `output_index`"))
        };
        match kind.as_str() {
            "error" => {
                let error = payload.get("error").unwrap_or(&payload);
                return Err(StreamError::Upstream {
                    format,
                    at: at(),
                    message: error_message(error),
                });
            }
            "response.created" | "response.in_progress" | "response.queued" => {
                self.snapshot = Some(response_of(&payload, format, &at)?);
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                self.terminal = Some(response_of(&payload, format, &at)?);
            }
            "response.output_item.added" => {
                let item = item_of(&payload, &at)?;
                self.items.insert(output_index()?, item);
            }
            "response.output_item.done" => {
                let item = item_of(&payload, &at)?;
                self.done_items.insert(output_index()?, item);
            }
            "response.content_part.added"
            | "response.output_text.delta"
            | "response.refusal.delta"
            | "response.function_call_arguments.delta" => {
                if let Some(item) = self.items.get_mut(&output_index()?) {
                    apply_delta(item, &kind, &payload);
                }
            }
            _ => {}
        }
        Ok(())
    }

    pub(super) fn finish(self) -> Result<Value, StreamError> {
        let Some(mut response) = self.terminal else {
            return Err(StreamError::Incomplete {
                format: FORMAT.name(),
                missing: if self.snapshot.is_some() {
                    "`response.completed`".into()
                } else {
                    "`response.created`".into()
                },
            });
        };
        // A terminal event may leave `output` out; the items streamed before it say what it was.
        if let None | Some(Value::Null) = response.get("output") {
            let mut items = self.items;
            items.extend(self.done_items);
            let output = items.into_values().collect();
            if let Value::Object(map) = &mut response {
                map.insert("output".into(), Value::Array(output));
            }
        }
        Ok(response)
    }
}

/// The `item` of an `output_item` event.
fn item_of(payload: &Value, at: &dyn Fn() -> String) -> Result<Value, StreamError> {
    let item = payload.get("item").cloned().unwrap_or(Value::Null);
    if !item.is_object() {
        return Err(malformed(FORMAT.name(), at(), "`item` is not an object"));
    }
    Ok(item)
}

/// Grows a streamed item by one delta event. Deltas only matter when the terminal event leaves
/// `output` out; the terminal event is authoritative, so a delta this code cannot place is
/// skipped rather than failing a recording whose answer arrives whole at the end anyway.
fn apply_delta(item: &mut Value, kind: &str, payload: &Value) {
    let delta = || json!(payload.get("delta").and_then(Value::as_str).unwrap_or(""));
    match kind {
        "response.content_part.added" => {
            let part = payload.get("part").cloned().unwrap_or(Value::Null);
            if let Some(content) = item.get_mut("content").and_then(Value::as_array_mut) {
                content.push(part);
            }
        }
        "response.output_text.delta" | "response.refusal.delta" => {
            let field = if kind == "response.output_text.delta" {
                "text"
            } else {
                "refusal"
            };
            let content_index = payload.get("content_index").and_then(Value::as_u64);
            let part = item
                .get_mut("content")
                .and_then(Value::as_array_mut)
                .zip(content_index)
                .and_then(|(content, ci)| content.get_mut(usize::try_from(ci).ok()?));
            if let Some(Value::Object(part)) = part {
                super::merge_field(part, field, delta());
            }
        }
        "response.function_call_arguments.delta" => {
            if let Value::Object(item) = item {
                super::merge_field(item, "arguments", delta());
            }
        }
        _ => {}
    }
}

fn response_of(
    payload: &Value,
    format: &'static str,
    at: &dyn Fn() -> String,
) -> Result<Value, StreamError> {
    match payload.get("response") {
        Some(response @ Value::Object(_)) => Ok(response.clone()),
        _ => Err(malformed(
            format,
            at(),
            "`response` is missing or not an object",
        )),
    }
}

/// Writes events with increasing sequence numbers.
struct Writer<'o, 'a> {
    out: &'o mut Out<'a>,
    sequence: u64,
}

impl Writer<'_, '_> {
    fn event(&mut self, kind: &str, mut fields: Map<String, Value>) {
        if self.out.is_closed() {
            return;
        }
        fields.insert("type".into(), json!(kind));
        fields.insert("sequence_number".into(), json!(self.sequence));
        self.sequence += 1;
        write_sse(self.out, Some(kind), &Value::Object(fields).to_string());
    }
}

/// A Response object as the stream a client would have received.
pub(crate) fn synthesize(final_response: &Value, out: &mut Out<'_>) -> Result<(), StreamError> {
    let Some(response) = final_response.as_object() else {
        return Err(synthesis_error(
            FORMAT,
            "the final response is not a JSON object",
        ));
    };
    let output = match response.get("output") {
        Some(Value::Array(output)) => output.as_slice(),
        None | Some(Value::Null) => &[],
        Some(_) => return Err(synthesis_error(FORMAT, "`output` is not an array")),
    };
    let mut w = Writer { out, sequence: 0 };
    let mut pending = response.clone();
    pending.insert("status".into(), json!("in_progress"));
    pending.insert("output".into(), json!([]));
    for key in ["usage", "completed_at", "incomplete_details", "error"] {
        if pending.contains_key(key) {
            pending.insert(key.into(), Value::Null);
        }
    }
    let pending = Value::Object(pending);
    w.event("response.created", members(json!({ "response": pending })));
    w.event(
        "response.in_progress",
        members(json!({ "response": pending })),
    );

    for (index, item) in output.iter().enumerate() {
        let Some(item) = item.as_object() else {
            return Err(synthesis_error(
                FORMAT,
                format!("output[{index}] is not an object"),
            ));
        };
        item_events(&mut w, index, item)?;
    }

    let terminal = match response.get("status").and_then(Value::as_str) {
        Some("incomplete") => "response.incomplete",
        Some("failed") => "response.failed",
        _ => "response.completed",
    };
    w.event(terminal, members(json!({ "response": final_response })));
    Ok(())
}

fn item_events(
    w: &mut Writer<'_, '_>,
    index: usize,
    item: &Map<String, Value>,
) -> Result<(), StreamError> {
    let item_id = item.get("id").cloned().unwrap_or_else(|| json!(""));
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
    // The item as first announced: in progress, with the parts that stream in still empty.
    let mut added = item.clone();
    if added.contains_key("status") {
        added.insert("status".into(), json!("in_progress"));
    }
    match kind {
        "message" => added.insert("content".into(), json!([])),
        "function_call" => added.insert("arguments".into(), json!("")),
        "reasoning" => added.insert("summary".into(), json!([])),
        _ => None,
    };
    w.event(
        "response.output_item.added",
        members(json!({ "output_index": index, "item": added })),
    );
    match kind {
        "message" => {
            for (content_index, part) in array(item, "content").iter().enumerate() {
                let at = json!({
                    "item_id": item_id,
                    "output_index": index,
                    "content_index": content_index,
                });
                part_events(w, at, part);
            }
        }
        "function_call" => arguments_events(w, index, &item_id, item),
        "reasoning" => {
            for (summary_index, part) in array(item, "summary").iter().enumerate() {
                let at = json!({
                    "item_id": item_id,
                    "output_index": index,
                    "summary_index": summary_index,
                });
                summary_events(w, &at, part);
            }
        }
        _ => {}
    }
    w.event(
        "response.output_item.done",
        members(json!({ "output_index": index, "item": item })),
    );
    Ok(())
}

/// The array member `name` of an item; empty when it has none.
fn array<'a>(item: &'a Map<String, Value>, name: &str) -> &'a [Value] {
    item.get(name)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A function call's arguments, streamed in pieces, then whole.
fn arguments_events(
    w: &mut Writer<'_, '_>,
    index: usize,
    item_id: &Value,
    item: &Map<String, Value>,
) {
    let arguments = item.get("arguments").and_then(Value::as_str).unwrap_or("");
    for piece in fragments(arguments) {
        w.event(
            "response.function_call_arguments.delta",
            members(json!({ "item_id": item_id, "output_index": index, "delta": piece })),
        );
    }
    let mut done = members(json!({
        "item_id": item_id,
        "output_index": index,
        "arguments": arguments,
    }));
    if let Some(name) = item.get("name") {
        done.insert("name".into(), name.clone());
    }
    w.event("response.function_call_arguments.done", done);
}

/// One part of a reasoning summary: announced empty, its text streamed in pieces, then done.
fn summary_events(w: &mut Writer<'_, '_>, at: &Value, part: &Value) {
    let text = part.get("text").and_then(Value::as_str).unwrap_or("");
    let mut empty = part.clone();
    if let Value::Object(map) = &mut empty {
        map.insert("text".into(), json!(""));
    }
    w.event(
        "response.reasoning_summary_part.added",
        with(at, "part", empty),
    );
    for piece in fragments(text) {
        w.event(
            "response.reasoning_summary_text.delta",
            with(at, "delta", json!(piece)),
        );
    }
    w.event(
        "response.reasoning_summary_text.done",
        with(at, "text", json!(text)),
    );
    w.event(
        "response.reasoning_summary_part.done",
        with(at, "part", part.clone()),
    );
}

fn with(at: &Value, key: &str, value: Value) -> Map<String, Value> {
    let mut map = members(at.clone());
    map.insert(key.into(), value);
    map
}

/// The events of one content part of a message: added empty, text or refusal in pieces, done.
fn part_events(w: &mut Writer<'_, '_>, at: Value, part: &Value) {
    let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
    let (field, delta_event, done_event) = match kind {
        "output_text" => (
            "text",
            "response.output_text.delta",
            "response.output_text.done",
        ),
        "refusal" => ("refusal", "response.refusal.delta", "response.refusal.done"),
        _ => {
            w.event(
                "response.content_part.added",
                with(&at, "part", part.clone()),
            );
            w.event(
                "response.content_part.done",
                with(&at, "part", part.clone()),
            );
            return;
        }
    };
    let text = part.get(field).and_then(Value::as_str).unwrap_or("");
    let mut empty = part.clone();
    if let Value::Object(map) = &mut empty {
        map.insert(field.into(), json!(""));
        if let Some(annotations) = map.get_mut("annotations") {
            *annotations = json!([]);
        }
    }
    w.event("response.content_part.added", with(&at, "part", empty));
    let logprobs = field == "text";
    for piece in fragments(text) {
        let mut delta = with(&at, "delta", json!(piece));
        if logprobs {
            delta.insert("logprobs".into(), json!([]));
        }
        w.event(delta_event, delta);
    }
    let mut done = with(&at, field, json!(text));
    if logprobs {
        let lp = part.get("logprobs").cloned().unwrap_or_else(|| json!([]));
        done.insert("logprobs".into(), lp);
    }
    w.event(done_event, done);
    w.event(
        "response.content_part.done",
        with(&at, "part", part.clone()),
    );
}
