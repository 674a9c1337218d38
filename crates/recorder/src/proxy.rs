//! The HTTP proxy: any client in any language records and replays by pointing its base URL here.
//!
//! # Routing
//!
//! A request whose first path segment names a configured route (`/anthropic/v1/messages` with
//! a route `anthropic`) goes to that route: the segment is stripped before keying and before
//! forwarding, and the route name becomes the key's target. Everything else goes to the
//! `default` route with its path unchanged. The upstream URL is the route's base URL joined
//! with the remaining path by [`crate::upstream::join_url`], which never doubles a shared run
//! such as `/v1`.
//!
//! Two paths belong to the proxy itself: `GET /healthz` and `GET /_cassette/stats`.
//!
//! # Errors
//!
//! Every error is answered as JSON in the style the OpenAI and Anthropic SDKs parse
//! (`{"type": "error", "error": {"type", "message", ...}}`). A replay miss is a 409 with
//! `x-should-retry: false`, so the SDKs raise at once instead of retrying: they retry 409 by
//! default and would otherwise bury the miss under a slow, misleading connection error.

use crate::config::DEFAULT_TARGET;
use crate::error::Error;
use crate::recorder::{IncomingRequest, Outcome, Recorder, ResponseBody, Source, Stats};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde::Serialize;
use serde_json::{json, Value};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The address `cassette proxy` listens on by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8089";

/// How much of an over-limit body is still read (and discarded) before the 413 goes out, so
/// the client, still sending, sees the answer rather than a reset connection.
const DRAIN_AFTER_LIMIT: usize = 16 * 1024 * 1024;

/// Whether the proxy may listen on an address other machines can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Exposure {
    /// Loopback addresses only (the default: a proxy holding an API key must not be open to
    /// the network by accident).
    #[default]
    LoopbackOnly,
    /// Any address; the caller asked for it explicitly and should warn.
    AllowRemote,
}

/// Proxy settings, validated before a socket is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    /// Address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Largest request body accepted; larger ones get 413.
    pub max_body: usize,
    /// Whether a non-loopback `listen` is allowed.
    pub exposure: Exposure,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8089)),
            max_body: crate::config::DEFAULT_MAX_BODY,
            exposure: Exposure::LoopbackOnly,
        }
    }
}

impl ProxyConfig {
    /// Loopback on a free port, the default body limit: what tests and `cassette exec` use.
    pub fn ephemeral() -> ProxyConfig {
        ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..ProxyConfig::default()
        }
    }

    /// Checks the settings without opening anything.
    pub fn validate(&self) -> Result<(), Error> {
        if self.max_body == 0 {
            return Err(Error::Config(
                "the body limit must be at least 1 byte".to_owned(),
            ));
        }
        if !self.listen.ip().is_loopback() && self.exposure == Exposure::LoopbackOnly {
            return Err(Error::Config(format!(
                "{} is not a loopback address; anyone who can reach it can use the proxy (and \
                 its upstream API key). Pass --allow-remote to listen there anyway",
                self.listen
            )));
        }
        Ok(())
    }
}

/// Counters of the proxy: the recorder's plus the requests the proxy received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ProxyStats {
    /// Requests received for upstream paths (health and stats requests not counted).
    pub requests: u64,
    /// The recorder's counters.
    #[serde(flatten)]
    pub recorder: Stats,
}

struct AppState {
    recorder: Recorder,
    max_body: usize,
    /// Mounted route names (every configured route except `default`).
    mounts: Vec<String>,
    requests: AtomicU64,
}

/// A proxy bound to a socket, ready to [`serve`](Proxy::serve).
pub struct Proxy {
    state: Arc<AppState>,
    listener: TcpListener,
    addr: SocketAddr,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").field("addr", &self.addr).finish()
    }
}

impl Proxy {
    /// Validates `config` and binds its address.
    pub async fn bind(recorder: Recorder, config: &ProxyConfig) -> Result<Proxy, Error> {
        config.validate()?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| Error::Config(format!("cannot listen on {}: {e}", config.listen)))?;
        Proxy::from_listener(recorder, listener, config.max_body)
    }

    /// Wraps an already bound listener.
    pub fn from_listener(
        recorder: Recorder,
        listener: TcpListener,
        max_body: usize,
    ) -> Result<Proxy, Error> {
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Config(format!("cannot read the listening address: {e}")))?;
        let mounts = recorder
            .config()
            .routes
            .iter()
            .map(|r| r.name.clone())
            .filter(|name| name != DEFAULT_TARGET)
            .collect();
        Ok(Proxy {
            state: Arc::new(AppState {
                recorder,
                max_body,
                mounts,
                requests: AtomicU64::new(0),
            }),
            listener,
            addr,
        })
    }

    /// The address actually bound (with the real port when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL clients use, such as `http://127.0.0.1:8089`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A handle on the counters that stays valid while and after the proxy serves.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(self.state.clone())
    }

    /// Serves until `shutdown` completes, then stops accepting, lets requests in flight
    /// (streams included) finish, and returns the final counters.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<ProxyStats, Error> {
        let state = self.state.clone();
        axum::serve(self.listener, router(self.state))
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| Error::Config(format!("the proxy server failed: {e}")))?;
        Ok(StatsHandle(state).get())
    }
}

