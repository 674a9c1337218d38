//! Where cassettes live: one async [`Store`] contract over local files, JSON Lines logs, sled,
//! S3-compatible buckets and memory, plus wrappers (tiered cache, read-only).
//!
//! A cassette is one JSON document addressed by its [`Key`] (64 lowercase hex characters, from
//! `cassette-keying`). Stores treat the document as opaque bytes: they do not interpret it beyond
//! what they need. A miss is `Ok(None)`, never an error; errors name the backend, the key or file
//! and the cause.
//!
//! [`open`] maps a URL to a backend: `file://PATH` (or a bare path), `jsonl://PATH`,
//! `sled://PATH`, `s3://BUCKET/PREFIX`, `memory://`. [`open_tiered`] puts a local cache in front
//! of a remote store. `docs/stores.md` describes the URLs, their options and the on-disk layouts.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use cassette_store::{Created, Key, StoreExt};
//! let store = cassette_store::open("memory://")?;
//! let key = Key::parse(&"3fa2".repeat(16)).expect("64 hex characters");
//! assert_eq!(store.put_if_absent(&key, "{}\n".into()).await?, Created::Won);
//! assert_eq!(store.put_if_absent(&key, "[]\n".into()).await?, Created::AlreadyExists);
//! assert!(store.get_json(&key).await?.is_some());
//! let other = Key::parse(&"00".repeat(32)).expect("64 hex characters");
//! assert!(store.get(&other).await?.is_none()); // a miss is not an error
//! assert_eq!(store.list("3f").await?, vec![key]);
//! # Ok::<(), cassette_store::Error>(())
//! # }).unwrap();
//! ```
//!
//! Architecture invariant: a [`Key`] is 64 lowercase hex characters by construction, and every
//! backend reads names back and checks list prefixes with that same rule, so a key can never name
//! a path outside the store, whatever the backend. Stores know nothing of the recorder: documents
//! are opaque bytes.

#![deny(missing_docs)]

mod error;
pub mod fs;
mod json;
pub mod jsonl;
mod key;
pub mod memory;
pub mod readonly;
#[cfg(feature = "s3")]
pub mod s3;
mod segment;
#[cfg(feature = "sled")]
pub mod sled;
pub mod tiered;
mod url;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use cassette_keying::Key;
pub use error::{Error, Result};
pub use segment::SegmentName;
pub use url::{open, open_tiered, StoreUrl};

use async_trait::async_trait;
use bytes::Bytes;
use std::fmt;
use std::sync::Arc;

/// How a put treats a document already stored under its key: the one spelling of a write mode,
/// which every backend and wrapper takes ([`Store::put_with`]), as object_store's `PutMode`.
///
/// Not `#[non_exhaustive]` on purpose: a mode added here must be handled by every backend, so
/// it does not compile until each says what it means there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PutMode {
    /// Replace what is stored (a deliberate re-record, or a copy told to replace).
    #[default]
    Overwrite,
    /// Store only when nothing is stored under the key yet; a document already there is kept
    /// and this one discarded ([`Created::AlreadyExists`]). Racing writers all keep the first.
    Create,
}

/// What a put did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// This writer stored the document (always, with [`PutMode::Overwrite`]).
    Won,
    /// A document was already there; it was kept and this one discarded ([`PutMode::Create`]).
    AlreadyExists,
}

/// The storage contract every backend and wrapper implements.
///
/// Implementations must make puts atomic: a concurrent reader sees either the previous document
/// or the new complete one, never a partial write.
///
/// The trait has no provided methods: a wrapper that did not override one would answer it from
/// the trait's default instead of its inner store, silently (a tiered store once read every
/// replay hit through the checked `get` that way). Every backend and wrapper says what each
/// method does; conveniences over them live in [`StoreExt`], which nobody can override.
#[async_trait]
pub trait Store: fmt::Debug + fmt::Display + Send + Sync + 'static {
    /// Reads the cassette stored under `key`; `Ok(None)` when there is none.
    async fn get(&self, key: &Key) -> Result<Option<Bytes>>;

    /// Reads the bytes stored under `key` as they are, without the check a backend may make of
    /// a document on the way out (the file store's JSON check, which names the damaged file):
    /// for a caller that checks what it reads anyway, such as the replay hit path, which
    /// compares the bytes with the fingerprint of a document it already checked and parses
    /// them otherwise. `Ok(None)` when nothing is stored. A backend that checks nothing on the
    /// way out answers it with [`Store::get`]; a wrapper forwards it.
    async fn get_raw(&self, key: &Key) -> Result<Option<Bytes>>;

    /// Stores `document` under `key` as `mode` says. [`StoreExt::put`] and
    /// [`StoreExt::put_if_absent`] spell the two modes.
    async fn put_with(&self, key: &Key, document: Bytes, mode: PutMode) -> Result<Created>;

    /// Removes the cassette under `key`; removing a missing key is not an error.
    async fn delete(&self, key: &Key) -> Result<()>;

    /// Lists every stored key that starts with `prefix` (all keys for `""`), sorted. A prefix
    /// that is not lowercase hex is [`Error::InvalidPrefix`].
    async fn list(&self, prefix: &str) -> Result<Vec<Key>>;

    /// A human-readable location for messages, such as `file:///repo/cassettes`.
    fn location(&self) -> String;

    /// Whether this store keeps index segments: small opaque documents beside the cassettes, in
    /// a namespace of their own (never listed by [`Store::list`]), for an index that answers
    /// "which recordings are there" without reading every cassette. A store that does not keep
    /// them lists none, reads none and refuses to write one ([`SegmentName::unsupported_in`]);
    /// its users fall back to reading the cassettes.
    fn keeps_segments(&self) -> bool;

    /// Stores a segment under `name` only when none is stored there yet (segments are written
    /// once: each writer names its own).
    async fn put_segment(&self, name: &SegmentName, document: Bytes) -> Result<Created>;

    /// Reads the segment `name`; `Ok(None)` when there is none.
    async fn get_segment(&self, name: &SegmentName) -> Result<Option<Bytes>>;

    /// Every stored segment name, sorted.
    async fn list_segments(&self) -> Result<Vec<SegmentName>>;

    /// Removes the segment `name`; removing a missing one is not an error.
    async fn delete_segment(&self, name: &SegmentName) -> Result<()>;
}

/// A shared, dynamically dispatched store.
pub type DynStore = Arc<dyn Store>;

/// Conveniences for callers, implemented for every store.
#[async_trait]
pub trait StoreExt: Store {
    /// Stores `document` under `key`, replacing any previous one ([`PutMode::Overwrite`]).
    async fn put(&self, key: &Key, document: Bytes) -> Result<()> {
        self.put_with(key, document, PutMode::Overwrite)
            .await
            .map(|_| ())
    }

    /// Stores `document` under `key` only when nothing is stored there yet
    /// ([`PutMode::Create`]).
    async fn put_if_absent(&self, key: &Key, document: Bytes) -> Result<Created> {
        self.put_with(key, document, PutMode::Create).await
    }

    /// Whether a cassette is stored under `key`.
    async fn contains(&self, key: &Key) -> Result<bool> {
        Ok(self.get(key).await?.is_some())
    }

    /// Reads and parses the cassette under `key` as JSON; a document that does not parse is an
    /// [`Error::Corrupt`] naming the key and location.
    async fn get_json(&self, key: &Key) -> Result<Option<serde_json::Value>> {
        match self.get(key).await? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| Error::Corrupt {
                    location: self.location(),
                    key: key.clone(),
                    reason: e.to_string(),
                }),
        }
    }
}

impl<T: Store + ?Sized> StoreExt for T {}
