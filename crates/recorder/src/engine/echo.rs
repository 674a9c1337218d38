//! The route's own key kept from the client: an upstream that echoes the key the proxy added
//! (a 401 message quoting it, a body or stream repeating it) must not hand it to the command,
//! which was only ever given a placeholder. Pure, tested with bytes; the store's redactor
//! already keeps it off disk, this is what is passed on live (record, auto and off modes).
//!
//! Two layers for a stream: the bytes (the key as the upstream wrote it, however the network
//! cut it), then its events (the key spelled out across the text of several events, found by
//! the tape's split-secret pass in its live form, `SplitWatch`).

use crate::upstream::query_encode;
use bytes::Bytes;
use cassette_tape::redact::{Released, SplitWatch, MIN_REDACTED_SECRET, REDACTED};
use cassette_wire::{synthesize, Assembler, StreamFormat, SynthesisOptions};
use serde_json::{json, Value};

/// How much of the key's start an event's text may end with before the event is held back
/// (until the next events show whether the key follows). Any start would catch every key, but
/// one or two letters (`s`, `sk`) end ordinary text often, and each hold delays the stream; a
/// shorter start goes on and the rest of the key is still replaced, so at most this less one
/// byte of the key (its public prefix, `sk-`) reaches the client.
const HOLD_FROM: usize = 4;

/// Replaces a route's key in what goes to the client, whole or piece by piece; a piece's end
/// that may be the start of the key is held back until the next piece shows whether it is.
#[derive(Debug)]
pub(super) struct Echo {
    /// The key as sent, and the forms an upstream may echo it in (JSON-escaped, URL-encoded).
    needles: Vec<Vec<u8>>,
    /// The end of the last piece, held back: the start of a needle.
    held: Vec<u8>,
    /// A stream's events, watched for the key across their text.
    events: Option<Events>,
}

/// The events of a stream as they are passed on: each whole event, held back while its text
/// ends with a start of the key, rewritten when the key completes.
#[derive(Debug)]
struct Events {
    /// The stream's framing: generic server-sent events or NDJSON lines.
    framing: StreamFormat,
    /// The bytes of an event not yet whole. A client reads nothing of an event before its end
    /// (a blank line, a newline), so holding them costs it nothing.
    partial: Vec<u8>,
    watch: SplitWatch<Bytes>,
}

impl Events {
    fn push(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        self.partial.extend_from_slice(bytes);
        let mut from = 0;
        for end in self.framing.event_ends(&self.partial) {
            let raw = &self.partial[from..end];
            from = end;
            let event = stored_event(self.framing, raw);
            for released in self.watch.push(event, Bytes::copy_from_slice(raw)) {
                write(self.framing, released, out);
            }
        }
        self.partial.drain(..from);
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        for released in self.watch.finish() {
            write(self.framing, released, out);
        }
        out.append(&mut self.partial);
    }
}

/// One whole event's bytes in the stored form of a generic stream (`None`: a comment, a blank
/// line, what does not read).
fn stored_event(framing: StreamFormat, raw: &[u8]) -> Option<Value> {
    let mut assembler = Assembler::new(framing);
    assembler.push(raw);
    let mut body = assembler.finish().ok()?;
    match body.get_mut("events").and_then(Value::as_array_mut) {
        Some(events) if events.len() == 1 => events.pop(),
        _ => None,
    }
}

/// An event as it goes on: its own bytes, or, rewritten, written again in its framing.
fn write(framing: StreamFormat, released: Released<Bytes>, out: &mut Vec<u8>) {
    let Some(event) = released.rewritten else {
        out.extend_from_slice(&released.payload);
        return;
    };
    let options = SynthesisOptions {
        chunk_size: 0,
        include_usage: false,
    };
    // A stored event always writes again; if one did not, dropping it is what keeps the key.
    if let Ok(pieces) = synthesize(framing, &json!({ "events": [event] }), &options) {
        pieces.iter().for_each(|piece| out.extend_from_slice(piece));
    }
}

