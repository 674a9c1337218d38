//! `cassette gc --unused --usage-log FILE [--dry-run]`: deletes the cassettes that no logged run
//! used. The proxy and the runner append every key they serve or record to a usage log
//! (`--usage-log`); whatever no log names is dead weight.

use super::{runtime, StoreArgs};
use anyhow::{bail, Context};
use cassette_store::Key;
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
pub(crate) fn run(args: GcArgs) -> anyhow::Result<ExitCode> {
    debug_assert!(args.unused);
    let action = if args.dry_run {
        Action::List
    } else {
        Action::Delete
    };
    let mut used: HashSet<Key> = HashSet::new();
    for log in &args.usage_logs {
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
    if used.is_empty() {
        // An empty log most likely means logging was not on; deleting every cassette on that
        // evidence would be a disaster.
        bail!("the usage logs name no key; refusing to treat every cassette as unused");
    }
    let store = args.store.open_existing()?;
    let (unused, total, failed) = runtime()?.block_on(async {
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
        let unused: Vec<Key> = keys
            .iter()
            .filter(|k| !used.contains(*k))
            .cloned()
            .collect();
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
        anyhow::Ok((unused, keys.len(), failed))
    })?;
    let verb = match action {
        Action::List => "would delete",
        Action::Delete => "deleted",
    };
    eprintln!(
        "{} of {total} cassettes in {} unused: {verb} {}{}",
        unused.len(),
        store.location(),
        unused.len() - failed,
        if failed > 0 {
            format!(", {failed} failed")
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
