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
//!
//! The log is also watched for changes that are not appends. Every read compares the file the
//! path names now (device, inode, length, modification time) with the one indexed: a log
//! replaced by rename (`git checkout`, an editor, a copy moved into place) is reopened and
//! re-read, one rewritten in place (same size, or larger with different bytes before the old
//! end) is re-read from the start, and one deleted while open fails every read and write with
//! [`Error::Vanished`] instead of answering from, or appending to, a file nobody can see.
//! Lines that cannot be read are kept in [`JsonlStore::damaged_lines`] for `verify` to report.
//!
//! On Windows (`platform.rs`) the same holds, with the file's volume serial number and file id
//! for its identity, and locks that are mandatory there, so a cassette is read under the shared
//! lock. A log deleted while open is an error there too: [`Error::Vanished`] where the name is
//! gone at once, an access-denied read error where Windows keeps it until the last handle
//! closes.

mod platform;

use crate::fs::blocking;
use crate::key::{stored_key, validate_prefix};
use crate::{json, Created, Error, Key, PutMode, Result, SegmentName, Store};
use async_trait::async_trait;
use bytes::Bytes;
use fs2::FileExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// How many bytes before the indexed end are compared when the log grew, to tell another
/// writer's append (the old bytes are still there) from a rewrite (they changed).
const TAIL: u64 = 64;

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
    /// Complete lines before `indexed_to`, for line numbers in messages.
    lines: u64,
    /// The file as it was at the last catch-up or write; an identical file means nothing to read.
    seen: Stamp,
    /// The last bytes before `indexed_to`, as indexed.
    tail: Vec<u8>,
    /// The start of a truncated last line already warned about, so it is reported once.
    warned_truncated_at: Option<u64>,
    /// Lines that could not be indexed, by offset.
    damaged: BTreeMap<u64, DamagedLine>,
}

/// A line of the log that holds no readable cassette: damaged in the middle of the log, or the
/// truncated last line a writer left when it stopped mid-write. Its cassette (if it was one) is
/// not served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedLine {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the line's start.
    pub offset: u64,
    /// What is wrong with it.
    pub reason: String,
}

/// Which file a path names and what it looked like: its id (device and inode) says which file,
/// length and modification time whether it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Stamp {
    id: platform::FileId,
    len: u64,
    modified: Option<SystemTime>,
}

impl Stamp {
    fn of((id, meta): (platform::FileId, Metadata)) -> Stamp {
        Stamp {
            id,
            len: meta.len(),
            modified: meta.modified().ok(),
        }
    }

