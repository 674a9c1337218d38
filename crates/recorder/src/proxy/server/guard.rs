//! Refuses strangers before anything else looks at a request: a `Host` that is not the
//! proxy's own (DNS rebinding) and pages a browser sends from origins not allowed; answers the
//! CORS preflights of allowed origins itself, so that none reaches an upstream.

use super::state::AppState;
use super::state::OnChannel;
use crate::error::Error;
use crate::proxy::config::{parse_origin, Exposure};
use axum::extract::{Request as HttpRequest, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// Refuses requests from strangers before anything else looks at them: a `Host` that is not
/// the proxy's own (DNS rebinding), and requests a browser sends for a web page whose origin
/// was not allowed. CORS preflights never reach the upstream: allowed origins get their answer
/// here, others a refusal.
pub(super) async fn guard(
    State(state): State<Arc<AppState>>,
    request: HttpRequest,
    next: Next,
) -> Response {
    let headers = request.headers();
    let host = headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    // A channel request names the vendor's host: only the socket's owner can send one.
    let on_channel = request.extensions().get::<OnChannel>().is_some();
    if let Some(host) = host.filter(|_| !on_channel) {
        if !state.host_allowed(host) {
            return state.error_response(&Error::ForeignHost {
                host: host.to_owned(),
            });
        }
    }
    let origin = match state.browser_origin(headers) {
        Ok(origin) => origin,
        Err(refused) => return state.error_response(&refused),
    };
    let Some(origin) = origin else {
        return next.run(request).await;
    };
    if request.method() == Method::OPTIONS
        && headers.contains_key(http::header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        return preflight(&origin, headers);
    }
    let mut response = next.run(request).await;
    allow_origin(response.headers_mut(), &origin);
    response
}

impl AppState {
    /// Whether a request naming `host` (a `Host` header, with or without port) is addressed to
    /// the proxy: a loopback name or address, the listening address, any address when remote
    /// exposure was allowed (an address cannot be rebound, a name can), or an allowed name.
    fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host).trim_end_matches('.').to_ascii_lowercase();
        if is_loopback(&name) {
            return true;
        }
        if let Ok(ip) = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            return ip == self.listen.ip() || self.exposure == Exposure::AllowRemote;
        }
        self.allowed_hosts.contains(&name)
    }

    /// The origin of a request a browser sent for a web page, when it is allowed; `None` when
    /// no browser page sent it; an error when a page the proxy does not serve did.
    fn browser_origin(&self, headers: &HeaderMap) -> Result<Option<String>, Error> {
        let origin = headers
            .get(http::header::ORIGIN)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        match origin {
            Some(origin) => match parse_origin(&origin) {
                Ok(normalized) if self.allowed_origins.contains(&normalized) => Ok(Some(origin)),
                _ => Err(Error::BrowserOrigin {
                    origin: format!("origin `{origin}`"),
                }),
            },
            None => {
                // A cross-site request without `Origin` (a simple GET from an image or a
                // form navigation) still says where it comes from in `Sec-Fetch-Site`.
                let site = headers
                    .get("sec-fetch-site")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                if matches!(site, "cross-site" | "same-site") {
                    return Err(Error::BrowserOrigin {
                        origin: format!("on another site (Sec-Fetch-Site: {site})"),
                    });
                }
                Ok(None)
            }
        }
    }
}

/// The host part of a `Host` value (`name`, `name:port`, `[v6]:port`).
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split_once(']').map_or(host, |(v6, _)| &v6[1..]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The proxy's own answer to the CORS preflight of an allowed origin.
fn preflight(origin: &str, headers: &HeaderMap) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let out = response.headers_mut();
    allow_origin(out, origin);
    if let Some(method) = headers.get(http::header::ACCESS_CONTROL_REQUEST_METHOD) {
        out.insert(http::header::ACCESS_CONTROL_ALLOW_METHODS, method.clone());
    }
    if let Some(asked) = headers.get(http::header::ACCESS_CONTROL_REQUEST_HEADERS) {
        out.insert(http::header::ACCESS_CONTROL_ALLOW_HEADERS, asked.clone());
    }
    out.insert(
        http::header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    response
}

fn allow_origin(headers: &mut HeaderMap, origin: &str) {
    if let Ok(value) = HeaderValue::from_str(origin) {
        headers.insert(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
    }
    headers.insert(
        http::header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("x-cassette, x-cassette-key"),
    );
    headers.append(http::header::VARY, HeaderValue::from_static("origin"));
}

/// Whether the lower-case host `name` names this machine: `localhost`, `*.localhost` or a
/// loopback address (bracketed or not). The guard and the channel's "go direct" share it.
pub(super) fn is_loopback(name: &str) -> bool {
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bare == "localhost" || bare.ends_with(".localhost"),
    }
}
