//! Redaction: what never reaches disk. Pure transformations of what gets stored; the key is
//! computed from the original request elsewhere, so nothing here changes which tape answers.
//!
//! The rules, in order of strength (see `docs/redaction.md`):
//!
//! * request headers are kept from an allow-list only; response headers lose a deny-list
//!   (cookies, hop-by-hop, framing, credentials);
//! * query parameters named like credentials are removed;
//! * JSON members whose *name* is an exact credential name lose their value, except names on an
//!   explicit safe-list of LLM API fields and anything under `logprobs`-like subtrees (whose
//!   member names are model tokens, not field names);
//! * credential-*shaped* substrings (`sk-...`, `AKIA...`, JWTs, `Bearer <token>`, ...) are
//!   replaced wherever they appear in a stored string;
//! * users add JSON paths and regexes for their own data (personal data, internal ids).

use regex::bytes::Regex as BytesRegex;
use regex::{Captures, Regex, RegexSet};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::LazyLock;

/// What every redacted value or substring is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// The capture group that, when present in a pattern, limits the replacement to that group
/// (so `Bearer [REDACTED]` keeps its scheme, and users can keep context around a match).
const SECRET_GROUP: &str = "redact";

/// User-supplied extra rules (from config).
///
/// * `json_paths`: JSON paths into request and response bodies whose values are replaced with
///   [`REDACTED`], e.g. `$.messages[*].content` or `$..email`. Supported syntax: `$`, `.name`,
///   `['name']`, `[N]`, `[*]`, `.*`, `..name`.
/// * `patterns`: regexes replaced wherever they match in stored strings (JSON string values and
///   member names, text bodies, kept header values, query strings). When a pattern has a group
///   named `redact`, only that group is replaced: `email: (?P<redact>\S+)`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RedactionRules {
    /// JSON paths whose values are replaced with [`REDACTED`].
    pub json_paths: Vec<String>,
    /// Regexes whose matches are replaced with [`REDACTED`].
    pub patterns: Vec<String>,
}

/// An invalid user redaction rule; names the rule so the config can be fixed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedactError {
    /// A user regex does not compile.
    #[error("invalid redaction pattern `{pattern}`: {reason}")]
    InvalidPattern {
        /// The pattern as configured.
        pattern: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A user JSON path does not parse.
    #[error("invalid redaction JSON path `{path}`: {reason}")]
    InvalidJsonPath {
        /// The path as configured.
        path: String,
        /// Why it was rejected.
        reason: String,
    },
}

/// One credential-shaped match found by [`find_credentials`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CredentialMatch {
    /// Which shape matched, e.g. `openai_api_key` or `jwt`.
    pub pattern: &'static str,
    /// Byte offset of the secret in the audited bytes.
    pub offset: usize,
    /// Length of the secret in bytes.
    pub len: usize,
}

// ---------------------------------------------------------------------------------------------
// Built-in credential shapes
// ---------------------------------------------------------------------------------------------

/// A known credential shape. `check` sees the secret part of a match and rejects look-alikes
/// the regex alone cannot (the regex crate has no look-around).
struct ShapeDef {
    name: &'static str,
    regex: &'static str,
    check: fn(&str) -> bool,
}

fn always(_: &str) -> bool {
    true
}

/// Hyphenated or underscored words (`sk-learn-compatible-estimator`) are prose, not keys: real
/// keys are random and carry digits or capitals.
fn not_prose(secret: &str) -> bool {
    let tail = secret.split_once('-').map_or(secret, |(_, t)| t);
    let segments: Vec<&str> = tail.split(['-', '_']).collect();
    let prose = segments.len() >= 2
        && segments
            .iter()
            .all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase()));
    !prose
}

/// A bearer token is random: it has a digit, or it is long and not made of words.
fn bearer_token(token: &str) -> bool {
    if token.bytes().any(|b| b.is_ascii_digit()) {
        return true;
    }
    let wordy = token
        .split(['-', '_', '.', '~', '+', '/'])
        .filter(|s| !s.is_empty())
        .count()
        >= 2;
    token.len() >= 24 && !wordy
}

// `(?-u:\b)` keeps the regexes on the fast DFA engines (a Unicode word boundary makes them fall
// back on non-ASCII text); every shape is ASCII, so ASCII boundaries are what we mean. The order
// is priority: more specific shapes first, `bearer` last, so an audit names the best match.
const SHAPES: &[ShapeDef] = &[
    ShapeDef {
        name: "private_key",
        regex: r"(?P<redact>-----BEGIN[A-Z ]{0,20}PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]{0,20}PRIVATE KEY-----|$))",
        check: always,
    },
    ShapeDef {
        name: "jwt",
        regex: r"(?-u:\b)(?P<redact>eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)",
        check: always,
    },
    ShapeDef {
        name: "anthropic_api_key",
        regex: r"(?-u:\b)(?P<redact>sk-ant-[A-Za-z0-9_-]{20,})",
        check: always,
    },
    ShapeDef {
        name: "openai_api_key",
        regex: r"(?-u:\b)(?P<redact>sk-[A-Za-z0-9_-]{20,})",
        check: not_prose,
    },
    ShapeDef {
        name: "stripe_key",
        regex: r"(?-u:\b)(?P<redact>[sr]k_(?:live|test)_[A-Za-z0-9]{16,})",
        check: always,
    },
    ShapeDef {
        name: "aws_access_key_id",
        regex: r"(?-u:\b)(?P<redact>(?:AKIA|ASIA)[0-9A-Z]{16})(?-u:\b)",
        check: always,
    },
    ShapeDef {
        name: "github_token",
        regex: r"(?-u:\b)(?P<redact>(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}))",
        check: always,
    },
    ShapeDef {
        name: "google_api_key",
        regex: r"(?-u:\b)(?P<redact>AIza[0-9A-Za-z_-]{35,})",
        check: always,
    },
    ShapeDef {
        name: "slack_token",
        regex: r"(?-u:\b)(?P<redact>xox[abprse]-[A-Za-z0-9-]{10,})",
        check: always,
    },
    ShapeDef {
        name: "huggingface_token",
        regex: r"(?-u:\b)(?P<redact>hf_[A-Za-z0-9]{30,})(?-u:\b)",
        check: always,
    },
    ShapeDef {
        name: "groq_api_key",
        regex: r"(?-u:\b)(?P<redact>gsk_[A-Za-z0-9]{30,})",
        check: always,
    },
    ShapeDef {
        name: "xai_api_key",
        regex: r"(?-u:\b)(?P<redact>xai-[A-Za-z0-9]{30,})",
        check: always,
    },
    ShapeDef {
        name: "bearer_token",
        regex: r"(?i-u:\bbearer)\s+(?P<redact>[A-Za-z0-9._~+/-]{16,}=*)",
        check: bearer_token,
    },
];

