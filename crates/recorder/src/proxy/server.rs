//! The proxy's HTTP server (axum routes on hyper connections of our own, for the header
//! timeout and the connection limit): refuses requests from strangers (foreign `Host`,
//! browser origins), turns HTTP requests into recorder requests and outcomes and errors back
//! into HTTP answers. Nothing outside this module sees an axum or hyper type.

use super::config::{parse_origin, retries_409, Advice, ControlPipe, Exposure, ProxyConfig};
use super::forward::{self, Bypassed, Forwarder};
use super::journal::{Answered, Book, JournalEntry};
#[cfg(unix)]
use super::pipe::Pipe;
use super::scopes::{self, Begin, Control, Notices, Read, RunnerRefused, Scopes, DEFAULT_SCOPE};
use crate::config::DEFAULT_TARGET;
use crate::engine::Recorder;
use crate::engine::Stats;
use crate::error::{report, Error};
use crate::response::{Outcome, ResponseBody, Source};
use axum::body::Body;
use axum::extract::{Request as HttpRequest, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use cassette_tape::Request;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use serde::Serialize;
use serde_json::{json, Value};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

/// How much of an over-limit body is still read (and discarded) before the 413 goes out, so
/// the client, still sending, sees the answer rather than a reset connection.
const DRAIN_AFTER_LIMIT: usize = 16 * 1024 * 1024;

/// Counters of the proxy: the recorder's plus the requests the proxy received.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ProxyStats {
    /// Requests received for upstream paths (health and stats requests, and forward-proxy
    /// requests for other hosts, not counted).
    pub requests: u64,
    /// The recorder's counters.
    #[serde(flatten)]
    pub recorder: Stats,
    /// Forward-proxy requests for other hosts, by host: traffic that bypassed the base URL
    /// (allowed hosts not counted).
    pub bypassed: Vec<Bypassed>,
}

impl ProxyStats {
    /// How many requests bypassed the base URL, over all hosts.
    pub fn bypass_count(&self) -> u64 {
        self.bypassed.iter().map(Bypassed::requests).sum()
    }
}

/// What every request handler shares.
pub(super) struct AppState {
    pub(super) recorder: Recorder,
    max_body: usize,
    advice: Option<Advice>,
    /// Mounted route names (every configured route except `default`).
    mounts: Vec<String>,
    /// The route of a request whose path names none.
    unrouted: String,
    pub(super) requests: AtomicU64,
    /// The address the proxy listens on: a request naming it is addressed to the proxy.
    listen: SocketAddr,
    exposure: Exposure,
    /// Lowercased host names accepted besides loopback ones.
    allowed_hosts: Vec<String>,
    /// Browser origins served, normalized (`scheme://host[:port]`, lowercase).
    allowed_origins: Vec<String>,
    header_timeout: Duration,
    body_timeout: Duration,
    max_connections: usize,
    /// The status a replay miss is answered with.
    miss_status: StatusCode,
    /// The status a replay miss is answered with for clients that retry a 409.
    retrying_miss_status: Option<StatusCode>,
    /// Forward-proxy requests: the traffic that bypassed the base URL.
    pub(super) forward: Forwarder,
    /// One entry per request answered, when the journal is kept.
    pub(super) journal: Book,
    /// Test scopes, when a control token was configured.
    scopes: Option<Scopes>,
    /// The control pipe (stdin), when the runner that started the proxy speaks through it.
    #[cfg(unix)]
    pipe: Option<Pipe>,
}

/// Where there are no Unix pipes, a placeholder: the control pipe setting is refused there.
#[cfg(not(unix))]
pub(super) struct Pipe;

/// The proxy's stdin as a control pipe, when `config` asks for one.
pub(super) fn open_pipe(config: &ProxyConfig) -> Result<Option<Pipe>, Error> {
    if config.control_pipe == ControlPipe::Off {
        return Ok(None);
    }
    #[cfg(unix)]
    {
        Pipe::stdin().map(Some).map_err(|e| {
            tracing::warn!("cannot use stdin as the control pipe: {e}");
            Error::InvalidSetting {
                setting: crate::error::Setting::ControlPipe,
                reason: "stdin must be a pipe the test runner that started the proxy writes to",
            }
        })
    }
    #[cfg(not(unix))]
    Ok(None)
}

