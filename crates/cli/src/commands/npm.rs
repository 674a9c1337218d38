//! The binary standing in for the npm package's JavaScript shim: the package's postinstall step
//! puts it in place of `cassette-cli/bin/cassette.js` (docs/install.md, "Node"), and then it
//! keeps the shim's promise itself: `CASSETTE_BINARY` names the binary that runs.

use std::ffi::OsStr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The variable that, set to a binary's path, wins over the installed one (as in the shim).
const BINARY_ENV: &str = "CASSETTE_BINARY";

/// The file the npm package's `bin` entry names; only the postinstall step gives the binary
/// this name, so pip's, cargo's and the platform package's copies never redirect.
const SHIM_FILE: &str = "cassette.js";

/// When this process is the npm command and `CASSETTE_BINARY` names another binary, replaces
/// this process by that one with the same arguments, so its status, output and signals are
/// that binary's. Returns `None` when there is nothing to redirect; an override that does not
/// exist or cannot run is an error exit, never a quiet run of this binary instead.
pub(crate) fn redirect_to_override() -> Option<ExitCode> {
    // Read first: a start without the variable costs one lookup.
    let target = std::env::var_os(BINARY_ENV).filter(|v| !v.is_empty())?;
    // Canonical, because macOS reports the path as started (npm's `.bin/cassette` symlink),
    // not the file's own name.
    let me = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .ok()?;
    if me.file_name() != Some(OsStr::new(SHIM_FILE)) {
        return None;
    }
    let target = PathBuf::from(target);
    if !target.exists() {
        eprintln!("cassette: {BINARY_ENV} is set to {target:?}, which does not exist");
        return Some(ExitCode::from(crate::shared::runtime::EXIT_ERROR));
    }
    if is_same_file(&target, &me) {
        // Pointed at the npm command itself: running it again would only come back here.
        return None;
    }
    let error = Command::new(&target)
        .args(std::env::args_os().skip(1))
        .exec();
    eprintln!("cassette: cannot run {}: {error}", target.display());
    Some(ExitCode::from(crate::shared::runtime::EXIT_ERROR))
}

fn is_same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}
