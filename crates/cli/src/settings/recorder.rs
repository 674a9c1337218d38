//! The recorder settings shared by `cassette proxy`, `exec`, `run`, `explain` and `probe`:
//! mode, store, cache, upstreams and their keys, usage log, error recording, redaction,
//! keying, streaming and timeouts. Each comes from a flag, else its environment variable,
//! else cassette.toml, else its default; lists (redaction rules, keying names) are the file's
//! followed by the flags'.
//!
//! # Routes
//!
//! Four routes always exist, so replay needs no flags at all:
//!
//! | route       | mounted at     | upstream by default                          | key from |
//! |-------------|----------------|----------------------------------------------|----------|
//! | `default`   | everything else| `UPSTREAM_BASE`, else `https://api.openai.com`| `UPSTREAM_API_KEY`, else `OPENAI_API_KEY` |
//! | `anthropic` | `/anthropic/…` | `https://api.anthropic.com`                  | `ANTHROPIC_API_KEY` |
//! | `ollama`    | `/ollama/…`    | `http://127.0.0.1:11434`                     | none |
//! | `gemini`    | `/gemini/…`    | `https://generativelanguage.googleapis.com`  | `GEMINI_API_KEY`, else `GOOGLE_API_KEY` (`x-goog-api-key`) |
//!
//! `[routes.NAME]` in the file sets a route's upstream, key variable and auth style, or mounts
//! a new one; `--route NAME=URL` replaces an upstream or mounts a new route. A route named
//! `azure` (an Azure resource has no fixed host, so it is never built in) reads its key from
//! `AZURE_OPENAI_API_KEY` and sends it as `api-key` unless the file says otherwise.

use super::file::SettingsFile;
use super::keying::KeyingArgs;
use super::store::{StoreArgs, StoreSpec};
use super::unopened::Unopened;
use super::values::{parse_base_url, parse_memory, parse_route, parse_size};
use anyhow::{bail, Context};
use cassette_recorder::config::{
    ApiKey, DEFAULT_REPLAY_MEMORY, DEFAULT_STREAM_CHUNK, DEFAULT_TARGET,
};
use cassette_recorder::redact::RedactionRules;
use cassette_recorder::{
    ErrorRecording, Mode, Recorder, RecorderConfig, Repeats, Route, StreamReplay,
};
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
    ("gemini", "https://generativelanguage.googleapis.com"),
];

/// Whether a route exists without being configured.
pub(crate) fn is_built_in_route(name: &str) -> bool {
    name == DEFAULT_TARGET || BUILT_IN_ROUTES.iter().any(|(n, _)| *n == name)
}

/// Seconds an upstream may take to answer when `--upstream-timeout` is not given.
const DEFAULT_UPSTREAM_TIMEOUT_SECS: u64 = 600;

