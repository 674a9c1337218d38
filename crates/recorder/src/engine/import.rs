//! Importing: an exchange recorded by another tool (a vcrpy cassette, an older harness's tape)
//! becomes a cassette keyed by the current contract, through the same redaction, stream
//! assembly and atomic writes as a live recording. Nothing is sent anywhere.

use super::recording::{Draft, Persist, Stamp, Stored};
use super::{header, Recorder};
use crate::cassette::StoredBody;
use crate::error::Result;
use crate::request::Request;
use crate::stream::{Assembler, StreamFormat};
use bytes::Bytes;
use cassette_keying::Key;
use cassette_store::Created;
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

/// Whether an import replaces a cassette already stored under the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportWrite {
    /// Keep what is stored (an import run twice changes nothing).
    CreateOnly,
    /// Replace it.
    Overwrite,
}

impl Recorder {
    /// Stores `exchange` as a cassette under the key the current contract gives its request.
    /// A streamed answer of a known format is assembled into its final response, as when
    /// recording. Returns the key and whether a cassette was written.
    pub async fn import(&self, exchange: Exchange, write: ImportWrite) -> Result<(Key, Created)> {
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
        let draft = Draft {
            recorder: self.clone(),
            upstream: self.inner.redactor.url(&exchange.upstream),
            request: exchange.request,
            keyed_key: keyed.key.clone(),
            profile: keyed.profile,
            // An imported exchange is its request's first occurrence.
            sequence: None,
            material: None,
            status: exchange.status,
            headers: exchange.headers,
            started: Instant::now(),
            persist: match write {
                ImportWrite::CreateOnly => Persist::CreateOnly,
                ImportWrite::Overwrite => Persist::Overwrite,
            },
            flight: None,
        };
        let stamp = Stamp {
            recorded_at: exchange.recorded_at,
            tool: exchange.tool,
            latency_ms: 0,
        };
        let created = match draft.store_stamped(body, format, None, stamp).await? {
            Stored::Won => Created::Won,
            Stored::Kept | Stored::Nothing => Created::AlreadyExists,
        };
        Ok((keyed.key, created))
    }
}
