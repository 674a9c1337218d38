//! Requests over the in-process channel (`proxy/channel.rs`), which carry their original URL:
//! a host a route serves (`proxy/hosts.rs`) is routed there and then handled like any request
//! (keyed, stored, counted, scoped, explained); a host `[bypass] allow` lists, or a loopback
//! one, gets a "go direct" answer, which tells the transport to send the request itself; a
//! GET of any other host is answered from its stored download when there is one (in adopt,
//! from the test's tapes, stored first: `engine/download.rs`); anything else is refused in
//! every mode, and the refusal is counted for the test that sent it
//! (the scope its `x-cassette-scope` names), else for the running one.

use super::answer::{error_response, outcome_response, Asker};
use super::control::NamedScope;
use super::guard::is_loopback;
use super::next_url::ReachedAt;
use super::state::{AppState, OnChannel};
use crate::error::Error;
use crate::proxy::forward::{client_token, Target};
use crate::proxy::scopes::DEFAULT_SCOPE;
use crate::scope::Scope;
use axum::extract::{Request as HttpRequest, State};
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The route a channel request's host chose; the request's path is then the route's own.
#[derive(Debug, Clone)]
pub(super) struct Routed(pub(super) String);

/// The value of `x-cassette` on a "go direct" answer.
pub(super) const DIRECT: &str = "direct";

/// The header of a transport that cannot write its request target in absolute form (aiohttp
/// writes the path): the original URL. Removed before anything else sees the request.
const URL_HEADER: &str = "x-cassette-url";

/// The header of a transport asking where a host's requests go (`x-cassette: routed`,
/// `direct` or `refused` on a 204) before it sends any: nothing is forwarded or counted.
const PROBE_HEADER: &str = "x-cassette-probe";

