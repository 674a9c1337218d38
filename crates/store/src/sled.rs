//! `sled://PATH`: a sled database, the fast local cache of one process at a time.
//!
//! sled locks its database file for the whole life of the handle, so a second opener, in this
//! process or another, fails. sled reports that as a bare "could not acquire lock"; this module
//! turns it into [`Error::Locked`] naming the folder and, when it can be found, the holding
//! process: from the PID file every opener writes beside the database, checked against
//! `/proc/PID/fd`, or else by scanning `/proc/*/fd` for the database file.

use crate::key::{stored_key, validate_prefix};
use crate::{Created, Error, Key, Result, Store};
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
    db: sled::Db,
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
        // sled releases its lock from background threads shortly after the last handle is
        // dropped, so a holder that just closed (or exited) gets a moment before we give up.
        let deadline = Instant::now() + LOCK_GRACE;
        let db = loop {
            match sled::open(&path) {
                Ok(db) => break db,
                Err(sled::Error::Io(e)) if is_lock_error(&e) => {
                    if Instant::now() >= deadline {
                        return Err(Error::Locked {
                            location: format!("sled://{}", path.display()),
                            holder: find_holder(&path),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(25));
                }
                Err(e) => return Err(sled_error(&path, e)),
            }
        };
        // Best effort: the PID only improves the message a second opener gets.
        let _ = fs::write(path.join(PID_FILE), format!("{}\n", std::process::id()));
        Ok(Self { path, db })
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
        write!(f, "sled://{}", self.path.display())
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

    async fn put(&self, key: &Key, document: Bytes) -> Result<()> {
        self.db
            .insert(key.as_str(), document.as_ref())
            .map_err(|e| sled_error(&self.path, e))?;
        self.flush().await
    }

    async fn put_if_absent(&self, key: &Key, document: Bytes) -> Result<Created> {
        let swapped = self
            .db
            .compare_and_swap(key.as_str(), None as Option<&[u8]>, Some(document.as_ref()))
            .map_err(|e| sled_error(&self.path, e))?;
        match swapped {
            Ok(()) => {
                self.flush().await?;
                Ok(Created::Won)
            }
            Err(_) => Ok(Created::AlreadyExists),
        }
    }

    async fn delete(&self, key: &Key) -> Result<()> {
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
}
