//! The proxy's HTTP server (axum): turns HTTP requests into recorder requests and outcomes and
//! errors back into HTTP answers. Nothing outside this module sees an axum type.

use super::forward::{self, Forwarder};
use super::{Advice, ProxyConfig, ProxyStats, StatsHandle};
use crate::config::DEFAULT_TARGET;
use crate::engine::Recorder;
use crate::error::{report, Error};
use crate::request::Request;
use crate::response::{Outcome, ResponseBody, Source};
use axum::body::Body;
use axum::extract::{Request as HttpRequest, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::net::TcpListener;

/// How much of an over-limit body is still read (and discarded) before the 413 goes out, so
/// the client, still sending, sees the answer rather than a reset connection.
const DRAIN_AFTER_LIMIT: usize = 16 * 1024 * 1024;

/// What every request handler shares.
pub(super) struct AppState {
    pub(super) recorder: Recorder,
    max_body: usize,
    advice: Option<Advice>,
    /// Mounted route names (every configured route except `default`).
    mounts: Vec<String>,
    pub(super) requests: AtomicU64,
    /// The status a replay miss is answered with.
    miss_status: StatusCode,
    /// Forward-proxy requests: the traffic that bypassed the base URL.
    pub(super) forward: Forwarder,
}

impl AppState {
    pub(super) fn new(recorder: Recorder, config: &ProxyConfig, own: SocketAddr) -> AppState {
        let mounts = recorder
            .config()
            .routes
            .iter()
            .map(|r| r.name.clone())
            .filter(|name| name != DEFAULT_TARGET)
            .collect();
        AppState {
            recorder,
            max_body: config.max_body,
            advice: config.advice,
            mounts,
            requests: AtomicU64::new(0),
            miss_status: StatusCode::from_u16(config.miss_status).unwrap_or(StatusCode::CONFLICT),
            forward: Forwarder::new(config.forwarding.clone(), own),
        }
    }
}

impl AppState {
    /// The text of an error answer: the error with its causes, and the embedder's advice.
    fn message(&self, err: &Error) -> String {
        let message = report(err);
        match self.advice.and_then(|advice| advice(err)) {
            Some(advice) => format!("{message} ({advice})"),
            None => message,
        }
    }

    /// Answers a recorder error. The client gets the details, but a 409 is easy to lose inside
    /// a test framework's output, so the proxy's own log keeps every error visible too.
    fn error_response(&self, err: &Error) -> Response {
        let message = self.message(err);
        tracing::warn!("{message}");
        let mut response = recorder_error_response(err, &message);
        if matches!(err, Error::Miss(_)) {
            *response.status_mut() = self.miss_status;
        }
        response
    }
}

/// Serves `state` on `listener` until `shutdown` completes; requests in flight finish first.
pub(super) async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // The peer's address tells forward-proxy requests from this machine from others.
    let service = router(state).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service)
        .with_graceful_shutdown(shutdown)
        .await
}

fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/_cassette/stats", get(stats))
        .fallback(proxy_request)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            forward::intercept,
        ))
        .with_state(state)
}

async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    let recorder = &state.recorder;
    json_response(
        StatusCode::OK,
        &json!({
            "status": "ok",
            "mode": recorder.mode().as_str(),
            "store": recorder.store().location(),
            "routes": recorder.config().routes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        }),
    )
}

async fn stats(State(state): State<Arc<AppState>>) -> Response {
    let handle = StatsHandle(state);
    let stats: ProxyStats = handle.get();
    let misses = handle.misses();
    match serde_json::to_value(stats) {
        Ok(mut value) => {
            // The first distinct misses, so a long-running proxy can be asked what it missed.
            value["distinct_misses"] = json!(misses.distinct);
            value["missed"] = json!(misses.notes.iter().take(20).collect::<Vec<_>>());
            json_response(StatusCode::OK, &value)
        }
        Err(e) => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cassette_internal_error",
            &format!("cannot serialize the counters: {e}"),
            None,
        ),
    }
}

