//! Auditing stored cassettes (`cassette verify`): what the current rules would not have stored,
//! in documents recorded by an older version, through a gateway, or edited by hand.
//!
//! The audit redacts a copy of the document field by field as sealing does (the same function)
//! and reports every place that changed, by location and reason, never by value. Places
//! whose old text holds a credential *shape* are left out: a scan of the stored bytes
//! ([`find_credentials`]) reports those with their byte offsets. On top, it flags stored headers
//! that today's allow-lists would drop when their values look like cookies or tokens.

use crate::document::{Cassette, StoredBody};
use crate::error::{Error, Result};
use crate::redact::{
    find_credentials, is_body_credential_name, normalize_name, RedactionRules, Redactor,
};
use crate::seal::redact_fields;
use base64::Engine;
use bytes::Bytes;
use cassette_keying::Key;
use regex::Regex;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::LazyLock;

/// Something stored that the current redaction rules would not have stored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// Where, as a path into the document: `request.query`, `response.headers.set-cookie`,
    /// `request.body.api_key`, `response.body.events[3].data`.
    pub location: String,
    /// Why, without the value.
    pub reason: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.reason)
    }
}

/// A stored document that another store may receive as it is, byte for byte: the recording of
/// the key it is stored under, holding no credential-shaped text ([`find_credentials`]) and
/// nothing today's seal would change ([`audit`]). Besides [`crate::Sealed::to_document`], the
/// only bytes that reach a store: `cassette copy` writes documents recorded elsewhere, which it
/// must neither rewrite (a migration keeps every byte) nor pass on unchecked.
#[derive(Debug, Clone)]
pub struct Audited {
    cassette: Cassette,
    document: Bytes,
}

impl Audited {
    /// Checks `document`, stored under `key`. The error names what is wrong by place and shape,
    /// never by value.
    pub fn check(key: &Key, document: Bytes) -> Result<Audited> {
        let cassette = Cassette::from_stored(&document, key)?;
        let mut problems: Vec<String> = find_credentials(&document)
            .into_iter()
            .map(|found| {
                format!(
                    "credential-shaped text ({}) at byte {}",
                    found.pattern, found.offset
                )
            })
            .collect();
        problems.extend(audit(&cassette).iter().map(Finding::to_string));
        if !problems.is_empty() {
            return Err(Error::Unredacted {
                problems: problems.join("; "),
            });
        }
        Ok(Audited { cassette, document })
    }

    /// The cassette the document holds.
    pub fn cassette(&self) -> &Cassette {
        &self.cassette
    }

    /// The document, as it was stored.
    pub fn into_document(self) -> Bytes {
        self.document
    }
}

/// Stored headers that are not credentials even when their values look random, so an old
/// cassette that kept them is not flagged: cache validators, CDN and transport bookkeeping.
const HARMLESS_HEADERS: &[&str] = &[
    "etag",
    "last-modified",
    "date",
    "expires",
    "age",
    "vary",
    "server",
    "via",
    "alt-svc",
    "strict-transport-security",
    "x-content-type-options",
    "x-cache",
    "cf-cache-status",
    "x-amz-cf-id",
    "x-amz-cf-pop",
    "x-amz-id-2",
    "nel",
    "report-to",
];

/// A `Set-Cookie`-like value: `name=value; Path=/; HttpOnly`.
static COOKIE_VALUE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^\s*[^=;,\s]+=[^;]*;\s*(?:path|domain|expires|max-age|httponly|secure|samesite)\b",
    )
    .ok()
});

/// A run of 20 or more token characters with letters and digits, or an auth scheme and a value.
static TOKEN_VALUE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i:\b(?:bearer|basic|token|digest)\s+\S{8,})|[A-Za-z0-9._~+/=-]{20,}").ok()
});

fn is_cookie_shaped(name: &str, value: &str) -> bool {
    normalize_name(name).contains("cookie")
        || COOKIE_VALUE.as_ref().is_some_and(|re| re.is_match(value))
}

