//! `cassette gc --unused --usage-log FILE [--dry-run]`: deletes the cassettes that no logged run
//! used. The proxy and the runner append every key they serve or record to a usage log
//! (`--usage-log`); whatever no log names is dead weight.
//!
//! A later occurrence of a request (recorded in sequence mode) is kept while its request's
//! first occurrence is used: a run that answers repeats with one recording logs only that one,
//! and deleting the rest of the sequence would break the next run in sequence mode.
//!
//! A recorder can be running beside gc. It logs a cassette's key before it stores the
//! cassette, and gc reads the usage logs again after it has listed the store, so every
//! cassette gc lists that a logging recorder wrote is named by the logs gc judges by: none is
//! deleted for being younger than the log gc first read. A recorder that logs nowhere, or to a
//! log gc is not given, records cassettes gc counts as unused, as it always did.
//!
//! On a `jsonl://` log a delete appends a tombstone, so gc compacts the log after deleting
//! (`cassette compact`): the deleted cassettes' bytes leave the disk, not only the listing.

use crate::shared::compaction::{compact, summary};
use crate::shared::progress::Progress;
use crate::shared::runtime::runtime;
use crate::shared::settings::SettingsFile;
use crate::shared::settings::StoreArgs;
use anyhow::{bail, Context};
use cassette_recorder::Cassette;
use cassette_store::{DynStore, Key};
use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `cassette gc`.
#[derive(Debug, clap::Args)]
pub(crate) struct GcArgs {
    /// Select the cassettes no usage log names (the only selection there is, spelled out so a
    /// bare `cassette gc` can never delete anything).
    #[arg(long, required = true)]
    unused: bool,

    /// A usage log written with --usage-log; repeatable, keys from all logs count as used.
    #[arg(long = "usage-log", value_name = "FILE", required = true)]
    usage_logs: Vec<PathBuf>,

    /// List what would be deleted without deleting.
    #[arg(long)]
    dry_run: bool,

    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Delete,
    List,
}

/// Runs `cassette gc`.
pub(crate) fn run(args: GcArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    debug_assert!(args.unused);
    let action = if args.dry_run {
        Action::List
    } else {
        Action::Delete
    };
    let mut used = read_logs(&args.usage_logs)?;
    if used.is_empty() {
        // An empty log most likely means logging was not on; deleting every cassette on that
        // evidence would be a disaster.
        bail!("the usage logs name no key; refusing to treat every cassette as unused");
    }
    let spec = args.store.resolve(file);
    let store = spec.open_existing()?;
    let (unused, total, failed, kept) = runtime()?.block_on(async {
        let keys = store.list("").await?;
        if !keys.is_empty() && !keys.iter().any(|k| used.contains(k)) {
            // Logs of another store (or of another key version) would select every cassette.
            bail!(
                "the usage logs name {} key(s), none of them in {} ({} cassettes): they were \
                 not written by runs on this store; refusing to treat every cassette as unused",
                used.len(),
                store.location(),
                keys.len()
            );
        }
        // After the listing: a recorder logs a key before it stores the cassette, so every
        // cassette just listed that a logging recorder wrote is named now.
        used.extend(read_logs(&args.usage_logs)?);
        let candidates: Vec<Key> = keys
            .iter()
            .filter(|k| !used.contains(*k))
            .cloned()
            .collect();
        let (unused, kept) = later_occurrences_of_used(&store, candidates, &used).await;
        let mut failed = 0usize;
        let progress = Progress::bar(unused.len() as u64, "cassettes");
        for key in &unused {
            match action {
                Action::List => progress.suspend(|| println!("would delete {key}")),
                Action::Delete => match store.delete(key).await {
                    Ok(()) => progress.suspend(|| println!("deleted {key}")),
                    Err(err) => {
                        failed += 1;
                        progress.println(format!(
                            "cannot delete {key}: {:#}",
                            anyhow::Error::from(err)
                        ));
                    }
                },
            }
            progress.inc();
        }
        progress.finish();
        anyhow::Ok((unused, keys.len(), failed, kept))
    })?;
    let verb = match action {
        Action::List => "would delete",
        Action::Delete => "deleted",
    };
    eprintln!(
        "{} of {total} cassettes in {} unused: {verb} {}{}{}",
        unused.len(),
        store.location(),
        unused.len() - failed,
        if failed > 0 {
            format!(", {failed} failed")
        } else {
            String::new()
        },
        if kept > 0 {
            format!("; kept {kept} later occurrences of requests the logs name (sequence mode)")
        } else {
            String::new()
        }
    );
    if action == Action::Delete && unused.len() > failed {
        // A jsonl:// delete only appends a tombstone: the deleted cassettes' bytes stay in the
        // log until it is rewritten, and a team deleting a leaked tape must not believe it gone.
        match compact(&spec) {
            Ok(Some(done)) => eprintln!("{}", summary(&spec, &done)),
            Ok(None) => {}
            Err(err) => {
                eprintln!(
                    "the deleted cassettes' bytes remain in {spec}: compacting it failed: {err:#}; \
                     run `cassette compact --store {spec}` to remove them"
                );
                return Ok(ExitCode::from(crate::shared::runtime::EXIT_ERROR));
            }
        }
    }
    Ok(if failed > 0 {
        ExitCode::from(crate::shared::runtime::EXIT_ERROR)
    } else {
        ExitCode::SUCCESS
    })
}

/// The usage logs' keys; every line must be one.
fn read_logs(logs: &[PathBuf]) -> anyhow::Result<HashSet<Key>> {
    let mut used = HashSet::new();
    for log in logs {
        let text = std::fs::read_to_string(log)
            .with_context(|| format!("reading the usage log {}", log.display()))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let Some(key) = Key::parse(line) else {
                bail!("{}:{}: {line:?} is not a key", log.display(), i + 1);
            };
            used.insert(key);
        }
    }
    Ok(used)
}

/// Splits the unused candidates into those to delete and the number kept: later occurrences
/// whose request's first occurrence is used. A candidate that cannot be read is deleted as
/// before (it would be of no use to a run anyway).
async fn later_occurrences_of_used(
    store: &DynStore,
    candidates: Vec<Key>,
    used: &HashSet<Key>,
) -> (Vec<Key>, usize) {
    use futures::StreamExt;
    let checked: Vec<(Key, bool)> = futures::stream::iter(candidates)
        .map(|key| async move {
            let keep = match store.get(&key).await {
                Ok(Some(bytes)) => Cassette::from_document(&bytes)
                    .ok()
                    .and_then(|c| c.sequence)
                    .is_some_and(|s| used.contains(&s.base_key)),
                _ => false,
            };
            (key, keep)
        })
        .buffered(32)
        .collect()
        .await;
    let kept = checked.iter().filter(|(_, keep)| *keep).count();
    let unused = checked
        .into_iter()
        .filter(|(_, keep)| !keep)
        .map(|(key, _)| key)
        .collect();
    (unused, kept)
}