    fn same_file(&self, other: &Stamp) -> bool {
        self.id == other.id
    }
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
        let state = State::open(&path, Create::IfMissing)?;
        Ok(Self {
            inner: Arc::new(Inner {
                path,
                state: Mutex::new(state),
            }),
        })
    }

    /// The lines that hold no readable cassette (damaged, or cut short by a writer that died),
    /// after catching up with the file. The log still serves every other line.
    pub async fn damaged_lines(&self) -> Result<Vec<DamagedLine>> {
        self.run(|inner, state| {
            refresh(inner, state)?;
            Ok(state.damaged.values().cloned().collect())
        })
        .await
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

    /// Rewrites the log keeping only each live key's latest cassette, so the bytes of deleted
    /// and replaced cassettes (and of unreadable lines) leave the disk: `cassette compact`, and
    /// `gc` after it deleted from a log.
    ///
    /// The new log is written to a temporary file in the log's folder, synced, and renamed over
    /// the log, so the path names the old log or the whole new one, never a partial file.
    /// Writers are held off by the exclusive lock every append takes; one waiting for it on the
    /// old file finds the path renamed once it gets the lock and follows the new file (as it
    /// follows any replacement), so no record is lost. A reader with the old file open keeps
    /// reading that snapshot until its next look at the path, which follows the new file.
    pub async fn compact(&self) -> Result<Compaction> {
        self.run(|inner, state| state.compact(&inner.path)).await
    }

    async fn append(&self, key: &Key, document: Bytes, mode: PutMode) -> Result<Created> {
        json::validate(&document).map_err(|reason| Error::InvalidDocument {
            location: self.location(),
            key: key.clone(),
            reason,
        })?;
        let key = key.clone();
        self.run(move |inner, state| {
            let _lock = state.lock_for_writing(&inner.path)?;
            state.catch_up(&inner.path)?;
            if matches!(mode, PutMode::Create) && state.index.contains_key(&key) {
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

/// What [`JsonlStore::compact`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compaction {
    /// Cassettes kept (the live keys).
    pub kept: usize,
    /// Lines left out: deletions, cassettes replaced or deleted since, and unreadable lines.
    pub dropped_lines: u64,
    /// Unreadable lines among them (damaged, or cut short by a writer that died).
    pub dropped_damaged: usize,
    /// The log's size before, in bytes.
    pub bytes_before: u64,
    /// The log's size after, in bytes.
    pub bytes_after: u64,
}

/// Whether opening the log may create it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Create {
    /// Opening the store: a missing log starts empty.
    IfMissing,
    /// Following a log replaced under us: it must be there.
    Never,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        // Every update of the state is completed before anything that could panic, so a
        // poisoned lock still guards a consistent index.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    /// Opens the log at `path` and indexes it from the start.
    fn open(path: &Path, create: Create) -> Result<State> {
        // O_APPEND (on Windows: write access without FILE_WRITE_DATA) makes every write land
        // at the end of the file even if another process appended since our last look, so our
        // own offsets can never overwrite its lines.
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(create == Create::IfMissing)
            .open(path)
            .map_err(|source| match source.kind() {
                io::ErrorKind::NotFound if create == Create::Never => vanished(path),
                _ => io_error("opening", path, source),
            })?;
        let mut state = State {
            file: Arc::new(file),
            index: BTreeMap::new(),
            indexed_to: 0,
            lines: 0,
            // An impossible stamp, so the first catch-up reads the file.
            seen: Stamp {
                len: u64::MAX,
                ..Stamp::default()
            },
            tail: Vec::new(),
            warned_truncated_at: None,
            damaged: BTreeMap::new(),
        };
        let _lock = Lock::shared(state.file.clone(), path)?;
        state.catch_up(path)?;
        Ok(state)
    }

    /// Makes this state follow the file `path` names now: the same file (nothing to do), a
    /// file that replaced it (reopened and indexed from the start), or none (deleted while
    /// open: an error, never a silent read from or write to an unlinked file).
    fn follow(&mut self, path: &Path) -> Result<Stamp> {
        let now = path_stamp(path)?;
        if !now.same_file(&self.seen) {
            tracing::warn!(
                "cassette log {} was replaced by another file; re-reading it from the start",
                path.display()
            );
            *self = State::open(path, Create::Never)?;
        }
        Ok(now)
    }

    /// Takes the exclusive lock on the file the path names, following a replacement that
    /// happened while waiting for it.
    fn lock_for_writing(&mut self, path: &Path) -> Result<Lock> {
        loop {
            self.follow(path)?;
            let lock = Lock::exclusive(self.file.clone(), path)?;
            if path_stamp(path)?.same_file(&self.seen) {
                return Ok(lock);
            }
        }
    }

    /// Reads whatever complete lines were appended since the last look (by us or by other
    /// processes) into the index; re-reads the whole file when it was rewritten rather than
    /// appended to. Call with the file lock held, so no writer is mid-line.
    fn catch_up(&mut self, path: &Path) -> Result<()> {
        let now = platform::stat_file(&self.file)
            .map(Stamp::of)
            .map_err(|source| io_error("reading", path, source))?;
        if now == self.seen {
            return Ok(());
        }
        let len = now.len;
        if self.indexed_to > 0 && self.rewritten(path, &now)? {
            // Someone truncated or rewrote the log behind our back: start over.
            tracing::warn!(
                "cassette log {} was rewritten; re-reading it from the start",
                path.display()
            );
            self.index.clear();
            self.damaged.clear();
            self.indexed_to = 0;
            self.lines = 0;
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
                self.truncated_line(path, offset);
                break;
            }
            self.index_line(path, offset, &line);
            self.lines += 1;
            offset += n as u64;
        }
        self.indexed_to = offset;
        self.seen = now;
        self.remember_tail(path)
    }

    /// Whether the file changed other than by lines appended after what was indexed: it shrank,
    /// it was touched without growing, or the bytes before the indexed end are not the ones
    /// indexed.
    fn rewritten(&self, path: &Path, now: &Stamp) -> Result<bool> {
        if now.len < self.indexed_to || now.len == self.seen.len {
            return Ok(true);
        }
        let mut tail = vec![0; self.tail.len()];
        let start = self.indexed_to - tail.len() as u64;
        platform::read_exact_at(&self.file, &mut tail, start)
            .map_err(|source| io_error("reading", path, source))?;
        Ok(tail != self.tail)
    }

    fn remember_tail(&mut self, path: &Path) -> Result<()> {
        let start = self.indexed_to.saturating_sub(TAIL);
        self.tail.resize((self.indexed_to - start) as usize, 0);
        platform::read_exact_at(&self.file, &mut self.tail, start)
            .map_err(|source| io_error("reading", path, source))
    }

    fn truncated_line(&mut self, path: &Path, offset: u64) {
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
        self.damage(
            offset,
            "truncated last line: a writer stopped mid-write, so its cassette was not recorded"
                .to_owned(),
        );
    }

    fn damage(&mut self, offset: u64, reason: String) {
        let line = self.lines + 1;
        self.damaged.insert(
            offset,
            DamagedLine {
                line,
                offset,
                reason,
            },
        );
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
            Ok((key, _)) => {
                tracing::warn!(
                    "skipping line at byte {offset} of cassette log {}: key {key} has neither \
                     `cassette` nor `deleted`",
                    path.display()
                );
                self.damage(
                    offset,
                    format!("key {key} has neither `cassette` nor `deleted`"),
                );
            }
            Err(reason) => {
                tracing::warn!(
                    "skipping damaged line at byte {offset} of cassette log {}: {reason}",
                    path.display()
                );
                self.damage(offset, reason);
            }
        }
    }

    /// Appends one whole line and returns the offset it starts at. Call with the exclusive lock
    /// held and after `catch_up`, so the file ends at `seen.len`.
    fn write_line(&mut self, path: &Path, line: &[u8]) -> Result<u64> {
        let mut start = self.seen.len;
        let mut buf = Vec::new();
        let terminated = self.indexed_to < self.seen.len;
        if terminated {
            // A truncated line from a dead writer: end it so that ours starts on a fresh line.
            buf.push(b'\n');
            start += 1;
        }
        buf.extend_from_slice(line);
        (&*self.file)
            .write_all(&buf)
            .and_then(|()| self.file.sync_data())
            .map_err(|source| io_error("appending to", path, source))?;
        // Under the exclusive lock nobody else appended: the file is what was indexed plus our
        // line. (After a failed write the old stamp stays, so the next look re-reads.)
        self.indexed_to = start + line.len() as u64;
        self.lines += 1 + u64::from(terminated);
        self.seen = platform::stat_file(&self.file)
            .map(Stamp::of)
            .map_err(|source| io_error("reading", path, source))?;
        self.remember_tail(path)?;
        Ok(start)
    }

    /// See [`JsonlStore::compact`]. The exclusive lock is held from the catch-up to the rename,
    /// so the new log holds every line any writer appended.
    fn compact(&mut self, path: &Path) -> Result<Compaction> {
        let _lock = self.lock_for_writing(path)?;
        self.catch_up(path)?;
        let bytes_before = self.seen.len;
        let lines_before = self.lines + u64::from(self.indexed_to < self.seen.len);
        let dropped_damaged = self.damaged.len();
        let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) => dir.to_owned(),
            None => PathBuf::from("."),
        };
        let name = path
            .file_name()
            .map_or_else(|| "log".into(), |n| n.to_string_lossy().into_owned());
        let nonce = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let temp = dir.join(format!(".{name}.compact-{}-{nonce}", std::process::id()));
        let written = self.write_live(path, &temp);
        let bytes_after = match written {
            Ok(len) => len,
            Err(err) => {
                let _ = std::fs::remove_file(&temp);
                return Err(err);
            }
        };
        if let Err(source) = std::fs::rename(&temp, path) {
            let _ = std::fs::remove_file(&temp);
            return Err(io_error("replacing", path, source));
        }
        platform::sync_dir(&dir)
            .map_err(|source| io_error("syncing the folder of", path, source))?;
        let kept = self.index.len();
        // Follow the new log now; the lock on the old one is released when `_lock` drops.
        *self = State::open(path, Create::Never)?;
        Ok(Compaction {
            kept,
            dropped_lines: lines_before.saturating_sub(kept as u64),
            dropped_damaged,
            bytes_before,
            bytes_after,
        })
    }

    /// Writes each live key's cassette line to `temp` (a new file with the log's permissions),
    /// synced, and returns its length.
    fn write_live(&self, path: &Path, temp: &Path) -> Result<u64> {
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(temp)
            .map_err(|source| io_error("creating", temp, source))?;
        let permissions = self
            .file
            .metadata()
            .map_err(|source| io_error("reading", path, source))?
            .permissions();
        out.set_permissions(permissions)
            .map_err(|source| io_error("writing", temp, source))?;
        let mut writer = io::BufWriter::with_capacity(1 << 20, &mut out);
        let mut len = 0u64;
        for (key, &span) in &self.index {
            let cassette = self.read_cassette(path, span)?;
            let mut line = Vec::with_capacity(cassette.len() + 96);
            line.extend_from_slice(b"{\"key\":\"");
            line.extend_from_slice(key.as_str().as_bytes());
            line.extend_from_slice(b"\",\"cassette\":");
            line.extend_from_slice(&cassette);
            line.extend_from_slice(b"}\n");
            writer
                .write_all(&line)
                .map_err(|source| io_error("writing", temp, source))?;
            len += line.len() as u64;
        }
        writer
            .flush()
            .map_err(|source| io_error("writing", temp, source))?;
        drop(writer);
        out.sync_all()
            .map_err(|source| io_error("syncing", temp, source))?;
        Ok(len)
    }

    fn read_cassette(&self, path: &Path, (offset, len): (u64, u64)) -> Result<Vec<u8>> {
        let mut buf = vec![0; len as usize];
        // Where locks are mandatory, a read of the range a writer has locked would fail: wait
        // for its append instead. (flock locks only lockers, so Unix reads take none.)
        let _lock = if platform::MANDATORY_LOCKS {
            Some(Lock::shared(self.file.clone(), path)?)
        } else {
            None
        };
        platform::read_exact_at(&self.file, &mut buf, offset)
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

/// Catches up with the file the path names, but only when it changed: a hit costs one `stat`
/// and one positioned read.
fn refresh(inner: &Inner, state: &mut State) -> Result<()> {
    let now = state.follow(&inner.path)?;
    if now != state.seen {
        let _lock = Lock::shared(state.file.clone(), &inner.path)?;
        state.catch_up(&inner.path)?;
    }
    Ok(())
}

/// The stamp of the file `path` names now.
fn path_stamp(path: &Path) -> Result<Stamp> {
    match platform::stat_path(path) {
        Ok(stat) => Ok(Stamp::of(stat)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(vanished(path)),
        Err(source) => Err(io_error("reading", path, source)),
    }
}

fn vanished(path: &Path) -> Error {
    Error::Vanished {
        location: format!("jsonl://{}", path.display()),
        path: path.to_owned(),
    }
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

    /// No check on the way out beyond `get`'s own: the log's index points at whole lines.
    async fn get_raw(&self, key: &Key) -> Result<Option<Bytes>> {
        self.get(key).await
    }

    /// Appends the cassette as one line; it replaces any earlier line for the same key. A
    /// create appends nothing when the key is in the log (checked under the write lock).
    async fn put_with(&self, key: &Key, document: Bytes, mode: PutMode) -> Result<Created> {
        self.append(key, document, mode).await
    }

    async fn delete(&self, key: &Key) -> Result<()> {
        let key = key.clone();
        self.run(move |inner, state| {
            let _lock = state.lock_for_writing(&inner.path)?;
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

    /// Keeps no index segments: a miss reads the cassettes.
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