fn is_token_shaped(value: &str) -> bool {
    TOKEN_VALUE.as_ref().is_some_and(|re| {
        re.find_iter(value).any(|m| {
            let run = m.as_str();
            run.contains(char::is_whitespace)
                || (run.bytes().any(|b| b.is_ascii_digit())
                    && run.bytes().any(|b| b.is_ascii_alphabetic()))
        })
    })
}

/// What [`audit`] found in one cassette, in document order.
pub fn audit(cassette: &Cassette) -> Vec<Finding> {
    let redactor = Redactor::default();
    let mut clean = cassette.clone();
    let redaction = redact_fields(&redactor, &mut clean);
    let mut out = Vec::new();
    let mut text = |location: &str, old: &str, new: &str, reason: &str| {
        if old != new && !shapes_explain(&redactor, old, new) {
            out.push(Finding {
                location: location.to_owned(),
                reason: reason.to_owned(),
            });
        }
    };
    text(
        "upstream",
        &cassette.upstream,
        &clean.upstream,
        "userinfo or a credential parameter",
    );
    text(
        "request.path",
        &cassette.request.path,
        &clean.request.path,
        "a credential the current rules replace",
    );
    text(
        "request.query",
        &cassette.request.query,
        &clean.request.query,
        "a credential parameter (left out of the key and never stored today)",
    );
    // The replayed text follows the body: a body finding says what it held, so only a text
    // that holds more than its body (a hand edit) is a finding of its own.
    if cassette.response.body == clean.response.body {
        text(
            "response.body_text",
            cassette.response.body_text.as_deref().unwrap_or(""),
            clean.response.body_text.as_deref().unwrap_or(""),
            "a credential the current rules replace",
        );
    }
    headers(
        &mut out,
        "request.headers",
        &cassette.request.headers,
        &clean.request.headers,
        &redactor,
    );
    body(
        &mut out,
        "request.body",
        &cassette.request.body,
        &clean.request.body,
        redaction.request.in_binary,
        &redactor,
    );
    headers(
        &mut out,
        "response.headers",
        &cassette.response.headers,
        &clean.response.headers,
        &redactor,
    );
    body(
        &mut out,
        "response.body",
        &cassette.response.body,
        &clean.response.body,
        redaction.response.in_binary,
        &redactor,
    );
    if let (Some(old), Some(new)) = (&cassette.response.events, &clean.response.events) {
        let (old, new) = (Value::from(old.clone()), Value::from(new.clone()));
        json_places(&mut out, "response.events", &old, &new, &redactor, |old| {
            if find_credentials(old.as_bytes()).is_empty() {
                "a piece of a secret split across stream events"
            } else {
                "a value the current rules replace"
            }
        });
    }
    // Everything else the seal redacts (review facts, provenance, keying settings), compared
    // as the documents serialize, so a field added to both is audited too.
    let rest = |c: &Cassette| {
        let mut value = serde_json::to_value(c).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.remove("upstream");
            map.remove("request");
            map.remove("response");
        }
        value
    };
    json_places(
        &mut out,
        "",
        &rest(cassette),
        &rest(&clean),
        &redactor,
        |_| "a credential the current rules replace",
    );
    out
}

/// The places where `cassette` holds what one of the team's own rules (cassette.toml's
/// `[redact]`) replaces, one finding per place and rule, the rule named in the reason. A tape
/// recorded before the rule was added keeps the value; the built-in audit ([`audit`]) does not
/// know the rule. Each rule is applied alone, on top of the built-in rules, so a finding names
/// the rule that would change the place (and not the built-ins, which [`audit`] reports). The
/// error names an invalid rule.
pub fn audit_rules(cassette: &Cassette, rules: &RedactionRules) -> Result<Vec<Finding>> {
    let built_in = Redactor::default();
    let mut baseline = cassette.clone();
    redact_fields(&built_in, &mut baseline);
    let baseline = serde_json::to_value(&baseline).unwrap_or(Value::Null);
    let single = rules
        .json_paths
        .iter()
        .map(|path| {
            let rule = RedactionRules {
                json_paths: vec![path.clone()],
                patterns: Vec::new(),
            };
            (rule, format!("the `[redact]` path `{path}`"))
        })
        .chain(rules.patterns.iter().map(|pattern| {
            let rule = RedactionRules {
                json_paths: Vec::new(),
                patterns: vec![pattern.clone()],
            };
            (rule, format!("the `[redact]` pattern `{pattern}`"))
        }));
    let mut out = Vec::new();
    for (rule, named) in single {
        let redactor = Redactor::new(&rule)?;
        let mut clean = cassette.clone();
        redact_fields(&redactor, &mut clean);
        let clean = serde_json::to_value(&clean).unwrap_or(Value::Null);
        let mut changed = Vec::new();
        changed_places(&baseline, &clean, String::new(), &mut changed);
        for (path, _, _) in changed {
            out.push(Finding {
                // The path may hold what the rule replaces (a member name): shown redacted.
                location: redactor.text(&path),
                reason: format!("a value {named} replaces"),
            });
        }
    }
    Ok(out)
}