impl AppState {
    /// The counters now.
    pub(super) fn stats(&self) -> ProxyStats {
        ProxyStats {
            requests: self.requests.load(Ordering::Relaxed),
            recorder: self.recorder.stats(),
            bypassed: self.forward.bypassed(),
        }
    }

    pub(super) fn new(
        recorder: Recorder,
        config: &ProxyConfig,
        own: SocketAddr,
        pipe: Option<Pipe>,
    ) -> AppState {
        #[cfg(not(unix))]
        let _ = pipe;
        let notices = match config.control_pipe {
            ControlPipe::Off => Notices::Off,
            ControlPipe::Stdio => Notices::Stdout,
        };
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
            unrouted: config.unrouted.clone(),
            requests: AtomicU64::new(0),
            listen: own,
            exposure: config.exposure,
            allowed_hosts: config
                .allowed_hosts
                .iter()
                .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
                .collect(),
            allowed_origins: config
                .allowed_origins
                .iter()
                .filter_map(|o| parse_origin(o).ok())
                .collect(),
            header_timeout: config.header_timeout,
            body_timeout: config.body_timeout,
            max_connections: config.max_connections,
            miss_status: StatusCode::from_u16(config.miss_status).unwrap_or(StatusCode::CONFLICT),
            retrying_miss_status: config
                .retrying_miss_status
                .and_then(|s| StatusCode::from_u16(s).ok()),
            forward: Forwarder::new(config.forwarding.clone(), own),
            journal: Book::new(config.journal),
            scopes: config
                .control_token
                .clone()
                .map(|token| Scopes::new(token, notices)),
            #[cfg(unix)]
            pipe,
        }
    }

    /// Follows the control pipe's messages written so far, in order (every request does
    /// first: see [`super::pipe`]).
    fn follow_pipe(&self) {
        #[cfg(unix)]
        if let Some(pipe) = &self.pipe {
            pipe.drain(|line| self.follow_line(line));
        }
    }

    /// Follows one line of the control pipe.
    #[cfg(unix)]
    fn follow_line(&self, line: Result<&[u8], String>) {
        let Some(scopes) = &self.scopes else {
            return;
        };
        match line.and_then(Control::parse) {
            Ok(Control::Begin { id, scope }) => {
                // A test the recorder cannot begin is noted in its tally.
                let bypassed = self.forward.bypassed();
                let _ = scopes.begin_with(&self.recorder, &id, scope, &bypassed);
            }
            Ok(Control::End { id }) => {
                let end = Read {
                    end: true,
                    ..Read::default()
                };
                scopes
                    .read(&id, &self.forward.bypassed(), end)
                    .with_tapes(&self.recorder, true);
            }
            // Whichever test runs now cannot be vouched for: the runner reads why.
            Err(reason) => scopes.count(DEFAULT_SCOPE, |tally| tally.control_error(reason)),
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
        self.answer_error(err, &Asker::default())
    }

    /// Answers an error of the recorder to a client: a miss gets the miss status, or the one
    /// for clients that retry a 409 whatever `x-should-retry` says; an Ollama client gets the
    /// error in Ollama's shape.
    fn answer_error(&self, err: &Error, asker: &Asker) -> Response {
        let message = self.message(err);
        tracing::warn!("{message}");
        let mut response = recorder_error_response(err, &message, asker.ollama);
        if matches!(err, Error::Miss(_)) {
            *response.status_mut() = match (self.retrying_miss_status, &asker.user_agent) {
                (Some(status), Some(agent)) if retries_409(agent) => status,
                _ => self.miss_status,
            };
        }
        response
    }
}

/// Who asked, for the shape of an error answer.
#[derive(Debug, Default)]
struct Asker {
    /// The client's `User-Agent`.
    user_agent: Option<String>,
    /// Whether it asked an Ollama API (`/api/chat`, `/api/generate`, `/api/embed`), whose
    /// clients show an error whose `error` is not a string as `[object Object]`.
    ollama: bool,
}

impl AppState {}

