//! What the JSON Lines log needs from the operating system, on Unix and on Windows: which file
//! a handle or a path is (to notice a log replaced under it), and whole reads at an offset.
//!
//! Windows differs in three ways the log has to know about. A file's identity comes only from a
//! handle (its volume serial number and 128-bit file id), so a path is opened to be identified.
//! A positioned read moves the handle's file position; the log never depends on it (every
//! sequential read seeks first, and appends go to the end of the file whatever the position).
//! And byte-range locks are mandatory: a read of a range another process has locked fails, so
//! the log takes its shared lock to read a cassette there ([`MANDATORY_LOCKS`]).

/// Which file: device and inode on Unix, volume serial number and file id on Windows. Two equal
/// ids name the same file while either is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct FileId {
    volume: u64,
    file: u128,
}

/// Whether another process's lock makes an unlocked read fail, rather than only other lockers
/// wait (Windows' `LockFileEx` locks are mandatory, Unix's `flock` advisory).
pub(super) const MANDATORY_LOCKS: bool = cfg!(windows);

pub(super) use imp::{read_exact_at, stat_file, stat_path, sync_dir};

#[cfg(unix)]
mod imp {
    use super::FileId;
    use std::fs::{File, Metadata};
    use std::io;
    use std::os::unix::fs::{FileExt as _, MetadataExt as _};
    use std::path::Path;

    /// The identity and metadata of an open file.
    pub(crate) fn stat_file(file: &File) -> io::Result<(FileId, Metadata)> {
        let meta = file.metadata()?;
        Ok((id(&meta), meta))
    }

    /// The identity and metadata of the file a path names now (one `stat`).
    pub(crate) fn stat_path(path: &Path) -> io::Result<(FileId, Metadata)> {
        let meta = std::fs::metadata(path)?;
        Ok((id(&meta), meta))
    }

    fn id(meta: &Metadata) -> FileId {
        FileId {
            volume: meta.dev(),
            file: u128::from(meta.ino()),
        }
    }

    /// Fills `buf` from `offset` (`pread`), or fails with `UnexpectedEof`.
    pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
        file.read_exact_at(buf, offset)
    }

    /// Makes a rename in `dir` durable (the folder's entry is synced like a file's data).
    pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

#[cfg(windows)]
mod imp {
    use super::FileId;
    use std::fs::{File, Metadata, OpenOptions};
    use std::io;
    use std::os::windows::fs::FileExt as _;
    use std::os::windows::io::AsRawHandle as _;
    use std::path::Path;
    use windows_sys::Win32::Foundation::{
        ERROR_INVALID_FUNCTION, ERROR_INVALID_PARAMETER, ERROR_NOT_SUPPORTED,
    };
    use windows_sys::Win32::Storage::FileSystem::{
        FileIdInfo, GetFileInformationByHandle, GetFileInformationByHandleEx,
        BY_HANDLE_FILE_INFORMATION, FILE_ID_INFO,
    };

    /// The identity and metadata of an open file.
    pub(crate) fn stat_file(file: &File) -> io::Result<(FileId, Metadata)> {
        Ok((id(file)?, file.metadata()?))
    }

    /// Windows makes a rename durable with the file system's own journal; a folder cannot be
    /// opened as a file to sync it.
    pub(crate) fn sync_dir(_dir: &Path) -> io::Result<()> {
        Ok(())
    }

    /// The identity and metadata of the file a path names now. Windows identifies files only
    /// through a handle; this one is opened with std's default sharing (read, write and
    /// delete), so it stops no other process from appending to, renaming or deleting the log.
    pub(crate) fn stat_path(path: &Path) -> io::Result<(FileId, Metadata)> {
        stat_file(&OpenOptions::new().read(true).open(path)?)
    }

