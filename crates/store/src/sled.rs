//! `sled://PATH`: a sled database, the fast local cache of one process at a time.
//!
//! sled locks its database file for the whole life of the handle, so a second opener, in this
//! process or another, fails. sled reports that as a bare "could not acquire lock"; this module
//! turns it into [`Error::Locked`] naming the folder and, when it can be found, the holding
//! process: from the PID file every opener writes beside the database, checked against
//! `/proc/PID/fd`, or else by scanning `/proc/*/fd` for the database file.
//!
//! sled 0.34 has no read-only mode: `Config::open` opens its data file for writing (creating
//! it), takes an exclusive lock, writes its config file when missing, and its recovery may
//! write a new segment, so on a full disk (or a read-only file system) even reading fails
//! (`No space left on device`). [`SledStore::open_read_only`] therefore tries the database in
//! place, and when that fails for want of space or write access, copies its files to a fresh
//! folder under the temporary directory (or `/dev/shm`) and reads that snapshot; the database
//! itself is never written, and a snapshot refuses writes.

use crate::key::{stored_key, validate_prefix};
use crate::{Created, Error, Key, PutMode, Result, SegmentName, Store};
use async_trait::async_trait;
use bytes::Bytes;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long to wait for a lock held by a handle that is being closed.
const LOCK_GRACE: Duration = Duration::from_secs(1);

/// Written beside sled's own files by the process holding the database.
const PID_FILE: &str = "cassette-holder.pid";

/// A sled database of cassettes.
pub struct SledStore {
    path: PathBuf,
    // Declared before `snapshot`, so the database closes before its copy is removed.
    db: sled::Db,
    snapshot: Option<Snapshot>,
}

/// A copy of a database folder read instead of the database; removed when dropped.
#[derive(Debug)]
struct Snapshot {
    dir: PathBuf,
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl fmt::Debug for SledStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SledStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SledStore {
    /// Opens (creating when missing) the database folder at `path`; fails with
    /// [`Error::Locked`] when another handle holds it.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self> {
        let path = path.into();
        fs::create_dir_all(&path).map_err(|source| Error::Io {
            store: "sled",
            action: "creating folder",
            path: path.clone(),
            source,
        })?;
        let db = Self::open_locked(&path)?;
        // Best effort: the PID only improves the message a second opener gets.
        let _ = fs::write(path.join(PID_FILE), format!("{}\n", std::process::id()));
        Ok(Self {
            path,
            db,
            snapshot: None,
        })
    }

    /// Opens the existing database at `path` for reading, creating nothing: in place when
    /// sled can open it, else (a full disk, a read-only file system, no write permission) a
    /// snapshot copy of it, with a warning; such a store refuses writes. A database another
    /// process holds is [`Error::Locked`], as with [`SledStore::open`].
    pub fn open_read_only(path: impl Into<PathBuf>) -> Result<Self> {
        let path = path.into();
        if !path.join("db").is_file() {
            return Err(Error::Io {
                store: "sled",
                action: "opening",
                path: path.join("db"),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no sled database there"),
            });
        }
        // Opening in place on a full disk is not harmless: sled writes what it can before it
        // fails. So a disk short of room, or a database that cannot be written, is read from a
        // copy straight away, and the in-place attempt only covers what these checks miss.
        let why = match in_place_obstacle(&path) {
            Some(why) => why,
            None => match Self::open_locked(&path) {
                Ok(db) => {
                    return Ok(Self {
                        path,
                        db,
                        snapshot: None,
                    })
                }
                Err(Error::Generic { source, .. }) if cannot_write(source.as_ref()) => {
                    source.to_string()
                }
                Err(err) => return Err(err),
            },
        };
        Self::open_snapshot(path, &why)
    }

    /// Reads a snapshot copy of the database at `path`, which cannot be opened in place
    /// because of `why`.
    fn open_snapshot(path: PathBuf, why: &str) -> Result<Self> {
        let snapshot = copy_out(&path)?;
        tracing::warn!(
            "the sled database sled://{} cannot be opened in place ({why}); reading a snapshot \
             copy of it in {} instead (nothing is written to it)",
            path.display(),
            snapshot.dir.display()
        );
        let db = sled::open(&snapshot.dir).map_err(|e| sled_error(&snapshot.dir, e))?;
        Ok(Self {
            path,
            db,
            snapshot: Some(snapshot),
        })
    }

    /// Whether this handle reads a snapshot copy rather than the database itself.
    pub fn is_snapshot(&self) -> bool {
        self.snapshot.is_some()
    }

