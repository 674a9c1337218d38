//! Shared plumbing of the maintenance commands (`ls`, `show`, `verify`, `gc`, `copy`, `diff`):
//! naming a store the way the proxy does, reading cassettes, resolving key prefixes.

use crate::shared::settings::StoreSpec;
use anyhow::{bail, Context};
use bytes::Bytes;
use cassette_grade::answer::{self, Answer};
use cassette_keying::Profile;
use cassette_recorder::Cassette;
use cassette_store::fs::FileStore;
use cassette_store::{DynStore, Key, StoreUrl};
use serde_json::Value;
use std::path::{Path, PathBuf};

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
    let progress = crate::shared::progress::Progress::bar(keys.len() as u64, "cassettes read");
    let progress = &progress;
    let loaded = futures::stream::iter(keys)
        .map(|key| async move {
            match store.get(&key).await {
                Ok(Some(bytes)) => {
                    let parsed = Cassette::from_document(&bytes).map_err(|e| e.to_string());
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
        .inspect(|_| progress.inc())
        .collect()
        .await;
    progress.finish();
    Ok(loaded)
}

/// Whether the store a spec names is there already (opening a local store would create it).
/// Remote and in-memory stores always "exist": an empty one holds no cassette instead.
pub(crate) fn store_exists(spec: &StoreSpec) -> bool {
    match spec.url() {
        StoreUrl::File(path) => path.is_dir(),
        StoreUrl::Jsonl(path) => path.is_file(),
        #[cfg(feature = "sled")]
        StoreUrl::Sled(path) => path.is_dir(),
        _ => true,
    }
}

/// A file in a cassette folder that is not a cassette, and what it looks like.
pub(crate) struct Foreign {
    /// The file or folder.
    pub(crate) path: PathBuf,
    /// What it seems to be, and what to do.
    pub(crate) what: String,
}

/// The files of a `file://` store that are not cassettes (other stores keep only their own
/// records), each with a guess at what it is: tapes of another tool are named as such, with the
/// command that converts them.
pub(crate) fn foreign_files(spec: &StoreSpec) -> anyhow::Result<Vec<Foreign>> {
    let StoreUrl::File(root) = spec.url() else {
        return Ok(Vec::new());
    };
    if !root.is_dir() {
        return Ok(Vec::new());
    }
    let store = FileStore::open(root).with_context(|| format!("cannot open the store {spec}"))?;
    Ok(store
        .unrecognised()?
        .into_iter()
        .map(|path| Foreign {
            what: guess(&path),
            path,
        })
        .collect())
}

fn guess(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let import = "convert it with `cassette import`";
    if path.is_dir() {
        return "not a cassette folder (cassettes live in two-hex-digit folders)".to_owned();
    }
    if let Some(stem) = name.strip_suffix(".json") {
        if Key::parse(stem).is_some() {
            return "a cassette file in the wrong folder (its folder must be its key's first two characters)".to_owned();
        }
        let seed = std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .is_some_and(|v| v.get("params").is_some() && v.get("text").is_some());
        if seed {
            return format!(
                "a tape of the seed harness (key, params, text), not read by cassette: {import}"
            );
        }
    }
    if name.ends_with(".yaml") || name.ends_with(".yml") {
        return format!("a YAML file, perhaps a vcrpy cassette, not read by cassette: {import}");
    }
    "not a cassette".to_owned()
}
