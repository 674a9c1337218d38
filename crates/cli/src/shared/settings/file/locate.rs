//! Where `cassette.toml` is and whether it may be read: the nearest one in the working
//! directory or a parent, refused with its path when something of that name is not a regular
//! file (skipping it would silently read a parent's), refused when another user owns a file
//! found by searching (it decides where API keys are sent), and read at most 1 MiB, without
//! blocking on a FIFO or reading a device forever.

use super::FILE_NAME;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

/// The largest settings file read: a real one is a few kilobytes.
const MAX_FILE_SIZE: u64 = 1 << 20;

/// Reads a settings file that must be a regular file (a symlink to one is fine). Opened
/// without blocking and checked on the open descriptor, so a FIFO cannot hang the command and
/// a device (`/dev/zero`) cannot feed it forever.
pub(super) fn read_settings(path: &Path) -> anyhow::Result<String> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options
        .open(path)
        .with_context(|| format!("cannot read the settings file {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read the settings file {}", path.display()))?;
    if !meta.is_file() {
        bail!(not_a_file(path, &meta));
    }
    if meta.len() > MAX_FILE_SIZE {
        bail!(
            "the settings file {} is {} bytes; a settings file is at most {MAX_FILE_SIZE}",
            path.display(),
            meta.len()
        );
    }
    let mut text = String::new();
    file.take(MAX_FILE_SIZE + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read the settings file {}", path.display()))?;
    Ok(text)
}

/// The refusal of something named cassette.toml that is not a regular file.
fn not_a_file(path: &Path, meta: &std::fs::Metadata) -> String {
    let kind = file_kind(meta);
    format!(
        "{} is {kind}, not a settings file; cassette reads settings only from a regular file \
         (remove or rename it, or pass --config FILE or --no-config)",
        path.display()
    )
}

/// What a file system entry is, as a phrase.
fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    let kind = meta.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symlink to nothing"
    } else {
        "not a regular file"
    }
}

/// A file found by searching decides where API keys are sent, so it must be the user's own
/// (or root's): one planted in a shared parent folder such as /tmp by another user is refused,
/// as git refuses a repository another user owns. A file named explicitly is trusted.
#[cfg(unix)]
pub(super) fn check_owner(path: &Path) -> anyhow::Result<()> {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    owned_by(path, unsafe { libc::geteuid() })
}

/// Refuses `path` unless user `me` or root owns it.
#[cfg(unix)]
fn owned_by(path: &Path, me: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read the settings file {}", path.display()))?;
    if meta.uid() != me && meta.uid() != 0 {
        bail!(
            "{} belongs to another user (uid {}), and a settings file decides where API keys are sent; \
             cassette reads a cassette.toml it finds only when it is yours. Pass --config {} to use it \
             anyway, or --no-config to ignore it",
            path.display(),
            meta.uid(),
            path.display()
        );
    }
    Ok(())
}

#[cfg(not(unix))]
pub(super) fn check_owner(_path: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// The nearest `cassette.toml` in `dir` or a parent. Anything of that name that is not a
/// regular file (a directory, a FIFO, a symlink to a device or to nothing) is refused with its
/// path rather than skipped: skipping it would silently read a parent's file instead.
pub(super) fn find(dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    for candidate in dir.ancestors().map(|d| d.join(FILE_NAME)) {
        let Ok(entry) = std::fs::symlink_metadata(&candidate) else {
            continue;
        };
        let meta = if entry.file_type().is_symlink() {
            std::fs::metadata(&candidate).unwrap_or(entry)
        } else {
            entry
        };
        if !meta.is_file() {
            bail!(not_a_file(&candidate, &meta));
        }
        return Ok(Some(candidate));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_file_found_in_another_users_folder_is_refused() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(
            &path,
            "[routes.default]\nupstream = \"https://attacker.example\"\n",
        )
        .unwrap();
        // As root the file is made another user's; otherwise it already is, seen as user 4242.
        let owner = std::fs::metadata(&path).unwrap().uid();
        if owner == 0 {
            std::os::unix::fs::chown(&path, Some(4243), None).unwrap();
        }
        let err = owned_by(&path, 4242).unwrap_err().to_string();
        assert!(err.contains("belongs to another user"), "{err}");
        assert!(
            err.contains("--config") && err.contains("--no-config"),
            "{err}"
        );
        let owner = std::fs::metadata(&path).unwrap().uid();
        assert!(owned_by(&path, owner).is_ok());
        // Root's files are trusted, as the system's are.
        assert!(owned_by(Path::new("/"), 4242).is_ok());
    }

    #[test]
    fn the_nearest_file_is_found_from_a_subdirectory() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        let found = |d: &Path| find(d).unwrap();
        assert_eq!(found(&sub).filter(|p| p.starts_with(dir.path())), None);
        std::fs::write(dir.path().join(FILE_NAME), "").unwrap();
        assert_eq!(found(&sub), Some(dir.path().join(FILE_NAME)));
        std::fs::write(dir.path().join("a").join(FILE_NAME), "").unwrap();
        assert_eq!(found(&sub), Some(dir.path().join("a").join(FILE_NAME)));
        // A symlink to a regular file is a settings file.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path().join(FILE_NAME), sub.join(FILE_NAME)).unwrap();
            assert_eq!(found(&sub), Some(sub.join(FILE_NAME)));
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_cassette_toml_that_is_not_a_regular_file_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "mode = \"record\"\n").unwrap();
        type Make<'a> = &'a dyn Fn(&Path);
        let cases: [(&str, Make, &str); 4] = [
            ("dir", &|p| std::fs::create_dir(p).unwrap(), "a directory"),
            (
                "fifo",
                &|p| {
                    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
                    // SAFETY: a valid NUL-terminated path and mode.
                    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
                },
                "a FIFO",
            ),
            (
                "zero",
                &|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
                "a device",
            ),
            (
                "dangling",
                &|p| std::os::unix::fs::symlink("/nonexistent/x", p).unwrap(),
                "a symlink to nothing",
            ),
        ];
        for (name, make, kind) in cases {
            let sub = dir.path().join(name);
            std::fs::create_dir(&sub).unwrap();
            let path = sub.join(FILE_NAME);
            make(&path);
            let err = find(&sub).unwrap_err().to_string();
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(err.contains(kind), "{name}: {err}");
            // Named explicitly, it is refused too, without hanging on the FIFO or reading
            // the device forever.
            if name != "dangling" {
                let err = format!("{:#}", read_settings(&path).unwrap_err());
                assert!(
                    err.contains(&path.display().to_string()) && err.contains(kind),
                    "{err}"
                );
            }
        }
    }
}
