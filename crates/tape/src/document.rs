//! The cassette document: one recorded interaction, versioned, as stored (see
//! `docs/cassette-format.md`).

use crate::error::{Error, Result};
use crate::mcp::MCP_PROFILE;
use crate::request::{model_in_path, Request};
use base64::Engine;
use bytes::Bytes;
use cassette_keying::{
    CanonicalKeyConfig, DownloadRequest, JsonPath, JsonPathError, Key, KeyConfig, Keyed,
    McpRequest, Profile,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The newest version of the document layout this tool reads and writes. Bump it when a field
/// changes meaning or a reader of the previous version could misread a new document.
///
/// Format 2 is format 1 plus [`Cassette::sequence`]. Only documents that have one are written
/// as format 2 (see [`format_for`]): every other document stays format 1, readable by every
/// reader of format 1, while a reader of format 1 refuses a later occurrence of a request
/// (which it would take for a hand-edited recording of the first) with a clear message.
/// Format 3 is format 2 plus [`Cassette::test_scope`], written only by documents that have
/// one, for the same reason: a reader of format 2 would take a test-scoped recording for a
/// plain one whose stored request no longer gives its key.
/// Format 4 is format 3 plus [`StoredResponse::failure`] (the upstream gave no answer),
/// written only by documents that have one: a reader of format 3 would replay it as an empty
/// answer with status 0.
pub const FORMAT_VERSION: u32 = 4;

/// The format a whole document is written in: [`format_for`], or 4 when it records an
/// upstream failure instead of an answer.
pub fn format_of(cassette: &Cassette) -> u32 {
    match cassette.response.failure {
        Some(_) => 4,
        None => format_for(cassette.sequence.as_ref(), cassette.test_scope.as_ref()),
    }
}

/// The format a document is written in: 3 for a test-scoped recording (it has a
/// [`TestScope`]), 2 for a later occurrence of a request (it has a [`Sequence`]), 1 otherwise.
pub fn format_for(sequence: Option<&Sequence>, test_scope: Option<&TestScope>) -> u32 {
    match (sequence, test_scope) {
        (_, Some(_)) => 3,
        (Some(_), None) => 2,
        (None, None) => 1,
    }
}

/// One recorded interaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cassette {
    /// Document layout version ([`FORMAT_VERSION`]).
    pub format: u32,
    /// The key of the original (unredacted) request. Read back validated: a hand-edited key
    /// that is not 64 lowercase hex characters makes the whole document unreadable.
    pub key: Key,
    /// The key contract version the key was computed under.
    pub key_version: u32,
    /// The keying settings the key was computed under. `None` in documents written before
    /// they were recorded (read with a default, so those documents stay valid format 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_settings: Option<KeySettings>,
    /// Set on a later occurrence (the second or after) of one request within a session,
    /// recorded in sequence mode: `key` is then its occurrence key, not the request's base
    /// key (`docs/keying.md`, "Occurrences"). Format 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<Sequence>,
    /// Set on a test-scoped recording: the answer one test got to a request another test's
    /// recording answers differently (adopt, `docs/keying.md`, "Test-scoped keys"): `key` is
    /// then the request's test-scoped key for [`TestScope::test`], not its plain key. Format 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_scope: Option<TestScope>,
    /// When it was recorded, RFC 3339 in UTC.
    pub recorded_at: String,
    /// The tool that recorded it, e.g. `cassette 0.1.0`.
    pub tool: String,
    /// The route name (the key's target).
    pub target: String,
    /// The upstream base URL, without credentials.
    pub upstream: String,
    /// The request, redacted.
    pub request: StoredRequest,
    /// The response, redacted.
    pub response: StoredResponse,
    /// Facts for review; never used for matching.
    pub meta: Meta,
}

/// The keying settings a key was computed under (`KeyConfig` in canonical form), with their
/// short fingerprint. Empty lists are left out of the document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeySettings {
    /// [`KeyConfig::fingerprint`] of these settings.
    pub fingerprint: String,
    /// Extra volatile members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volatile: Vec<String>,
    /// Default volatile members kept in the key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep_volatile: Vec<String>,
    /// JSON paths left out of the key, in canonical spelling.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<String>,
}