/// Reads the proxy's counters.
#[derive(Clone)]
pub struct StatsHandle(Arc<AppState>);

impl std::fmt::Debug for StatsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StatsHandle").field(&self.get()).finish()
    }
}

impl StatsHandle {
    /// The counters now.
    pub fn get(&self) -> ProxyStats {
        ProxyStats {
            requests: self.0.requests.load(Ordering::Relaxed),
            recorder: self.0.recorder.stats(),
        }
    }
}

/// Serves `recorder` on `listener` until `shutdown` completes; requests in flight finish first.
pub async fn serve(
    recorder: Recorder,
    listener: TcpListener,
    max_body: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ProxyStats, Error> {
    Proxy::from_listener(recorder, listener, max_body)?
        .serve(shutdown)
        .await
}

/// Starts the proxy in the background of the current Tokio runtime, for the Rust API and
/// `cassette exec`: point any client at [`RunningProxy::url`].
pub async fn spawn(recorder: Recorder, config: &ProxyConfig) -> Result<RunningProxy, Error> {
    let proxy = Proxy::bind(recorder, config).await?;
    let addr = proxy.local_addr();
    let stats = proxy.stats_handle();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(proxy.serve(async move {
        // A dropped sender stops the proxy as well.
        let _ = stop_rx.await;
    }));
    Ok(RunningProxy {
        addr,
        stats,
        stop_tx: Some(stop_tx),
        task: Some(task),
    })
}

/// A proxy running in the background. Dropping it stops it without waiting.
#[derive(Debug)]
pub struct RunningProxy {
    addr: SocketAddr,
    stats: StatsHandle,
    stop_tx: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<ProxyStats, Error>>>,
}

impl RunningProxy {
    /// The base URL, such as `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The counters now.
    pub fn stats(&self) -> ProxyStats {
        self.stats.get()
    }

    /// Stops accepting, waits for requests in flight, and returns the final counters.
    pub async fn stop(mut self) -> Result<ProxyStats, Error> {
        if let Some(tx) = self.stop_tx.take() {
            let _ = tx.send(());
        }
        match self.task.take() {
            Some(task) => task
                .await
                .map_err(|e| Error::Config(format!("the proxy task failed: {e}")))?,
            None => Ok(self.stats.get()),
        }
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        if let Some(tx) = self.stop_tx.take() {
            let _ = tx.send(());
        }
    }
}

fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/_cassette/stats", get(stats))
        .fallback(proxy_request)
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
    let stats = StatsHandle(state).get();
    match serde_json::to_value(stats) {
        Ok(value) => json_response(StatusCode::OK, &value),
        Err(e) => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cassette_internal_error",
            &format!("cannot serialize the counters: {e}"),
            None,
        ),
    }
}

async fn proxy_request(State(state): State<Arc<AppState>>, request: Request) -> Response {
    state.requests.fetch_add(1, Ordering::Relaxed);
    let incoming = match read_request(&state, request).await {
        Ok(incoming) => incoming,
        Err(rejection) => return rejection,
    };
    match state.recorder.handle(incoming).await {
        Ok(outcome) => outcome_response(outcome),
        Err(err) => {
            // The client gets the details too, but a 409 is easy to lose inside a test
            // framework's output; the proxy's own log keeps every miss visible.
            tracing::warn!("{err}");
            recorder_error_response(&err)
        }
    }
}

/// Turns an HTTP request into the recorder's request: routes it, checks the body limit and the
/// headers, reads the body.
async fn read_request(state: &AppState, request: Request) -> Result<IncomingRequest, Response> {
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
            return Err(recorder_error_response(&Error::BodyTooLarge {
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

    let body = read_body(body, limit).await?;

    if parts.method == http::Method::POST && is_json(&headers) && !body.is_empty() {
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&body) {
            return Err(bad_request(&format!(
                "the request body is declared as JSON but does not parse: {e}"
            )));
        }
    }

    Ok(IncomingRequest {
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

async fn read_body(body: Body, limit: usize) -> Result<Bytes, Response> {
    let mut body = body;
    let mut buffer: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| bad_request(&format!("cannot read the request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if buffer.len() + data.len() > limit {
                let size = buffer.len() + data.len();
                drain(body, DRAIN_AFTER_LIMIT).await;
                return Err(recorder_error_response(&Error::BodyTooLarge {
                    size,
                    limit,
                }));
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

/// The JSON error answer for a recorder error.
pub fn recorder_error_response(err: &Error) -> Response {
    let status =
        StatusCode::from_u16(err.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let message = err.to_string();
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
    let mut response = error_response(status, err.kind(), &message, Some(detail));
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
    fn remote_listen_needs_explicit_exposure() {
        let remote = ProxyConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], 8089)),
            ..ProxyConfig::default()
        };
        assert!(remote
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--allow-remote"));
        let allowed = ProxyConfig {
            exposure: Exposure::AllowRemote,
            ..remote
        };
        assert!(allowed.validate().is_ok());
        assert!(ProxyConfig::default().validate().is_ok());
        assert!(ProxyConfig::ephemeral().validate().is_ok());
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
