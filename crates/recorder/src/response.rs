//! What the recorder answers: the response handed to the client and where it came from.

use bytes::Bytes;
use cassette_keying::Key;
use futures::{Stream, StreamExt};
use serde::Serialize;
use std::fmt;
use std::pin::Pin;

/// A body stream handed to the client.
pub type BodyStream = Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>;

/// A response body: complete, or streamed as it arrives.
pub enum ResponseBody {
    /// The whole body.
    Full(Bytes),
    /// Pieces, in order.
    Stream(BodyStream),
}

impl fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseBody::Full(b) => f.debug_tuple("Full").field(&b.len()).finish(),
            ResponseBody::Stream(_) => f.write_str("Stream(..)"),
        }
    }
}

/// A response to hand to the client.
#[derive(Debug)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// Headers (no hop-by-hop or length headers: the server sets those).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: ResponseBody,
}

impl Response {
    /// Reads the whole body, waiting for a stream to end.
    pub async fn into_bytes(self) -> std::io::Result<Bytes> {
        match self.body {
            ResponseBody::Full(bytes) => Ok(bytes),
            ResponseBody::Stream(mut stream) => {
                let mut out = Vec::new();
                while let Some(piece) = stream.next().await {
                    out.extend_from_slice(&piece?);
                }
                Ok(Bytes::from(out))
            }
        }
    }

    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        cassette_tape::headers::header(&self.headers, name)
    }
}

/// Where an answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// Replayed from a cassette.
    Replayed,
    /// Fetched from the upstream and stored.
    Recorded,
    /// A stream fetched from the upstream and being recorded as it is relayed: the headers go
    /// out before the stream is complete, so whether it was stored is only known later (the
    /// recorder's counters and [`Recorder::recording_failures`](crate::Recorder::recording_failures)).
    Recording,
    /// Fetched from the upstream and not stored (mode `off`, an error answer, or a create-only
    /// write that another recorder won).
    PassedThrough,
    /// Not recorded, answered with an error in the protocol's own form (an MCP route answers a
    /// replay miss with a JSON-RPC error, which MCP clients show as it is).
    Missed,
}

impl Source {
    /// How it is spelled wherever it is shown: the proxy's `x-cassette` header, JSON (it
    /// serializes so) and the journal's outcomes ([`crate::proxy::Answered`]).
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Replayed => "replayed",
            Source::Recorded => "recorded",
            Source::Recording => "recording",
            Source::PassedThrough => "passed-through",
            Source::Missed => "missed",
        }
    }
}

/// The answer to a request.
#[derive(Debug)]
pub struct Outcome {
    /// The request's key.
    pub key: Key,
    /// Where the answer came from.
    pub source: Source,
    /// The answer.
    pub response: Response,
}
