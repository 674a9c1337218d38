//! Helpers shared by the end-to-end tests: finding (and if need be building) the `cassette`
//! binary, and running it.
//!
//! The root package cannot use `env!("CARGO_BIN_EXE_cassette")`: that only exists for binaries
//! of the package under test, and `cassette` belongs to `cassette-cli`. So the first call builds
//! it with the same cargo that runs the tests (`cargo build -p cassette-cli --bin cassette
//! --message-format=json`) and takes the executable's path from cargo's own report, which
//! stays right under any `CARGO_TARGET_DIR`, `build.target-dir` or target triple. The build
//! happens once per test binary (`OnceLock`); later calls are free.
//!
//! Set `CASSETTE_BIN=/path/to/cassette` to test a binary built elsewhere (a release build, an
//! installed copy) instead.
//!
//! Use from a test file:
//!
//! ```ignore
//! mod common;
//!
//! let out = common::cassette().args(["key", "--path", "/v1/models"]).output().unwrap();
//! assert!(out.status.success(), "{}", common::stderr(&out));
//! ```

#![allow(dead_code)] // Each test binary uses its own subset of these helpers.

pub mod cli_env;
pub mod fake_llm;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The workspace root (where `Cargo.toml`, `examples/` and `docs/` are).
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Path of the `cassette` binary, built on first use. Panics with cargo's output when the
/// build fails, since no end-to-end test can run without it.
pub fn cassette_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match std::env::var_os("CASSETTE_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => build_cassette(),
    })
}

/// A `Command` for the `cassette` binary, run from the workspace root so relative paths such
/// as `examples/requests/chat.json` work as in the README.
pub fn cassette() -> Command {
    let mut cmd = Command::new(cassette_bin());
    cmd.current_dir(workspace_root());
    cmd
}

/// Standard output as text (lossy), for assertions and failure messages.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Standard error as text (lossy), for assertions and failure messages.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn build_cassette() -> PathBuf {
    let out = Command::new(env!("CARGO"))
        .current_dir(workspace_root())
        .args([
            "build",
            "-p",
            "cassette-cli",
            "--bin",
            "cassette",
            "--message-format=json-render-diagnostics",
        ])
        .output()
        .expect("running cargo to build the cassette binary");
    assert!(
        out.status.success(),
        "building the cassette binary failed:\n{}",
        stderr(&out)
    );
    // Cargo prints one JSON message per line; the artifact message of the `cassette` binary
    // carries its path.
    stdout(&out)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact" && msg["target"]["name"] == "cassette")
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported no executable for the cassette binary")
}
