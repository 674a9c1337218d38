//! Streams kept event by event (`{"events": [...]}`, the generic SSE and NDJSON formats): a
//! secret the upstream sent in pieces (`"sk-proj-7Fh2"` in one event, the rest in the next) is
//! found in the text the client assembles, not event by event, where no piece looks like one.
//!
//! The text a client assembles is, for each place in an event (the same JSON path in the events'
//! `data`, or the whole `data` when it is not JSON), the concatenation of that place's strings
//! over the events in order: Gemini's `candidates[0].content.parts[0].text`, an OpenAI-style
//! `choices[0].delta.content`, or plain text data.

use super::{BodyRedaction, Redactor, REDACTED};
use crate::document::StoredBody;
use serde_json::Value;
use std::collections::HashMap;
use std::ops::Range;

/// One step of a JSON path into an event's data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Step {
    Member(String),
    Index(usize),
}

/// One string of one event: a piece of a place's assembled text.
struct Piece {
    event: usize,
    /// Where it starts in the assembled text, and how long it is.
    start: usize,
    len: usize,
}

/// One place of the events (an event name and a JSON path in its data): the text a client
/// assembles there, and the pieces it is made of.
struct Place {
    path: Vec<Step>,
    assembled: String,
    pieces: Vec<Piece>,
}

/// An event's data, parsed when it is JSON.
#[derive(Debug)]
pub(super) enum Data {
    Json(Value),
    Text(String),
}

/// The places of a stream's events, found as the events are read one at a time: only the
/// assembled texts are kept (about the size of the answer), never every event parsed at once,
/// so a long stream is not held several times over while it is sealed.
#[derive(Default)]
struct Places {
    /// By event name (`""` for none), then path: the index in `list`.
    index: HashMap<String, HashMap<Vec<Step>, usize>>,
    list: Vec<Place>,
}

impl Places {
    fn add(&mut self, name: &str, path: &[Step], event: usize, text: &str) {
        let found = self.index.get(name).and_then(|paths| paths.get(path));
        let at = match found {
            Some(&at) => at,
            None => {
                let at = self.list.len();
                self.list.push(Place {
                    path: path.to_vec(),
                    assembled: String::new(),
                    pieces: Vec::new(),
                });
                let paths = self.index.entry(name.to_owned()).or_default();
                paths.insert(path.to_vec(), at);
                at
            }
        };
        let place = &mut self.list[at];
        place.pieces.push(Piece {
            event,
            start: place.assembled.len(),
            len: text.len(),
        });
        place.assembled.push_str(text);
    }
}

impl Redactor {
    /// Redacts a response body as a cassette stores it: a stream kept event by event (`stream`
    /// names its format) across its events first, then the body by its `content-type` as
    /// [`Redactor::body`] does. What sealing does to a stored answer, and what `cassette run`
    /// does to an answer before grading, printing or saving it.
    pub fn response_body(
        &self,
        body: &mut StoredBody,
        stream: Option<&str>,
        content_type: Option<&str>,
    ) -> BodyRedaction {
        let mut split = false;
        if let (Some(_), StoredBody::Json(value)) = (stream, &mut *body) {
            if value.get("events").is_some_and(Value::is_array) {
                split = self.split_secrets(value);
            }
        }
        let mut redaction = self.body(body, content_type);
        redaction.changed |= split;
        redaction
    }

