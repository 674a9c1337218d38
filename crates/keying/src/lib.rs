//! Canonical, versioned keys for LLM API requests.
//!
//! A cassette is addressed by the key of the request that produced it. This crate turns a
//! request (target, method, path, query, headers, body) into canonical *material*, serializes
//! that material with RFC 8785 (JSON Canonicalization Scheme) and hashes it with SHA-256.
//! The contract is written down in `docs/keying.md`; the code follows it to the byte and the
//! golden tests in `tests/golden.rs` pin it. Requests to MCP tool servers have a profile of
//! their own, [`mcp`], keyed with [`McpRequest`] and pinned by `tests/mcp_golden.rs`; so do
//! files fetched from hosts no route serves, [`download`], keyed with [`DownloadRequest`] and
//! pinned by `tests/download_golden.rs`.
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
pub mod download;
mod jcs;
mod json_path;
pub mod mcp;
mod multipart;
mod profile;
mod shown_url;
mod special;

pub use canonical::{canonical_body, form_decode, system_text, DEFAULT_VOLATILE, OLLAMA_VOLATILE};
pub use diff::{diff, made_afresh, shorten, Change, Difference, MAX_SHOWN};
pub use download::DownloadRequest;
pub use jcs::to_canonical_string;
pub use json_path::{JsonPath, JsonPathError};
pub use mcp::McpRequest;
pub use multipart::MULTIPART_TEXT_MAX;
pub use profile::{normalize_path, Profile};
pub use shown_url::{shown_url, shown_urls};

use doc::{CanonicalBody, Doc};
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

/// Query parameter names that carry credentials and never take part in the key, in their
/// normalized form: a name is compared after form-decoding, ASCII lowercasing and removing every
/// `-` and `_` (see [`is_query_credential`]), so `api_key`, `API-KEY` and `apiKey` are `apikey`.
///
/// The list grew within key version 1 (docs/keying.md, "Amendments"): only requests carrying
/// one of the added names key differently, so the version was not bumped.
pub const QUERY_CREDENTIALS: &[&str] = &[
    "key",
    "apikey",
    "xapikey",
    "xgoogapikey",
    "apitoken",
    "apisecret",
    "accesstoken",
    "accesskey",
    "refreshtoken",
    "idtoken",
    "authtoken",
    "sessiontoken",
    "securitytoken",
    "token",
    "bearer",
    "auth",
    "authorization",
    "password",
    "passwd",
    "pwd",
    "secret",
    "secretkey",
    "clientsecret",
    "credential",
    "credentials",
    "privatekey",
    "subscriptionkey",
    "ocpapimsubscriptionkey",
    "sig",
    "signature",
    "xamzsignature",
    "xamzcredential",
    "xamzsecuritytoken",
    "xgoogsignature",
    "xgoogcredential",
];

/// Whether a (form-decoded) query parameter name is one of [`QUERY_CREDENTIALS`]: compared
/// after ASCII lowercasing and removing every `-` and `_`. The recorder's redaction asks the
/// same question, so a parameter left out of the key is also never stored.
pub fn is_query_credential(decoded_name: &str) -> bool {
    let normalized: String = decoded_name
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    QUERY_CREDENTIALS.contains(&normalized.as_str())
}

/// Tunable parts of canonicalization. The default is the v1 contract, and every setting left
/// empty leaves every key unchanged.
///
/// A configuration changes which requests share a key, so a recording and its replays must use
/// the same one: recorders store its [`fingerprint`](KeyConfig::fingerprint) beside the key
/// version to tell "keyed under other settings" apart from "another request".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyConfig {
    /// Extra top-level body members to treat as volatile (dropped before keying).
    pub extra_volatile: Vec<String>,
    /// Members of the default volatile list to keep in the key after all.
    pub keep_volatile: Vec<String>,
    /// Values left out of the key wherever they are in a JSON body (client-generated ids such
    /// as `$.contents[*].parts[*].functionCall.id`): removed from the body after step 2.
    pub ignore: Vec<JsonPath>,
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

    /// The settings in their canonical form: each list sorted, without repeats, paths in their
    /// canonical spelling. Two configurations that key alike by construction have one form.
    pub fn canonical(&self) -> CanonicalKeyConfig {
        fn sorted(items: impl Iterator<Item = String>) -> Vec<String> {
            let mut items: Vec<String> = items.collect();
            items.sort();
            items.dedup();
            items
        }
        CanonicalKeyConfig {
            volatile: sorted(self.extra_volatile.iter().cloned()),
            keep_volatile: sorted(self.keep_volatile.iter().cloned()),
            ignore: sorted(self.ignore.iter().map(JsonPath::to_string)),
        }
    }

    /// A short fingerprint of the settings: the first 12 hex characters of the SHA-256 of the
    /// RFC 8785 serialization of `{"ignore": [...], "keep_volatile": [...], "volatile": [...]}`
    /// built from [`KeyConfig::canonical`]. The default configuration's is
    /// [`DEFAULT_KEY_CONFIG_FINGERPRINT`].
    pub fn fingerprint(&self) -> String {
        self.canonical().fingerprint()
    }

    /// Removes the [`ignore`](KeyConfig::ignore)d values from a canonical body.
    fn remove_ignored(&self, body: &mut Value) {
        for path in &self.ignore {
            path.remove(body);
        }
    }
}