impl KeySettings {
    /// The settings of `config`.
    pub fn of(config: &KeyConfig) -> KeySettings {
        let canonical = config.canonical();
        KeySettings {
            fingerprint: canonical.fingerprint(),
            volatile: canonical.volatile,
            keep_volatile: canonical.keep_volatile,
            ignore: canonical.ignore,
        }
    }

    /// The lists, for comparing with another configuration.
    pub fn canonical(&self) -> CanonicalKeyConfig {
        CanonicalKeyConfig {
            volatile: self.volatile.clone(),
            keep_volatile: self.keep_volatile.clone(),
            ignore: self.ignore.clone(),
        }
    }

    /// The configuration to recompute the key with (`cassette verify`); fails only when a
    /// stored path does not parse (a hand edit).
    pub fn key_config(&self) -> Result<KeyConfig, JsonPathError> {
        Ok(KeyConfig {
            extra_volatile: self.volatile.clone(),
            keep_volatile: self.keep_volatile.clone(),
            ignore: self
                .ignore
                .iter()
                .map(|p| JsonPath::parse(p))
                .collect::<Result<_, _>>()?,
        })
    }
}

/// Which occurrence of which request a recording answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sequence {
    /// The request's base key: the key of its first occurrence (its plain key, for a
    /// test-scoped recording).
    pub base_key: Key,
    /// Which occurrence this is: 2 or more.
    pub occurrence: u32,
}

impl Sequence {
    /// The sequence of a numbered key (`None` for a first occurrence); `base_key` is computed
    /// only when there is one.
    pub fn of(keyed: &Keyed) -> Option<Sequence> {
        let occurrence = keyed.occurrence_number();
        (occurrence >= 2).then(|| Sequence {
            base_key: keyed.clone().occurrence(1).for_test(None).key,
            occurrence,
        })
    }
}

/// Which test a test-scoped recording answers, and the plain key of its request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestScope {
    /// The test's id as its test runner names it (a pytest node id): the `test` member of the
    /// key material.
    pub test: String,
    /// The plain key of the request (of its occurrence, in a sequence): the key without the
    /// test.
    pub plain_key: Key,
}

impl TestScope {
    /// The scope of a test-scoped key (`None` for a plain one); `plain_key` is computed only
    /// when there is one.
    pub fn of(keyed: &Keyed) -> Option<TestScope> {
        let test = keyed.test_scope()?.to_owned();
        Some(TestScope {
            test,
            plain_key: keyed.clone().for_test(None).key,
        })
    }
}

/// The request as stored: credentials removed, headers from the allow-list only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRequest {
    /// HTTP method.
    pub method: String,
    /// Path as the client sent it (after the route prefix), without the query.
    pub path: String,
    /// Query string with credential parameters removed; empty when there was none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub query: String,
    /// Allow-listed headers, lowercased names.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body.
    #[serde(default)]
    pub body: StoredBody,
}

/// The response as stored. A streamed response is stored as its assembled final response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredResponse {
    /// HTTP status.
    pub status: u16,
    /// The allow-listed headers only (content type, request ids, retry advice, rate limits,
    /// processing time, `location` without credentials), lowercased names.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body (decoded: never compressed).
    #[serde(default)]
    pub body: StoredBody,
    /// Set when the upstream answered with a stream: the stream format, so replay can
    /// re-synthesize it in the provider's own events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// The stream's events exactly as the upstream sent them, kept only when exact stream
    /// replay was asked for at recording time: server-sent events as `{"event", "data", "id",
    /// "retry"}` objects (only the fields they had, `data` verbatim), newline-delimited JSON as
    /// the lines' text. Replay then sends these instead of a re-synthesized stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<Value>>,
    /// A JSON answer's text as replay sends it, kept when that is not `body` written compactly
    /// (a `Value` sorts its members): the upstream's own bytes when redaction left the answer
    /// alone, else the redacted answer compact in the upstream's member order. Only for an
    /// answer that was not a stream; absent in documents written before it, which replay
    /// `body` compactly. Sealing derives it again from `body`, so it never holds what `body`
    /// had redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_text: Option<String>,
    /// Set when the upstream gave no answer at all (recorded with error recording on): what
    /// happened instead, which replay reproduces. `status` is then 0 and the body empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<UpstreamFailure>,
}

