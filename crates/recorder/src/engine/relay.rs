//! The per-chunk seam of a relayed stream, as pingora's body filter is: what to do with each
//! piece of an upstream stream (pass it on, or cut the stream at the answer limit) and what it
//! assembled into at its end, with no IO, so it is tested with bytes alone. The loop that reads
//! the upstream, sends to the client and stores the recording is `Draft::relay_stream`
//! (`recording.rs`).

use crate::error::Error;
use bytes::Bytes;
use cassette_tape::StoredBody;
use cassette_wire::{Assembler, StreamError, StreamFormat};
use serde_json::Value;

/// A stream relayed to the client piece by piece while it is assembled into a recording.
pub(super) struct Relay {
    format: StreamFormat,
    /// The route's base URL, without credentials, for the error of a cut stream.
    upstream: String,
    /// Whether the events as sent are kept beside the meaning (exact replay).
    exact: bool,
    /// Whether a stream ending in the upstream's own error event is recorded, as its events.
    errors: bool,
    /// The answer limit, in bytes.
    limit: usize,
    /// Whether the stream was to be recorded (a mode that stores nothing passes an over-limit
    /// stream on whole).
    recording: bool,
    /// What the stream is assembled into, until it grows over the limit.
    assembly: Option<Assembly>,
    received: usize,
    /// The last bytes passed on, to end a cut stream after a whole event.
    tail: Vec<u8>,
}

/// A stream being assembled into a recording.
struct Assembly {
    assembler: Assembler,
    /// The events as sent, when exact replay or error recording may keep them.
    events: Option<Assembler>,
}

/// What to do with one piece of the stream.
#[derive(Debug)]
pub(super) enum Relayed {
    /// Pass it on to the client.
    Pass(Bytes),
    /// Pass it on: the stream just grew over the answer limit and is no longer assembled
    /// (it was not to be recorded, so the client still gets all of it).
    PassOverLimit(Bytes),
    /// The stream grew over the answer limit while it was to be recorded: it is not, and the
    /// client gets `ending` (whole events within the limit, then an error event naming it, or
    /// an error where no event can end the stream), and the body ends.
    Cut {
        /// What the client gets before the body ends.
        ending: Vec<std::io::Result<Bytes>>,
        /// Why: the answer limit.
        error: Error,
    },
}

/// What a stream that ended was assembled into.
#[derive(Debug, PartialEq)]
pub(super) struct Assembled {
    /// The final response (or, for an error stream recorded as such, its events).
    pub(super) body: StoredBody,
    /// The format it is stored as.
    pub(super) format: StreamFormat,
    /// The events as sent, for exact replay.
    pub(super) events: Option<Vec<Value>>,
}

impl Relay {
    /// A relay of a `format` stream from `upstream` (for messages), within `limit` bytes.
    pub(super) fn new(
        format: StreamFormat,
        upstream: String,
        exact: bool,
        errors: bool,
        limit: usize,
        recording: bool,
    ) -> Relay {
        // Gemini's JSON array is one document, not a sequence of events to keep.
        let exact = exact && format != StreamFormat::GeminiJson;
        Relay {
            format,
            upstream,
            exact,
            errors,
            limit,
            recording,
            assembly: Some(Assembly {
                assembler: Assembler::new(format),
                events: (exact || errors).then(|| Assembler::new(format.framing())),
            }),
            received: 0,
            tail: Vec::with_capacity(8),
        }
    }

    /// Whether the stream is still assembled (a stream that breaks off then is a failed
    /// recording).
    pub(super) fn assembling(&self) -> bool {
        self.assembly.is_some()
    }

    /// Takes the next piece of the upstream stream.
    pub(super) fn chunk(&mut self, bytes: Bytes) -> Relayed {
        self.received = self.received.saturating_add(bytes.len());
        let mut over = false;
        if self.received > self.limit && self.assembly.is_some() {
            // Dropped here: a runaway stream is never held.
            self.assembly = None;
            if self.recording {
                let error = Error::AnswerTooLarge {
                    endpoint: self.upstream.clone(),
                    limit: self.limit,
                };
                // The client gets no more than the limit either, but the event under way, if
                // one is.
                let room = self.limit.saturating_sub(self.received - bytes.len());
                let ending = cut(self.format, &self.tail, bytes, room, &error);
                return Relayed::Cut { ending, error };
            }
            over = true;
        }
        if let Some(assembly) = &mut self.assembly {
            assembly.assembler.push(&bytes);
            if let Some(events) = &mut assembly.events {
                events.push(&bytes);
            }
        }
        keep_tail(&mut self.tail, &bytes);
        match over {
            true => Relayed::PassOverLimit(bytes),
            false => Relayed::Pass(bytes),
        }
    }

