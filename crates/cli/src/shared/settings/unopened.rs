//! The store of a recorder in mode `off`, which neither reads nor writes cassettes: the
//! configured store is never opened, so a pass-through run (`--mode off`, `probe`, the live
//! side of `run --live`) leaves no empty cassette folder behind. Any read finds nothing and any
//! write is refused, should a mode that stores nothing ever try.

use async_trait::async_trait;
use bytes::Bytes;
use cassette_store::{Created, Error, Key, PutMode, Result, SegmentName, Store};
use std::fmt;

/// A store named in the settings and never opened.
#[derive(Debug, Clone)]
pub(super) struct Unopened {
    location: String,
}

impl Unopened {
    /// Stands for the store at `location`.
    pub(super) fn new(location: String) -> Self {
        Self { location }
    }

    fn refuse<T>(&self, key: &Key) -> Result<T> {
        Err(Error::ReadOnly {
            location: self.to_string(),
            key: key.clone(),
        })
    }
}

impl fmt::Display for Unopened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (not opened: mode off stores nothing)", self.location)
    }
}

#[async_trait]
impl Store for Unopened {
    async fn get(&self, _key: &Key) -> Result<Option<Bytes>> {
        Ok(None)
    }

    async fn get_raw(&self, _key: &Key) -> Result<Option<Bytes>> {
        Ok(None)
    }

    async fn put_with(&self, key: &Key, _document: Bytes, _mode: PutMode) -> Result<Created> {
        self.refuse(key)
    }

    async fn delete(&self, key: &Key) -> Result<()> {
        self.refuse(key)
    }

    async fn list(&self, _prefix: &str) -> Result<Vec<Key>> {
        Ok(Vec::new())
    }

    fn location(&self) -> String {
        self.to_string()
    }

    fn keeps_segments(&self) -> bool {
        false
    }

    async fn put_segment(&self, name: &SegmentName, _document: Bytes) -> Result<Created> {
        Err(name.unsupported_in(self.location()))
    }

    async fn get_segment(&self, _name: &SegmentName) -> Result<Option<Bytes>> {
        Ok(None)
    }

    async fn list_segments(&self) -> Result<Vec<SegmentName>> {
        Ok(Vec::new())
    }

    async fn delete_segment(&self, _name: &SegmentName) -> Result<()> {
        Ok(())
    }
}
