//! Sealing: the one way a cassette becomes stored bytes. Every stored field is redacted by the
//! rule for its kind, the review facts are derived from what is stored, and only then can the
//! document be serialized.
//!
//! The field list in [`redact_fields`] destructures the whole document, so a field added to
//! [`Cassette`] (or to the request, response or meta it holds) does not compile until it is
//! redacted here; `tests/seal.rs` plants a credential in every string of a full document and
//! checks that none reaches the sealed bytes.

use crate::document::{Cassette, KeySettings, Meta, StoredBody, StoredRequest, StoredResponse};
use crate::headers::lowercased;
use crate::redact::{BodyRedaction, Redactor};
use bytes::Bytes;
use cassette_keying::Profile;
use serde_json::Value;
use std::collections::BTreeMap;

/// What sealing a cassette did to its bodies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CassetteRedaction {
    /// The request body.
    pub request: BodyRedaction,
    /// The response body.
    pub response: BodyRedaction,
    /// Whether a secret split across the events of an exact stream (`response.events`) was
    /// redacted.
    pub events: bool,
}

/// A cassette whose every stored field went through redaction. Nothing else becomes stored
/// bytes: [`Sealed::to_document`] is the only serialization for storage.
#[derive(Debug, Clone)]
pub struct Sealed {
    cassette: Cassette,
    material: Value,
    redaction: CassetteRedaction,
}

impl Sealed {
    /// Seals `cassette`, built from an exchange as it was received: redacts every stored field
    /// with `redactor`, derives the review facts (models, finish reason, usage) from the
    /// redacted answer, and sets `meta.request_redacted` when the stored request no longer
    /// keys to the cassette's key.
    ///
    /// `received` is the key material of the request as received, when the caller has it: then
    /// the stored request is keyed again only when redaction changed something the key reads
    /// (keying costs as much as the request is large). Sealing a sealed cassette changes
    /// nothing.
    pub fn seal(mut cassette: Cassette, redactor: &Redactor, received: Option<Value>) -> Sealed {
        let before = KeyedParts::of(&cassette.request);
        // A test-scoped key reads the test id too (a secret in it is redacted like any).
        let scope_before = cassette.test_scope.clone();
        let redaction = redact_fields(redactor, &mut cassette);
        if !cassette.is_mcp() {
            derive_facts(redactor, &mut cassette);
        }
        let unchanged = received.as_ref().is_some_and(|material| {
            !redaction.request.changed
                && before == KeyedParts::of(&cassette.request)
                && scope_before == cassette.test_scope
                && semantic_headers_kept(material, &cassette.request.headers)
        });
        let material = match received {
            Some(material) if unchanged => material,
            _ => {
                let config = cassette
                    .key_settings
                    .as_ref()
                    .and_then(|settings| settings.key_config().ok())
                    .unwrap_or_default();
                let keyed = cassette.keyed_request(&config);
                cassette.meta.request_redacted = keyed.key != cassette.key;
                keyed.material
            }
        };
        Sealed {
            cassette,
            material,
            redaction,
        }
    }

    /// The sealed cassette.
    pub fn cassette(&self) -> &Cassette {
        &self.cassette
    }

    /// The key material its stored request keys to (what the nearest-recording index
    /// fingerprints: redacted parts stay redacted).
    pub fn material(&self) -> &Value {
        &self.material
    }

    /// What redaction did to its bodies (credential-shaped runs inside binary bodies are worth
    /// a warning).
    pub fn redaction(&self) -> CassetteRedaction {
        self.redaction
    }

    /// The document to store: pretty-printed, members in a stable order, with a trailing
    /// newline, so a re-record reads as a small git diff.
    pub fn to_document(&self) -> Bytes {
        self.cassette.serialize()
    }

    /// The sealed cassette, for a caller done with storing it.
    pub fn into_cassette(self) -> Cassette {
        self.cassette
    }
}

/// The parts of a stored request the key reads besides its body and headers.
#[derive(PartialEq, Eq)]
struct KeyedParts {
    method: String,
    path: String,
    query: String,
}

impl KeyedParts {
    fn of(request: &StoredRequest) -> KeyedParts {
        KeyedParts {
            method: request.method.clone(),
            path: request.path.clone(),
            query: request.query.clone(),
        }
    }
}

