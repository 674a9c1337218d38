//! Calls to the real upstream: URL joining, which headers are forwarded, credentials added.
//!
//! This module is the only place in cassette that opens connections to an upstream.

use crate::error::{upstream_error, Error};
use crate::redact::Redactor;
use crate::request::Request;
use cassette_keying::Profile;
use std::time::Duration;

/// Headers that belong to one connection (RFC 9110 section 7.6.1) or to the framing of one
/// message: never passed from one hop to the next, in either direction.
pub(crate) const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

/// Request headers we set ourselves or must not pass on, besides [`HOP_BY_HOP`].
const NOT_FORWARDED: &[&str] = &[
    "host",
    "proxy-authorization",
    "proxy-authenticate",
    // Replaced by `identity` (see `Upstream::send`).
    "accept-encoding",
];

/// The longest wait for a connection to an upstream; shorter when the whole answer may take
/// less.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long connecting may take when the answer may take `answer`.
pub(crate) fn connect_timeout(answer: Duration) -> Duration {
    CONNECT_TIMEOUT.min(answer)
}

/// Where a `Location` the upstream sent (absolute, or relative to `called`, the URL that was
/// called) leads when seen through the proxy: the same path on the route `target` when it lies
/// under the route's `base_url`, else `None` (another host, another path: nothing the proxy
/// can stand in for).
pub(crate) fn location_through_proxy(
    location: &str,
    called: &str,
    base_url: &str,
    target: &str,
) -> Option<String> {
    let to = url::Url::parse(called).ok()?.join(location).ok()?;
    let base = url::Url::parse(base_url).ok()?;
    if to.origin() != base.origin() {
        return None;
    }
    let base_path = base.path().trim_end_matches('/');
    let under_base = to
        .path()
        .strip_prefix(base_path)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
    if !under_base {
        return None;
    }
    let mut local = if target == crate::config::DEFAULT_TARGET {
        String::new()
    } else {
        format!("/{target}")
    };
    local.push_str(to.path());
    if let Some(query) = to.query() {
        local.push('?');
        local.push_str(query);
    }
    if let Some(fragment) = to.fragment() {
        local.push('#');
        local.push_str(fragment);
    }
    Some(local)
}

/// Joins an upstream base URL and a request path without doubling a shared segment run:
/// base `https://api.openai.com/v1` and path `/v1/chat/completions` give
/// `https://api.openai.com/v1/chat/completions`, never `/v1/v1/...`.
pub(crate) fn join_url(base: &str, path: &str, query: &str) -> String {
    let base = base.trim_end_matches('/');
    let (origin, base_path) = split_origin(base);
    let base_segments: Vec<&str> = base_path.split('/').filter(|s| !s.is_empty()).collect();
    let path_segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // The longest run at the end of the base that the path starts with is shared.
    let overlap = (0..=base_segments.len().min(path_segments.len()))
        .rev()
        .find(|&n| base_segments[base_segments.len() - n..] == path_segments[..n])
        .unwrap_or(0);
    let mut url = origin.to_owned();
    for segment in base_segments.iter().chain(&path_segments[overlap..]) {
        url.push('/');
        url.push_str(segment);
    }
    if path.ends_with('/') && !path_segments.is_empty() {
        url.push('/');
    }
    if url == origin {
        url.push('/');
    }
    if !query.is_empty() {
        url.push('?');
        url.push_str(query);
    }
    url
}

fn split_origin(base: &str) -> (&str, &str) {
    let after_scheme = base.find("://").map(|i| i + 3).unwrap_or(0);
    match base[after_scheme..].find('/') {
        Some(i) => base.split_at(after_scheme + i),
        None => (base, ""),
    }
}

/// Whether the client sent credentials of its own.
fn has_credentials(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(name, value)| {
        let name = name.to_ascii_lowercase();
        matches!(name.as_str(), "authorization" | "x-api-key" | "api-key")
            && !value.trim().is_empty()
    })
}

/// The HTTP client shared by every upstream call.
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    client: reqwest::Client,
    timeout: Duration,
}

