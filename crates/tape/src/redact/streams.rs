//! Streams kept event by event (`{"events": [...]}`, the generic SSE and NDJSON formats): a
//! secret the upstream sent in pieces (`"sk-proj-7Fh2"` in one event, the rest in the next) is
//! found in the text the client assembles, not event by event, where no piece looks like one.
//!
//! The text a client assembles is, for each place in an event (the same JSON path in the events'
//! `data`, or the whole `data` when it is not JSON), the concatenation of that place's strings
//! over the events in order: Gemini's `candidates[0].content.parts[0].text`, an OpenAI-style
//! `choices[0].delta.content`, or plain text data.

use super::{Redactor, REDACTED};
use serde_json::Value;
use std::collections::HashMap;
use std::ops::Range;

/// One step of a JSON path into an event's data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Step {
    Member(String),
    Index(usize),
}

/// One string of one event: a piece of the assembled text.
struct Piece {
    event: usize,
    path: Vec<Step>,
    text: String,
}

/// An event's data, parsed when it is JSON.
enum Data {
    Json(Value),
    Text(String),
}

impl Redactor {
    /// Redacts secrets split across the events of a stored stream body (`{"events": [...]}`):
    /// the first piece of a secret becomes `[REDACTED]`, its other pieces become empty, so the
    /// assembled text reads `[REDACTED]` once. Secrets inside one event are left to the JSON
    /// rules that run next. Returns whether anything changed.
    pub(crate) fn split_secrets(&self, body: &mut Value) -> bool {
        let Some(events) = body.get_mut("events").and_then(Value::as_array_mut) else {
            return false;
        };
        let mut data: Vec<Option<Data>> = events.iter().map(event_data).collect();
        let mut places: HashMap<(Option<String>, Vec<Step>), Vec<Piece>> = HashMap::new();
        for (index, (event, parsed)) in events.iter().zip(&data).enumerate() {
            let name = event
                .get("event")
                .and_then(Value::as_str)
                .map(str::to_owned);
            match parsed {
                Some(Data::Json(value)) => {
                    let mut strings = Vec::new();
                    collect_strings(value, &mut Vec::new(), &mut strings);
                    for (path, text) in strings {
                        places
                            .entry((name.clone(), path.clone()))
                            .or_default()
                            .push(Piece {
                                event: index,
                                path,
                                text,
                            });
                    }
                }
                Some(Data::Text(text)) => {
                    places.entry((name, Vec::new())).or_default().push(Piece {
                        event: index,
                        path: Vec::new(),
                        text: text.clone(),
                    })
                }
                None => {}
            }
        }
        let mut edits: Vec<(usize, Vec<Step>, String)> = Vec::new();
        for pieces in places.values().filter(|p| p.len() > 1) {
            edits.extend(self.split_edits(pieces));
        }
        if edits.is_empty() {
            return false;
        }
        let mut touched = vec![false; events.len()];
        for (event, path, text) in edits {
            match data.get_mut(event) {
                Some(Some(Data::Json(value))) => {
                    if let Some(slot) = at_path(value, &path) {
                        *slot = Value::String(text);
                    }
                }
                Some(Some(Data::Text(data))) => *data = text,
                _ => continue,
            }
            touched[event] = true;
        }
        for (index, event) in events.iter_mut().enumerate() {
            let (true, Some(parsed)) = (touched[index], data[index].take()) else {
                continue;
            };
            let text = match parsed {
                Data::Json(value) => serde_json::to_string(&value).unwrap_or_default(),
                Data::Text(text) => text,
            };
            match event {
                Value::Object(map) => {
                    map.insert("data".into(), Value::String(text));
                }
                other => *other = Value::String(text),
            }
        }
        true
    }

    /// The new texts of the pieces a secret spans, for each secret spanning two or more.
    fn split_edits(&self, pieces: &[Piece]) -> Vec<(usize, Vec<Step>, String)> {
        let mut assembled = String::new();
        let mut starts = Vec::with_capacity(pieces.len());
        for piece in pieces {
            starts.push(assembled.len());
            assembled.push_str(&piece.text);
        }
        let piece_of = |offset: usize| starts.partition_point(|&s| s <= offset).saturating_sub(1);
        // Per piece, the local ranges to cut and whether `[REDACTED]` goes in their place.
        let mut cuts: Vec<Vec<(Range<usize>, bool)>> = vec![Vec::new(); pieces.len()];
        for secret in self.secret_ranges(&assembled) {
            let (first, last) = (piece_of(secret.start), piece_of(secret.end - 1));
            if first == last {
                continue;
            }
            for (i, cut) in cuts.iter_mut().enumerate().take(last + 1).skip(first) {
                let start = secret.start.max(starts[i]) - starts[i];
                let end = secret.end.min(starts[i] + pieces[i].text.len()) - starts[i];
                cut.push((start..end, i == first));
            }
        }
        let mut out = Vec::new();
        for (piece, mut cut) in pieces.iter().zip(cuts) {
            if cut.is_empty() {
                continue;
            }
            cut.sort_by_key(|(range, _)| range.start);
            let mut text = String::with_capacity(piece.text.len());
            let mut copied = 0;
            for (range, marker) in cut {
                if range.start < copied {
                    // Overlaps a cut already made: extend it.
                    copied = copied.max(range.end);
                    continue;
                }
                text.push_str(&piece.text[copied..range.start]);
                if marker {
                    text.push_str(REDACTED);
                }
                copied = range.end;
            }
            text.push_str(&piece.text[copied..]);
            out.push((piece.event, piece.path.clone(), text));
        }
        out
    }
}