/// How an upstream failed to answer: stored as `{"kind": "reset" | "timeout", "after_ms": N}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum UpstreamFailure {
    /// The connection was closed or reset without an answer, `after_ms` after the request.
    Reset {
        /// Milliseconds from the request to the reset.
        after_ms: u64,
    },
    /// No answer came before the recorder gave up waiting, `after_ms` after the request.
    Timeout {
        /// Milliseconds from the request to giving up.
        after_ms: u64,
    },
}

impl UpstreamFailure {
    /// Milliseconds from the request to the failure.
    pub fn after_ms(self) -> u64 {
        match self {
            UpstreamFailure::Reset { after_ms } | UpstreamFailure::Timeout { after_ms } => after_ms,
        }
    }
}

impl std::fmt::Display for UpstreamFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamFailure::Reset { after_ms } => {
                write!(f, "the connection was reset after {after_ms} ms")
            }
            UpstreamFailure::Timeout { after_ms } => write!(f, "no answer within {after_ms} ms"),
        }
    }
}

/// A body, in the most readable form that keeps every byte.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoredBody {
    /// No body.
    #[default]
    Empty,
    /// A JSON document.
    Json(Value),
    /// UTF-8 text that is not JSON.
    Text(String),
    /// Anything else, base64 (standard alphabet, padded).
    Base64(String),
}

impl StoredBody {
    /// Stores bytes as JSON when they parse, else text when UTF-8, else base64.
    pub fn from_bytes(bytes: &[u8]) -> StoredBody {
        if bytes.is_empty() {
            return StoredBody::Empty;
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => match serde_json::from_str(text) {
                Ok(value) => StoredBody::Json(value),
                Err(_) => StoredBody::Text(text.to_owned()),
            },
            Err(_) => StoredBody::Base64(base64::engine::general_purpose::STANDARD.encode(bytes)),
        }
    }

    /// The bytes to send back. JSON is re-serialized compactly, text and base64 byte for byte.
    pub fn to_bytes(&self) -> Result<Bytes, String> {
        match self {
            StoredBody::Empty => Ok(Bytes::new()),
            StoredBody::Json(value) => serde_json::to_vec(value)
                .map(Bytes::from)
                .map_err(|e| e.to_string()),
            StoredBody::Text(text) => Ok(Bytes::from(text.clone())),
            StoredBody::Base64(b64) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map(Bytes::from)
                .map_err(|e| format!("invalid base64 body: {e}")),
        }
    }

    /// The JSON value, when the body is JSON.
    pub fn as_json(&self) -> Option<&Value> {
        match self {
            StoredBody::Json(value) => Some(value),
            _ => None,
        }
    }
}

