//! Forward-proxy requests: traffic that bypassed the base URL.
//!
//! A client whose base URL points at the vendor (hard-coded, or read from a variable nobody
//! set) but which honours the usual proxy variables sends its request to the proxy as a
//! forward proxy: `CONNECT api.openai.com:443` for HTTPS, or an absolute-form
//! `POST http://host/path` for plain HTTP. Such a request cannot be recorded (TLS hides it) nor
//! replayed (it never reached a route), so the proxy counts it by host and:
//!
//! * in replay, refuses it (403) without connecting anywhere: replay stays hermetic;
//! * in record, auto and off, tunnels it (CONNECT) or relays it (plain HTTP) unrecorded, so the
//!   call works, and the count says it will be refused on replay.
//!
//! Hosts on the allow list are the test suite's own business: tunnelled without being counted
//! outside replay, refused (uncounted) in replay, where the client is expected to reach them
//! directly. Only clients on this machine are served (whatever address the proxy listens on),
//! and a request a web page sent (it carries `Origin`) is never tunnelled. A tunnel carries the
//! client's bytes untouched: no route's key is ever added to it.
//!
//! An absolute-form request for the proxy's own address is an ordinary request written the
//! long way: it is rewritten to origin form (with `Host` set to that address) and goes through
//! the proxy's routes and checks like any other.

use crate::engine::Recorder;
use crate::mode::Mode;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request as HttpRequest};
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Mutex;

/// What the proxy does with forward-proxy requests for hosts other than itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forwarding {
    /// Count them by host; refuse them in replay and tunnel them otherwise, except the hosts
    /// `allow` names, which are never counted.
    Catch {
        /// Hosts the test suite legitimately reaches.
        allow: Vec<HostPattern>,
    },
    /// Not a forward proxy: refuse every such request and count nothing.
    Off,
}

impl Default for Forwarding {
    fn default() -> Self {
        Forwarding::Catch { allow: Vec::new() }
    }
}

/// A host (any port, or one port) or every subdomain of a domain: `api.example.com`,
/// `api.example.com:8443`, `*.example.com`, `10.0.0.7`, `[::1]:9000`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lowercase host, without brackets for IPv6; for a wildcard, the domain after `*.`.
    host: String,
    /// `*.domain`: every host below `domain` (not `domain` itself).
    subdomains: bool,
    port: Option<u16>,
}

impl HostPattern {
    /// Whether the pattern covers `host:port` (`host` as in a request target: any case,
    /// IPv6 in brackets or not).
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let host = bare_host(host).to_ascii_lowercase();
        if self.subdomains {
            host.strip_suffix(self.host.as_str())
                .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.'))
        } else {
            host == self.host
        }
    }

    /// The pattern in the form `NO_PROXY`-style lists understand: `.example.com` for every
    /// subdomain, the host otherwise (ports are not part of those lists).
    pub fn no_proxy_entry(&self) -> String {
        if self.subdomains {
            format!(".{}", self.host)
        } else {
            self.host.clone()
        }
    }
}

impl FromStr for HostPattern {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let bad = |why: &str| {
            Err(format!(
                "`{text}` is not a host pattern ({why}): write a host (`api.example.com`), a host and \
                 port (`api.example.com:8443`) or every subdomain of a domain (`*.example.com`)"
            ))
        };
        let (host, port) = match split_port(text) {
            Ok(parts) => parts,
            Err(why) => return bad(why),
        };
        let (subdomains, host) = match host.strip_prefix("*.") {
            Some(domain) => (true, domain),
            None => (false, host),
        };
        let host = host.to_ascii_lowercase();
        let is_ip = host.parse::<IpAddr>().is_ok();
        let is_name = !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
        if !(is_name || is_ip) || (subdomains && is_ip) {
            return bad("not a host name or IP address");
        }
        Ok(HostPattern {
            host,
            subdomains,
            port,
        })
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.subdomains {
            f.write_str("*.")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

/// `host[:port]` or `[v6][:port]` or a bare IPv6 address.
fn split_port(text: &str) -> Result<(&str, Option<u16>), &'static str> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("an unclosed `[`")?;
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':').map(str::parse::<u16>) {
                Some(Ok(port)) => Ok((host, Some(port))),
                _ => Err("a bad port"),
            },
        };
    }
    if text.matches(':').count() > 1 {
        return Ok((text, None));
    }
    match text.split_once(':') {
        None => Ok((text, None)),
        Some((host, port)) => match port.parse::<u16>() {
            Ok(port) => Ok((host, Some(port))),
            Err(_) => Err("a bad port"),
        },
    }
}