async fn proxy_request(State(state): State<Arc<AppState>>, request: HttpRequest) -> Response {
    state.requests.fetch_add(1, Ordering::Relaxed);
    let incoming = match read_request(&state, request).await {
        Ok(incoming) => incoming,
        Err(rejection) => return rejection,
    };
    match state.recorder.handle(incoming).await {
        Ok(outcome) => outcome_response(outcome),
        Err(err) => state.error_response(&err),
    }
}

/// Turns an HTTP request into the recorder's request: routes it, checks the body limit and the
/// headers, reads the body.
async fn read_request(state: &AppState, request: HttpRequest) -> Result<Request, Response> {
    let (parts, body) = request.into_parts();
    let limit = state.max_body;

    if let Some(length) = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        if length > limit as u64 {
            drain(body, DRAIN_AFTER_LIMIT).await;
            return Err(state.error_response(&Error::BodyTooLarge {
                size: usize::try_from(length).unwrap_or(usize::MAX),
                limit,
            }));
        }
    }

    let mut headers = Vec::with_capacity(parts.headers.len());
    for (name, value) in &parts.headers {
        match value.to_str() {
            Ok(value) => headers.push((name.as_str().to_owned(), value.to_owned())),
            Err(_) => {
                return Err(bad_request(&format!(
                    "header `{name}` is not visible ASCII; cassette cannot key or forward it"
                )))
            }
        }
    }

    let raw_path = parts.uri.path();
    let (target, path) = route(&state.mounts, raw_path);
    let query = parts.uri.query().unwrap_or("").to_owned();

    let body = read_body(state, body).await?;

    if parts.method == http::Method::POST && is_json(&headers) && !body.is_empty() {
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&body) {
            return Err(bad_request(&format!(
                "the request body is declared as JSON but does not parse: {e}"
            )));
        }
    }

    Ok(Request {
        target,
        method: parts.method.as_str().to_owned(),
        path,
        query,
        headers,
        body,
    })
}

/// Splits a request path into the route (target) and the path the upstream sees.
fn route(mounts: &[String], raw_path: &str) -> (String, String) {
    let trimmed = raw_path.trim_start_matches('/');
    let (first, rest) = match trimmed.find('/') {
        Some(i) => (&trimmed[..i], &trimmed[i..]),
        None => (trimmed, ""),
    };
    if !first.is_empty() && mounts.iter().any(|m| m == first) {
        let path = if rest.is_empty() { "/" } else { rest };
        (first.to_owned(), path.to_owned())
    } else {
        let path = if raw_path.is_empty() { "/" } else { raw_path };
        (DEFAULT_TARGET.to_owned(), path.to_owned())
    }
}

fn is_json(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(name, value)| {
        name.eq_ignore_ascii_case("content-type") && {
            let essence = value
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            essence == "application/json" || essence.ends_with("+json")
        }
    })
}

async fn read_body(state: &AppState, body: Body) -> Result<Bytes, Response> {
    let limit = state.max_body;
    let mut body = body;
    let mut buffer: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| bad_request(&format!("cannot read the request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if buffer.len() + data.len() > limit {
                let size = buffer.len() + data.len();
                drain(body, DRAIN_AFTER_LIMIT).await;
                return Err(state.error_response(&Error::BodyTooLarge { size, limit }));
            }
            buffer.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(buffer))
}

/// Reads and discards up to `budget` more bytes of a body.
async fn drain(mut body: Body, budget: usize) {
    let mut seen = 0usize;
    while seen < budget {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    seen += data.len();
                }
            }
            _ => return,
        }
    }
}

fn outcome_response(outcome: Outcome) -> Response {
    let Outcome {
        key,
        source,
        response,
    } = outcome;
    let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let body = match response.body {
        ResponseBody::Full(bytes) => Body::from(bytes),
        ResponseBody::Stream(stream) => Body::from_stream(stream),
    };
    let mut out = Response::new(body);
    *out.status_mut() = status;
    let headers = out.headers_mut();
    for (name, value) in &response.headers {
        // A header the upstream sent that HTTP cannot carry again is dropped, not fatal.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(name, value);
        }
    }
    let source = match source {
        Source::Replayed => "replayed",
        Source::Recorded => "recorded",
        Source::PassedThrough => "passed-through",
        Source::Missed => "missed",
    };
    headers.insert("x-cassette", HeaderValue::from_static(source));
    if let Ok(value) = HeaderValue::from_str(key.as_str()) {
        headers.insert("x-cassette-key", value);
    }
    out
}

