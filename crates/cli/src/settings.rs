//! The recorder settings shared by `cassette proxy`, `cassette exec` and `cassette run`: mode,
//! store, cache, upstreams, API key, usage log, error recording. Flags win over the
//! environment; everything is validated before a file or socket is opened.
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

use anyhow::{anyhow, bail, Context};
use cassette_keying::KeyConfig;
use cassette_recorder::config::DEFAULT_TARGET;
use cassette_recorder::redact::RedactionRules;
use cassette_recorder::{ErrorRecording, Mode, Recorder, RecorderConfig, Route};
use cassette_store::readonly::ReadOnlyStore;
use cassette_store::DynStore;
use std::path::PathBuf;

/// The store used when neither `--store`, `CASSETTE_STORE` nor `CASSETTE_DIR` is set.
pub const DEFAULT_STORE: &str = "file://cassettes";

/// The default route's upstream when `UPSTREAM_BASE` is not set.
pub const DEFAULT_UPSTREAM: &str = "https://api.openai.com";

/// Routes mounted even without flags: name and default upstream.
pub const BUILT_IN_ROUTES: &[(&str, &str)] = &[
    ("anthropic", "https://api.anthropic.com"),
    ("ollama", "http://127.0.0.1:11434"),
];

/// Which store a command uses: `--store`/`CASSETTE_STORE`, or the older `CASSETTE_DIR`.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// Store URL: file://DIR, jsonl://FILE, sled://DIR, s3://BUCKET/PREFIX or memory://
    /// [default: file://cassettes, or file://$CASSETTE_DIR].
    #[arg(long, env = "CASSETTE_STORE", value_name = "URL")]
    pub store: Option<String>,

    /// Older spelling of the store: a directory of cassette files.
    #[arg(
        long = "cassette-dir",
        env = "CASSETTE_DIR",
        value_name = "DIR",
        hide = true
    )]
    pub dir: Option<PathBuf>,
}

impl StoreArgs {
    /// The store URL.
    pub fn url(&self) -> String {
        match (&self.store, &self.dir) {
            (Some(url), _) => url.clone(),
            (None, Some(dir)) => format!("file://{}", dir.display()),
            (None, None) => DEFAULT_STORE.to_owned(),
        }
    }

    /// Opens the store, naming it on failure.
    pub fn open(&self) -> anyhow::Result<DynStore> {
        open_store(&self.url())
    }
}

/// Opens a store by URL, naming it on failure.
pub fn open_store(url: &str) -> anyhow::Result<DynStore> {
    cassette_store::open(url).with_context(|| format!("cannot open the store {url}"))
}