impl Echo {
    /// The scrubber of `key`; `None` when it is too short to be redacted as text (the store's
    /// redactor skips it too: a short word would mangle every answer).
    pub(super) fn new(key: &str) -> Option<Echo> {
        let key = key.trim();
        if key.len() < MIN_REDACTED_SECRET {
            return None;
        }
        let mut needles = vec![key.as_bytes().to_vec()];
        let forms = [
            json_escaped(key),
            key.replace('/', "\\/"),
            query_encode(key),
        ];
        for form in forms {
            if !needles.iter().any(|n| n == form.as_bytes()) {
                needles.push(form.into_bytes());
            }
        }
        Some(Echo {
            needles,
            held: Vec::new(),
            events: None,
        })
    }

    /// The scrubber for a stream of `format`: its events are also watched for the key spelled
    /// across their text (not Gemini's JSON array, which has no events: bytes only).
    pub(super) fn stream(mut self, format: StreamFormat) -> Echo {
        if format != StreamFormat::GeminiJson {
            let needles: Vec<&str> = self
                .needles
                .iter()
                .filter_map(|n| std::str::from_utf8(n).ok())
                .collect();
            self.events = Some(Events {
                framing: format.framing(),
                partial: Vec::new(),
                watch: SplitWatch::new(&needles, HOLD_FROM),
            });
        }
        self
    }

    /// A whole answer with every occurrence of the key replaced.
    pub(super) fn whole(&self, bytes: Bytes) -> Bytes {
        let (out, rest) = self.scan(&bytes, true);
        debug_assert!(rest.is_empty());
        match out {
            None => bytes,
            Some(out) => Bytes::from(out),
        }
    }

    /// A header value (or any text) with the key replaced.
    pub(super) fn text(&self, text: &str) -> String {
        match self.scan(text.as_bytes(), true).0 {
            // Only whole ASCII needles are replaced by ASCII: still UTF-8.
            Some(out) => String::from_utf8_lossy(&out).into_owned(),
            None => text.to_owned(),
        }
    }

    /// The next piece of a stream: what may be passed on now (the held bytes of the last
    /// piece first), with the key replaced; an end that may start the key is held back.
    pub(super) fn chunk(&mut self, bytes: Bytes) -> Bytes {
        let bytes = self.bytes(bytes);
        match &mut self.events {
            None => bytes,
            Some(events) => {
                let mut out = Vec::new();
                events.push(&bytes, &mut out);
                Bytes::from(out)
            }
        }
    }

    /// What was held back, once the stream ends (it did not turn out to be the key).
    pub(super) fn finish(&mut self) -> Bytes {
        let held = std::mem::take(&mut self.held);
        match &mut self.events {
            None => Bytes::from(held),
            Some(events) => {
                let mut out = Vec::new();
                events.push(&held, &mut out);
                events.finish(&mut out);
                Bytes::from(out)
            }
        }
    }

    /// The byte layer of [`Echo::chunk`].
    fn bytes(&mut self, bytes: Bytes) -> Bytes {
        if self.held.is_empty() {
            let (out, rest) = self.scan(&bytes, false);
            let keep = bytes.len() - rest.len();
            self.held = rest.to_vec();
            return match out {
                None => bytes.slice(..keep),
                Some(out) => Bytes::from(out),
            };
        }
        let mut joined = std::mem::take(&mut self.held);
        joined.extend_from_slice(&bytes);
        let (out, rest) = self.scan(&joined, false);
        let keep = joined.len() - rest.len();
        let held = rest.to_vec();
        let out = match out {
            Some(out) => out,
            None => {
                joined.truncate(keep);
                joined
            }
        };
        self.held = held;
        Bytes::from(out)
    }

    /// `bytes` with every whole needle replaced (`None` when none was found), and, unless
    /// `to_end`, the end of `bytes` that is the start of a needle, left out of the output.
    fn scan<'a>(&self, bytes: &'a [u8], to_end: bool) -> (Option<Vec<u8>>, &'a [u8]) {
        let mut out: Option<Vec<u8>> = None;
        let mut copied = 0;
        let mut at = 0;
        while at < bytes.len() {
            let rest = &bytes[at..];
            if let Some(needle) = self.needles.iter().find(|n| rest.starts_with(n)) {
                let out = out.get_or_insert_with(|| Vec::with_capacity(bytes.len()));
                out.extend_from_slice(&bytes[copied..at]);
                out.extend_from_slice(REDACTED.as_bytes());
                at += needle.len();
                copied = at;
                continue;
            }
            if !to_end && self.needles.iter().any(|n| n.starts_with(rest)) {
                break;
            }
            at += 1;
        }
        let held = &bytes[at..];
        if let Some(out) = &mut out {
            out.extend_from_slice(&bytes[copied..at]);
        }
        (out, held)
    }
}