/// Serves `state` on `listener` until `shutdown` completes; requests in flight finish first.
///
/// Each connection gets the header timeout (hyper closes one that does not send its request
/// headers in time, idle keep-alive connections included), and at most `max_connections` are
/// served at once: the accept loop waits for a free slot, leaving further connections in the
/// kernel's listen queue.
pub(super) async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(state.max_connections));
    let header_timeout = state.header_timeout;
    // Lines of the control pipe are followed as they come too, not only when a request comes:
    // a run of tests that send nothing must not fill the pipe and block their runner. When the
    // runner closes its end it is gone (killed, or crashed before it could stop us): the proxy
    // stops as on SIGTERM instead of serving nobody forever.
    #[cfg(unix)]
    let (follower, runner_gone) = match state.pipe.is_some() {
        true => {
            let (gone_tx, gone_rx) = tokio::sync::oneshot::channel::<()>();
            let state = state.clone();
            let follower = tokio::spawn(async move {
                while let Some(pipe) = &state.pipe {
                    if !pipe.follow(|line| state.follow_line(line)).await {
                        break;
                    }
                }
                tracing::info!("the test runner closed the control pipe (stdin): stopping");
                let _ = gone_tx.send(());
            });
            (Some(follower), Some(gone_rx))
        }
        false => (None, None),
    };
    #[cfg(not(unix))]
    let runner_gone: Option<tokio::sync::oneshot::Receiver<()>> = None;
    let runner_gone = async move {
        match runner_gone {
            Some(gone) => {
                let _ = gone.await;
            }
            None => std::future::pending().await,
        }
    };
    let mut runner_gone = std::pin::pin!(runner_gone);
    let router = router(state);
    // Connections watch `stop` to begin a graceful shutdown, and hold `open` until they end.
    let (stop_tx, stop_rx) = watch::channel(());
    let (open_tx, open_rx) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            () = &mut shutdown => break,
            () = &mut runner_gone => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            () = &mut runner_gone => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
        };
        // Small request and response writes go out at once rather than waiting on Nagle.
        let _ = stream.set_nodelay(true);
        // The peer's address tells forward-proxy requests from this machine from others.
        let service = TowerToHyperService::new(
            router
                .clone()
                .layer(axum::Extension(axum::extract::ConnectInfo(peer))),
        );
        let mut stop = stop_rx.clone();
        let open = open_rx.clone();
        tokio::spawn(async move {
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout);
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!("connection ended: {e}");
                    }
                }
                _ = stop.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop((slot, open));
        });
    }
    drop(listener);
    drop(stop_tx);
    drop(open_rx);
    open_tx.closed().await;
    #[cfg(unix)]
    if let Some(follower) = follower {
        follower.abort();
    }
    Ok(())
}

/// Waits after a failed accept: a connection that was reset before it was accepted costs
/// nothing, running out of file descriptors costs a pause so the loop does not spin.
async fn accept_failed(err: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        err.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::warn!("cannot accept a connection: {err}; trying again in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/_cassette/stats", get(stats))
        .route("/_cassette/scopes", get(ended))
        .route(
            "/_cassette/scopes/{id}",
            get(control).put(control).delete(control),
        )
        .fallback(proxy_request)
        // Strangers are refused first; forward-proxy requests are told apart before that (an
        // own-address one comes back in origin form, and is checked like any other).
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(middleware::from_fn_with_state(state.clone(), intercept))
        .with_state(state)
}

/// Forward-proxy requests are answered before any routing (see [`forward::intercept`]).
async fn intercept(
    State(state): State<Arc<AppState>>,
    request: HttpRequest,
    next: Next,
) -> Response {
    state.follow_pipe();
    let response = forward::intercept(&state.recorder, &state.forward, request, next).await;
    if let Some(scopes) = &state.scopes {
        if response
            .headers()
            .get("x-cassette")
            .is_some_and(|v| v == "refused")
        {
            scopes.refused_bypass();
        }
    }
    response
}

/// Refuses requests from strangers before anything else looks at them: a `Host` that is not
/// the proxy's own (DNS rebinding), and requests a browser sends for a web page whose origin
/// was not allowed. CORS preflights never reach the upstream: allowed origins get their answer
/// here, others a refusal.
async fn guard(State(state): State<Arc<AppState>>, request: HttpRequest, next: Next) -> Response {
    let headers = request.headers();
    let host = headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if let Some(host) = host {
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
        if let Ok(ip) = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            return ip.is_loopback()
                || ip == self.listen.ip()
                || self.exposure == Exposure::AllowRemote;
        }
        name == "localhost" || name.ends_with(".localhost") || self.allowed_hosts.contains(&name)
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

async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    let recorder = &state.recorder;
    json_response(
        StatusCode::OK,
        &json!({
            "status": "ok",
            "mode": recorder.mode().as_str(),
            // Shown as every URL is: a store's location may quote an endpoint.
            "store": recorder.redactor().text(&cassette_keying::shown_urls(&recorder.store().location())),
            "routes": recorder.config().routes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        }),
    )
}

