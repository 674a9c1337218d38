//! The one public error type of the recorder crate.

use crate::miss::Miss;
use std::time::Duration;

/// A recorder result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the recorder can fail with. Each variant names the key, target, endpoint or file
/// involved and says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Replay found no cassette for the request. Never falls back to the network.
    #[error("{0}")]
    Miss(Box<Miss>),
    /// The configuration is invalid; nothing was done.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The request cannot be handled as sent.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The request body is over the configured limit.
    #[error("request body of {size} bytes is over the limit of {limit} bytes; raise --max-body if this is intended")]
    BodyTooLarge {
        /// The body size (or a lower bound, when it was cut off while reading).
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A request needs the network but no upstream is configured for its target.
    #[error(
        "no upstream configured for target `{target}`: set UPSTREAM_BASE or --route {target}=URL"
    )]
    NoUpstream {
        /// The target (route name).
        target: String,
    },
    /// The upstream could not be reached, timed out or reset the connection.
    #[error("upstream {endpoint} {}: {cause}; nothing was recorded", if *.timed_out { "timed out" } else { "unreachable" })]
    Upstream {
        /// The URL that was called (without credentials).
        endpoint: String,
        /// What went wrong.
        cause: String,
        /// Whether it was a timeout (gateway timeout) rather than a connection failure.
        timed_out: bool,
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
    #[error("corrupt cassette {key} in {location}: {reason}; re-record it (CASSETTE_MODE=record) or delete it")]
    Corrupt {
        /// The key.
        key: String,
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
    Redact(#[from] crate::redact::RedactError),
    /// A stream could not be assembled or re-synthesized.
    #[error(transparent)]
    Stream(#[from] crate::stream::StreamError),
}

impl Error {
    /// The HTTP status a proxy answers this error with.
    pub fn http_status(&self) -> u16 {
        match self {
            Error::Miss(_) => 409,
            Error::InvalidRequest(_) => 400,
            Error::BodyTooLarge { .. } => 413,
            Error::Upstream {
                timed_out: true, ..
            } => 504,
            Error::Upstream { .. } | Error::NoUpstream { .. } | Error::McpServerStart { .. } => 502,
            _ => 500,
        }
    }

    /// A short machine-readable type for JSON error bodies.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Miss(_) => "cassette_miss",
            Error::Config(_) => "cassette_config_error",
            Error::InvalidRequest(_) => "invalid_request_error",
            Error::BodyTooLarge { .. } => "request_too_large",
            Error::NoUpstream { .. } => "cassette_no_upstream",
            Error::Upstream { .. } => "cassette_upstream_error",
            Error::McpServerStart { .. } => "cassette_mcp_server_error",
            Error::Corrupt { .. } => "cassette_corrupt",
            Error::Store(_) => "cassette_store_error",
            Error::Redact(_) => "cassette_config_error",
            Error::Stream(_) => "cassette_stream_error",
        }
    }
}

pub(crate) fn upstream_error(endpoint: &str, err: &reqwest::Error, timeout: Duration) -> Error {
    let timed_out = err.is_timeout();
    let mut cause = if timed_out {
        format!("no answer within {}s", timeout.as_secs_f32())
    } else if err.is_connect() {
        "connection failed".to_owned()
    } else {
        "request failed".to_owned()
    };
    let mut source = std::error::Error::source(err);
    while let Some(inner) = source {
        cause.push_str(": ");
        cause.push_str(&inner.to_string());
        source = inner.source();
    }
    Error::Upstream {
        endpoint: endpoint.to_owned(),
        cause,
        timed_out,
    }
}
