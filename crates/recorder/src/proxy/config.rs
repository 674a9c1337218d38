//! The proxy's settings, validated before anything is opened.

use super::channel::Channel;
use super::forward::Forwarding;
use super::journal::Journal;
use super::run_secret::RunSecret;
use crate::error::{Error, Setting};
use std::net::SocketAddr;
use std::time::Duration;

/// The address `cassette proxy` listens on by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8089";

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

/// Advice appended to the message of an error the proxy answers with or logs: how to change
/// the setting at fault in the program that embeds the proxy (a flag, a variable), which the
/// recorder's own messages cannot name.
pub type Advice = fn(&Error) -> Option<String>;

/// Default time a connection has to send its request headers.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Default time a request body may stall before the request fails with 408.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// Default number of connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// Proxy settings, validated before a socket is opened.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Largest request body accepted; larger ones get 413.
    pub max_body: usize,
    /// Whether a non-loopback `listen` is allowed.
    pub exposure: Exposure,
    /// Advice added to error messages; none by default.
    pub advice: Option<Advice>,
    /// Host names (without port) accepted besides loopback names and addresses and the
    /// listening address, such as a container's service name.
    pub allowed_hosts: Vec<String>,
    /// Web page origins (`https://app.example:3000`) whose browser requests are served, with
    /// CORS headers; every other browser request is refused.
    pub allowed_origins: Vec<String>,
    /// How long a connection may take to send its request headers (and how long an idle
    /// keep-alive connection is kept).
    pub header_timeout: Duration,
    /// How long a request body may stall before the request fails.
    pub body_timeout: Duration,
    /// How many connections are served at once.
    pub max_connections: usize,
    /// The HTTP status of a replay miss: 409 by default; any 4xx or 5xx.
    pub miss_status: u16,
    /// The status of a replay miss for clients known to retry a 409 whatever `x-should-retry`
    /// says, told by their `User-Agent` (the Vercel AI SDK and what is built on it, such as
    /// Mastra; Cohere's client): [`DEFAULT_RETRYING_MISS_STATUS`] by default, which they fail
    /// on at once; `None` answers them [`ProxyConfig::miss_status`] too (what a miss status
    /// the user chose should do).
    pub retrying_miss_status: Option<u16>,
    /// What forward-proxy requests for other hosts get.
    pub forwarding: Forwarding,
    /// Whether one entry per request is kept ([`StatsHandle::journal`](super::StatsHandle::journal)).
    pub journal: Journal,
    /// Test scopes for test runners: when set, the control endpoint
    /// (`/_cassette/scopes/ID`) answers callers presenting this token in the
    /// `x-cassette-control` header, and a path may name its scope (`/_scope/ID/...`).
    /// None by default: no control endpoint, no scope prefixes.
    pub control_token: Option<String>,
    /// Whether a test runner that started the proxy also speaks to it over its stdin and
    /// stdout (see [`ControlPipe`]); needs `control_token`.
    pub control_pipe: ControlPipe,
    /// The route of a request whose path names none: `default` (the default), or another
    /// route for a proxy that stands where one upstream is expected (the default Ollama port,
    /// for a client that ignores every variable).
    pub unrouted: String,
    /// Whether the proxy also listens on the in-process channel, a Unix socket only its owner
    /// can connect to (see the module docs); off by default.
    pub channel: Channel,
    /// The process whose life bounds the proxy's (see [`Runner`]); none by default.
    pub runner: Runner,
    /// The secret a request on the HTTP port must carry (see [`RunSecret`]) in every mode that
    /// may call an upstream; `None` (the default) serves every local program. Replay and the
    /// channel never ask for it; a request that carries it is served in every mode.
    pub run_secret: Option<RunSecret>,
}

/// The test runner whose life bounds a proxy it started: once it is gone, however it died
/// (SIGKILL included), the proxy stops as it does on SIGTERM or when the control pipe closes.
/// A pipe cannot tell that alone: a runner that uses none has nothing to close, and a child a
/// test forked holds the runner's end open for as long as it lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Runner {
    /// None: the proxy serves until it is stopped.
    #[default]
    Unwatched,
    /// The process with this id (the runner passes its own), looked at about every 250 ms:
    /// when it is the proxy's parent, by whether it still is (a parent that died is not
    /// mistaken for a process that took its id later, nor for its zombie), else by whether a
    /// process with that id exists. Unix only.
    Pid(u32),
}

/// Where test scopes are begun and ended besides the control endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ControlPipe {
    /// The control endpoint only.
    #[default]
    Off,
    /// Also one JSON line a message on stdin (`{"op":"begin","scope":ID,"test":...}`,
    /// `{"op":"end","scope":ID}`), and `{"problem":ID}` on stdout when a scope sees a miss, an
    /// error or a refused bypass: a runner's plugin that started the proxy with pipes as its
    /// stdin and stdout. Unix only.
    Stdio,
}