/// Where the recorder reads and writes, and what it calls.
#[derive(Debug, Clone, clap::Args)]
pub struct RecorderArgs {
    /// replay (answer from cassettes; a miss is an error), record (call the upstream and
    /// overwrite), auto (replay hits, record misses) or off (pass through, store nothing).
    #[arg(
        long,
        env = "CASSETTE_MODE",
        default_value = "replay",
        value_name = "MODE"
    )]
    pub mode: Mode,

    /// Where cassettes are read and written.
    #[command(flatten)]
    pub store: StoreArgs,

    /// A local store put in front of --store as a read-through cache.
    #[arg(long, env = "CASSETTE_CACHE", value_name = "URL")]
    pub cache: Option<String>,

    /// Upstream of the default route [default: https://api.openai.com].
    #[arg(long, env = "UPSTREAM_BASE", value_name = "URL")]
    pub upstream: Option<String>,

    /// Mount a route: requests to /NAME/... go to URL with the /NAME prefix stripped, and NAME
    /// is the key's target. Repeatable; replaces the built-in anthropic and ollama upstreams.
    #[arg(long = "route", value_name = "NAME=URL")]
    pub routes: Vec<String>,

    /// Mount a Streamable HTTP MCP server: requests to /NAME/... go to URL and are recorded and
    /// replayed as MCP JSON-RPC messages, NAME being the server's identity in keys. Repeatable.
    #[arg(long = "mcp-route", value_name = "NAME=URL")]
    pub mcp_routes: Vec<String>,

    /// Append the key of every cassette served or recorded to FILE (for `cassette gc --unused`).
    #[arg(long, env = "CASSETTE_USAGE_LOG", value_name = "FILE")]
    pub usage_log: Option<PathBuf>,

    /// Store upstream 4xx/5xx answers too (to test error handling); by default they are passed
    /// to the client and not stored.
    #[arg(long)]
    pub record_errors: bool,

    /// Replace the value at this JSON path in stored request and response bodies with
    /// "[REDACTED]" (e.g. `$.messages[*].content`, `$..email`). Repeatable. Redaction never
    /// changes the key.
    #[arg(long = "redact-path", value_name = "JSONPATH")]
    pub redact_paths: Vec<String>,

    /// Replace matches of this regex in stored strings and text bodies with "[REDACTED]".
    /// Repeatable.
    #[arg(long = "redact-pattern", value_name = "REGEX")]
    pub redact_patterns: Vec<String>,

    /// Also treat this top-level body member as volatile (left out of the key). Repeatable.
    /// Changes keys: use the same list when recording and replaying.
    #[arg(long = "volatile", value_name = "NAME")]
    pub volatile: Vec<String>,

    /// Keep this member of the default volatile list in the key after all. Repeatable.
    #[arg(long = "keep-volatile", value_name = "NAME")]
    pub keep_volatile: Vec<String>,

    /// Size of the pieces a replayed stream is cut into, so clients' parsers run over
    /// partial chunks.
    #[arg(long, env = "CASSETTE_STREAM_CHUNK", value_name = "SIZE", default_value = "64", value_parser = parse_size)]
    pub stream_chunk_size: usize,

    /// Seconds an upstream may take to answer before the request fails with 504.
    #[arg(
        long,
        env = "CASSETTE_UPSTREAM_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 600
    )]
    pub upstream_timeout: u64,
}

impl RecorderArgs {
    /// The store URL these settings name.
    pub fn store_url(&self) -> String {
        self.store.url()
    }

    /// The routes: built-ins, the default route, then `--route` overrides.
    pub fn routes(&self) -> anyhow::Result<Vec<Route>> {
        let mut routes: Vec<Route> = Vec::new();
        let mut set = |name: &str, url: &str| {
            let url = url.trim().to_owned();
            match routes.iter_mut().find(|r| r.name == name) {
                Some(route) => route.base_url = url,
                None => routes.push(Route {
                    name: name.to_owned(),
                    base_url: url,
                }),
            }
        };
        set(
            DEFAULT_TARGET,
            self.upstream.as_deref().unwrap_or(DEFAULT_UPSTREAM),
        );
        for (name, url) in BUILT_IN_ROUTES {
            set(name, url);
        }
        let mut given: Vec<&str> = Vec::new();
        for spec in self.routes.iter().chain(&self.mcp_routes) {
            let (name, url) = spec.split_once('=').ok_or_else(|| {
                anyhow!(
                    "--route `{spec}`: expected NAME=URL, e.g. anthropic=https://api.anthropic.com"
                )
            })?;
            let name = name.trim();
            if given.contains(&name) {
                bail!("--route `{name}` is given twice");
            }
            if name == DEFAULT_TARGET && self.upstream.is_some() {
                bail!("--route default=URL and --upstream/UPSTREAM_BASE both set the default route; keep one");
            }
            given.push(name);
            set(name, url);
        }
        Ok(routes)
    }

    /// The names of the `--mcp-route` routes.
    pub fn mcp_route_names(&self) -> Vec<String> {
        self.mcp_routes
            .iter()
            .filter_map(|spec| spec.split_once('='))
            .map(|(name, _)| name.trim().to_owned())
            .collect()
    }

