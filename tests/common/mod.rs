//! Helpers shared by the end-to-end tests: the `cassette` binary and running it.
//!
//! The root package owns the `cassette` binary, so cargo builds it before these tests and hands
//! its path over as `CARGO_BIN_EXE_cassette`. Set `CASSETTE_BIN=/path/to/cassette` to test a
//! binary built elsewhere (a release build, an installed copy) instead.
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

pub(crate) mod cli_env;
pub(crate) mod fake_llm;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The workspace root (where `Cargo.toml`, `examples/` and `docs/` are).
pub(crate) fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Path of the `cassette` binary under test.
pub(crate) fn cassette_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match std::env::var_os("CASSETTE_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => PathBuf::from(env!("CARGO_BIN_EXE_cassette")),
    })
}

/// A `Command` for the `cassette` binary, run from the workspace root so relative paths such
/// as `examples/requests/chat.json` work as in the README.
pub(crate) fn cassette() -> Command {
    let mut cmd = Command::new(cassette_bin());
    cmd.current_dir(workspace_root());
    // Tests run in parallel: only the test of the Ollama stand-in may take Ollama's default
    // address, or two tests' execs would answer each other's requests on it.
    cmd.env("CASSETTE_NO_OLLAMA_STAND_IN", "true");
    cmd
}

/// Standard output as text (lossy), for assertions and failure messages.
pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Standard error as text (lossy), for assertions and failure messages.
pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A proxy's one JSON ready line (`--ready json`), read from its stdout.
pub(crate) fn ready_line(stdout: &mut impl std::io::BufRead) -> serde_json::Value {
    let mut line = String::new();
    stdout.read_line(&mut line).expect("reading the ready line");
    serde_json::from_str(&line).expect("the ready line is JSON")
}

/// The port of the loopback URL in a proxy's ready line.
pub(crate) fn ready_port(ready: &serde_json::Value) -> u16 {
    ready["url"]
        .as_str()
        .expect("a url in the ready line")
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .expect("a port in the ready line's url")
}

/// One HTTP/1.1 request to the proxy at `127.0.0.1:port` on a fresh connection, with `headers`
/// (whole lines, each ending in `\r\n`) besides host, content type and length: its status and
/// body.
pub(crate) fn raw_request(
    port: u16,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{headers}content-type: \
         application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

/// `git ARGS` in `dir`, hermetic (no system or user configuration, a fixed identity, no
/// signing); panics with git's stderr when it fails, returns its stdout.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("running git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
