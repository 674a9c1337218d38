//! `cassette.toml`: the settings a team checks in next to its tests. Found in the working
//! directory or its nearest parent (or named by `--config` / `CASSETTE_CONFIG`; `--no-config`
//! ignores it; `locate.rs` finds and reads it safely), parsed strictly and validated whole
//! before any store, socket or upstream is touched: an unknown key, a malformed value, a bad
//! regex or JSON path is an error naming the file, line and column and what to write instead.
//! See docs/settings.md.
//!
//! The file is one source of the raw settings layer, below flags and environment variables and
//! above the defaults. Relative paths in it (and the default store) resolve against the file's
//! own folder, so every command run anywhere below it uses the same store.

mod locate;

use super::values::{
    ignore_leaves_out, is_built_in_route, is_plain_name, join_clean, parse_base_url,
    parse_ignore_path, parse_memory, parse_miss_status, parse_size, question_out_reason, real_path,
    StoreSpec,
};
use anyhow::{bail, Context};
use cassette_keying::{JsonPath, KeyConfig};
use cassette_recorder::config::AuthStyle;
use cassette_recorder::proxy::HostPattern;
use cassette_recorder::{Downloads, Mode, Repeats};
use cassette_tape::redact::{RedactionRules, Redactor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};
use toml::Spanned;

/// The file name looked for.
pub(crate) const FILE_NAME: &str = "cassette.toml";

/// Which settings file a command reads: the global `--config`, `--no-config` and
/// `CASSETTE_CONFIG`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct FileArgs {
    /// Read settings from FILE instead of the nearest cassette.toml.
    #[arg(
        long = "config",
        global = true,
        env = "CASSETTE_CONFIG",
        value_name = "FILE"
    )]
    config: Option<PathBuf>,

    /// Read no settings file at all (wins over --config and CASSETTE_CONFIG).
    #[arg(long = "no-config", global = true)]
    no_config: bool,
}

impl FileArgs {
    /// Finds, reads and validates the settings file; the empty settings when there is none.
    pub(crate) fn load(&self) -> anyhow::Result<SettingsFile> {
        if self.no_config {
            return Ok(SettingsFile::default());
        }
        let cwd = std::env::current_dir().context("cannot read the working directory")?;
        let path = match &self.config {
            Some(path) => cwd.join(path),
            None => match locate::find(&cwd)? {
                Some(path) => {
                    locate::check_owner(&path)?;
                    path
                }
                None => return Ok(SettingsFile::default()),
            },
        };
        let text = locate::read_settings(&path)?;
        SettingsFile::parse(&path, &text)
    }
}

/// The settings a file holds, validated; every field empty when no file is read.
#[derive(Debug, Clone, Default)]
pub(crate) struct SettingsFile {
    /// The file, when one was read.
    pub(crate) path: Option<PathBuf>,
    pub(crate) store: Option<StoreSpec>,
    pub(crate) cache: Option<StoreSpec>,
    pub(crate) mode: Option<Mode>,
    pub(crate) usage_log: Option<PathBuf>,
    pub(crate) record_errors: Option<bool>,
    pub(crate) stream_chunk_size: Option<usize>,
    pub(crate) replay_memory: Option<usize>,
    pub(crate) max_answer: Option<usize>,
    pub(crate) upstream_timeout: Option<u64>,
    pub(crate) repeats: Option<Repeats>,
    pub(crate) volatile: Vec<String>,
    pub(crate) keep_volatile: Vec<String>,
    pub(crate) ignore: Vec<JsonPath>,
    /// `[keying] dangerously_allow_prompt_out`.
    pub(crate) allow_prompt_out: bool,
    /// The file's keying settings that leave the model or prompt out of the key, as located
    /// errors: refused when the keying settings are built, unless the escape hatch is set
    /// there (the flag can only be seen then).
    pub(crate) question_out: Vec<String>,
    pub(crate) redact_paths: Vec<String>,
    pub(crate) redact_patterns: Vec<String>,
    /// `[routes.NAME]` tables, by name.
    pub(crate) routes: Vec<FileRoute>,
    pub(crate) listen: Option<SocketAddr>,
    pub(crate) max_body: Option<usize>,
    pub(crate) miss_status: Option<u16>,
    /// `[bypass] catch`.
    pub(crate) catch_bypass: Option<bool>,
    /// `[bypass] allow`.
    pub(crate) allow_hosts: Vec<HostPattern>,
    /// `[judge] model`: the judge's model for judge graders that name none.
    pub(crate) judge_model: Option<String>,
    /// `[judge] route`: the route the judge is reached through.
    pub(crate) judge_route: Option<String>,
    /// `[adopt] downloads`: whether adopt and import store the files a tape holds for a host
    /// no route serves.
    pub(crate) downloads: Option<Downloads>,
}

