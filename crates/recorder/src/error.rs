//! The one public error type of the recorder crate.
//!
//! Messages say what to change in the recorder's own terms ("the body limit", "a route for
//! target `x`"); they never name a command-line flag or an environment variable, which belong
//! to the program embedding the recorder. A variant that wraps a cause returns it from
//! [`std::error::Error::source`] and leaves it out of its own message: print the chain.

use crate::miss::Miss;
use cassette_keying::Key;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A recorder result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boxed cause, for failures of dependencies the public API does not expose.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Everything the recorder can fail with. Each variant names the key, target, endpoint or file
/// involved and says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Replay found no cassette for the request. Never falls back to the network.
    #[error("{0}")]
    Miss(Box<Miss>),
    /// A route is invalid; nothing was done.
    #[error("invalid route `{name}`: {reason}")]
    InvalidRoute {
        /// The route name as configured.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A numeric or size setting is out of range; nothing was done.
    #[error("invalid {setting}: {reason}")]
    InvalidSetting {
        /// Which setting.
        setting: Setting,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The proxy was asked to listen where other machines can reach it without being allowed to.
    #[error(
        "{addr} is not a loopback address; anyone who can reach it can use the proxy (and its \
         upstream API key). Allow remote exposure explicitly to listen there anyway"
    )]
    NotLoopback {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The proxy could not listen on its address.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The proxy's server failed after it started.
    #[error("the proxy server failed while {action}")]
    Server {
        /// What it was doing.
        action: &'static str,
        /// Why.
        source: BoxError,
    },
    /// The HTTP client for upstream calls could not be built.
    #[error("cannot build the HTTP client for upstream calls")]
    HttpClient {
        /// Why.
        source: BoxError,
    },
    /// The usage log could not be opened for appending.
    #[error("cannot open the usage log {}", path.display())]
    UsageLog {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The request cannot be handled as sent.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The proxy refused a request addressed to it by a name that is not its own: what a web
    /// page reaching it through DNS rebinding looks like.
    #[error(
        "refused a request for host `{host}`: the proxy answers requests addressed to a loopback \
         name or address, or to its listening address (a web page reaching it by DNS rebinding \
         names its own host); allow the host explicitly to serve it"
    )]
    ForeignHost {
        /// The `Host` the request named.
        host: String,
    },
    /// A request that reached the proxy with its original URL (the in-process channel) for a
    /// host no route serves, which no stored download answers (a GET a vcrpy tape held is one
    /// that adopt or import stored): it can be neither recorded nor sent, so it is refused in
    /// every mode.
    // The advice is exec's bypass report's, so every runner says the same words.
    #[error(
        "refused {url} from {client}: no cassette route serves {host} and no stored download \
         answers it, so the request can be neither recorded nor replayed; {advice} (a route: `[routes.NAME] upstream = \
         \"https://{host}\"`; an allowed host the client reaches directly)",
        advice = cassette_review::failure::UNROUTED_HOST_ADVICE
    )]
    Unrouted {
        /// `host:port`.
        host: String,
        /// The URL without its query (which may carry a key).
        url: String,
        /// The client, as its `User-Agent` names it (`an unnamed client` when it does not).
        client: String,
    },
    /// The proxy could not open its in-process channel (a Unix socket).
    #[error("cannot open the channel at {path}: {reason}")]
    Channel {
        /// The socket's path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The proxy refused a request a web browser sent on behalf of a page: a hostile page
    /// must not spend the upstream key or write cassettes.
    #[error(
        "refused a request from the web page {origin}: browsers may use the proxy (and its \
         upstream key) only from origins allowed explicitly"
    )]
    BrowserOrigin {
        /// The page's origin (or the `Sec-Fetch-Site` value of a request without one).
        origin: String,
    },
    /// A request's body stopped arriving.
    #[error("the request body stalled: no data for {}s", .idle.as_secs_f32())]
    SlowBody {
        /// How long nothing arrived.
        idle: Duration,
    },
    /// The request body is over the configured limit.
    #[error(
        "request body of {size} bytes is over the limit of {limit} bytes; raise the body limit \
         if this is intended"
    )]
    BodyTooLarge {
        /// The body size (or a lower bound, when it was cut off while reading).
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// An upstream answer is over the configured answer limit: it was not read whole and not
    /// recorded.
    #[error(
        "the answer of upstream {endpoint} is over the answer limit of {limit} bytes; nothing \
         was recorded. Raise the answer limit if this is intended"
    )]
    AnswerTooLarge {
        /// The URL that was called (without credentials).
        endpoint: String,
        /// The limit.
        limit: usize,
    },
    /// A request needs the network but no upstream is configured for its target.
    #[error("no upstream configured for target `{target}`: add a route named `{target}`")]
    NoUpstream {
        /// The target (route name).
        target: String,
    },
    /// The upstream could not be reached, timed out or reset the connection.
    #[error(
        "upstream {endpoint} {}: {cause}; {}",
        if *.timed_out { "timed out" } else { "unreachable" },
        if *.recorded {
            "recorded as such (error recording is on): a replay gives the client the same failure"
        } else {
            "nothing was recorded"
        }
    )]
    Upstream {
        /// The URL that was called (without credentials).
        endpoint: String,
        /// What went wrong, with its causes.
        cause: String,
        /// Whether it was a timeout (gateway timeout) rather than a connection failure.
        timed_out: bool,
        /// Whether a connection was made, so the upstream itself reset it or did not answer in
        /// time (what error recording keeps), rather than none (refused, unresolvable).
        connected: bool,
        /// Whether the failure was stored (error recording on, a connection made).
        recorded: bool,
    },
    /// Replay of a recording of an upstream that gave no answer (recorded with error
    /// recording on): the proxy reproduces it by closing the connection without an answer,
    /// after the recorded delay, capped.
    #[error("replayed the recorded upstream failure of {key}: {failure}")]
    FailureReplayed {
        /// The key whose recording is the failure.
        key: Key,
        /// What the upstream did.
        failure: cassette_tape::UpstreamFailure,
    },
    /// A request needed an upstream in replay mode, which never opens a connection: a bug in
    /// the caller's choice of path, reported instead of calling out.
    #[error("replay mode never calls an upstream, yet a request for target `{target}` needed one")]
    ReplayOnly {
        /// The target (route name).
        target: String,
    },
    /// Adopt: no interaction of the test's vcrpy tapes answers the request; nothing was
    /// stored, and nothing was sent anywhere.
    #[error("the test's vcrpy tapes do not answer: {reason}; nothing was recorded")]
    Unanswered {
        /// Why (the tapes named, the request as the vendor would have seen it, the matchers).
        reason: String,
    },
    /// A request needed an upstream of a recorder that answers from vcrpy tapes only (adopt),
    /// which never opens a connection: an MCP route, say.
    #[error(
        "this recorder answers from vcrpy tapes and never calls an upstream, yet a request for \
         target `{target}` needed one"
    )]
    TapesOnly {
        /// The target (route name).
        target: String,
    },
    /// A test asked for a mode that calls the upstream of a recorder that replays: replay
    /// never opens a connection, whatever a test file says.
    #[error(
        "test `{test}` asks for mode {asked}, which calls the upstream, but the recorder {mode}s \
         and never does; run the whole session in a mode that records to record it"
    )]
    ModeRefused {
        /// The test.
        test: String,
        /// The mode it asked for.
        asked: crate::Mode,
        /// The recorder's own mode.
        mode: crate::Mode,
    },
    /// An MCP server's command could not be started.
    #[error("cannot start the MCP server `{command}`: {reason}")]
    McpServerStart {
        /// The command line.
        command: String,
        /// Why it did not start.
        reason: String,
    },
    /// A stored cassette cannot be read as a cassette document.
    #[error(
        "corrupt cassette {key} in {location}: {reason}; re-record it (record mode) or delete it"
    )]
    Corrupt {
        /// The key.
        key: Key,
        /// The store location.
        location: String,
        /// What is wrong.
        reason: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cassette_store::Error),
    /// A redaction rule is invalid.
    #[error(transparent)]
    Redact(cassette_tape::Error),
    /// A stream could not be assembled or re-synthesized.
    #[error(transparent)]
    Stream(#[from] cassette_wire::StreamError),
}

