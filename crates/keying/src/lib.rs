//! Canonical, versioned keys for LLM API requests.
//!
//! A cassette is addressed by the key of the request that produced it. This crate turns a
//! request (target, method, path, query, headers, body) into canonical *material*, serializes
//! that material with RFC 8785 (JSON Canonicalization Scheme) and hashes it with SHA-256.
//! The contract is written down in `docs/keying.md`; the code follows it to the byte and the
//! golden tests in `tests/golden.rs` pin it.
//!
//! # Architecture invariant
//!
//! This crate is **pure**: no IO, no async, no global state, no clock, no environment. The same
//! request gives the same key on every machine and in every process, which is what lets other
//! tools embed it. Key material is explicit canonical bytes, never `std::hash::Hash`. The only
//! `unsafe` code is the SSE2 search in `special.rs`, with its safety argument beside it.
//!
//! # Two ways to key a request
//!
//! [`Request::key`] returns a [`Keyed`]: the key with everything that explains it (the material
//! and the exact canonical bytes). [`Request::hit_key`] returns a [`HitKey`]: the same key and
//! only what answering a replay hit needs, hashing the canonical bytes as they are produced;
//! it is the one for hot paths. Both read the body once and also report what it asks about
//! streaming ([`Streaming`]), which the key leaves out.
//!
//! ```
//! use cassette_keying::{KeyConfig, Request};
//!
//! let body = br#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hi"}],"stream":true}"#;
//! let request = Request::new("POST", "/v1/chat/completions").body(body);
//! let keyed = request.key(&KeyConfig::default());
//! assert_eq!(keyed.key.as_str().len(), 64);
//! assert_eq!(keyed.profile.as_str(), "openai.chat");
//!
//! let hit = request.hit_key(&KeyConfig::default());
//! assert_eq!(hit.key, keyed.key);
//! assert!(hit.streaming.wanted);
//! ```

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod canonical;
mod diff;
mod doc;
mod jcs;
mod profile;
mod special;

pub use canonical::{canonical_body, form_decode, system_text, DEFAULT_VOLATILE, OLLAMA_VOLATILE};
pub use diff::{diff, Change, Difference};
pub use jcs::to_canonical_string;
pub use profile::{normalize_path, Profile};

use doc::Doc;
use jcs::{HashSink, Sink};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fmt;
use std::ops::Range;

/// The version of the key contract.
///
/// Bump this if any input to canonicalization changes: the profile table, the volatile list,
/// the merged defaults, whitespace stripping, the system text, the semantic headers, the query
/// rules, the material layout or the serialization. A stored cassette records the version it
/// was keyed with, so tapes from an older contract are recognisable instead of silently
/// answering (or missing) under new rules.
pub const KEY_VERSION: u32 = 1;

/// Header names that take part in the key. Every other header (auth, user agents, SDK
/// telemetry, retry counters, idempotency keys) is transport noise and stays out.
pub const SEMANTIC_HEADERS: &[&str] = &["anthropic-version", "anthropic-beta", "openai-beta"];

/// Query parameter names (compared case-insensitively) that carry credentials and never
/// take part in the key.
pub const QUERY_CREDENTIALS: &[&str] = &["key", "api-key", "api_key", "apikey", "access_token"];

/// Tunable parts of canonicalization. The default is the v1 contract.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyConfig {
    /// Extra top-level body members to treat as volatile (dropped before keying).
    pub extra_volatile: Vec<String>,
    /// Members of the default volatile list to keep in the key after all.
    pub keep_volatile: Vec<String>,
}

impl KeyConfig {
    /// Whether a top-level body member is dropped for this profile.
    pub fn is_volatile(&self, profile: Profile, name: &str) -> bool {
        if self.keep_volatile.iter().any(|k| k == name) {
            return false;
        }
        DEFAULT_VOLATILE.contains(&name)
            || (profile.is_ollama() && OLLAMA_VOLATILE.contains(&name))
            || self.extra_volatile.iter().any(|k| k == name)
    }
}