/// One `[routes.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileRoute {
    pub(crate) name: String,
    /// The upstream base URL; required for a route that is not built in.
    pub(crate) upstream: Option<String>,
    /// Where the key comes from: `None` to keep the built-in source, `Some(None)` for no key
    /// (`api_key_env = ""`), `Some(Some(VAR))` for an environment variable.
    pub(crate) api_key_env: Option<Option<String>>,
    pub(crate) auth: Option<AuthStyle>,
}

impl SettingsFile {
    /// The folder relative paths resolve against: the file's, or the working directory's
    /// (`None`) when no file is read.
    pub(crate) fn base_dir(&self) -> Option<&Path> {
        self.path.as_deref().and_then(Path::parent)
    }

    /// The file's `[routes.NAME]` table, if it has one.
    pub(crate) fn route(&self, name: &str) -> Option<&FileRoute> {
        self.routes.iter().find(|r| r.name == name)
    }

    /// Parses and validates the text of the file at `path` (absolute).
    pub(crate) fn parse(path: &Path, text: &str) -> anyhow::Result<SettingsFile> {
        let source = Source { path, text };
        let raw: Raw = toml::from_str(text).map_err(|err| {
            let span = err.span().unwrap_or(0..0);
            source.error(span, err.message().trim_end())
        })?;
        raw.validate(&source)
    }
}

/// The file being read, for error positions.
struct Source<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Source<'_> {
    /// `FILE:LINE:COLUMN: message (see docs/settings.md)`.
    fn error(&self, span: Range<usize>, message: &str) -> anyhow::Error {
        let start = span.start.min(self.text.len());
        let before = &self.text[..start];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        anyhow::anyhow!(
            "{}:{line}:{column}: {message} (see docs/settings.md)",
            self.path.display()
        )
    }

    /// The folder relative paths resolve against.
    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("/"))
    }
}

