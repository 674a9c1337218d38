//! `jsonl://PATH`: an append-only JSON Lines log, one cassette per line, for recording runs that
//! must survive a hard stop.
//!
//! Each line is `{"key":"…","cassette":{…}}` (or `{"key":"…","deleted":true}` after a delete);
//! the latest line for a key wins. Opening the log reads it once to build an in-memory index of
//! where each key's latest cassette sits, so a hit is one positioned read, never a scan.
//!
//! Several processes may share one log. Writers take an exclusive advisory lock (`flock`) around
//! "catch up on lines others appended, decide, append one line", which keeps lines whole and makes
//! create-only puts correct across processes; readers catch up under a shared lock whenever the
//! file has grown. A writer killed mid-line leaves a truncated last line: it is skipped with a
//! warning, and the next writer terminates it with a newline before appending, so the damage
//! never spreads to a good line.

use crate::fs::blocking;
use crate::key::{stored_key, validate_prefix};
use crate::{json, Created, Error, Key, Result, Store};
use async_trait::async_trait;
use bytes::Bytes;
use fs2::FileExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::ops::Bound;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// An append-only JSON Lines cassette log.
#[derive(Debug, Clone)]
pub struct JsonlStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Shared with the lock guards, which must outlive borrows of the rest of the state.
    file: Arc<File>,
    /// Where each live key's cassette JSON sits in the file: `(offset, length)`.
    index: BTreeMap<Key, (u64, u64)>,
    /// Everything before this offset has been indexed (it always ends just after a newline).
    indexed_to: u64,
    /// The file length at the last catch-up; an unchanged length means nothing to read.
    seen_len: u64,
    /// The start of a truncated last line already warned about, so it is reported once.
    warned_truncated_at: Option<u64>,
}

#[derive(Deserialize)]
struct Line<'a> {
    key: String,
    #[serde(borrow, default)]
    cassette: Option<&'a RawValue>,
    #[serde(default)]
    deleted: bool,
}

impl JsonlStore {
    /// Opens the log at `path` (creating it and its folder when missing) and indexes it.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self> {
        let path = path.into();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|source| io_error("creating folder", dir, source))?;
        }
        // O_APPEND makes every write land at the end of the file even if another process
        // appended since our last look, so our own offsets can never overwrite its lines.
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|source| io_error("opening", &path, source))?;
        let mut state = State {
            file: Arc::new(file),
            index: BTreeMap::new(),
            indexed_to: 0,
            seen_len: 0,
            warned_truncated_at: None,
        };
        {
            let _lock = Lock::shared(state.file.clone(), &path)?;
            state.catch_up(&path)?;
        }
        Ok(Self {
            inner: Arc::new(Inner {
                path,
                state: Mutex::new(state),
            }),
        })
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Inner, &mut State) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let inner = self.inner.clone();
        blocking("jsonl", self.location(), move || {
            let mut state = inner.state();
            work(&inner, &mut state)
        })
        .await
    }

    async fn append(&self, key: &Key, document: Bytes, mode: Mode) -> Result<Created> {
        json::validate(&document).map_err(|reason| Error::InvalidDocument {
            location: self.location(),
            key: key.clone(),
            reason,
        })?;
        let key = key.clone();
        self.run(move |inner, state| {
            let _lock = Lock::exclusive(state.file.clone(), &inner.path)?;
            state.catch_up(&inner.path)?;
            if matches!(mode, Mode::Create) && state.index.contains_key(&key) {
                return Ok(Created::AlreadyExists);
            }
            let mut line = Vec::with_capacity(document.len() + 96);
            line.extend_from_slice(b"{\"key\":\"");
            line.extend_from_slice(key.as_str().as_bytes());
            line.extend_from_slice(b"\",\"cassette\":");
            let cassette_at = line.len() as u64;
            let cassette = json::compact(&document);
            line.extend_from_slice(&cassette);
            line.extend_from_slice(b"}\n");
            let start = state.write_line(&inner.path, &line)?;
            state
                .index
                .insert(key, (start + cassette_at, cassette.len() as u64));
            Ok(Created::Won)
        })
        .await
    }
}

