//! `cassette rekey`: every cassette of a store is keyed again from its stored request under
//! today's keying settings and key version, written under its new key through the recorder's
//! one write path, and its old document removed once the new one is stored. Collisions (two
//! cassettes that key to one key now, with different answers) and cassettes whose stored
//! request cannot give back their key (redaction replaced keyed material) are reported and
//! left where they are: a settings change never silently loses or merges a recording.

use crate::shared::progress::Progress;
use crate::shared::settings::{RecorderArgs, SettingsFile};
use cassette_recorder::{Mode, Rekeyed, Write};
use futures::StreamExt;
use std::process::ExitCode;

/// Arguments of `cassette rekey`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Run it after changing `ignore` or `volatile` in cassette.toml, or after an \
upgrade that bumped the key version: the stored requests are keyed as the proxy keys requests \
now, so replay finds them again.\n\
Exit status: 0 every cassette re-keyed (or already current), 2 a collision, a cassette whose \
stored request cannot give back its key, or an error.\n\n\
Examples:\n  cassette rekey --dry-run\n  cassette rekey --store file://cassettes"
)]
pub(crate) struct RekeyArgs {
    /// Store nothing: print what would move, collide or stay.
    #[arg(long)]
    dry_run: bool,

    /// Keep each old document beside its new one (default: removed once the new one is
    /// stored).
    #[arg(long)]
    keep_old: bool,

    #[command(flatten)]
    recorder: RecorderArgs,
}

/// Runs `cassette rekey`.
pub(crate) fn run(args: RekeyArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let write = if args.dry_run {
        Write::Nothing
    } else {
        Write::CreateOnly
    };
    let mut settings = args.recorder.resolve(file)?;
    // Writing needs a writable store; nothing is ever sent upstream.
    settings.config.mode = Mode::Record;
    let recorder = settings.build()?;
    let runtime = crate::shared::runtime::runtime()?;
    let store = recorder.store().clone();
    let loaded = runtime.block_on(crate::shared::cassettes::load_all(&store))?;
    let progress = Progress::bar(loaded.len() as u64, "cassettes re-keyed");
    let (mut moved, mut unchanged, mut merged, mut collisions, mut unrecoverable, mut failed) =
        (0usize, 0usize, 0usize, 0usize, 0usize, 0usize);
    let recorder = &recorder;
    let results: Vec<_> = runtime.block_on(
        futures::stream::iter(loaded)
            .map(|(key, _, parsed)| async move {
                let answer = parsed
                    .as_ref()
                    .ok()
                    .map(|c| (c.response.status, c.response.body.clone()));
                let outcome = match parsed {
                    Ok(cassette) => recorder
                        .rekey(cassette, write)
                        .await
                        .map_err(|e| format!("{:#}", anyhow::Error::new(e))),
                    Err(reason) => Err(reason),
                };
                (key, answer, outcome)
            })
            .buffered(32)
            .collect(),
    );
    let would = if args.dry_run { "would move" } else { "moved" };
    let mut old_to_remove = Vec::new();
    // A dry run writes nothing, so two cassettes moving to one key are told apart here.
    let mut moved_to = std::collections::HashMap::new();
    for (old, answer, outcome) in results {
        progress.inc();
        let outcome = match outcome {
            Ok((new, Rekeyed::Moved)) if args.dry_run => match moved_to.get(&new) {
                Some((_, theirs)) if *theirs == answer => Ok((new, Rekeyed::Same)),
                Some((other, _)) => Ok((
                    new,
                    Rekeyed::Collision {
                        test: None,
                        source: format!("the cassette {other}"),
                    },
                )),
                None => {
                    moved_to.insert(new.clone(), (old.clone(), answer));
                    Ok((new, Rekeyed::Moved))
                }
            },
            other => other,
        };
        match outcome {
            Ok((_, Rekeyed::Unchanged)) => unchanged += 1,
            Ok((new, Rekeyed::Moved)) => {
                moved += 1;
                progress.suspend(|| println!("{would} {old} -> {new}"));
                old_to_remove.push(old);
            }
            Ok((new, Rekeyed::Same)) => {
                merged += 1;
                progress.suspend(|| {
                    println!("{old} keys to {new} now, which holds the same answer already")
                });
                old_to_remove.push(old);
            }
            Ok((new, Rekeyed::Collision { test, source })) => {
                collisions += 1;
                let test = test.map(|t| format!(" (test {t})")).unwrap_or_default();
                progress.println(format!(
                    "collision {old}: it keys to {new} now, which holds another answer, from \
                     {source}{test}; both kept, {old} under its old key (replay under today's \
                     settings gives the other answer: make the requests differ, or undo the \
                     settings change)"
                ));
            }
            Ok((_, Rekeyed::Unrecoverable { reason })) => {
                unrecoverable += 1;
                progress.println(format!(
                    "cannot rekey {old}: {reason}; kept under its old key (re-record it)"
                ));
            }
            Ok((new, other)) => {
                failed += 1;
                progress.println(format!("{old} -> {new}: {other:?}"));
            }
            Err(reason) => {
                failed += 1;
                progress.println(format!("cannot rekey {old}: {reason}"));
            }
        }
    }
    progress.finish();
    if !args.dry_run && !args.keep_old {
        for old in &old_to_remove {
            if let Err(err) = runtime.block_on(store.delete(old)) {
                failed += 1;
                eprintln!(
                    "cannot remove the old document {old} (its new one is stored): {:#}",
                    anyhow::Error::from(err)
                );
            }
        }
    }
    runtime.block_on(crate::shared::runtime::flush_index(recorder));
    eprintln!(
        "{would} {moved}, {unchanged} already current, {merged} merged into an equal answer, \
         {collisions} collision(s), {unrecoverable} whose stored request cannot give back its \
         key, {failed} failed ({})",
        store.location()
    );
    Ok(if collisions + unrecoverable + failed > 0 {
        ExitCode::from(crate::shared::runtime::EXIT_ERROR)
    } else {
        ExitCode::SUCCESS
    })
}