struct Shapes {
    set: RegexSet,
    regexes: Vec<Regex>,
    bytes: Vec<BytesRegex>,
}

// The shape regexes are constants; `compiled_shapes_are_valid` (a unit test) compiles every one
// of them, so the `None` fallback below is unreachable in a tested build. If it ever were hit,
// the redactor degrades to name- and path-based rules rather than panicking.
static SHAPES_COMPILED: LazyLock<Option<Shapes>> = LazyLock::new(|| {
    let set = RegexSet::new(SHAPES.iter().map(|s| s.regex)).ok()?;
    let regexes = SHAPES
        .iter()
        .map(|s| Regex::new(s.regex).ok())
        .collect::<Option<Vec<_>>>()?;
    let bytes = SHAPES
        .iter()
        .map(|s| BytesRegex::new(s.regex).ok())
        .collect::<Option<Vec<_>>>()?;
    Some(Shapes {
        set,
        regexes,
        bytes,
    })
});

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

/// Request headers kept on disk. Everything else (authorization, x-api-key, api-key, cookies,
/// user agents, tracing ids) is dropped: a deny-list would miss the next vendor's header.
pub const REQUEST_HEADER_ALLOW_LIST: &[&str] = &[
    "content-type",
    "accept",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
];

/// Response headers never stored: cookies, credentials, hop-by-hop headers, and the framing
/// headers that stop being true once the body is stored decoded.
pub const RESPONSE_HEADER_DENY_LIST: &[&str] = &[
    "set-cookie",
    "set-cookie2",
    "cookie",
    "authorization",
    "proxy-authorization",
    "proxy-authenticate",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "x-auth-token",
    "x-access-token",
    "x-refresh-token",
    "x-session-token",
    "x-csrf-token",
    "x-xsrf-token",
    "x-amz-security-token",
    "ocp-apim-subscription-key",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "content-encoding",
];

/// Query parameter names removed, compared after [`normalize_name`] (case and `-`/`_`
/// ignored).
pub const QUERY_CREDENTIAL_NAMES: &[&str] = &[
    "key",
    "apikey",
    "xapikey",
    "apitoken",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "authtoken",
    "sessiontoken",
    "token",
    "auth",
    "authorization",
    "password",
    "passwd",
    "secret",
    "clientsecret",
    "privatekey",
    "subscriptionkey",
    "sig",
    "signature",
    "xamzsignature",
    "xamzcredential",
    "xamzsecuritytoken",
    "xgoogsignature",
    "xgoogcredential",
];

/// JSON member names whose scalar values are redacted, compared after [`normalize_name`]. An
/// exact list, not substrings: `max_tokens` or `token_budget` never match.
pub const BODY_CREDENTIAL_NAMES: &[&str] = &[
    "apikey",
    "xapikey",
    "apisecret",
    "apitoken",
    "authtoken",
    "xauthtoken",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "sessiontoken",
    "securitytoken",
    "token",
    "bearer",
    "authorization",
    "proxyauthorization",
    "password",
    "passwd",
    "passphrase",
    "secret",
    "clientsecret",
    "secretkey",
    "privatekey",
    "secretaccesskey",
    "awssecretaccesskey",
    "awssessiontoken",
    "cookie",
    "setcookie",
    "credential",
    "credentials",
    "subscriptionkey",
    "ocpapimsubscriptionkey",
    "xgoogapikey",
];

/// LLM API member names that are never redacted by name, compared after [`normalize_name`].
/// None is on the credential list today; the list guards against a future addition (say a
/// substring rule) mangling them, and documents what must survive byte for byte.
pub const BODY_SAFE_NAMES: &[&str] = &[
    // request limits and sampling
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "max_new_tokens",
    "max_tokens_to_sample",
    "maxOutputTokens",
    "num_predict",
    "num_ctx",
    "top_logprobs",
    "logprobs",
    "logit_bias",
    "stop_sequences",
    "budget_tokens",
    "thinking_budget",
    "token_budget",
    // usage
    "tokens",
    "token_count",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "prompt_tokens",
    "completion_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_tokens",
    "cached_tokens",
    "audio_tokens",
    "text_tokens",
    "image_tokens",
    "accepted_prediction_tokens",
    "rejected_prediction_tokens",
    "input_tokens_details",
    "output_tokens_details",
    "prompt_tokens_details",
    "completion_tokens_details",
    "promptTokenCount",
    "candidatesTokenCount",
    "totalTokenCount",
    "thoughtsTokenCount",
    "cachedContentTokenCount",
    "eval_count",
    "prompt_eval_count",
    // opaque values that must replay byte for byte (thinking signatures, encrypted reasoning)
    "signature",
    "thoughtSignature",
    "encrypted_content",
];

/// Subtrees whose member names are model output (token strings in legacy `top_logprobs`, token
/// ids in `logit_bias`) or where `token` means a model token: name rules do not apply inside;
/// shape rules still do.
const NAME_EXEMPT_SUBTREES: &[&str] = &["logprobs", "toplogprobs", "logitbias"];

/// Lowercase with `-` and `_` removed, so `API_KEY`, `api-key` and `apiKey` compare equal.
pub fn normalize_name(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

fn normalized_set(list: &[&str]) -> HashSet<String> {
    list.iter().map(|n| normalize_name(n)).collect()
}

static BODY_CREDENTIALS: LazyLock<HashSet<String>> =
    LazyLock::new(|| normalized_set(BODY_CREDENTIAL_NAMES));
static BODY_SAFE: LazyLock<HashSet<String>> = LazyLock::new(|| normalized_set(BODY_SAFE_NAMES));
static QUERY_CREDENTIALS: LazyLock<HashSet<String>> =
    LazyLock::new(|| normalized_set(QUERY_CREDENTIAL_NAMES));

fn is_body_credential_name(name: &str) -> bool {
    let n = normalize_name(name);
    BODY_CREDENTIALS.contains(&n) && !BODY_SAFE.contains(&n)
}

fn is_query_credential_name(raw_name: &str) -> bool {
    // Decoded for comparison only; stored bytes are never re-encoded.
    QUERY_CREDENTIALS.contains(&normalize_name(&cassette_keying::form_decode(raw_name)))
}

// ---------------------------------------------------------------------------------------------
// JSON paths
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Child(String),
    Index(usize),
    Wildcard,
    Descendant(String),
}