/// Redacts every stored field of `cassette` in place, each by the rule for its kind: the one
/// function sealing and `cassette verify`'s audit share, so what is checked is what is done.
/// Redacting a redacted cassette changes nothing.
pub(crate) fn redact_fields(redactor: &Redactor, cassette: &mut Cassette) -> CassetteRedaction {
    // Every field is named: a new one does not compile until it is redacted (or said to be
    // an identifier checked when the document is read).
    let Cassette {
        format: _,
        key: _,
        key_version: _,
        key_settings,
        sequence: _,
        test_scope,
        recorded_at,
        tool,
        target,
        upstream,
        request,
        response,
        meta,
    } = cassette;
    *upstream = redactor.url(upstream);
    for text in [recorded_at, tool, target] {
        *text = redactor.text(text);
    }
    // The test id is key material of a test-scoped recording, and shown like `meta.test`: a
    // secret in it is redacted all the same (its key then cannot be recomputed, as when a
    // keyed part of the request is redacted).
    if let Some(scope) = test_scope {
        scope.test = redactor.text(&scope.test);
    }
    if let Some(KeySettings {
        fingerprint,
        volatile,
        keep_volatile,
        ignore,
    }) = key_settings
    {
        *fingerprint = redactor.text(fingerprint);
        for text in volatile.iter_mut().chain(keep_volatile).chain(ignore) {
            *text = redactor.text(text);
        }
    }

    let StoredRequest {
        method,
        path,
        query,
        headers,
        body,
    } = request;
    *method = redactor.text(method);
    *path = redactor.text(path);
    *query = redactor.query(query);
    *headers = lowercased(&redactor.request_headers(&pairs(headers)));
    let content_type = headers.get("content-type").cloned();
    let request_body = redactor.body(body, content_type.as_deref());

    let StoredResponse {
        status: _,
        headers,
        body,
        stream,
        events,
        body_text,
        failure: _,
    } = response;
    *headers = lowercased(&redactor.response_headers(&pairs(headers)));
    // A stream kept event by event in the body (the generic formats): a secret split across
    // its events is found in the text a client assembles.
    let content_type = headers.get("content-type").cloned();
    let response_body = redactor.response_body(body, stream.as_deref(), content_type.as_deref());
    *body_text = replay_text(
        redactor,
        body_text.take(),
        body,
        stream.is_some(),
        response_body,
    );
    if let Some(name) = stream {
        *name = redactor.text(name);
    }
    // The events exact replay sends: redacted like the answer they make up, across events
    // first (a key streamed in two pieces), then event by event.
    let mut events_changed = false;
    if let Some(list) = events {
        let mut wrapped = serde_json::json!({ "events": std::mem::take(list) });
        events_changed = redactor.split_secrets(&mut wrapped);
        redactor.json(&mut wrapped);
        if let Value::Object(mut map) = wrapped {
            if let Some(Value::Array(redacted)) = map.remove("events") {
                *list = redacted;
            }
        }
    }

    let Meta {
        profile,
        requested_model,
        response_model,
        finish_reason,
        usage,
        latency_ms: _,
        request_redacted: _,
        test,
        source,
    } = meta;
    *profile = redactor.text(profile);
    for fact in [requested_model, response_model, finish_reason, test, source]
        .into_iter()
        .flatten()
    {
        *fact = redactor.text(fact);
    }
    if let Some(usage) = usage {
        redactor.json(usage);
    }
    CassetteRedaction {
        request: request_body,
        response: response_body,
        events: events_changed,
    }
}

/// The text a JSON answer is replayed as (`response.body_text`), from the text it was received
/// as and its redacted `body`: the received bytes when redaction changed neither the answer nor
/// the text, else the redacted answer in the received member order; nothing when that is what
/// replay sends anyway (`body` compact) or the answer is not a JSON one that was not streamed.
fn replay_text(
    redactor: &Redactor,
    received: Option<String>,
    body: &StoredBody,
    streamed: bool,
    redaction: BodyRedaction,
) -> Option<String> {
    let (StoredBody::Json(value), Some(received), false) = (body, received, streamed) else {
        return None;
    };
    // The text is kept only when it says what the redacted answer says (a hand-edited text
    // could say more), and is checked as text too: a shape could match the raw text across
    // its escapes where no decoded string holds it.
    let same = || serde_json::from_str::<Value>(&received).is_ok_and(|v| v == *value);
    let text = if !redaction.changed && same() && redactor.text(&received) == received {
        received
    } else {
        crate::order::in_order_of(&received, value)?
    };
    let compact = serde_json::to_string(value).unwrap_or_default();
    (text != compact).then_some(text)
}

/// The review facts of an LLM recording, read from its redacted request and answer (and
/// redacted once more, as any stored text).
fn derive_facts(redactor: &Redactor, cassette: &mut Cassette) {
    // The profile the stored path keys to: the one `meta.profile` names.
    let profile = Profile::from_path(&cassette.request.path);
    let summary = cassette
        .response
        .body
        .as_json()
        .map(|body| cassette_wire::response_summary(profile, body));
    let requested_model = cassette.requested_model().map(|m| redactor.text(m));
    let meta = &mut cassette.meta;
    meta.requested_model = requested_model;
    let Some(summary) = summary else {
        return;
    };
    meta.response_model = summary.model.map(|m| redactor.text(&m));
    meta.finish_reason = summary.finish_reason.map(|r| redactor.text(&r));
    meta.usage = summary.usage.map(|mut usage| {
        redactor.json(&mut usage);
        usage
    });
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

fn pairs(headers: &BTreeMap<String, String>) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}
