//! The split-secret pass of `streams`, live: a stream's events arrive one at a time and each
//! goes on as soon as no text it ends with may start a watched secret, so a secret spelled out
//! across the text of several events (`"sk-ant"` in one delta, the rest in the next) is
//! replaced before any of its pieces goes on. The proxy keeps a route's key from the client
//! with it while it relays a stream it records.
//!
//! Events are in the stored form of a generic stream (`{"event", "data", "id", "retry"}` for
//! server-sent events, the line itself for NDJSON), which `cassette_wire` reads and writes; the
//! places and their assembled text are those of [`Redactor::response_body`](super::Redactor).

use super::streams::{at_path, cut_text, event_data, set_data, visit_strings, Data, Step};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;

/// Watches a stream's events for secrets spelled across their text, holding back only the
/// events whose text may be the start of one.
///
/// An event is held while the text assembled at one of its places ends with at least
/// `hold_from` bytes that start a secret; it goes on, its pieces of a secret rewritten, once
/// the secret is complete, and unchanged as soon as the text turns out not to be one. A
/// shorter start is let through and remembered: when the secret completes, only its first
/// `hold_from - 1` bytes or fewer have gone on, and the rest is replaced. Held events are
/// never lost: [`SplitWatch::finish`] lets them all go.
#[derive(Debug)]
pub struct SplitWatch<T> {
    secrets: Vec<Vec<u8>>,
    hold_from: usize,
    /// The number of the next event.
    next: u64,
    held: VecDeque<Held<T>>,
    /// By event name (`""` for none) and path: the text there that may still be part of a
    /// secret.
    places: HashMap<(String, Vec<Step>), Pending>,
}

/// An event that may go on, with what it is to be passed on as.
#[derive(Debug)]
pub struct Released<T> {
    /// What was pushed with the event.
    pub payload: T,
    /// The event rewritten (in the same stored form) when a secret's piece was cut from its
    /// text; `None` when it goes on unchanged.
    pub rewritten: Option<Value>,
}

#[derive(Debug)]
struct Held<T> {
    seq: u64,
    payload: T,
    event: Option<Value>,
    /// The event's strings: path and text, in the order of `Pending` spans' `piece`.
    pieces: Vec<(Vec<Step>, String)>,
    /// Per piece, the byte ranges to cut and whether `[REDACTED]` goes in their place.
    cuts: Vec<Vec<(Range<usize>, bool)>>,
}

/// The end of a place's assembled text that may still be (part of) a secret.
#[derive(Debug, Default)]
struct Pending {
    text: Vec<u8>,
    spans: Vec<Span>,
}

/// Where a run of `Pending::text` comes from: bytes `from..from + len` of one event's piece.
#[derive(Debug)]
struct Span {
    seq: u64,
    piece: usize,
    start: usize,
    from: usize,
    len: usize,
}

impl Pending {
    /// Forgets the first `n` bytes: they can no longer be part of a secret.
    fn drop_front(&mut self, n: usize) {
        self.text.drain(..n);
        self.spans.retain_mut(|span| {
            if span.start + span.len <= n {
                return false;
            }
            if span.start < n {
                let cut = n - span.start;
                span.from += cut;
                span.len -= cut;
                span.start = 0;
            } else {
                span.start -= n;
            }
            true
        });
    }
}

impl<T> SplitWatch<T> {
    /// A watch for `secrets` (empty ones are ignored), holding events for a start of a secret
    /// of `hold_from` bytes or more (at least 1).
    pub fn new(secrets: &[&str], hold_from: usize) -> SplitWatch<T> {
        SplitWatch {
            secrets: secrets
                .iter()
                .filter(|s| !s.is_empty())
                .map(|s| s.as_bytes().to_vec())
                .collect(),
            hold_from: hold_from.max(1),
            next: 0,
            held: VecDeque::new(),
            places: HashMap::new(),
        }
    }

