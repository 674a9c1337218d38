//! `cassette gc --unused --usage-log FILE [--dry-run]`: deletes the cassettes that no logged run
//! used. The proxy and the runner append every key they serve or record to a usage log
//! (`--usage-log`); whatever no log names is dead weight.
//!
//! A later occurrence of a request (recorded in sequence mode) is kept while its request's
//! first occurrence is used: a run that answers repeats with one recording logs only that one,
//! and deleting the rest of the sequence would break the next run in sequence mode.
//!
//! A recorder can be running beside gc: it stores a cassette, then logs its key. A cassette is
//! therefore never deleted when it is younger than the usage logs gc read (recorded at or after
//! [`YOUNG_MARGIN`] before the oldest log was last written, or before gc read them): no log can
//! yet name it. The logs are read again after the store is listed, so keys logged meanwhile
//! count as used too.

use super::{runtime, StoreArgs};
use crate::settings::SettingsFile;
use anyhow::{bail, Context};
use cassette_recorder::Cassette;
use cassette_store::{DynStore, Key};
use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

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
    let logs_read_at = logs_written_at(&args.usage_logs)?;
    let mut used = read_logs(&args.usage_logs)?;
    if used.is_empty() {
        // An empty log most likely means logging was not on; deleting every cassette on that
        // evidence would be a disaster.
        bail!("the usage logs name no key; refusing to treat every cassette as unused");
    }
    let store = args.store.open_existing(file)?;
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
        // Keys a recorder logged while the store was being listed are used too.
        used.extend(read_logs(&args.usage_logs)?);
        let candidates: Vec<Key> = keys
            .iter()
            .filter(|k| !used.contains(*k))
            .cloned()
            .collect();
        let (unused, kept, young) = still_needed(&store, candidates, &used, logs_read_at).await;
        let mut failed = 0usize;
        for key in &unused {
            match action {
                Action::List => println!("would delete {key}"),
                Action::Delete => match store.delete(key).await {
                    Ok(()) => println!("deleted {key}"),
                    Err(err) => {
                        failed += 1;
                        eprintln!("cannot delete {key}: {:#}", anyhow::Error::from(err));
                    }
                },
            }
        }
        anyhow::Ok((unused, keys.len(), failed, (kept, young)))
    })?;
    let (kept, young) = kept;
    let verb = match action {
        Action::List => "would delete",
        Action::Delete => "deleted",
    };
    eprintln!(
        "{} of {total} cassettes in {} unused: {verb} {}{}{}{}",
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
        },
        if young > 0 {
            format!(
                "; kept {young} recorded since the usage logs were last written (a recorder may \
                 not have logged them yet)"
            )
        } else {
            String::new()
        }
    );
    Ok(if failed > 0 {
        ExitCode::from(crate::EXIT_ERROR)
    } else {
        ExitCode::SUCCESS
    })
}

/// How long before the usage logs were written a cassette still counts as too young to judge:
/// a recorder stamps a cassette, stores it, then logs its key, and the stamp has whole seconds.
/// A store write taking longer than this could still race (docs/stores.md says what is safe).
pub(crate) const YOUNG_MARGIN: Duration = Duration::from_secs(300);

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

/// The moment the logs speak for: the oldest last write among them (a log last written an hour
/// ago knows nothing of the last hour), and never later than now.
fn logs_written_at(logs: &[PathBuf]) -> anyhow::Result<SystemTime> {
    let mut at = SystemTime::now();
    for log in logs {
        let modified = std::fs::metadata(log)
            .and_then(|m| m.modified())
            .with_context(|| format!("reading the usage log {}", log.display()))?;
        at = at.min(modified);
    }
    Ok(at)
}

/// Whether a cassette recorded at `recorded_at` (RFC 3339) is too young for logs written at
/// `logs_at` to judge. A stamp that does not parse is not young (such a cassette is of no use
/// to a run either).
fn is_young(recorded_at: &str, logs_at: SystemTime) -> bool {
    let Ok(recorded) = chrono::DateTime::parse_from_rfc3339(recorded_at) else {
        return false;
    };
    let recorded = SystemTime::from(recorded.with_timezone(&chrono::Utc));
    recorded + YOUNG_MARGIN >= logs_at
}

/// Splits the unused candidates into those to delete and the numbers kept: later occurrences
/// whose request's first occurrence is used, and cassettes too young for the logs. A
/// candidate that cannot be read is deleted as before (it would be of no use to a run anyway).
async fn still_needed(
    store: &DynStore,
    candidates: Vec<Key>,
    used: &HashSet<Key>,
    logs_at: SystemTime,
) -> (Vec<Key>, usize, usize) {
    use futures::StreamExt;
    #[derive(PartialEq)]
    enum Fate {
        Delete,
        LaterOccurrence,
        Young,
    }
    let checked: Vec<(Key, Fate)> = futures::stream::iter(candidates)
        .map(|key| async move {
            let cassette = match store.get(&key).await {
                Ok(Some(bytes)) => Cassette::from_document(&bytes).ok(),
                _ => None,
            };
            let fate = match cassette {
                Some(c) if is_young(&c.recorded_at, logs_at) => Fate::Young,
                Some(c)
                    if c.sequence
                        .as_ref()
                        .is_some_and(|s| used.contains(&s.base_key)) =>
                {
                    Fate::LaterOccurrence
                }
                _ => Fate::Delete,
            };
            (key, fate)
        })
        .buffered(32)
        .collect()
        .await;
    let count = |fate: Fate| checked.iter().filter(|(_, f)| *f == fate).count();
    let kept = count(Fate::LaterOccurrence);
    let young = count(Fate::Young);
    let unused = checked
        .into_iter()
        .filter(|(_, fate)| *fate == Fate::Delete)
        .map(|(key, _)| key)
        .collect();
    (unused, kept, young)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cassette_is_young_until_the_margin_before_the_logs() {
        let logs_at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let stamp = |t: SystemTime| {
            chrono::DateTime::<chrono::Utc>::from(t)
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        };
        assert!(is_young(&stamp(logs_at), logs_at));
        assert!(is_young(&stamp(logs_at + Duration::from_secs(60)), logs_at));
        assert!(is_young(&stamp(logs_at - YOUNG_MARGIN), logs_at));
        assert!(!is_young(
            &stamp(logs_at - YOUNG_MARGIN - Duration::from_secs(1)),
            logs_at
        ));
        assert!(!is_young("yesterday", logs_at));
        assert!(is_young(
            "2027-01-15T08:00:00+01:00",
            logs_at - Duration::from_secs(86400 * 365)
        ));
    }
}
