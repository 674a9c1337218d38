//! `cassette verify [--strict]`: every cassette parses, its key still matches its stored request
//! under the current key version (tapes from an older version and hand edits are flagged), no
//! stored byte looks like a credential, and nothing is stored that today's redaction would not
//! store (credential names, cookie and token headers outside the allow-lists, keys in binary
//! bodies or split across stream events). A later occurrence of a request (sequence mode) keys
//! to its occurrence key, names its request's base key, and follows every earlier occurrence
//! (a gap would make replay miss halfway through the sequence). `--strict` also fails when git has uncommitted
//! changes in the cassette folder, so CI never passes on tapes someone forgot to commit.
//! Every rule of cassette.toml's `[redact]` (paths and patterns) is checked too: a tape recorded
//! before a rule was added is named with the rule it breaks.
//! The saved runs of `cassette run` (`.cassette/runs/`, or `--runs-dir`) are audited for
//! credential-shaped text too: they hold answers, and must be as clean as the cassettes.

use crate::shared::cassettes::{foreign_files, load_all, store_exists};
use crate::shared::progress::Progress;
use crate::shared::runtime::runtime;
use crate::shared::settings::StoreArgs;
use crate::shared::settings::{KeyingArgs, SettingsFile, StoreSpec};
use anyhow::{bail, Context};
use bytes::Bytes;
use cassette_keying::{KeyConfig, KEY_VERSION};
use cassette_recorder::Cassette;
use cassette_store::jsonl::JsonlStore;
use cassette_store::{DynStore, Key, StoreUrl};
use cassette_tape::audit::{audit, audit_rules};
use cassette_tape::redact::{find_credentials, RedactionRules};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;

/// Arguments of `cassette verify`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit status: 0 all cassettes verified, 1 a problem was found, 2 error.")]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    store: StoreArgs,

    /// Also fail when the cassette folder (a file:// store) has changes git has not committed.
    #[arg(long)]
    strict: bool,

    /// How the recorder keyed bodies, so keys are recomputed the way they were computed.
    #[command(flatten)]
    keying: KeyingArgs,

    /// Where `cassette run` saved its runs, audited for credentials too
    /// [default: .cassette/runs].
    #[arg(long, value_name = "DIR")]
    runs_dir: Option<PathBuf>,
}

/// Whether uncommitted changes fail the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GitCheck {
    Skip,
    RequireClean,
}