async fn stats(State(state): State<Arc<AppState>>) -> Response {
    let stats = state.stats();
    let misses = state.recorder.misses();
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
    let user_agent = request
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (scoped, request) = match &state.scopes {
        Some(scopes) => {
            let (id, request) = in_scope(request);
            let scope = scopes.scope(&id);
            (Some((scopes, id, scope)), request)
        }
        None => (None, request),
    };
    let asked = state.journal.keeps().then(|| {
        let (route, path) = route(&state.mounts, &state.unrouted, request.uri().path());
        Asked {
            route,
            method: request.method().as_str().to_owned(),
            path,
        }
    });
    let incoming = match read_request(&state, request).await {
        Ok(incoming) => incoming,
        Err(rejection) => {
            if let Some(asked) = asked {
                state.note(asked, None, Answered::Failed, &rejection, Noted::Nothing);
            }
            return rejection;
        }
    };
    let asker = Asker {
        user_agent,
        ollama: cassette_keying::Profile::from_path(&incoming.path).is_ollama(),
    };
    let handled = match &scoped {
        Some((_, _, scope)) => state.recorder.handle_in(incoming, scope).await,
        None => state.recorder.handle(incoming).await,
    };
    match handled {
        Ok(outcome) => {
            if let Some((scopes, id, _)) = &scoped {
                scopes.count(id, |tally| tally.outcome(&outcome));
            }
            let key = outcome.key.clone();
            let answered = match outcome.source {
                Source::Replayed => Answered::Replayed,
                Source::Recorded => Answered::Recorded,
                Source::Recording => Answered::Recording,
                Source::PassedThrough => Answered::PassedThrough,
                Source::Missed => Answered::Missed,
            };
            let response = outcome_response(outcome);
            if let Some(asked) = asked {
                // An MCP route answers its miss as a JSON-RPC error: its explanation is in the
                // recorder's book of misses.
                let noted = match answered {
                    Answered::Missed => state.noted_explanation(&key),
                    _ => Noted::Nothing,
                };
                state.note(asked, Some(key), answered, &response, noted);
            }
            response
        }
        Err(err) => {
            if let Some((scopes, id, _)) = &scoped {
                let message = state.message(&err);
                let advice = state.advice.and_then(|advice| advice(&err));
                scopes.count(id, |tally| tally.error(&err, message, advice));
            }
            let response = state.answer_error(&err, &asker);
            if let Some(asked) = asked {
                let (answered, noted) = match &err {
                    Error::Miss(miss) => (
                        Answered::Missed,
                        Noted::Explanation(miss.explanation.clone()),
                    ),
                    other => (Answered::Failed, Noted::Error(report(other))),
                };
                state.note(asked, err.key().cloned(), answered, &response, noted);
            }
            response
        }
    }
}

/// A request as the journal names it: its route, method and path (as received, less the
/// route's segment).
struct Asked {
    route: String,
    method: String,
    path: String,
}

/// What the journal keeps besides the outcome.
enum Noted {
    Nothing,
    /// A miss's explanation.
    Explanation(crate::miss::Explanation),
    /// A failure's error, with its causes.
    Error(String),
}

impl AppState {
    /// Notes an answered request in the journal, its path and error redacted (a miss's
    /// explanation is redacted already).
    fn note(
        &self,
        asked: Asked,
        key: Option<cassette_keying::Key>,
        answered: Answered,
        response: &Response,
        noted: Noted,
    ) {
        let redactor = self.recorder.redactor();
        let (explanation, error) = match noted {
            Noted::Nothing => (None, None),
            Noted::Explanation(explanation) => (Some(explanation), None),
            Noted::Error(error) => (None, Some(redactor.text(&error))),
        };
        self.journal.note(JournalEntry {
            key,
            route: asked.route,
            method: asked.method,
            path: redactor.text(&asked.path),
            outcome: answered,
            status: response.status().as_u16(),
            explanation,
            error,
        });
    }