/// A request as the keying contract sees it. Borrowed, so keying a large body copies nothing.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The upstream route's name; `default` unless configured.
    pub target: &'a str,
    /// HTTP method, any case.
    pub method: &'a str,
    /// Request path without the query string.
    pub path: &'a str,
    /// Raw query string without the leading `?`.
    pub query: &'a str,
    /// Headers in the order received; repeats allowed.
    pub headers: Vec<(&'a str, &'a str)>,
    /// Raw body bytes.
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    /// A request to the `default` target with no query, headers or body.
    pub fn new(method: &'a str, path: &'a str) -> Self {
        Request {
            target: "default",
            method,
            path,
            query: "",
            headers: Vec::new(),
            body: &[],
        }
    }

    /// Sets the target (route name).
    pub fn target(mut self, target: &'a str) -> Self {
        self.target = target;
        self
    }

    /// Sets the raw query string.
    pub fn query(mut self, query: &'a str) -> Self {
        self.query = query;
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &'a str, value: &'a str) -> Self {
        self.headers.push((name, value));
        self
    }

    /// Sets the body bytes.
    pub fn body(mut self, body: &'a [u8]) -> Self {
        self.body = body;
        self
    }

    /// Computes the key of this request under `config`, with its explanation (see [`key`]).
    pub fn key(&self, config: &KeyConfig) -> Keyed {
        key(self, config)
    }

    /// Computes the key of this request and what a replay hit needs (see [`hit_key`]).
    pub fn hit_key(&self, config: &KeyConfig) -> HitKey {
        hit_key(self, config)
    }
}

/// A 64-character lowercase hex SHA-256 key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(String);

impl Key {
    /// Wraps a string that is already a key; `None` unless it is 64 lowercase hex characters.
    pub fn parse(s: &str) -> Option<Key> {
        let ok = s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        ok.then(|| Key(s.to_owned()))
    }

    /// The full 64-character hex form.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The display form: the first 16 hex characters.
    pub fn short(&self) -> &str {
        &self.0[..16]
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The result of keying a request: the key and everything needed to explain it.
///
/// Use [`Request::key`] where the key is shown or explained (a miss report, `cassette key`,
/// recording), and [`Request::hit_key`] on the hot path of a replay hit: the key is the same,
/// without building the material and canonical string.
#[derive(Debug, Clone)]
pub struct Keyed {
    /// The key: SHA-256 of `canonical`.
    pub key: Key,
    /// The profile chosen from the path.
    pub profile: Profile,
    /// The material object (see `docs/keying.md`, step 6), read back from `canonical`, so
    /// numbers appear as they were hashed (`1.0` as `1`).
    pub material: Value,
    /// The RFC 8785 serialization of `material`: exactly the bytes that were hashed.
    pub canonical: String,
    /// SHA-256 of the system text, when the request has one.
    pub system_sha256: Option<String>,
    /// What the body asks about streaming (not part of the key).
    pub streaming: Streaming,
}

/// The key of a request and what answering a replay hit needs, computed in one pass over the
/// body without the explanation [`Keyed`] carries. `hit_key(r, c).key == key(r, c).key` for
/// every request and configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HitKey {
    /// The key, as [`key`] computes it.
    pub key: Key,
    /// The profile chosen from the path.
    pub profile: Profile,
    /// What the body asks about streaming (not part of the key).
    pub streaming: Streaming,
}

/// What a request body asks about streaming. The key leaves it out (`stream` and
/// `stream_options` are volatile), but answering the request depends on it; it is read during
/// keying so that nobody parses the body a second time to find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Streaming {
    /// Whether the client asked for a streamed answer: the body's top-level `stream` is
    /// `true`, or the body is JSON without a `stream` member on a profile that streams by
    /// default ([`Profile::streams_by_default`]). Any other `stream` value (`false`, `null`,
    /// `"yes"`), and a body that is empty or not JSON, ask for no stream.
    pub wanted: bool,
    /// Whether `stream_options.include_usage` is `true` (OpenAI's final usage chunk).
    pub include_usage: bool,
}