/// Runs `cassette verify`.
pub(crate) fn run(args: VerifyArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let git = if args.strict {
        GitCheck::RequireClean
    } else {
        GitCheck::Skip
    };
    let config = args.keying.config(file)?;
    // The team's own rules: a tape recorded before a rule was added still holds what it replaces.
    let rules = RedactionRules {
        json_paths: file.redact_paths.clone(),
        patterns: file.redact_patterns.clone(),
    };
    let spec = args.store.resolve(file);
    // Checked before reading anything: --strict on a store git cannot see is a usage error.
    let folder = match git {
        GitCheck::RequireClean => Some(local_folder(&spec)?),
        GitCheck::Skip => None,
    };
    let runs_dir = args
        .runs_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::shared::runs::RUNS_DIR));
    let run_problems = audit_runs(&runs_dir)?;
    if !store_exists(&spec) {
        // Opening it would create it empty, and an empty store verifies nothing.
        eprintln!("cassette verify: the store {spec} does not exist: nothing to verify");
        return Ok(ExitCode::from(1));
    }
    let (store, log) = match spec.url() {
        // A log is opened as itself, to ask it which lines it could not read.
        StoreUrl::Jsonl(path) => {
            let log =
                JsonlStore::open(path).with_context(|| format!("cannot open the store {spec}"))?;
            (Arc::new(log.clone()) as DynStore, Some(log))
        }
        _ => (spec.open_for_reading()?, None),
    };
    let runtime = runtime()?;
    let loaded = runtime.block_on(load_all(&store))?;
    let mut problems = run_problems;
    if let Some(log) = log {
        for damaged in runtime.block_on(log.damaged_lines())? {
            println!(
                "{} line {} (byte {}): {}; the line holds no readable cassette",
                log.path().display(),
                damaged.line,
                damaged.offset,
                damaged.reason
            );
            problems += 1;
        }
    }
    for foreign in foreign_files(&spec)? {
        println!("{}: {}", foreign.path.display(), foreign.what);
        problems += 1;
    }
    let mut unverifiable = 0usize;
    let progress = Progress::bar(loaded.len() as u64, "cassettes verified");
    for (key, bytes, parsed) in &loaded {
        let checked = check(key, bytes.as_ref(), parsed, &config, &rules);
        progress.suspend(|| {
            for what in &checked.problems {
                println!("{key}: {what}");
            }
        });
        problems += checked.problems.len();
        if checked.key == KeyCheck::Redacted {
            unverifiable += 1;
        }
        progress.inc();
    }
    progress.finish();
    for (key, problem) in sequence_gaps(&loaded) {
        println!("{key}: {problem}");
        problems += 1;
    }
    if let Some(folder) = folder {
        problems += check_committed(&folder)?;
    }
    eprintln!(
        "verified {} cassettes in {}: {problems} problem(s){}",
        loaded.len(),
        store.location(),
        if unverifiable > 0 {
            format!(", {unverifiable} with redacted keyed parts (key not recomputable)")
        } else {
            String::new()
        }
    );
    if loaded.is_empty() {
        eprintln!(
            "cassette verify: {} holds no cassette: nothing was verified",
            store.location()
        );
        return Ok(ExitCode::from(1));
    }
    Ok(if problems > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The largest saved run audited; a bigger file is a problem of its own.
const MAX_RUN_FILE: u64 = 256 << 20;

/// Prints every credential-shaped string in the saved runs under `dir` (by file, line and
/// shape, never the secret) and returns how many problems there were. No folder, no runs.
fn audit_runs(dir: &Path) -> anyhow::Result<usize> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(err) => {
            return Err(err)
                .with_context(|| format!("cannot read the runs folder {}", dir.display()))
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    let mut problems = 0;
    for path in files {
        // Not followed: a link out of the folder is not a run this tool saved.
        let meta = std::fs::symlink_metadata(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if !meta.is_file() || meta.len() > MAX_RUN_FILE {
            println!(
                "{}: not a saved run (a saved run is a regular file of at most {MAX_RUN_FILE} bytes); remove it",
                path.display()
            );
            problems += 1;
            continue;
        }
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut line_starts = vec![0];
        line_starts.extend(
            bytes
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        );
        for found in find_credentials(&bytes) {
            let line = line_starts.partition_point(|start| *start <= found.offset);
            println!(
                "{}:{line}: credential-shaped text ({}), {} bytes long; delete the saved run (it holds what an older cassette run wrote unredacted)",
                path.display(),
                found.pattern,
                found.len
            );
            problems += 1;
        }
    }
    Ok(problems)
}

/// Whether a cassette's key could be recomputed from its stored request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyCheck {
    /// Recomputed (and compared), or not reached because of an earlier problem.
    Done,
    /// Redaction changed keyed parts of the stored request, so the key cannot be recomputed;
    /// that is expected, not a fault.
    Redacted,
}

/// What verifying one cassette found.
struct Checked {
    /// Each problem, as printed after the key.
    problems: Vec<String>,
    key: KeyCheck,
}

/// Verifies one cassette: no credential-shaped bytes, nothing today's redaction would not have
/// stored, and its document checks out.
fn check(
    key: &Key,
    bytes: Option<&Bytes>,
    parsed: &Result<Cassette, String>,
    config: &KeyConfig,
    rules: &RedactionRules,
) -> Checked {
    let mut problems: Vec<String> = bytes
        .map(|b| find_credentials(b))
        .unwrap_or_default()
        .into_iter()
        // The secret itself is never printed: this output ends up in CI logs.
        .map(|found| {
            format!(
                "credential-shaped text ({}) at byte {}, {} bytes long; redact or re-record it",
                found.pattern, found.offset, found.len
            )
        })
        .collect();
    // What the current redaction rules would not have stored: names, headers outside today's
    // allow-lists, binary bodies, secrets split across stream events. By place, never by value.
    if let Ok(cassette) = parsed {
        problems.extend(audit(cassette).into_iter().map(|finding| {
            format!(
                "{} holds {}; redact or re-record it",
                finding.location, finding.reason
            )
        }));
        // The file's rules were checked when it was read, so this cannot fail on them.
        match audit_rules(cassette, rules) {
            Ok(findings) => problems.extend(findings.into_iter().map(|finding| {
                format!(
                    "{} holds {}; re-record it (or redact it by hand)",
                    finding.location, finding.reason
                )
            })),
            Err(err) => problems.push(format!("cannot apply the `[redact]` rules: {err}")),
        }
    }
    let (problem, key) = check_document(key, parsed, config);
    problems.extend(problem);
    Checked { problems, key }
}

/// The document parses, is stored under its own key and key version, and its stored request
/// still keys to that key. Stops at the first problem.
fn check_document(
    key: &Key,
    parsed: &Result<Cassette, String>,
    config: &KeyConfig,
) -> (Option<String>, KeyCheck) {
    let cassette = match parsed {
        Ok(cassette) => cassette,
        Err(reason) => {
            let problem = format!("does not parse as a cassette: {reason}");
            return (Some(problem), KeyCheck::Done);
        }
    };
    if cassette.key != *key {
        let problem = format!(
            "stored under {key} but the document says key {}; renamed or edited by hand",
            cassette.key
        );
        return (Some(problem), KeyCheck::Done);
    }
    if cassette.key_version != KEY_VERSION {
        let problem = format!(
            "keyed under key version {}, this tool keys with version {KEY_VERSION}; re-record it",
            cassette.key_version
        );
        return (Some(problem), KeyCheck::Done);
    }
    // A tape is checked under the settings it records (the current ones for older tapes):
    // a hand edit shows as a key mismatch, other settings as what they are.
    let recorded = match &cassette.key_settings {
        Some(settings) => match settings.key_config() {
            Ok(recorded) => Some(recorded),
            Err(err) => {
                let problem = format!("its stored keying settings do not parse: {err}");
                return (Some(problem), KeyCheck::Done);
            }
        },
        None => None,
    };
    // MCP keys take no keying settings: the configured ones do not apply to them.
    if let (Some(recorded), false) = (&recorded, cassette.is_mcp()) {
        let differences = recorded.canonical().differences(&config.canonical());
        if !differences.is_empty() {
            let problem = format!(
                "keyed under other settings (recorded with {}): replay with the current settings misses it; re-record it or restore the setting",
                differences.join(", recorded with ")
            );
            return (Some(problem), KeyCheck::Done);
        }
    }
    if let Some(sequence) = &cassette.sequence {
        if sequence.occurrence < 2 {
            let problem = format!(
                "its sequence says occurrence {}, but only a second or later occurrence has one; edited by hand",
                sequence.occurrence
            );
            return (Some(problem), KeyCheck::Done);
        }
    }
    if cassette.meta.request_redacted {
        return (None, KeyCheck::Redacted);
    }
    if let Some(sequence) = &cassette.sequence {
        let base = cassette
            .keyed_request(recorded.as_ref().unwrap_or(config))
            .occurrence(1)
            .for_test(None)
            .key;
        if base != sequence.base_key {
            let problem = format!(
                "its sequence names the request {}, but its stored request keys to {base}; edited by hand",
                sequence.base_key
            );
            return (Some(problem), KeyCheck::Done);
        }
    }
    let keyed = cassette.keyed_request(recorded.as_ref().unwrap_or(config));
    if let Some(scope) = &cassette.test_scope {
        let plain = keyed.clone().for_test(None).key;
        if plain != scope.plain_key {
            let problem = format!(
                "its test scope names the request {}, but its stored request keys to {plain}; edited by hand",
                scope.plain_key
            );
            return (Some(problem), KeyCheck::Done);
        }
    }
    let recomputed = keyed.key;
    if recomputed == *key {
        return (None, KeyCheck::Done);
    }
    let profile = keyed.profile.as_str();
    let by_parts = keyed.material["body"].get("multipart").is_some();
    let problem = if by_parts {
        // Keyed by the raw bytes of its form before forms were keyed by their parts
        // (docs/keying.md, "Amendments within version 1"): such a tape can only miss.
        "its multipart body is keyed by its parts now (name, filename, content type, bytes), and it was keyed by its raw bytes, random boundary included: replay misses it, re-record it (or the request was edited by hand)"
            .to_owned()
    } else if !cassette.meta.profile.is_empty() && cassette.meta.profile != profile {
        // A profile added since (docs/keying.md): such a tape can only miss.
        format!(
            "keyed under the `{}` profile; this tool keys these requests with the `{profile}` profile, so replay misses it: re-record it",
            cassette.meta.profile
        )
    } else if recorded.is_some() {
        format!(
            "its stored request keys to {recomputed}: the request was edited by hand (or the keying changed without a key version bump)"
        )
    } else {
        format!(
            "its stored request keys to {recomputed}: the request was edited by hand (or recorded with other keying settings, or the keying changed without a key version bump)"
        )
    };
    (Some(problem), KeyCheck::Done)
}

/// Later occurrences whose previous occurrence is not stored: replay in sequence mode would
/// miss at that repeat and never reach the later ones.
fn sequence_gaps(loaded: &[crate::shared::cassettes::Loaded]) -> Vec<(Key, String)> {
    let keys: HashSet<&Key> = loaded.iter().map(|(key, _, _)| key).collect();
    let later: HashSet<(&Key, u32)> = loaded
        .iter()
        .filter_map(|(_, _, parsed)| parsed.as_ref().ok()?.sequence.as_ref())
        .map(|s| (&s.base_key, s.occurrence))
        .collect();
    let mut gaps = Vec::new();
    for (key, _, parsed) in loaded {
        let Some(sequence) = parsed.as_ref().ok().and_then(|c| c.sequence.as_ref()) else {
            continue;
        };
        let previous = sequence.occurrence.saturating_sub(1);
        let stored = match previous {
            0 => true,
            1 => keys.contains(&sequence.base_key),
            n => later.contains(&(&sequence.base_key, n)),
        };
        if !stored {
            gaps.push((
                key.clone(),
                format!(
                    "occurrence {} of request {}, but its occurrence {previous} is not stored: replay in sequence mode misses at the {} time; re-record the sequence",
                    sequence.occurrence,
                    sequence.base_key.short(),
                    cassette_recorder::miss::ordinal(previous)
                ),
            ));
        }
    }
    gaps
}

/// Prints the uncommitted changes in `folder`; one problem when there are any.
fn check_committed(folder: &Path) -> anyhow::Result<usize> {
    let dirty = git_changes(folder)?;
    for line in &dirty {
        println!("uncommitted: {line}");
    }
    if dirty.is_empty() {
        return Ok(0);
    }
    println!(
        "{} has {} uncommitted change(s): commit the cassettes (replay would use tapes CI does not have)",
        folder.display(),
        dirty.len()
    );
    Ok(1)
}

/// The folder of a file store, which is what git can check.
fn local_folder(store: &StoreSpec) -> anyhow::Result<PathBuf> {
    match store.url() {
        StoreUrl::File(path) => Ok(path.clone()),
        _ => bail!(
            "--strict checks the cassette folder with git, so it needs a file:// store, not {}://",
            store.scheme()
        ),
    }
}

/// `git status --porcelain` lines for the folder (untracked files included).
fn git_changes(folder: &Path) -> anyhow::Result<Vec<String>> {
    if !folder.is_dir() {
        bail!(
            "--strict: the cassette folder {} does not exist",
            folder.display()
        );
    }
    let out = Command::new("git")
        .arg("-C")
        .arg(folder)
        .args(["status", "--porcelain", "--untracked-files=all", "--", "."])
        .output()
        .context("--strict runs git, which could not be started")?;
    if !out.status.success() {
        bail!(
            "--strict: git status failed in {} (is it inside a git work tree?): {}",
            folder.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect())
}