/// The host without IPv6 brackets.
fn bare_host(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// Where a forward-proxy request wants to go.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Target {
    /// Lowercase; IPv6 in brackets, as written in a URL.
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// What a request is, by its request target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An ordinary request (`POST /v1/chat/completions`).
    Origin,
    /// `CONNECT host:port`.
    Connect(Target),
    /// An absolute-form request (`POST http://host/path`).
    Absolute(Target),
}

/// Classifies a request by its method and request target.
pub(crate) fn classify(method: &http::Method, uri: &Uri) -> Kind {
    let Some(authority) = uri.authority() else {
        return Kind::Origin;
    };
    let host = authority.host().to_ascii_lowercase();
    if *method == http::Method::CONNECT {
        let port = authority.port_u16().unwrap_or(443);
        return Kind::Connect(Target { host, port });
    }
    let default_port = if uri.scheme_str() == Some("https") {
        443
    } else {
        80
    };
    let port = authority.port_u16().unwrap_or(default_port);
    Kind::Absolute(Target { host, port })
}

/// Requests for one host that bypassed the base URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bypassed {
    /// The host, lowercase (IPv6 in brackets).
    pub host: String,
    /// The port.
    pub port: u16,
    /// Refused without connecting (replay, or a web page's request).
    pub refused: u64,
    /// Tunnelled or relayed unrecorded (record, auto, off).
    pub tunnelled: u64,
    /// The first token of the `User-Agent`s those requests carried (`Groq/Python`), a few at
    /// most: which client it was, when the client said (a `CONNECT` rarely does).
    pub clients: Vec<String>,
}

impl Bypassed {
    /// Every request counted for the host.
    pub fn requests(&self) -> u64 {
        self.refused + self.tunnelled
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    Refused,
    Tunnelled,
}

/// What was counted for one host.
#[derive(Debug, Default)]
struct Counts {
    refused: u64,
    tunnelled: u64,
    clients: Vec<String>,
}

/// User-agent tokens kept per host, and the longest kept.
const CLIENTS_KEPT: usize = 4;
const CLIENT_TOKEN_MAX: usize = 64;

/// The first token of a `User-Agent` (`Groq/Python 1.7` -> `Groq/Python`), in plain characters
/// only: enough to tell the client, never more of the header than that.
pub(super) fn client_token(headers: &http::HeaderMap) -> Option<String> {
    let agent = headers.get(http::header::USER_AGENT)?.to_str().ok()?;
    let token: String = agent
        .split_whitespace()
        .next()?
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        .take(CLIENT_TOKEN_MAX)
        .collect();
    (!token.is_empty()).then_some(token)
}

/// The forward-proxy half of the proxy's state: its policy, its own address and the counts.
#[derive(Debug)]
pub(super) struct Forwarder {
    policy: Forwarding,
    own: SocketAddr,
    counts: Mutex<BTreeMap<Target, Counts>>,
}

impl Forwarder {
    pub(super) fn new(policy: Forwarding, own: SocketAddr) -> Forwarder {
        Forwarder {
            policy,
            own,
            counts: Mutex::new(BTreeMap::new()),
        }
    }

    /// The counts so far, by host and port.
    pub(super) fn bypassed(&self) -> Vec<Bypassed> {
        let counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts
            .iter()
            .map(|(target, counts)| Bypassed {
                host: target.host.clone(),
                port: target.port,
                refused: counts.refused,
                tunnelled: counts.tunnelled,
                clients: counts.clients.clone(),
            })
            .collect()
    }

    /// Counts one request; true for the first one of its host (which is worth a log line).
    fn count(&self, target: &Target, counted: Counted, client: Option<String>) -> bool {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let entry = counts.entry(target.clone()).or_default();
        let first = entry.refused == 0 && entry.tunnelled == 0;
        match counted {
            Counted::Refused => entry.refused += 1,
            Counted::Tunnelled => entry.tunnelled += 1,
        }
        if let Some(client) = client {
            if entry.clients.len() < CLIENTS_KEPT && !entry.clients.contains(&client) {
                entry.clients.push(client);
            }
        }
        first
    }