    /// The explanation the recorder's book of misses holds for `key` (its summary).
    fn noted_explanation(&self, key: &cassette_keying::Key) -> Noted {
        let misses = self.recorder.misses();
        match misses.notes.into_iter().find(|n| n.key == *key) {
            Some(note) => Noted::Explanation(crate::miss::Explanation {
                nearest: None,
                summary: note.summary,
            }),
            None => Noted::Nothing,
        }
    }
}

/// The scope a request names (`/_scope/ID/...`, taken off its path), else the default one.
fn in_scope(mut request: HttpRequest) -> (String, HttpRequest) {
    let Some((id, path)) = scopes::split_scope(request.uri().path()) else {
        return (DEFAULT_SCOPE.to_owned(), request);
    };
    let id = id.to_owned();
    let path_and_query = match request.uri().query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_owned(),
    };
    let mut parts = request.uri().clone().into_parts();
    if let Ok(rewritten) = path_and_query.parse() {
        parts.path_and_query = Some(rewritten);
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    (id, request)
}

/// The counts of every test that ended (`GET /_cassette/scopes`), for the runner's summary.
async fn ended(State(state): State<Arc<AppState>>, request: HttpRequest) -> Response {
    let scopes = match state.control_caller(&request) {
        Ok(scopes) => scopes,
        Err(refused) => return *refused,
    };
    json_response(StatusCode::OK, &json!({ "ended": scopes.ended() }))
}

impl AppState {
    /// The scopes, when `request` may use the control endpoint: the proxy has one and the
    /// caller holds its token.
    fn control_caller(&self, request: &HttpRequest) -> Result<&Scopes, Box<Response>> {
        let Some(scopes) = &self.scopes else {
            return Err(Box::new(error_response(
                StatusCode::NOT_FOUND,
                "cassette_not_found",
                "this proxy has no control endpoint: it was started without a control token",
                None,
            )));
        };
        let token = request
            .headers()
            .get("x-cassette-control")
            .and_then(|v| v.to_str().ok());
        if !scopes.authorized(token) {
            return Err(Box::new(error_response(
                StatusCode::FORBIDDEN,
                "cassette_forbidden",
                "the control endpoint answers only the test runner that started the proxy (the \
                 x-cassette-control token of its ready line)",
                None,
            )));
        }
        Ok(scopes)
    }
}

/// The control endpoint of test runners (`/_cassette/scopes/ID`): `PUT` begins a test in the
/// scope (a JSON body: `test`, and optionally `mode` and `repeats`), `GET` tells what the scope
/// saw so far, with its failure text, `DELETE` tells it and ends the test (`?unused=true` also
/// lists the recordings the test made in an earlier run and did not use, `?report=true` leaves
/// out of the next read's failure text what this one told, and `DELETE`'s body may hand in
/// the requests the runner refused itself: `{"refused": [{"host": "h:443", "requests": 2}]}`).
async fn control(
    State(state): State<Arc<AppState>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    request: HttpRequest,
) -> Response {
    let scopes = match state.control_caller(&request) {
        Ok(scopes) => scopes,
        Err(refused) => return *refused,
    };
    if !scopes::valid_scope_id(&id) {
        return bad_request("a scope id is 1 to 128 letters, digits, `-`, `_` or `.`");
    }
    let method = request.method().clone();
    let query = request.uri().query().unwrap_or_default();
    let asks = |what: &str| query.split('&').any(|p| p == what);
    let (unused, report) = (asks("unused=true"), asks("report=true"));
    let bypassed = state.forward.bypassed();
    match method {
        Method::PUT => {
            let body = match request.into_body().collect().await {
                Ok(body) => body.to_bytes(),
                Err(e) => return bad_request(&format!("cannot read the body: {e}")),
            };
            let begin: Begin = if body.is_empty() {
                Begin::default()
            } else {
                match serde_json::from_slice(&body) {
                    Ok(begin) => begin,
                    Err(e) => return bad_request(&format!("a scope is begun with JSON: {e}")),
                }
            };
            let scope = match begin.scope() {
                Ok(scope) => scope,
                Err(reason) => return bad_request(&reason),
            };
            if let Err(reason) = scopes.begin_with(&state.recorder, &id, scope, &bypassed) {
                return bad_request(&reason);
            }
            json_response(StatusCode::OK, &json!({"scope": id}))
        }
        Method::GET | Method::DELETE => {
            let end = method == Method::DELETE;
            let body = match request.into_body().collect().await {
                Ok(body) => body.to_bytes(),
                Err(e) => return bad_request(&format!("cannot read the body: {e}")),
            };
            let refused = match RunnerRefused::from_body(&body) {
                Ok(refused) => refused,
                Err(reason) => return bad_request(&reason),
            };
            let recorded = match (unused, scopes.test(&id)) {
                (false, _) => None,
                (true, None) => Some(Vec::new()),
                (true, Some(test)) => Some(
                    state
                        .recorder
                        .recordings_of_test(&test)
                        .await
                        .iter()
                        .map(|k| k.to_string())
                        .collect(),
                ),
            };
            let read = Read {
                end,
                report,
                recorded,
                refused,
            };
            let tally = scopes
                .read(&id, &bypassed, read)
                .with_tapes(&state.recorder, end);
            json_response(StatusCode::OK, &json!(tally))
        }
        _ => error_response(
            StatusCode::METHOD_NOT_ALLOWED,
            "cassette_method_not_allowed",
            "the control endpoint takes PUT, GET and DELETE",
            None,
        ),
    }
}