/// The environment variables a built-in route (or a route with a known name) takes its key
/// from, first set wins.
pub(crate) fn built_in_key_sources(route: &str) -> &'static [&'static str] {
    match route {
        DEFAULT_TARGET => &["UPSTREAM_API_KEY", "OPENAI_API_KEY"],
        "anthropic" => &["ANTHROPIC_API_KEY"],
        "gemini" => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        "azure" => &["AZURE_OPENAI_API_KEY"],
        _ => &[],
    }
}

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
    /// is the key's target. Repeatable; replaces the built-in anthropic, ollama and gemini upstreams.
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
    #[arg(long, overrides_with = "no_record_errors")]
    record_errors: bool,

    /// Do not store upstream error answers, even when cassette.toml says `record_errors = true`.
    #[arg(long, overrides_with = "record_errors")]
    no_record_errors: bool,

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

    /// Memory for ready-to-send replay answers, each still checked against the stored cassette
    /// on every hit; 0 keeps none [default: 64MiB].
    #[arg(long, env = "CASSETTE_REPLAY_MEMORY", value_name = "SIZE", value_parser = parse_memory)]
    replay_memory: Option<usize>,
    /// Keep each recorded stream's events exactly as the upstream sent them and replay those,
    /// instead of re-synthesizing the provider's reference framing from the final response
    /// (for gateways whose framing differs). Replay follows what each cassette holds.
    #[arg(long, env = "CASSETTE_EXACT_STREAMS")]
    exact_streams: bool,

    /// Seconds an upstream may take to answer before the request fails with 504 [default: 600].
    #[arg(long, env = "CASSETTE_UPSTREAM_TIMEOUT", value_name = "SECONDS")]
    upstream_timeout: Option<u64>,

    /// same (every repeat of a request gets its one answer) or sequence (the n-th time a
    /// request is sent in this session gets its n-th recording; one more than recorded is a
    /// miss) [default: same].
    #[arg(long, env = "CASSETTE_REPEATS", value_name = "REPEATS")]
    repeats: Option<Repeats>,
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
    /// Where each route's key comes from (the keys themselves are in `config.routes`).
    pub(crate) keys: Vec<RouteKey>,
    /// The settings file these came from, if any.
    pub(crate) file: Option<PathBuf>,
}

/// Where a route's key comes from: the environment variables it is read from, first set wins,
/// and the one it was found in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RouteKey {
    /// The route.
    pub(crate) route: String,
    /// The variables looked at, in order; empty for a route that holds no key.
    pub(crate) sources: Vec<String>,
    /// The variable the key was read from, when one was set.
    pub(crate) from: Option<String>,
}

impl RecorderArgs {
    /// Whether `replay_memory` was set (flag, environment or file), so a command whose
    /// requests are each asked once can keep none by default.
    pub(crate) fn replay_memory_set(&self, file: &SettingsFile) -> bool {
        self.replay_memory.is_some() || file.replay_memory.is_some()
    }

    /// Fills what the flags and environment left unset from the settings file, applies the
    /// defaults and validates everything that spans several settings; no IO but reading the
    /// environment variables that hold the routes' keys.
    pub(crate) fn resolve(&self, file: &SettingsFile) -> anyhow::Result<RecorderSettings> {
        let store = self.store.resolve(file);
        let cache = self.cache.clone().or_else(|| file.cache.clone());
        if let Some(cache) = &cache {
            if cache.url() == store.url() {
                bail!(
                    "the cache {cache} is the store itself; point --cache (or `cache` in cassette.toml) at a local store such as sled://.cassette-cache"
                );
            }
        }
        let record_errors = if self.no_record_errors {
            false
        } else {
            self.record_errors || file.record_errors.unwrap_or(false)
        };
        let (routes, keys) = self.routes(file)?;
        let config = RecorderConfig {
            mode: self.mode.or(file.mode).unwrap_or_default(),
            routes,
            errors: if record_errors {
                ErrorRecording::Record
            } else {
                ErrorRecording::PassThrough
            },
            key: self.keying.config(file),
            redaction: RedactionRules {
                json_paths: [&file.redact_paths[..], &self.redact_paths[..]].concat(),
                patterns: [&file.redact_patterns[..], &self.redact_patterns[..]].concat(),
            },
            stream_chunk_size: self
                .stream_chunk_size
                .or(file.stream_chunk_size)
                .unwrap_or(DEFAULT_STREAM_CHUNK),
            replay_memory: self
                .replay_memory
                .or(file.replay_memory)
                .unwrap_or(DEFAULT_REPLAY_MEMORY),
            stream_replay: if self.exact_streams {
                StreamReplay::Exact
            } else {
                StreamReplay::Synthesize
            },
            upstream_timeout: Duration::from_secs(
                self.upstream_timeout
                    .or(file.upstream_timeout)
                    .unwrap_or(DEFAULT_UPSTREAM_TIMEOUT_SECS)
                    .max(1),
            ),
            mcp_routes: self.mcp_routes.iter().map(|r| r.name.clone()).collect(),
            repeats: self.repeats.or(file.repeats).unwrap_or_default(),
            ..RecorderConfig::default()
        };
        // The recorder's findings name the route or rule the user gave; main adds the flag.
        config.validate()?;
        Ok(RecorderSettings {
            config,
            store,
            cache,
            usage_log: self.usage_log.clone().or_else(|| file.usage_log.clone()),
            keys,
            file: file.path.clone(),
        })
    }