fn parse_path(path: &str) -> Result<Vec<Segment>, String> {
    let mut rest = path.trim().strip_prefix('$').ok_or("must start with `$`")?;
    let mut segments = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("..") {
            let (name, tail) = take_name(after);
            if name.is_empty() {
                return Err("`..` must be followed by a member name".into());
            }
            if name == "*" {
                return Err("`..*` is not supported; name the member: `..name`".into());
            }
            segments.push(Segment::Descendant(name.to_owned()));
            rest = tail;
        } else if let Some(after) = rest.strip_prefix('.') {
            let (name, tail) = take_name(after);
            match name {
                "" => return Err("`.` must be followed by a member name or `*`".into()),
                "*" => segments.push(Segment::Wildcard),
                _ => segments.push(Segment::Child(name.to_owned())),
            }
            rest = tail;
        } else if let Some(after) = rest.strip_prefix('[') {
            let close = after.find(']').ok_or("unclosed `[`")?;
            let inner = after[..close].trim();
            rest = &after[close + 1..];
            if inner == "*" {
                segments.push(Segment::Wildcard);
            } else if let Some(quoted) = unquote(inner) {
                segments.push(Segment::Child(quoted.to_owned()));
            } else if let Ok(i) = inner.parse::<usize>() {
                segments.push(Segment::Index(i));
            } else {
                return Err(format!(
                    "`[{inner}]` is not an index, `*` or a quoted member name"
                ));
            }
        } else {
            return Err(format!(
                "unexpected `{}`; expected `.name`, `..name` or `[...]`",
                rest.chars().next().unwrap_or(' ')
            ));
        }
    }
    Ok(segments)
}

fn take_name(s: &str) -> (&str, &str) {
    let end = s.find(['.', '[']).unwrap_or(s.len());
    s.split_at(end)
}

fn unquote(s: &str) -> Option<&str> {
    ["'", "\""].iter().find_map(|q| {
        s.strip_prefix(q)
            .and_then(|r| r.strip_suffix(q))
            .filter(|_| s.len() >= 2)
    })
}

