//! `file://PATH`: one pretty-printed JSON file per cassette, sharded by the key's first two
//! characters (`PATH/ab/abcdef….json`), written atomically so it can live in a git repository.
//!
//! Every write goes to a temporary file beside its target (`.KEY.json.PID.N.tmp`, same folder so
//! that the rename stays on one filesystem), is flushed with `fsync`, then renamed (overwrite) or
//! hard-linked (create-only, which fails atomically when the target exists) into place. A reader
//! never sees a partial file; a writer killed mid-put leaves at most a hidden temp file, which
//! `get` and `list` ignore and `list` deletes once it is older than [`STALE_TEMP_AGE`].

use crate::key::{is_shard_name, shard, stored_key, validate_prefix};
use crate::segment::SEGMENT_FOLDER;
use crate::{json, Created, Error, Key, PutMode, Result, SegmentName, Store};
use async_trait::async_trait;
use bytes::Bytes;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How old a stray temp file must be before `list` deletes it: far longer than any put takes, so
/// a write in progress in another process is never removed under it.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(10 * 60);

/// Folders beside the shards that belong to the store itself (the index segments).
pub const SIDE_FOLDERS: &[&str] = &[SEGMENT_FOLDER];

/// Distinguishes temp files of concurrent puts within one process (the PID covers processes).
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A folder of cassette files.
#[derive(Debug, Clone)]
pub struct FileStore {
    root: Arc<PathBuf>,
}