/// Computes the key of `request` under `config`, with its explanation.
pub fn key(request: &Request<'_>, config: &KeyConfig) -> Keyed {
    let mut canonical = String::with_capacity(request.body.len() + 512);
    let written = write_material(request, config, &mut canonical);
    // The canonical body is JSON of the same depth as the body serde_json accepted, so it
    // always reads back; `Null` would only show a writer bug in an explanation, never in a key.
    let body = written
        .body
        .and_then(|range| serde_json::from_str(&canonical[range]).ok())
        .unwrap_or(Value::Null);

    let optional = |text: &Option<String>| text.clone().map_or(Value::Null, Value::from);
    let mut material = Map::new();
    material.insert("v".into(), Value::from(KEY_VERSION));
    material.insert("target".into(), Value::from(request.target));
    material.insert("profile".into(), Value::from(written.profile.as_str()));
    material.insert("method".into(), Value::from(written.method));
    material.insert("path".into(), Value::from(written.path));
    material.insert("query".into(), written.query);
    material.insert("headers".into(), written.headers);
    material.insert("system_sha256".into(), optional(&written.system_sha256));
    material.insert("body".into(), body);
    material.insert("body_sha256".into(), optional(&written.body_sha256));
    Keyed {
        key: Key(sha256_hex(canonical.as_bytes())),
        profile: written.profile,
        material: Value::Object(material),
        canonical,
        system_sha256: written.system_sha256,
        streaming: written.streaming,
    }
}

/// Computes only the key of `request` under `config` and what a replay hit needs: the
/// canonical bytes are hashed as they are produced and never kept.
pub fn hit_key(request: &Request<'_>, config: &KeyConfig) -> HitKey {
    let mut sink = HashSink::new();
    let written = write_material(request, config, &mut sink);
    HitKey {
        key: Key(hex(&sink.finish())),
        profile: written.profile,
        streaming: written.streaming,
    }
}

/// What writing the material computed on the way, for the explanation.
struct Written {
    profile: Profile,
    method: String,
    path: String,
    query: Value,
    headers: Value,
    system_sha256: Option<String>,
    body_sha256: Option<String>,
    /// Where the canonical JSON body lies among the bytes written.
    body: Option<Range<usize>>,
    streaming: Streaming,
}

/// Writes the RFC 8785 material of `request` (key contract steps 1 to 7) into `out`.
fn write_material<S: Sink>(request: &Request<'_>, config: &KeyConfig, out: &mut S) -> Written {
    let path = normalize_path(request.path);
    let profile = Profile::from_path(&path);
    let doc = match request.body {
        [] => None,
        bytes => std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| Doc::parse(text, profile)),
    };
    let body = doc.as_ref().map(|doc| doc.canonical(profile, config));
    let body_sha256 = (doc.is_none() && !request.body.is_empty()).then(|| sha256_hex(request.body));
    let system_sha256 = body
        .as_ref()
        .and_then(|body| body.system_text(profile))
        .map(|pieces| {
            let mut hasher = Sha256::new();
            for piece in pieces {
                hasher.update(piece.as_bytes());
            }
            hex(&hasher.finalize().into())
        });
    let written = Written {
        profile,
        method: request.method.to_ascii_uppercase(),
        path,
        query: canonical::canonical_query(request.query),
        headers: canonical::semantic_headers(&request.headers),
        system_sha256,
        body_sha256,
        body: None,
        streaming: doc
            .as_ref()
            .map(|d| d.streaming(profile))
            .unwrap_or_default(),
    };

    // Members in RFC 8785 order; their names are ASCII, so that is byte order.
    out.put("{\"body\":");
    let body_range = body.map(|body| {
        let start = out.written();
        body.write(out);
        start..out.written()
    });
    if body_range.is_none() {
        out.put("null");
    }
    out.put(",\"body_sha256\":");
    write_optional(out, written.body_sha256.as_deref());
    out.put(",\"headers\":");
    jcs::write_value(out, &written.headers);
    out.put(",\"method\":");
    jcs::write_string(out, &written.method);
    out.put(",\"path\":");
    jcs::write_string(out, &written.path);
    out.put(",\"profile\":");
    jcs::write_string(out, profile.as_str());
    out.put(",\"query\":");
    jcs::write_value(out, &written.query);
    out.put(",\"system_sha256\":");
    write_optional(out, written.system_sha256.as_deref());
    out.put(",\"target\":");
    jcs::write_string(out, request.target);
    out.put(",\"v\":");
    jcs::write_number(out, f64::from(KEY_VERSION));
    out.put_ascii(b'}');
    Written {
        body: body_range,
        ..written
    }
}

fn write_optional<S: Sink>(out: &mut S, text: Option<&str>) {
    match text {
        Some(text) => jcs::write_string(out, text),
        None => out.put("null"),
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes).into())
}

fn hex(digest: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}
