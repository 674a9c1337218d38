//! Shared plumbing of the maintenance commands (`ls`, `show`, `verify`, `gc`, `copy`, `diff`):
//! naming a store the way the proxy does, reading cassettes, resolving key prefixes.

pub(crate) mod canary;
pub(crate) mod copy;
pub(crate) mod diff;
pub(crate) mod diff_runs;
pub(crate) mod explain;
pub(crate) mod gc;
pub(crate) mod ls;
pub(crate) mod probe;
pub(crate) mod show;
pub(crate) mod verify;

use crate::answer::{self, Answer};
use anyhow::{bail, Context};
use bytes::Bytes;
use cassette_keying::Profile;
use cassette_recorder::Cassette;
use cassette_store::{DynStore, Key};

/// Maintenance commands read the store named by the same flags and variables as the proxy.
pub(crate) use crate::settings::StoreArgs;

/// A small runtime for commands that only talk to stores.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Finds the one key starting with `prefix`; errors say when there is none or several.
pub(crate) async fn resolve_key(store: &DynStore, prefix: &str) -> anyhow::Result<Key> {
    let prefix = prefix.trim().to_ascii_lowercase();
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("{prefix:?} is not a key or key prefix (hex digits)");
    }
    let keys = store.list(&prefix).await?;
    match keys.as_slice() {
        [] => bail!(
            "no cassette key starts with {prefix} in {}",
            store.location()
        ),
        [one] => Ok(one.clone()),
        many => {
            let shown: Vec<&str> = many.iter().take(5).map(Key::as_str).collect();
            bail!(
                "the prefix {prefix} is ambiguous: {} cassettes match ({}{}); give more characters",
                many.len(),
                shown.join(", "),
                if many.len() > 5 { ", ..." } else { "" }
            )
        }
    }
}

/// The answer a cassette holds, read like the suite runner reads a live one.
pub(crate) fn cassette_answer(cassette: &Cassette) -> Answer {
    let profile = Profile::from_path(&cassette.request.path);
    match cassette.response.body.as_json() {
        Some(value) => answer::from_json(profile, value),
        None => answer::from_bytes(
            profile,
            &cassette.response.body.to_bytes().unwrap_or_default(),
        ),
    }
}

/// One cassette as read: key, raw bytes (when readable), the parsed document or why not.
pub(crate) type Loaded = (Key, Option<Bytes>, Result<Cassette, String>);

/// Reads every cassette of a store: key, raw bytes, and the parsed document or why it did not
/// parse. Reads run concurrently; the result is in key order.
pub(crate) async fn load_all(store: &DynStore) -> anyhow::Result<Vec<Loaded>> {
    use futures::StreamExt;
    let keys = store.list("").await?;
    let loaded = futures::stream::iter(keys)
        .map(|key| async move {
            match store.get(&key).await {
                Ok(Some(bytes)) => {
                    let parsed = Cassette::from_document(&bytes);
                    (key, Some(bytes), parsed)
                }
                Ok(None) => (key, None, Err("deleted while reading".to_owned())),
                Err(err) => (
                    key,
                    None,
                    Err(format!("cannot read: {:#}", anyhow::Error::from(err))),
                ),
            }
        })
        .buffered(32)
        .collect()
        .await;
    Ok(loaded)
}