    /// The typed recorder configuration, validated; no IO.
    pub fn config(&self) -> anyhow::Result<RecorderConfig> {
        let upstream_api_key = std::env::var("UPSTREAM_API_KEY")
            .ok()
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty());
        let config = RecorderConfig {
            mode: self.mode,
            routes: self.routes()?,
            upstream_api_key,
            errors: if self.record_errors {
                ErrorRecording::Record
            } else {
                ErrorRecording::PassThrough
            },
            key: KeyConfig {
                extra_volatile: self.volatile.clone(),
                keep_volatile: self.keep_volatile.clone(),
            },
            redaction: RedactionRules {
                json_paths: self.redact_paths.clone(),
                patterns: self.redact_patterns.clone(),
            },
            stream_chunk_size: self.stream_chunk_size,
            upstream_timeout: std::time::Duration::from_secs(self.upstream_timeout.max(1)),
            mcp_routes: self.mcp_route_names(),
            ..RecorderConfig::default()
        };
        config.validate().map_err(|e| anyhow!("{e}"))?;
        if let Some(cache) = &self.cache {
            if cache.trim().is_empty() {
                bail!("--cache/CASSETTE_CACHE is empty; give a store URL such as file://.cassette-cache");
            }
        }
        Ok(config)
    }

    /// Opens the store (with the cache in front when one is set).
    pub fn open_store(&self) -> anyhow::Result<DynStore> {
        let url = self.store_url();
        let cache = self.cache.as_deref().map(str::trim);
        cassette_store::open_tiered(&url, cache).with_context(|| match cache {
            None => format!("cannot open the store {url}"),
            Some(cache) => format!("cannot open the store {url} with the cache {cache}"),
        })
    }

    /// Builds the recorder from `config` (as returned by [`RecorderArgs::config`], possibly
    /// adjusted by the command).
    pub fn build(&self, config: RecorderConfig) -> anyhow::Result<Recorder> {
        config.validate().map_err(|e| anyhow!("{e}"))?;
        let store = self.open_store()?;
        // Replay cannot write: the wrapper turns any attempt into a clear error.
        let store: DynStore = match config.mode {
            Mode::Replay => std::sync::Arc::new(ReadOnlyStore::new(store)),
            _ => store,
        };
        Recorder::with_usage_log(config, store, self.usage_log.clone())
            .context("cannot build the recorder")
    }

    /// Validates the settings, opens the store and builds the recorder.
    pub fn build_recorder(&self) -> anyhow::Result<Recorder> {
        let config = self.config()?;
        self.build(config)
    }
}

/// Parses a byte size: `1048576`, `512KiB`, `32MiB`, `1GiB` (also `k`, `m`, `g`, `KB`, `MB`).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: usize = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size such as 1048576, 512KiB or 32MiB"))?;
    let factor: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{text}`: use KiB, MiB or GiB"
            ))
        }
    };
    let size = number
        .checked_mul(factor)
        .ok_or_else(|| format!("`{text}` is too large"))?;
    if size == 0 {
        return Err("the size must be at least 1 byte".to_owned());
    }
    Ok(size)
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

    fn parse(argv: &[&str]) -> RecorderArgs {
        Cli::try_parse_from(std::iter::once("cassette").chain(argv.iter().copied()))
            .map(|c| c.args)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn built_in_routes_and_overrides() {
        let args = parse(&[
            "--upstream",
            "http://up",
            "--route",
            "anthropic=http://a",
            "--route",
            "x=http://x",
        ]);
        let routes = args.routes().unwrap();
        let url = |n: &str| {
            routes
                .iter()
                .find(|r| r.name == n)
                .map(|r| r.base_url.clone())
        };
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
        .config()
        .unwrap();
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
        let err = args.build_recorder().unwrap_err();
        assert!(format!("{err:#}").contains("(unclosed"), "{err:#}");
        assert!(!std::path::Path::new("/nonexistent/x").exists());
    }

    #[test]
    fn bad_settings_are_named_before_any_io() {
        let err = parse(&["--route", "nourl"])
            .config()
            .unwrap_err()
            .to_string();
        assert!(err.contains("NAME=URL"), "{err}");
        let err = parse(&["--route", "a=ftp://x"])
            .config()
            .unwrap_err()
            .to_string();
        assert!(err.contains("http"), "{err}");
        let err = parse(&["--route", "a=http://x", "--route", "a=http://y"])
            .config()
            .unwrap_err()
            .to_string();
        assert!(err.contains("twice"), "{err}");
        let err = Cli::try_parse_from(["cassette", "--mode", "replays"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("replays"), "{err}");
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("32MiB"), Ok(32 << 20));
        assert_eq!(parse_size("100"), Ok(100));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("").is_err());
    }
}
