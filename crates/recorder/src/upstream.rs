//! Calls to the real upstream: URL joining, which headers are forwarded, and the route's
//! credential.
//!
//! This module is the only place in cassette that opens connections to an upstream, and only
//! through an [`Upstream`], which a replay-mode recorder does not own. That includes the
//! tunnels and relays of forward-proxy requests that bypassed the base URL
//! ([`Upstream::open_tunnel`], [`Upstream::relay`]): they carry what the client sent and never
//! a route's key.
//!
//! # Credentials
//!
//! A route with a key sends exactly that key, in its own style, and nothing else: every
//! credential the client sent (headers in [`CREDENTIAL_HEADERS`], query parameters the key
//! leaves out) is dropped first, so a placeholder such as `cassette` never reaches the upstream
//! and no request carries two credentials. A route without a key passes the client's
//! credential through untouched. Keys live on their route, so one route's key cannot reach
//! another route's upstream.

use crate::config::{AuthStyle, Route};
use crate::error::{report, Error};
use cassette_tape::redact::Redactor;
use cassette_tape::Request;
use std::time::Duration;
use tokio::net::TcpStream;

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

/// The upstream's headers that HTTP can carry as text.
pub(crate) fn response_headers(response: &reqwest::Response) -> Vec<(String, String)> {
    response
        .headers()
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect()
}

/// Upstream headers fit to pass on: the server frames the body itself.
pub(crate) fn client_headers(headers: &[(String, String)]) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(n, _)| !HOP_BY_HOP.contains(&n.to_ascii_lowercase().as_str()))
        .cloned()
        .collect()
}

/// The error of an upstream call that got no answer, saying what the operating system or the
/// HTTP client saw.
pub(crate) fn upstream_error(endpoint: &str, err: &reqwest::Error, timeout: Duration) -> Error {
    let os_error = std::iter::successors(std::error::Error::source(err), |e| e.source())
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .find(|e| e.raw_os_error().is_some());
    let mut cause = failure(err.is_connect(), err.is_timeout(), os_error, timeout);
    // reqwest's own message repeats the URL, which `endpoint` already names without
    // credentials; its causes say what actually went wrong.
    if let Some(source) = std::error::Error::source(err) {
        cause.push_str(": ");
        cause.push_str(&report(source));
    }
    Error::Upstream {
        endpoint: endpoint.to_owned(),
        cause,
        timed_out: err.is_timeout(),
        connected: !err.is_connect(),
        recorded: false,
    }
}