    /// What the stream assembled into once it ended; `None` when it was no longer assembled.
    pub(super) fn finish(self) -> Option<Result<Assembled, StreamError>> {
        let Assembly { assembler, events } = self.assembly?;
        let format = self.format;
        let assembled = match assembler.finish() {
            Ok(final_response) => {
                let events = match self.exact {
                    true => events.map(Assembler::finish).transpose(),
                    false => Ok(None),
                };
                events.map(|events| Assembled {
                    body: StoredBody::Json(final_response),
                    format,
                    events: events.and_then(|mut e| match e.get_mut("events") {
                        Some(Value::Array(list)) => Some(std::mem::take(list)),
                        _ => None,
                    }),
                })
            }
            // A stream that ends in the upstream's own error event is an error answer:
            // recorded when error answers are, event by event in its framing, as `import`
            // keeps one.
            Err(err @ StreamError::Upstream { .. }) if self.errors => match events {
                Some(events) => events.finish().map(|kept| Assembled {
                    body: StoredBody::Json(kept),
                    format: format.framing(),
                    events: None,
                }),
                None => Err(err),
            },
            Err(err) => Err(err),
        };
        Some(assembled)
    }
}

/// Keeps the last four bytes passed on.
fn keep_tail(tail: &mut Vec<u8>, bytes: &[u8]) {
    tail.extend_from_slice(&bytes[bytes.len().saturating_sub(4)..]);
    let excess = tail.len().saturating_sub(4);
    tail.drain(..excess);
}