impl Upstream {
    pub(crate) fn new(timeout: Duration) -> Result<Upstream, Error> {
        // The client decodes gzip, deflate and br answers (and drops their `content-encoding`)
        // whatever was asked for: some upstreams compress regardless, and a stored body must
        // be readable and replay as what it says it is.
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout(timeout))
            .read_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Error::HttpClient {
                source: Box::new(e),
            })?;
        Ok(Upstream { client, timeout })
    }

    /// Sends `request` to `base_url`, adding `api_key` when the client sent no credentials.
    /// Returns the response with its headers read; the body is left to stream.
    pub(crate) async fn send(
        &self,
        base_url: &str,
        profile: Profile,
        request: &Request,
        api_key: Option<&str>,
        redactor: &Redactor,
    ) -> Result<(String, reqwest::Response), Error> {
        let url = join_url(base_url, &request.path, &request.query);
        let method = reqwest::Method::from_bytes(request.method.as_bytes())
            .map_err(|_| Error::InvalidRequest(format!("invalid method `{}`", request.method)))?;
        // Stored bodies are decoded: asking for them unencoded saves the work.
        let mut builder = self
            .client
            .request(method, &url)
            .header("accept-encoding", "identity");
        for (name, value) in &request.headers {
            let lower = name.to_ascii_lowercase();
            if !HOP_BY_HOP.contains(&lower.as_str()) && !NOT_FORWARDED.contains(&lower.as_str()) {
                builder = builder.header(name.as_str(), value.as_str());
            }
        }
        if let (Some(key), false) = (api_key, has_credentials(&request.headers)) {
            builder = match profile {
                Profile::AnthropicMessages => builder.header("x-api-key", key),
                _ => builder.bearer_auth(key),
            };
        }
        let endpoint = redactor.url(&url);
        let response = builder
            .body(request.body.clone())
            .send()
            .await
            .map_err(|e| upstream_error(&endpoint, &e, self.timeout))?;
        Ok((endpoint, response))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_is_never_doubled() {
        let table = [
            (
                "https://api.openai.com",
                "/v1/chat/completions",
                "https://api.openai.com/v1/chat/completions",
            ),
            (
                "https://api.openai.com/v1",
                "/v1/chat/completions",
                "https://api.openai.com/v1/chat/completions",
            ),
            (
                "https://api.openai.com/v1/",
                "/v1/chat/completions",
                "https://api.openai.com/v1/chat/completions",
            ),
            (
                "https://openrouter.ai/api/v1",
                "/v1/chat/completions",
                "https://openrouter.ai/api/v1/chat/completions",
            ),
            (
                "https://openrouter.ai/api/v1",
                "/chat/completions",
                "https://openrouter.ai/api/v1/chat/completions",
            ),
            (
                "http://127.0.0.1:11434",
                "/api/chat",
                "http://127.0.0.1:11434/api/chat",
            ),
            ("http://h/api", "/api/chat", "http://h/api/chat"),
            ("http://h", "/", "http://h/"),
            ("http://h/v1", "/v1", "http://h/v1"),
        ];
        for (base, path, expected) in table {
            assert_eq!(join_url(base, path, ""), expected, "{base} + {path}");
        }
        assert_eq!(
            join_url("http://h/v1", "/v1/models", "a=1"),
            "http://h/v1/models?a=1"
        );
    }

    #[test]
    fn locations_under_the_upstream_stay_in_the_proxy() {
        let called = "https://api.example.com/v1/files?limit=1";
        let table = [
            // (location, base, target, through the proxy)
            (
                "https://api.example.com/v1/files/f1",
                "https://api.example.com/v1",
                "default",
                Some("/v1/files/f1"),
            ),
            (
                "/v1/files/f1?x=1",
                "https://api.example.com/v1",
                "default",
                Some("/v1/files/f1?x=1"),
            ),
            (
                "f2",
                "https://api.example.com/v1",
                "default",
                Some("/v1/f2"),
            ),
            (
                "https://api.example.com/v1/x",
                "https://api.example.com",
                "anthropic",
                Some("/anthropic/v1/x"),
            ),
            (
                "https://api.example.com/v1",
                "https://api.example.com/v1/",
                "default",
                Some("/v1"),
            ),
            (
                "https://api.example.com/v10/x",
                "https://api.example.com/v1",
                "default",
                None,
            ),
            (
                "https://api.example.com/docs",
                "https://api.example.com/v1",
                "default",
                None,
            ),
            (
                "https://evil.example/v1/x",
                "https://api.example.com/v1",
                "default",
                None,
            ),
            (
                "http://api.example.com/v1/x",
                "https://api.example.com/v1",
                "default",
                None,
            ),
            (
                "https://api.example.com:8443/v1/x",
                "https://api.example.com/v1",
                "default",
                None,
            ),
            (
                "//evil.example/v1",
                "https://api.example.com/v1",
                "default",
                None,
            ),
        ];
        for (location, base, target, expected) in table {
            assert_eq!(
                location_through_proxy(location, called, base, target).as_deref(),
                expected,
                "{location} from {base}"
            );
        }
    }

    #[test]
    fn credentials_are_detected_in_any_case() {
        assert!(has_credentials(&[(
            "Authorization".into(),
            "Bearer x".into()
        )]));
        assert!(has_credentials(&[("X-Api-Key".into(), "k".into())]));
        assert!(!has_credentials(&[("content-type".into(), "x".into())]));
    }
}