/// What went wrong with an upstream call, in words: a connection that could not be made, one
/// the operating system gave up on (its own timeout, which has nothing to do with ours), or one
/// of our two timeouts running out. Only our own answer timeout is "no answer within N s".
fn failure(
    connect: bool,
    timed_out: bool,
    os_error: Option<&std::io::Error>,
    timeout: Duration,
) -> String {
    match (os_error, connect, timed_out) {
        (Some(os), _, _) if os.kind() == std::io::ErrorKind::TimedOut => {
            "the operating system timed the connection out".to_owned()
        }
        (Some(_), true, _) | (None, true, false) => "cannot connect".to_owned(),
        (Some(_), false, _) => "the connection failed".to_owned(),
        (None, true, true) => format!(
            "no connection within {}s",
            connect_timeout(timeout).as_secs_f32()
        ),
        (None, false, true) => format!("no answer within {}s", timeout.as_secs_f32()),
        (None, false, false) => "request failed".to_owned(),
    }
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
/// Where the URL of a client's next request (a [`NEXT_REQUEST_URL_HEADERS`] value: Gemini's
/// resumable upload URL) leads through the proxy: as [`location_through_proxy`], without the
/// query's credential parameters (the client never needs the route's key: the proxy adds it).
/// The proxy makes the path absolute for a client that reached it by a base URL, or gives the
/// vendor's URL back to one that came over the channel (`proxy/server/next_url.rs`).
///
/// [`NEXT_REQUEST_URL_HEADERS`]: cassette_tape::redact::NEXT_REQUEST_URL_HEADERS
pub(crate) fn next_url_through_proxy(
    url: &str,
    called: &str,
    base_url: &str,
    target: &str,
) -> Option<String> {
    let local = location_through_proxy(url, called, base_url, target)?;
    let (path, query) = match local.split_once('?') {
        Some((path, query)) => (path, query),
        None => return Some(local),
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|part| {
            let name = part.split_once('=').map_or(*part, |(n, _)| n);
            !cassette_keying::is_query_credential(&cassette_keying::form_decode(name))
        })
        .collect();
    Some(match kept.is_empty() {
        true => path.to_owned(),
        false => format!("{path}?{}", kept.join("&")),
    })
}

/// Whether `name` (any case) is a header whose value is the URL of the client's next request.
pub(crate) fn is_next_url_header(name: &str) -> bool {
    cassette_tape::redact::NEXT_REQUEST_URL_HEADERS
        .iter()
        .any(|n| n.eq_ignore_ascii_case(name))
}

/// Request headers that carry a client's credential: dropped when the route sends its own key.
pub(crate) const CREDENTIAL_HEADERS: &[&str] =
    &["authorization", "x-api-key", "api-key", "x-goog-api-key"];

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

/// The query to send: the client's, or, when the route sends its own key, the client's without
/// credential parameters and with the key when the route sends it in the query.
fn upstream_query(query: &str, route: &Route) -> String {
    let Some(key) = &route.api_key else {
        return query.to_owned();
    };
    let style_name = match &route.auth {
        AuthStyle::Query(name) => Some(name.as_str()),
        _ => None,
    };
    let mut parts: Vec<String> = query
        .split('&')
        .filter(|part| !part.is_empty())
        .filter(|part| {
            let name = cassette_keying::form_decode(part.split_once('=').map_or(part, |(n, _)| n));
            let is_credential = cassette_keying::is_query_credential(&name)
                || style_name.is_some_and(|style| style.eq_ignore_ascii_case(&name));
            !is_credential
        })
        .map(str::to_owned)
        .collect();
    if let Some(name) = style_name {
        parts.push(format!("{name}={}", query_encode(key.expose())));
    }
    parts.join("&")
}

/// Percent-encodes everything but unreserved characters (RFC 3986), for a key in a query (and
/// for the echo of that key an upstream may send back, `engine/echo.rs`).
pub(crate) fn query_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
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

    /// Sends `request` to the route's upstream with the route's credential (see the module
    /// docs). Returns the endpoint as it may be shown (no credentials) and the response with
    /// its headers read; the body is left to stream.
    pub(crate) async fn send(
        &self,
        route: &Route,
        request: &Request,
        redactor: &Redactor,
    ) -> Result<(String, reqwest::Response), Error> {
        let url = join_url(
            &route.base_url,
            &request.path,
            &upstream_query(&request.query, route),
        );
        let method = reqwest::Method::from_bytes(request.method.as_bytes())
            .map_err(|_| Error::InvalidRequest(format!("invalid method `{}`", request.method)))?;
        // Stored bodies are decoded: asking for them unencoded saves the work.
        let mut builder = self
            .client
            .request(method, &url)
            .header("accept-encoding", "identity");
        let replace_credentials = route.api_key.is_some();
        for (name, value) in &request.headers {
            let lower = name.to_ascii_lowercase();
            let dropped = HOP_BY_HOP.contains(&lower.as_str())
                || NOT_FORWARDED.contains(&lower.as_str())
                || (replace_credentials && CREDENTIAL_HEADERS.contains(&lower.as_str()));
            if !dropped {
                builder = builder.header(name.as_str(), value.as_str());
            }
        }
        if let Some(key) = &route.api_key {
            let key = key.expose();
            builder = match &route.auth {
                AuthStyle::Bearer => builder.bearer_auth(key),
                AuthStyle::XApiKey => builder.header("x-api-key", key),
                AuthStyle::ApiKey => builder.header("api-key", key),
                AuthStyle::XGoogApiKey => builder.header("x-goog-api-key", key),
                // Already in the URL.
                AuthStyle::Query(_) => builder,
            };
        }
        let endpoint = redactor.url(&url);
        let response = builder
            .body(request.body.clone())
            .send()
            .await
            .map_err(|e| upstream_error(&endpoint, &e.without_url(), self.timeout))?;
        Ok((endpoint, response))
    }
}

