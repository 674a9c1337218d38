//! Recording: an upstream answer becomes a redacted cassette, written as the mode says; a
//! stream is relayed to the client piece by piece while it is assembled.

use super::Recorder;
use crate::cassette::{
    format_for, Cassette, KeySettings, Meta, Sequence, StoredBody, StoredRequest, StoredResponse,
};
use crate::error::Result;
use crate::request::Request;
use crate::response::BodyStream;
use crate::stream::{self, Assembler, StreamFormat};
use bytes::Bytes;
use cassette_keying::{Key, Profile};
use cassette_store::Created;
use futures::StreamExt;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::mpsc;

/// The version string recorded in cassettes.
const TOOL: &str = concat!("cassette ", env!("CARGO_PKG_VERSION"));

/// How a recording is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Persist {
    /// Replace any previous recording (mode `record`: the user asked to re-record).
    Overwrite,
    /// Keep a recording another runner stored first (mode `auto` filling a miss).
    CreateOnly,
    /// Store nothing (mode `off`).
    Nothing,
}

/// Where a recording came from: when, by what, how long the upstream took.
pub(super) struct Stamp {
    pub(super) recorded_at: String,
    pub(super) tool: String,
    pub(super) latency_ms: u64,
}

/// What is known about a recording before its body is complete.
#[derive(Clone)]
pub(super) struct Draft {
    pub(super) recorder: Recorder,
    pub(super) request: Request,
    pub(super) keyed_key: Key,
    /// Which occurrence of its request this is, when a later one (sequence mode).
    pub(super) sequence: Option<Sequence>,
    pub(super) profile: Profile,
    /// The route's base URL, without credentials.
    pub(super) upstream: String,
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    pub(super) started: Instant,
    pub(super) persist: Persist,
}

