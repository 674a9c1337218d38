//! An in-process store for tests: nothing survives the process.

use crate::key::validate_prefix;
use crate::{Created, Key, PutMode, Result, SegmentName, Store};
use async_trait::async_trait;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;
use std::sync::Mutex;

/// Cassettes held in memory, sorted by key.
#[derive(Debug, Default)]
pub struct MemoryStore {
    entries: Mutex<BTreeMap<Key, Bytes>>,
    segments: Mutex<BTreeMap<SegmentName, Bytes>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, Bytes>> {
        // A panic while holding the lock cannot leave the map half-updated (every operation is
        // a single insert or remove), so a poisoned lock is still safe to use.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn segments(&self) -> std::sync::MutexGuard<'_, BTreeMap<SegmentName, Bytes>> {
        self.segments.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl fmt::Display for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("memory://")
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn get(&self, key: &Key) -> Result<Option<Bytes>> {
        Ok(self.entries().get(key).cloned())
    }

    /// Memory holds what was put: nothing to check on the way out.
    async fn get_raw(&self, key: &Key) -> Result<Option<Bytes>> {
        self.get(key).await
    }

    async fn put_with(&self, key: &Key, document: Bytes, mode: PutMode) -> Result<Created> {
        let mut entries = self.entries();
        if mode == PutMode::Create && entries.contains_key(key) {
            return Ok(Created::AlreadyExists);
        }
        entries.insert(key.clone(), document);
        Ok(Created::Won)
    }

    async fn delete(&self, key: &Key) -> Result<()> {
        self.entries().remove(key);
        Ok(())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<Key>> {
        validate_prefix(prefix)?;
        Ok(self
            .entries()
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.as_str().starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect())
    }

    fn location(&self) -> String {
        self.to_string()
    }

    fn keeps_segments(&self) -> bool {
        true
    }

    async fn put_segment(&self, name: &SegmentName, document: Bytes) -> Result<Created> {
        let mut segments = self.segments();
        if segments.contains_key(name) {
            return Ok(Created::AlreadyExists);
        }
        segments.insert(name.clone(), document);
        Ok(Created::Won)
    }

    async fn get_segment(&self, name: &SegmentName) -> Result<Option<Bytes>> {
        Ok(self.segments().get(name).cloned())
    }

    async fn list_segments(&self) -> Result<Vec<SegmentName>> {
        Ok(self.segments().keys().cloned().collect())
    }

    async fn delete_segment(&self, name: &SegmentName) -> Result<()> {
        self.segments().remove(name);
        Ok(())
    }
}