    /// Counts a request the channel refused (a host no route serves): traffic that bypassed
    /// the base URL like a refused forward-proxy request, so a replay whose client swallowed
    /// the refusal still fails.
    pub(super) fn count_refused(&self, target: &Target, client: Option<String>) {
        self.count(target, Counted::Refused, client);
    }

    /// Whether `target` is this proxy itself.
    fn is_own(&self, target: &Target) -> bool {
        if target.port != self.own.port() {
            return false;
        }
        if target.host == "localhost" {
            return self.own.ip().is_loopback() || self.own.ip().is_unspecified();
        }
        match bare_host(&target.host).parse::<IpAddr>() {
            Ok(ip) => {
                ip == self.own.ip()
                    || (ip.is_loopback()
                        && (self.own.ip().is_loopback() || self.own.ip().is_unspecified()))
            }
            Err(_) => false,
        }
    }

    /// Whether `[bypass] allow` lists `target`.
    pub(super) fn allowed(&self, target: &Target) -> bool {
        match &self.policy {
            Forwarding::Catch { allow } => {
                allow.iter().any(|p| p.matches(&target.host, target.port))
            }
            Forwarding::Off => false,
        }
    }
}

/// The middleware in front of every route: forward-proxy requests are answered here, before
/// any routing (`http://example.com/healthz` is not the proxy's health check), and everything
/// else goes on to the routes.
pub(super) async fn intercept(
    recorder: &Recorder,
    forwarder: &Forwarder,
    request: HttpRequest,
    next: Next,
) -> Response {
    let kind = classify(request.method(), request.uri());
    match kind {
        Kind::Origin => next.run(request).await,
        Kind::Absolute(target) if forwarder.is_own(&target) => {
            next.run(to_origin_form(request, &target)).await
        }
        Kind::Connect(target) if forwarder.is_own(&target) => refusal(
            StatusCode::BAD_REQUEST,
            &target,
            "the proxy speaks plain HTTP: send requests to it directly, not through a tunnel to it",
        ),
        Kind::Connect(target) | Kind::Absolute(target) => {
            answer_foreign(recorder, forwarder, target, request).await
        }
    }
}

/// Answers a forward-proxy request for another host according to the policy and the mode.
async fn answer_foreign(
    recorder: &Recorder,
    forwarder: &Forwarder,
    target: Target,
    request: HttpRequest,
) -> Response {
    let from_this_machine = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .is_some_and(|ConnectInfo(peer)| peer.ip().is_loopback());
    if !from_this_machine {
        tracing::warn!("refused a forward-proxy request for {target} from another machine");
        return refusal(
            StatusCode::FORBIDDEN,
            &target,
            "forward-proxy requests are only answered for clients on this machine",
        );
    }
    if forwarder.policy == Forwarding::Off {
        return refusal(
            StatusCode::FORBIDDEN,
            &target,
            "this proxy does not forward requests to other hosts (forwarding is off)",
        );
    }
    let mode = recorder.mode();
    let allowed = forwarder.allowed(&target);
    let client = client_token(request.headers());
    if allowed && mode == Mode::Replay {
        tracing::warn!(
            "refused a forward-proxy request for {target}, an allowed host: replay never \
             connects anywhere, so the client must reach it directly"
        );
        return refusal(
            StatusCode::FORBIDDEN,
            &target,
            "the host is allowed, but replay never connects anywhere: the client must reach it \
             directly, not through this proxy",
        );
    }
    if request.headers().contains_key(http::header::ORIGIN) {
        forwarder.count(&target, Counted::Refused, client.clone());
        tracing::warn!("refused a forward-proxy request for {target} sent by a web page");
        return refusal(
            StatusCode::FORBIDDEN,
            &target,
            "a request sent by a web page is never forwarded",
        );
    }
    let upstream = match (mode, recorder.upstream(&target.to_string()).ok()) {
        (Mode::Replay, _) | (_, None) => {
            if forwarder.count(&target, Counted::Refused, client.clone()) {
                tracing::warn!(
                    "refused {target}: the client bypassed the proxy's routes (its base URL \
                     points at the host itself), and replay never connects anywhere"
                );
            }
            return refusal(
                StatusCode::FORBIDDEN,
                &target,
                "the client bypassed the proxy's routes (its base URL points at the host \
                 itself), so the request can be neither recorded nor replayed, and replay never \
                 connects anywhere; point the client's base URL at the proxy",
            );
        }
        (_, Some(upstream)) => upstream.clone(),
    };
    if !allowed && forwarder.count(&target, Counted::Tunnelled, client) {
        tracing::warn!(
            "tunnelled {target} unrecorded: the client bypassed the proxy's routes (its base \
             URL points at the host itself); a replay will refuse it"
        );
    }
    if request.method() == http::Method::CONNECT {
        tunnel(&upstream, &target, request).await
    } else {
        relay(&upstream, &target, request).await
    }
}

/// Connects to the target, answers 200 and then copies bytes both ways until either side
/// closes. Nothing is read or added: TLS passes through as it is.
async fn tunnel(
    upstream: &crate::upstream::Upstream,
    target: &Target,
    request: HttpRequest,
) -> Response {
    let mut server = match upstream
        .open_tunnel(bare_host(&target.host), target.port)
        .await
    {
        Ok(stream) => stream,
        Err(err) => {
            return refusal(
                StatusCode::BAD_GATEWAY,
                target,
                &format!("cannot connect to {target}: {err}"),
            )
        }
    };
    let on_upgrade = hyper::upgrade::on(request);
    let shown = target.to_string();
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let mut client = hyper_util::rt::TokioIo::new(upgraded);
                if let Err(err) = tokio::io::copy_bidirectional(&mut client, &mut server).await {
                    tracing::debug!("tunnel to {shown} ended: {err}");
                }
            }
            Err(err) => tracing::debug!("the client of the tunnel to {shown} went away: {err}"),
        }
    });
    StatusCode::OK.into_response()
}