/// A setting named by [`Error::InvalidSetting`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Setting {
    /// The largest request body accepted.
    BodyLimit,
    /// The largest upstream answer recorded or read whole.
    AnswerLimit,
    /// The size of the pieces a replayed stream is cut into.
    StreamChunkSize,
    /// How many connections the proxy serves at once.
    MaxConnections,
    /// How long a connection may take to send its request headers.
    HeaderTimeout,
    /// How long a request body may stall.
    BodyTimeout,
    /// A web page origin allowed to use the proxy.
    AllowedOrigin,
    /// The HTTP status a replay miss is answered with.
    MissStatus,
    /// The control pipe of a test runner (the proxy's stdin and stdout).
    ControlPipe,
    /// Where what the mode forwards is answered (an upstream, or vcrpy tapes).
    Answers,
    /// The test runner whose life bounds the proxy's.
    Runner,
    /// The per-run secret a recording proxy requires of its callers.
    RunSecret,
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Setting::BodyLimit => "body limit",
            Setting::AnswerLimit => "answer limit",
            Setting::StreamChunkSize => "stream chunk size",
            Setting::MaxConnections => "connection limit",
            Setting::HeaderTimeout => "header timeout",
            Setting::BodyTimeout => "body timeout",
            Setting::AllowedOrigin => "allowed origin",
            Setting::MissStatus => "miss status",
            Setting::ControlPipe => "control pipe",
            Setting::Answers => "source of answers",
            Setting::Runner => "runner to watch",
            Setting::RunSecret => "run secret",
        })
    }
}

