//! `cassette init`: write a commented starter cassette.toml in the working directory (never over
//! an existing one) and keep `.cassette/` (saved runs, a local cache) out of git.

use crate::shared::settings::{SettingsFile, FILE_NAME};
use anyhow::{bail, Context};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// The starter file: every setting a team usually shares, commented, valid as written.
pub(crate) const STARTER: &str = r#"# cassette.toml: settings read by every cassette command (proxy, exec, run, key, explain,
# verify, ls, gc, ...) run in this folder or any folder below it. Flags and environment
# variables override it; `cassette config` prints the effective settings and where each came
# from. Reference: docs/settings.md.

# Where cassettes live. Relative paths are relative to this file.
store = "file://cassettes"

# A local read-through cache in front of a shared store (s3://bucket/prefix):
# cache = "sled://.cassette/cache"

# replay (the default: a miss is an error, never a network call), record, auto or off.
# Usually left out here and set for a recording session: CASSETTE_MODE=record.
# mode = "replay"

# same (the default: every repeat of a request gets its one answer) or sequence (the n-th
# identical request of a run gets the n-th recording: sampling, polling, counters).
# repeats = "sequence"

# The HTTP status of a replay miss, for every client. Left out, a miss is 409, and 424 for
# the clients that retry a 409 whatever the headers say (the Vercel AI SDK, Mastra, cohere).
# miss_status = 409

[bypass]
# Traffic whose base URL bypasses the proxy is caught by `cassette exec` (refused in replay,
# exit 2). Hosts the tests legitimately reach go here, e.g. ["huggingface.co", "*.internal.example"].
allow = []
# catch = false   # to switch the catch off

[keying]
# Changing these changes keys: record and replay with the same file.
# Top-level body members left out of the key, besides the built-in volatile list.
volatile = []
# Members of the built-in volatile list (user, metadata, ...) kept in the key after all.
keep_volatile = []
# JSON paths left out of the key: ids a client generates afresh on every run (a replay miss
# and an adopt run name the ones they see), e.g. Gemini's, as google-genai and others spell
# them, and OpenAI-compatible tool-call ids a client makes itself:
# ignore = ["$.contents[*].parts[*].functionCall.id", "$.contents[*].parts[*].function_call.id",
#           "$.messages[*].tool_calls[*].id", "$.messages[*].tool_call_id"]
ignore = []

[redact]
# Replaced with "[REDACTED]" in stored bodies (credentials always are); never changes the key.
paths = []      # e.g. ["$..email"]
patterns = []   # e.g. ['[\w.+-]+@[\w-]+\.[\w.]+']

# Moving from vcrpy (pytest --cassette=adopt, cassette import): a file a tape holds for a host
# no route serves (an image a test downloads) is stored and served on replay; false stores none.
# [adopt]
# downloads = true

# The judge of judge graders (cassette run, cassette grade, expect() in tests): its model,
# for graders that name none, and the route it is reached through (default: default).
# [judge]
# model = "gpt-4o-mini"
# route = "default"

# Upstreams. The proxy holds the real keys, read from the variables named here; under
# `cassette exec` the command only ever sees the placeholder "cassette".
# Built in: default (https://api.openai.com, UPSTREAM_API_KEY or OPENAI_API_KEY),
# anthropic (/anthropic/..., ANTHROPIC_API_KEY), ollama (/ollama/..., no key),
# gemini (/gemini/..., GEMINI_API_KEY or GOOGLE_API_KEY), groq (/groq/..., GROQ_API_KEY)
# and cohere (/cohere/..., CO_API_KEY or COHERE_API_KEY).
#
# [routes.default]
# upstream    = "https://api.openai.com"
# api_key_env = "OPENAI_API_KEY"   # the variable holding the key, never the key itself
# auth        = "bearer"           # bearer, x-api-key, api-key, x-goog-api-key or query:NAME
#
# [routes.acme]                    # requests to /acme/... go here
# upstream    = "https://llm.acme.internal"
# api_key_env = "ACME_API_KEY"     # the route's own (NAME_API_KEY); any other needs --allow-key-env
#
# [routes.azure]                   # Azure OpenAI: api-key auth, key from AZURE_OPENAI_API_KEY
# upstream    = "https://YOUR-RESOURCE.openai.azure.com"
"#;

/// What git should not see: saved runs (`cassette run --save-run`) and a local cache.
const IGNORED: &str = ".cassette/";

/// Arguments of `cassette init`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Writes ./cassette.toml (never over an existing file) and adds \
`.cassette/` to ./.gitignore."
)]
pub(crate) struct InitArgs {}

