//! Importing: an exchange recorded by another tool (a vcrpy cassette, an older harness's tape)
//! becomes a cassette keyed by the current contract, through the same redaction, stream
//! assembly and atomic writes as a live recording. Nothing is sent anywhere.

use super::recording::Draft;
use super::write::{Stamp, Stored};
use super::Recorder;
use crate::error::Result;
use crate::mode::Write;
use bytes::Bytes;
use cassette_keying::Key;
use cassette_tape::headers::header;
use cassette_tape::{Request, StoredBody};
use cassette_wire::{Assembler, StreamFormat};
use std::time::Instant;

/// A finished exchange recorded elsewhere.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The request as it was sent (routed: `target` names the route).
    pub request: Request,
    /// The answer's status.
    pub status: u16,
    /// The answer's headers.
    pub headers: Vec<(String, String)>,
    /// The answer's body, decoded (no content encoding); a stream as it was sent.
    pub body: Bytes,
    /// The upstream's base URL (credentials are removed before it is stored).
    pub upstream: String,
    /// When it was recorded, RFC 3339.
    pub recorded_at: String,
    /// What recorded it, for the cassette's `tool` field.
    pub tool: String,
}

impl Recorder {
    /// Stores `exchange` as a cassette under the key the current contract gives its request.
    /// A streamed answer of a known format is assembled into its final response, as when
    /// recording. `write` says whether a cassette stored under the same key is replaced
    /// ([`Write::Overwrite`]), kept ([`Write::CreateOnly`]: an import run twice changes
    /// nothing), or nothing is written at all ([`Write::Nothing`]: a dry run that still checks
    /// the exchange converts). Returns the key and what was written.
    pub async fn import(&self, exchange: Exchange, write: Write) -> Result<(Key, Stored)> {
        let keyed = exchange.request.key(&self.inner.config.key);
        let success = (200..300).contains(&exchange.status);
        let format = success
            .then(|| {
                let content_type = header(&exchange.headers, "content-type").unwrap_or_default();
                StreamFormat::detect(keyed.profile, content_type)
            })
            .flatten();
        let body = match format {
            Some(format) => {
                let mut assembler = Assembler::new(format);
                assembler.push(&exchange.body);
                StoredBody::Json(assembler.finish()?)
            }
            None => StoredBody::from_bytes(&exchange.body),
        };
        let mut draft = Draft {
            recorder: self.clone(),
            upstream: self.inner.redactor.url(&exchange.upstream),
            request: exchange.request,
            keyed_key: keyed.key.clone(),
            profile: keyed.profile,
            test: None,
            // An imported exchange is its request's first occurrence.
            sequence: None,
            material: None,
            status: exchange.status,
            headers: exchange.headers,
            started: Instant::now(),
            write,
            flight: None,
        };
        let stamp = Stamp {
            recorded_at: exchange.recorded_at,
            tool: exchange.tool,
            latency_ms: 0,
        };
        let stored = draft.store_stamped(body, format, None, stamp).await?;
        Ok((keyed.key, stored))
    }
}
