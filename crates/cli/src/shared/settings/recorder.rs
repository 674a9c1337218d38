//! The recorder settings shared by `cassette proxy`, `exec`, `run`, `explain` and `probe`:
//! mode, store, cache, upstreams and their keys, usage log, error recording, redaction,
//! keying, streaming and timeouts. Each comes from a flag, else its environment variable,
//! else cassette.toml, else its default; lists (redaction rules, keying names) are the file's
//! followed by the flags'.
//!
//! # Routes
//!
//! Six routes always exist, so replay needs no flags at all:
//!
//! | route       | mounted at     | upstream by default                          | key from |
//! |-------------|----------------|----------------------------------------------|----------|
//! | `default`   | everything else| `UPSTREAM_BASE`, else `https://api.openai.com`| `UPSTREAM_API_KEY`, else `OPENAI_API_KEY` |
//! | `anthropic` | `/anthropic/…` | `https://api.anthropic.com`                  | `ANTHROPIC_API_KEY` |
//! | `ollama`    | `/ollama/…`    | `http://127.0.0.1:11434`                     | none |
//! | `gemini`    | `/gemini/…`    | `https://generativelanguage.googleapis.com`  | `GEMINI_API_KEY`, else `GOOGLE_API_KEY` (`x-goog-api-key`) |
//! | `groq`      | `/groq/…`      | `https://api.groq.com` (the groq SDK joins `/openai/v1/...`) | `GROQ_API_KEY` |
//! | `cohere`    | `/cohere/…`    | `https://api.cohere.com`                     | `CO_API_KEY`, else `COHERE_API_KEY` |
//!
//! `[routes.NAME]` in the file sets a route's upstream, key variable and auth style, or mounts
//! a new one; `--route NAME=URL` replaces an upstream or mounts a new route. A route named
//! `azure` (an Azure resource has no fixed host, so it is never built in) reads its key from
//! `AZURE_OPENAI_API_KEY` and sends it as `api-key` unless the file says otherwise.