/// Top-level body members that hold what a request asks, across the profiles: the model and
/// the prompt (messages, system text, input, instructions, Gemini's contents and system
/// instruction). Keying settings that would leave one of them out give every prompt sent to a
/// path one key, so one recording would answer them all; [`KeyConfig::question_left_out`]
/// finds such settings so that a caller can refuse them.
pub const QUESTION_MEMBERS: &[&str] = &[
    "model",
    "messages",
    "system",
    "input",
    "instructions",
    "prompt",
    "contents",
    "systemInstruction",
    "system_instruction",
];

/// Members that carry a prompt's words inside a question member (a message's `content`, a
/// Gemini part's `text`, a content's `parts`).
pub const PROMPT_TEXT_MEMBERS: &[&str] = &["content", "text", "parts"];

/// One keying setting that would leave the question (the model, the prompt or the whole body)
/// out of the key: which setting, and what it leaves out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionLeftOut {
    /// The setting as it is spelled in [`CanonicalKeyConfig`]: `volatile` or `ignore`.
    pub setting: &'static str,
    /// The member name or the path, as given (paths in canonical spelling).
    pub value: String,
    /// What it leaves out, as a phrase: "the model", "the prompt", "the whole body".
    pub what: &'static str,
}

impl KeyConfig {
    /// The settings that would leave the model, the prompt or the whole body out of the key
    /// (see [`QUESTION_MEMBERS`]); empty for every configuration that keeps them in.
    pub fn question_left_out(&self) -> Vec<QuestionLeftOut> {
        let mut out = Vec::new();
        for name in &self.extra_volatile {
            if let Some(what) = question_member(name) {
                out.push(QuestionLeftOut {
                    setting: "volatile",
                    value: name.clone(),
                    what,
                });
            }
        }
        for path in &self.ignore {
            if let Some(what) = path_leaves_out(path) {
                out.push(QuestionLeftOut {
                    setting: "ignore",
                    value: path.to_string(),
                    what,
                });
            }
        }
        out
    }
}

/// What leaving the top-level member `name` out of the key leaves out, if it is a question.
fn question_member(name: &str) -> Option<&'static str> {
    match name {
        "model" => Some("the model"),
        _ if QUESTION_MEMBERS.contains(&name) => Some("the prompt"),
        _ => None,
    }
}

/// What removing the values `path` selects could leave out of the key, if it is the question.
pub fn path_leaves_out(path: &JsonPath) -> Option<&'static str> {
    if path.is_root() {
        return Some("the whole body");
    }
    if !path.may_remove_question(QUESTION_MEMBERS, PROMPT_TEXT_MEMBERS) {
        return None;
    }
    // With no member named, only a wildcard at the top (`$.*`) still selects the question.
    if path.may_remove_question(&[], &[]) {
        return Some("every member of the body");
    }
    let only_model = path.may_remove_question(&["model"], &[])
        && !path.may_remove_question(&QUESTION_MEMBERS[1..], PROMPT_TEXT_MEMBERS);
    Some(if only_model {
        "the model"
    } else {
        "the prompt"
    })
}

/// The fingerprint of `KeyConfig::default()`.
pub const DEFAULT_KEY_CONFIG_FINGERPRINT: &str = "070e95e06023";

/// A [`KeyConfig`] in canonical form (see [`KeyConfig::canonical`]): what recorders store and
/// compare, as plain strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CanonicalKeyConfig {
    /// `extra_volatile`, sorted and deduplicated.
    pub volatile: Vec<String>,
    /// `keep_volatile`, sorted and deduplicated.
    pub keep_volatile: Vec<String>,
    /// `ignore` in canonical spelling, sorted and deduplicated.
    pub ignore: Vec<String>,
}