/// Runs `cassette init`.
pub(crate) fn run(_args: InitArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let dir = std::env::current_dir().context("cannot read the working directory")?;
    let target = dir.join(FILE_NAME);
    write_new(&target, STARTER)?;
    eprintln!("cassette init: wrote {}", target.display());
    if let Some(other) = file.path.as_deref().filter(|p| *p != target) {
        eprintln!(
            "cassette init: {} was read before; commands run in {} now read the new file",
            other.display(),
            dir.display()
        );
    }
    if ignore_in_git(&dir.join(".gitignore"))? {
        eprintln!("cassette init: added {IGNORED} to .gitignore");
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `text` to a file that must not exist yet; readers never see a partial file, and an
/// existing file (even one created at the same moment by someone else) is never replaced.
fn write_new(target: &Path, text: &str) -> anyhow::Result<()> {
    if target.exists() {
        bail!(
            "{} already exists; cassette init never overwrites it (edit it, or remove it first)",
            target.display()
        );
    }
    let dir = target.parent().unwrap_or(Path::new("."));
    let staging = dir.join(format!(".{FILE_NAME}.{}.tmp", std::process::id()));
    let written = std::fs::File::create_new(&staging)
        .and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        })
        .with_context(|| format!("cannot write {}", staging.display()));
    // A hard link fails when the target exists: the no-clobber rename.
    let linked = written.and_then(|()| {
        std::fs::hard_link(&staging, target).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                anyhow::anyhow!(
                    "{} already exists; cassette init never overwrites it",
                    target.display()
                )
            } else {
                anyhow::Error::new(e).context(format!("cannot create {}", target.display()))
            }
        })
    });
    let _ = std::fs::remove_file(&staging);
    linked
}

/// Adds `.cassette/` to a .gitignore (creating it) unless a line already ignores it; returns
/// whether the file changed.
fn ignore_in_git(gitignore: &Path) -> anyhow::Result<bool> {
    let current = match std::fs::read_to_string(gitignore) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).context(format!("cannot read {}", gitignore.display())),
    };
    let present = current.lines().any(|line| {
        matches!(
            line.trim(),
            ".cassette" | ".cassette/" | "/.cassette" | "/.cassette/"
        )
    });
    if present {
        return Ok(false);
    }
    let mut addition = String::new();
    if !current.is_empty() && !current.ends_with('\n') {
        addition.push('\n');
    }
    addition.push_str(IGNORED);
    addition.push('\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(gitignore)
        .and_then(|mut f| f.write_all(addition.as_bytes()))
        .with_context(|| format!("cannot add {IGNORED} to {}", gitignore.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_file_is_valid_and_changes_nothing_but_the_store() {
        let file = SettingsFile::parse(Path::new("/p/cassette.toml"), STARTER)
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(file.store.unwrap().to_string(), "file:///p/cassettes");
        assert!(file.mode.is_none() && file.cache.is_none());
        assert!(file.volatile.is_empty() && file.ignore.is_empty());
        assert!(file.redact_paths.is_empty() && file.routes.is_empty());
    }

    /// Issue 34, item 11: the starter named 4 of the 6 built-in routes.
    #[test]
    fn the_starter_names_every_built_in_route_and_its_key_variables() {
        let file = SettingsFile::parse(Path::new("/p/cassette.toml"), "")
            .unwrap_or_else(|e| panic!("{e:#}"));
        let built_ins = cassette_recorder::proxy::built_in_routes();
        for (name, _) in
            built_ins.filter(|(name, _)| *name != cassette_recorder::config::DEFAULT_TARGET)
        {
            let named = format!("{name} (/{name}/...");
            assert!(STARTER.contains(&named), "the starter misses `{named}`");
            for var in crate::shared::settings::key_sources(name, &file) {
                assert!(
                    STARTER.contains(&var),
                    "the starter misses {var} for {name}"
                );
            }
        }
    }

    #[test]
    fn never_overwrites_and_ignores_once() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join(FILE_NAME);
        write_new(&target, "a = 1\n").unwrap();
        let err = write_new(&target, STARTER).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "a = 1\n");
        // No staging file is left behind either way.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        let gitignore = dir.path().join(".gitignore");
        std::fs::write(&gitignore, "target").unwrap();
        assert!(ignore_in_git(&gitignore).unwrap());
        assert!(!ignore_in_git(&gitignore).unwrap());
        assert_eq!(
            std::fs::read_to_string(&gitignore).unwrap(),
            "target\n.cassette/\n"
        );
    }
}