impl Draft {
    /// Forwards an upstream stream piece by piece as it arrives while assembling it; stores
    /// the assembled response before the client sees the last piece, so a client that has
    /// read a whole stream can replay it at once.
    pub(super) fn relay_stream(
        self,
        format: StreamFormat,
        response: reqwest::Response,
    ) -> BodyStream {
        let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(16);
        tokio::spawn(async move {
            let mut upstream = response.bytes_stream();
            let mut assembler = Assembler::new(format);
            let mut held: Option<Bytes> = None;
            let mut client_gone = false;
            while let Some(piece) = upstream.next().await {
                match piece {
                    Ok(bytes) => {
                        assembler.push(&bytes);
                        if let Some(previous) = held.replace(bytes) {
                            // The client may hang up; keep reading so the recording completes.
                            client_gone |= tx.send(Ok(previous)).await.is_err();
                        }
                    }
                    Err(err) => {
                        // The URL may hold a route's key (a `query:` auth style).
                        let err = err.without_url();
                        let counters = &self.recorder.inner.counters;
                        counters.upstream_errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            "upstream {} broke off a stream: {err}; nothing was recorded",
                            self.upstream
                        );
                        if let Some(previous) = held.take() {
                            let _ = tx.send(Ok(previous)).await;
                        }
                        let _ = tx
                            .send(Err(std::io::Error::other(format!(
                                "upstream broke off the stream: {err}"
                            ))))
                            .await;
                        return;
                    }
                }
            }
            let stored = match assembler.finish() {
                Ok(final_response) => Some(StoredBody::Json(final_response)),
                Err(err) => {
                    tracing::warn!(
                        "cannot assemble the {} stream for {}: {err}; nothing was recorded",
                        format.name(),
                        self.keyed_key
                    );
                    None
                }
            };
            if let Some(stored) = stored {
                if let Err(err) = self.store(stored, Some(format)).await {
                    tracing::error!("{}", crate::error::report(&err));
                }
            }
            if let (Some(last), false) = (held, client_gone) {
                let _ = tx.send(Ok(last)).await;
            }
        });
        Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
    }

    /// Writes the recording according to `persist`.
    pub(super) async fn store(self, body: StoredBody, stream: Option<StreamFormat>) -> Result<()> {
        let stamp = Stamp {
            recorded_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            tool: TOOL.to_owned(),
            latency_ms: self.started.elapsed().as_millis() as u64,
        };
        self.store_stamped(body, stream, stamp).await.map(|_| ())
    }

    /// Writes the recording according to `persist`, with its provenance; whether it was
    /// written (a create-only write that lost keeps the other recording).
    pub(super) async fn store_stamped(
        self,
        body: StoredBody,
        stream: Option<StreamFormat>,
        stamp: Stamp,
    ) -> Result<Created> {
        if self.persist == Persist::Nothing {
            return Ok(Created::AlreadyExists);
        }
        let inner = &self.recorder.inner;
        let cassette = self.cassette(body, stream, stamp);
        let key = &self.keyed_key;
        let document = cassette.to_document();
        match self.persist {
            Persist::Overwrite => inner.store.put(key, document).await?,
            Persist::CreateOnly => {
                if inner.store.put_if_absent(key, document).await? == Created::AlreadyExists {
                    tracing::info!("cassette {key} was recorded by another runner first; kept it");
                    return Ok(Created::AlreadyExists);
                }
            }
            Persist::Nothing => return Ok(Created::AlreadyExists),
        }
        inner.counters.recorded.fetch_add(1, Ordering::Relaxed);
        self.recorder.note_recorded(&cassette);
        Ok(Created::Won)
    }

    fn cassette(
        &self,
        response_body: StoredBody,
        stream: Option<StreamFormat>,
        stamp: Stamp,
    ) -> Cassette {
        let redactor = &self.recorder.inner.redactor;
        let key_config = &self.recorder.inner.config.key;
        let request = &self.request;
        // Built as received, then redacted as a whole by the one function `cassette verify`
        // audits with; nothing unredacted leaves this function.
        let mut cassette = Cassette {
            format: format_for(self.sequence.as_ref()),
            key: self.keyed_key.clone(),
            key_version: cassette_keying::KEY_VERSION,
            key_settings: Some(KeySettings::of(key_config)),
            sequence: self.sequence.clone(),
            recorded_at: stamp.recorded_at,
            tool: stamp.tool,
            target: request.target.clone(),
            upstream: self.upstream.clone(),
            request: StoredRequest {
                method: request.method.to_ascii_uppercase(),
                path: request.path.clone(),
                query: request.query.clone(),
                headers: lowercased(&request.headers),
                body: StoredBody::from_bytes(&request.body),
            },
            response: StoredResponse {
                status: self.status,
                headers: lowercased(&self.headers),
                body: response_body,
                stream: stream.map(|f| f.name().to_owned()),
            },
            meta: Meta {
                profile: self.profile.to_string(),
                latency_ms: stamp.latency_ms,
                ..Meta::default()
            },
        };
        let redaction = redactor.cassette(&mut cassette);
        for (part, body) in [
            ("request", redaction.request),
            ("response", redaction.response),
        ] {
            if body.in_binary > 0 {
                tracing::warn!(
                    "cassette {}: the {part} body is binary and held {} credential-shaped run(s); they are stored as [REDACTED] in its bytes",
                    self.keyed_key,
                    body.in_binary
                );
            }
        }
        let summary = cassette
            .response
            .body
            .as_json()
            .map(|v| stream::response_summary(self.profile, v));
        let requested_model = cassette.requested_model().map(str::to_owned);
        let meta = &mut cassette.meta;
        meta.requested_model = requested_model;
        meta.response_model = summary.as_ref().and_then(|s| s.model.clone());
        meta.finish_reason = summary.as_ref().and_then(|s| s.finish_reason.clone());
        meta.usage = summary.and_then(|s| s.usage);
        cassette.meta.request_redacted = cassette.keyed_request(key_config).key != self.keyed_key;
        cassette
    }
}

/// Headers as a stored map: names lowercased (a repeated header keeps its last value).
fn lowercased(headers: &[(String, String)]) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.clone()))
        .collect()
}
