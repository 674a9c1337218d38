//! `cassette verify [--strict]`: every cassette parses, its key still matches its stored request
//! under the current key version (tapes from an older version and hand edits are flagged), and
//! no stored byte looks like a credential. `--strict` also fails when git has uncommitted
//! changes in the cassette folder, so CI never passes on tapes someone forgot to commit.

use super::{load_all, runtime, StoreArgs};
use crate::settings::{KeyingArgs, StoreSpec};
use anyhow::{bail, Context};
use cassette_keying::KEY_VERSION;
use cassette_recorder::miss::keyed_stored_request;
use cassette_recorder::redact::find_credentials;
use cassette_store::StoreUrl;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

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
}

/// Whether uncommitted changes fail the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GitCheck {
    Skip,
    RequireClean,
}

/// Runs `cassette verify`.
pub(crate) fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let git = if args.strict {
        GitCheck::RequireClean
    } else {
        GitCheck::Skip
    };
    let spec = args.store.resolve();
    // Checked before reading anything: --strict on a store git cannot see is a usage error.
    let folder = match git {
        GitCheck::RequireClean => Some(local_folder(&spec)?),
        GitCheck::Skip => None,
    };
    let store = spec.open()?;
    let loaded = runtime()?.block_on(load_all(&store))?;
    let config = args.keying.config();
    let mut problems = 0usize;
    let mut unverifiable = 0usize;
    for (key, bytes, parsed) in &loaded {
        let mut report = |what: String| {
            problems += 1;
            println!("{key}: {what}");
        };
        if let Some(bytes) = bytes {
            for found in find_credentials(bytes) {
                // The secret itself is never printed: this output ends up in CI logs.
                report(format!(
                    "credential-shaped text ({}) at byte {}, {} bytes long; redact or re-record it",
                    found.pattern, found.offset, found.len
                ));
            }
        }
        let cassette = match parsed {
            Ok(cassette) => cassette,
            Err(reason) => {
                report(format!("does not parse as a cassette: {reason}"));
                continue;
            }
        };
        if cassette.key != *key {
            report(format!(
                "stored under {key} but the document says key {}; renamed or edited by hand",
                cassette.key
            ));
            continue;
        }
        if cassette.key_version != KEY_VERSION {
            report(format!(
                "keyed under key version {}, this tool keys with version {KEY_VERSION}; re-record it",
                cassette.key_version
            ));
            continue;
        }
        if cassette.meta.request_redacted {
            // Redaction changed keyed parts of the stored request, so its key cannot be
            // recomputed; that is expected, not a fault.
            unverifiable += 1;
            continue;
        }
        let recomputed = keyed_stored_request(cassette, &config).key;
        if recomputed.as_str() != key {
            report(format!(
                "its stored request keys to {recomputed}: the request was edited by hand (or recorded with other --volatile settings, or the keying changed without a key version bump)"
            ));
        }
    }
    if let Some(folder) = folder {
        let dirty = git_changes(&folder)?;
        for line in &dirty {
            println!("uncommitted: {line}");
        }
        if !dirty.is_empty() {
            problems += 1;
            println!(
                "{} has {} uncommitted change(s): commit the cassettes (replay would use tapes CI does not have)",
                folder.display(),
                dirty.len()
            );
        }
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
    Ok(if problems > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
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
