//! The recorder settings shared by `cassette proxy`, `exec`, `run`, `explain` and `probe`:
//! mode, store, cache, upstreams, API key, usage log, error recording, redaction, keying,
//! streaming and timeouts.
//!
//! # Routes
//!
//! Three routes always exist, so replay needs no flags at all:
//!
//! | route       | mounted at     | upstream by default                          |
//! |-------------|----------------|----------------------------------------------|
//! | `default`   | everything else| `UPSTREAM_BASE`, else `https://api.openai.com`|
//! | `anthropic` | `/anthropic/…` | `https://api.anthropic.com`                  |
//! | `ollama`    | `/ollama/…`    | `http://127.0.0.1:11434`                     |
//!
//! `--route NAME=URL` replaces a built-in upstream or mounts a new route.

use super::keying::KeyingArgs;
use super::store::{StoreArgs, StoreSpec};
use super::values::{parse_base_url, parse_route, parse_size};
use anyhow::{bail, Context};
use cassette_recorder::config::{DEFAULT_STREAM_CHUNK, DEFAULT_TARGET};
use cassette_recorder::redact::RedactionRules;
use cassette_recorder::{ErrorRecording, Mode, Recorder, RecorderConfig, Route, StreamReplay};
use cassette_store::readonly::ReadOnlyStore;
use cassette_store::DynStore;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The default route's upstream when `UPSTREAM_BASE` is not set.
pub(crate) const DEFAULT_UPSTREAM: &str = "https://api.openai.com";

/// Routes mounted even without flags: name and default upstream.
pub(crate) const BUILT_IN_ROUTES: &[(&str, &str)] = &[
    ("anthropic", "https://api.anthropic.com"),
    ("ollama", "http://127.0.0.1:11434"),
];

/// Seconds an upstream may take to answer when `--upstream-timeout` is not given.
const DEFAULT_UPSTREAM_TIMEOUT_SECS: u64 = 600;

/// Where the recorder reads and writes, and what it calls (raw flags; see
/// [`RecorderArgs::resolve`]).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RecorderArgs {
    /// replay (answer from cassettes; a miss is an error), record (call the upstream and
    /// overwrite), auto (replay hits, record misses) or off (pass through, store nothing)
    /// [default: replay].
    #[arg(long, env = "CASSETTE_MODE", value_name = "MODE")]
    mode: Option<Mode>,

    /// Where cassettes are read and written.
    #[command(flatten)]
    store: StoreArgs,

    /// A local store put in front of --store as a read-through cache.
    #[arg(long, env = "CASSETTE_CACHE", value_name = "URL")]
    cache: Option<StoreSpec>,

    /// Upstream of the default route [default: https://api.openai.com].
    #[arg(long, env = "UPSTREAM_BASE", value_name = "URL", value_parser = parse_base_url)]
    upstream: Option<String>,

    /// Mount a route: requests to /NAME/... go to URL with the /NAME prefix stripped, and NAME
    /// is the key's target. Repeatable; replaces the built-in anthropic and ollama upstreams.
    #[arg(long = "route", value_name = "NAME=URL", value_parser = parse_route)]
    routes: Vec<Route>,

    /// Mount a Streamable HTTP MCP server: requests to /NAME/... go to URL and are recorded and
    /// replayed as MCP JSON-RPC messages, NAME being the server's identity in keys. Repeatable.
    #[arg(long = "mcp-route", value_name = "NAME=URL", value_parser = parse_route)]
    mcp_routes: Vec<Route>,

    /// Append the key of every cassette served or recorded to FILE (for `cassette gc --unused`).
    #[arg(long, env = "CASSETTE_USAGE_LOG", value_name = "FILE")]
    usage_log: Option<PathBuf>,

    /// Store upstream 4xx/5xx answers too (to test error handling); by default they are passed
    /// to the client and not stored.
    #[arg(long)]
    record_errors: bool,

    /// Replace the value at this JSON path in stored request and response bodies with
    /// "[REDACTED]" (e.g. `$.messages[*].content`, `$..email`). Repeatable. Redaction never
    /// changes the key.
    #[arg(long = "redact-path", value_name = "JSONPATH")]
    redact_paths: Vec<String>,

    /// Replace matches of this regex in stored strings and text bodies with "[REDACTED]".
    /// Repeatable.
    #[arg(long = "redact-pattern", value_name = "REGEX")]
    redact_patterns: Vec<String>,

    /// How bodies are keyed.
    #[command(flatten)]
    keying: KeyingArgs,

    /// Size of the pieces a replayed stream is cut into, so clients' parsers run over
    /// partial chunks [default: 64].
    #[arg(long, env = "CASSETTE_STREAM_CHUNK", value_name = "SIZE", value_parser = parse_size)]
    stream_chunk_size: Option<usize>,

    /// Keep each recorded stream's events exactly as the upstream sent them and replay those,
    /// instead of re-synthesizing the provider's reference framing from the final response
    /// (for gateways whose framing differs). Replay follows what each cassette holds.
    #[arg(long, env = "CASSETTE_EXACT_STREAMS")]
    exact_streams: bool,

    /// Seconds an upstream may take to answer before the request fails with 504 [default: 600].
    #[arg(long, env = "CASSETTE_UPSTREAM_TIMEOUT", value_name = "SECONDS")]
    upstream_timeout: Option<u64>,
}