/// Facts about an interaction that help a reviewer; never used for matching.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Meta {
    /// The keying profile, e.g. `openai.chat`.
    pub profile: String,
    /// The model the request asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_model: Option<String>,
    /// The model the response names: differs from the requested one when an alias moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_model: Option<String>,
    /// Finish or stop reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Token usage as the provider reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// Time from sending the request to the end of the response body, in milliseconds.
    pub latency_ms: u64,
    /// Whether redaction changed a part of the request that enters the key, so the key cannot
    /// be recomputed from the stored request (`cassette verify` reports such tapes apart).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub request_redacted: bool,
    /// The test that made the request, as its test runner names it (a pytest node id, a test
    /// file and name): provenance for review, and the recording a miss of that test is
    /// compared with first. Never used for matching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// Where an imported recording came from: the tape file of another tool and the place in
    /// it (`tests/cassettes/test_chat/test_hello.yaml interaction 2`). Provenance for review
    /// (and for naming both sides of a conflict), never used for matching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A writer that only counts what it is given.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Cassette {
    /// Serializes the document: pretty-printed, members in a stable order, with a trailing
    /// newline, so a re-record reads as a small git diff. Only a [`Sealed`](crate::Sealed)
    /// document is serialized for storage.
    pub(crate) fn serialize(&self) -> Bytes {
        // Counted first, then written into a buffer of exactly that size: a large answer is
        // then held once more, not once more for every time a growing buffer was copied
        // (recording memory stays near the stored size). Serializing plain data structures
        // cannot fail.
        let mut counter = Counter(0);
        let _ = serde_json::to_writer_pretty(&mut counter, self);
        let mut out = Vec::with_capacity(counter.0 + 1);
        let _ = serde_json::to_writer_pretty(&mut out, self);
        out.push(b'\n');
        Bytes::from(out)
    }

    /// Parses a stored document.
    pub fn from_document(bytes: &[u8]) -> Result<Cassette> {
        let cassette: Cassette = serde_json::from_slice(bytes).map_err(|e| Error::Unreadable {
            reason: e.to_string(),
        })?;
        if cassette.format > FORMAT_VERSION {
            return Err(Error::NewerFormat {
                found: cassette.format,
                supported: FORMAT_VERSION,
            });
        }
        Ok(cassette)
    }

    /// Parses the document stored under `key` and checks that it is the recording of that key:
    /// a document stored under another key (a file copied or renamed over another key's file)
    /// would answer a question it was not recorded for.
    pub fn from_stored(bytes: &[u8], key: &Key) -> Result<Cassette> {
        let cassette = Cassette::from_document(bytes)?;
        if cassette.key != *key {
            return Err(Error::OtherKey {
                recorded: cassette.key,
                asked: key.clone(),
            });
        }
        Ok(cassette)
    }

    /// The model the request asked for: its body's `model`, else the model a Gemini path
    /// names (`.../models/MODEL:generateContent`).
    pub fn requested_model(&self) -> Option<&str> {
        let from_body = self
            .request
            .body
            .as_json()
            .and_then(|body| body.get("model")?.as_str());
        from_body.or_else(|| model_in_path(&self.request.path))
    }

    /// Keys the request this cassette stored, under the current contract: an HTTP request as
    /// [`Request::from`] gives it back, an MCP exchange with the `mcp` profile, a download by
    /// its origin (`target`) and URL with the `download` profile. It differs from
    /// [`Cassette::key`] when redaction changed a keyed part (`meta.request_redacted`), when the
    /// tape was edited by hand, or when keying changed without a key version bump.
    /// A later occurrence of a request keys to its occurrence key ([`Cassette::sequence`]), a
    /// test-scoped recording to its test-scoped key ([`Cassette::test_scope`]).
    pub fn keyed_request(&self, config: &KeyConfig) -> Keyed {
        let keyed = if self.is_mcp() {
            let request = McpRequest::new(&self.target, &self.request.path);
            match self.request.body.as_json() {
                Some(params) => request.params(params).key(),
                None => request.key(),
            }
        } else if self.is_download() {
            let request = DownloadRequest::get(&self.target, &self.request.path);
            DownloadRequest {
                method: &self.request.method,
                ..request.query(&self.request.query)
            }
            .key()
        } else {
            Request::from(self).key(config)
        };
        keyed
            .occurrence(self.occurrence())
            .for_test(self.test_scope.as_ref().map(|s| s.test.as_str()))
    }

    /// Whether this cassette holds an MCP exchange (see [`crate::mcp`]).
    pub fn is_mcp(&self) -> bool {
        self.meta.profile == MCP_PROFILE
    }

    /// Whether this cassette holds a download: a file fetched from a host no route serves,
    /// whose `target` is the URL's origin (`docs/keying.md`, "Profile `download`").
    pub fn is_download(&self) -> bool {
        self.meta.profile == Profile::Download.as_str()
    }

    /// Which occurrence of its request this recording answers: 1 unless it has a sequence.
    pub fn occurrence(&self) -> u32 {
        self.sequence.as_ref().map_or(1, |s| s.occurrence)
    }
}