/// Reports each place where `old` and `new` differ, unless a credential shape alone explains
/// it (the byte scan reports those with their offsets); `reason` reads the old text.
fn json_places(
    out: &mut Vec<Finding>,
    at: &str,
    old: &Value,
    new: &Value,
    redactor: &Redactor,
    reason: impl Fn(&str) -> &'static str,
) {
    let mut changed = Vec::new();
    changed_places(old, new, String::new(), &mut changed);
    for (path, old, new) in changed {
        let old_text = match (old, new) {
            (Value::String(old), Some(Value::String(new))) => {
                if shapes_explain(redactor, old, new) {
                    continue;
                }
                old.as_str()
            }
            _ => "",
        };
        let path = redactor.text(&path);
        let location = match (at.is_empty(), path.starts_with('[')) {
            (true, _) => path,
            (false, true) => format!("{at}{path}"),
            (false, false) => format!("{at}.{path}"),
        };
        out.push(Finding {
            location,
            reason: reason(old_text).to_owned(),
        });
    }
}

/// Headers today's allow-list drops are flagged when their value looks like a cookie or a
/// token; kept headers whose value changes hold a credential the scan did not see.
fn headers(
    out: &mut Vec<Finding>,
    at: &str,
    stored: &BTreeMap<String, String>,
    clean: &BTreeMap<String, String>,
    redactor: &Redactor,
) {
    for (name, value) in stored {
        let lower = name.to_ascii_lowercase();
        let location = format!("{at}.{}", redactor.text(&lower));
        let reason = match clean.get(&lower) {
            Some(kept) if kept == value || shapes_explain(redactor, value, kept) => continue,
            Some(_) => "a credential the current rules replace",
            None if HARMLESS_HEADERS.contains(&lower.as_str())
                || lower.starts_with("access-control-") =>
            {
                continue
            }
            None if is_cookie_shaped(&lower, value) => {
                "a cookie-shaped value in a header today's allow-list does not keep"
            }
            None if is_token_shaped(value) => {
                "a token-shaped value in a header today's allow-list does not keep"
            }
            None => continue,
        };
        out.push(Finding {
            location,
            reason: reason.to_owned(),
        });
    }
}