    /// Opens the database in place, waiting a moment for a lock that is being released.
    fn open_locked(path: &Path) -> Result<sled::Db> {
        // sled releases its lock from background threads shortly after the last handle is
        // dropped, so a holder that just closed (or exited) gets a moment before we give up.
        let deadline = Instant::now() + LOCK_GRACE;
        loop {
            match sled::open(path) {
                Ok(db) => return Ok(db),
                Err(sled::Error::Io(e)) if is_lock_error(&e) => {
                    if Instant::now() >= deadline {
                        return Err(Error::Locked {
                            location: format!("sled://{}", path.display()),
                            holder: find_holder(path),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(25));
                }
                Err(e) => return Err(sled_error(path, e)),
            }
        }
    }

    /// Refuses a write to a snapshot copy, which would be lost.
    fn writable(&self, key: &Key) -> Result<()> {
        match self.snapshot {
            None => Ok(()),
            Some(_) => Err(Error::ReadOnly {
                location: self.location(),
                key: key.clone(),
            }),
        }
    }

    /// The database folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn flush(&self) -> Result<()> {
        // Flushing per write makes a recorded cassette survive the recorder being killed;
        // sled would otherwise keep up to half a second of writes in memory. The blocking
        // `flush` runs off the executor: sled 0.34's `flush_async` can fail to wake its waiter
        // when several flushes overlap.
        let (db, path) = (self.db.clone(), self.path.clone());
        crate::fs::blocking("sled", self.location(), move || {
            db.flush().map(|_| ()).map_err(|e| sled_error(&path, e))
        })
        .await
    }
}

impl Drop for SledStore {
    fn drop(&mut self) {
        let pid_file = self.path.join(PID_FILE);
        if fs::read_to_string(&pid_file).is_ok_and(|s| s.trim() == std::process::id().to_string()) {
            let _ = fs::remove_file(pid_file);
        }
    }
}

/// Free space a database opened in place may need: sled can write a segment or two on open.
const MIN_FREE_IN_PLACE: u64 = 8 << 20;

/// Why the database at `path` cannot be opened in place without writing into trouble: its data
/// file cannot be opened for writing (a read-only file system, no permission), or its disk has
/// less than [`MIN_FREE_IN_PLACE`] free. Neither check writes anything.
fn in_place_obstacle(path: &Path) -> Option<String> {
    if let Err(err) = fs::OpenOptions::new().write(true).open(path.join("db")) {
        return Some(format!("its data file cannot be written: {err}"));
    }
    match fs2::available_space(path) {
        Ok(free) if free < MIN_FREE_IN_PLACE => Some(format!(
            "{free} bytes free on its disk, and sled may write more than that when it opens"
        )),
        _ => None,
    }
}

/// Whether sled failed to open a database for want of space or write access, which reading a
/// copy gets around.
fn cannot_write(error: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    let Some(sled::Error::Io(io)) = error.downcast_ref::<sled::Error>() else {
        return false;
    };
    matches!(
        io.raw_os_error(),
        Some(
            libc_errno::ENOSPC
                | libc_errno::EROFS
                | libc_errno::EDQUOT
                | libc_errno::EACCES
                | libc_errno::EPERM
        )
    ) || io.kind() == std::io::ErrorKind::PermissionDenied
}

/// The errno values of [`cannot_write`] (Linux numbering; other systems fall back to the
/// error kind).
mod libc_errno {
    pub(super) const EPERM: i32 = 1;
    pub(super) const EACCES: i32 = 13;
    pub(super) const ENOSPC: i32 = 28;
    pub(super) const EROFS: i32 = 30;
    pub(super) const EDQUOT: i32 = 122;
}

/// Copies the database folder to a fresh folder where there is room: the temporary directory,
/// else `/dev/shm`.
fn copy_out(path: &Path) -> Result<Snapshot> {
    let stamp = format!(
        "cassette-sled-snapshot-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let mut last = None;
    for base in [std::env::temp_dir(), PathBuf::from("/dev/shm")] {
        let snapshot = Snapshot {
            dir: base.join(&stamp),
        };
        match copy_dir(path, &snapshot.dir) {
            Ok(()) => return Ok(snapshot),
            Err(err) => last = Some(err),
        }
    }
    Err(Error::Io {
        store: "sled",
        action: "copying for reading (the database cannot be opened in place)",
        path: path.to_owned(),
        source: last.unwrap_or_else(|| std::io::Error::other("no folder to copy to")),
    })
}

/// Copies the files of a database folder (and its `blobs` folder), without the PID file.
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() && entry.file_name() != PID_FILE {
            fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn is_lock_error(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock || e.to_string().contains("could not acquire lock")
}

fn sled_error(path: &Path, e: sled::Error) -> Error {
    Error::Generic {
        store: "sled",
        location: format!("sled://{}", path.display()),
        source: Box::new(e),
    }
}

/// Names the process holding the database, as `pid N (program)`, when it can be found.
fn find_holder(path: &Path) -> Option<String> {
    let db_file = fs::canonicalize(path.join("db")).ok()?;
    let holds = |pid: u32| {
        fs::read_dir(format!("/proc/{pid}/fd"))
            .ok()
            .is_some_and(|fds| {
                fds.flatten()
                    .any(|fd| fs::read_link(fd.path()).is_ok_and(|t| t == db_file))
            })
    };
    let from_pid_file = fs::read_to_string(path.join(PID_FILE))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .filter(|&pid| holds(pid));
    let pid = from_pid_file.or_else(|| {
        fs::read_dir("/proc")
            .ok()?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|&pid| holds(pid))
    });
    // The PID file of a live holder we may not inspect (another user) is still the best hint.
    let pid = pid.or_else(|| {
        let pid = fs::read_to_string(path.join(PID_FILE))
            .ok()?
            .trim()
            .parse::<u32>()
            .ok()?;
        Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
    })?;
    // The program's name only (the kernel's `comm`, as `ps` shows it), never its command
    // line: arguments carry upstream URLs with passwords, tokens and API keys, and this message
    // ends up in CI logs.
    let program = fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|comm| comm.trim().to_owned())
        .unwrap_or_default();
    let this = if pid == std::process::id() {
        ", this process"
    } else {
        ""
    };
    Some(if program.is_empty() {
        format!("pid {pid}{this}")
    } else {
        format!("pid {pid} ({program}){this}")
    })
}

impl fmt::Display for SledStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sled://{}", self.path.display())?;
        if self.snapshot.is_some() {
            f.write_str(" (a read-only snapshot copy)")?;
        }
        Ok(())
    }
}