use super::file::SettingsFile;
use super::keying::KeyingArgs;
use super::own_endpoint::{self, Honoured};
use super::store::{StoreArgs, StoreSpec};
use super::unopened::Unopened;
use super::usage_log::check_usage_log;
use super::values::{
    is_built_in_route, parse_base_url, parse_flag, parse_memory, parse_route, parse_size,
};
use anyhow::{bail, Context};
use cassette_recorder::config::{
    ApiKey, Replays, DEFAULT_MAX_ANSWER, DEFAULT_REPLAY_MEMORY, DEFAULT_STREAM_CHUNK,
    DEFAULT_TARGET,
};
use cassette_recorder::proxy::built_in_routes;
use cassette_recorder::{
    ErrorRecording, Mode, Recorder, RecorderConfig, Repeats, Route, StreamReplay,
};
use cassette_store::readonly::ReadOnlyStore;
use cassette_store::DynStore;
use cassette_tape::redact::RedactionRules;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
        "groq" => &["GROQ_API_KEY"],
        "cohere" => &["CO_API_KEY", "COHERE_API_KEY"],
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
    /// is the key's target. Repeatable; replaces the built-in anthropic, ollama, gemini, groq and cohere upstreams.
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
    /// Largest upstream answer (a stream's events included): a larger one is not recorded, and
    /// the client gets an error (502, or an error event ending the stream) [default: 256MiB].
    #[arg(long, env = "CASSETTE_MAX_ANSWER", value_name = "SIZE", value_parser = parse_size)]
    max_answer: Option<usize>,

    /// Keep each recorded stream's events exactly as the upstream sent them and replay those,
    /// instead of re-synthesizing the provider's reference framing from the final response
    /// (for gateways whose framing differs). Replay follows what each cassette holds.
    #[arg(long, env = "CASSETTE_EXACT_STREAMS", value_parser = parse_flag)]
    exact_streams: bool,

    /// Seconds an upstream may take to answer before the request fails with 504 [default: 600].
    #[arg(long, env = "CASSETTE_UPSTREAM_TIMEOUT", value_name = "SECONDS")]
    upstream_timeout: Option<u64>,

    /// Let a route's `api_key_env` in cassette.toml name this variable although it is not the
    /// route's own (its built-in source, or NAME_API_KEY for route NAME): the file alone cannot
    /// send any other variable upstream. Repeatable; the variable takes a comma-separated list.
    #[arg(
        long = "allow-key-env",
        env = "CASSETTE_ALLOW_KEY_ENV",
        value_name = "VAR",
        value_delimiter = ','
    )]
    allow_key_env: Vec<String>,

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
    /// The user's own endpoints (base-URL variables) that became routes' upstreams.
    pub(crate) honoured: Vec<Honoured>,
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
        self.resolve_in(file, Ci::from_env())
    }

    /// [`RecorderArgs::resolve`], told whether this runs under CI.
    fn resolve_in(&self, file: &SettingsFile, ci: Ci) -> anyhow::Result<RecorderSettings> {
        let mode = self.mode(file, ci)?;
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
        let (routes, keys, honoured) = self.routes(file, mode)?;
        let config = RecorderConfig {
            mode,
            routes,
            downloads: file.downloads.unwrap_or_default(),
            errors: if record_errors {
                ErrorRecording::Record
            } else {
                ErrorRecording::PassThrough
            },
            key: self.keying.config(file)?,
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
            max_answer: self
                .max_answer
                .or(file.max_answer)
                .unwrap_or(DEFAULT_MAX_ANSWER),
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
            honoured,
            file: file.path.clone(),
        })
    }

    /// The mode: the flag or `CASSETTE_MODE`, else the file's, else replay. Under CI a mode
    /// that calls an upstream must come from the command line or the environment: a settings
    /// file checked in by anyone (a pull request) would otherwise turn a replay job into one
    /// that sends the job's keys out.
    fn mode(&self, file: &SettingsFile, ci: Ci) -> anyhow::Result<Mode> {
        if let Some(mode) = self.mode {
            return Ok(mode);
        }
        let Some(mode) = file.mode else {
            return Ok(Mode::default());
        };
        if ci == Ci::Yes && mode.may_call_upstream() {
            bail!(
                "{} sets mode = \"{mode}\", and under CI (the CI variable is set) a settings file \
                 alone never turns replay into a mode that calls an upstream: set \
                 CASSETTE_MODE={mode} (or --mode {mode}) in the CI job if it is meant to call \
                 one, or take `mode` out of the file",
                file.path
                    .as_deref()
                    .map_or("the settings file".into(), |p| p.display().to_string())
            );
        }
        Ok(mode)
    }

    /// The routes: the built-ins, the file's `[routes.NAME]`, `--upstream`/`UPSTREAM_BASE`,
    /// then `--route` overrides; each with its key read from the environment. Key variables
    /// are checked only when the mode may call an upstream: replay never sends a key.
    fn routes(
        &self,
        file: &SettingsFile,
        mode: Mode,
    ) -> anyhow::Result<(Vec<Route>, Vec<RouteKey>, Vec<Honoured>)> {
        let mut routes: Vec<Route> = built_in_routes()
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
        let given_routes: Vec<&Route> = self.routes.iter().chain(&self.mcp_routes).collect();
        let set_by_cassette = |name: &str| {
            file.routes
                .iter()
                .any(|r| r.name == name && r.upstream.is_some())
                || (name == DEFAULT_TARGET && self.upstream.is_some())
                || given_routes.iter().any(|r| r.name == name)
        };
        let honoured = own_endpoint::honour(&mut routes, set_by_cassette, |name| {
            std::env::var(name).ok()
        })?;
        if let Some(upstream) = &self.upstream {
            routes[0].base_url.clone_from(upstream);
        }
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
        // A built-in route nobody named an upstream for answers from recordings of any origin;
        // a named one only from its own (`docs/keying.md`, "The upstream's origin").
        for route in &mut routes {
            let named =
                set_by_cassette(&route.name) || honoured.iter().any(|h| h.route == route.name);
            if is_built_in_route(&route.name) && !named {
                route.replays = Replays::AnyOrigin;
            }
        }
        if mode.may_call_upstream() {
            self.check_key_variables(file)?;
        }
        let keys = read_keys(&mut routes, file);
        Ok((routes, keys, honoured))
    }

    /// Refuses an `api_key_env` of the file that names a variable other than the route's own
    /// ([`own_key_variables`]) unless the command line or environment allows it: a file must
    /// not be able to send `GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY` or another vendor's key (or
    /// any other secret of the job) to an upstream it names.
    fn check_key_variables(&self, file: &SettingsFile) -> anyhow::Result<()> {
        for route in &file.routes {
            let Some(Some(var)) = &route.api_key_env else {
                continue;
            };
            let own = own_key_variables(&route.name);
            if own.contains(var) || self.allow_key_env.iter().any(|a| a.trim() == var) {
                continue;
            }
            bail!(
                "{}: [routes.{}] api_key_env = \"{var}\" is not the route's own key variable \
                 ({}), and a settings file alone never sends another variable's value upstream; \
                 allow it with --allow-key-env {var} or CASSETTE_ALLOW_KEY_ENV={var}, or name \
                 the route's own",
                file.path
                    .as_deref()
                    .map_or("the settings file".into(), |p| p.display().to_string()),
                route.name,
                own.join(" or ")
            );
        }
        Ok(())
    }
}

