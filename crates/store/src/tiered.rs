//! A local store (sled or files) in front of a remote one (S3), so that a CI runner's second run
//! of a suite reads nothing from the bucket.
//!
//! The remote is the source of truth. Reads try the local tier first and fill it from the remote.
//! Writes go to the remote first, then to the local tier, so a crash between the two leaves the
//! local tier missing a cassette (refetched later), never holding one the remote lacks.
//! `put_if_absent` (a recording filling a miss) is create-only on the remote, and the local tier
//! then receives whatever the remote holds, so racing runners all keep the first recording;
//! `put` (a deliberate re-record) overwrites both.

use crate::{Created, DynStore, Key, Result, SegmentName, Store};
use async_trait::async_trait;
use bytes::Bytes;
use std::fmt;

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
        if let Some(document) = self.local.get(key).await? {
            return Ok(Some(document));
        }
        let Some(document) = self.remote.get(key).await? else {
            return Ok(None);
        };
        // A cache that cannot be filled only costs a later refetch; the reader still gets the
        // cassette, so the failure is reported but not returned.
        if let Err(e) = self.local.put(key, document.clone()).await {
            tracing::warn!(
                "could not cache cassette {key} in {}: {}",
                self.local.location(),
                report(&e)
            );
        }
        Ok(Some(document))
    }

    async fn put(&self, key: &Key, document: Bytes) -> Result<()> {
        self.remote.put(key, document.clone()).await?;
        self.local.put(key, document).await
    }

    async fn put_if_absent(&self, key: &Key, document: Bytes) -> Result<Created> {
        match self.remote.put_if_absent(key, document.clone()).await? {
            Created::Won => {
                self.local.put(key, document).await?;
                Ok(Created::Won)
            }
            Created::AlreadyExists => {
                // Another writer won on the remote: cache its recording, not ours.
                if let Some(winner) = self.remote.get(key).await? {
                    self.local.put(key, winner).await?;
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