impl Error {
    /// The key of the cassette this error is about, when it is about one.
    pub fn key(&self) -> Option<&Key> {
        match self {
            Error::Miss(miss) => Some(&miss.key),
            Error::Corrupt { key, .. }
            | Error::FailureReplayed { key, .. }
            | Error::Store(
                cassette_store::Error::Corrupt { key, .. }
                | cassette_store::Error::InvalidDocument { key, .. }
                | cassette_store::Error::ReadOnly { key, .. },
            ) => Some(key),
            _ => None,
        }
    }

    /// The HTTP status a proxy answers this error with.
    pub fn http_status(&self) -> u16 {
        match self {
            Error::Miss(_) | Error::Unanswered { .. } => 409,
            Error::InvalidRequest(_) => 400,
            Error::ForeignHost { .. }
            | Error::BrowserOrigin { .. }
            | Error::ModeRefused { .. }
            | Error::Unrouted { .. } => 403,
            Error::SlowBody { .. } => 408,
            Error::BodyTooLarge { .. } => 413,
            Error::Upstream {
                timed_out: true, ..
            } => 504,
            Error::Upstream { .. }
            | Error::FailureReplayed { .. }
            | Error::AnswerTooLarge { .. }
            | Error::NoUpstream { .. }
            | Error::McpServerStart { .. } => 502,
            _ => 500,
        }
    }

    /// A short machine-readable type for JSON error bodies.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Miss(_) => "cassette_miss",
            Error::InvalidRoute { .. }
            | Error::InvalidSetting { .. }
            | Error::NotLoopback { .. }
            | Error::Bind { .. }
            | Error::Channel { .. }
            | Error::HttpClient { .. }
            | Error::UsageLog { .. }
            | Error::Redact(_) => "cassette_config_error",
            Error::Server { .. } => "cassette_internal_error",
            Error::InvalidRequest(_) => "invalid_request_error",
            Error::ForeignHost { .. } | Error::BrowserOrigin { .. } => "cassette_forbidden",
            Error::Unrouted { .. } => "cassette_unrouted",
            Error::SlowBody { .. } => "request_timeout",
            Error::BodyTooLarge { .. } => "request_too_large",
            Error::AnswerTooLarge { .. } => "cassette_answer_too_large",
            Error::NoUpstream { .. } => "cassette_no_upstream",
            Error::Upstream { .. } => "cassette_upstream_error",
            Error::FailureReplayed { .. } => "cassette_failure_replayed",
            Error::McpServerStart { .. } => "cassette_mcp_server_error",
            Error::ReplayOnly { .. } => "cassette_internal_error",
            Error::Unanswered { .. } => "cassette_tape_unanswered",
            Error::TapesOnly { .. } => "cassette_tapes_only",
            Error::ModeRefused { .. } => "cassette_mode_refused",
            // One scheme whichever layer noticed: a damaged document is `cassette_corrupt`
            // whether the store (truncated JSON) or the recorder (not a cassette) found it.
            Error::Corrupt { .. } | Error::Store(cassette_store::Error::Corrupt { .. }) => {
                "cassette_corrupt"
            }
            Error::Store(_) => "cassette_store_error",
            Error::Stream(_) => "cassette_stream_error",
        }
    }
}

/// An error and its causes on one line, `outer: inner: innermost`, for logs and HTTP bodies.
/// A request the tape crate refused is an invalid request; anything else it reports here is
/// a redaction rule (documents are read with their key and store named, as [`Error::Corrupt`]).
impl From<cassette_tape::Error> for Error {
    fn from(err: cassette_tape::Error) -> Error {
        match err {
            cassette_tape::Error::NotJson { .. } => Error::InvalidRequest(err.to_string()),
            other => Error::Redact(other),
        }
    }
}

pub(crate) fn report(err: &(dyn std::error::Error + 'static)) -> String {
    std::iter::successors(Some(err), |e| e.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

/// The error for an upstream call that failed, saying what actually happened.
#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// Under load the operating system gives up on connections by itself: that is what the
    /// message says then, never our own answer timeout, which did not run out.
    #[test]
    fn a_cause_is_shown_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::AddrInUse, "address in use");
        let wrapped = [
            Error::Bind {
                addr: SocketAddr::from(([127, 0, 0, 1], 1)),
                source: io(),
            },
            Error::UsageLog {
                path: "/x/usage.log".into(),
                source: io(),
            },
            Error::Server {
                action: "serving",
                source: Box::new(io()),
            },
            Error::HttpClient {
                source: Box::new(io()),
            },
        ];
        for err in wrapped {
            let source = err.source().map(ToString::to_string);
            assert_eq!(source.as_deref(), Some("address in use"), "{err:?}");
            assert!(!err.to_string().contains("address in use"), "{err}");
            assert_eq!(
                report(&err),
                format!("{err}: address in use"),
                "the chain names the cause once"
            );
        }
        let store = Error::from(cassette_store::Error::Io {
            store: "file",
            action: "reading",
            path: "/x/ab.json".into(),
            source: io(),
        });
        assert_eq!(
            report(&store),
            "file store: reading /x/ab.json: address in use"
        );
    }
}