/// How long a forward-proxy tunnel may take to connect.
const TUNNEL_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Upstream {
    /// Opens the TCP connection of a forward-proxy tunnel (`CONNECT host:port`). The bytes pass
    /// untouched both ways: no credential is added, so no route's key can reach the host.
    pub(crate) async fn open_tunnel(&self, host: &str, port: u16) -> std::io::Result<TcpStream> {
        let connect = TcpStream::connect((host, port));
        match tokio::time::timeout(TUNNEL_CONNECT_TIMEOUT, connect).await {
            Ok(stream) => stream,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no connection within {}s", TUNNEL_CONNECT_TIMEOUT.as_secs()),
            )),
        }
    }

    /// Relays a plain-HTTP forward-proxy request (`GET http://host/...`) as the client sent
    /// it, without the headers of its hop to the proxy and without adding any credential.
    pub(crate) async fn relay(
        &self,
        method: reqwest::Method,
        url: &str,
        headers: &[(String, String)],
        body: reqwest::Body,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let mut builder = self.client.request(method, url);
        for (name, value) in headers {
            let lower = name.to_ascii_lowercase();
            if !HOP_BY_HOP.contains(&lower.as_str())
                && !matches!(lower.as_str(), "host" | "proxy-authorization")
            {
                builder = builder.header(name.as_str(), value.as_str());
            }
        }
        builder.body(body).send().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_failures_say_what_happened() {
        let minute = Duration::from_secs(60);
        let os_timeout = std::io::Error::from_raw_os_error(libc::ETIMEDOUT);
        let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        let reset = std::io::Error::from_raw_os_error(libc::ECONNRESET);
        let table = [
            (
                (true, true, Some(&os_timeout)),
                "the operating system timed the connection out",
            ),
            (
                (false, true, Some(&os_timeout)),
                "the operating system timed the connection out",
            ),
            ((true, false, Some(&refused)), "cannot connect"),
            ((false, false, Some(&reset)), "the connection failed"),
            ((true, true, None), "no connection within 10s"),
            ((false, true, None), "no answer within 60s"),
            ((false, false, None), "request failed"),
        ];
        for ((connect, timed_out, os), expected) in table {
            assert_eq!(
                failure(connect, timed_out, os, minute),
                expected,
                "connect {connect}, timed out {timed_out}, {os:?}"
            );
        }
        assert_eq!(
            failure(true, true, None, Duration::from_secs(2)),
            "no connection within 2s"
        );
    }

    /// Every error shows its cause in its message or returns it from `source()`, never both, so
    /// a printed chain says each thing once.

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

    fn keyed(style: &str) -> Route {
        let mut route = Route::new("r", "http://h");
        route.auth = style.parse().unwrap();
        route.api_key = crate::config::ApiKey::new("k/1+2");
        route
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
    fn a_route_key_replaces_query_credentials() {
        let bearer = keyed("bearer");
        assert_eq!(
            upstream_query("a=1&key=cassette&API_KEY=x&b=2", &bearer),
            "a=1&b=2"
        );
        let query = keyed("query:key");
        assert_eq!(
            upstream_query("alt=sse&key=cassette", &query),
            "alt=sse&key=k%2F1%2B2"
        );
        assert_eq!(upstream_query("", &query), "key=k%2F1%2B2");
        let custom = keyed("query:token");
        assert_eq!(
            upstream_query("token=cassette&key=y", &custom),
            "token=k%2F1%2B2"
        );
        // Without a key nothing is touched.
        let plain = Route::new("r", "http://h");
        assert_eq!(upstream_query("key=mine&a=1", &plain), "key=mine&a=1");
    }
}