/// The JSON error answer for a recorder error, with `message` as its text.
fn recorder_error_response(err: &Error, message: &str) -> Response {
    let status =
        StatusCode::from_u16(err.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut detail = serde_json::Map::new();
    match err {
        Error::Miss(miss) => {
            detail.insert("key".into(), json!(miss.key));
            detail.insert("profile".into(), json!(miss.profile));
            detail.insert("target".into(), json!(miss.target));
            detail.insert("method".into(), json!(miss.method));
            detail.insert("path".into(), json!(miss.path));
            detail.insert("model".into(), json!(miss.model));
            detail.insert("store".into(), json!(miss.store));
            if let Some(repeat) = &miss.repeat {
                detail.insert("repeat".into(), json!(repeat));
            }
            detail.insert(
                "explanation".into(),
                serde_json::to_value(&miss.explanation).unwrap_or(Value::Null),
            );
        }
        Error::Upstream { endpoint, .. } => {
            detail.insert("upstream".into(), json!(endpoint));
        }
        Error::NoUpstream { target } => {
            detail.insert("target".into(), json!(target));
        }
        Error::Corrupt { key, .. } => {
            detail.insert("key".into(), json!(key));
        }
        _ => {}
    }
    let mut response = error_response(status, err.kind(), message, Some(detail));
    // Only an unreachable upstream is worth retrying; a miss, a bad request or a broken
    // configuration answers the same way every time.
    if !matches!(err, Error::Upstream { .. }) {
        response
            .headers_mut()
            .insert("x-should-retry", HeaderValue::from_static("false"));
    }
    response
}

fn bad_request(reason: &str) -> Response {
    let mut response = error_response(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        &format!("invalid request: {reason}"),
        None,
    );
    response
        .headers_mut()
        .insert("x-should-retry", HeaderValue::from_static("false"));
    response
}

fn error_response(
    status: StatusCode,
    kind: &str,
    message: &str,
    detail: Option<serde_json::Map<String, Value>>,
) -> Response {
    let mut error = serde_json::Map::new();
    error.insert("type".into(), json!(kind));
    error.insert("code".into(), json!(kind));
    error.insert("message".into(), json!(message));
    for (name, value) in detail.unwrap_or_default() {
        error.insert(name, value);
    }
    // `type: error` at the top is the Anthropic envelope; OpenAI clients read `error` only.
    json_response(status, &json!({ "type": "error", "error": error }))
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    let mut response = (status, value.to_string()).into_response();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_strip_the_mount_and_default_keeps_the_path() {
        let mounts = vec!["anthropic".to_owned(), "ollama".to_owned()];
        let table = [
            ("/v1/chat/completions", "default", "/v1/chat/completions"),
            ("/anthropic/v1/messages", "anthropic", "/v1/messages"),
            ("/anthropic", "anthropic", "/"),
            ("/anthropicx/v1", "default", "/anthropicx/v1"),
            ("/ollama/api/chat", "ollama", "/api/chat"),
            ("/", "default", "/"),
        ];
        for (raw, target, path) in table {
            assert_eq!(
                route(&mounts, raw),
                (target.to_owned(), path.to_owned()),
                "{raw}"
            );
        }
    }

    #[test]
    fn json_content_types_are_recognised() {
        let h = |v: &str| vec![("Content-Type".to_owned(), v.to_owned())];
        assert!(is_json(&h("application/json")));
        assert!(is_json(&h("application/json; charset=utf-8")));
        assert!(is_json(&h("application/vnd.api+json")));
        assert!(!is_json(&h("text/plain")));
    }
}
