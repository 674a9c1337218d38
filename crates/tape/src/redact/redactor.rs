//! The redactor: applies the built-in rules and the user's rules to what is about to be stored.

use super::json_path::redact_path;
use super::names::{
    is_body_credential_name, is_query_credential_name, is_stored_response_header, normalize_name,
    NAME_EXEMPT_SUBTREES, REQUEST_HEADER_ALLOW_LIST, URL_VALUED_HEADERS,
};
use super::shapes::{match_ranges, redact_shapes, replace_matches, shape_ranges};
use super::{RedactionRules, REDACTED, SECRET_GROUP};
use crate::Error;
use cassette_keying::JsonPath;
use regex::Regex;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::ops::Range;

/// Members of an object held under a credential name that are the credential itself.
const CREDENTIAL_WRAPPER_MEMBERS: &[&str] = &["value", "key"];

#[derive(Debug, Clone)]
struct UserPattern {
    regex: Regex,
    has_group: bool,
}

/// Applies the built-in rules plus the user's [`RedactionRules`]. Cheap to clone (regexes are
/// reference-counted); `Send + Sync`, so one instance serves every request.
#[derive(Debug, Clone)]
pub struct Redactor {
    json_paths: Vec<JsonPath>,
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

/// Secrets shorter than this are not redacted as literal text: a short word would mangle every
/// stored answer that holds it, and is no secret anyway.
pub const MIN_REDACTED_SECRET: usize = 8;

/// A secret replaced as literal text wherever it would be stored or shown (an API key an
/// upstream echoes in an error answer), with whose it is, for errors.
#[derive(Clone, Copy)]
pub struct Secret<'a> {
    /// Whose it is (a route's name), named in errors instead of the value.
    pub name: &'a str,
    /// The secret itself.
    pub value: &'a str,
}

