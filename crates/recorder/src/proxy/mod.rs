//! The HTTP proxy: any client in any language records and replays by pointing its base URL here.
//!
//! # Routing
//!
//! A request whose first path segment names a configured route (`/anthropic/v1/messages` with
//! a route `anthropic`) goes to that route: the segment is stripped before keying and before
//! forwarding, and the route name becomes the key's target. Everything else goes to the
//! `default` route with its path unchanged. The upstream URL is the route's base URL joined
//! with the remaining path without doubling a shared run such as `/v1`.
//!
//! The server itself (axum) lives in the private `server` module, its settings in `config`, the
//! traffic that bypassed the base URL in `forward`: no axum type appears in this module's API.
//!
//! # The channel
//!
//! Besides its HTTP port the proxy can listen on a Unix socket only its owner can connect to
//! ([`ProxyConfig::channel`], `channel`), for transports installed inside a test process. A
//! request there carries its original URL (`POST https://api.openai.com/v1/...`) and is routed
//! by its host ([`Hosts`]: the vendors' hosts and every route's upstream), then keyed, stored,
//! counted and explained like any other. A host `[bypass] allow` lists, or a loopback one, is
//! answered 421 with `x-cassette: direct` (the transport sends it itself); any other host is
//! refused (403 `cassette_unrouted`) in every mode and counted for the running test.
//!
//! Paths belong to the proxy itself: `GET /healthz` and everything under `/_cassette/`
//! (`stats`, and the control endpoint): a near miss there is the proxy's 404, never an
//! upstream request. The control token (`x-cassette-control`) is taken off every request
//! before anything else sees it, so it is never forwarded or recorded.
//!
//! When asked ([`ProxyConfig::journal`]), the proxy keeps one entry per request it answers
//! (`journal`): key, route, outcome, and for a miss its explanation, for a run's report.
//!
//! # Who may use it
//!
//! The proxy holds an upstream API key and writes cassettes, so only local programs may use it,
//! not a web page that happens to be open in a browser on the same machine:
//!
//! - a request must be addressed to a loopback name (`localhost`, `*.localhost`), a loopback
//!   address, the listening address, or a host allowed in [`ProxyConfig::allowed_hosts`]; a
//!   page that reaches the proxy through DNS rebinding names its own host and is refused;
//! - a request a browser sends for a page (an `Origin` header, or `Sec-Fetch-Site` saying
//!   `cross-site` or `same-site`) is refused unless its origin is in
//!   [`ProxyConfig::allowed_origins`]; CORS preflights are answered by the proxy (for allowed
//!   origins) or refused, never forwarded;
//! - with a [`RunSecret`] ([`ProxyConfig::run_secret`]), in a mode that may call an upstream,
//!   an API request on the HTTP port must carry the secret
//!   (`/_run/SECRET/...`, or the `x-cassette-run` header): any other local program, another
//!   user's included, is refused, and a wrong secret is refused in every mode.
//!
//! Refusals are 403 `cassette_forbidden`.
//!
//! # Slow clients
//!
//! A connection must send its request headers within [`ProxyConfig::header_timeout`] (an idle
//! keep-alive connection is closed after the same time), a body must not stall for longer than
//! [`ProxyConfig::body_timeout`] (408), and at most [`ProxyConfig::max_connections`] connections
//! are served at once: further ones wait in the listen queue until a slot frees.
//!
//! # Traffic that bypassed the base URL
//!
//! The proxy also answers forward-proxy requests (`CONNECT host:443`, absolute-form
//! `http://host/...`), which a client sends when the usual proxy variables point here but its
//! base URL does not: see the `forward` module and [`Forwarding`]. In replay they are refused
//! without connecting anywhere; otherwise tunnelled unrecorded. Either way they are counted by
//! host ([`ProxyStats::bypassed`]).
//!
//! # Errors
//!
//! Every error is answered as JSON in the style the OpenAI and Anthropic SDKs parse
//! (`{"type": "error", "error": {"type", "message", ...}}`). A replay miss is a 409 with
//! `x-should-retry: false`, so the SDKs raise at once instead of retrying: they retry 409 by
//! default and would otherwise bury the miss under a slow, misleading connection error. A
//! client that ignores that header (the Vercel AI SDK) fails fast with another
//! [`ProxyConfig::miss_status`].

mod channel;
mod config;
mod forward;
mod hosts;
mod journal;
#[cfg(unix)]
mod pipe;
mod run_secret;
#[cfg(unix)]
mod runner;
mod scopes;
mod sent;
mod server;

pub use channel::Channel;
pub use config::{
    Advice, ControlPipe, Exposure, ProxyConfig, Runner, DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT, DEFAULT_LISTEN, DEFAULT_MAX_CONNECTIONS, DEFAULT_MISS_STATUS,
    DEFAULT_RETRYING_MISS_STATUS,
};
pub use forward::{Bypassed, Forwarding, HostPattern};
pub use hosts::{built_in_routes, Hosts, Vendor, VENDORS};
pub use journal::{Answered, Journal, JournalEntry, JournalLog, KEPT_ENTRIES};
pub use run_secret::{RunSecret, RUN_SECRET_HEADER, RUN_SEGMENT};
pub use server::ProxyStats;