/// The status a replay miss is answered with unless configured otherwise.
pub const DEFAULT_MISS_STATUS: u16 = 409;

/// The status a replay miss is answered with for clients that retry a 409 (see
/// [`ProxyConfig::retrying_miss_status`]): 424 Failed Dependency, which none of them retries.
pub const DEFAULT_RETRYING_MISS_STATUS: u16 = 424;

/// `User-Agent` tokens of clients that retry a 409 whatever `x-should-retry` says: the Vercel
/// AI SDK's providers (`ai-sdk/openai/3.0.1`, also under Mastra) and Cohere's client
/// (`cohere/7.3.1`). The OpenAI and Anthropic SDKs honour the header and raise their own
/// conflict error on a 409, which tests may expect.
const RETRIES_409: &[&str] = &["ai-sdk/", "cohere/"];

/// Whether a client with this `User-Agent` retries a 409 regardless.
pub(super) fn retries_409(user_agent: &str) -> bool {
    let agent = user_agent.to_ascii_lowercase();
    RETRIES_409.iter().any(|token| agent.contains(token))
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8089)),
            max_body: crate::config::DEFAULT_MAX_BODY,
            exposure: Exposure::LoopbackOnly,
            advice: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            miss_status: DEFAULT_MISS_STATUS,
            forwarding: Forwarding::default(),
            journal: Journal::Off,
            control_token: None,
            control_pipe: ControlPipe::Off,
            retrying_miss_status: Some(DEFAULT_RETRYING_MISS_STATUS),
            unrouted: crate::config::DEFAULT_TARGET.to_owned(),
            channel: Channel::Off,
            runner: Runner::Unwatched,
            run_secret: None,
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
            return Err(Error::InvalidSetting {
                setting: Setting::BodyLimit,
                reason: "it must be at least 1 byte",
            });
        }
        if !(400..=599).contains(&self.miss_status)
            || self
                .retrying_miss_status
                .is_some_and(|s| !(400..=599).contains(&s))
        {
            return Err(Error::InvalidSetting {
                setting: Setting::MissStatus,
                reason: "it must be an HTTP error status, 400 to 599",
            });
        }
        if !self.listen.ip().is_loopback() && self.exposure == Exposure::LoopbackOnly {
            return Err(Error::NotLoopback { addr: self.listen });
        }
        if self.control_pipe == ControlPipe::Stdio {
            if self.control_token.is_none() {
                return Err(Error::InvalidSetting {
                    setting: Setting::ControlPipe,
                    reason: "it serves test scopes, which need the control endpoint's token",
                });
            }
            if cfg!(not(unix)) {
                return Err(Error::InvalidSetting {
                    setting: Setting::ControlPipe,
                    reason: "it is a Unix pipe; use the control endpoint on this platform",
                });
            }
        }
        if let Runner::Pid(pid) = self.runner {
            // 0 and -1 (what a larger number becomes as a pid_t) name groups to kill(2).
            if pid == 0 || i32::try_from(pid).is_err() {
                return Err(Error::InvalidSetting {
                    setting: Setting::Runner,
                    reason: "a process id is a number from 1 to 2147483647",
                });
            }
            if cfg!(not(unix)) {
                return Err(Error::InvalidSetting {
                    setting: Setting::Runner,
                    reason: "the runner is watched on Unix only",
                });
            }
        }
        if self.max_connections == 0 {
            return Err(Error::InvalidSetting {
                setting: Setting::MaxConnections,
                reason: "at least one connection must be served",
            });
        }
        for (timeout, setting) in [
            (self.header_timeout, Setting::HeaderTimeout),
            (self.body_timeout, Setting::BodyTimeout),
        ] {
            if timeout.is_zero() {
                return Err(Error::InvalidSetting {
                    setting,
                    reason: "it must be longer than zero",
                });
            }
        }
        for origin in &self.allowed_origins {
            parse_origin(origin).map_err(|reason| Error::InvalidSetting {
                setting: Setting::AllowedOrigin,
                reason,
            })?;
        }
        Ok(())
    }
}

/// An origin normalized for comparison: `scheme://host[:port]` in lowercase, without a path.
pub(super) fn parse_origin(origin: &str) -> Result<String, &'static str> {
    let url = url::Url::parse(origin.trim()).map_err(|_| "an origin is scheme://host[:port]")?;
    if url.cannot_be_a_base() || url.host_str().is_none() || !matches!(url.path(), "" | "/") {
        return Err("an origin is scheme://host[:port], without a path");
    }
    Ok(url.origin().ascii_serialization().to_ascii_lowercase())
}