/// Replaces every value `segments` selects under `value`; returns whether anything matched.
fn apply_path(value: &mut Value, segments: &[Segment]) -> bool {
    let Some((first, rest)) = segments.split_first() else {
        *value = Value::String(REDACTED.to_owned());
        return true;
    };
    match first {
        Segment::Child(name) => match value {
            Value::Object(map) => map.get_mut(name).is_some_and(|c| apply_path(c, rest)),
            _ => false,
        },
        Segment::Index(i) => match value {
            Value::Array(items) => items.get_mut(*i).is_some_and(|c| apply_path(c, rest)),
            _ => false,
        },
        Segment::Wildcard => match value {
            Value::Object(map) => map
                .values_mut()
                .fold(false, |hit, c| apply_path(c, rest) | hit),
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |hit, c| apply_path(c, rest) | hit),
            _ => false,
        },
        Segment::Descendant(name) => {
            let mut hit = false;
            match value {
                Value::Object(map) => {
                    for (key, child) in map.iter_mut() {
                        if key == name {
                            hit |= apply_path(child, rest);
                        }
                        hit |= apply_path(child, segments);
                    }
                }
                Value::Array(items) => {
                    for child in items {
                        hit |= apply_path(child, segments);
                    }
                }
                _ => {}
            }
            hit
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The redactor
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct UserPattern {
    regex: Regex,
    has_group: bool,
}

/// Applies the built-in rules plus the user's [`RedactionRules`]. Cheap to clone (regexes are
/// reference-counted); `Send + Sync`, so one instance serves every request.
#[derive(Debug, Clone)]
pub struct Redactor {
    json_paths: Vec<(String, Vec<Segment>)>,
    patterns: Vec<UserPattern>,
}

impl Default for Redactor {
    /// The built-in rules only.
    fn default() -> Self {
        Redactor {
            json_paths: Vec::new(),
            patterns: Vec::new(),
        }
    }
}

impl Redactor {
    /// Compiles the user's rules; an invalid regex or JSON path is an error naming it.
    pub fn new(rules: &RedactionRules) -> Result<Redactor, RedactError> {
        let mut json_paths = Vec::with_capacity(rules.json_paths.len());
        for path in &rules.json_paths {
            let segments = parse_path(path).map_err(|reason| RedactError::InvalidJsonPath {
                path: path.clone(),
                reason,
            })?;
            json_paths.push((path.clone(), segments));
        }
        let mut patterns = Vec::with_capacity(rules.patterns.len());
        for pattern in &rules.patterns {
            let invalid = |reason: String| RedactError::InvalidPattern {
                pattern: pattern.clone(),
                reason,
            };
            let regex = Regex::new(pattern).map_err(|e| invalid(e.to_string()))?;
            // A pattern that matches nothing-at-all would stamp [REDACTED] between every
            // character of every stored string.
            if regex.is_match("") {
                return Err(invalid("it matches the empty string".into()));
            }
            let has_group = regex.capture_names().any(|n| n == Some(SECRET_GROUP));
            patterns.push(UserPattern { regex, has_group });
        }
        Ok(Redactor {
            json_paths,
            patterns,
        })
    }

    /// Request headers kept on disk: only [`REQUEST_HEADER_ALLOW_LIST`] (names compared
    /// case-insensitively and lowercased in the output), in their original order; values still
    /// pass the shape and user rules.
    pub fn request_headers(&self, headers: &[(String, String)]) -> Vec<(String, String)> {
        headers
            .iter()
            .filter_map(|(name, value)| {
                let lower = name.trim().to_ascii_lowercase();
                REQUEST_HEADER_ALLOW_LIST
                    .contains(&lower.as_str())
                    .then(|| (lower, self.text(value)))
            })
            .collect()
    }

    /// Response headers kept on disk: all but [`RESPONSE_HEADER_DENY_LIST`], `proxy-*`, the
    /// headers a `connection` header names as hop-by-hop, and any name that is itself a
    /// credential name (`x-foo-api-key` is not, `api_key` is); credential-shaped substrings of the
    /// remaining values are replaced. Names are lowercased.
    pub fn response_headers(&self, headers: &[(String, String)]) -> Vec<(String, String)> {
        let connection_named: Vec<String> = headers
            .iter()
            .filter(|(n, _)| n.trim().eq_ignore_ascii_case("connection"))
            .flat_map(|(_, v)| v.split(','))
            .map(|t| t.trim().to_ascii_lowercase())
            .filter(|t| !t.is_empty())
            .collect();
        headers
            .iter()
            .filter_map(|(name, value)| {
                let lower = name.trim().to_ascii_lowercase();
                let denied = RESPONSE_HEADER_DENY_LIST.contains(&lower.as_str())
                    || lower.starts_with("proxy-")
                    || connection_named.contains(&lower)
                    || is_body_credential_name(&lower)
                    || is_query_credential_name(&lower);
                (!denied).then(|| (lower, self.text(value)))
            })
            .collect()
    }

    /// The query string (with or without its leading `?`) without credential parameters
    /// ([`QUERY_CREDENTIAL_NAMES`], case-insensitive, percent-decoded names); the other
    /// parameters are kept byte for byte and in order, except credential-shaped values.
    pub fn query(&self, query: &str) -> String {
        let (prefix, body) = match query.strip_prefix('?') {
            Some(b) => ("?", b),
            None => ("", query),
        };
        let kept: Vec<&str> = body
            .split('&')
            .filter(|part| {
                let name = part.split_once('=').map_or(*part, |(n, _)| n);
                !is_query_credential_name(name)
            })
            .collect();
        let joined = kept.join("&");
        if joined.is_empty() {
            return String::new();
        }
        format!("{prefix}{}", self.text(&joined))
    }

    /// A URL (an upstream base, a request URL) without userinfo and without credential query
    /// parameters, in the query and in the fragment. Everything else is kept as written: the URL
    /// is not re-serialized, so `https://host` does not grow a trailing `/`.
    pub fn url(&self, url: &str) -> String {
        let (before_fragment, fragment) = match url.split_once('#') {
            Some((b, f)) => (b, Some(f)),
            None => (url, None),
        };
        let (before_query, query) = match before_fragment.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (before_fragment, None),
        };
        let mut out = String::with_capacity(url.len());
        match before_query.split_once("://") {
            Some((scheme, rest)) => {
                let authority_end = rest.find('/').unwrap_or(rest.len());
                let (authority, path) = rest.split_at(authority_end);
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                out.push_str(scheme);
                out.push_str("://");
                out.push_str(host);
                out.push_str(path);
            }
            None => out.push_str(before_query),
        }
        let mut out = self.text(&out);
        if let Some(q) = query {
            let q = self.query(q);
            if !q.is_empty() {
                out.push('?');
                out.push_str(&q);
            }
        }
        if let Some(f) = fragment {
            // OAuth implicit flows put `access_token=` in fragments.
            let f = self.query(f);
            if !f.is_empty() {
                out.push('#');
                out.push_str(&f);
            }
        }
        out
    }

    /// Redacts a JSON body in place: user JSON paths, then credential-named members, then
    /// credential shapes and user patterns in every string (values and member names).
    ///
    /// A member named like a credential ([`BODY_CREDENTIAL_NAMES`], not on
    /// [`BODY_SAFE_NAMES`], not under `logprobs`, `top_logprobs` or `logit_bias`) loses a string
    /// or number value; an array value has its scalars redacted the same way; an object value is
    /// walked like any other (a tool's JSON schema may well have a `password` property), and
    /// empty strings, `null` and booleans are kept as they carry no secret.
    pub fn json(&self, value: &mut Value) {
        self.json_changed(value);
    }

    /// Like [`Redactor::json`], and says whether anything was changed (for example to flag a
    /// request whose key cannot be recomputed from what was stored).
    pub fn json_changed(&self, value: &mut Value) -> bool {
        let mut changed = false;
        for (_, segments) in &self.json_paths {
            changed |= apply_path(value, segments);
        }
        changed | self.walk(value, false)
    }

    /// A text (non-JSON) body with credential shapes and user patterns replaced.
    pub fn text(&self, text: &str) -> String {
        self.scrub(text).into_owned()
    }

    fn walk(&self, value: &mut Value, names_exempt: bool) -> bool {
        match value {
            Value::String(s) => self.scrub_in_place(s),
            Value::Array(items) => items.iter_mut().fold(false, |changed, item| {
                self.walk(item, names_exempt) | changed
            }),
            Value::Object(map) => {
                let mut changed = false;
                for (name, child) in map.iter_mut() {
                    if !names_exempt && is_body_credential_name(name) {
                        changed |= self.redact_credential_value(child);
                    } else {
                        let exempt =
                            names_exempt || NAME_EXEMPT_SUBTREES.contains(&&*normalize_name(name));
                        changed |= self.walk(child, exempt);
                    }
                }
                changed | self.scrub_member_names(map)
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => false,
        }
    }

    fn redact_credential_value(&self, value: &mut Value) -> bool {
        match value {
            Value::String(s) if s.is_empty() => false,
            Value::String(_) | Value::Number(_) => {
                *value = Value::String(REDACTED.to_owned());
                true
            }
            Value::Array(items) => items.iter_mut().fold(false, |changed, item| {
                self.redact_credential_value(item) | changed
            }),
            Value::Object(_) => self.walk(value, false),
            Value::Null | Value::Bool(_) => false,
        }
    }

    /// A secret used as a member name (a map keyed by API key) is renamed. Rare, so the map is
    /// only rebuilt when some name actually changes.
    fn scrub_member_names(&self, map: &mut Map<String, Value>) -> bool {
        if !map.keys().any(|k| matches!(self.scrub(k), Cow::Owned(_))) {
            return false;
        }
        let old = std::mem::take(map);
        for (name, child) in old {
            map.insert(self.scrub(&name).into_owned(), child);
        }
        true
    }

    fn scrub_in_place(&self, s: &mut String) -> bool {
        match self.scrub(s) {
            Cow::Borrowed(_) => false,
            Cow::Owned(new) => {
                *s = new;
                true
            }
        }
    }

    /// Shapes then user patterns; `Cow::Borrowed` means nothing matched.
    fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = redact_shapes(text);
        for pattern in &self.patterns {
            if let Cow::Owned(new) =
                replace_matches(&pattern.regex, pattern.has_group, &out, |_| true)
            {
                out = Cow::Owned(new);
            }
        }
        out
    }
}

fn redact_shapes(text: &str) -> Cow<'_, str> {
    let Some(shapes) = SHAPES_COMPILED.as_ref() else {
        return Cow::Borrowed(text);
    };
    // One pass over the text decides which shapes can match at all; most strings match none.
    let hits = shapes.set.matches(text);
    if !hits.matched_any() {
        return Cow::Borrowed(text);
    }
    let mut out = Cow::Borrowed(text);
    for i in hits.iter() {
        let (Some(def), Some(regex)) = (SHAPES.get(i), shapes.regexes.get(i)) else {
            continue;
        };
        if let Cow::Owned(new) = replace_matches(regex, true, &out, def.check) {
            out = Cow::Owned(new);
        }
    }
    out
}