/// Sends a plain-HTTP forward-proxy request on as the client sent it and streams the answer
/// back.
async fn relay(
    upstream: &crate::upstream::Upstream,
    target: &Target,
    request: HttpRequest,
) -> Response {
    let (parts, body) = request.into_parts();
    let method = match reqwest::Method::from_bytes(parts.method.as_str().as_bytes()) {
        Ok(method) => method,
        Err(_) => return refusal(StatusCode::BAD_REQUEST, target, "an invalid method"),
    };
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let body = reqwest::Body::wrap_stream(body.into_data_stream());
    let url = parts.uri.to_string();
    let answer = match upstream.relay(method, &url, &headers, body).await {
        Ok(answer) => answer,
        Err(err) => {
            // The URL is the client's own, but reqwest's message repeats it; the cause is
            // what matters.
            let err = err.without_url();
            return refusal(
                StatusCode::BAD_GATEWAY,
                target,
                &format!(
                    "cannot reach {target}: {}",
                    crate::error::report(&err as &dyn std::error::Error)
                ),
            );
        }
    };
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers: Vec<(http::HeaderName, HeaderValue)> = answer
        .headers()
        .iter()
        .filter(|(name, _)| !crate::upstream::HOP_BY_HOP.contains(&name.as_str()))
        .filter_map(|(name, value)| {
            Some((
                http::HeaderName::from_bytes(name.as_str().as_bytes()).ok()?,
                HeaderValue::from_bytes(value.as_bytes()).ok()?,
            ))
        })
        .collect();
    let mut out = Response::new(Body::from_stream(
        answer.bytes_stream().map_err(std::io::Error::other),
    ));
    *out.status_mut() = status;
    for (name, value) in headers {
        out.headers_mut().append(name, value);
    }
    out
}