impl CanonicalKeyConfig {
    /// See [`KeyConfig::fingerprint`].
    pub fn fingerprint(&self) -> String {
        let list = |items: &[String]| Value::from(items.to_vec());
        let mut object = Map::new();
        object.insert("ignore".into(), list(&self.ignore));
        object.insert("keep_volatile".into(), list(&self.keep_volatile));
        object.insert("volatile".into(), list(&self.volatile));
        let mut hex = sha256_hex(to_canonical_string(&Value::Object(object)).as_bytes());
        hex.truncate(12);
        hex
    }

    /// The settings that differ from `now`, one phrase each, recorded value first:
    /// `volatile [seed]; now []`. Empty when both are alike.
    pub fn differences(&self, now: &CanonicalKeyConfig) -> Vec<String> {
        let mut out = Vec::new();
        for (name, recorded, current) in [
            ("volatile", &self.volatile, &now.volatile),
            ("keep_volatile", &self.keep_volatile, &now.keep_volatile),
            ("ignore", &self.ignore, &now.ignore),
        ] {
            if recorded != current {
                out.push(format!(
                    "{name} [{}]; now [{}]",
                    recorded.join(", "),
                    current.join(", ")
                ));
            }
        }
        out
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

impl AsRef<str> for Key {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

// Sound because `Eq`, `Ord` and `Hash` of a key are those of its string: a `BTreeMap<Key, _>`
// can be searched by `&str` prefix and a `HashSet<Key>` asked about a `&str`.
impl std::borrow::Borrow<str> for Key {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// A key is written as its 64-character hex string.
impl serde::Serialize for Key {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// A key is read from its hex string and validated like [`Key::parse`]: anything else (a
/// hand-edited or truncated key) is a deserialization error, never a key that could panic later.
impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Key, D::Error> {
        struct KeyVisitor;

        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = Key;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key: 64 lowercase hex characters")
            }

            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Key, E> {
                Key::parse(s).ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(s), &self))
            }
        }

        deserializer.deserialize_str(KeyVisitor)
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
    /// What the body was read as.
    pub body: BodyKind,
}

/// The material member that numbers a repeat of a request (sequence mode): absent for the
/// first occurrence, so every base key is the key of the contract without it.
pub const OCCURRENCE_MEMBER: &str = "occurrence";

/// The material member that scopes a key to one test (a test-scoped key): absent from every
/// plain key's material.
pub const TEST_MEMBER: &str = "test";

impl Keyed {
    /// The key of the `n`-th occurrence of this request within one session, for recorders that
    /// answer repeats of one request in sequence (`docs/keying.md`, "Occurrences"). The first
    /// occurrence (`n` of 0 or 1) is the request itself, its base key; for `n` of 2 or more the
    /// material gains the member `occurrence: n` and the key is recomputed from it. A base key
    /// never changes, and no occurrence key can equal a base key (its material has a member no
    /// base material has). Numbering a numbered key again replaces its number.
    pub fn occurrence(self, n: u32) -> Keyed {
        if n <= 1 && self.material.get(OCCURRENCE_MEMBER).is_none() {
            return self;
        }
        self.with_member(OCCURRENCE_MEMBER, (n > 1).then(|| Value::from(n)))
    }

    /// Which occurrence of its request this key is: 1 unless made by [`Keyed::occurrence`].
    pub fn occurrence_number(&self) -> u32 {
        self.material
            .get(OCCURRENCE_MEMBER)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(1)
    }

    /// The *test-scoped key* of this request for `test` (a test runner's id of the test, as a
    /// pytest node id), for recorders that keep one test's answer apart from another's to the
    /// same request (`docs/keying.md`, "Test-scoped keys"): the material gains the member
    /// `test: "<id>"` and the key is recomputed from it. `None` takes the member away again,
    /// giving the plain key. No plain key changes, and no test-scoped key can equal a plain
    /// key (its material has a member no plain material has). It combines with
    /// [`Keyed::occurrence`] in either order.
    pub fn for_test(self, test: Option<&str>) -> Keyed {
        if test.is_none() && self.material.get(TEST_MEMBER).is_none() {
            return self;
        }
        self.with_member(TEST_MEMBER, test.map(Value::from))
    }