    /// The next event (`None` for what carries no event: a comment, a blank line, what does
    /// not parse) with what to hand back when it may go on; returns the events that may go on
    /// now, in order.
    pub fn push(&mut self, event: Option<Value>, payload: T) -> Vec<Released<T>> {
        let seq = self.next;
        self.next += 1;
        let mut pieces = Vec::new();
        let name = event
            .as_ref()
            .and_then(|e| e.get("event"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        match event.as_ref().and_then(event_data) {
            Some(Data::Json(value)) => {
                let mut add = |path: &[Step], text: &str| {
                    pieces.push((path.to_vec(), text.to_owned()));
                };
                visit_strings(&value, &mut Vec::new(), &mut add);
            }
            Some(Data::Text(text)) => pieces.push((Vec::new(), text)),
            None => {}
        }
        self.held.push_back(Held {
            seq,
            payload,
            event,
            cuts: vec![Vec::new(); pieces.len()],
            pieces: Vec::new(),
        });
        for (piece, (path, text)) in pieces.iter().enumerate() {
            let place = self.places.entry((name.clone(), path.clone())).or_default();
            place.spans.push(Span {
                seq,
                piece,
                start: place.text.len(),
                from: 0,
                len: text.len(),
            });
            place.text.extend_from_slice(text.as_bytes());
            let key = (name.clone(), path.clone());
            self.settle(&key);
        }
        if let Some(last) = self.held.back_mut() {
            last.pieces = pieces;
        }
        // Everything before the first event a start of a secret long enough is in goes on.
        let hold_at = self
            .places
            .values()
            .filter(|p| p.text.len() >= self.hold_from)
            .filter_map(|p| p.spans.first().map(|s| s.seq))
            .min();
        let mut out = Vec::new();
        while let Some(first) = self.held.front() {
            if hold_at.is_some_and(|at| first.seq >= at) {
                break;
            }
            out.extend(self.held.pop_front().map(release));
        }
        out
    }

    /// The stream ended: every held event goes on (no secret was completed in them).
    pub fn finish(&mut self) -> Vec<Released<T>> {
        self.places.clear();
        self.held.drain(..).map(release).collect()
    }

    /// Cuts every whole secret from a place's pending text (in the pieces still held), then
    /// keeps only its end that may start one.
    fn settle(&mut self, key: &(String, Vec<Step>)) {
        let Some(place) = self.places.get_mut(key) else {
            return;
        };
        let first_held = self.held.front().map_or(u64::MAX, |h| h.seq);
        while let Some(found) = find(&place.text, &self.secrets) {
            let mut marker = true;
            for span in &place.spans {
                let (start, end) = (span.start, span.start + span.len);
                if span.seq < first_held || end <= found.start || start >= found.end {
                    continue;
                }
                let lo = found.start.max(start) - start + span.from;
                let hi = found.end.min(end) - start + span.from;
                let Some(held) = self.held.get_mut((span.seq - first_held) as usize) else {
                    continue;
                };
                if let Some(cuts) = held.cuts.get_mut(span.piece) {
                    cuts.push((lo..hi, std::mem::take(&mut marker)));
                }
            }
            place.drop_front(found.end);
        }
        let text = &place.text;
        let keep = (0..text.len())
            .find(|&i| self.secrets.iter().any(|s| s.starts_with(&text[i..])))
            .map_or(0, |i| text.len() - i);
        place.drop_front(place.text.len() - keep);
        if place.text.is_empty() {
            self.places.remove(key);
        }
    }
}

/// The first whole secret in `text`.
fn find(text: &[u8], secrets: &[Vec<u8>]) -> Option<Range<usize>> {
    (0..text.len()).find_map(|at| {
        secrets
            .iter()
            .find(|s| text[at..].starts_with(s))
            .map(|s| at..at + s.len())
    })
}

/// A held event as it goes on: rewritten when a secret's piece was cut from it.
fn release<T>(held: Held<T>) -> Released<T> {
    let Held {
        payload,
        event,
        pieces,
        cuts,
        ..
    } = held;
    let (Some(mut event), true) = (event, cuts.iter().any(|c| !c.is_empty())) else {
        return Released {
            payload,
            rewritten: None,
        };
    };
    let Some(mut data) = event_data(&event) else {
        return Released {
            payload,
            rewritten: None,
        };
    };
    for ((path, text), cut) in pieces.iter().zip(cuts) {
        if cut.is_empty() {
            continue;
        }
        let text = cut_text(text, cut);
        match &mut data {
            Data::Json(value) => {
                if let Some(slot) = at_path(value, path) {
                    *slot = Value::String(text);
                }
            }
            Data::Text(data) => *data = text,
        }
    }
    set_data(&mut event, data);
    Released {
        payload,
        rewritten: Some(event),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "sk-ant-api03-Qw7Er9Ty2Ui4Op6As8Df0Gh1Jk3Lz5Xc7Vb9Nm";

    fn delta(text: &str) -> Value {
        let data =
            json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": text}});
        json!({"event": "content_block_delta", "data": data.to_string()})
    }

    fn text_of(event: &Value) -> String {
        let data: Value = serde_json::from_str(event["data"].as_str().unwrap()).unwrap();
        data["delta"]["text"].as_str().unwrap().to_owned()
    }

    /// The events of `texts` through a watch: (index, event as it goes on) in order, and how
    /// many were held after each push.
    fn watched(texts: &[&str]) -> (Vec<(usize, Value)>, Vec<usize>) {
        let mut watch = SplitWatch::new(&[KEY], 4);
        let (mut out, mut held) = (Vec::new(), Vec::new());
        let events: Vec<Value> = texts.iter().map(|t| delta(t)).collect();
        for (i, event) in events.iter().enumerate() {
            let gone = watch.push(Some(event.clone()), i);
            held.push(i + 1 - out.len() - gone.len());
            out.extend(gone);
        }
        out.extend(watch.finish());
        let out = out
            .into_iter()
            .map(|r| {
                let event = r.rewritten.unwrap_or_else(|| events[r.payload].clone());
                (r.payload, event)
            })
            .collect();
        (out, held)
    }

    #[test]
    fn a_key_in_small_pieces_goes_on_redacted_and_in_order() {
        let mut texts = vec!["Your key is "];
        let pieces: Vec<&str> = (0..KEY.len())
            .step_by(4)
            .map(|at| &KEY[at..(at + 4).min(KEY.len())])
            .collect();
        texts.extend(&pieces);
        texts.push(". Keep it.");
        let (out, _) = watched(&texts);
        let order: Vec<usize> = out.iter().map(|(i, _)| *i).collect();
        assert_eq!(order, (0..texts.len()).collect::<Vec<_>>());
        let assembled: String = out.iter().map(|(_, e)| text_of(e)).collect();
        assert_eq!(assembled, "Your key is [REDACTED]. Keep it.");
    }

    #[test]
    fn a_short_start_goes_on_and_the_rest_is_still_replaced() {
        let (out, held) = watched(&["key: s", &KEY[1..20], &KEY[20..], " done"]);
        // "s" may start the key but is too short to hold: it goes on at once.
        assert_eq!(held[0], 0);
        assert_eq!(held[1], 1);
        let assembled: String = out.iter().map(|(_, e)| text_of(e)).collect();
        assert_eq!(assembled, "key: s[REDACTED] done");
    }

    #[test]
    fn ordinary_text_is_never_held_and_a_false_start_is_released() {
        let (out, held) = watched(&["The max_tokens ", "setting; ask ", "anyone", "."]);
        assert!(held.iter().all(|&h| h == 0), "{held:?}");
        assert!(out
            .iter()
            .all(|(i, e)| *e == delta(["The max_tokens ", "setting; ask ", "anyone", "."][*i])));
        let (out, held) = watched(&["a sk-ant-", "api03 is a prefix", "!"]);
        assert_eq!(held, [1, 0, 0]);
        let assembled: String = out.iter().map(|(_, e)| text_of(e)).collect();
        assert_eq!(assembled, "a sk-ant-api03 is a prefix!");
    }

    #[test]
    fn ndjson_lines_and_text_data_are_watched() {
        let mut watch = SplitWatch::new(&[KEY], 4);
        let first = json!({"message": {"content": &KEY[..10]}}).to_string();
        let second = json!({"message": {"content": &KEY[10..]}, "done": true}).to_string();
        assert!(watch.push(Some(json!(first)), 0).is_empty());
        let out = watch.push(Some(json!(second)), 1);
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[0].rewritten,
            Some(json!(r#"{"message":{"content":"[REDACTED]"}}"#))
        );
        assert_eq!(
            out[1].rewritten,
            Some(json!(r#"{"done":true,"message":{"content":""}}"#))
        );
        let mut watch = SplitWatch::new(&[KEY], 4);
        assert!(watch.push(Some(json!({"data": &KEY[..8]})), 0).is_empty());
        assert!(
            watch.push(None, 1).is_empty(),
            "held behind the event before it"
        );
        let out = watch.push(Some(json!({"data": format!("{} x", &KEY[8..])})), 2);
        let rewritten: Vec<Option<Value>> = out.into_iter().map(|r| r.rewritten).collect();
        assert_eq!(
            rewritten,
            [
                Some(json!({"data": "[REDACTED]"})),
                None,
                Some(json!({"data": " x"}))
            ]
        );
    }
}