/// Whether the environment says this runs under CI (`CI` set to anything but empty or a
/// spelling of no, `0`, `false`, `off`, ..., as GitHub Actions, GitLab, CircleCI, Buildkite and others set it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ci {
    Yes,
    No,
}

impl Ci {
    fn from_env() -> Ci {
        // Set to anything but a spelling of no (`true`, `1`, a provider's name): CI.
        match std::env::var("CI") {
            Ok(v) if parse_flag(&v) != Ok(false) => Ci::Yes,
            _ => Ci::No,
        }
    }
}

/// The variables a settings file may name as a route's key on its own: the vendor's, which for
/// a route with built-in sources are those (`OPENAI_API_KEY` for `default`, `ANTHROPIC_API_KEY`
/// for `anthropic`, ...) and for any other `NAME_API_KEY` after the route's name
/// (`MISTRAL_API_KEY` for `[routes.mistral]`), the vendors' own convention. Any other
/// (`GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`, another route's key) needs `--allow-key-env`.
fn own_key_variables(route: &str) -> Vec<String> {
    match built_in_key_sources(route) {
        [] => vec![format!(
            "{}_API_KEY",
            route.to_ascii_uppercase().replace(['-', '.'], "_")
        )],
        sources => sources.iter().map(|s| (*s).to_owned()).collect(),
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
pub(crate) fn key_sources(route: &str, file: &SettingsFile) -> Vec<String> {
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
        // Replay only reads: a sled database on a full disk is read from a copy. A store that
        // does not exist yet opens as ever, so replay reports misses rather than no store.
        let exists = self.store.local_path().is_some_and(Path::exists);
        let remote = match self.config.mode {
            Mode::Replay if exists => self.store.open_for_reading()?,
            _ => self.store.open()?,
        };
        Ok(match &self.cache {
            None => remote,
            Some(cache) => cassette_store::tiered::with_cache(remote, cache.url()),
        })
    }

    /// Opens the store and builds the recorder. In replay mode the store is wrapped read-only,
    /// so replay cannot write; in mode off it is not opened at all.
    pub(crate) fn build(self) -> anyhow::Result<Recorder> {
        if let Some(log) = &self.usage_log {
            check_usage_log(log)?;
        }
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
        // The file's mode is auto, so its acme key variable, not `ACME_API_KEY`, needs leave.
        let settings = parse(&["--allow-key-env", "CASSETTE_TEST_NEVER_SET_ACME_KEY"])
            .resolve_in(&file(TEAM_FILE), Ci::No)
            .unwrap();
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
        .resolve_in(&file(TEAM_FILE), Ci::No)
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
    fn under_ci_the_file_alone_never_chooses_a_mode_that_calls_an_upstream() {
        for mode in ["auto", "record", "off"] {
            let file = file(&format!("mode = \"{mode}\"\n"));
            let err = format!("{:#}", parse(&[]).resolve_in(&file, Ci::Yes).unwrap_err());
            assert!(err.contains("/team/cassette.toml"), "{err}");
            assert!(err.contains(&format!("CASSETTE_MODE={mode}")), "{err}");
            assert!(err.contains("under CI"), "{err}");
            // Outside CI the file decides; under CI the command line (or CASSETTE_MODE) does.
            assert_eq!(
                parse(&[])
                    .resolve_in(&file, Ci::No)
                    .unwrap()
                    .config
                    .mode
                    .as_str(),
                mode
            );
            let flagged = parse(&["--mode", mode]).resolve_in(&file, Ci::Yes).unwrap();
            assert_eq!(flagged.config.mode.as_str(), mode);
        }
        let replay = file("mode = \"replay\"\n");
        let settings = parse(&[]).resolve_in(&replay, Ci::Yes).unwrap();
        assert_eq!(settings.config.mode, Mode::Replay);
    }

    #[test]
    fn a_key_variable_not_the_routes_own_needs_the_command_lines_permission() {
        let text = "[routes.evil]\nupstream = \"https://collector.example\"\napi_key_env = \"GITHUB_TOKEN\"\n";
        let err = format!(
            "{:#}",
            parse(&["--mode", "auto"])
                .resolve_in(&file(text), Ci::No)
                .unwrap_err()
        );
        assert!(
            err.contains("/team/cassette.toml: [routes.evil] api_key_env = \"GITHUB_TOKEN\""),
            "{err}"
        );
        assert!(
            err.contains("--allow-key-env GITHUB_TOKEN")
                && err.contains("CASSETTE_ALLOW_KEY_ENV=GITHUB_TOKEN"),
            "{err}"
        );
        // The file cannot allow it itself: there is no such key.
        let with_allow = format!("allow_key_env = [\"GITHUB_TOKEN\"]\n{text}");
        assert!(
            SettingsFile::parse(std::path::Path::new("/t/cassette.toml"), &with_allow).is_err()
        );
        // The command line can.
        let settings = parse(&["--mode", "auto", "--allow-key-env", "GITHUB_TOKEN"])
            .resolve_in(&file(text), Ci::No)
            .unwrap();
        let evil = settings.keys.iter().find(|k| k.route == "evil").unwrap();
        assert_eq!(evil.sources, ["GITHUB_TOKEN"]);
        // Replay sends no key anywhere, so it is not refused there.
        assert!(parse(&[]).resolve_in(&file(text), Ci::No).is_ok());
        // The route's own variables pass: its built-in sources, and NAME_API_KEY.
        let with = |route: &str, var: &str| {
            let text = format!(
                "[routes.{route}]\nupstream = \"https://x.example\"\napi_key_env = \"{var}\"\n"
            );
            parse(&["--mode", "record"]).resolve_in(&file(&text), Ci::No)
        };
        for (route, var) in [
            ("acme", "ACME_API_KEY"),
            ("my-llm", "MY_LLM_API_KEY"),
            ("default", "OPENAI_API_KEY"),
            ("default", "UPSTREAM_API_KEY"),
            ("gemini", "GOOGLE_API_KEY"),
            ("azure", "AZURE_OPENAI_API_KEY"),
            ("cohere", "CO_API_KEY"),
        ] {
            assert!(with(route, var).is_ok(), "{route} {var}");
        }
        // Any other, key-shaped or not, is some other secret of the job or another vendor's key.
        for (route, var) in [
            ("default", "AWS_SECRET_ACCESS_KEY"),
            ("aws", "AWS_SECRET_ACCESS_KEY"),
            ("acme", "ACME_LLM_KEY"),
            ("acme", "OPENAI_API_KEY"),
            ("default", "ANTHROPIC_API_KEY"),
            ("anthropic", "OPENAI_API_KEY"),
        ] {
            let err = format!("{:#}", with(route, var).unwrap_err());
            assert!(
                err.contains(&format!("[routes.{route}] api_key_env = \"{var}\""))
                    && err.contains("is not the route's own key variable")
                    && err.contains(&format!("--allow-key-env {var}")),
                "{err}"
            );
        }
        let err = format!(
            "{:#}",
            with("default", "AWS_SECRET_ACCESS_KEY").unwrap_err()
        );
        assert!(
            err.contains("(UPSTREAM_API_KEY or OPENAI_API_KEY)"),
            "{err}"
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
            "https://api.openai.com"
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
                ("gemini", "GEMINI_API_KEY,GOOGLE_API_KEY".to_owned()),
                ("groq", "GROQ_API_KEY".to_owned()),
                ("cohere", "CO_API_KEY,COHERE_API_KEY".to_owned())
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