fn body(
    out: &mut Vec<Finding>,
    at: &str,
    stored: &StoredBody,
    clean: &StoredBody,
    in_binary: usize,
    redactor: &Redactor,
) {
    if stored == clean {
        return;
    }
    match (stored, clean) {
        (StoredBody::Json(old), StoredBody::Json(new)) => {
            let mut changed = Vec::new();
            changed_places(old, new, String::new(), &mut changed);
            for (path, old, new) in changed {
                let explained = match (old, new) {
                    (Value::String(old), Some(Value::String(new))) => {
                        shapes_explain(redactor, old, new)
                    }
                    // A secret used as a member name: the byte scan sees the name.
                    (_, None) => !find_credentials(path.as_bytes()).is_empty(),
                    _ => false,
                };
                if explained {
                    continue;
                }
                let reason = if last_member(&path).is_some_and(is_body_credential_name) {
                    "a value under a credential name"
                } else if path.starts_with("events[") {
                    "a piece of a secret split across stream events"
                } else if old
                    .as_str()
                    .is_some_and(|s| s.trim_start().starts_with(['{', '[']))
                {
                    "JSON text with a member named like a credential"
                } else {
                    "a value the current rules replace"
                };
                out.push(Finding {
                    location: format!("{at}.{}", redactor.text(&path)).replace(".[", "["),
                    reason: reason.to_owned(),
                });
            }
        }
        (StoredBody::Base64(encoded), _) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded.as_bytes())
                .unwrap_or_default();
            let mut shapes: Vec<&str> = find_credentials(&bytes)
                .into_iter()
                .map(|m| m.pattern)
                .collect();
            shapes.dedup();
            let reason = if in_binary > 0 {
                format!(
                    "{in_binary} credential-shaped run(s) in binary content stored as base64 ({})",
                    shapes.join(", ")
                )
            } else {
                "a form field or multipart part named like a credential".to_owned()
            };
            out.push(Finding {
                location: at.to_owned(),
                reason,
            });
        }
        (StoredBody::Text(old), StoredBody::Text(new)) if !shapes_explain(redactor, old, new) => {
            out.push(Finding {
                location: at.to_owned(),
                reason: "a form field or multipart part named like a credential".to_owned(),
            });
        }
        _ => {}
    }
}

fn last_member(path: &str) -> Option<&str> {
    let last = path.rsplit('.').next()?;
    Some(last.split('[').next().unwrap_or(last)).filter(|name| !name.is_empty())
}

/// Whether the credential shapes alone turn `old` into `new`: then the byte scan of the
/// document, which names the shape and the offset, has reported it already.
fn shapes_explain(redactor: &Redactor, old: &str, new: &str) -> bool {
    !find_credentials(old.as_bytes()).is_empty() && redactor.text(old) == new
}