/// The recorder settings, validated: everything needed to build a [`Recorder`], with no file
/// or socket opened yet. Commands may adjust `config` (a probe forces mode `off`) before
/// [`RecorderSettings::build`].
#[derive(Debug, Clone)]
pub(crate) struct RecorderSettings {
    /// The recorder's own configuration.
    pub(crate) config: RecorderConfig,
    /// Where cassettes are read and written.
    pub(crate) store: StoreSpec,
    /// A local store in front of `store`.
    pub(crate) cache: Option<StoreSpec>,
    /// Where served and recorded keys are appended.
    pub(crate) usage_log: Option<PathBuf>,
}

impl RecorderArgs {
    /// Applies the defaults and validates everything that spans several flags; no IO.
    pub(crate) fn resolve(&self) -> anyhow::Result<RecorderSettings> {
        let store = self.store.resolve();
        if let Some(cache) = &self.cache {
            if cache.url() == store.url() {
                bail!(
                    "--cache {cache} is the store itself; point --cache at a local store such as sled://.cassette-cache"
                );
            }
        }
        let upstream_api_key = std::env::var("UPSTREAM_API_KEY")
            .ok()
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty());
        let config = RecorderConfig {
            mode: self.mode.unwrap_or_default(),
            routes: self.routes()?,
            upstream_api_key,
            errors: if self.record_errors {
                ErrorRecording::Record
            } else {
                ErrorRecording::PassThrough
            },
            key: self.keying.config(),
            redaction: RedactionRules {
                json_paths: self.redact_paths.clone(),
                patterns: self.redact_patterns.clone(),
            },
            stream_chunk_size: self.stream_chunk_size.unwrap_or(DEFAULT_STREAM_CHUNK),
            stream_replay: if self.exact_streams {
                StreamReplay::Exact
            } else {
                StreamReplay::Synthesize
            },
            upstream_timeout: Duration::from_secs(
                self.upstream_timeout
                    .unwrap_or(DEFAULT_UPSTREAM_TIMEOUT_SECS)
                    .max(1),
            ),
            mcp_routes: self.mcp_routes.iter().map(|r| r.name.clone()).collect(),
            ..RecorderConfig::default()
        };
        // The recorder's findings name the route or rule the user gave; main adds the flag.
        config.validate()?;
        Ok(RecorderSettings {
            config,
            store,
            cache: self.cache.clone(),
            usage_log: self.usage_log.clone(),
        })
    }

    /// The routes: the default route, the built-ins, then `--route` overrides.
    fn routes(&self) -> anyhow::Result<Vec<Route>> {
        let default_upstream = self.upstream.as_deref().unwrap_or(DEFAULT_UPSTREAM);
        let mut routes: Vec<Route> = std::iter::once((DEFAULT_TARGET, default_upstream))
            .chain(BUILT_IN_ROUTES.iter().copied())
            .map(|(name, base_url)| Route {
                name: name.to_owned(),
                base_url: base_url.to_owned(),
            })
            .collect();
        let given_routes: Vec<&Route> = self.routes.iter().chain(&self.mcp_routes).collect();
        for (i, given) in given_routes.iter().enumerate() {
            if given_routes[..i].iter().any(|r| r.name == given.name) {
                bail!("--route `{}` is given twice", given.name);
            }
            if given.name == DEFAULT_TARGET && self.upstream.is_some() {
                bail!("--route default=URL and --upstream/UPSTREAM_BASE both set the default route; keep one");
            }
            match routes.iter_mut().find(|r| r.name == given.name) {
                Some(route) => route.base_url.clone_from(&given.base_url),
                None => routes.push((*given).clone()),
            }
        }
        Ok(routes)
    }
}