/// Turns an HTTP request into the recorder's request: routes it, checks the body limit and the
/// headers, reads the body.
async fn read_request(state: &AppState, request: HttpRequest) -> Result<Request, Response> {
    let (parts, body) = request.into_parts();
    let limit = state.max_body;

    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(length) = declared {
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
    let (target, path) = route(&state.mounts, &state.unrouted, raw_path);
    let query = parts.uri.query().unwrap_or("").to_owned();

    let declared = declared.and_then(|length| usize::try_from(length).ok());
    let body = read_body(state, body, declared).await?;

    // A body declared as JSON that is not is refused by the recorder, from what keying read.
    Ok(Request {
        target,
        method: parts.method.as_str().to_owned(),
        path,
        query,
        headers,
        body,
    })
}

/// Splits a request path into the route (target) and the path the upstream sees; a path that
/// names no mounted route goes to `unrouted`.
fn route(mounts: &[String], unrouted: &str, raw_path: &str) -> (String, String) {
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
        (unrouted.to_owned(), path.to_owned())
    }
}

async fn read_body(state: &AppState, body: Body, length: Option<usize>) -> Result<Bytes, Response> {
    let limit = state.max_body;
    let mut body = body;
    // The declared length (already checked against the limit) saves regrowing the buffer.
    let mut buffer: Vec<u8> = Vec::with_capacity(length.unwrap_or(0).min(limit));
    loop {
        let frame = match tokio::time::timeout(state.body_timeout, body.frame()).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(_) => {
                return Err(state.error_response(&Error::SlowBody {
                    idle: state.body_timeout,
                }))
            }
        };
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
        Source::Recording => "recording",
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
fn recorder_error_response(err: &Error, message: &str, ollama: bool) -> Response {
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
        Error::AnswerTooLarge { endpoint, limit } => {
            detail.insert("upstream".into(), json!(endpoint));
            detail.insert("limit".into(), json!(limit));
        }
        Error::NoUpstream { target } => {
            detail.insert("target".into(), json!(target));
        }
        _ => {
            if let Some(key) = err.key() {
                detail.insert("key".into(), json!(key));
            }
        }
    }
    let mut response = match ollama {
        true => ollama_error_response(status, err.kind(), message, detail),
        false => error_response(status, err.kind(), message, Some(detail)),
    };
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

/// An error in Ollama's shape, `{"error": "message"}`, which its clients show as the message;
/// the details stay beside it under `cassette`.
fn ollama_error_response(
    status: StatusCode,
    kind: &str,
    message: &str,
    mut detail: serde_json::Map<String, Value>,
) -> Response {
    detail.insert("type".into(), json!(kind));
    json_response(status, &json!({ "error": message, "cassette": detail }))
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
                route(&mounts, DEFAULT_TARGET, raw),
                (target.to_owned(), path.to_owned()),
                "{raw}"
            );
        }
        // A proxy standing where one upstream is expected routes what names no route there.
        assert_eq!(
            route(&mounts, "ollama", "/api/chat"),
            ("ollama".to_owned(), "/api/chat".to_owned())
        );
        assert_eq!(
            route(&mounts, "ollama", "/anthropic/v1/messages"),
            ("anthropic".to_owned(), "/v1/messages".to_owned())
        );
    }
}