/// The outermost layer: routes a channel request by its URL; passes everything else on.
pub(super) async fn channel(
    State(state): State<Arc<AppState>>,
    mut request: HttpRequest,
    next: Next,
) -> Response {
    if request.extensions().get::<OnChannel>().is_none() {
        return next.run(request).await;
    }
    // Scopes are named below (a refusal, a download), before `intercept` would follow the pipe:
    // a test's begin must be read first.
    state.follow_pipe();
    if let Some(url) = request.headers_mut().remove(URL_HEADER) {
        match url.to_str().ok().and_then(|u| u.parse::<Uri>().ok()) {
            Some(uri) if uri.authority().is_some() => *request.uri_mut() = uri,
            _ => {
                return plain(
                    StatusCode::BAD_REQUEST,
                    "cassette_bad_request",
                    "cassette: x-cassette-url must be an absolute http(s) URL",
                )
            }
        }
    }
    if request.uri().authority().is_none() {
        // Origin-form requests on the channel (the proxy's own paths, routes by their first
        // segment) are served as over HTTP.
        return next.run(request).await;
    }
    if request.method() == http::Method::CONNECT {
        return plain(
            StatusCode::BAD_REQUEST,
            "cassette_bad_request",
            "cassette: the channel carries requests with their URL, not tunnels",
        );
    }
    let Ok(url) = url::Url::parse(&request.uri().to_string()) else {
        return plain(
            StatusCode::BAD_REQUEST,
            "cassette_bad_request",
            "cassette: the channel's request target must be an absolute http(s) URL",
        );
    };
    let routes = &state.recorder.config().routes;
    let routed = state.hosts.route_url(routes, &url);
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let port = url.port_or_known_default().unwrap_or(80);
    let target = Target {
        host: host.clone(),
        port,
    };
    let direct = routed.is_none() && (is_loopback(&host) || state.forward.allowed(&target));
    if request.headers().contains_key(PROBE_HEADER) {
        let verdict = match (&routed, direct) {
            (Some(_), _) => "routed",
            (None, true) => DIRECT,
            (None, false) => "refused",
        };
        let mut answer = StatusCode::NO_CONTENT.into_response();
        answer
            .headers_mut()
            .insert("x-cassette", HeaderValue::from_static(verdict));
        return answer;
    }
    if let Some((route, path)) = routed {
        let name = route.name.clone();
        let path_and_query = match url.query() {
            Some(query) => format!("{path}?{query}"),
            None => path,
        };
        let (mut parts, body) = request.into_parts();
        let Ok(uri) = path_and_query.parse::<Uri>() else {
            return plain(
                StatusCode::BAD_REQUEST,
                "cassette_bad_request",
                "cassette: the URL's path cannot be carried on",
            );
        };
        parts.uri = uri;
        parts.extensions.insert(Routed(name));
        parts
            .extensions
            .insert(ReachedAt(url.origin().ascii_serialization()));
        return next.run(HttpRequest::from_parts(parts, body)).await;
    }
    if direct {
        return go_direct(&target);
    }
    // A download (a GET or HEAD of a host no route serves): answered from its recording, or
    // in adopt from the test's tapes, when one holds it; refused below otherwise.
    if crate::is_download_method(request.method().as_str()) {
        let (id, scope) = match &state.scopes {
            Some(scopes) => {
                let named = request.extensions().get::<NamedScope>();
                let id = match named {
                    Some(NamedScope(id)) if scopes.begun(id) => id.clone(),
                    _ => DEFAULT_SCOPE.to_owned(),
                };
                let scope = scopes.scope(&id);
                (Some((scopes, id)), scope)
            }
            None => (None, Scope::default()),
        };
        let headers: Vec<(String, String)> = request
            .headers()
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let method = request.method().as_str().to_owned();
        match state
            .recorder
            .download(&method, &url, &headers, &scope)
            .await
        {
            Ok(None) => {}
            Ok(Some(outcome)) => {
                if let Some((scopes, id)) = &id {
                    scopes.count(id, |tally| tally.outcome(&outcome));
                }
                return outcome_response(outcome);
            }
            Err(err) => {
                if let Some((scopes, id)) = &id {
                    let message = state.message(&err);
                    scopes.count(id, |tally| tally.error(&err, message, None));
                }
                let asker = Asker {
                    user_agent: None,
                    ollama: false,
                };
                return state.answer_error(&err, &asker);
            }
        }
    }
    let token = client_token(request.headers());
    state.forward.count_refused(&target, token.clone());
    let client = token.unwrap_or_else(|| "an unnamed client".to_owned());
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    let err = Error::Unrouted {
        host: target.to_string(),
        url: shown.to_string(),
        client,
    };
    if let Some(scopes) = &state.scopes {
        // Counted for the test that sent it (its alias), else for the one running.
        let named = request.extensions().get::<NamedScope>();
        let id = match named {
            Some(NamedScope(id)) if scopes.begun(id) => id.as_str(),
            _ => DEFAULT_SCOPE,
        };
        let message = state.message(&err);
        scopes.count(id, |tally| tally.error(&err, message, None));
    }
    let user_agent = request
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // Not an upstream failure, so the answer already says not to retry.
    state.answer_error(
        &err,
        &Asker {
            user_agent,
            ollama: false,
        },
    )
}

/// The answer that tells the transport to send the request itself.
fn go_direct(target: &Target) -> Response {
    let mut response = plain(
        StatusCode::MISDIRECTED_REQUEST,
        "cassette_direct",
        &format!(
            "cassette: {target} is not an LLM route ([bypass] allow lists it, or it is this \
             machine): the client reaches it directly"
        ),
    );
    response
        .headers_mut()
        .insert("x-cassette", HeaderValue::from_static(DIRECT));
    response
}

fn plain(status: StatusCode, kind: &str, message: &str) -> Response {
    let mut response = error_response(status, kind, message, None);
    response
        .headers_mut()
        .insert("x-should-retry", HeaderValue::from_static("false"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_this_machine() {
        for host in [
            "localhost",
            "app.localhost",
            "127.0.0.1",
            "127.1.2.3",
            "[::1]",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["example.com", "10.0.0.1", "localhost.example.com", "[::2]"] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