    /// The 128-bit file id (`FileIdInfo`): on ReFS the older 64-bit file index is not unique.
    /// File systems without it (FAT, some network shares) fall back to that index.
    fn id(file: &File) -> io::Result<FileId> {
        let handle = file.as_raw_handle();
        let mut info = FILE_ID_INFO::default();
        // SAFETY: `handle` is open for the call (borrowed from `file`), and the buffer is a
        // FILE_ID_INFO of exactly the size passed, which is what the FileIdInfo class writes.
        let ok = unsafe {
            GetFileInformationByHandleEx(
                handle,
                FileIdInfo,
                (&raw mut info).cast(),
                size_of::<FILE_ID_INFO>() as u32,
            )
        };
        if ok != 0 {
            return Ok(FileId {
                volume: info.VolumeSerialNumber,
                file: u128::from_le_bytes(info.FileId.Identifier),
            });
        }
        let error = io::Error::last_os_error();
        let unsupported = [
            ERROR_INVALID_PARAMETER,
            ERROR_INVALID_FUNCTION,
            ERROR_NOT_SUPPORTED,
        ]
        .iter()
        .any(|&code| error.raw_os_error() == Some(code as i32));
        if !unsupported {
            return Err(error);
        }
        let mut info = BY_HANDLE_FILE_INFORMATION::default();
        // SAFETY: as above; the function writes one BY_HANDLE_FILE_INFORMATION.
        if unsafe { GetFileInformationByHandle(handle, &mut info) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(FileId {
            volume: u64::from(info.dwVolumeSerialNumber),
            file: (u128::from(info.nFileIndexHigh) << 32) | u128::from(info.nFileIndexLow),
        })
    }

    /// Fills `buf` from `offset`, or fails with `UnexpectedEof`. `seek_read` may read less
    /// than asked, and returns 0 at the end of the file.
    pub(crate) fn read_exact_at(
        file: &File,
        mut buf: &mut [u8],
        mut offset: u64,
    ) -> io::Result<()> {
        while !buf.is_empty() {
            match file.seek_read(buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file ended before the bytes indexed",
                    ))
                }
                Ok(n) => {
                    buf = &mut std::mem::take(&mut buf)[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

// Only these two families have the calls above; anything else should fail to build here, not
// later in jsonl.rs.
#[cfg(not(any(unix, windows)))]
compile_error!("the jsonl:// store supports Unix and Windows only");

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::{self, Write};

    #[test]
    fn a_file_is_the_same_through_its_handle_its_path_and_a_hard_link() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let file = File::create(&path).unwrap();
        let (by_handle, _) = stat_file(&file).unwrap();
        let (by_path, _) = stat_path(&path).unwrap();
        assert_eq!(by_handle, by_path);
        std::fs::hard_link(&path, dir.path().join("link.jsonl")).unwrap();
        assert_eq!(
            stat_path(&dir.path().join("link.jsonl")).unwrap().0,
            by_handle
        );
    }

    #[test]
    fn a_file_renamed_over_the_path_is_another_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let first = File::create(&path).unwrap();
        let (before, _) = stat_file(&first).unwrap();
        let other = dir.path().join("other.jsonl");
        std::fs::write(&other, b"{}\n").unwrap();
        // `first` stays open, so its id cannot be reused for the replacement.
        std::fs::rename(&other, &path).unwrap();
        let (after, meta) = stat_path(&path).unwrap();
        assert_ne!(before, after);
        assert_eq!(meta.len(), 3);
        assert_eq!(stat_file(&first).unwrap().0, before);
    }

    #[test]
    fn a_missing_path_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = stat_path(&dir.path().join("nope.jsonl")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn reads_at_an_offset_fill_the_buffer_or_fail_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .unwrap();
        file.write_all(b"0123456789").unwrap();
        let mut buf = [0; 4];
        read_exact_at(&file, &mut buf, 3).unwrap();
        assert_eq!(&buf, b"3456");
        // A read moves no append: the next write still lands at the end.
        file.write_all(b"ab").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"0123456789ab");
        let err = read_exact_at(&file, &mut buf, 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        read_exact_at(&file, &mut [], 100).unwrap();
    }
}