impl std::fmt::Debug for Secret<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Redactor {
    /// The user's rules, plus every secret of at least [`MIN_REDACTED_SECRET`] bytes (trimmed)
    /// replaced as literal text: the one way the recorder and a review build theirs. The user's
    /// rules are checked first (their error quotes the rule); a secret that cannot become a rule
    /// is an error naming whose it is, never quoting it.
    pub fn with_secrets(rules: &RedactionRules, secrets: &[Secret<'_>]) -> Result<Redactor, Error> {
        let kept: Vec<&Secret<'_>> = secrets
            .iter()
            .filter(|s| s.value.trim().len() >= MIN_REDACTED_SECRET)
            .collect();
        if kept.is_empty() {
            return Redactor::new(rules);
        }
        let mut all = rules.clone();
        all.patterns
            .extend(kept.iter().map(|s| regex::escape(s.value.trim())));
        Redactor::new(&all).or_else(|_| {
            // The error would quote the pattern, which may be a secret: the user's own rule is
            // named if it is the one at fault, else whose secret it is.
            Redactor::new(rules)?;
            let mut names: Vec<&str> = kept.iter().map(|s| s.name).collect();
            names.dedup();
            Err(Error::UnusableSecret {
                names: names.join(", "),
            })
        })
    }

    /// Compiles the user's rules; an invalid regex or JSON path is an error naming it.
    pub fn new(rules: &RedactionRules) -> Result<Redactor, Error> {
        let mut json_paths = Vec::with_capacity(rules.json_paths.len());
        for path in &rules.json_paths {
            let parsed = JsonPath::parse(path).map_err(|e| Error::InvalidJsonPath {
                path: path.clone(),
                reason: e.reason,
            })?;
            json_paths.push(parsed);
        }
        let mut patterns = Vec::with_capacity(rules.patterns.len());
        for pattern in &rules.patterns {
            let invalid = |reason: String| Error::InvalidPattern {
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

    /// Response headers kept on disk: only
    /// [`RESPONSE_HEADER_ALLOW_LIST`](super::RESPONSE_HEADER_ALLOW_LIST) and the rate-limit
    /// families of [`RESPONSE_HEADER_ALLOW_PREFIXES`](super::RESPONSE_HEADER_ALLOW_PREFIXES)
    /// (names compared case-insensitively and lowercased), in their original order. URL values
    /// (`location`) lose userinfo and credential parameters; every value still passes the shape
    /// and user rules.
    pub fn response_headers(&self, headers: &[(String, String)]) -> Vec<(String, String)> {
        headers
            .iter()
            .filter_map(|(name, value)| {
                let lower = name.trim().to_ascii_lowercase();
                if !is_stored_response_header(&lower) {
                    return None;
                }
                let value = if URL_VALUED_HEADERS.contains(&lower.as_str()) {
                    self.url(value)
                } else {
                    self.text(value)
                };
                Some((lower, value))
            })
            .collect()
    }

    /// The query string (with or without its leading `?`) without credential parameters
    /// ([`QUERY_CREDENTIAL_NAMES`](super::QUERY_CREDENTIAL_NAMES), case-insensitive,
    /// percent-decoded names); the other parameters are kept byte for byte and in order, except
    /// credential-shaped values.
    pub fn query(&self, query: &str) -> String {
        let (prefix, body) = match query.strip_prefix('?') {
            Some(b) => ("?", b),
            None => ("", query),
        };
        let kept: Vec<Cow<'_, str>> = body
            .split('&')
            .filter(|part| {
                let name = part.split_once('=').map_or(*part, |(n, _)| n);
                !is_query_credential_name(name)
            })
            .map(|part| self.encoded_pair(part))
            .collect();
        let joined = kept.join("&");
        if joined.is_empty() {
            return String::new();
        }
        format!("{prefix}{}", self.text(&joined))
    }

    /// One `name=value` pair of a query or form body, with its value replaced by [`REDACTED`]
    /// when only its form-decoded text shows a secret (`sk%2Dproj%2D...`); shapes visible in the
    /// raw bytes are left to the caller's scan, which keeps the rest of the value.
    pub(super) fn encoded_pair<'a>(&self, pair: &'a str) -> Cow<'a, str> {
        let Some((name, value)) = pair.split_once('=') else {
            return Cow::Borrowed(pair);
        };
        if !value.contains(['%', '+']) || matches!(self.scrub(value), Cow::Owned(_)) {
            return Cow::Borrowed(pair);
        }
        let decoded = cassette_keying::form_decode(value);
        match self.scrub(&decoded) {
            Cow::Borrowed(_) => Cow::Borrowed(pair),
            Cow::Owned(_) => Cow::Owned(format!("{name}={REDACTED}")),
        }
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
    /// A member named like a credential
    /// ([`BODY_CREDENTIAL_NAMES`](super::BODY_CREDENTIAL_NAMES), not on
    /// [`BODY_SAFE_NAMES`](super::BODY_SAFE_NAMES), not under `logprobs`, `top_logprobs` or
    /// `logit_bias`) loses a string or number value; an array value has its scalars redacted the same way; an object value is
    /// walked like any other (a tool's JSON schema may well have a `password` property), and
    /// empty strings, `null` and booleans are kept as they carry no secret.
    pub fn json(&self, value: &mut Value) {
        self.json_changed(value);
    }

    /// Like [`Redactor::json`], and says whether anything was changed (for example to flag a
    /// request whose key cannot be recomputed from what was stored).
    pub fn json_changed(&self, value: &mut Value) -> bool {
        let mut changed = false;
        for path in &self.json_paths {
            changed |= redact_path(value, path);
        }
        changed | self.walk(value, false)
    }

    /// A text (non-JSON) body with credential shapes and user patterns replaced.
    pub fn text(&self, text: &str) -> String {
        self.scrub(text).into_owned()
    }

    fn walk(&self, value: &mut Value, names_exempt: bool) -> bool {
        match value {
            Value::String(s) => self.nested_json(s, names_exempt) | self.scrub_in_place(s),
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
            Value::String(s) if s.is_empty() || s == REDACTED => false,
            Value::String(_) | Value::Number(_) => {
                *value = Value::String(REDACTED.to_owned());
                true
            }
            Value::Array(items) => items.iter_mut().fold(false, |changed, item| {
                self.redact_credential_value(item) | changed
            }),
            Value::Object(map) => {
                // A credential wrapped in an object: the Realtime API's
                // `client_secret: {"value": "ek_...", "expires_at": ...}`. Only the wrapper's
                // `value` or `key` goes; a JSON schema's `password: {"type": "string"}` keeps
                // its description.
                let mut changed = false;
                for (name, child) in map.iter_mut() {
                    if CREDENTIAL_WRAPPER_MEMBERS.contains(&&*normalize_name(name))
                        && matches!(child, Value::String(_) | Value::Number(_))
                    {
                        changed |= self.redact_credential_value(child);
                    }
                }
                changed | self.walk(value, false)
            }
            Value::Null | Value::Bool(_) => false,
        }
    }

    /// A string holding a JSON object or array (tool-call `arguments`, an event's `data`, a
    /// tool result) gets the name rules too: parsed, walked, and written back compactly only
    /// when something in it changed, so an untouched string keeps every byte.
    fn nested_json(&self, s: &mut String, names_exempt: bool) -> bool {
        let trimmed = s.trim();
        let framed = (trimmed.starts_with('{') && trimmed.ends_with('}'))
            || (trimmed.starts_with('[') && trimmed.ends_with(']'));
        if !framed {
            return false;
        }
        let Ok(mut nested) = serde_json::from_str::<Value>(trimmed) else {
            return false;
        };
        if !self.walk(&mut nested, names_exempt) {
            return false;
        }
        match serde_json::to_string(&nested) {
            Ok(text) => {
                *s = text;
                true
            }
            Err(_) => false,
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

    /// The byte ranges in `text` that [`Redactor::text`] would replace (shapes and user
    /// patterns), in no particular order; they may overlap.
    pub(super) fn secret_ranges(&self, text: &str) -> Vec<Range<usize>> {
        let mut out = shape_ranges(text);
        for pattern in &self.patterns {
            out.extend(match_ranges(
                &pattern.regex,
                pattern.has_group,
                text,
                |_| true,
            ));
        }
        out
    }

    /// Shapes then user patterns; `Cow::Borrowed` means nothing matched.
    pub(super) fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::{
        BODY_CREDENTIAL_NAMES, BODY_SAFE_NAMES, QUERY_CREDENTIAL_NAMES, RESPONSE_HEADER_ALLOW_LIST,
    };
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

    #[test]
    fn secrets_are_replaced_as_text_unless_too_short_and_never_quoted_in_errors() {
        let secrets = [
            Secret {
                name: "openai",
                value: " not-a-shape-but-a-key.9z ",
            },
            Secret {
                name: "local",
                value: "test",
            },
        ];
        let redactor = Redactor::with_secrets(&RedactionRules::default(), &secrets).unwrap();
        assert_eq!(
            redactor.text("key not-a-shape-but-a-key.9z; mode test"),
            format!("key {REDACTED}; mode test")
        );
        // The user's rule is checked first and named; a secret is named by whose it is.
        let bad_rule = RedactionRules {
            patterns: vec!["(".into()],
            ..RedactionRules::default()
        };
        let err = Redactor::with_secrets(&bad_rule, &secrets).unwrap_err();
        assert!(matches!(err, Error::InvalidPattern { .. }), "{err}");
        let huge = "k".repeat(20 << 20);
        let err = Redactor::with_secrets(
            &RedactionRules::default(),
            &[Secret {
                name: "anthropic",
                value: &huge,
            }],
        )
        .unwrap_err();
        assert!(err.to_string().contains("anthropic"), "{err}");
        assert!(!err.to_string().contains("kkkkkkkk"), "{err}");
    }

    #[test]
    fn redactor_is_clone_send_sync() {
        fn check<T: Clone + Send + Sync + 'static>() {}
        check::<Redactor>();
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

    /// Issue 10, item 11: response headers go through an allow-list, so a gateway's prefixed
    /// copies of vendor headers and its own internals never reach disk.
    #[test]
    fn response_headers_keep_only_the_allow_list() {
        for name in [
            "Set-Cookie",
            "set-cookie2",
            "Authorization",
            "X-Api-Key",
            "WWW-Authenticate",
            "Proxy-Authenticate",
            "x-amz-security-token",
            "llm_provider-set-cookie",
            "llm_provider-openai-organization",
            "llm_provider-x-ratelimit-remaining-tokens",
            "x-litellm-model-api-base",
            "x-litellm-key-hash",
            "x-upload-url",
            "mcp-session-id",
            "openai-organization",
            "openai-project",
            "anthropic-organization-id",
            "x-debug",
            "Connection",
            "Keep-Alive",
            "Transfer-Encoding",
            "Content-Length",
            "Content-Encoding",
            "Server",
            "Alt-Svc",
        ] {
            let out = r().response_headers(&hdrs(&[(name, "v"), ("x-request-id", "req_1")]));
            assert_eq!(out, hdrs(&[("x-request-id", "req_1")]), "{name}");
        }
        let kept: Vec<&str> = RESPONSE_HEADER_ALLOW_LIST
            .iter()
            .copied()
            .chain([
                "x-ratelimit-remaining-tokens",
                "anthropic-ratelimit-tokens-remaining",
                "ratelimit-reset",
                "x-ms-ratelimit-remaining-subscription-reads",
            ])
            .collect();
        for name in kept {
            let upper = name.to_ascii_uppercase();
            let out = r().response_headers(&hdrs(&[(&upper, "412")]));
            assert_eq!(out, hdrs(&[(name, "412")]), "{name}");
        }
    }

    #[test]
    fn response_headers_keep_order_and_lowercase_names() {
        let input = hdrs(&[
            ("Connection", "keep-alive, X-Hop"),
            ("X-Hop", "1"),
            ("Content-Type", "application/json"),
            ("Content-Length", "123"),
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
            "x-request-id",
            "token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig_part-1",
        )]));
        assert_eq!(out, hdrs(&[("x-request-id", "token=[REDACTED]")]));
    }

    /// Issue 10, item 12: a signed URL in an answer header keeps its host and path only.
    #[test]
    fn url_valued_response_headers_lose_signatures_and_userinfo() {
        let out = r().response_headers(&hdrs(&[
            (
                "Location",
                "https://bucket.s3.amazonaws.com/up/a.mp3?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260101%2Fus-east-1&X-Amz-Signature=9f2c1e4a&X-Amz-Expires=900",
            ),
            ("content-location", "https://u:pw@files.example/v1/files/f1?token=t0k3n&part=2"),
        ]));
        assert_eq!(
            out,
            hdrs(&[
                (
                    "location",
                    "https://bucket.s3.amazonaws.com/up/a.mp3?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=900"
                ),
                ("content-location", "https://files.example/v1/files/f1?part=2"),
            ])
        );
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
                Err(e @ Error::InvalidPattern { .. }) => {
                    let msg = e.to_string();
                    assert!(msg.contains(&format!("`{pattern}`")), "{msg}");
                }
                other => panic!("{pattern}: {other:?}"),
            }
        }
    }

    #[test]
    fn json_changed_reports_whether_anything_changed() {
        let mut clean = json!({"model": "m", "max_tokens": 10});
        assert!(!r().json_changed(&mut clean));
        let mut dirty = json!({"model": "m", "api_key": "k"});
        assert!(r().json_changed(&mut dirty));
    }

    /// Issue 10, item 12: the query names a gateway or SDK uses for credentials, and keys that
    /// are only visible once the value is decoded.
    #[test]
    fn query_credentials_from_the_wild_and_encoded_keys_never_stay() {
        let red = r();
        for name in [
            "api_secret",
            "secret_key",
            "bearer",
            "credential",
            "token",
            "sig",
            "subscription-key",
            "auth",
            "access-token",
            "accessToken",
            "X-Goog-Api-Key",
        ] {
            assert_eq!(
                red.query(&format!("alt=sse&{name}=opaque-v4lue")),
                "alt=sse",
                "{name}"
            );
        }
        let key = "sk-proj-7Fh2Kd9Lq3Wz8Xc1Vb6Nm4Tr0Yp5Ju2Ie8Ow3Aq";
        let encoded: String = key.chars().map(|c| format!("%{:02X}", c as u32)).collect();
        for (query, expected) in [
            (format!("q=%3D{key}&x=1"), "q=%3D[REDACTED]&x=1".to_owned()),
            (
                "h=Bearer%208f3a9c2e1b7d4f60a5e2c9b1".to_owned(),
                "h=Bearer%20[REDACTED]".to_owned(),
            ),
            (
                "h=Bearer+8f3a9c2e1b7d4f60a5e2c9b1".to_owned(),
                "h=Bearer+[REDACTED]".to_owned(),
            ),
            (format!("q={encoded}&x=1"), "q=[REDACTED]&x=1".to_owned()),
            (
                format!("q=sk%2Dproj%2D{}", &key[8..]),
                "q=[REDACTED]".to_owned(),
            ),
        ] {
            assert_eq!(red.query(&query), expected, "{query}");
        }
        // Encoded text without a secret keeps every byte.
        let plain = "q=caf%C3%A9+au+lait&path=%2Fv1%2Fmodels&t=%20";
        assert_eq!(red.query(plain), plain);
    }

    /// Issue 10, item 12: body names from LangChain, LiteLLM and friends.
    #[test]
    fn body_credential_names_from_the_wild() {
        let red = r();
        for name in [
            "openai_api_key",
            "anthropic_api_key",
            "auth",
            "pwd",
            "user_token",
            "access_key",
            "api_secret",
            "secret_key",
            "authorization_token",
            "HF_TOKEN",
        ] {
            let mut v = json!({"config": {name: "opaque-v4lue", "model": "gpt-4o"}});
            red.json(&mut v);
            assert_eq!(
                v,
                json!({"config": {name: REDACTED, "model": "gpt-4o"}}),
                "{name}"
            );
        }
    }

    /// Issue 10, item 12: the Realtime API hands out `client_secret: {value, expires_at}`.
    #[test]
    fn a_credential_wrapped_in_an_object_loses_its_value() {
        let mut v = json!({
            "id": "sess_1", "object": "realtime.session",
            "client_secret": {"value": "opaque-ephemeral", "expires_at": 1_700_000_000},
            "credentials": {"key": "opaque-key", "region": "eu"},
            "tools": [{"type": "function", "name": "login", "parameters": {"type": "object",
                "properties": {"password": {"type": "string", "description": "the value to send"}}}}]
        });
        let mut expected = v.clone();
        expected["client_secret"]["value"] = json!(REDACTED);
        expected["credentials"]["key"] = json!(REDACTED);
        assert!(r().json_changed(&mut v));
        assert_eq!(v, expected);
        // Idempotent: redacting a stored document again changes nothing.
        assert!(!r().json_changed(&mut v));
    }

    /// Name rules reach JSON held in a string (tool-call arguments, a tool result), which is
    /// rewritten only when something in it is redacted.
    #[test]
    fn json_held_in_a_string_gets_the_name_rules() {
        let arguments = r#"{"user":"ada","password":"hunter2","max_tokens":50}"#;
        let result = r#"{ "status" : "shipped", "tokens": 12, "note": "password reset sent" }"#;
        let mut v = json!({"messages": [
            {"role": "assistant", "tool_calls": [{"function": {"name": "login", "arguments": arguments}}]},
            {"role": "tool", "content": result},
            {"role": "user", "content": "[not json] {\"api_key\": 1"},
        ]});
        assert!(r().json_changed(&mut v));
        let stored = v["messages"][0]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let parsed: Value = serde_json::from_str(&stored).unwrap_or(Value::Null);
        assert_eq!(
            parsed,
            json!({"user": "ada", "password": REDACTED, "max_tokens": 50})
        );
        assert_eq!(
            v["messages"][1]["content"], result,
            "untouched, byte for byte"
        );
        assert_eq!(v["messages"][2]["content"], "[not json] {\"api_key\": 1");
        // Inside logprobs a JSON string is still model output.
        let mut lp = json!({"logprobs": {"content": [{"token": "{\"token\":\"x\"}"}]}});
        assert!(!r().json_changed(&mut lp));
    }

    /// What must never be redacted: limits, usage counts, prose about passwords and tokens.
    #[test]
    fn limits_usage_and_prose_are_kept() {
        let mut v = json!({
            "model": "gpt-4o", "max_tokens": 1024, "max_completion_tokens": 12,
            "messages": [{"role": "user", "content": "Reset my password, and how many tokens is a page? My auth failed."}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11,
                "completion_tokens_details": {"reasoning_tokens": 0}},
            "authorization_url": "https://example.com/oauth/authorize",
            "author": "ada", "keywords": ["token", "password"], "password_policy": {"min": 12}
        });
        let before = v.clone();
        assert!(!r().json_changed(&mut v));
        assert_eq!(v, before);
    }
}
