//! Typed recorder configuration, validated before any IO.

use crate::error::{Error, Setting};
use crate::mode::Mode;
use crate::redact::{RedactionRules, Redactor};
use cassette_keying::KeyConfig;
use std::time::Duration;

/// The name of the route that serves requests not mounted under a named route.
pub const DEFAULT_TARGET: &str = "default";

/// Default largest request body accepted: 32 MiB.
pub const DEFAULT_MAX_BODY: usize = 32 * 1024 * 1024;

/// Default size of the pieces a replayed stream is cut into.
pub const DEFAULT_STREAM_CHUNK: usize = 64;

/// One upstream: requests for `name` go to `base_url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The route name and key target (`default` for the unnamed route).
    pub name: String,
    /// Base URL such as `https://api.openai.com` or `http://127.0.0.1:11434`.
    pub base_url: String,
}

/// Whether upstream 4xx/5xx answers are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorRecording {
    /// Pass them to the client, store nothing (the default: an outage should not become a tape).
    #[default]
    PassThrough,
    /// Store them like any response, to test an application's error handling.
    Record,
}

/// How a streamed answer is replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamReplay {
    /// Re-synthesized in the provider's own events from the stored final response (the
    /// default): small readable cassettes, one recording serving streaming and non-streaming
    /// requests alike, but the provider's reference framing rather than the upstream's exact
    /// one (see `docs/cassette-format.md`).
    #[default]
    Synthesize,
    /// Recording also keeps the stream's events exactly as the upstream sent them, and replay
    /// sends those: for upstreams whose framing differs from the provider's reference (a
    /// gateway's own event layout, a usage chunk shaped differently).
    Exact,
}

/// Everything a recorder needs besides its store.
#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// What to do with requests.
    pub mode: Mode,
    /// Upstreams by target.
    pub routes: Vec<Route>,
    /// Added to upstream requests that carry no credentials of their own; never stored.
    pub upstream_api_key: Option<String>,
    /// Canonicalization options.
    pub key: KeyConfig,
    /// Extra redaction rules.
    pub redaction: RedactionRules,
    /// Whether upstream error answers are recorded.
    pub errors: ErrorRecording,
    /// Size of the pieces a replayed stream is cut into.
    pub stream_chunk_size: usize,
    /// Whether streams are recorded event by event and replayed as recorded.
    pub stream_replay: StreamReplay,
    /// Largest request body accepted.
    pub max_body: usize,
    /// How long an upstream may take to answer (headers) before the request fails.
    pub upstream_timeout: Duration,
    /// Routes (by name, each also in `routes`) whose upstream is a Streamable HTTP MCP server:
    /// their requests are keyed and stored as MCP JSON-RPC messages (see `docs/mcp.md`).
    pub mcp_routes: Vec<String>,
}

impl Default for RecorderConfig {
    fn default() -> Self {
        RecorderConfig {
            mode: Mode::Replay,
            routes: Vec::new(),
            upstream_api_key: None,
            key: KeyConfig::default(),
            redaction: RedactionRules::default(),
            errors: ErrorRecording::default(),
            stream_chunk_size: DEFAULT_STREAM_CHUNK,
            stream_replay: StreamReplay::default(),
            max_body: DEFAULT_MAX_BODY,
            upstream_timeout: Duration::from_secs(600),
            mcp_routes: Vec::new(),
        }
    }
}

impl RecorderConfig {
    /// Checks the configuration without touching the network or the disk.
    pub fn validate(&self) -> Result<(), Error> {
        let mut seen = Vec::new();
        for route in &self.routes {
            let invalid = |reason: String| Error::InvalidRoute {
                name: route.name.clone(),
                reason,
            };
            if route.name.is_empty()
                || !route
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            {
                return Err(invalid(
                    "a route name must be letters, digits, `-`, `_` or `.`".to_owned(),
                ));
            }
            if seen.contains(&route.name) {
                return Err(invalid("the route is configured twice".to_owned()));
            }
            seen.push(route.name.clone());
            let url = url::Url::parse(&route.base_url)
                .map_err(|e| invalid(format!("`{}` is not a URL: {e}", route.base_url)))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(invalid(format!(
                    "`{}` must be an http:// or https:// URL",
                    route.base_url
                )));
            }
            // Request paths and queries are joined onto the base URL: a query or fragment in
            // it would end up in the middle of every upstream URL.
            if url.query().is_some() || url.fragment().is_some() {
                return Err(invalid(format!(
                    "`{}` has a query or fragment; a base URL is a scheme, host and path",
                    route.base_url
                )));
            }
        }
        for name in &self.mcp_routes {
            if self.route(name).is_none() || name == DEFAULT_TARGET {
                return Err(Error::InvalidRoute {
                    name: name.clone(),
                    reason: "an MCP route must be a named route with an upstream URL".to_owned(),
                });
            }
        }
        Redactor::new(&self.redaction)?;
        if self.stream_chunk_size == 0 {
            return Err(Error::InvalidSetting {
                setting: Setting::StreamChunkSize,
                reason: "it must be at least 1 byte",
            });
        }
        if self.max_body == 0 {
            return Err(Error::InvalidSetting {
                setting: Setting::BodyLimit,
                reason: "it must be at least 1 byte",
            });
        }
        Ok(())
    }

    /// Whether requests to `target` go to a Streamable HTTP MCP server.
    pub fn is_mcp_route(&self, target: &str) -> bool {
        self.mcp_routes.iter().any(|name| name == target)
    }

    /// The route for a target.
    pub fn route(&self, target: &str) -> Option<&Route> {
        self.routes.iter().find(|r| r.name == target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_route(name: &str, url: &str) -> RecorderConfig {
        RecorderConfig {
            routes: vec![Route {
                name: name.into(),
                base_url: url.into(),
            }],
            ..RecorderConfig::default()
        }
    }

    #[test]
    fn validation_names_the_problem() {
        assert!(with_route("anthropic", "https://api.anthropic.com")
            .validate()
            .is_ok());
        let message = |config: RecorderConfig| match config.validate() {
            Err(err @ Error::InvalidRoute { .. }) => err.to_string(),
            other => panic!("expected an invalid route, got {other:?}"),
        };
        assert!(message(with_route("a b", "http://x")).contains("a b"));
        assert!(message(with_route("x", "ftp://x")).contains("http"));
        assert!(message(with_route("x", "not a url")).contains("not a URL"));
        assert!(message(with_route("x", "http://h/v1?k=1")).contains("query or fragment"));
        assert!(message(with_route("x", "http://h/v1#f")).contains("query or fragment"));
        let mut twice = with_route("x", "http://a");
        twice.routes.push(twice.routes[0].clone());
        assert!(message(twice).contains("twice"));
        let zero = RecorderConfig {
            stream_chunk_size: 0,
            ..RecorderConfig::default()
        };
        assert!(matches!(
            zero.validate(),
            Err(Error::InvalidSetting {
                setting: Setting::StreamChunkSize,
                ..
            })
        ));
    }
}