#[derive(Clone, Copy)]
enum Mode {
    Overwrite,
    Create,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        // Every update of the state is completed before anything that could panic, so a
        // poisoned lock still guards a consistent index.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    /// Reads whatever complete lines were appended since the last look (by us or by other
    /// processes) into the index. Call with the file lock held, so no writer is mid-line.
    fn catch_up(&mut self, path: &Path) -> Result<()> {
        let len = self
            .file
            .metadata()
            .map_err(|source| io_error("reading", path, source))?
            .len();
        if len == self.seen_len {
            return Ok(());
        }
        if len < self.indexed_to {
            // Someone truncated or replaced the log behind our back: start over.
            tracing::warn!(
                "cassette log {} shrank; re-reading it from the start",
                path.display()
            );
            self.index.clear();
            self.indexed_to = 0;
            self.warned_truncated_at = None;
        }
        let file = self.file.clone();
        let mut reader = BufReader::with_capacity(1 << 20, &*file);
        reader
            .seek(SeekFrom::Start(self.indexed_to))
            .map_err(|source| io_error("reading", path, source))?;
        let mut reader = reader.take(len - self.indexed_to);
        let mut offset = self.indexed_to;
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|source| io_error("reading", path, source))?;
            if n == 0 {
                break;
            }
            if line.last() != Some(&b'\n') {
                // Under the lock nobody is writing, so a line without its newline was cut short
                // by a writer that died: skip it, and leave it to the next writer to terminate.
                if self.warned_truncated_at != Some(offset) {
                    tracing::warn!(
                        file = %path.display(),
                        offset,
                        "skipping truncated last line of cassette log {} at byte {offset} \
                         (a writer stopped mid-write); its cassette was not recorded",
                        path.display()
                    );
                    self.warned_truncated_at = Some(offset);
                }
                break;
            }
            self.index_line(path, offset, &line);
            offset += n as u64;
        }
        self.indexed_to = offset;
        self.seen_len = len;
        Ok(())
    }

    fn index_line(&mut self, path: &Path, offset: u64, line: &[u8]) {
        let body = &line[..line.len() - 1];
        if body.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let parsed = serde_json::from_slice::<Line<'_>>(body)
            .map_err(|e| e.to_string())
            .and_then(|line| match stored_key(&line.key, "") {
                Some(key) => Ok((key, line)),
                None => Err(format!("`{}` is not a cassette key", line.key)),
            });
        match parsed {
            Ok((key, Line { deleted: true, .. })) => {
                self.index.remove(&key);
            }
            Ok((
                key,
                Line {
                    cassette: Some(raw),
                    ..
                },
            )) => {
                // The raw value borrows from `body`, so its position in the line is exact.
                let at = raw.get().as_ptr() as usize - body.as_ptr() as usize;
                self.index
                    .insert(key, (offset + at as u64, raw.get().len() as u64));
            }
            Ok((key, _)) => tracing::warn!(
                "skipping line at byte {offset} of cassette log {}: key {key} has neither \
                 `cassette` nor `deleted`",
                path.display()
            ),
            Err(reason) => tracing::warn!(
                "skipping damaged line at byte {offset} of cassette log {}: {reason}",
                path.display()
            ),
        }
    }

    /// Appends one whole line and returns the offset it starts at. Call with the exclusive lock
    /// held and after `catch_up`, so the file ends at `seen_len`.
    fn write_line(&mut self, path: &Path, line: &[u8]) -> Result<u64> {
        let mut start = self.seen_len;
        let mut buf = Vec::new();
        if self.indexed_to < self.seen_len {
            // A truncated line from a dead writer: end it so that ours starts on a fresh line.
            buf.push(b'\n');
            start += 1;
        }
        buf.extend_from_slice(line);
        let result = (&*self.file)
            .write_all(&buf)
            .and_then(|()| self.file.sync_data());
        // Whatever happened, the file's end is where the next catch-up must look from.
        let written_ok = result.is_ok();
        if written_ok {
            self.indexed_to = start + line.len() as u64;
            self.seen_len = self.indexed_to;
        }
        result.map_err(|source| io_error("appending to", path, source))?;
        Ok(start)
    }

    fn read_cassette(&self, path: &Path, (offset, len): (u64, u64)) -> Result<Vec<u8>> {
        let mut buf = vec![0; len as usize];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|source| io_error("reading", path, source))?;
        Ok(buf)
    }
}

