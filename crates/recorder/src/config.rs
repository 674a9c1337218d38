//! Typed recorder configuration, validated before any IO.

use crate::error::{Error, Setting};
use crate::mode::Mode;
use cassette_keying::KeyConfig;
use cassette_tape::redact::{RedactionRules, Redactor};
use std::time::Duration;

pub use cassette_tape::DEFAULT_TARGET;

/// Default largest request body accepted: 32 MiB.
pub const DEFAULT_MAX_BODY: usize = 32 * 1024 * 1024;

/// Default largest upstream answer recorded or read whole: 256 MiB. LLM answers are a few
/// kilobytes to a few megabytes (images as base64 included); an answer over this is a runaway
/// stream or a download, which would otherwise be held in memory and stored whole.
pub const DEFAULT_MAX_ANSWER: usize = 256 * 1024 * 1024;

/// Default size of the pieces a replayed stream is cut into.
pub const DEFAULT_STREAM_CHUNK: usize = 64;

/// Default memory for ready-to-send replay answers: 64 MiB.
pub const DEFAULT_REPLAY_MEMORY: usize = 64 * 1024 * 1024;

/// One upstream: requests for `name` go to `base_url`, with the route's own key when it has
/// one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The route name and key target (`default` for the unnamed route).
    pub name: String,
    /// Base URL such as `https://api.openai.com` or `http://127.0.0.1:11434`.
    pub base_url: String,
    /// How `api_key` is sent.
    pub auth: AuthStyle,
    /// The route's API key. When set, it **replaces** whatever credential the client sent
    /// (a placeholder such as `cassette`): the upstream receives exactly this one. When
    /// unset, the client's own credential passes through. Never stored, logged or shown.
    pub api_key: Option<ApiKey>,
    /// Which recordings the route replays: only those recorded from its upstream's origin
    /// (its upstream was named for this run), or those of any origin (a built-in route nobody
    /// named an upstream for, so a replay without upstream settings answers from any origin's
    /// recordings; the tapes side of a comparison of tapes with live answers).
    pub replays: Replays,
}

/// Which recordings a route replays ([`Route::replays`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Replays {
    /// Only those recorded from the origin of its upstream: the route's upstream was named for
    /// this run (a flag, the settings file, the user's own base-URL variable, or a library
    /// caller building the route).
    OwnOrigin,
    /// Those recorded from any origin.
    AnyOrigin,
}

impl Route {
    /// A route without a key, sending one (when given later) in the style its name suggests
    /// ([`AuthStyle::for_route`]).
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Route {
        let name = name.into();
        Route {
            auth: AuthStyle::for_route(&name),
            name,
            base_url: base_url.into(),
            api_key: None,
            replays: Replays::OwnOrigin,
        }
    }

    /// The origin (`scheme://host[:port]`) a cassette recorded from `recorded` (its stored
    /// `upstream`) came from, and this route's, when the route replays only its own origin's
    /// recordings and the two differ: that recording answered another vendor (`docs/keying.md`,
    /// "The upstream's origin"). A URL that does not parse compares as its text.
    pub fn other_origin(&self, recorded: &str) -> Option<(String, String)> {
        if self.replays != Replays::OwnOrigin {
            return None;
        }
        let origin = |url: &str| match url::Url::parse(url) {
            Ok(parsed) => parsed.origin().ascii_serialization(),
            Err(_) => url.trim_end_matches('/').to_owned(),
        };
        let (then, now) = (origin(recorded), origin(&self.base_url));
        (then != now).then_some((then, now))
    }