    /// This request with the top-level member `name` of its material set to `value` (taken
    /// away for `None`), keyed again: the one way additions to the contract (occurrences,
    /// test scopes) change a key.
    fn with_member(self, name: &str, value: Option<Value>) -> Keyed {
        let Keyed {
            profile,
            mut material,
            system_sha256,
            streaming,
            body,
            ..
        } = self;
        if let Value::Object(members) = &mut material {
            match value {
                None => {
                    members.remove(name);
                }
                Some(value) => {
                    members.insert(name.into(), value);
                }
            }
        }
        let canonical = to_canonical_string(&material);
        Keyed {
            key: Key(sha256_hex(canonical.as_bytes())),
            profile,
            material,
            canonical,
            system_sha256,
            streaming,
            body,
        }
    }

    /// The test this key is scoped to, when made by [`Keyed::for_test`].
    pub fn test_scope(&self) -> Option<&str> {
        self.material.get(TEST_MEMBER).and_then(Value::as_str)
    }
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
    /// What the body was read as.
    pub body: BodyKind,
}

/// What keying read a request body as, which decides how it enters the key (key contract
/// step 2). Reported so that a caller can refuse a body declared as JSON that is not, without
/// parsing it a second time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body: keyed as `null`.
    Empty,
    /// One JSON value in UTF-8, as `serde_json` reads it: keyed in canonical form.
    Json,
    /// Anything else (not UTF-8, not JSON, trailing bytes): keyed by the SHA-256 of its bytes,
    /// or, for a well-formed `multipart/form-data` body, by its parts.
    Opaque,
}

/// What a request asks about streaming. The key leaves it out (`stream` and `stream_options`
/// are volatile, Gemini's streaming method is keyed as the plain one), but answering the
/// request depends on it; it is read during keying so that nobody parses the body a second
/// time to find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Streaming {
    /// Whether the client asked for a streamed answer: the body's top-level `stream` is
    /// `true`, or the body is JSON without a `stream` member on a profile that streams by
    /// default ([`Profile::streams_by_default`]). Any other `stream` value (`false`, `null`,
    /// `"yes"`), and a body that is empty or not JSON, ask for no stream. On
    /// `gemini.generate` only the path decides: the `:streamGenerateContent` method streams
    /// ([`Profile::path_streams`]), whatever the body holds.
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
        body: written.body_kind,
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
        body: written.body_kind,
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
    body_kind: BodyKind,
}

/// The canonical body (key contract step 2), ready to write.
enum Body<'d, 'a> {
    /// From the single-pass document: the common case.
    Fast(CanonicalBody<'d, 'a>),
    /// From the plain `Value` statement of the rules, for configurations that ignore JSON paths
    /// (step 2b), which the document does not model.
    Value(Value),
}

