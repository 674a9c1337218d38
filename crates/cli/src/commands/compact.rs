//! `cassette compact [--store URL]`: rewrites a `jsonl://` log keeping only its live cassettes,
//! so the bytes of deleted and replaced ones leave the disk (a delete there appends a
//! tombstone). Atomic: a temporary file in the log's folder, synced, renamed over the log, under
//! the lock the log's writers take, so neither a concurrent writer nor a reader loses anything.
//! Other stores remove a cassette's bytes when it is deleted: nothing to do.

use crate::shared::compaction::{compact, summary};
use crate::shared::settings::{SettingsFile, StoreArgs};
use anyhow::bail;
use std::process::ExitCode;

/// Arguments of `cassette compact`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompactArgs {
    #[command(flatten)]
    store: StoreArgs,
}

/// Runs `cassette compact`.
pub(crate) fn run(args: CompactArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let spec = args.store.resolve(file);
    if let Some(path) = spec.local_path() {
        if !path.exists() {
            bail!(
                "there is no store at {spec}: {} does not exist (nothing was created)",
                path.display()
            );
        }
    }
    match compact(&spec)? {
        Some(done) => eprintln!("{}", summary(&spec, &done)),
        None => eprintln!(
            "{spec} is not a jsonl:// log: a delete there removes the cassette's bytes, nothing to compact"
        ),
    }
    Ok(ExitCode::SUCCESS)
}
