//! The usage log (`usage_log`, `--usage-log`, `CASSETTE_USAGE_LOG`): the file the recorder
//! appends the key of every cassette it serves or records to, for `cassette gc --unused`. Keys
//! are appended only to a file that is one (or will become one), whoever named it.

use anyhow::{bail, Context};

/// How much of an existing usage log is read to tell whether it is one.
const USAGE_LOG_PROBE: u64 = 64 << 10;

/// Refuses to append keys to a file that is not a usage log: something other than a regular
/// file (a FIFO would block, a device swallow), or a file whose lines are not keys (a
/// `.bashrc` reached through a symlink). A missing or empty file becomes one.
pub(crate) fn check_usage_log(path: &std::path::Path) -> anyhow::Result<()> {
    use std::io::Read;
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            // A link to nothing: appending would create the file it names, wherever that is.
            if let Ok(target) = std::fs::read_link(path) {
                bail!(
                    "the usage log {} is a symlink to {}, which does not exist, and cassette \
                     creates no file through a link; name the file itself",
                    path.display(),
                    target.display()
                );
            }
            return Ok(());
        }
        Err(err) => {
            return Err(err)
                .with_context(|| format!("cannot read the usage log {}", path.display()))
        }
    };
    if !meta.is_file() {
        bail!(
            "the usage log {} is not a regular file; name a file that cassette may create or \
             one it wrote before",
            path.display()
        );
    }
    let mut head = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(USAGE_LOG_PROBE).read_to_end(&mut head))
        .with_context(|| format!("cannot read the usage log {}", path.display()))?;
    let lines: Vec<&[u8]> = head.split(|b| *b == b'\n').collect();
    for (i, line) in lines.iter().enumerate() {
        let line = String::from_utf8_lossy(line);
        let line = line.trim();
        // The last line may be a key still being written, or cut by the probe's end.
        let last = i + 1 == lines.len();
        let fits = line.is_empty()
            || cassette_keying::Key::parse(line).is_some()
            || (last && is_hex_prefix(line));
        if !fits {
            bail!(
                "{} is not a usage log (line {} is not a cassette key), so no key is appended \
                 to it; name a new file or one cassette wrote",
                path.display(),
                i + 1
            );
        }
    }
    Ok(())
}

/// Whether `line` could be the beginning of a key still being written.
fn is_hex_prefix(line: &str) -> bool {
    line.len() < 64 && line.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_appended_only_to_a_usage_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        // Missing, empty, or keys only (the last line possibly half written): a usage log.
        assert!(check_usage_log(&path("new.log")).is_ok());
        std::fs::write(path("empty.log"), "").unwrap();
        assert!(check_usage_log(&path("empty.log")).is_ok());
        let key = "ab".repeat(32);
        std::fs::write(path("used.log"), format!("{key}\n{key}\n\nabab")).unwrap();
        assert!(check_usage_log(&path("used.log")).is_ok());
        // Anything else is refused, naming the file.
        std::fs::write(path(".bashrc"), "export PATH=$HOME/bin:$PATH\n").unwrap();
        std::fs::write(path("half.log"), format!("{key}\nalias ls='rm -rf'")).unwrap();
        std::fs::create_dir(path("dir")).unwrap();
        for name in [".bashrc", "half.log", "dir"] {
            let err = format!("{:#}", check_usage_log(&path(name)).unwrap_err());
            assert!(err.contains(&path(name).display().to_string()), "{err}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(path(".bashrc"), path("link.log")).unwrap();
            let err = format!("{:#}", check_usage_log(&path("link.log")).unwrap_err());
            assert!(err.contains("not a usage log"), "{err}");
            let err = format!(
                "{:#}",
                check_usage_log(std::path::Path::new("/dev/null")).unwrap_err()
            );
            assert!(err.contains("not a regular file"), "{err}");
            // A link to nothing would have the file it names created, wherever that is.
            std::os::unix::fs::symlink(path("gone/.bash_logout"), path("dangling.log")).unwrap();
            let err = format!("{:#}", check_usage_log(&path("dangling.log")).unwrap_err());
            assert!(err.contains("which does not exist"), "{err}");
            assert!(!path("gone").exists());
        }
    }
}
