//! Recording: an upstream answer becomes a redacted cassette, written as the mode says; a
//! stream is relayed to the client piece by piece while it is assembled.

use super::flight::{Flight, Landed};
use super::Recorder;
use crate::cassette::{
    format_for, Cassette, KeySettings, Meta, Sequence, StoredBody, StoredRequest, StoredResponse,
};
use crate::config::StreamReplay;
use crate::error::{report, Result};
use crate::request::Request;
use crate::response::BodyStream;
use crate::stream::{self, Assembler, StreamFormat};
use bytes::Bytes;
use cassette_keying::{Key, Profile};
use cassette_store::Created;
use futures::StreamExt;
use serde_json::Value;
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

/// What storing a recording did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stored {
    /// Nothing was to be stored (mode `off`, or an answer that is not recorded).
    Nothing,
    /// This recording is the stored one now.
    Won,
    /// Another recorder stored the key first and its recording was kept (create-only).
    Kept,
}

/// Where a recording came from: when, by what, how long the upstream took.
pub(super) struct Stamp {
    pub(super) recorded_at: String,
    pub(super) tool: String,
    pub(super) latency_ms: u64,
}

/// What is known about a recording before its body is complete.
pub(super) struct Draft {
    pub(super) recorder: Recorder,
    pub(super) request: Request,
    pub(super) keyed_key: Key,
    /// Which occurrence of its request this is, when a later one (sequence mode).
    pub(super) sequence: Option<Sequence>,
    /// The key material of the request as received, when known: what indexes the recording
    /// when redaction changed nothing the key reads, without keying the request again.
    pub(super) material: Option<Value>,
    pub(super) profile: Profile,
    /// The route's base URL, without credentials.
    pub(super) upstream: String,
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    pub(super) started: Instant,
    pub(super) persist: Persist,
    /// The single flight this recording leads, if any.
    pub(super) flight: Option<Flight>,
}

impl Draft {
    /// Tells the requests waiting for this recording how it ended.
    pub(super) fn land(&mut self, landed: Landed) {
        if let Some(flight) = self.flight.take() {
            flight.land(landed);
        }
    }

    /// Reports a recording that was to be stored and was not (counted and logged when the mode
    /// records; a warning in mode `off`, where nothing is stored anyway).
    fn fail(&self, reason: String) {
        match self.persist {
            Persist::Nothing => tracing::warn!("{reason}"),
            Persist::Overwrite | Persist::CreateOnly => {
                self.recorder.record_failure(&self.keyed_key, reason);
            }
        }
    }

    /// Forwards an upstream stream piece by piece as it arrives while assembling it, and stores
    /// the assembled response before the body ends, so a client that has read a whole stream
    /// can replay it at once. A stream that breaks off or cannot be assembled is not stored
    /// and counts as a failed recording.
    pub(super) fn relay_stream(
        mut self,
        format: StreamFormat,
        response: reqwest::Response,
    ) -> BodyStream {
        let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(16);
        // Gemini's JSON array is one document, not a sequence of events to keep.
        let exact = self.recorder.inner.config.stream_replay == StreamReplay::Exact
            && format != StreamFormat::GeminiJson;
        tokio::spawn(async move {
            let mut upstream = response.bytes_stream();
            let mut assembler = Assembler::new(format);
            // The events as sent, kept beside the meaning when exact replay was asked for.
            let mut events = exact.then(|| Assembler::new(format.framing()));
            // The client may hang up; reading goes on so the recording completes.
            let mut client = Some(tx);
            while let Some(piece) = upstream.next().await {
                let bytes = match piece {
                    Ok(bytes) => bytes,
                    Err(err) => {
                        // The URL may hold a route's key (a `query:` auth style).
                        let err = err.without_url();
                        let counters = &self.recorder.inner.counters;
                        counters.upstream_errors.fetch_add(1, Ordering::Relaxed);
                        let reason = format!(
                            "upstream {} broke off the {} stream: {}",
                            self.upstream,
                            format.name(),
                            report(&err)
                        );
                        if let Some(tx) = &client {
                            let _ = tx.send(Err(std::io::Error::other(reason.clone()))).await;
                        }
                        return self.fail(reason);
                    }
                };
                assembler.push(&bytes);
                if let Some(events) = &mut events {
                    events.push(&bytes);
                }
                if let Some(tx) = &client {
                    if tx.send(Ok(bytes)).await.is_err() {
                        client = None;
                    }
                }
            }
            let assembled = assembler.finish().and_then(|final_response| {
                let events = events.map(Assembler::finish).transpose()?;
                Ok((final_response, events))
            });
            match assembled {
                Ok((final_response, events)) => {
                    let events = events.and_then(|mut e| match e.get_mut("events") {
                        Some(Value::Array(list)) => Some(std::mem::take(list)),
                        _ => None,
                    });
                    let body = StoredBody::Json(final_response);
                    match self.store(body, Some(format), events).await {
                        Ok(Stored::Nothing) => {}
                        Ok(Stored::Won | Stored::Kept) => self.land(Landed::Stored),
                        Err(err) => self.fail(report(&err)),
                    }
                }
                Err(err) => self.fail(format!(
                    "the {} stream from upstream {} cannot be assembled: {err}",
                    format.name(),
                    self.upstream
                )),
            }
            // `client` goes here: the body ends only now, after the recording was stored.
            drop(client);
        });
        Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
    }