/// Writes the RFC 8785 material of `request` (key contract steps 1 to 7) into `out`.
fn write_material<S: Sink>(request: &Request<'_>, config: &KeyConfig, out: &mut S) -> Written {
    let normalized = normalize_path(request.path);
    let profile = Profile::from_path(&normalized);
    let path = profile::keyed_path(profile, normalized);
    let text = match request.body {
        [] => None,
        bytes => std::str::from_utf8(bytes).ok(),
    };
    let (doc, value) = if config.ignore.is_empty() {
        (text.and_then(|text| Doc::parse(text, profile)), None)
    } else {
        (
            None,
            text.and_then(|text| serde_json::from_str::<Value>(text).ok()),
        )
    };
    let streaming = match (&doc, &value) {
        // Gemini asks for a stream in the path, never in the body.
        _ if profile == Profile::GeminiGenerate => Streaming {
            wanted: Profile::path_streams(request.path),
            include_usage: false,
        },
        (Some(doc), _) => doc.streaming(profile),
        (None, Some(value)) => streaming_of(profile, value),
        (None, None) => Streaming::default(),
    };
    let is_json = doc.is_some() || value.is_some();
    // A raw body that is a well-formed multipart form is keyed by its parts, not its bytes
    // (docs/keying.md, "Multipart bodies"): its boundary is random.
    let parts = (!is_json && !request.body.is_empty())
        .then(|| multipart::keyed_parts(&request.headers, request.body))
        .flatten();
    let is_form = parts.is_some();
    let body = match (&doc, value) {
        (Some(doc), _) => Some(Body::Fast(doc.canonical(profile, config))),
        (None, Some(value)) => {
            let mut body = canonical_body(profile, value, config);
            config.remove_ignored(&mut body);
            Some(Body::Value(body))
        }
        (None, None) => parts.map(Body::Value),
    };
    let body_sha256 =
        (!is_json && !is_form && !request.body.is_empty()).then(|| sha256_hex(request.body));
    let system_sha256 = match &body {
        Some(Body::Fast(body)) => body.system_text(profile).map(|pieces| {
            let mut hasher = Sha256::new();
            for piece in pieces {
                hasher.update(piece.as_bytes());
            }
            hex(&hasher.finalize().into())
        }),
        Some(Body::Value(body)) => {
            system_text(profile, body).map(|text| sha256_hex(text.as_bytes()))
        }
        None => None,
    };
    let written = Written {
        profile,
        method: request.method.to_ascii_uppercase(),
        path,
        query: canonical::canonical_query(profile, request.query),
        headers: canonical::semantic_headers(&request.headers),
        system_sha256,
        body_sha256,
        body: None,
        streaming,
        body_kind: match (is_json, request.body.is_empty()) {
            (true, _) => BodyKind::Json,
            (false, true) => BodyKind::Empty,
            (false, false) => BodyKind::Opaque,
        },
    };

    // Members in RFC 8785 order; their names are ASCII, so that is byte order.
    out.put("{\"body\":");
    let body_range = body.map(|body| {
        let start = out.written();
        match body {
            Body::Fast(body) => body.write(out),
            Body::Value(body) => jcs::write_value(out, &body),
        }
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

/// What a parsed body asks about streaming (see [`Streaming`]).
fn streaming_of(profile: Profile, body: &Value) -> Streaming {
    let wanted = match body.get("stream") {
        Some(Value::Bool(stream)) => *stream,
        Some(_) => false,
        None => profile.streams_by_default(),
    };
    let include_usage = body.pointer("/stream_options/include_usage") == Some(&Value::Bool(true));
    Streaming {
        wanted,
        include_usage,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_leave_the_question_out_are_found() {
        let config = KeyConfig {
            extra_volatile: vec!["seed".into(), "messages".into(), "model".into()],
            keep_volatile: vec!["user".into()],
            ignore: ["$.*", "$.messages", "$..model", "$..call_id", "$"]
                .iter()
                .map(|p| JsonPath::parse(p).unwrap())
                .collect(),
        };
        let found: Vec<(String, &str)> = config
            .question_left_out()
            .into_iter()
            .map(|q| (format!("{} {}", q.setting, q.value), q.what))
            .collect();
        assert_eq!(
            found,
            [
                ("volatile messages".to_owned(), "the prompt"),
                ("volatile model".to_owned(), "the model"),
                ("ignore $[*]".to_owned(), "every member of the body"),
                ("ignore $.messages".to_owned(), "the prompt"),
                ("ignore $..model".to_owned(), "the model"),
                ("ignore $".to_owned(), "the whole body"),
            ]
        );
        assert!(KeyConfig::default().question_left_out().is_empty());
    }

    #[test]
    fn keys_are_exactly_64_lowercase_hex_characters() {
        let good = "0123456789abcdef".repeat(4);
        let key = Key::parse(&good).map(|k| k.as_str().to_owned());
        assert_eq!(key.as_deref(), Some(good.as_str()));
        for bad in [
            String::new(),
            good[..63].to_owned(),
            format!("{good}0"),
            good.to_ascii_uppercase(),
            format!("../{}", &good[3..]),
            // 64 bytes, but not 64 hex characters: slicing such a string could panic.
            "é".repeat(32),
        ] {
            assert!(Key::parse(&bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn keys_serialize_as_their_hex_string_and_are_validated_when_read() {
        let key = Request::new("POST", "/v1/chat/completions")
            .key(&KeyConfig::default())
            .key;
        let json = serde_json::to_string(&key).unwrap_or_default();
        assert_eq!(json, format!("\"{key}\""));
        let back: Result<Key, _> = serde_json::from_str(&json);
        assert_eq!(back.ok(), Some(key.clone()));
        for bad in [
            "\"abc\"",
            "\"éééééééééééééééééééééééééééééééé\"",
            "12",
            "null",
        ] {
            let err = serde_json::from_str::<Key>(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("64 lowercase hex"), "{bad}: {err}");
        }
        assert_eq!(key.short(), &key.as_str()[..16]);
    }
}
