//! The proxy's HTTP server (axum routes on hyper connections of our own, for the header
//! timeout and the connection limit): the accept loop, the routes, and the handler that turns
//! a request for an upstream into a recorder request and its outcome back into an answer.
//! Nothing outside this module sees an axum or hyper type.
//!
//! What every handler shares is `state.rs` (`AppState`), which depends on no other file here.
//! The steps live beside it: refusing strangers (`guard.rs`: foreign `Host`, browser origins,
//! CORS preflights; `admission.rs`: the run secret of a recording proxy), reading a request (`incoming.rs`: routing, the body limit and timeout),
//! the test runners' control endpoint and pipe lines (`control.rs`), and every answer the proxy
//! writes, outcomes and errors alike (`answer.rs`), with the URLs of a client's next requests
//! made absolute the way it reached the proxy (`next_url.rs`).

mod admission;
mod answer;
mod channel;
mod control;
mod guard;
mod incoming;
mod next_url;
mod state;

pub use state::ProxyStats;
pub(super) use state::{open_pipe, AppState};

use super::channel::Socket;
use super::forward;
use super::journal::{Answered, JournalEntry};
use super::sent::SentRequest;
use crate::error::{report, Error};
use answer::{error_response, json_response, outcome_response, Asker};
use axum::extract::{Request as HttpRequest, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use control::{control, ended, in_scope, is_own_path, not_own_endpoint, take_token, unknown_scope};
use guard::guard;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use incoming::read_request;
use serde_json::json;
use state::OnChannel;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

impl AppState {
    /// Follows the control pipe's messages written so far, in order (every request does
    /// first: see [`super::pipe`]).
    fn follow_pipe(&self) {
        #[cfg(unix)]
        if let Some(pipe) = &self.pipe {
            pipe.drain(|line| self.follow_line(line));
        }
    }
}

/// Serves `state` on `listener` until `shutdown` completes; requests in flight finish first.
///
/// Each connection gets the header timeout (hyper closes one that does not send its request
/// headers in time, idle keep-alive connections included), and at most `max_connections` are
/// served at once: the accept loop waits for a free slot, leaving further connections in the
/// kernel's listen queue.
pub(super) async fn serve(
    listener: TcpListener,
    channel: Option<Socket>,
    runner: Option<super::Watch>,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(state.max_connections));
    let header_timeout = state.header_timeout;
    // Lines of the control pipe are followed as they come too, not only when a request comes:
    // a run of tests that send nothing must not fill the pipe and block their runner. When the
    // runner closes its end it is gone (killed, or crashed before it could stop us): the proxy
    // stops as on SIGTERM instead of serving nobody forever. So it does when the runner it
    // watches ends (`super::runner`), which a pipe a forked child still holds cannot tell.
    #[cfg(unix)]
    let (follower, runner_gone) = match state.pipe.is_some() {
        true => {
            let (gone_tx, gone_rx) = tokio::sync::oneshot::channel::<()>();
            let state = state.clone();
            let follower = tokio::spawn(async move {
                let mut tick = tokio::time::interval(super::pipe::POLL);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while let Some(pipe) = &state.pipe {
                    tick.tick().await;
                    state.follow_pipe();
                    if pipe.closed() {
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
    let pipe_closed = async move {
        match runner_gone {
            Some(gone) => {
                let _ = gone.await;
            }
            None => std::future::pending().await,
        }
    };
    let runner_ended = async move {
        #[cfg(unix)]
        if let Some(watch) = runner {
            return watch.gone().await;
        }
        #[cfg(not(unix))]
        let _ = runner;
        std::future::pending().await
    };
    let runner_gone = async move {
        tokio::select! {
            () = pipe_closed => {},
            () = runner_ended => {},
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
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            () = &mut runner_gone => break,
            accepted = accept(&listener, channel.as_ref()) => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
        };
        let served = Served {
            header_timeout,
            stop: stop_rx.clone(),
            open: open_rx.clone(),
            slot,
        };
        match accepted {
            Accepted::Http(stream, peer) => {
                // Small request and response writes go out at once rather than waiting on Nagle.
                let _ = stream.set_nodelay(true);
                // The peer's address tells forward-proxy requests from this machine from others.
                let service = router
                    .clone()
                    .layer(axum::Extension(axum::extract::ConnectInfo(peer)));
                served.spawn(stream, service);
            }
            #[cfg(unix)]
            Accepted::Channel(stream) => {
                // The directory and the socket's mode keep other users out; their credentials
                // are checked as well, in case the socket was handed on.
                let uid = stream.peer_cred().map(|c| c.uid()).ok();
                let owner = channel.as_ref().map(|c| c.owner);
                if uid.is_none() || uid != owner {
                    tracing::warn!(
                        "refused a channel connection from user {uid:?}: not the proxy's owner"
                    );
                    continue;
                }
                served.spawn(stream, router.clone().layer(axum::Extension(OnChannel)));
            }
        }
    }
    drop(listener);
    drop(channel);
    drop(stop_tx);
    drop(open_rx);
    open_tx.closed().await;
    #[cfg(unix)]
    if let Some(follower) = follower {
        follower.abort();
    }
    Ok(())
}

/// A connection accepted: on the HTTP port, with its peer's address, or on the channel.
enum Accepted {
    Http(tokio::net::TcpStream, std::net::SocketAddr),
    #[cfg(unix)]
    Channel(tokio::net::UnixStream),
}

/// The next connection on the HTTP port or the channel.
async fn accept(listener: &TcpListener, channel: Option<&Socket>) -> std::io::Result<Accepted> {
    #[cfg(unix)]
    if let Some(channel) = channel {
        return tokio::select! {
            accepted = listener.accept() => accepted.map(|(s, peer)| Accepted::Http(s, peer)),
            accepted = channel.listener.accept() => accepted.map(|(s, _)| Accepted::Channel(s)),
        };
    }
    #[cfg(not(unix))]
    let _ = channel;
    let (stream, peer) = listener.accept().await?;
    Ok(Accepted::Http(stream, peer))
}

/// What a connection is served with: the header timeout, the watch that begins a graceful
/// shutdown, the handle held open until it ends, and its slot of the connection limit.
struct Served {
    header_timeout: Duration,
    stop: watch::Receiver<()>,
    open: watch::Receiver<()>,
    slot: tokio::sync::OwnedSemaphorePermit,
}

impl Served {
    /// Serves HTTP/1.1 (and HTTP/2) on `stream` in a task of its own.
    fn spawn<S>(self, stream: S, router: Router)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let Served {
            header_timeout,
            mut stop,
            open,
            slot,
        } = self;
        let service = answer::Aborting(TowerToHyperService::new(router));
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
        // Channel requests carry their URL: routed by its host before anything else.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            channel::channel,
        ))
        // Outermost: the control token never goes further than the control endpoint, and the
        // run secret no further than here.
        .layer(middleware::from_fn(take_token))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            admission::take_run_secret,
        ))
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
    // A near miss of a control path (`/_cassette/scopes/`, `/_Cassette/stats`, behind a scope
    // or a route's segment) is the proxy's own 404, never an upstream request.
    let raw = request.uri().path();
    let unscoped = super::scopes::split_scope(raw).map_or(raw, |(_, path)| path);
    let routed = state.route_of(request.extensions(), unscoped).1;
    if is_own_path(raw) || is_own_path(unscoped) || is_own_path(&routed) {
        return not_own_endpoint(&state.recorder.redactor().text(raw));
    }
    if let Some(refused) = state.refuse_stranger(request.extensions()) {
        return refused;
    }
    state.requests.fetch_add(1, Ordering::Relaxed);
    let user_agent = request
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let reached = next_url::Reached::of(&request);
    let (scoped, request) = match &state.scopes {
        Some(scopes) => {
            let (id, request) = in_scope(request);
            if !scopes.begun(&id) {
                return unknown_scope(&id);
            }
            let scope = scopes.scope(&id);
            (Some((scopes, id, scope)), request)
        }
        None => (None, request),
    };
    let asked = state.journal.keeps().then(|| {
        let (route, path) = state.route_of(request.extensions(), request.uri().path());
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
    if let Some((scopes, id, scope)) = &scoped {
        if scope.keep_requests {
            let base = state.recorder.config().route(&incoming.target);
            let base = base.map(|route| route.base_url.as_str());
            let redactor = state.recorder.redactor();
            scopes.keep(id, || SentRequest::new(&incoming, base, redactor));
        }
    }
    let asker = Asker {
        user_agent,
        ollama: cassette_keying::Profile::from_path(&incoming.path).is_ollama(),
    };
    let target = incoming.target.clone();
    let handled = match &scoped {
        Some((_, _, scope)) => state.recorder.handle_in(incoming, scope).await,
        None => state.recorder.handle(incoming).await,
    };
    match handled {
        Ok(mut outcome) => {
            reached.rewrite(&target, &mut outcome.response.headers);
            if let Some((scopes, id, _)) = &scoped {
                scopes.count(id, |tally| tally.outcome(&outcome));
            }
            let key = outcome.key.clone();
            let answered = Answered::from(outcome.source);
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
            let mut response = state.answer_error(&err, &asker);
            if let Error::FailureReplayed { failure, .. } = &err {
                // No answer at all, as the upstream gave none, after as long as it took.
                tokio::time::sleep(answer::failure_delay(*failure)).await;
                response.extensions_mut().insert(answer::Abort);
            }
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