impl RecorderSettings {
    /// Opens the store, with the cache in front when one is set. A cache that cannot be opened
    /// is bypassed with a warning: it only ever saves time.
    pub(crate) fn open_store(&self) -> anyhow::Result<DynStore> {
        let remote = self.store.open()?;
        Ok(match &self.cache {
            None => remote,
            Some(cache) => cassette_store::tiered::with_cache(remote, cache.url()),
        })
    }

    /// Opens the store and builds the recorder. In replay mode the store is wrapped read-only,
    /// so replay cannot write.
    pub(crate) fn build(self) -> anyhow::Result<Recorder> {
        let store = self.open_store()?;
        let store: DynStore = match self.config.mode {
            Mode::Replay => Arc::new(ReadOnlyStore::new(store)),
            _ => store,
        };
        Recorder::with_usage_log(self.config, store, self.usage_log)
            .context("cannot build the recorder")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: RecorderArgs,
    }

    fn try_parse(argv: &[&str]) -> Result<RecorderArgs, String> {
        Cli::try_parse_from(std::iter::once("cassette").chain(argv.iter().copied()))
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    fn parse(argv: &[&str]) -> RecorderArgs {
        try_parse(argv).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn built_in_routes_and_overrides() {
        let settings = parse(&[
            "--upstream",
            "http://up",
            "--route",
            "anthropic=http://a",
            "--route",
            "x=http://x",
        ])
        .resolve()
        .unwrap();
        let url = |n: &str| settings.config.route(n).map(|r| r.base_url.clone());
        assert_eq!(url("default").as_deref(), Some("http://up"));
        assert_eq!(url("anthropic").as_deref(), Some("http://a"));
        assert_eq!(url("ollama").as_deref(), Some("http://127.0.0.1:11434"));
        assert_eq!(url("x").as_deref(), Some("http://x"));
    }

    #[test]
    fn redaction_keying_and_stream_settings_reach_the_config() {
        let config = parse(&[
            "--redact-path",
            "$..email",
            "--redact-pattern",
            "\\d{3}-\\d{4}",
            "--volatile",
            "seed",
            "--keep-volatile",
            "user",
            "--stream-chunk-size",
            "1KiB",
        ])
        .resolve()
        .unwrap()
        .config;
        assert_eq!(config.redaction.json_paths, ["$..email"]);
        assert_eq!(config.redaction.patterns, ["\\d{3}-\\d{4}"]);
        assert_eq!(config.key.extra_volatile, ["seed"]);
        assert_eq!(config.key.keep_volatile, ["user"]);
        assert_eq!(config.stream_chunk_size, 1024);
    }

    #[test]
    fn an_invalid_redaction_pattern_is_refused_before_any_io() {
        let args = parse(&[
            "--redact-pattern",
            "(unclosed",
            "--store",
            "file:///nonexistent/x",
        ]);
        let err = args
            .resolve()
            .and_then(RecorderSettings::build)
            .unwrap_err();
        assert!(format!("{err:#}").contains("(unclosed"), "{err:#}");
        assert!(!std::path::Path::new("/nonexistent/x").exists());
    }

    #[test]
    fn bad_settings_are_named_before_any_io() {
        // One bad value: clap refuses it as it parses, naming the flag.
        for (argv, needle) in [
            (&["--route", "nourl"][..], "NAME=URL"),
            (&["--route", "a=ftp://x"], "http"),
            (&["--upstream", "localhost:8080"], "http"),
            (&["--cache", "gopher://x"], "gopher"),
            (&["--mode", "replays"], "replays"),
        ] {
            let err = try_parse(argv).unwrap_err();
            assert!(err.contains(needle), "{argv:?}: {err}");
            assert!(
                err.contains(argv[0]),
                "{argv:?} does not name the flag: {err}"
            );
        }
        // Flags that disagree: refused when the settings are resolved.
        let err = parse(&["--route", "a=http://x", "--route", "a=http://y"])
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(err.contains("twice"), "{err}");
        let err = parse(&["--store", "memory://", "--cache", "memory://"])
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--cache") && err.contains("store itself"),
            "{err}"
        );
    }
}