/// The places where `old` and `new` differ, with both values (`None` when a member is gone).
fn changed_places<'a, 'b>(
    old: &'a Value,
    new: &'b Value,
    path: String,
    out: &mut Vec<(String, &'a Value, Option<&'b Value>)>,
) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (name, child) in a {
                let at = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                match b.get(name) {
                    Some(other) => changed_places(child, other, at, out),
                    None => out.push((at, child, None)),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                changed_places(x, y, format!("{path}[{i}]"), out);
            }
        }
        _ if old == new => {}
        _ => out.push((path, old, Some(new))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_that_look_like_cookies_or_tokens() {
        assert!(is_cookie_shaped("llm_provider-set-cookie", "a=b"));
        assert!(is_cookie_shaped("x-gw", "__cf_bm=abc; path=/; HttpOnly"));
        assert!(!is_cookie_shaped("x-gw", "gzip, br"));
        for token in [
            "org-Ab12Cd34Ef56Gh78Ij90Kl",
            "Bearer opaque-tok",
            "3f9a2c7e1b5d4f60a8e2c9b1d0e7f6a5",
            "key=AbCdEf0123456789xyzUVW",
        ] {
            assert!(is_token_shaped(token), "{token}");
        }
        for plain in [
            "application/json",
            "412",
            "Wed, 21 Oct 2026 07:28:00 GMT",
            "max-age=31536000; includeSubDomains",
            "https://api.openai.com/v1",
            "cloudflare",
        ] {
            assert!(!is_token_shaped(plain), "{plain}");
        }
    }

    fn cassette(request: Value, response: Value) -> Cassette {
        let doc = serde_json::json!({
            "format": 1, "key": "ab".repeat(32), "key_version": 1,
            "recorded_at": "2026-01-01T00:00:00Z", "tool": "cassette 0.1.0",
            "target": "default", "upstream": "https://api.openai.com",
            "request": request, "response": response,
            "meta": {"profile": "openai.chat", "latency_ms": 1}
        });
        Cassette::from_document(doc.to_string().as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_clean_cassette_has_no_findings() {
        let clean = cassette(
            serde_json::json!({"method": "POST", "path": "/v1/chat/completions",
                "headers": {"content-type": "application/json", "anthropic-version": "2023-06-01"},
                "body": {"json": {"model": "gpt-4o", "max_tokens": 64, "messages": [
                    {"role": "user", "content": "My password reset token expired; how many tokens is this?"}]}}}),
            serde_json::json!({"status": 200,
                "headers": {"content-type": "application/json", "x-request-id": "req_01HZX9Y8W7V6U5T4S3R2Q1P0",
                    "cf-ray": "8c1a2b3c4d5e6f70-CDG", "server": "cloudflare", "date": "Wed, 01 Jan 2026 00:00:00 GMT"},
                "body": {"json": {"usage": {"prompt_tokens": 9, "total_tokens": 11},
                    "choices": [{"message": {"content": "Tokens: 11."}}]}}}),
        );
        assert_eq!(audit(&clean), vec![]);
    }

    #[test]
    fn forms_and_request_headers_of_older_recordings_are_flagged() {
        let old = cassette(
            serde_json::json!({"method": "POST", "path": "/oauth/token",
                "headers": {"content-type": "application/x-www-form-urlencoded", "cookie": "sid=opaque"},
                "body": {"text": "grant_type=password&password=opaque-pw"}}),
            serde_json::json!({"status": 200,
                "headers": {"location": "https://x.example/cb?code=1&token=opaque-t"},
                "body": {"json": {"tool": {"arguments": "{\"api_key\":\"opaque-a\"}"}}}}),
        );
        let found: Vec<String> = audit(&old).iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                "request.headers.cookie: a cookie-shaped value in a header today's allow-list does not keep",
                "request.body: a form field or multipart part named like a credential",
                "response.headers.location: a credential the current rules replace",
                "response.body.tool.arguments: JSON text with a member named like a credential",
            ]
        );
        assert!(found.iter().all(|f| !f.contains("opaque")));
    }

    #[test]
    fn only_a_clean_document_under_its_own_key_passes_as_it_is() {
        let key = Key::parse(&"ab".repeat(32)).unwrap();
        let clean = cassette(
            serde_json::json!({"method": "POST", "path": "/v1/chat/completions",
                "body": {"json": {"model": "gpt-4o", "messages": []}}}),
            serde_json::json!({"status": 200, "body": {"json": {"ok": true}}}),
        );
        // Not the recorder's layout: an audited copy keeps the bytes it was given.
        let document = Bytes::from(serde_json::to_vec(&clean).unwrap());
        let audited = Audited::check(&key, document.clone()).unwrap();
        assert_eq!(audited.cassette().key, key);
        assert_eq!(audited.into_document(), document);

        let other = Key::parse(&"cd".repeat(32)).unwrap();
        assert!(matches!(
            Audited::check(&other, document),
            Err(Error::OtherKey { .. })
        ));
        assert!(matches!(
            Audited::check(&key, Bytes::from_static(b"{\"not\": \"a cassette\"}")),
            Err(Error::Unreadable { .. })
        ));

        let secret = format!("sk-proj-{}", "Ab1".repeat(16));
        let leaky = cassette(
            serde_json::json!({"method": "POST", "path": "/v1/chat/completions",
                "headers": {"cookie": "sid=opaque"},
                "body": {"json": {"model": "gpt-4o", "messages": []}}}),
            serde_json::json!({"status": 200, "body": {"json": {"echo": secret}}}),
        );
        let document = Bytes::from(serde_json::to_vec(&leaky).unwrap());
        let err = Audited::check(&key, document).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, Error::Unredacted { .. }), "{message}");
        assert!(
            message.contains("credential-shaped text (openai"),
            "{message}"
        );
        assert!(message.contains("request.headers.cookie"), "{message}");
        assert!(
            !message.contains(&secret) && !message.contains("opaque"),
            "{message}"
        );
    }

    #[test]
    fn last_members_of_paths() {
        assert_eq!(last_member("a.b[0].api_key"), Some("api_key"));
        assert_eq!(last_member("api_key"), Some("api_key"));
        assert_eq!(last_member("events[3]"), Some("events"));
        assert_eq!(last_member("a[1][2]"), Some("a"));
    }
}