/// The request a cassette stored: redacted, so its key differs from the cassette's own key when
/// redaction changed a keyed part (`meta.request_redacted`). A body whose base64 does not
/// decode (a hand-edited file) becomes empty, so such a request keys differently and shows up
/// in `cassette verify` instead of failing here.
impl From<&Cassette> for Request {
    fn from(cassette: &Cassette) -> Request {
        let stored = &cassette.request;
        Request {
            target: cassette.target.clone(),
            method: stored.method.clone(),
            path: stored.path.clone(),
            query: stored.query.clone(),
            headers: stored
                .headers
                .iter()
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
            body: stored.body.to_bytes().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_keep_every_byte() {
        for bytes in [
            &b""[..],
            b"{\"a\": 1}",
            b"plain text\n",
            b"\xff\x00\xfe binary",
            b"[1,2]",
        ] {
            let stored = StoredBody::from_bytes(bytes);
            let back = stored.to_bytes().unwrap();
            match stored {
                StoredBody::Json(_) => {
                    let a: Value = serde_json::from_slice(bytes).unwrap();
                    let b: Value = serde_json::from_slice(&back).unwrap();
                    assert_eq!(a, b);
                }
                _ => assert_eq!(&back[..], bytes),
            }
        }
        assert!(matches!(
            StoredBody::from_bytes(b"\xff"),
            StoredBody::Base64(_)
        ));
        assert!(matches!(StoredBody::from_bytes(b"hi"), StoredBody::Text(_)));
    }

    fn sample() -> Cassette {
        Cassette {
            format: FORMAT_VERSION,
            key: Key::parse(&"ab".repeat(32)).expect("64 hex characters"),
            key_version: 1,
            key_settings: Some(KeySettings::of(&KeyConfig::default())),
            sequence: None,
            test_scope: None,
            recorded_at: "2026-11-29T09:00:00Z".into(),
            tool: "cassette 0.1.0".into(),
            target: "default".into(),
            upstream: "https://api.openai.com".into(),
            request: StoredRequest {
                method: "POST".into(),
                path: "/v1/chat/completions".into(),
                query: String::new(),
                headers: BTreeMap::new(),
                body: StoredBody::Json(serde_json::json!({"model": "m"})),
            },
            response: StoredResponse {
                status: 200,
                headers: BTreeMap::new(),
                body: StoredBody::Text("ok".into()),
                stream: None,
                events: None,
                body_text: None,
                failure: None,
            },
            meta: Meta::default(),
        }
    }

    #[test]
    fn documents_round_trip_and_end_with_newline() {
        let cassette = sample();
        let doc = cassette.serialize();
        assert!(doc.ends_with(b"}\n"));
        assert_eq!(Cassette::from_document(&doc).unwrap(), cassette);
        assert_eq!(cassette.requested_model(), Some("m"));
    }

    #[test]
    fn key_settings_are_optional_and_compact() {
        let mut cassette = sample();
        let doc = String::from_utf8(cassette.serialize().to_vec()).unwrap();
        assert!(
            doc.contains("\"key_version\": 1,\n  \"key_settings\": {\n    \"fingerprint\": \"070e95e06023\"\n  },"),
            "{doc}"
        );
        // A document written before the settings were recorded still reads.
        cassette.key_settings = None;
        let doc = cassette.serialize();
        assert!(!String::from_utf8_lossy(&doc).contains("key_settings"));
        assert_eq!(Cassette::from_document(&doc).unwrap().key_settings, None);
        // Settings round-trip through the document and back into a configuration.
        let config = KeyConfig {
            extra_volatile: vec!["seed".into()],
            keep_volatile: vec![],
            ignore: vec![JsonPath::parse("$['a'].*").unwrap()],
        };
        cassette.key_settings = Some(KeySettings::of(&config));
        let back = Cassette::from_document(&cassette.serialize()).unwrap();
        let settings = back.key_settings.unwrap();
        assert_eq!(settings.ignore, ["$.a[*]"]);
        assert_eq!(settings.fingerprint, config.fingerprint());
        assert_eq!(settings.key_config().unwrap(), config);
    }

    #[test]
    fn a_hand_edited_key_is_refused_with_a_reason() {
        let doc = String::from_utf8_lossy(&sample().serialize()).into_owned();
        for bad in ["abab", "ABABABAB", "../../etc/passwd", "é"] {
            let edited = doc.replace(&"ab".repeat(32), bad);
            let err = Cassette::from_document(edited.as_bytes()).unwrap_err();
            assert!(err.to_string().contains("64 lowercase hex"), "{bad}: {err}");
        }
    }

    #[test]
    fn only_later_occurrences_are_format_2() {
        let first = sample();
        assert_eq!(format_for(first.sequence.as_ref(), None), 1);
        assert!(!String::from_utf8_lossy(&first.serialize()).contains("sequence"));
        let mut later = sample();
        later.sequence = Some(Sequence {
            base_key: Key::parse(&"cd".repeat(32)).unwrap(),
            occurrence: 3,
        });
        later.format = format_for(later.sequence.as_ref(), None);
        assert_eq!(later.format, 2);
        let back = Cassette::from_document(&later.serialize()).unwrap();
        assert_eq!(back, later);
        assert_eq!(back.occurrence(), 3);
        assert_eq!(first.occurrence(), 1);
        // Its stored request keys to the third occurrence key of the request.
        let base = Request::from(&later).key(&KeyConfig::default());
        assert_eq!(
            later.keyed_request(&KeyConfig::default()).key,
            base.clone().occurrence(3).key
        );
        assert_eq!(Sequence::of(&base), None);
        let third = Sequence::of(&base.clone().occurrence(3)).unwrap();
        assert_eq!((third.base_key, third.occurrence), (base.key, 3));
    }

    #[test]
    fn only_test_scoped_recordings_are_format_3_and_key_to_their_test_scoped_key() {
        let plain = sample();
        assert!(!String::from_utf8_lossy(&plain.serialize()).contains("test_scope"));
        let config = KeyConfig::default();
        let request = Request::from(&plain).key(&config);
        let test = "tests/test_chat.py::test_b";
        let mut scoped = sample();
        scoped.test_scope = TestScope::of(&request.clone().for_test(Some(test)));
        assert_eq!(
            scoped
                .test_scope
                .as_ref()
                .map(|s| (s.test.as_str(), &s.plain_key)),
            Some((test, &request.key))
        );
        assert_eq!(TestScope::of(&request), None);
        scoped.format = format_for(None, scoped.test_scope.as_ref());
        assert_eq!(scoped.format, 3);
        let back = Cassette::from_document(&scoped.serialize()).unwrap();
        assert_eq!(back, scoped);
        let keyed = back.keyed_request(&config);
        assert_eq!(keyed.key, request.clone().for_test(Some(test)).key);
        assert_ne!(keyed.key, request.key);
        // With a sequence: both members, and the sequence names the plain first occurrence.
        scoped.sequence = Sequence::of(&request.clone().occurrence(2).for_test(Some(test)));
        assert_eq!(
            scoped.sequence.as_ref().map(|s| &s.base_key),
            Some(&request.key)
        );
        assert_eq!(
            format_for(scoped.sequence.as_ref(), scoped.test_scope.as_ref()),
            3
        );
        assert_eq!(
            scoped.keyed_request(&config).key,
            request.clone().occurrence(2).for_test(Some(test)).key
        );
        // A reader of format 2 refuses it rather than take it for a plain recording.
        let mut newer = scoped.clone();
        newer.format = FORMAT_VERSION + 1;
        assert!(Cassette::from_document(&newer.serialize()).is_err());
    }

    #[test]
    fn newer_formats_are_refused_with_a_reason() {
        let mut cassette = sample();
        cassette.format = FORMAT_VERSION + 1;
        let err = Cassette::from_document(&cassette.serialize()).unwrap_err();
        assert!(err.to_string().contains("newer"), "{err}");
    }
}