impl FileStore {
    /// Opens the folder at `root`, creating it when missing.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(|source| io_error("creating folder", &root, source))?;
        Ok(Self {
            root: Arc::new(root),
        })
    }

    /// The store's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file a key is stored in (whether or not it exists), for messages and tooling.
    pub fn path_for(&self, key: &Key) -> PathBuf {
        self.root.join(shard(key)).join(format!("{key}.json"))
    }

    /// Deletes temp files left by interrupted writers that are older than `older_than`, and
    /// returns how many were removed. `list` does this with [`STALE_TEMP_AGE`].
    pub fn remove_stale_temp_files(&self, older_than: Duration) -> Result<usize> {
        let mut removed = 0;
        for dir in self.shard_dirs("")? {
            for entry in read_dir(&dir)? {
                let path = entry.path();
                if is_temp_name(&entry.file_name().to_string_lossy()) && is_older(&path, older_than)
                {
                    // Another cleaner may have won the race; the file is gone either way.
                    if fs::remove_file(&path).is_ok() {
                        removed += 1;
                    }
                }
            }
        }
        Ok(removed)
    }

    /// Files and folders in the store's folder that are not cassettes of this layout (a flat
    /// `ROOT/<name>.json`, a `.yaml` tape of another tool, a misplaced key), sorted, so that a
    /// listing can say what it skipped instead of ignoring it. Hidden names (a `.git` folder,
    /// temp files of interrupted writes) and the [`SIDE_FOLDERS`] are not reported.
    pub fn unrecognised(&self) -> Result<Vec<PathBuf>> {
        let mut found = Vec::new();
        for entry in read_dir(&self.root)? {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            if name.starts_with('.') || (is_dir && SIDE_FOLDERS.contains(&name.as_ref())) {
                continue;
            }
            if !(is_dir && is_shard_name(&name) && name.len() == 2) {
                found.push(entry.path());
                continue;
            }
            for inner in read_dir(&entry.path())? {
                let file = inner.file_name();
                let file = file.to_string_lossy();
                let ours = file
                    .strip_suffix(".json")
                    .and_then(|n| stored_key(n, ""))
                    .is_some_and(|key| shard(&key) == name);
                if !ours && !file.starts_with('.') {
                    found.push(inner.path());
                }
            }
        }
        found.sort();
        Ok(found)
    }

    /// What the index folder holds that is not a segment this store reads: symlinks (never
    /// followed), folders, and files whose names are no segment names; hidden temp files of
    /// interrupted writes aside. Sorted, so `cassette index` can say what it kept.
    pub fn foreign_segments(&self) -> Result<Vec<PathBuf>> {
        let mut found: Vec<PathBuf> = read_dir(&self.root.join(SEGMENT_FOLDER))?
            .iter()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                let regular = e.file_type().is_ok_and(|t| t.is_file());
                let segment = regular && SegmentName::parse(&name).is_some();
                !(name.starts_with('.') || segment)
            })
            .map(fs::DirEntry::path)
            .collect();
        found.sort();
        Ok(found)
    }

    fn shard_dirs(&self, prefix: &str) -> Result<Vec<PathBuf>> {
        if prefix.len() >= 2 {
            let dir = self.root.join(&prefix[..2]);
            return Ok(if dir.is_dir() { vec![dir] } else { Vec::new() });
        }
        let mut dirs = Vec::new();
        for entry in read_dir(&self.root)? {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if is_shard_name(&name)
                && name.starts_with(prefix)
                && entry.file_type().map(|t| t.is_dir()).unwrap_or(false)
            {
                dirs.push(entry.path());
            }
        }
        Ok(dirs)
    }

    fn list_blocking(&self, prefix: &str) -> Result<Vec<Key>> {
        let mut keys = Vec::new();
        for dir in self.shard_dirs(prefix)? {
            let shard_name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
            for entry in read_dir(&dir)? {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if is_temp_name(&name) {
                    if is_older(&entry.path(), STALE_TEMP_AGE) {
                        let _ = fs::remove_file(entry.path());
                    }
                    continue;
                }
                let Some(key) = name
                    .strip_suffix(".json")
                    .and_then(|n| stored_key(n, prefix))
                else {
                    continue;
                };
                if shard_name.as_deref() == Some(shard(&key)) {
                    keys.push(key);
                }
            }
        }
        keys.sort_unstable();
        Ok(keys)
    }

    fn read_blocking(path: &Path) -> Result<Option<Bytes>> {
        match fs::read(path) {
            Ok(bytes) => Ok(Some(Bytes::from(bytes))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(io_error("reading", path, source)),
        }
    }

    /// The file a segment is stored in: `ROOT/_index/NAME`.
    fn segment_path(&self, name: &SegmentName) -> PathBuf {
        self.root.join(SEGMENT_FOLDER).join(name.as_str())
    }

    fn write_blocking(&self, path: &Path, document: &[u8], mode: PutMode) -> Result<Created> {
        let dir = path.parent().unwrap_or(&self.root);
        fs::create_dir_all(dir).map_err(|source| io_error("creating folder", dir, source))?;
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let temp = dir.join(format!(
            ".{file_name}.{}.{}.tmp",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let result = write_temp(&temp, document).and_then(|()| match mode {
            PutMode::Overwrite => fs::rename(&temp, path)
                .map(|()| Created::Won)
                .map_err(|source| io_error("renaming into place", path, source)),
            // A hard link fails atomically when the target exists, even across processes,
            // where an exists-check followed by a rename would let two writers both win.
            PutMode::Create => match fs::hard_link(&temp, path) {
                Ok(()) => Ok(Created::Won),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(Created::AlreadyExists),
                Err(source) => Err(io_error("linking into place", path, source)),
            },
        });
        if !(matches!(mode, PutMode::Overwrite) && result.is_ok()) {
            // After a create (won or lost) or any failure the temp file is no longer needed.
            let _ = fs::remove_file(&temp);
        }
        result
    }

    async fn write(&self, key: &Key, document: Bytes, mode: PutMode) -> Result<Created> {
        let path = self.path_for(key);
        json::validate(&document).map_err(|reason| Error::InvalidDocument {
            location: self.location(),
            key: key.clone(),
            reason,
        })?;
        let this = self.clone();
        blocking("file", self.location(), move || {
            this.write_blocking(&path, &json::pretty_cow(&document), mode)
        })
        .await
    }
}

fn write_temp(temp: &Path, document: &[u8]) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(|source| io_error("creating temp file", temp, source))?;
    file.write_all(document)
        .map_err(|source| io_error("writing", temp, source))?;
    // Without the fsync a crash after the rename could leave an empty file under the real name.
    File::sync_all(&file).map_err(|source| io_error("flushing", temp, source))
}

/// Whether `name` is one of this store's own temp files, `.KEY.json.PID.N.tmp`: nothing else
/// in a shard folder is ever deleted, whatever its name (a user's `.notes.tmp` stays).
fn is_temp_name(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix('.')
        .and_then(|rest| rest.strip_suffix(".tmp"))
    else {
        return false;
    };
    let mut parts = rest.split('.');
    let (Some(key), Some("json"), Some(pid), Some(n), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    Key::parse(key).is_some() && digits(pid) && digits(n)
}

fn is_older(path: &Path, age: Duration) -> bool {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .is_some_and(|elapsed| elapsed >= age)
}

fn read_dir(dir: &Path) -> Result<Vec<fs::DirEntry>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        // A shard folder removed by someone else between listing and reading holds nothing.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(io_error("listing", dir, source)),
    };
    entries
        .collect::<io::Result<Vec<_>>>()
        .map_err(|source| io_error("listing", dir, source))
}

fn io_error(action: &'static str, path: &Path, source: io::Error) -> Error {
    Error::Io {
        store: "file",
        action,
        path: path.to_owned(),
        source,
    }
}

/// Runs filesystem work off the async executor, so a slow disk does not stall other requests.
pub(crate) async fn blocking<T: Send + 'static>(
    store: &'static str,
    location: String,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Generic {
            store,
            location,
            source: Box::new(e),
        })?
}