    /// Writes the recording according to `persist`.
    pub(super) async fn store(
        &self,
        body: StoredBody,
        stream: Option<StreamFormat>,
        events: Option<Vec<Value>>,
    ) -> Result<Stored> {
        let stamp = Stamp {
            recorded_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            tool: TOOL.to_owned(),
            latency_ms: self.started.elapsed().as_millis() as u64,
        };
        self.store_stamped(body, stream, events, stamp).await
    }

    /// Writes the recording according to `persist`, with its provenance; what it did (a
    /// create-only write that lost keeps the other recording).
    pub(super) async fn store_stamped(
        &self,
        body: StoredBody,
        stream: Option<StreamFormat>,
        events: Option<Vec<Value>>,
        stamp: Stamp,
    ) -> Result<Stored> {
        if self.persist == Persist::Nothing {
            return Ok(Stored::Nothing);
        }
        let inner = &self.recorder.inner;
        let (cassette, material) = self.cassette(body, stream, events, stamp);
        let document = cassette.to_document();
        let key = &self.keyed_key;
        // Logged before it is stored: a collector of unused cassettes that lists the store and
        // then reads the usage log finds the key of every cassette it listed (a recording that
        // then fails leaves a logged key with no cassette, which deletes nothing).
        self.recorder.log_usage(key);
        match self.persist {
            Persist::Overwrite => inner.store.put(key, document).await?,
            Persist::CreateOnly => {
                if inner.store.put_if_absent(key, document).await? == Created::AlreadyExists {
                    tracing::info!("cassette {key} was recorded by another runner first; kept it");
                    return Ok(Stored::Kept);
                }
            }
            Persist::Nothing => return Ok(Stored::Nothing),
        }
        inner.counters.recorded.fetch_add(1, Ordering::Relaxed);
        match material.as_ref().or(self.material.as_ref()) {
            Some(material) => self.recorder.note_recorded_with(&cassette, material),
            None => self.recorder.note_recorded(&cassette),
        }
        Ok(Stored::Won)
    }

    fn cassette(
        &self,
        response_body: StoredBody,
        stream: Option<StreamFormat>,
        events: Option<Vec<Value>>,
        stamp: Stamp,
    ) -> (Cassette, Option<Value>) {
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
                events,
            },
            meta: Meta {
                profile: self.profile.to_string(),
                latency_ms: stamp.latency_ms,
                ..Meta::default()
            },
        };
        let redaction = redactor.cassette(&mut cassette);
        let request_changed = redaction.request.changed;
        // The events exact replay keeps are redacted like the answer they make up.
        if let Some(events) = &mut cassette.response.events {
            let mut all = Value::Array(std::mem::take(events));
            redactor.json(&mut all);
            if let Value::Array(redacted) = all {
                *events = redacted;
            }
        }
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
        // Keying the stored request again costs as much as the request is large: only done when
        // redaction changed something the key reads. Its material then indexes the recording.
        let unchanged = self.material.as_ref().is_some_and(|material| {
            !request_changed
                && cassette.request.path == request.path
                && cassette.request.query == request.query
                && semantic_headers_kept(material, &cassette.request.headers)
        });
        if unchanged {
            return (cassette, None);
        }
        let keyed = cassette.keyed_request(key_config);
        cassette.meta.request_redacted = keyed.key != self.keyed_key;
        (cassette, Some(keyed.material))
    }
}

/// Whether the stored headers still hold every header value the key material read.
fn semantic_headers_kept(material: &Value, stored: &BTreeMap<String, String>) -> bool {
    let Some(keyed) = material.get("headers").and_then(Value::as_object) else {
        return true;
    };
    keyed
        .iter()
        .all(|(name, value)| stored.get(name).map(|v| v.trim()) == value.as_str())
}

/// Headers as a stored map: names lowercased (a repeated header keeps its last value).
fn lowercased(headers: &[(String, String)]) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.clone()))
        .collect()
}
