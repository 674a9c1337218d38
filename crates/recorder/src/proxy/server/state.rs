//! What every handler of the proxy's server shares (`AppState`: the recorder, the limits, the
//! allowed hosts and origins, the miss statuses, the bypass counts, the journal, the test
//! scopes and the control pipe), the mark of a channel request, and the counters it reports.
//! It depends on no other file of the server, so that each of them can depend on it.

use crate::config::DEFAULT_TARGET;
use crate::engine::{Recorder, Stats};
use crate::error::Error;
use crate::proxy::config::{parse_origin, Advice, ControlPipe, Exposure, ProxyConfig};
use crate::proxy::forward::{Bypassed, Forwarder};
use crate::proxy::hosts::Hosts;
use crate::proxy::journal::Book;
#[cfg(unix)]
use crate::proxy::pipe::Pipe;
use crate::proxy::run_secret::RunSecret;
use crate::proxy::scopes::{Notices, Scopes};
use axum::http::StatusCode;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Marks a request that came over the channel (its connection's extension), for every layer
/// that serves such a request apart.
#[derive(Debug, Clone, Copy)]
pub(super) struct OnChannel;

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
pub(in crate::proxy) struct AppState {
    pub(in crate::proxy) recorder: Recorder,
    pub(super) max_body: usize,
    pub(super) advice: Option<Advice>,
    /// Mounted route names (every configured route except `default`).
    pub(super) mounts: Vec<String>,
    /// The route of a request whose path names none.
    pub(super) unrouted: String,
    pub(super) requests: AtomicU64,
    /// The address the proxy listens on: a request naming it is addressed to the proxy.
    pub(super) listen: SocketAddr,
    pub(super) exposure: Exposure,
    /// Lowercased host names accepted besides loopback ones.
    pub(super) allowed_hosts: Vec<String>,
    /// Browser origins served, normalized (`scheme://host[:port]`, lowercase).
    pub(super) allowed_origins: Vec<String>,
    pub(super) header_timeout: Duration,
    pub(super) body_timeout: Duration,
    pub(super) max_connections: usize,
    /// The status a replay miss is answered with.
    pub(super) miss_status: StatusCode,
    /// The status a replay miss is answered with for clients that retry a 409.
    pub(super) retrying_miss_status: Option<StatusCode>,
    /// Forward-proxy requests: the traffic that bypassed the base URL.
    pub(super) forward: Forwarder,
    /// Which route serves a host, for requests over the channel.
    pub(super) hosts: Hosts,
    /// One entry per request answered, when the journal is kept.
    pub(in crate::proxy) journal: Book,
    /// Test scopes, when a control token was configured.
    pub(super) scopes: Option<Scopes>,
    /// The secret API requests must carry in modes that may call an upstream, when set.
    pub(super) run_secret: Option<RunSecret>,
    /// The control pipe (stdin), when the runner that started the proxy speaks through it.
    #[cfg(unix)]
    pub(super) pipe: Option<Pipe>,
}

/// Where there are no Unix pipes, a placeholder: the control pipe setting is refused there.
#[cfg(not(unix))]
pub(in crate::proxy) struct Pipe;

/// The proxy's stdin as a control pipe, when `config` asks for one.
pub(in crate::proxy) fn open_pipe(config: &ProxyConfig) -> Result<Option<Pipe>, Error> {
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
    pub(in crate::proxy) fn stats(&self) -> ProxyStats {
        ProxyStats {
            requests: self.requests.load(Ordering::Relaxed),
            recorder: self.recorder.stats(),
            bypassed: self.forward.bypassed(),
        }
    }

    pub(in crate::proxy) fn new(
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
        let hosts = Hosts::new(&recorder.config().routes);
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
            hosts,
            journal: Book::new(config.journal),
            scopes: config
                .control_token
                .clone()
                .map(|token| Scopes::new(token, notices)),
            run_secret: config.run_secret.clone(),
            #[cfg(unix)]
            pipe,
        }
    }
}