use crate::engine::Recorder;
use crate::error::Error;
use crate::miss::MissLog;
use server::AppState;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

#[cfg(unix)]
use runner::Watch;
/// Where the runner is not watched, a placeholder: [`Runner::Pid`] is refused there.
#[cfg(not(unix))]
#[derive(Debug)]
struct Watch;

/// A proxy bound to a socket, ready to [`serve`](Proxy::serve).
pub struct Proxy {
    state: Arc<AppState>,
    listener: TcpListener,
    channel: Option<channel::Socket>,
    addr: SocketAddr,
    /// The test runner whose end ends the proxy ([`ProxyConfig::runner`]).
    runner: Option<Watch>,
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
            .map_err(|source| Error::Bind {
                addr: config.listen,
                source,
            })?;
        Proxy::from_listener(recorder, listener, config)
    }

    /// Wraps an already bound listener, with the limits, allowed hosts and origins and advice
    /// of `config` (its address and exposure are the caller's business: the listener is bound
    /// already).
    pub fn from_listener(
        recorder: Recorder,
        listener: TcpListener,
        config: &ProxyConfig,
    ) -> Result<Proxy, Error> {
        let addr = listener.local_addr().map_err(|e| Error::Server {
            action: "reading its listening address",
            source: Box::new(e),
        })?;
        // Before the channel is bound, which a failure here would leave behind.
        #[cfg(unix)]
        let runner = Watch::new(config.runner)?;
        #[cfg(not(unix))]
        let runner = None;
        let channel = channel::bind(&config.channel)?;
        Ok(Proxy {
            state: Arc::new(AppState::new(
                recorder,
                config,
                addr,
                server::open_pipe(config)?,
            )),
            listener,
            channel,
            addr,
            runner,
        })
    }

    /// The path of the channel's socket, when the proxy listens on one
    /// ([`ProxyConfig::channel`]); removed when the proxy stops.
    pub fn channel_path(&self) -> Option<std::path::PathBuf> {
        self.channel.as_ref().map(|c| c.path().to_owned())
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

    /// Serves until `shutdown` completes (or the test runner is gone: it closed the control
    /// pipe, or the process [`ProxyConfig::runner`] names ended), then stops accepting, lets
    /// requests in flight (streams included) finish, and returns the final counters.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<ProxyStats, Error> {
        let state = self.state.clone();
        server::serve(
            self.listener,
            self.channel,
            self.runner,
            self.state,
            shutdown,
        )
        .await
        .map_err(|e| Error::Server {
            action: "serving",
            source: Box::new(e),
        })?;
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
        self.0.stats()
    }

    /// The distinct keys that missed so far, the first ones with their one-line explanation.
    pub fn misses(&self) -> MissLog {
        self.0.recorder.misses()
    }

    /// Every request answered so far, when the proxy keeps a journal ([`ProxyConfig::journal`]);
    /// empty otherwise.
    pub fn journal(&self) -> JournalLog {
        self.0.journal.log()
    }
}

/// Starts the proxy in the background of the current Tokio runtime, for the Rust API and
/// `cassette exec`: point any client at [`RunningProxy::url`].
pub async fn spawn(recorder: Recorder, config: &ProxyConfig) -> Result<RunningProxy, Error> {
    let proxy = Proxy::bind(recorder, config).await?;
    let addr = proxy.local_addr();
    let channel = proxy.channel_path();
    let stats = proxy.stats_handle();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(proxy.serve(async move {
        // A dropped sender stops the proxy as well.
        let _ = stop_rx.await;
    }));
    Ok(RunningProxy {
        addr,
        channel,
        stats,
        stop_tx: Some(stop_tx),
        task: Some(task),
    })
}

/// A proxy running in the background. Dropping it stops it without waiting.
#[derive(Debug)]
pub struct RunningProxy {
    addr: SocketAddr,
    channel: Option<std::path::PathBuf>,
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

    /// The channel's socket, when the proxy listens on one.
    pub fn channel_path(&self) -> Option<&std::path::Path> {
        self.channel.as_deref()
    }

    /// The counters now.
    pub fn stats(&self) -> ProxyStats {
        self.stats.get()
    }

    /// A handle on the counters and misses that stays valid after [`RunningProxy::stop`].
    pub fn stats_handle(&self) -> StatsHandle {
        self.stats.clone()
    }

    /// Stops accepting, waits for requests in flight, and returns the final counters.
    pub async fn stop(mut self) -> Result<ProxyStats, Error> {
        if let Some(tx) = self.stop_tx.take() {
            let _ = tx.send(());
        }
        match self.task.take() {
            Some(task) => task.await.map_err(|e| Error::Server {
                action: "running in the background",
                source: Box::new(e),
            })?,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_listen_needs_explicit_exposure() {
        let remote = ProxyConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], 8089)),
            ..ProxyConfig::default()
        };
        assert!(matches!(
            remote.validate(),
            Err(Error::NotLoopback { addr }) if addr == remote.listen
        ));
        let allowed = ProxyConfig {
            exposure: Exposure::AllowRemote,
            ..remote
        };
        assert!(allowed.validate().is_ok());
        assert!(ProxyConfig::default().validate().is_ok());
        assert!(ProxyConfig::ephemeral().validate().is_ok());
    }
}
