//! A local store (sled or files) in front of a remote one (S3), so that a CI runner's second run
//! of a suite reads nothing from the bucket.
//!
//! The remote is the source of truth. Reads try the local tier first and fill it from the remote.
//! Writes go to the remote first, then to the local tier, so a crash between the two leaves the
//! local tier missing a cassette (refetched later), never holding one the remote lacks.
//! `put_if_absent` (a recording filling a miss) is create-only on the remote, and the local tier
//! then receives whatever the remote holds, so racing runners all keep the first recording;
//! `put` (a deliberate re-record) overwrites both.
//!
//! The cache only ever costs or saves time, so it never stops the store from working: a cache
//! that cannot be opened (a damaged sled database, a folder that cannot be created, a database
//! another process holds) is bypassed with a warning ([`with_cache`]), and a cache read or write
//! that fails is reported and answered from the remote. A cache that could keep an outdated
//! cassette (a failed overwrite, a failed delete) has that cassette removed, or the operation
//! fails.

use crate::{Created, DynStore, Key, PutMode, Result, SegmentName, Store, StoreUrl};
use async_trait::async_trait;
use bytes::Bytes;
use std::fmt;
use std::sync::Arc;

/// Puts the store `cache` names in front of `remote`; when the cache cannot be opened, warns
/// (naming it and why) and returns `remote` alone.
pub fn with_cache(remote: DynStore, cache: &StoreUrl) -> DynStore {
    match cache.open() {
        Ok(local) => Arc::new(TieredStore::new(local, remote)),
        Err(err) => {
            tracing::warn!(
                "cannot open the cache in front of {}, so it is not used: {}",
                remote.location(),
                report(&err)
            );
            remote
        }
    }
}

/// A local cache tier in front of a remote store.
#[derive(Debug, Clone)]
pub struct TieredStore {
    local: DynStore,
    remote: DynStore,
}

impl TieredStore {
    /// Puts `local` in front of `remote`.
    pub fn new(local: DynStore, remote: DynStore) -> Self {
        Self { local, remote }
    }

    /// The local tier.
    pub fn local(&self) -> &DynStore {
        &self.local
    }

    /// The remote tier.
    pub fn remote(&self) -> &DynStore {
        &self.remote
    }
}

impl TieredStore {
    /// Stores what the remote holds in the cache. When that fails the cache must not keep an
    /// older version of the cassette, which it would serve instead: it is deleted there, and
    /// when even that fails the next read of the key may be stale, so that is said loudly.
    async fn cache(&self, key: &Key, document: Bytes) {
        let Err(e) = self.local.put_with(key, document, PutMode::Overwrite).await else {
            return;
        };
        let local = self.local.location();
        match self.local.delete(key).await {
            Ok(()) => tracing::warn!("could not cache cassette {key} in {local}: {}", report(&e)),
            Err(d) => tracing::error!(
                "could not cache cassette {key} in {local} ({}), nor remove an older copy there \
                 ({}): delete the cache {local}",
                report(&e),
                report(&d)
            ),
        }
    }
}

impl TieredStore {
    /// Reads `key` from the cache, else from the remote (filling the cache), each tier read
    /// as `read` says.
    async fn read(&self, key: &Key, read: Read) -> Result<Option<Bytes>> {
        match read.from(&self.local, key).await {
            Ok(Some(document)) => return Ok(Some(document)),
            Ok(None) => {}
            Err(e) => tracing::warn!(
                "cannot read cassette {key} from the cache {}, reading {} instead: {}",
                self.local.location(),
                self.remote.location(),
                report(&e)
            ),
        }
        let Some(document) = read.from(&self.remote, key).await? else {
            return Ok(None);
        };
        // A cache that cannot be filled only costs a later refetch; the reader still gets the
        // cassette, so the failure is reported but not returned.
        self.cache(key, document.clone()).await;
        Ok(Some(document))
    }
}

/// How a tier is read: checked ([`Store::get`]) or as stored ([`Store::get_raw`]).
#[derive(Debug, Clone, Copy)]
enum Read {
    Checked,
    Raw,
}

impl Read {
    async fn from(self, store: &DynStore, key: &Key) -> Result<Option<Bytes>> {
        match self {
            Read::Checked => store.get(key).await,
            Read::Raw => store.get_raw(key).await,
        }
    }
}

impl fmt::Display for TieredStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (cached in {})",
            self.remote.location(),
            self.local.location()
        )
    }
}

#[async_trait]
impl Store for TieredStore {
    async fn get(&self, key: &Key) -> Result<Option<Bytes>> {
        self.read(key, Read::Checked).await
    }

    /// Each tier read as it stores (the replay hit path checks what it reads itself).
    async fn get_raw(&self, key: &Key) -> Result<Option<Bytes>> {
        self.read(key, Read::Raw).await
    }

    /// The remote first, in the same mode; the cache then receives what the remote holds.
    async fn put_with(&self, key: &Key, document: Bytes, mode: PutMode) -> Result<Created> {
        match self.remote.put_with(key, document.clone(), mode).await? {
            Created::Won => {
                self.cache(key, document).await;
                Ok(Created::Won)
            }
            Created::AlreadyExists => {
                // Another writer won on the remote: cache its recording, not ours.
                if let Some(winner) = self.remote.get(key).await? {
                    self.cache(key, winner).await;
                }
                Ok(Created::AlreadyExists)
            }
        }
    }

    async fn delete(&self, key: &Key) -> Result<()> {
        self.remote.delete(key).await?;
        self.local.delete(key).await
    }

    /// Lists what a `get` can find: the remote's keys and any the local tier still holds.
    async fn list(&self, prefix: &str) -> Result<Vec<Key>> {
        let mut keys = self.remote.list(prefix).await?;
        keys.extend(self.local.list(prefix).await?);
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }

    fn location(&self) -> String {
        self.to_string()
    }

    // Segments describe the remote's cassettes, so they live there alone: the local tier only
    // ever holds copies of cassettes.
    fn keeps_segments(&self) -> bool {
        self.remote.keeps_segments()
    }

    async fn put_segment(&self, name: &SegmentName, document: Bytes) -> Result<Created> {
        self.remote.put_segment(name, document).await
    }

    async fn get_segment(&self, name: &SegmentName) -> Result<Option<Bytes>> {
        self.remote.get_segment(name).await
    }

    async fn list_segments(&self) -> Result<Vec<SegmentName>> {
        self.remote.list_segments().await
    }

    async fn delete_segment(&self, name: &SegmentName) -> Result<()> {
        self.remote.delete_segment(name).await
    }
}

/// An error and its causes on one line, for the log.
fn report(err: &(dyn std::error::Error + 'static)) -> String {
    std::iter::successors(Some(err), |e| e.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}
