//! Compacting a `jsonl://` log (`cassette compact`, and `gc` after it deleted): a delete there
//! only appends a tombstone, so the deleted cassette's bytes stay in the file until the log is
//! rewritten without them.

use super::runtime::runtime;
use super::settings::StoreSpec;
use anyhow::Context;
use cassette_store::jsonl::{Compaction, JsonlStore};
use cassette_store::StoreUrl;

/// Rewrites the store's log keeping only its live cassettes, when the store is a `jsonl://`
/// log; `None` for every other store, where a delete removes the bytes itself.
pub(crate) fn compact(spec: &StoreSpec) -> anyhow::Result<Option<Compaction>> {
    let StoreUrl::Jsonl(path) = spec.url() else {
        return Ok(None);
    };
    let store = JsonlStore::open(path).with_context(|| format!("cannot open the store {spec}"))?;
    let done = runtime()?
        .block_on(store.compact())
        .with_context(|| format!("cannot compact the log {spec}"))?;
    Ok(Some(done))
}

/// One line saying what a compaction did.
pub(crate) fn summary(spec: &StoreSpec, done: &Compaction) -> String {
    let damaged = if done.dropped_damaged > 0 {
        format!(" ({} unreadable)", done.dropped_damaged)
    } else {
        String::new()
    };
    format!(
        "compacted {spec}: kept {} cassettes, removed {} stale line(s){damaged}, {} -> {} bytes",
        done.kept, done.dropped_lines, done.bytes_before, done.bytes_after
    )
}
