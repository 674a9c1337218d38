//! `cassette index`: compacts the store's nearest-recording index into one segment covering
//! every cassette, so the first miss of a run reads a handful of objects instead of every
//! cassette (see `cassette_recorder::miss`). Reads only the cassettes no segment covers yet.

use crate::shared::progress::Progress;
use crate::shared::runtime::runtime;
use crate::shared::settings::StoreArgs;
use crate::shared::settings::{KeyingArgs, SettingsFile};
use anyhow::Context;
use cassette_recorder::miss::compact;
use cassette_store::fs::FileStore;
use cassette_store::StoreUrl;
use std::process::ExitCode;

/// Arguments of `cassette index`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Run it after importing or copying cassettes with another tool, or \
now and then on a shared bucket: recorders add their own segments as they record, and this \
folds them into one.\n\nExample:\n  cassette index --store s3://team-cassettes/suite"
)]
pub(crate) struct IndexArgs {
    #[command(flatten)]
    store: StoreArgs,

    /// How the recorder keyed bodies, so the index fingerprints requests the way they were keyed.
    #[command(flatten)]
    keying: KeyingArgs,
}

/// Runs `cassette index`.
pub(crate) fn run(args: IndexArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let config = args.keying.config(file)?;
    let spec = args.store.resolve(file);
    let store = spec.open()?;
    if !store.keeps_segments() {
        eprintln!(
            "{} keeps no index segments: a miss there reads the cassettes themselves",
            store.location()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let progress = Progress::spinner(&format!("indexing {}", store.location()));
    let done = runtime()?
        .block_on(compact(&store, &config))
        .with_context(|| format!("indexing {}", store.location()))?;
    progress.finish();
    // What is not ours stays where it is, and is named.
    for name in &done.kept {
        eprintln!(
            "cassette index: warning: kept segment {name} of {}: it is not an index segment \
             cassette wrote (damaged, or another tool's), so it was neither read nor deleted",
            store.location()
        );
    }
    if let StoreUrl::File(root) = spec.url() {
        let foreign = FileStore::open(root)
            .and_then(|s| s.foreign_segments())
            .with_context(|| format!("listing the index folder of {}", store.location()))?;
        for path in foreign {
            eprintln!(
                "cassette index: warning: kept {}: not an index segment (a symlink, a folder or \
                 another name), never read, followed or deleted",
                path.display()
            );
        }
    }
    eprintln!(
        "indexed {} cassettes in {} into {}: {} read, {} segments folded in{}",
        done.cassettes,
        store.location(),
        done.segment
            .as_deref()
            .unwrap_or("nothing (the store is empty)"),
        done.read,
        done.absorbed,
        if done.unreadable > 0 {
            format!(
                ", {} unreadable left out (see cassette verify)",
                done.unreadable
            )
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}
