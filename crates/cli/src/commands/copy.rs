//! `cassette copy FROM TO`: copies or migrates cassettes between any two stores. Create-only by
//! default, so an interrupted copy resumes by running it again (what is there is skipped);
//! `--overwrite` replaces instead.
//!
//! A copy keeps each document byte for byte, so it does not go through the seal; it writes
//! only what passes the audit instead ([`Audited`]): the recording of the key it is stored
//! under, with nothing today's redaction would not store. Anything else fails, named, and
//! stays where it was.

use crate::shared::progress::Progress;
use crate::shared::runtime::runtime;
use crate::shared::settings::StoreSpec;
use anyhow::Context;
use cassette_recorder::miss::{write_segment, IndexRecord, SegmentKind};
use cassette_store::{Created, DynStore, Key, PutMode};
use cassette_tape::audit::Audited;
use futures::StreamExt;
use std::process::ExitCode;

/// Arguments of `cassette copy`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 every cassette copied or skipped, 2 some failed.\n\n\
Example:\n  cassette copy file://cassettes s3://my-bucket/cassettes"
)]
pub(crate) struct CopyArgs {
    /// The store to read: file://DIR, jsonl://FILE, sled://DIR, s3://BUCKET/PREFIX.
    from: StoreSpec,

    /// The store to write.
    to: StoreSpec,

    /// Replace cassettes that already exist in TO (default: keep them and count them skipped).
    #[arg(long)]
    overwrite: bool,

    /// Cassettes in flight at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: u16,
}

#[derive(Debug, Clone, PartialEq)]
enum Copied {
    /// Copied, with its index record.
    Copied(Box<IndexRecord>),
    Skipped,
}

/// Runs `cassette copy`.
pub(crate) fn run(args: CopyArgs) -> anyhow::Result<ExitCode> {
    let mode = if args.overwrite {
        PutMode::Overwrite
    } else {
        PutMode::Create
    };
    // Compared before anything is opened: copying a JSON Lines log onto itself would append
    // every cassette to it again.
    if args.from.same_store(&args.to) {
        anyhow::bail!(
            "FROM and TO are the same store ({} and {} name one place)",
            args.from,
            args.to
        );
    }
    let from = args.from.open_for_reading()?;
    let to = args.to.open()?;
    let (copied, skipped, failed) =
        runtime()?.block_on(copy_all(&from, &to, mode, usize::from(args.jobs)))?;
    eprintln!(
        "copied {copied}, skipped {skipped}, failed {failed} ({} -> {}; skipped cassettes were already there)",
        from.location(),
        to.location()
    );
    Ok(if failed > 0 {
        ExitCode::from(crate::shared::runtime::EXIT_ERROR)
    } else {
        ExitCode::SUCCESS
    })
}

async fn copy_all(
    from: &DynStore,
    to: &DynStore,
    mode: PutMode,
    jobs: usize,
) -> anyhow::Result<(usize, usize, usize)> {
    let keys = from.list("").await?;
    let bar = Progress::bar(keys.len() as u64, "cassettes");
    let mut results = futures::stream::iter(keys)
        .map(|key| async move {
            let result = copy_one(from, to, &key, mode).await;
            (key, result)
        })
        .buffer_unordered(jobs);
    let (mut copied, mut skipped, mut failed) = (0, 0, 0);
    let mut records = Vec::new();
    while let Some((key, result)) = results.next().await {
        match result {
            Ok(Copied::Copied(record)) => {
                copied += 1;
                records.push(*record);
            }
            Ok(Copied::Skipped) => skipped += 1,
            Err(err) => {
                failed += 1;
                bar.println(format!("cannot copy {key}: {err:#}"));
            }
        }
        bar.inc();
        bar.message(format!(
            "· {copied} copied · {skipped} skipped · {failed} failed"
        ));
    }
    bar.finish();
    // The copies join the destination's index, so a miss there finds them without a scan.
    if let Err(err) = write_segment(to, &records, SegmentKind::Writer).await {
        eprintln!(
            "warning: the index of {} was not updated: {:#} (run `cassette index` on it)",
            to.location(),
            anyhow::Error::new(err)
        );
    }
    Ok((copied, skipped, failed))
}

async fn copy_one(
    from: &DynStore,
    to: &DynStore,
    key: &Key,
    mode: PutMode,
) -> anyhow::Result<Copied> {
    if mode == PutMode::Create && to.get(key).await?.is_some() {
        // Checked first so a resumed copy does not read (or pay for) what is already there.
        return Ok(Copied::Skipped);
    }
    let Some(document) = from.get(key).await? else {
        anyhow::bail!("deleted from {} while copying", from.location());
    };
    let audited = Audited::check(key, document)
        .with_context(|| format!("not copied from {}", from.location()))?;
    // The keying settings of the destination's recorders are not known here; the defaults
    // fingerprint a request closely enough to rank it.
    let record = IndexRecord::of(audited.cassette(), &cassette_keying::KeyConfig::default());
    match to.put_with(key, audited.into_document(), mode).await? {
        Created::Won => Ok(Copied::Copied(Box::new(record))),
        Created::AlreadyExists => Ok(Copied::Skipped),
    }
}
