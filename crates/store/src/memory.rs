//! An in-process store for tests: nothing survives the process.

use crate::key::{validate_key, validate_prefix};
use crate::{Created, Result, Store};
use async_trait::async_trait;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;

/// Cassettes held in memory, sorted by key.
#[derive(Debug, Default)]
pub struct MemoryStore {
    entries: Mutex<BTreeMap<String, Bytes>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Bytes>> {
        // A panic while holding the lock cannot leave the map half-updated (every operation is
        // a single insert or remove), so a poisoned lock is still safe to use.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl fmt::Display for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("memory://")
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn get(&self, key: &str) -> Result<Option<Bytes>> {
        validate_key(key)?;
        Ok(self.entries().get(key).cloned())
    }

    async fn put(&self, key: &str, document: Bytes) -> Result<()> {
        validate_key(key)?;
        self.entries().insert(key.to_owned(), document);
        Ok(())
    }

    async fn put_if_absent(&self, key: &str, document: Bytes) -> Result<Created> {
        validate_key(key)?;
        let mut entries = self.entries();
        if entries.contains_key(key) {
            return Ok(Created::AlreadyExists);
        }
        entries.insert(key.to_owned(), document);
        Ok(Created::Won)
    }

    async fn delete(&self, key: &str) -> Result<()> {
        validate_key(key)?;
        self.entries().remove(key);
        Ok(())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>> {
        validate_prefix(prefix)?;
        Ok(self
            .entries()
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect())
    }

    fn location(&self) -> String {
        self.to_string()
    }
}
