//! The redactor: applies the built-in rules and the user's rules to what is about to be stored.

use super::json_path::redact_path;
use super::names::{
    is_body_credential_name, is_query_credential_name, normalize_name, NAME_EXEMPT_SUBTREES,
    REQUEST_HEADER_ALLOW_LIST, RESPONSE_HEADER_DENY_LIST,
};
use super::shapes::{redact_shapes, replace_matches};
use super::{RedactError, RedactionRules, REDACTED, SECRET_GROUP};
use cassette_keying::JsonPath;
use regex::Regex;
use serde_json::{Map, Value};
use std::borrow::Cow;

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

impl Redactor {
    /// Compiles the user's rules; an invalid regex or JSON path is an error naming it.
    pub fn new(rules: &RedactionRules) -> Result<Redactor, RedactError> {
        let mut json_paths = Vec::with_capacity(rules.json_paths.len());
        for path in &rules.json_paths {
            let parsed = JsonPath::parse(path).map_err(|e| RedactError::InvalidJsonPath {
                path: path.clone(),
                reason: e.reason,
            })?;
            json_paths.push(parsed);
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
    /// ([`QUERY_CREDENTIAL_NAMES`](super::QUERY_CREDENTIAL_NAMES), case-insensitive,
    /// percent-decoded names); the other parameters are kept byte for byte and in order, except
    /// credential-shaped values.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::{BODY_CREDENTIAL_NAMES, BODY_SAFE_NAMES, QUERY_CREDENTIAL_NAMES};
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
                Err(e @ RedactError::InvalidPattern { .. }) => {
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
}