    /// The routes: the built-ins, the file's `[routes.NAME]`, `--upstream`/`UPSTREAM_BASE`,
    /// then `--route` overrides; each with its key read from the environment.
    fn routes(&self, file: &SettingsFile) -> anyhow::Result<(Vec<Route>, Vec<RouteKey>)> {
        let mut routes: Vec<Route> = std::iter::once((DEFAULT_TARGET, DEFAULT_UPSTREAM))
            .chain(BUILT_IN_ROUTES.iter().copied())
            .map(|(name, base_url)| Route::new(name, base_url))
            .collect();
        for from_file in &file.routes {
            let index = match routes.iter().position(|r| r.name == from_file.name) {
                Some(index) => index,
                None => {
                    // The file's validation made sure a new route has an upstream.
                    let upstream = from_file.upstream.clone().unwrap_or_default();
                    routes.push(Route::new(&from_file.name, upstream));
                    routes.len() - 1
                }
            };
            let route = &mut routes[index];
            if let Some(upstream) = &from_file.upstream {
                route.base_url.clone_from(upstream);
            }
            if let Some(auth) = &from_file.auth {
                route.auth = auth.clone();
            }
        }
        if let Some(upstream) = &self.upstream {
            routes[0].base_url.clone_from(upstream);
        }
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
        let keys = read_keys(&mut routes, file);
        Ok((routes, keys))
    }
}

/// Gives each route its key from the environment: the first set variable among its sources.
fn read_keys(routes: &mut [Route], file: &SettingsFile) -> Vec<RouteKey> {
    routes
        .iter_mut()
        .map(|route| {
            let sources = key_sources(&route.name, file);
            let found = sources.iter().find_map(|name| {
                let key = std::env::var(name).ok().and_then(|k| ApiKey::new(&k))?;
                Some((name.clone(), key))
            });
            let from = found.map(|(name, key)| {
                route.api_key = Some(key);
                name
            });
            RouteKey {
                route: route.name.clone(),
                sources,
                from,
            }
        })
        .collect()
}

/// "default (OPENAI_API_KEY), acme (ACME_LLM_KEY); none for anthropic, ollama": which routes
/// hold a key and where it came from.
pub(crate) fn keys_summary(keys: &[RouteKey]) -> String {
    let held: Vec<String> = keys
        .iter()
        .filter_map(|k| Some(format!("{} ({})", k.route, k.from.as_ref()?)))
        .collect();
    let without: Vec<&str> = keys
        .iter()
        .filter(|k| k.from.is_none())
        .map(|k| k.route.as_str())
        .collect();
    let mut out = if held.is_empty() {
        "no route holds a key (clients' own credentials pass through)".to_owned()
    } else {
        format!("keys held for {}", held.join(", "))
    };
    if !held.is_empty() && !without.is_empty() {
        out.push_str(&format!("; none for {}", without.join(", ")));
    }
    out
}

