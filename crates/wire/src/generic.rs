//! Streams of unknown meaning (the generic `http` profile): kept event by event, verbatim.
//!
//! An SSE event is stored as `{"event", "data", "id", "retry"}` (only the fields it had, `data`
//! as the exact text), an NDJSON line as its exact text. Comments and blank lines carry no
//! meaning and are dropped.

use super::framing::{Line, SseEvent};
use super::{synthesis_error, write_sse, Out, StreamError, StreamFormat};
use serde_json::{json, Map, Value};

#[derive(Debug, Default)]
pub(crate) struct SseAssembly {
    events: Vec<Value>,
}

impl SseAssembly {
    pub(super) fn event(&mut self, event: &SseEvent) {
        let mut stored = Map::new();
        if let Some(name) = &event.name {
            stored.insert("event".into(), json!(name));
        }
        stored.insert("data".into(), json!(event.data));
        if let Some(id) = &event.id {
            stored.insert("id".into(), json!(id));
        }
        if let Some(retry) = event.retry {
            stored.insert("retry".into(), json!(retry));
        }
        self.events.push(Value::Object(stored));
    }

    pub(super) fn finish(self) -> Value {
        json!({ "events": self.events })
    }
}

#[derive(Debug, Default)]
pub(crate) struct NdjsonAssembly {
    events: Vec<Value>,
}

impl NdjsonAssembly {
    pub(super) fn line(&mut self, line: &Line) {
        if !line.text.trim().is_empty() {
            self.events.push(json!(line.text));
        }
    }

    pub(super) fn finish(self) -> Value {
        json!({ "events": self.events })
    }
}

fn events(format: StreamFormat, final_response: &Value) -> Result<&[Value], StreamError> {
    final_response
        .get("events")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .ok_or_else(|| {
            synthesis_error(
                format,
                "the stored body has no `events` array (generic streams replay only as recorded)",
            )
        })
}

/// The recorded events, in SSE framing.
pub(crate) fn synthesize_sse(final_response: &Value, out: &mut Out<'_>) -> Result<(), StreamError> {
    let format = StreamFormat::GenericSse;
    for (index, event) in events(format, final_response)?.iter().enumerate() {
        let Some(event) = event.as_object() else {
            return Err(synthesis_error(
                format,
                format!("events[{index}] is not an object"),
            ));
        };
        let field = |name: &str| event.get(name).and_then(Value::as_str);
        if let Some(id) = field("id") {
            out.write(format!("id: {id}\n").as_bytes());
        }
        if let Some(retry) = event.get("retry").and_then(Value::as_u64) {
            out.write(format!("retry: {retry}\n").as_bytes());
        }
        let Some(data) = field("data") else {
            return Err(synthesis_error(
                format,
                format!("events[{index}] has no `data` string"),
            ));
        };
        write_sse(out, field("event"), data);
    }
    Ok(())
}

/// The recorded lines, one per line.
pub(crate) fn synthesize_ndjson(
    final_response: &Value,
    out: &mut Out<'_>,
) -> Result<(), StreamError> {
    let format = StreamFormat::GenericNdjson;
    for event in events(format, final_response)? {
        match event {
            Value::String(line) => out.write(line.as_bytes()),
            other => out.write(other.to_string().as_bytes()),
        }
        out.write(b"\n");
    }
    Ok(())
}