/// `key` as it reads inside a JSON string.
fn json_escaped(key: &str) -> String {
    let quoted = serde_json::to_string(key).unwrap_or_default();
    quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or(key)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-ant-api03-abcdefghij/klmn+op";

    fn relayed(pieces: &[&[u8]]) -> String {
        let mut echo = Echo::new(KEY).unwrap();
        let mut out = Vec::new();
        for piece in pieces {
            out.extend_from_slice(&echo.chunk(Bytes::copy_from_slice(piece)));
        }
        out.extend_from_slice(&echo.finish());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_whole_answer_loses_every_form_of_the_key() {
        let echo = Echo::new(KEY).unwrap();
        let body = format!(
            r#"{{"error":"bad key {KEY}","again":"{}","url":"?key={}"}}"#,
            KEY.replace('/', "\\/"),
            query_encode(KEY)
        );
        let out = echo.whole(Bytes::from(body));
        assert_eq!(
            out,
            r#"{"error":"bad key [REDACTED]","again":"[REDACTED]","url":"?key=[REDACTED]"}"#
        );
        let clean = Bytes::from_static(b"{\"ok\":\"sk-ant-api03-other\"}");
        assert_eq!(echo.whole(clean.clone()), clean);
        assert_eq!(echo.text(&format!("Bearer {KEY}")), "Bearer [REDACTED]");
    }

    #[test]
    fn a_key_split_across_pieces_anywhere_is_caught() {
        let stream = format!("data: {{\"text\":\"key {KEY} twice {KEY}\"}}\n\n");
        let expected = "data: {\"text\":\"key [REDACTED] twice [REDACTED]\"}\n\n";
        let bytes = stream.as_bytes();
        for size in 1..=bytes.len() {
            let pieces: Vec<&[u8]> = bytes.chunks(size).collect();
            assert_eq!(relayed(&pieces), expected, "pieces of {size}");
        }
    }

    #[test]
    fn a_start_of_the_key_that_does_not_go_on_is_passed_on() {
        assert_eq!(
            relayed(&[b"a sk-ant-", b"api03 is a prefix"]),
            "a sk-ant-api03 is a prefix"
        );
        assert_eq!(relayed(&[b"ends in sk-ant-api"]), "ends in sk-ant-api");
        let mut echo = Echo::new(KEY).unwrap();
        // Held back until the next piece says, and a clean piece passes whole.
        assert_eq!(echo.chunk(Bytes::from_static(b"x sk-an")), "x ");
        assert_eq!(echo.chunk(Bytes::from_static(b"d y")), "sk-and y");
    }

    #[test]
    fn a_key_spelled_across_events_is_caught_however_the_network_cuts_them() {
        let event = |text: &str| format!("data: {}\n\n", serde_json::json!({ "t": text }));
        let stream: String = ["key "]
            .into_iter()
            .chain(
                KEY.as_bytes()
                    .chunks(5)
                    .map(|c| std::str::from_utf8(c).unwrap()),
            )
            .chain([" end"])
            .map(event)
            .collect();
        let expected = [event("key "), event("[REDACTED]"), event("")].concat();
        let bytes = stream.as_bytes();
        for size in [1, 3, 7, 64, bytes.len()] {
            let mut echo = Echo::new(KEY).unwrap().stream(StreamFormat::OpenaiChat);
            let mut out = Vec::new();
            for piece in bytes.chunks(size) {
                out.extend_from_slice(&echo.chunk(Bytes::copy_from_slice(piece)));
            }
            out.extend_from_slice(&echo.finish());
            let out = String::from_utf8(out).unwrap();
            assert!(out.starts_with(&expected), "pieces of {size}: {out}");
            assert!(out.ends_with(&event(" end")), "pieces of {size}: {out}");
        }
    }

    #[test]
    fn a_short_key_is_not_scrubbed() {
        assert!(Echo::new(" short ").is_none());
    }
}
