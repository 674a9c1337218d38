//! Where reviews and reports go: files written whole or not at all (a temporary file renamed
//! over the target, so a reader never sees half a report and a failed write leaves the old one),
//! and the GitHub Actions step summary (`GITHUB_STEP_SUMMARY`), appended to.

use anyhow::Context;
use std::io::Write as _;
use std::path::Path;

/// The variable GitHub Actions sets to the file a step's Markdown summary is appended to.
pub(crate) const STEP_SUMMARY_ENV: &str = "GITHUB_STEP_SUMMARY";

/// Writes a file whole or not at all, creating its folder.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the folder {}", dir.display()))?;
    }
    let file_name = path
        .file_name()
        .with_context(|| format!("{} is not a file path", path.display()))?;
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    let written = std::fs::write(&tmp, bytes)
        .with_context(|| format!("cannot write {}", tmp.display()))
        .and_then(|()| {
            std::fs::rename(&tmp, path)
                .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))
        });
    if written.is_err() {
        // Leave no temporary file behind.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Appends `markdown` to the step summary when `GITHUB_STEP_SUMMARY` names one, warning (not
/// failing) when it cannot: the summary is a courtesy, the exit status is the verdict.
pub(crate) fn append_step_summary(command: &str, markdown: &str) {
    let Some(path) = std::env::var_os(STEP_SUMMARY_ENV).filter(|p| !p.is_empty()) else {
        return;
    };
    let path = Path::new(&path);
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        // One write on an O_APPEND file: a parallel step's summary is not cut into.
        .and_then(|mut file| file.write_all(format!("{markdown}\n").as_bytes()));
    if let Err(err) = appended {
        eprintln!(
            "cassette {command}: warning: cannot append to the step summary {} ({STEP_SUMMARY_ENV}): {err}",
            path.display()
        );
    }
}