// ---------------------------------------------------------------------------------------------
// The file as written
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    store: Option<Spanned<String>>,
    cache: Option<Spanned<String>>,
    mode: Option<Spanned<String>>,
    usage_log: Option<Spanned<String>>,
    record_errors: Option<bool>,
    stream_chunk_size: Option<Spanned<Size>>,
    replay_memory: Option<Spanned<Size>>,
    max_answer: Option<Spanned<Size>>,
    upstream_timeout: Option<Spanned<u64>>,
    miss_status: Option<Spanned<u16>>,
    repeats: Option<Spanned<String>>,
    #[serde(default)]
    keying: RawKeying,
    #[serde(default)]
    redact: RawRedact,
    #[serde(default)]
    routes: BTreeMap<String, Spanned<RawRoute>>,
    #[serde(default)]
    proxy: RawProxy,
    #[serde(default)]
    bypass: RawBypass,
    #[serde(default)]
    judge: RawJudge,
    #[serde(default)]
    adopt: RawAdopt,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdopt {
    downloads: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJudge {
    model: Option<Spanned<String>>,
    route: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBypass {
    catch: Option<bool>,
    #[serde(default)]
    allow: Vec<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKeying {
    #[serde(default)]
    volatile: Vec<Spanned<String>>,
    #[serde(default)]
    keep_volatile: Vec<Spanned<String>>,
    #[serde(default)]
    ignore: Vec<Spanned<String>>,
    dangerously_allow_prompt_out: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRedact {
    #[serde(default)]
    paths: Vec<Spanned<String>>,
    #[serde(default)]
    patterns: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    upstream: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    auth: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProxy {
    listen: Option<Spanned<String>>,
    max_body: Option<Spanned<Size>>,
}

/// A size as a number of bytes or a string with a unit (`"32MiB"`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Size {
    Bytes(u64),
    Text(String),
}

impl Size {
    fn parse(&self) -> Result<usize, String> {
        match self {
            Size::Bytes(n) => parse_size(&n.to_string()),
            Size::Text(text) => parse_size(text),
        }
    }

    /// A size that may be 0 (none).
    fn parse_memory(&self) -> Result<usize, String> {
        match self {
            Size::Bytes(n) => parse_memory(&n.to_string()),
            Size::Text(text) => parse_memory(text),
        }
    }
}

impl Raw {
    fn validate(self, source: &Source<'_>) -> anyhow::Result<SettingsFile> {
        let dir = source.dir();
        let store = |value: &Spanned<String>, what: &str| -> anyhow::Result<StoreSpec> {
            let spec: StoreSpec = value
                .get_ref()
                .parse()
                .map_err(|e| source.error(value.span(), &format!("`{what}`: {e}")))?;
            let spec = spec.relative_to(dir);
            if let Some(path) = spec.local_path() {
                stays_inside(dir, path).map_err(|e| {
                    source.error(
                        value.span(),
                        &format!(
                            "`{what}`: {e}; name it with --{what} or CASSETTE_{} instead",
                            what.to_ascii_uppercase()
                        ),
                    )
                })?;
            }
            Ok(spec)
        };
        let mut file = SettingsFile {
            path: Some(source.path.to_owned()),
            store: self.store.as_ref().map(|s| store(s, "store")).transpose()?,
            cache: self.cache.as_ref().map(|s| store(s, "cache")).transpose()?,
            ..SettingsFile::default()
        };
        if let Some(mode) = &self.mode {
            let parsed = mode
                .get_ref()
                .parse::<Mode>()
                .map_err(|e| source.error(mode.span(), &format!("`mode`: {e}")))?;
            file.mode = Some(parsed);
        }
        if let Some(log) = &self.usage_log {
            if log.get_ref().trim().is_empty() {
                bail!(source.error(
                    log.span(),
                    "`usage_log` is empty: name a file or leave it out"
                ));
            }
            let path = join_clean(dir, Path::new(log.get_ref().trim()));
            stays_inside(dir, &path).map_err(|e| {
                source.error(
                    log.span(),
                    &format!(
                        "`usage_log`: {e}; name it with --usage-log or CASSETTE_USAGE_LOG instead"
                    ),
                )
            })?;
            file.usage_log = Some(path);
        }
        file.record_errors = self.record_errors;
        if let Some(repeats) = &self.repeats {
            let parsed = repeats
                .get_ref()
                .parse::<Repeats>()
                .map_err(|e| source.error(repeats.span(), &format!("`repeats`: {e}")))?;
            file.repeats = Some(parsed);
        }
        if let Some(size) = &self.stream_chunk_size {
            let parsed = size
                .get_ref()
                .parse()
                .map_err(|e| source.error(size.span(), &format!("`stream_chunk_size`: {e}")))?;
            file.stream_chunk_size = Some(parsed);
        }
        if let Some(size) = &self.replay_memory {
            let parsed = size
                .get_ref()
                .parse_memory()
                .map_err(|e| source.error(size.span(), &format!("`replay_memory`: {e}")))?;
            file.replay_memory = Some(parsed);
        }
        if let Some(size) = &self.max_answer {
            let parsed = size
                .get_ref()
                .parse()
                .map_err(|e| source.error(size.span(), &format!("`max_answer`: {e}")))?;
            file.max_answer = Some(parsed);
        }
        if let Some(timeout) = &self.upstream_timeout {
            if *timeout.get_ref() == 0 {
                bail!(source.error(
                    timeout.span(),
                    "`upstream_timeout` is in seconds and must be at least 1"
                ));
            }
            file.upstream_timeout = Some(*timeout.get_ref());
        }
        self.keying.validate(source, &mut file)?;
        self.redact.validate(source, &mut file)?;
        for (name, route) in &self.routes {
            file.routes.push(validate_route(source, name, route)?);
        }
        self.proxy.validate(source, &mut file)?;
        if let Some(status) = &self.miss_status {
            file.miss_status = Some(
                parse_miss_status(&status.get_ref().to_string())
                    .map_err(|e| source.error(status.span(), &format!("`miss_status`: {e}")))?,
            );
        }
        if let Some(model) = &self.judge.model {
            let text = model.get_ref().trim();
            if text.is_empty() {
                bail!(source.error(
                    model.span(),
                    "`judge.model` is empty: name the judge's model or leave it out"
                ));
            }
            file.judge_model = Some(text.to_owned());
        }
        if let Some(route) = &self.judge.route {
            let text = route.get_ref().trim();
            if !is_plain_name(text) {
                bail!(source.error(
                    route.span(),
                    "`judge.route`: a route name is letters, digits, `-`, `_` or `.`"
                ));
            }
            file.judge_route = Some(text.to_owned());
        }
        file.catch_bypass = self.bypass.catch;
        file.downloads = self.adopt.downloads.map(|stored| match stored {
            true => Downloads::Stored,
            false => Downloads::Refused,
        });
        for host in &self.bypass.allow {
            file.allow_hosts.push(
                host.get_ref()
                    .parse()
                    .map_err(|e| source.error(host.span(), &format!("`bypass.allow`: {e}")))?,
            );
        }
        Ok(file)
    }
}

impl RawKeying {
    fn validate(&self, source: &Source<'_>, file: &mut SettingsFile) -> anyhow::Result<()> {
        let names = |list: &[Spanned<String>], what: &str| -> anyhow::Result<Vec<String>> {
            list.iter()
                .map(|name| {
                    let text = name.get_ref().trim();
                    if text.is_empty() {
                        bail!(source.error(
                            name.span(),
                            &format!("`keying.{what}`: an empty member name")
                        ));
                    }
                    Ok(text.to_owned())
                })
                .collect()
        };
        file.volatile = names(&self.volatile, "volatile")?;
        file.keep_volatile = names(&self.keep_volatile, "keep_volatile")?;
        file.ignore = self
            .ignore
            .iter()
            .map(|path| {
                parse_ignore_path(path.get_ref())
                    .map_err(|e| source.error(path.span(), &format!("`keying.ignore`: {e}")))
            })
            .collect::<anyhow::Result<_>>()?;
        file.allow_prompt_out = self.dangerously_allow_prompt_out.unwrap_or(false);
        let escape = "`dangerously_allow_prompt_out = true` in [keying]";
        let volatile = KeyConfig {
            extra_volatile: file.volatile.clone(),
            ..KeyConfig::default()
        };
        for (found, name) in volatile.question_left_out().iter().filter_map(|found| {
            Some((
                found,
                self.volatile
                    .iter()
                    .find(|n| n.get_ref().trim() == found.value)?,
            ))
        }) {
            let reason = question_out_reason(found, escape);
            file.question_out.push(
                source
                    .error(name.span(), &format!("`keying.volatile`: {reason}"))
                    .to_string(),
            );
        }
        for (path, raw) in file.ignore.iter().zip(&self.ignore) {
            if let Some(found) = ignore_leaves_out(path) {
                let reason = question_out_reason(&found, escape);
                file.question_out.push(
                    source
                        .error(raw.span(), &format!("`keying.ignore`: {reason}"))
                        .to_string(),
                );
            }
        }
        Ok(())
    }
}

impl RawRedact {
    /// Each rule is checked alone by the recorder's own redactor, so the error points at it.
    fn validate(&self, source: &Source<'_>, file: &mut SettingsFile) -> anyhow::Result<()> {
        for path in &self.paths {
            let rules = RedactionRules {
                json_paths: vec![path.get_ref().clone()],
                patterns: Vec::new(),
            };
            Redactor::new(&rules)
                .map_err(|e| source.error(path.span(), &format!("`redact.paths`: {e}")))?;
            file.redact_paths.push(path.get_ref().clone());
        }
        for pattern in &self.patterns {
            let rules = RedactionRules {
                json_paths: Vec::new(),
                patterns: vec![pattern.get_ref().clone()],
            };
            Redactor::new(&rules).map_err(|e| {
                source.error(
                    pattern.span(),
                    &format!("`redact.patterns`: {e} (TOML literal strings, '...', keep backslashes as written)"),
                )
            })?;
            file.redact_patterns.push(pattern.get_ref().clone());
        }
        Ok(())
    }
}

fn validate_route(
    source: &Source<'_>,
    name: &str,
    route: &Spanned<RawRoute>,
) -> anyhow::Result<FileRoute> {
    let table = format!("[routes.{name}]");
    if !is_plain_name(name) {
        bail!(source.error(
            route.span(),
            &format!("{table}: a route name is letters, digits, `-`, `_` or `.`")
        ));
    }
    let raw = route.get_ref();
    let upstream = match &raw.upstream {
        Some(url) => Some(
            parse_base_url(url.get_ref())
                .map_err(|e| source.error(url.span(), &format!("{table} upstream: {e}")))?,
        ),
        None if is_built_in_route(name) => None,
        None => bail!(source.error(
            route.span(),
            &format!("{table} needs `upstream = \"https://...\"`: only default, anthropic, ollama, gemini, groq and cohere have a built-in upstream")
        )),
    };
    let api_key_env = match &raw.api_key_env {
        None => None,
        Some(var) => {
            let text = var.get_ref().trim();
            if text.is_empty() {
                Some(None)
            } else if is_env_name(text) {
                Some(Some(text.to_owned()))
            } else {
                // The value is not echoed: it may be a key pasted where its variable's name goes.
                bail!(source.error(
                    var.span(),
                    &format!("{table} api_key_env is not an environment variable name (letters, digits and `_`; \"\" for no key). It names the variable holding the key, never the key itself")
                ));
            }
        }
    };
    let auth = match &raw.auth {
        None => None,
        Some(style) => Some(
            style
                .get_ref()
                .parse::<AuthStyle>()
                .map_err(|e| source.error(style.span(), &format!("{table} auth: {e}")))?,
        ),
    };
    Ok(FileRoute {
        name: name.to_owned(),
        upstream,
        api_key_env,
        auth,
    })
}

impl RawProxy {
    fn validate(&self, source: &Source<'_>, file: &mut SettingsFile) -> anyhow::Result<()> {
        if let Some(listen) = &self.listen {
            let addr: SocketAddr = listen.get_ref().trim().parse().map_err(|e| {
                source.error(
                    listen.span(),
                    &format!("`proxy.listen`: {e}; write an address such as \"127.0.0.1:8089\""),
                )
            })?;
            if !addr.ip().is_loopback() {
                bail!(source.error(
                    listen.span(),
                    "`proxy.listen` must be a loopback address; listening elsewhere takes --allow-remote on the command line"
                ));
            }
            file.listen = Some(addr);
        }
        if let Some(size) = &self.max_body {
            let parsed = size
                .get_ref()
                .parse()
                .map_err(|e| source.error(size.span(), &format!("`proxy.max_body`: {e}")))?;
            file.max_body = Some(parsed);
        }
        Ok(())
    }
}

/// Whether `name` can be an environment variable's name.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Refuses a path (already joined onto `dir`) that leaves `dir` once resolved as the system
/// will open it: `..` past the folder, an absolute path elsewhere, or a symlink, dangling or
/// not, in the folder that points out of it (each resolved by [`real_path`], the folder's
/// own path too). A file checked in by someone else must not make commands write outside the
/// project (a usage log appended to `../../.bashrc`, or created through a committed link as
/// `../victim/.bash_logout`); a flag or environment variable, given by the user running the
/// command, may point anywhere. Runs while the file is read, before anything is created.
fn stays_inside(dir: &Path, path: &Path) -> Result<(), String> {
    let unreadable = |p: &Path, e: std::io::Error| format!("cannot resolve {}: {e}", p.display());
    let real_dir = real_path(dir).map_err(|e| unreadable(dir, e))?;
    let real = real_path(path).map_err(|e| unreadable(path, e))?;
    if real.starts_with(&real_dir) {
        return Ok(());
    }
    let through = if lexically_inside(dir, path) {
        format!(" (through a symlink, to {})", real.display())
    } else {
        String::new()
    };
    Err(format!(
        "{}{through} is outside the settings file's folder {}, and paths in a settings file \
         stay inside it",
        path.display(),
        dir.display()
    ))
}

/// Whether `path`, `..` taken as written, is below `dir`: a path that is, yet resolves
/// elsewhere, got there through a symlink, which the message says.
fn lexically_inside(dir: &Path, path: &Path) -> bool {
    fn normal(path: &Path) -> PathBuf {
        let mut out = PathBuf::new();
        for part in path.components() {
            match part {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    }
    normal(path).starts_with(normal(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cassette_store::StoreUrl;

    fn parse(text: &str) -> anyhow::Result<SettingsFile> {
        SettingsFile::parse(Path::new("/project/cassette.toml"), text)
    }

    fn error(text: &str) -> String {
        format!("{:#}", parse(text).unwrap_err())
    }

    #[test]
    fn the_sketch_of_the_issue_parses() {
        let file = parse(
            r#"
store = "file://tests/cassettes"
cache = "sled://.cassette-cache"
mode  = "replay"

[keying]
volatile      = ["seed"]
keep_volatile = ["user"]
ignore        = ["$.contents[*].parts[*].functionCall.id"]

[redact]
paths    = ["$..email"]
patterns = ['[\w.+-]+@[\w-]+\.[\w.]+']

[routes.default]
upstream    = "https://api.openai.com"
api_key_env = "OPENAI_API_KEY"

[routes.acme]
upstream    = "https://llm.acme.internal"
api_key_env = "ACME_LLM_KEY"
auth        = "query:key"
"#,
        )
        .unwrap();
        assert_eq!(
            file.store.as_ref().unwrap().url(),
            &StoreUrl::File("/project/tests/cassettes".into())
        );
        assert_eq!(
            file.store.as_ref().unwrap().to_string(),
            "file:///project/tests/cassettes"
        );
        assert_eq!(
            file.cache.as_ref().unwrap().url(),
            &StoreUrl::Sled("/project/.cassette-cache".into())
        );
        assert_eq!(file.mode, Some(Mode::Replay));
        assert_eq!(file.volatile, ["seed"]);
        assert_eq!(file.keep_volatile, ["user"]);
        assert_eq!(
            file.ignore[0].to_string(),
            "$.contents[*].parts[*].functionCall.id"
        );
        assert_eq!(file.redact_paths, ["$..email"]);
        assert_eq!(file.redact_patterns, [r"[\w.+-]+@[\w-]+\.[\w.]+"]);
        let acme = file.route("acme").unwrap();
        assert_eq!(acme.upstream.as_deref(), Some("https://llm.acme.internal"));
        assert_eq!(acme.api_key_env, Some(Some("ACME_LLM_KEY".into())));
        assert_eq!(acme.auth, Some(AuthStyle::Query("key".into())));
        assert_eq!(file.route("default").unwrap().auth, None);
    }

    #[test]
    fn paths_resolve_against_the_file_and_absolute_ones_stay() {
        let file = parse(
            "store = \"jsonl://./runs/tapes.jsonl\"\ncache = \"file:///project/sub/../cache\"\nusage_log = \"logs/used.txt\"\n",
        )
        .unwrap();
        assert_eq!(
            file.store.unwrap().url(),
            &StoreUrl::Jsonl("/project/runs/tapes.jsonl".into())
        );
        assert_eq!(
            file.cache.unwrap().url(),
            &StoreUrl::File("/project/sub/../cache".into())
        );
        assert_eq!(file.usage_log.unwrap(), Path::new("/project/logs/used.txt"));
        let file = parse("store = \"memory://\"").unwrap();
        assert_eq!(file.store.unwrap().url(), &StoreUrl::Memory);
    }

    #[test]
    fn paths_that_leave_the_files_folder_are_refused() {
        for (text, position, what) in [
            ("usage_log = \"../other/.bashrc\"", ":1:13:", "`usage_log`"),
            ("usage_log = \"/home/u/.bashrc\"", ":1:13:", "`usage_log`"),
            ("usage_log = \"logs/../../x\"", ":1:13:", "`usage_log`"),
            ("store = \"file://../elsewhere\"", ":1:9:", "`store`"),
            ("store = \"/etc/cassettes\"", ":1:9:", "`store`"),
            ("cache = \"sled:///tmp/cache\"", ":1:9:", "`cache`"),
            ("store = \"jsonl://a/../../t.jsonl\"", ":1:9:", "`store`"),
        ] {
            let err = error(text);
            assert!(err.contains(position), "{text}: {err}");
            assert!(err.contains(what), "{text}: {err}");
            assert!(
                err.contains("outside the settings file's folder /project"),
                "{err}"
            );
            assert!(err.contains("instead"), "{err}");
        }
        // Inside, however spelled, and stores that are no path at all.
        for text in [
            "usage_log = \"logs/../used.log\"",
            "usage_log = \"/project/used.log\"",
            "store = \"file://./tapes\"",
            "store = \"memory://\"",
            "store = \"s3://bucket/prefix\"",
        ] {
            assert!(parse(text).is_ok(), "{text}: {}", error(text));
        }
    }

    #[test]
    fn unknown_keys_name_the_key_file_line_and_column() {
        let err = error("mode = \"record\"\n\n[keying]\nvolatiles = [\"seed\"]\n");
        assert!(err.starts_with("/project/cassette.toml:4:1: "), "{err}");
        assert!(err.contains("unknown field `volatiles`"), "{err}");
        assert!(
            err.contains("`volatile`"),
            "it lists what is allowed: {err}"
        );
        let err = error("[routes.acme]\nupstream = \"http://x\"\napi_key = \"sk-123\"\n");
        assert!(err.starts_with("/project/cassette.toml:3:1: "), "{err}");
        assert!(err.contains("unknown field `api_key`"), "{err}");
        let err = error("stor = \"x\"");
        assert!(err.contains(":1:1: unknown field `stor`"), "{err}");
    }

    #[test]
    fn bad_values_say_where_and_what_to_write() {
        for (text, position, needle) in [
            ("a = [", ":1:", "cassette.toml"),
            ("mode = \"replays\"", ":1:8:", "unknown mode `replays`"),
            ("store = \"ftp://x\"", ":1:9:", "unknown scheme `ftp`"),
            (
                "[keying]\nignore = [\"$.ok\", \"a.b\"]",
                ":2:19:",
                "must start with `$`",
            ),
            ("[keying]\nignore = [\"$\"]", ":2:11:", "whole body"),
            ("[redact]\npatterns = ['(unclosed']", ":2:13:", "(unclosed"),
            ("[redact]\npaths = [\"$[x\"]", ":2:10:", "unclosed"),
            ("[routes.acme]\nauth = \"bearer\"", ":1:", "needs `upstream"),
            (
                "[routes.acme]\nupstream = \"localhost:1\"",
                ":2:12:",
                "http",
            ),
            (
                "[routes.x]\nupstream = \"http://x\"\nauth = \"basic\"",
                ":3:8:",
                "bearer, x-api-key",
            ),
            (
                "[routes.x]\nupstream = \"http://x\"\napi_key_env = \"sk-live-123\"",
                ":3:15:",
                "never the key itself",
            ),
            (
                "[routes.\"a b\"]\nupstream = \"http://x\"",
                ":",
                "route name",
            ),
            (
                "stream_chunk_size = \"12 parsecs\"",
                ":1:21:",
                "unknown size unit",
            ),
            ("upstream_timeout = 0", ":1:20:", "at least 1"),
            ("record_errors = \"yes\"", ":1:17:", "boolean"),
            ("[proxy]\nlisten = \"0.0.0.0:80\"", ":2:10:", "loopback"),
            ("miss_status = 200", ":1:15:", "400 to 599"),
            (
                "repeats = \"twice\"",
                ":1:11:",
                "same (one answer per request) or sequence",
            ),
            (
                "[bypass]\nallow = [\"ok.com\", \"http://x\"]",
                ":2:20:",
                "host pattern",
            ),
            ("[bypass]\ncatch = \"no\"", ":2:9:", "boolean"),
        ] {
            let err = error(text);
            assert!(err.contains(position), "{text:?} at {position}: {err}");
            assert!(err.contains(needle), "{text:?}: {err}");
            assert!(err.contains("docs/settings.md"), "{err}");
        }
    }

    #[test]
    fn a_key_pasted_into_api_key_env_is_not_echoed() {
        let err =
            error("[routes.x]\nupstream = \"http://x\"\napi_key_env = \"sk-live-0123456789\"");
        assert!(
            err.contains(":3:15:") && err.contains("never the key itself"),
            "{err}"
        );
        assert!(!err.contains("sk-live"), "{err}");
    }

    #[test]
    fn sizes_accept_numbers_and_units() {
        let file = parse("stream_chunk_size = 7\n[proxy]\nmax_body = \"1MiB\"").unwrap();
        assert_eq!(file.stream_chunk_size, Some(7));
        assert_eq!(file.max_body, Some(1 << 20));
    }

    #[test]
    fn replay_memory_may_be_zero_but_not_nonsense() {
        assert_eq!(parse("replay_memory = 0").unwrap().replay_memory, Some(0));
        assert_eq!(
            parse("replay_memory = \"16MiB\"").unwrap().replay_memory,
            Some(16 << 20)
        );
        let err = error("replay_memory = \"lots\"");
        assert!(
            err.contains("`replay_memory`") && err.contains(":1:17:"),
            "{err}"
        );
    }

    #[test]
    fn an_empty_key_variable_means_no_key() {
        let file = parse("[routes.default]\napi_key_env = \"\"").unwrap();
        assert_eq!(file.route("default").unwrap().api_key_env, Some(None));
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_leading_out_of_the_folder_is_refused_dangling_or_not() {
        let root = tempfile::tempdir().unwrap();
        let project = root.path().join("project");
        std::fs::create_dir_all(project.join("inner")).unwrap();
        let link = |name: &str, to: &Path| std::os::unix::fs::symlink(to, project.join(name));
        link("used.log", Path::new("../victim/.bash_logout")).unwrap();
        link("up", root.path()).unwrap();
        link("in", Path::new("inner")).unwrap();
        link("loop", Path::new("loop")).unwrap();
        let parse = |text: &str| SettingsFile::parse(&project.join("cassette.toml"), text);
        for (text, column) in [
            ("usage_log = \"used.log\"", ":1:13:"),
            ("usage_log = \"in/../up/x.log\"", ":1:13:"),
            ("store = \"up/tapes\"", ":1:9:"),
            ("cache = \"jsonl://used.log\"", ":1:9:"),
        ] {
            let err = format!("{:#}", parse(text).unwrap_err());
            assert!(
                err.contains(column)
                    && err.contains("through a symlink")
                    && err.contains("outside the settings file's folder"),
                "{text}: {err}"
            );
        }
        let err = format!("{:#}", parse("usage_log = \"loop/x\"").unwrap_err());
        assert!(err.contains("more than 40 symlinks"), "{err}");
        let file = parse("usage_log = \"in/used.log\"\nstore = \"in/../in/tapes\"").unwrap();
        assert_eq!(file.usage_log, Some(project.join("in/used.log")));
    }
}