/// How a stream cassette will not record ends: the whole events of `piece` (the one that
/// crossed the limit) that fit in `room`, or the rest of the event under way, then an error
/// event naming why, which the SDKs raise; the body then ends, so that the event is surely
/// delivered (a body that breaks off may lose what was still buffered). A stream without a
/// boundary to end on (one endless event, Gemini's JSON array) gets no error event, which would
/// be read as part of that event, but a broken body.
fn cut(
    format: StreamFormat,
    tail: &[u8],
    piece: Bytes,
    room: usize,
    err: &Error,
) -> Vec<std::io::Result<Bytes>> {
    let message = format!("cassette: {err}");
    let event = format.error_event(err.kind(), &message);
    match (format.cut_point(tail, &piece, room), event) {
        (Some(cut), Some(event)) => {
            let mut ending = Vec::with_capacity(2);
            if cut > 0 {
                ending.push(Ok(piece.slice(..cut)));
            }
            ending.push(Ok(event));
            ending
        }
        _ => vec![Err(std::io::Error::other(message))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UPSTREAM: &str = "https://api.example.com/v1";

    fn event(delta: &str, finish: &str) -> String {
        format!(
            "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\
             \"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        )
    }

    /// A chat stream saying "Hello", as three events and the end marker.
    fn hello() -> String {
        [
            event(r#"{"role":"assistant","content":"Hel"}"#, "null"),
            event(r#"{"content":"lo"}"#, "null"),
            event("{}", r#""stop""#),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat()
    }

    /// `stream` in pieces of `size` bytes, each cut wherever it falls.
    fn pieces(stream: &str, size: usize) -> Vec<Bytes> {
        stream
            .as_bytes()
            .chunks(size)
            .map(Bytes::copy_from_slice)
            .collect()
    }

    fn relay(exact: bool, errors: bool, limit: usize, recording: bool) -> Relay {
        let format = StreamFormat::OpenaiChat;
        Relay::new(format, UPSTREAM.into(), exact, errors, limit, recording)
    }

    fn content(assembled: &Assembled) -> &str {
        let StoredBody::Json(body) = &assembled.body else {
            panic!("{:?}", assembled.body);
        };
        body["choices"][0]["message"]["content"].as_str().unwrap()
    }

    #[test]
    fn pieces_pass_on_as_they_come_and_assemble_at_the_end() {
        for exact in [false, true] {
            let mut relay = relay(exact, false, 1 << 20, true);
            for piece in pieces(&hello(), 7) {
                match relay.chunk(piece.clone()) {
                    Relayed::Pass(passed) => assert_eq!(passed, piece),
                    other => panic!("{other:?}"),
                }
            }
            let assembled = relay.finish().unwrap().unwrap();
            assert_eq!(content(&assembled), "Hello");
            assert_eq!(assembled.format, StreamFormat::OpenaiChat);
            // Exact replay keeps every event as sent, the end marker included.
            let kept = assembled.events.as_ref().map(Vec::len);
            assert_eq!(kept, exact.then_some(4), "exact {exact}");
        }
    }

    #[test]
    fn a_recorded_stream_over_the_limit_is_cut_after_its_last_whole_event() {
        let stream = hello();
        let first = event(r#"{"role":"assistant","content":"Hel"}"#, "null");
        // The first event and a half fit; the second piece crosses the limit.
        let limit = first.len() + 20;
        let mut relay = relay(false, false, limit, true);
        let (head, rest) = stream.split_at(first.len() + 10);
        assert!(matches!(
            relay.chunk(Bytes::from(head.to_owned())),
            Relayed::Pass(_)
        ));
        let Relayed::Cut { ending, error } = relay.chunk(Bytes::from(rest.to_owned())) else {
            panic!("not cut");
        };
        assert!(matches!(error, Error::AnswerTooLarge { limit: l, .. } if l == limit));
        let ending: Vec<Bytes> = ending.into_iter().map(Result::unwrap).collect();
        // The rest of the event under way, then the error event naming the limit and upstream.
        let second = event(r#"{"content":"lo"}"#, "null");
        assert_eq!(ending[0], second.as_bytes()[10..]);
        let error_event = String::from_utf8(ending[1].to_vec()).unwrap();
        assert!(
            error_event.starts_with("event: error\ndata: "),
            "{error_event}"
        );
        assert!(error_event.contains("answer limit"), "{error_event}");
        assert!(error_event.contains(UPSTREAM), "{error_event}");
        assert_eq!(ending.len(), 2);
        assert!(!relay.assembling());
        assert!(relay.finish().is_none(), "a cut stream is not recorded");
    }

    #[test]
    fn a_stream_not_recorded_passes_over_the_limit_whole_unassembled() {
        let mut relay = relay(false, false, 30, false);
        let mut over = 0;
        let mut passed = Vec::new();
        for piece in pieces(&hello(), 25) {
            match relay.chunk(piece) {
                Relayed::Pass(bytes) => passed.extend_from_slice(&bytes),
                Relayed::PassOverLimit(bytes) => {
                    over += 1;
                    passed.extend_from_slice(&bytes);
                }
                Relayed::Cut { .. } => panic!("cut"),
            }
        }
        assert_eq!(over, 1, "said once, when it crossed");
        assert_eq!(passed, hello().as_bytes());
        assert!(relay.finish().is_none());
    }

    #[test]
    fn an_upstream_error_event_is_recorded_as_its_events_only_when_errors_are() {
        let stream = [
            event(r#"{"role":"assistant","content":"Hel"}"#, "null"),
            "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n"
                .to_owned(),
        ]
        .concat();
        let mut recording = relay(false, true, 1 << 20, true);
        let mut refused = relay(false, false, 1 << 20, true);
        for piece in pieces(&stream, 16) {
            recording.chunk(piece.clone());
            refused.chunk(piece);
        }
        let kept = recording.finish().unwrap().unwrap();
        assert_eq!(kept.format, StreamFormat::GenericSse);
        let StoredBody::Json(events) = &kept.body else {
            panic!("{:?}", kept.body);
        };
        assert_eq!(
            events["events"].as_array().map(Vec::len),
            Some(2),
            "{events}"
        );
        let err = refused.finish().unwrap().unwrap_err();
        assert!(matches!(err, StreamError::Upstream { .. }), "{err}");
    }

    #[test]
    fn the_tail_keeps_the_last_four_bytes() {
        let mut tail = Vec::new();
        keep_tail(&mut tail, b"ab");
        keep_tail(&mut tail, b"cdef");
        assert_eq!(tail, b"cdef");
        keep_tail(&mut tail, b"g");
        assert_eq!(tail, b"defg");
    }
}
