//! The requests a test sent, kept for its runner when it asks (`keep_requests` in the scope's
//! begin): the pytest plugin's stand-in for vcrpy's cassette answers `vcr.requests` from them.
//! Each is kept as the vendor would have received it (its route's URL) and without
//! credentials: credential headers and query parameters are left out, and every other value
//! passes the redactor, so the runner never holds a secret the proxy would not store.

use base64::Engine;
use cassette_tape::redact::Redactor;
use cassette_tape::Request;
use serde::Serialize;

/// How many requests a scope keeps: a test that sends more is told about the first ones.
pub(super) const KEPT: usize = 1000;

/// One request a test sent, as vcrpy's `Request` has it.
#[derive(Debug, Clone, Serialize)]
pub(super) struct SentRequest {
    /// The method, in capitals.
    method: String,
    /// The vendor's URL (the route's base and the path), without credential parameters.
    uri: String,
    /// The headers, the first value of each name, without credentials.
    headers: serde_json::Map<String, serde_json::Value>,
    /// The body, base64 (vcrpy's are bytes).
    body: String,
}

impl SentRequest {
    /// `request` as its route's upstream (`base_url`; none: the path alone) would see it.
    pub(super) fn new(request: &Request, base_url: Option<&str>, redactor: &Redactor) -> Self {
        let uri = match base_url {
            Some(base) => crate::upstream::join_url(base, &request.path, &request.query),
            None if request.query.is_empty() => request.path.clone(),
            None => format!("{}?{}", request.path, request.query),
        };
        let mut headers = serde_json::Map::new();
        for (name, value) in &request.headers {
            let lower = name.trim().to_ascii_lowercase();
            if cassette_vcr::credential_header(&lower) || lower.starts_with("x-cassette") {
                continue;
            }
            headers
                .entry(lower)
                .or_insert_with(|| redactor.text(value).into());
        }
        let body = match std::str::from_utf8(&request.body) {
            Ok(text) => redactor.text(text).into_bytes(),
            Err(_) => request.body.to_vec(),
        };
        SentRequest {
            method: request.method.to_ascii_uppercase(),
            uri: redactor.url(&uri),
            headers,
            body: base64::engine::general_purpose::STANDARD.encode(body),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sent_request_keeps_no_credential() {
        let mut request = Request::post_json(
            "/v1/chat/completions",
            &serde_json::json!({"model": "m", "messages": []}),
        );
        request.query = "api-version=1&key=AIzaSyD-SECRETSECRETSECRETSECRET000".into();
        request.headers.extend([
            (
                "Authorization".into(),
                "Bearer sk-SECRET0123456789abcdef0123".into(),
            ),
            ("X-Api-Key".into(), "sk-ant-SECRET0123456789".into()),
            ("X-Trace".into(), "trace-42".into()),
            ("x-cassette-test".into(), "t".into()),
        ]);
        let sent = SentRequest::new(
            &request,
            Some("https://api.openai.com"),
            &Redactor::default(),
        );
        let text = serde_json::to_string(&sent).unwrap();
        assert!(!text.contains("SECRET"), "{text}");
        assert_eq!(sent.method, "POST");
        assert!(
            sent.uri
                .starts_with("https://api.openai.com/v1/chat/completions?api-version=1"),
            "{}",
            sent.uri
        );
        assert_eq!(sent.headers["x-trace"], "trace-42");
        assert!(!sent.headers.contains_key("authorization"));
        assert!(!sent.headers.contains_key("x-cassette-test"));
        let body = base64::engine::general_purpose::STANDARD
            .decode(&sent.body)
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["model"], "m");
    }
}