impl fmt::Display for FileStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "file://{}", self.root.display())
    }
}

#[async_trait]
impl Store for FileStore {
    /// Reads on the calling thread, as sled's reads and nginx's static files do: a cassette is
    /// one open and one read of a few kilobytes, mostly from the page cache, and handing that
    /// to the blocking pool and back cost more than the read (it was most of a replay hit's
    /// latency on one connection). Writes, which wait for the disk (fsync), stay off the
    /// executor.
    async fn get(&self, key: &Key) -> Result<Option<Bytes>> {
        let path = self.path_for(key);
        let Some(bytes) = Self::read_blocking(&path)? else {
            return Ok(None);
        };
        json::validate(&bytes).map_err(|reason| Error::Corrupt {
            location: path.display().to_string(),
            key: key.clone(),
            reason,
        })?;
        Ok(Some(bytes))
    }

    /// The file's bytes without the JSON check (see [`Store::get_raw`]).
    async fn get_raw(&self, key: &Key) -> Result<Option<Bytes>> {
        Self::read_blocking(&self.path_for(key))
    }

    /// Stores the document pretty-printed with a trailing newline (member order, numbers and
    /// strings kept exactly), atomically: an overwrite renames over any previous file, a
    /// create hard-links, which fails when the file exists.
    async fn put_with(&self, key: &Key, document: Bytes, mode: PutMode) -> Result<Created> {
        self.write(key, document, mode).await
    }

    async fn delete(&self, key: &Key) -> Result<()> {
        let path = self.path_for(key);
        blocking("file", self.location(), move || remove_if_present(&path)).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<Key>> {
        validate_prefix(prefix)?;
        let (this, prefix) = (self.clone(), prefix.to_owned());
        blocking("file", self.location(), move || this.list_blocking(&prefix)).await
    }

    fn location(&self) -> String {
        self.to_string()
    }

    fn keeps_segments(&self) -> bool {
        true
    }

    /// Written like a create-only cassette (temp file, fsync, hard link), but kept as it is:
    /// a segment is opaque bytes, not necessarily one JSON document.
    async fn put_segment(&self, name: &SegmentName, document: Bytes) -> Result<Created> {
        let (this, path) = (self.clone(), self.segment_path(name));
        blocking("file", self.location(), move || {
            this.write_blocking(&path, &document, PutMode::Create)
        })
        .await
    }

    /// A segment is a regular file of the index folder: a symlink there is not followed (it
    /// could point anywhere on the machine), and reads as no segment.
    async fn get_segment(&self, name: &SegmentName) -> Result<Option<Bytes>> {
        let path = self.segment_path(name);
        blocking("file", self.location(), move || {
            match read_no_follow(&path) {
                Ok(bytes) => Ok(Some(Bytes::from(bytes))),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(_) if is_symlink(&path) => Ok(None),
                Err(source) => Err(io_error("reading", &path, source)),
            }
        })
        .await
    }

    /// The regular files of the index folder with segment names; symlinks, folders and other
    /// names are not segments (see [`FileStore::foreign_segments`]).
    async fn list_segments(&self) -> Result<Vec<SegmentName>> {
        let dir = self.root.join(SEGMENT_FOLDER);
        blocking("file", self.location(), move || {
            let mut names: Vec<SegmentName> = read_dir(&dir)?
                .iter()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter_map(|e| SegmentName::parse(&e.file_name().to_string_lossy()))
                .collect();
            names.sort();
            Ok(names)
        })
        .await
    }

    async fn delete_segment(&self, name: &SegmentName) -> Result<()> {
        let path = self.segment_path(name);
        blocking("file", self.location(), move || remove_if_present(&path)).await
    }
}

/// Reads a file without following a symlink in its place.
fn read_no_follow(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    let mut file = options.open(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn is_symlink(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Deletes `path`; one already gone is deleted too (deletes are idempotent, like S3's).
fn remove_if_present(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_error("deleting", path, e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::is_temp_name;

    #[test]
    fn only_our_own_temp_files_are_temp_files() {
        let key = "ab".repeat(32);
        assert!(is_temp_name(&format!(".{key}.json.1234.0.tmp")));
        for other in [
            ".notes.tmp".to_owned(),
            ".tmp".to_owned(),
            format!(".{key}.json.tmp"),
            format!(".{key}.json.12x.0.tmp"),
            format!(".{key}.json.1.2.3.tmp"),
            format!(".{}.json.1.2.tmp", "AB".repeat(32)),
            format!("{key}.json.1.2.tmp"),
            format!(".{key}.json.1.2.tmp.swp"),
        ] {
            assert!(!is_temp_name(&other), "{other}");
        }
    }
}