    /// Redacts secrets split across the events of a stored stream body (`{"events": [...]}`):
    /// the first piece of a secret becomes `[REDACTED]`, its other pieces become empty, so the
    /// assembled text reads `[REDACTED]` once. Secrets inside one event are left to the JSON
    /// rules that run next. Returns whether anything changed.
    pub(crate) fn split_secrets(&self, body: &mut Value) -> bool {
        let Some(events) = body.get_mut("events").and_then(Value::as_array_mut) else {
            return false;
        };
        let mut places = Places::default();
        for (index, event) in events.iter().enumerate() {
            let name = event.get("event").and_then(Value::as_str).unwrap_or("");
            match event_data(event) {
                Some(Data::Json(value)) => {
                    let mut add = |path: &[Step], text: &str| places.add(name, path, index, text);
                    visit_strings(&value, &mut Vec::new(), &mut add);
                }
                Some(Data::Text(text)) => places.add(name, &[], index, &text),
                None => {}
            }
        }
        let mut edits: Vec<(usize, Vec<Step>, String)> = Vec::new();
        for place in places.list.iter().filter(|p| p.pieces.len() > 1) {
            edits.extend(self.split_edits(place));
        }
        drop(places);
        if edits.is_empty() {
            return false;
        }
        // Only the events a secret touches are parsed again and rewritten.
        edits.sort_by_key(|(event, _, _)| *event);
        let mut edits = edits.into_iter().peekable();
        while let Some((index, _, _)) = edits.peek() {
            let index = *index;
            let Some(event) = events.get_mut(index) else {
                break;
            };
            let mut parsed = event_data(event);
            while let Some((_, path, text)) = edits.next_if(|(e, _, _)| *e == index) {
                match &mut parsed {
                    Some(Data::Json(value)) => {
                        if let Some(slot) = at_path(value, &path) {
                            *slot = Value::String(text);
                        }
                    }
                    Some(Data::Text(data)) => *data = text,
                    None => {}
                }
            }
            if let Some(parsed) = parsed {
                set_data(event, parsed);
            }
        }
        true
    }

    /// The new texts of the pieces a secret spans, for each secret spanning two or more.
    fn split_edits(&self, place: &Place) -> Vec<(usize, Vec<Step>, String)> {
        let (assembled, pieces) = (&place.assembled, &place.pieces);
        let piece_text = |i: usize| &assembled[pieces[i].start..pieces[i].start + pieces[i].len];
        let piece_of = |offset: usize| {
            pieces
                .partition_point(|p| p.start <= offset)
                .saturating_sub(1)
        };
        // Per piece, the local ranges to cut and whether `[REDACTED]` goes in their place.
        let mut cuts: Vec<Vec<(Range<usize>, bool)>> = vec![Vec::new(); pieces.len()];
        for secret in self.secret_ranges(assembled) {
            let (first, last) = (piece_of(secret.start), piece_of(secret.end - 1));
            if first == last {
                continue;
            }
            for (i, cut) in cuts.iter_mut().enumerate().take(last + 1).skip(first) {
                let start = secret.start.max(pieces[i].start) - pieces[i].start;
                let end = secret.end.min(pieces[i].start + pieces[i].len) - pieces[i].start;
                cut.push((start..end, i == first));
            }
        }
        let mut out = Vec::new();
        for (i, cut) in cuts.into_iter().enumerate() {
            if cut.is_empty() {
                continue;
            }
            let text = cut_text(piece_text(i), cut);
            out.push((pieces[i].event, place.path.clone(), text));
        }
        out
    }
}

/// `old` without the byte ranges of `cut`, `[REDACTED]` in place of those marked: one piece of
/// a secret's text (the first piece of a secret gets the marker, the others only lose theirs).
pub(super) fn cut_text(old: &str, mut cut: Vec<(Range<usize>, bool)>) -> String {
    cut.sort_by_key(|(range, _)| range.start);
    let mut text = String::with_capacity(old.len());
    let mut copied = 0;
    for (range, marker) in cut {
        if range.start < copied {
            // Overlaps a cut already made: extend it.
            copied = copied.max(range.end);
            continue;
        }
        text.push_str(&old[copied..range.start]);
        if marker {
            text.push_str(REDACTED);
        }
        copied = range.end;
    }
    text.push_str(&old[copied..]);
    text
}

/// The data of a stored event: an SSE event's `data`, an NDJSON line; parsed when it is a JSON
/// object or array.
pub(super) fn event_data(event: &Value) -> Option<Data> {
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

/// Puts `data` back into a stored event (an SSE event's `data`, an NDJSON line).
pub(super) fn set_data(event: &mut Value, data: Data) {
    let text = match data {
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

/// Calls `f` with every string of `value` and its path.
pub(super) fn visit_strings(value: &Value, path: &mut Vec<Step>, f: &mut dyn FnMut(&[Step], &str)) {
    match value {
        Value::String(s) => f(path, s),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(Step::Index(i));
                visit_strings(item, path, f);
                path.pop();
            }
        }
        Value::Object(map) => {
            for (name, child) in map {
                path.push(Step::Member(name.clone()));
                visit_strings(child, path, f);
                path.pop();
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

pub(super) fn at_path<'a>(value: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
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