/// The data of a stored event: an SSE event's `data`, an NDJSON line; parsed when it is a JSON
/// object or array.
fn event_data(event: &Value) -> Option<Data> {
    let text = match event {
        Value::Object(map) => map.get("data")?.as_str()?,
        Value::String(line) => line,
        _ => return None,
    };
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Ok(value) = serde_json::from_str::<Value>(text) {
            return Some(Data::Json(value));
        }
    }
    Some(Data::Text(text.to_owned()))
}

fn collect_strings(value: &Value, path: &mut Vec<Step>, out: &mut Vec<(Vec<Step>, String)>) {
    match value {
        Value::String(s) => out.push((path.clone(), s.clone())),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(Step::Index(i));
                collect_strings(item, path, out);
                path.pop();
            }
        }
        Value::Object(map) => {
            for (name, child) in map {
                path.push(Step::Member(name.clone()));
                collect_strings(child, path, out);
                path.pop();
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn at_path<'a>(value: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |value, step| match step {
        Step::Member(name) => value.get_mut(name.as_str()),
        Step::Index(i) => value.get_mut(*i),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::find_credentials;
    use serde_json::json;

    const KEY: &str = "sk-proj-7Fh2Kd9Lq3Wz8Xc1Vb6Nm4Tr0Yp5Ju2Ie8Ow3Aq";

    fn gemini_event(text: &str) -> Value {
        let data = json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}],
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3}});
        json!({ "data": data.to_string() })
    }

    fn assembled(body: &Value) -> String {
        body["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| serde_json::from_str::<Value>(e["data"].as_str()?).ok())
            .filter_map(|d| {
                d["candidates"][0]["content"]["parts"][0]["text"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    }

    /// Issue 10, item 12: a key Gemini streamed in three events never reaches the store.
    #[test]
    fn a_key_split_across_json_events_is_redacted_in_the_assembled_text() {
        let mut body = json!({"events": [
            gemini_event("Your key is "),
            gemini_event(&KEY[..12]),
            gemini_event(&KEY[12..30]),
            gemini_event(&format!("{}. Keep it safe.", &KEY[30..])),
        ]});
        // No event holds anything that looks like a key on its own.
        assert!(find_credentials(body.to_string().as_bytes()).is_empty());
        let red = Redactor::default();
        assert!(red.split_secrets(&mut body));
        assert_eq!(assembled(&body), "Your key is [REDACTED]. Keep it safe.");
        let stored = body.to_string();
        for piece in [&KEY[..12], &KEY[12..30], &KEY[30..]] {
            assert!(!stored.contains(piece), "{piece} in {stored}");
        }
        // The other members of a touched event survive; untouched events keep their bytes.
        let first: Value = serde_json::from_str(body["events"][0]["data"].as_str().unwrap_or(""))
            .unwrap_or(Value::Null);
        assert_eq!(first["usageMetadata"]["promptTokenCount"], 9);
        assert_eq!(body["events"][0], gemini_event("Your key is "));
        assert!(!red.split_secrets(&mut body), "idempotent");
    }

    #[test]
    fn a_key_split_across_text_events_and_ndjson_lines() {
        let red = Redactor::default();
        let mut sse = json!({"events": [
            {"event": "delta", "data": format!("token: {}", &KEY[..10])},
            {"event": "ping", "data": "x"},
            {"event": "delta", "data": KEY[10..].to_owned()},
        ]});
        assert!(red.split_secrets(&mut sse));
        assert_eq!(sse["events"][0]["data"], "token: [REDACTED]");
        assert_eq!(sse["events"][1]["data"], "x");
        assert_eq!(sse["events"][2]["data"], "");
        assert_eq!(sse["events"][0]["event"], "delta");

        let mut ndjson = json!({"events": [
            json!({"response": &KEY[..20]}).to_string(),
            json!({"response": &KEY[20..], "done": true}).to_string(),
        ]});
        assert!(red.split_secrets(&mut ndjson));
        assert_eq!(ndjson["events"][0], r#"{"response":"[REDACTED]"}"#);
        assert_eq!(ndjson["events"][1], r#"{"done":true,"response":""}"#);
    }

    #[test]
    fn ordinary_streams_are_untouched() {
        let red = Redactor::default();
        let mut body = json!({"events": [
            gemini_event("The max_tokens setting "),
            gemini_event("limits tokens; a password"),
            gemini_event(" is not a key: sk-learn-compatible-estimator."),
        ]});
        let before = body.clone();
        assert!(!red.split_secrets(&mut body));
        assert_eq!(body, before);
        let mut not_a_stream = json!({"choices": []});
        assert!(!red.split_secrets(&mut not_a_stream));
    }
}