#[async_trait]
impl Store for SledStore {
    async fn get(&self, key: &Key) -> Result<Option<Bytes>> {
        let value = self
            .db
            .get(key.as_str())
            .map_err(|e| sled_error(&self.path, e))?;
        Ok(value.map(|v| Bytes::copy_from_slice(&v)))
    }

    /// Sled checks nothing on the way out.
    async fn get_raw(&self, key: &Key) -> Result<Option<Bytes>> {
        self.get(key).await
    }

    /// An overwrite inserts; a create is a compare-and-swap from nothing, atomic across the
    /// store's users.
    async fn put_with(&self, key: &Key, document: Bytes, mode: PutMode) -> Result<Created> {
        self.writable(key)?;
        match mode {
            PutMode::Overwrite => {
                self.db
                    .insert(key.as_str(), document.as_ref())
                    .map_err(|e| sled_error(&self.path, e))?;
            }
            PutMode::Create => {
                let swapped = self
                    .db
                    .compare_and_swap(key.as_str(), None as Option<&[u8]>, Some(document.as_ref()))
                    .map_err(|e| sled_error(&self.path, e))?;
                if swapped.is_err() {
                    return Ok(Created::AlreadyExists);
                }
            }
        }
        self.flush().await?;
        Ok(Created::Won)
    }

    async fn delete(&self, key: &Key) -> Result<()> {
        self.writable(key)?;
        if self
            .db
            .remove(key.as_str())
            .map_err(|e| sled_error(&self.path, e))?
            .is_some()
        {
            self.flush().await?;
        }
        Ok(())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<Key>> {
        validate_prefix(prefix)?;
        let mut keys = Vec::new();
        for entry in self.db.scan_prefix(prefix) {
            let key = entry.map_err(|e| sled_error(&self.path, e))?.0;
            // Only keys this store wrote are keys; anything else is not a cassette.
            if let Some(key) = std::str::from_utf8(&key)
                .ok()
                .and_then(|k| stored_key(k, prefix))
            {
                keys.push(key);
            }
        }
        Ok(keys)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreExt;

    fn key(c: char) -> Key {
        Key::parse(&c.to_string().repeat(64)).unwrap()
    }

    #[tokio::test]
    async fn a_snapshot_reads_the_database_refuses_writes_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        {
            let store = SledStore::open(&path).unwrap();
            store
                .put(&key('a'), Bytes::from_static(b"{}"))
                .await
                .unwrap();
        }
        let snapshot = SledStore::open_snapshot(path.clone(), "a test").unwrap();
        assert!(snapshot.is_snapshot());
        assert!(snapshot.location().contains("read-only snapshot"));
        assert_eq!(
            snapshot.get(&key('a')).await.unwrap().as_deref(),
            Some(&b"{}"[..])
        );
        for refused in [
            snapshot
                .put(&key('b'), Bytes::from_static(b"{}"))
                .await
                .err(),
            snapshot
                .put_if_absent(&key('b'), Bytes::from_static(b"{}"))
                .await
                .err(),
            snapshot.delete(&key('a')).await.err(),
        ] {
            assert!(
                matches!(refused, Some(Error::ReadOnly { .. })),
                "{refused:?}"
            );
        }
        let copy = snapshot.snapshot.as_ref().unwrap().dir.clone();
        assert!(copy.join("db").is_file());
        drop(snapshot);
        assert!(!copy.exists(), "the copy is removed");
        let store = SledStore::open(&path).unwrap();
        assert_eq!(store.list("").await.unwrap(), [key('a')]);
    }

    #[test]
    fn reading_a_missing_database_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none");
        let err = SledStore::open_read_only(&path).unwrap_err();
        assert!(
            matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
            "{err:?}"
        );
        assert!(!path.exists());
    }
}
