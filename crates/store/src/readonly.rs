//! A read-only wrapper for replay: reads pass through, every write is refused with
//! [`Error::ReadOnly`] so a replay run can never change the recorded cassettes.

use crate::{Created, DynStore, Error, Key, PutMode, Result, SegmentName, Store};
use async_trait::async_trait;
use bytes::Bytes;
use std::fmt;

/// Wraps a store and refuses writes.
#[derive(Debug, Clone)]
pub struct ReadOnlyStore {
    inner: DynStore,
}

impl ReadOnlyStore {
    /// Wraps `inner`.
    pub fn new(inner: DynStore) -> Self {
        Self { inner }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &DynStore {
        &self.inner
    }

    fn refuse<T>(&self, key: &Key) -> Result<T> {
        Err(Error::ReadOnly {
            location: self.inner.location(),
            key: key.clone(),
        })
    }
}

impl fmt::Display for ReadOnlyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (read-only)", self.inner.location())
    }
}

#[async_trait]
impl Store for ReadOnlyStore {
    async fn get(&self, key: &Key) -> Result<Option<Bytes>> {
        self.inner.get(key).await
    }

    async fn get_raw(&self, key: &Key) -> Result<Option<Bytes>> {
        self.inner.get_raw(key).await
    }

    async fn put_with(&self, key: &Key, _document: Bytes, _mode: PutMode) -> Result<Created> {
        self.refuse(key)
    }

    async fn delete(&self, key: &Key) -> Result<()> {
        self.refuse(key)
    }

    async fn list(&self, prefix: &str) -> Result<Vec<Key>> {
        self.inner.list(prefix).await
    }

    fn location(&self) -> String {
        self.to_string()
    }

    fn keeps_segments(&self) -> bool {
        self.inner.keeps_segments()
    }

    async fn put_segment(&self, name: &SegmentName, _document: Bytes) -> Result<Created> {
        Err(Error::ReadOnlySegment {
            location: self.inner.location(),
            name: name.to_string(),
        })
    }

    async fn get_segment(&self, name: &SegmentName) -> Result<Option<Bytes>> {
        self.inner.get_segment(name).await
    }

    async fn list_segments(&self) -> Result<Vec<SegmentName>> {
        self.inner.list_segments().await
    }

    async fn delete_segment(&self, name: &SegmentName) -> Result<()> {
        Err(Error::ReadOnlySegment {
            location: self.inner.location(),
            name: name.to_string(),
        })
    }
}