    /// The path a request has under this route, spelled as the upstream's API spells it. The
    /// `anthropic` route's API lives under `/v1`: a path outside it gains the prefix, so a
    /// client that joins `/messages` to a base URL it expected to end in `/v1` (the Vercel AI
    /// SDK) and one that joins `/v1/messages` (the official SDKs) reach the same endpoint and
    /// key alike. Every other path, and every other route, is kept as it is.
    pub fn api_path<'p>(&self, path: &'p str) -> std::borrow::Cow<'p, str> {
        let outside_v1 =
            !(path == "/" || path.is_empty() || path == "/v1" || path.starts_with("/v1/"));
        if self.name == "anthropic" && outside_v1 {
            let slash = if path.starts_with('/') { "" } else { "/" };
            return std::borrow::Cow::Owned(format!("/v1{slash}{path}"));
        }
        std::borrow::Cow::Borrowed(path)
    }

    /// The path a client of the proxy sends for `url`, a URL of this route's upstream (one a
    /// vcrpy tape recorded): the URL's path under the route's base URL, keeping the base's last
    /// segment, which the proxy shares with the request path (`https://api.groq.com/openai/v1`
    /// and `.../openai/v1/chat/completions` give `/v1/chat/completions`). `None` when the URL
    /// has another scheme, host or port, or a path outside the base.
    pub fn local_path(&self, url: &url::Url) -> Option<String> {
        let base = url::Url::parse(&self.base_url).ok()?;
        if base.origin() != url.origin() {
            return None;
        }
        let base_path = base.path().trim_end_matches('/');
        let kept = base_path.rsplit('/').next().unwrap_or("");
        let prefix = &base_path[..base_path.len() - kept.len()];
        url.path()
            .strip_prefix(prefix.trim_end_matches('/'))
            .filter(|rest| rest.starts_with('/'))
            .map(str::to_owned)
    }
}

/// How a route's key is sent to its upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthStyle {
    /// `Authorization: Bearer KEY`: OpenAI and every OpenAI-compatible server.
    Bearer,
    /// `x-api-key: KEY`: Anthropic.
    XApiKey,
    /// `api-key: KEY`: Azure OpenAI.
    ApiKey,
    /// `x-goog-api-key: KEY`: Gemini.
    XGoogApiKey,
    /// A query parameter, `?NAME=KEY` (`query:key` for Gemini's `?key=`).
    Query(String),
}

impl AuthStyle {
    /// The style of a built-in route: `x-api-key` for `anthropic`, `x-goog-api-key` for
    /// `gemini`, `api-key` for a route named `azure` (Azure OpenAI), a bearer token otherwise.
    pub fn for_route(name: &str) -> AuthStyle {
        match name {
            "anthropic" => AuthStyle::XApiKey,
            "gemini" => AuthStyle::XGoogApiKey,
            "azure" => AuthStyle::ApiKey,
            _ => AuthStyle::Bearer,
        }
    }
}

impl std::fmt::Display for AuthStyle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthStyle::Bearer => f.write_str("bearer"),
            AuthStyle::XApiKey => f.write_str("x-api-key"),
            AuthStyle::ApiKey => f.write_str("api-key"),
            AuthStyle::XGoogApiKey => f.write_str("x-goog-api-key"),
            AuthStyle::Query(name) => write!(f, "query:{name}"),
        }
    }
}

impl std::str::FromStr for AuthStyle {
    type Err = String;

    /// `bearer`, `x-api-key`, `api-key`, `x-goog-api-key` or `query:NAME`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "bearer" => Ok(AuthStyle::Bearer),
            "x-api-key" => Ok(AuthStyle::XApiKey),
            "api-key" => Ok(AuthStyle::ApiKey),
            "x-goog-api-key" => Ok(AuthStyle::XGoogApiKey),
            other => match other.strip_prefix("query:") {
                Some(name)
                    if !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
                {
                    Ok(AuthStyle::Query(name.to_owned()))
                }
                _ => Err(format!(
                    "`{other}` is not an auth style: use bearer, x-api-key, api-key, x-goog-api-key or query:NAME"
                )),
            },
        }
    }
}

/// An API key. It is never printed, serialized or stored: `Debug` shows only that a key is
/// there, and there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key from its text (surrounding whitespace removed); `None` when that leaves nothing.
    pub fn new(key: &str) -> Option<ApiKey> {
        let key = key.trim();
        (!key.is_empty()).then(|| ApiKey(key.to_owned()))
    }

    /// The key itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<set>)")
    }
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