/// The variables a route's key is read from: the file's `api_key_env` when it sets one,
/// else the built-in sources.
fn key_sources(route: &str, file: &SettingsFile) -> Vec<String> {
    match file.route(route).and_then(|r| r.api_key_env.clone()) {
        Some(Some(var)) => vec![var],
        Some(None) => Vec::new(),
        None => built_in_key_sources(route)
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
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
    /// so replay cannot write; in mode off it is not opened at all.
    pub(crate) fn build(self) -> anyhow::Result<Recorder> {
        let store: DynStore = match self.config.mode {
            Mode::Replay => Arc::new(ReadOnlyStore::new(self.open_store()?)),
            // Mode off reads and writes nothing: opening the store would create its folder.
            Mode::Off => Arc::new(Unopened::new(self.store.to_string())),
            Mode::Record | Mode::Auto => self.open_store()?,
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

    fn file(text: &str) -> SettingsFile {
        SettingsFile::parse(std::path::Path::new("/team/cassette.toml"), text)
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    const TEAM_FILE: &str = r#"
store = "file://tests/cassettes"
mode = "auto"
record_errors = true
stream_chunk_size = 7
upstream_timeout = 30
usage_log = "used.log"
repeats = "sequence"

[keying]
volatile = ["seed"]
ignore = ["$..call_id"]

[redact]
paths = ["$..email"]
patterns = ['\d{3}-\d{4}']

[routes.default]
upstream = "https://gateway.team.internal/v1"

[routes.anthropic]
auth = "bearer"

[routes.acme]
upstream = "https://llm.acme.internal"
api_key_env = "CASSETTE_TEST_NEVER_SET_ACME_KEY"
auth = "query:key"
"#;

    #[test]
    fn the_file_fills_what_flags_leave_unset() {
        let settings = parse(&[]).resolve(&file(TEAM_FILE)).unwrap();
        let config = &settings.config;
        assert_eq!(config.mode, Mode::Auto);
        assert_eq!(settings.store.to_string(), "file:///team/tests/cassettes");
        assert_eq!(config.errors, ErrorRecording::Record);
        assert_eq!(config.stream_chunk_size, 7);
        assert_eq!(config.upstream_timeout, Duration::from_secs(30));
        assert_eq!(config.repeats, Repeats::Sequence);
        assert_eq!(
            settings.usage_log.as_deref(),
            Some(std::path::Path::new("/team/used.log"))
        );
        assert_eq!(config.key.extra_volatile, ["seed"]);
        assert_eq!(config.key.ignore[0].to_string(), "$..call_id");
        assert_eq!(config.redaction.json_paths, ["$..email"]);
        assert_eq!(config.redaction.patterns, [r"\d{3}-\d{4}"]);
        let route = |n: &str| config.route(n).unwrap().clone();
        assert_eq!(
            route("default").base_url,
            "https://gateway.team.internal/v1"
        );
        assert_eq!(route("anthropic").base_url, "https://api.anthropic.com");
        assert_eq!(route("anthropic").auth.to_string(), "bearer");
        assert_eq!(route("ollama").auth.to_string(), "bearer");
        assert_eq!(route("acme").base_url, "https://llm.acme.internal");
        assert_eq!(route("acme").auth.to_string(), "query:key");
        assert_eq!(route("acme").api_key, None);
        let acme = settings.keys.iter().find(|k| k.route == "acme").unwrap();
        assert_eq!(acme.sources, ["CASSETTE_TEST_NEVER_SET_ACME_KEY"]);
        assert_eq!(acme.from, None);
        let ollama = settings.keys.iter().find(|k| k.route == "ollama").unwrap();
        assert!(ollama.sources.is_empty());
    }

    #[test]
    fn flags_win_over_the_file_and_lists_add_to_it() {
        let settings = parse(&[
            "--mode",
            "replay",
            "--store",
            "memory://",
            "--no-record-errors",
            "--stream-chunk-size",
            "9",
            "--upstream-timeout",
            "5",
            "--volatile",
            "temperature",
            "--redact-path",
            "$..phone",
            "--route",
            "acme=http://127.0.0.1:9",
            "--upstream",
            "http://127.0.0.1:8",
            "--repeats",
            "same",
        ])
        .resolve(&file(TEAM_FILE))
        .unwrap();
        let config = &settings.config;
        assert_eq!(config.mode, Mode::Replay);
        assert_eq!(config.repeats, Repeats::Same);
        assert_eq!(settings.store.to_string(), "memory://");
        assert_eq!(config.errors, ErrorRecording::PassThrough);
        assert_eq!(config.stream_chunk_size, 9);
        assert_eq!(config.upstream_timeout, Duration::from_secs(5));
        assert_eq!(config.key.extra_volatile, ["seed", "temperature"]);
        assert_eq!(config.redaction.json_paths, ["$..email", "$..phone"]);
        let acme = config.route("acme").unwrap();
        assert_eq!(acme.base_url, "http://127.0.0.1:9");
        // A flag re-points the route; its auth style from the file stays.
        assert_eq!(acme.auth.to_string(), "query:key");
        assert_eq!(
            config.route("default").unwrap().base_url,
            "http://127.0.0.1:8"
        );
    }

    #[test]
    fn no_file_and_no_flags_are_the_defaults() {
        let settings = parse(&[]).resolve(&SettingsFile::default()).unwrap();
        assert_eq!(settings.config.mode, Mode::Replay);
        assert_eq!(settings.store.to_string(), "file://cassettes");
        assert_eq!(settings.config.errors, ErrorRecording::PassThrough);
        assert_eq!(settings.config.repeats, Repeats::Same);
        assert_eq!(settings.config.key, cassette_keying::KeyConfig::default());
        assert_eq!(
            settings.config.route("default").unwrap().base_url,
            DEFAULT_UPSTREAM
        );
        let sources: Vec<_> = settings
            .keys
            .iter()
            .map(|k| (k.route.as_str(), k.sources.join(",")))
            .collect();
        assert_eq!(
            sources,
            [
                ("default", "UPSTREAM_API_KEY,OPENAI_API_KEY".to_owned()),
                ("anthropic", "ANTHROPIC_API_KEY".to_owned()),
                ("ollama", String::new()),
                ("gemini", "GEMINI_API_KEY,GOOGLE_API_KEY".to_owned())
            ]
        );
    }

    #[test]
    fn gemini_is_built_in_and_a_route_named_azure_needs_only_its_upstream() {
        let settings = parse(&[])
            .resolve(&file(
                "[routes.azure]\nupstream = \"https://acme.openai.azure.com\"\n",
            ))
            .unwrap();
        let gemini = settings.config.route("gemini").unwrap();
        assert_eq!(gemini.base_url, "https://generativelanguage.googleapis.com");
        assert_eq!(gemini.auth.to_string(), "x-goog-api-key");
        let azure = settings.config.route("azure").unwrap();
        assert_eq!(azure.base_url, "https://acme.openai.azure.com");
        assert_eq!(azure.auth.to_string(), "api-key");
        let sources = |route: &str| {
            let key = settings.keys.iter().find(|k| k.route == route).unwrap();
            key.sources.join(",")
        };
        assert_eq!(sources("gemini"), "GEMINI_API_KEY,GOOGLE_API_KEY");
        assert_eq!(sources("azure"), "AZURE_OPENAI_API_KEY");
        // Without a route of that name there is no Azure upstream to guess.
        let bare = parse(&[]).resolve(&SettingsFile::default()).unwrap();
        assert!(bare.config.route("azure").is_none());
    }

    #[test]
    fn a_file_cache_that_is_the_store_is_refused() {
        let err = parse(&[])
            .resolve(&file(
                "store = \"jsonl://t.jsonl\"\ncache = \"jsonl://./t.jsonl\"",
            ))
            .unwrap_err()
            .to_string();
        assert!(err.contains("store itself"), "{err}");
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
        .resolve(&SettingsFile::default())
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
        .resolve(&SettingsFile::default())
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
            .resolve(&SettingsFile::default())
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
            (&["--repeats", "twice"], "sequence"),
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
            .resolve(&SettingsFile::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("twice"), "{err}");
        let err = parse(&["--store", "memory://", "--cache", "memory://"])
            .resolve(&SettingsFile::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--cache") && err.contains("store itself"),
            "{err}"
        );
    }
}