/// Replaces each match (or its `redact` group) accepted by `check`; `Cow::Borrowed` when none
/// was replaced. Empty matches are skipped so no pattern can sprinkle markers between letters.
fn replace_matches<'a>(
    regex: &Regex,
    grouped: bool,
    text: &'a str,
    check: impl Fn(&str) -> bool,
) -> Cow<'a, str> {
    let mut out = String::new();
    let mut last = 0;
    for caps in regex.captures_iter(text) {
        let Some(m) = secret_range(&caps, grouped) else {
            continue;
        };
        if m.0 == m.1 || m.0 < last || !check(&text[m.0..m.1]) {
            continue;
        }
        out.push_str(&text[last..m.0]);
        out.push_str(REDACTED);
        last = m.1;
    }
    if last == 0 && out.is_empty() {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[last..]);
    Cow::Owned(out)
}

fn secret_range(caps: &Captures<'_>, grouped: bool) -> Option<(usize, usize)> {
    let m = if grouped {
        caps.name(SECRET_GROUP).or_else(|| caps.get(0))
    } else {
        caps.get(0)
    }?;
    Some((m.start(), m.end()))
}

/// For `cassette verify`: every credential-shaped match in stored bytes, by byte offset (the
/// shapes are ASCII, so the bytes are searched as they are; invalid UTF-8 is skipped over, not
/// converted). Overlapping matches are reported once, under the most specific shape. Text
/// already replaced with [`REDACTED`] never matches.
pub fn find_credentials(bytes: &[u8]) -> Vec<CredentialMatch> {
    let Some(shapes) = SHAPES_COMPILED.as_ref() else {
        return Vec::new();
    };
    let mut found: Vec<(usize, usize, usize, &'static str)> = Vec::new();
    for (i, (def, regex)) in SHAPES.iter().zip(&shapes.bytes).enumerate() {
        for caps in regex.captures_iter(bytes) {
            let Some(m) = caps.name(SECRET_GROUP).or_else(|| caps.get(0)) else {
                continue;
            };
            if m.start() == m.end() || !(def.check)(&String::from_utf8_lossy(m.as_bytes())) {
                continue;
            }
            found.push((m.start(), m.end(), i, def.name));
        }
    }
    found.sort_by_key(|&(start, end, priority, _)| (start, priority, std::cmp::Reverse(end)));
    let mut out: Vec<CredentialMatch> = Vec::new();
    let mut covered_to = 0;
    for (start, end, _, pattern) in found {
        if start < covered_to {
            continue;
        }
        covered_to = end;
        out.push(CredentialMatch {
            pattern,
            offset: start,
            len: end - start,
        });
    }
    out
}

/// The names of the built-in credential shapes, in priority order (for docs and `--help`).
pub fn credential_shape_names() -> impl Iterator<Item = &'static str> {
    SHAPES.iter().map(|s| s.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r() -> Redactor {
        Redactor::default()
    }

    fn hdrs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// Realistic examples of every built-in shape, by shape name.
    fn samples() -> Vec<(&'static str, String)> {
        vec![
            (
                "private_key",
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x9\n-----END RSA PRIVATE KEY-----"
                    .to_owned(),
            ),
            (
                "jwt",
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
                    .to_owned(),
            ),
            (
                "anthropic_api_key",
                "sk-ant-api03-Q9x2Lm7Vb4Kp1Zt8Rw3Yc6Hn0Js5Fd2Ga9Ue4Oi7_AA".to_owned(),
            ),
            (
                "openai_api_key",
                "sk-proj-7Fh2Kd9Lq3Wz8Xc1Vb6Nm4Tr0Yp5Ju2Ie8Ow3Aq".to_owned(),
            ),
            ("openai_api_key", format!("sk-{}", "aB3".repeat(16))),
            ("stripe_key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc".to_owned()),
            ("aws_access_key_id", "AKIAIOSFODNN7EXAMPLE".to_owned()),
            ("github_token", format!("ghp_{}", "a1B2c3D4e5F6".repeat(3))),
            (
                "github_token",
                format!("github_pat_11ABCDEFG0{}", "x9Y8z7W6_".repeat(4)),
            ),
            ("google_api_key", format!("AIza{}", "SyB1c2D3e4F".repeat(3) + "5g6")),
            ("slack_token", "xoxb-1234567890-0987654321-AbCdEfGh".to_owned()),
            ("huggingface_token", format!("hf_{}", "QwErTyUiOpAsDfGhJk".repeat(2))),
            ("groq_api_key", format!("gsk_{}", "Zx8Cv7Bn6M".repeat(5))),
            ("xai_api_key", format!("xai-{}", "Pq1Wo2Ei3R".repeat(5))),
        ]
    }

    #[test]
    fn compiled_shapes_are_valid() {
        for shape in SHAPES {
            assert!(Regex::new(shape.regex).is_ok(), "{}", shape.name);
            assert!(BytesRegex::new(shape.regex).is_ok(), "{}", shape.name);
        }
        assert!(SHAPES_COMPILED.is_some());
        let mut names: Vec<_> = credential_shape_names().collect();
        names.dedup();
        assert_eq!(names.len(), SHAPES.len());
    }

    #[test]
    fn safe_list_and_credential_list_are_disjoint() {
        for safe in BODY_SAFE_NAMES {
            assert!(
                !BODY_CREDENTIALS.contains(&normalize_name(safe)),
                "{safe} is on both lists"
            );
            assert!(!is_body_credential_name(safe), "{safe}");
        }
    }

    #[test]
    fn redactor_is_clone_send_sync() {
        fn check<T: Clone + Send + Sync + 'static>() {}
        check::<Redactor>();
    }

    #[test]
    fn normalize_ignores_case_and_separators() {
        assert_eq!(normalize_name("API_KEY"), "apikey");
        assert_eq!(normalize_name("x-api-key"), "xapikey");
        assert_eq!(normalize_name("clientSecret"), "clientsecret");
    }

    // ---- request headers ---------------------------------------------------------------

    #[test]
    fn request_headers_keep_only_the_allow_list_lowercased_in_order() {
        let input = hdrs(&[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer sk-proj-abc"),
            ("X-Api-Key", "sk-ant-secret"),
            ("api-key", "azure-secret"),
            ("Cookie", "session=abc"),
            ("User-Agent", "OpenAI/Python 1.40.0"),
            ("OpenAI-Organization", "org-123"),
            ("Accept", "text/event-stream"),
            ("anthropic-version", "2023-06-01"),
            ("ANTHROPIC-BETA", "prompt-caching-2024-07-31"),
            ("OpenAI-Beta", "assistants=v2"),
            ("x-goog-api-key", "AIza..."),
            ("Proxy-Authorization", "Basic dXNlcjpwYXNz"),
        ]);
        assert_eq!(
            r().request_headers(&input),
            hdrs(&[
                ("content-type", "application/json"),
                ("accept", "text/event-stream"),
                ("anthropic-version", "2023-06-01"),
                ("anthropic-beta", "prompt-caching-2024-07-31"),
                ("openai-beta", "assistants=v2"),
            ])
        );
    }

    #[test]
    fn request_header_values_still_pass_shape_rules() {
        let key = "sk-proj-7Fh2Kd9Lq3Wz8Xc1Vb6Nm4Tr0Yp5Ju2Ie8Ow3Aq";
        let out = r().request_headers(&hdrs(&[("accept", &format!("x/{key}"))]));
        assert_eq!(out, hdrs(&[("accept", "x/[REDACTED]")]));
    }

    // ---- response headers --------------------------------------------------------------

    #[test]
    fn response_headers_drop_each_denied_name() {
        for name in RESPONSE_HEADER_DENY_LIST.iter().copied().chain([
            "Proxy-Foo",
            "API_KEY",
            "X-API-KEY",
            "Access-Token",
            "Password",
        ]) {
            let out = r().response_headers(&hdrs(&[(name, "v"), ("x-request-id", "req_1")]));
            assert_eq!(out, hdrs(&[("x-request-id", "req_1")]), "{name}");
        }
    }

    #[test]
    fn response_headers_drop_connection_named_headers_and_keep_the_rest() {
        let input = hdrs(&[
            ("Connection", "keep-alive, X-Hop"),
            ("X-Hop", "1"),
            ("Content-Type", "application/json"),
            ("Content-Length", "123"),
            ("Content-Encoding", "gzip"),
            ("Transfer-Encoding", "chunked"),
            ("Set-Cookie", "__cf_bm=abc; path=/"),
            ("openai-processing-ms", "412"),
            ("anthropic-ratelimit-tokens-remaining", "39000"),
            ("x-ratelimit-remaining-tokens", "149000"),
            ("request-id", "req_011"),
        ]);
        assert_eq!(
            r().response_headers(&input),
            hdrs(&[
                ("content-type", "application/json"),
                ("openai-processing-ms", "412"),
                ("anthropic-ratelimit-tokens-remaining", "39000"),
                ("x-ratelimit-remaining-tokens", "149000"),
                ("request-id", "req_011"),
            ])
        );
    }

    #[test]
    fn response_header_values_lose_credential_shapes() {
        let out = r().response_headers(&hdrs(&[(
            "x-debug",
            "token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig_part-1",
        )]));
        assert_eq!(out, hdrs(&[("x-debug", "token=[REDACTED]")]));
    }

    // ---- query -------------------------------------------------------------------------

    #[test]
    fn query_removes_each_credential_name_in_any_spelling() {
        let red = r();
        for name in QUERY_CREDENTIAL_NAMES {
            for spelling in [name.to_string(), name.to_uppercase()] {
                let q = format!("alt=sse&{spelling}=s3cr3t&b=2");
                assert_eq!(red.query(&q), "alt=sse&b=2", "{spelling}");
            }
        }
        for spelling in [
            "api_key",
            "api-key",
            "Api-Key",
            "access_token",
            "X-Amz-Signature",
        ] {
            assert_eq!(red.query(&format!("{spelling}=s3cr3t")), "", "{spelling}");
        }
    }

    #[test]
    fn query_keeps_other_params_byte_for_byte_in_order() {
        let q = "z=1&a=%20x+y&flag&key=AIzaSecret&empty=&d==&api%5Fkey=s3cr3t&a=2";
        assert_eq!(r().query(q), "z=1&a=%20x+y&flag&empty=&d==&a=2");
        assert_eq!(r().query("?key=x&alt=sse"), "?alt=sse");
        assert_eq!(r().query(""), "");
        assert_eq!(r().query("key=only"), "");
        // `keyword` and `max_tokens` are not credential names.
        assert_eq!(
            r().query("keyword=a&max_tokens=5&tokens=3"),
            "keyword=a&max_tokens=5&tokens=3"
        );
    }

    #[test]
    fn query_values_lose_credential_shapes() {
        assert_eq!(
            r().query("state=AKIAIOSFODNN7EXAMPLE&x=1"),
            "state=[REDACTED]&x=1"
        );
    }

    // ---- url ---------------------------------------------------------------------------

    #[test]
    fn url_drops_userinfo_and_credential_params_without_reformatting() {
        let red = r();
        assert_eq!(red.url("https://api.openai.com"), "https://api.openai.com");
        assert_eq!(
            red.url(
                "https://user:p4ss@proxy.example.com:8443/v1?key=abc&alt=sse#access_token=x&s=1"
            ),
            "https://proxy.example.com:8443/v1?alt=sse#s=1"
        );
        assert_eq!(
            red.url("https://generativelanguage.googleapis.com/v1beta/models?key=AIzaX"),
            "https://generativelanguage.googleapis.com/v1beta/models"
        );
        assert_eq!(
            red.url("http://token@127.0.0.1:11434"),
            "http://127.0.0.1:11434"
        );
        assert_eq!(red.url("/v1/chat?api_key=x"), "/v1/chat");
        // An `@` in the path is not userinfo.
        assert_eq!(
            red.url("https://h.example/users/@me"),
            "https://h.example/users/@me"
        );
    }

    // ---- body names --------------------------------------------------------------------

    #[test]
    fn json_redacts_each_credential_name_in_any_spelling() {
        let red = r();
        for name in BODY_CREDENTIAL_NAMES {
            for spelling in [name.to_string(), name.to_uppercase()] {
                let mut v = json!({"outer": {spelling.clone(): "hunter2", "model": "gpt-4o"}});
                red.json(&mut v);
                assert_eq!(
                    v,
                    json!({"outer": {spelling.clone(): REDACTED, "model": "gpt-4o"}}),
                    "{spelling}"
                );
            }
        }
        for spelling in [
            "api_key",
            "api-key",
            "apiKey",
            "X-Api-Key",
            "client_secret",
            "accessToken",
            "refresh_token",
            "id_token",
            "auth_token",
            "private_key",
            "session_token",
            "aws_secret_access_key",
        ] {
            let mut v = json!([{spelling: 123456}]);
            red.json(&mut v);
            assert_eq!(v, json!([{spelling: REDACTED}]), "{spelling}");
        }
    }

    #[test]
    fn json_credential_name_rules_by_value_type() {
        let mut v = json!({
            "password": "",
            "token": null,
            "secret": true,
            "api_key": ["k1", 2, {"note": "n"}],
            "credentials": {"client_secret": "cs", "region": "us-east-1"},
            "tools": [{"type": "function", "function": {"name": "login", "parameters": {
                "type": "object",
                "properties": {"password": {"type": "string", "description": "the password"}},
                "required": ["password"]
            }}}]
        });
        red_json(&mut v);
        assert_eq!(
            v,
            json!({
                "password": "",
                "token": null,
                "secret": true,
                "api_key": [REDACTED, REDACTED, {"note": "n"}],
                "credentials": {"client_secret": REDACTED, "region": "us-east-1"},
                "tools": [{"type": "function", "function": {"name": "login", "parameters": {
                    "type": "object",
                    "properties": {"password": {"type": "string", "description": "the password"}},
                    "required": ["password"]
                }}}]
            })
        );
    }

    fn red_json(v: &mut Value) {
        r().json(v)
    }

    #[test]
    fn safe_list_survives_with_integer_values() {
        let mut obj = Map::new();
        for (i, name) in BODY_SAFE_NAMES.iter().enumerate() {
            obj.insert((*name).to_owned(), json!(i));
        }
        obj.insert("token_budget".into(), json!(4096));
        obj.insert("tokenizer".into(), json!("cl100k"));
        obj.insert("max_tokens_per_chunk".into(), json!(7));
        let mut v = Value::Object(obj);
        let before = v.clone();
        assert!(!r().json_changed(&mut v));
        assert_eq!(v, before);
    }

    #[test]
    fn logprobs_subtrees_keep_token_members() {
        let mut v = json!({
            "choices": [{"logprobs": {"content": [{
                "token": "Hello", "logprob": -0.01, "bytes": [72],
                "top_logprobs": [{"token": "Hello", "logprob": -0.01}]
            }]}}],
            "legacy": {"logprobs": {"tokens": ["password"], "top_logprobs": [{"password": -0.2, "secret": -1.5}]}},
            "logit_bias": {"50256": -100},
            "token": "opaque-session-value"
        });
        let mut expected = v.clone();
        expected["token"] = json!(REDACTED);
        red_json(&mut v);
        assert_eq!(v, expected);
    }

    // ---- body values: shapes -----------------------------------------------------------

    #[test]
    fn each_shape_is_redacted_in_context() {
        let red = r();
        for (name, secret) in samples() {
            let text = format!("before {secret} after");
            assert_eq!(red.text(&text), "before [REDACTED] after", "{name}");
            let mut v = json!({"messages": [{"content": [{"text": text}]}]});
            red.json(&mut v);
            assert_eq!(
                v["messages"][0]["content"][0]["text"], "before [REDACTED] after",
                "{name}"
            );
            let found = find_credentials(format!("xx {secret} yy").as_bytes());
            assert_eq!(
                found,
                vec![CredentialMatch {
                    pattern: name,
                    offset: 3,
                    len: secret.len()
                }],
                "{name}"
            );
        }
    }

    #[test]
    fn bearer_keeps_its_scheme_and_needs_a_token() {
        let red = r();
        assert_eq!(
            red.text("Authorization: Bearer 8f3a9c2e1b7d4f60a5e2c9b1"),
            "Authorization: Bearer [REDACTED]"
        );
        assert_eq!(
            red.text("bearer abcDEFghiJKLmnoPQRstuVWXyz"),
            "bearer [REDACTED]"
        );
        for prose in [
            "Bearer of bad news",
            "The Bearer tokens section of RFC 6750",
            "a bearer authentication-mechanism-overview",
            "Bearer [REDACTED]",
        ] {
            assert_eq!(red.text(prose), prose);
        }
    }

    #[test]
    fn look_alikes_are_not_mangled() {
        let red = r();
        for text in [
            "skeleton",
            "task-list",
            "risk-assessment-framework-for-banks",
            "ask-me-anything-about-the-universe",
            "sk-learn-compatible-estimator-library",
            "sk-short",
            "disk-0123456789abcdefghijklmnop",
            "AKIA is a prefix",
            "eyJhbGciOiJIUzI1NiJ9 alone is just base64 JSON",
            "the ghp_ prefix",
            "max_tokens=1024 tokens=12 token_budget=7",
            "model: claude-3-5-sonnet-20241022, id: msg_01XFDUDYJgAACzvnptvVoYEL",
            "chatcmpl-9pWz2Xf8hYqL3mN7vKj5tR1sD0aB, call_Ab12Cd34Ef56Gh78",
        ] {
            assert_eq!(red.text(text), text);
            assert!(find_credentials(text.as_bytes()).is_empty(), "{text}");
        }
    }

    // ---- member names ------------------------------------------------------------------

    #[test]
    fn secrets_used_as_member_names_are_renamed() {
        let mut v = json!({"keys": {"AKIAIOSFODNN7EXAMPLE": {"owner": "ci"}, "other": 1}});
        assert!(r().json_changed(&mut v));
        assert_eq!(
            v,
            json!({"keys": {"[REDACTED]": {"owner": "ci"}, "other": 1}})
        );
    }

    // ---- user json paths ---------------------------------------------------------------

    fn with_paths(paths: &[&str]) -> Redactor {
        let rules = RedactionRules {
            json_paths: paths.iter().map(|p| p.to_string()).collect(),
            patterns: vec![],
        };
        match Redactor::new(&rules) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn user_json_paths() {
        let body = json!({
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "hi"}]}
            ],
            "metadata": {"email": "ada@example.com", "plan": "pro", "a.b": 1},
            "nested": [{"deep": {"email": "bob@example.com"}}]
        });
        let cases: Vec<(&str, Value)> = vec![
            (
                "$.messages[*].content",
                json!([
                    {"role": "system", "content": REDACTED},
                    {"role": "user", "content": REDACTED}
                ]),
            ),
            (
                "$.messages[1].content[0].text",
                json!([
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": [{"type": "text", "text": REDACTED}]}
                ]),
            ),
        ];
        for (path, messages) in cases {
            let mut v = body.clone();
            with_paths(&[path]).json(&mut v);
            assert_eq!(v["messages"], messages, "{path}");
            assert_eq!(v["metadata"], body["metadata"], "{path}");
        }

        let mut v = body.clone();
        with_paths(&["$..email"]).json(&mut v);
        assert_eq!(v["metadata"]["email"], REDACTED);
        assert_eq!(v["nested"][0]["deep"]["email"], REDACTED);
        assert_eq!(v["metadata"]["plan"], "pro");

        let mut v = body.clone();
        with_paths(&[
            "$.metadata.email",
            "$['metadata']['a.b']",
            "$.nope.x",
            "$.messages[9]",
        ])
        .json(&mut v);
        assert_eq!(
            v["metadata"],
            json!({"email": REDACTED, "plan": "pro", "a.b": REDACTED})
        );
        assert_eq!(v["messages"], body["messages"]);

        let mut v = body.clone();
        with_paths(&["$.metadata.*"]).json(&mut v);
        assert_eq!(
            v["metadata"],
            json!({"email": REDACTED, "plan": REDACTED, "a.b": REDACTED})
        );

        let mut v = body.clone();
        with_paths(&["$"]).json(&mut v);
        assert_eq!(v, json!(REDACTED));
    }

    #[test]
    fn invalid_json_paths_are_named() {
        for path in ["messages", "$.", "$[", "$[abc]", "$..*", "$..", "$x"] {
            let rules = RedactionRules {
                json_paths: vec![path.to_owned()],
                patterns: vec![],
            };
            match Redactor::new(&rules) {
                Err(e @ RedactError::InvalidJsonPath { .. }) => {
                    assert!(e.to_string().contains(&format!("`{path}`")), "{e}")
                }
                other => panic!("{path}: {other:?}"),
            }
        }
    }

    // ---- user patterns -----------------------------------------------------------------

    #[test]
    fn user_patterns_replace_matches_or_their_redact_group() {
        let rules = RedactionRules {
            json_paths: vec![],
            patterns: vec![
                r"[\w.+-]+@[\w-]+\.[\w.]+".to_owned(),
                r"customer (?P<redact>C-\d+)".to_owned(),
            ],
        };
        let red = match Redactor::new(&rules) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(
            red.text("mail ada@example.com about customer C-42."),
            "mail [REDACTED] about customer [REDACTED]."
        );
        let mut v = json!({"messages": [{"content": "I am customer C-7"}], "max_tokens": 5});
        red.json(&mut v);
        assert_eq!(
            v,
            json!({"messages": [{"content": "I am customer [REDACTED]"}], "max_tokens": 5})
        );
        assert_eq!(
            red.query("email=ada@example.com&x=1"),
            "email=[REDACTED]&x=1"
        );
    }

    #[test]
    fn invalid_user_patterns_are_named() {
        for pattern in ["(unclosed", "a{2,1}", "x*"] {
            let rules = RedactionRules {
                json_paths: vec![],
                patterns: vec![pattern.to_owned()],
            };
            match Redactor::new(&rules) {
                Err(e @ RedactError::InvalidPattern { .. }) => {
                    let msg = e.to_string();
                    assert!(msg.contains(&format!("`{pattern}`")), "{msg}");
                }
                other => panic!("{pattern}: {other:?}"),
            }
        }
    }

    // ---- audit -------------------------------------------------------------------------

    #[test]
    fn find_credentials_reports_byte_offsets_once_per_secret() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N";
        let mut bytes = vec![0xff, 0xfe, b' '];
        bytes.extend_from_slice(format!("Bearer {jwt} ").as_bytes());
        bytes.extend_from_slice("é sk-ant-api03-Q9x2Lm7Vb4Kp1Zt8Rw3Yc6Hn0Js5Fd2G".as_bytes());
        let found = find_credentials(&bytes);
        assert_eq!(
            found,
            vec![
                CredentialMatch {
                    pattern: "jwt",
                    offset: 10,
                    len: jwt.len()
                },
                CredentialMatch {
                    pattern: "anthropic_api_key",
                    offset: 10 + jwt.len() + 1 + 3,
                    len: 45
                },
            ]
        );
        let redacted = r().text(&String::from_utf8_lossy(&bytes));
        assert!(find_credentials(redacted.as_bytes()).is_empty());
    }

    #[test]
    fn json_changed_reports_whether_anything_changed() {
        let mut clean = json!({"model": "m", "max_tokens": 10});
        assert!(!r().json_changed(&mut clean));
        let mut dirty = json!({"model": "m", "api_key": "k"});
        assert!(r().json_changed(&mut dirty));
    }
}