/// An absolute-form request for the proxy itself, as the origin-form request it stands for.
fn to_origin_form(request: HttpRequest, target: &Target) -> HttpRequest {
    let (mut parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    if let Ok(uri) = path.parse::<Uri>() {
        parts.uri = uri;
    }
    if let Ok(host) = HeaderValue::from_str(&target.to_string()) {
        parts.headers.insert(http::header::HOST, host);
    }
    HttpRequest::from_parts(parts, body)
}

/// The JSON error answer of a refused forward-proxy request.
fn refusal(status: StatusCode, target: &Target, reason: &str) -> Response {
    let body = json!({
        "type": "error",
        "error": {
            "type": "cassette_bypass",
            "code": "cassette_bypass",
            "message": format!("cassette: {target}: {reason}"),
            "host": target.host,
            "port": target.port,
        }
    });
    let mut response = (status, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert("x-should-retry", HeaderValue::from_static("false"));
    headers.insert("x-cassette", HeaderValue::from_static("refused"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(method: &str, target: &str) -> Kind {
        let method = http::Method::from_bytes(method.as_bytes()).unwrap();
        classify(&method, &target.parse::<Uri>().unwrap())
    }

    fn to(host: &str, port: u16) -> Target {
        Target {
            host: host.to_owned(),
            port,
        }
    }

    #[test]
    fn request_targets_are_classified() {
        let table = [
            ("POST", "/v1/chat/completions", Kind::Origin),
            ("GET", "/healthz", Kind::Origin),
            (
                "CONNECT",
                "api.openai.com:443",
                Kind::Connect(to("api.openai.com", 443)),
            ),
            (
                "CONNECT",
                "API.Anthropic.com:8443",
                Kind::Connect(to("api.anthropic.com", 8443)),
            ),
            ("CONNECT", "[::1]:9000", Kind::Connect(to("[::1]", 9000))),
            (
                "POST",
                "http://api.openai.com/v1/chat/completions",
                Kind::Absolute(to("api.openai.com", 80)),
            ),
            (
                "GET",
                "https://example.com/x?y=1",
                Kind::Absolute(to("example.com", 443)),
            ),
            (
                "GET",
                "http://127.0.0.1:8089/healthz",
                Kind::Absolute(to("127.0.0.1", 8089)),
            ),
        ];
        for (method, target, expected) in table {
            assert_eq!(kind(method, target), expected, "{method} {target}");
        }
    }

    #[test]
    fn the_proxys_own_address_is_recognised() {
        let own = Forwarder::new(
            Forwarding::default(),
            SocketAddr::from(([127, 0, 0, 1], 8089)),
        );
        assert!(own.is_own(&to("127.0.0.1", 8089)));
        assert!(own.is_own(&to("localhost", 8089)));
        assert!(own.is_own(&to("[::1]", 8089)));
        assert!(!own.is_own(&to("127.0.0.1", 8090)));
        assert!(!own.is_own(&to("api.openai.com", 8089)));
        assert!(!own.is_own(&to("10.0.0.7", 8089)));
    }

    #[test]
    fn host_patterns_parse_match_and_print() {
        let p = |s: &str| s.parse::<HostPattern>().unwrap();
        assert!(p("api.example.com").matches("API.example.com", 443));
        assert!(p("api.example.com").matches("api.example.com", 80));
        assert!(!p("api.example.com").matches("x.api.example.com", 443));
        assert!(p("api.example.com:8443").matches("api.example.com", 8443));
        assert!(!p("api.example.com:8443").matches("api.example.com", 443));
        assert!(p("*.example.com").matches("a.b.example.com", 443));
        assert!(!p("*.example.com").matches("example.com", 443));
        assert!(!p("*.example.com").matches("badexample.com", 443));
        assert!(p("[::1]:9000").matches("[::1]", 9000));
        assert!(p("::1").matches("[::1]", 1));
        assert!(p("10.0.0.7").matches("10.0.0.7", 5));
        for text in [
            "api.example.com",
            "api.example.com:8443",
            "*.example.com",
            "[::1]:9000",
        ] {
            assert_eq!(p(text).to_string(), text);
        }
        assert_eq!(p("*.Example.com").no_proxy_entry(), ".example.com");
        assert_eq!(
            p("api.example.com:8443").no_proxy_entry(),
            "api.example.com"
        );
        for bad in [
            "",
            "*",
            "http://x.com",
            "a..b",
            "x.com:port",
            "x.com:70000",
            "*.10.0.0.1",
            "[::1",
        ] {
            let err = bad.parse::<HostPattern>().unwrap_err();
            assert!(err.contains("host pattern"), "{bad}: {err}");
        }
    }
}