/// Holds an advisory `flock` on the log until dropped.
struct Lock(Arc<File>);

impl Lock {
    fn shared(file: Arc<File>, path: &Path) -> Result<Self> {
        file.lock_shared()
            .map_err(|source| io_error("locking", path, source))?;
        Ok(Self(file))
    }

    fn exclusive(file: Arc<File>, path: &Path) -> Result<Self> {
        file.lock_exclusive()
            .map_err(|source| io_error("locking", path, source))?;
        Ok(Self(file))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Closing the file would release it too; an unlock failure leaves nothing to repair.
        let _ = FileExt::unlock(&*self.0);
    }
}

fn io_error(action: &'static str, path: &Path, source: io::Error) -> Error {
    Error::Io {
        store: "jsonl",
        action,
        path: path.to_owned(),
        source,
    }
}

impl fmt::Display for JsonlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "jsonl://{}", self.inner.path.display())
    }
}

/// Catches up on lines appended by other processes, but only when the file grew: a hit costs
/// one `fstat` and one positioned read.
fn refresh(inner: &Inner, state: &mut State) -> Result<()> {
    let len = state
        .file
        .metadata()
        .map_err(|source| io_error("reading", &inner.path, source))?;
    if len.len() != state.seen_len {
        let _lock = Lock::shared(state.file.clone(), &inner.path)?;
        state.catch_up(&inner.path)?;
    }
    Ok(())
}

#[async_trait]
impl Store for JsonlStore {
    /// Returns the latest cassette for `key`, pretty-printed with a trailing newline like the
    /// file store does, so both give the same bytes for the same recording.
    async fn get(&self, key: &Key) -> Result<Option<Bytes>> {
        let key = key.clone();
        self.run(move |inner, state| {
            refresh(inner, state)?;
            match state.index.get(&key) {
                None => Ok(None),
                Some(&span) => {
                    let raw = state.read_cassette(&inner.path, span)?;
                    Ok(Some(Bytes::from(json::pretty(&raw))))
                }
            }
        })
        .await
    }

    /// Appends the cassette as one line; it replaces any earlier line for the same key.
    async fn put(&self, key: &Key, document: Bytes) -> Result<()> {
        self.append(key, document, Mode::Overwrite)
            .await
            .map(|_| ())
    }

    async fn put_if_absent(&self, key: &Key, document: Bytes) -> Result<Created> {
        self.append(key, document, Mode::Create).await
    }

    async fn delete(&self, key: &Key) -> Result<()> {
        let key = key.clone();
        self.run(move |inner, state| {
            let _lock = Lock::exclusive(state.file.clone(), &inner.path)?;
            state.catch_up(&inner.path)?;
            if state.index.contains_key(&key) {
                let line = format!("{{\"key\":\"{key}\",\"deleted\":true}}\n");
                state.write_line(&inner.path, line.as_bytes())?;
                state.index.remove(&key);
            }
            Ok(())
        })
        .await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<Key>> {
        validate_prefix(prefix)?;
        let prefix = prefix.to_owned();
        self.run(move |inner, state| {
            refresh(inner, state)?;
            Ok(state
                .index
                .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
                .take_while(|(k, _)| k.as_str().starts_with(&prefix))
                .map(|(k, _)| k.clone())
                .collect())
        })
        .await
    }

    fn location(&self) -> String {
        self.to_string()
    }
}