/// How repeats of one request within a session (one recorder: a proxy, an `exec` run, a
/// stdio MCP session) are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Repeats {
    /// One recording per request: every repeat gets the same answer (the default).
    #[default]
    Same,
    /// The n-th occurrence of a request has a recording of its own (its occurrence key,
    /// `docs/keying.md`): recorded as such, replayed in order, and one more repeat than
    /// recorded is a miss. For requests whose answer legitimately changes (sampling at
    /// temperature 1, polling, a counter tool).
    Sequence,
}

/// Whether a recording made by one test answers another test that sends the same request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sharing {
    /// A recording answers every test that sends its request, after the test's own
    /// test-scoped recording of it when it has one (the default).
    #[default]
    Shared,
    /// Adopt: this test's answers are its own. A recording another test made answers this
    /// test only when the upstream gives this test the same answer; a different answer is
    /// stored under the request's test-scoped key (`docs/keying.md`, "Test-scoped keys").
    /// Applies only where the mode records create-only (auto); elsewhere it is `Shared`.
    Own,
}

impl Sharing {
    /// `shared` or `own`.
    pub fn as_str(self) -> &'static str {
        match self {
            Sharing::Shared => "shared",
            Sharing::Own => "own",
        }
    }
}

impl Repeats {
    /// `same` or `sequence`.
    pub fn as_str(self) -> &'static str {
        match self {
            Repeats::Same => "same",
            Repeats::Sequence => "sequence",
        }
    }
}

impl std::fmt::Display for Repeats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Repeats {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "same" => Ok(Repeats::Same),
            "sequence" => Ok(Repeats::Sequence),
            other => Err(format!(
                "unknown repeats `{other}`: use same (one answer per request) or sequence (the n-th repeat gets the n-th recording)"
            )),
        }
    }
}

/// Where what the mode forwards is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Answers {
    /// By the route's upstream, over the network (the default).
    #[default]
    Upstream,
    /// Adopt: from the vcrpy tapes of the running test, named when its scope begins
    /// ([`Scope::tapes`](crate::Scope::tapes)), matched as vcrpy matched them. The recorder
    /// owns no HTTP client and opens no connection anywhere (traffic that bypassed the base
    /// URL is refused); a request no interaction answers gets no answer and is not stored.
    Tapes,
}

/// Whether files a test downloads from a host no route serves (an image, a PDF) are stored as
/// recordings of that host when a tape or an import holds them (`docs/keying.md`, "Profile
/// `download`"). Stored downloads are served in every mode either way; none ever reaches the
/// network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Downloads {
    /// Stored: adopt keeps what the test's tapes answer for such a host, import what a tape
    /// holds (the default).
    #[default]
    Stored,
    /// Not stored: such a request stays refused, as a bypass of the base URL.
    Refused,
}

/// Everything a recorder needs besides its store.
#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// What to do with requests.
    pub mode: Mode,
    /// Upstreams by target, each with its own key (if any).
    pub routes: Vec<Route>,
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
    /// Largest upstream answer, in bytes as the upstream sends them (a stream's events
    /// included): an answer read whole that is larger fails, a stream that grows larger is cut
    /// with an error event for the client, and neither is recorded.
    pub max_answer: usize,
    /// How long an upstream may take to answer (headers) before the request fails.
    pub upstream_timeout: Duration,
    /// Routes (by name, each also in `routes`) whose upstream is a Streamable HTTP MCP server:
    /// their requests are keyed and stored as MCP JSON-RPC messages (see `docs/mcp.md`).
    pub mcp_routes: Vec<String>,
    /// How repeats of one request within the recorder's life are answered.
    pub repeats: Repeats,
    /// Bytes of memory for ready-to-send replay answers, each checked against the stored
    /// document on every hit (0: none kept).
    pub replay_memory: usize,
    /// Where what the mode forwards is answered: the upstream, or the test's vcrpy tapes.
    pub answers: Answers,
    /// Whether downloads the tapes hold are stored (adopt).
    pub downloads: Downloads,
}

impl Default for RecorderConfig {
    fn default() -> Self {
        RecorderConfig {
            mode: Mode::Replay,
            routes: Vec::new(),
            key: KeyConfig::default(),
            redaction: RedactionRules::default(),
            errors: ErrorRecording::default(),
            stream_chunk_size: DEFAULT_STREAM_CHUNK,
            stream_replay: StreamReplay::default(),
            max_body: DEFAULT_MAX_BODY,
            max_answer: DEFAULT_MAX_ANSWER,
            upstream_timeout: Duration::from_secs(600),
            mcp_routes: Vec::new(),
            repeats: Repeats::Same,
            replay_memory: DEFAULT_REPLAY_MEMORY,
            answers: Answers::Upstream,
            downloads: Downloads::Stored,
        }
    }
}

impl RecorderConfig {
    /// Checks the configuration without touching the network or the disk.
    pub fn validate(&self) -> Result<(), Error> {
        if self.answers == Answers::Tapes && !self.mode.may_call_upstream() {
            return Err(Error::InvalidSetting {
                setting: Setting::Answers,
                reason: "tapes answer what the mode forwards, and replay forwards nothing: \
                         answer from tapes in mode auto or record",
            });
        }
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
        if self.max_answer == 0 {
            return Err(Error::InvalidSetting {
                setting: Setting::AnswerLimit,
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
            routes: vec![Route::new(name, url)],
            ..RecorderConfig::default()
        }
    }

    #[test]
    fn auth_styles_parse_and_display_alike() {
        for text in [
            "bearer",
            "x-api-key",
            "api-key",
            "x-goog-api-key",
            "query:key",
        ] {
            let style: AuthStyle = text.parse().unwrap();
            assert_eq!(style.to_string(), text);
        }
        assert_eq!(
            "query:api_key".parse::<AuthStyle>(),
            Ok(AuthStyle::Query("api_key".into()))
        );
        for bad in ["Bearer", "query:", "query:a b", "basic"] {
            let err = bad.parse::<AuthStyle>().unwrap_err();
            assert!(err.contains("bearer, x-api-key"), "{bad}: {err}");
        }
        assert_eq!(AuthStyle::for_route("anthropic"), AuthStyle::XApiKey);
        assert_eq!(AuthStyle::for_route("default"), AuthStyle::Bearer);
        assert_eq!(AuthStyle::for_route("gemini"), AuthStyle::XGoogApiKey);
        assert_eq!(AuthStyle::for_route("azure"), AuthStyle::ApiKey);
    }

    #[test]
    fn anthropic_paths_live_under_v1() {
        let anthropic = Route::new("anthropic", "https://api.anthropic.com");
        for (path, expected) in [
            ("/messages", "/v1/messages"),
            ("/messages/count_tokens", "/v1/messages/count_tokens"),
            ("/v1/messages", "/v1/messages"),
            ("/v1", "/v1"),
            ("/", "/"),
            ("/v10/x", "/v1/v10/x"),
        ] {
            assert_eq!(anthropic.api_path(path), expected, "{path}");
        }
        let other = Route::new("default", "https://api.openai.com");
        assert_eq!(other.api_path("/chat/completions"), "/chat/completions");
    }

    #[test]
    fn keys_never_show_in_debug_output() {
        let mut route = Route::new("default", "https://api.openai.com");
        route.api_key = ApiKey::new(" sk-live-secret-1234 ");
        assert_eq!(
            route.api_key.as_ref().map(ApiKey::expose),
            Some("sk-live-secret-1234")
        );
        let config = RecorderConfig {
            routes: vec![route],
            ..RecorderConfig::default()
        };
        let shown = format!("{config:?} {config:#?}");
        assert!(!shown.contains("sk-live"), "{shown}");
        assert!(shown.contains("ApiKey(<set>)"), "{shown}");
        assert_eq!(ApiKey::new("  "), None);
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
