//! Issue 32, the Node preload under `cassette exec`: exec adds `--import <preload>` to
//! NODE_OPTIONS only for a Node that knows `--import` (18.18+, 19+). An older Node refuses to
//! start with it, so for one exec leaves NODE_OPTIONS as it was and says so in one line. The
//! Node asked is the command itself when it is a `node`, else the `node` on the command's
//! PATH; fake `node` scripts stand in for old and new releases here (tests/sdk/test_node_exec.py
//! runs the real 18, 20 and 22).
#![cfg(unix)]

mod common;

use common::cli_env::Workdir;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

const KEY: &str = "sk-test-NODEPROBEKEY0123456789abcdef";
const BEFORE: &str = "--max-old-space-size=256";

/// A `node` in `dir` that answers `--version` with `version` (writing its environment to
/// `probe-env` beside it) and otherwise prints NODE_OPTIONS as the command.
fn fake_node(work: &Workdir, dir: &str, version: &str) -> PathBuf {
    let node = work.write(
        &format!("{dir}/node"),
        &format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then env > \"$(dirname \"$0\")/probe-env\"; \
             echo {version}; else printf 'NODE_OPTIONS=%s' \"$NODE_OPTIONS\"; fi\n"
        ),
    );
    std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
    node
}

/// `cassette exec -- COMMAND...` with `bin` first on PATH and the preload named as the npm
/// shim names it.
fn exec(work: &Workdir, bin: &Path, command: &[&str]) -> Output {
    let register = work.write("register.js", "// the preload stands in\n");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    work.cassette()
        .env("PATH", path)
        .env("CASSETTE_NODE_REGISTER", &register)
        .env("NODE_OPTIONS", BEFORE)
        .env("OPENAI_API_KEY", KEY)
        .args(["exec", "--store", &work.store("tapes"), "--"])
        .args(command)
        .output()
        .expect("running cassette exec")
}

const SHOW: &[&str] = &["sh", "-c", "printf 'NODE_OPTIONS=%s' \"$NODE_OPTIONS\""];

#[test]
fn a_node_without_import_keeps_its_node_options_and_is_named() {
    let work = Workdir::new();
    let node = fake_node(&work, "old", "v18.17.1");
    let out = exec(&work, node.parent().unwrap(), SHOW);
    let (stdout, stderr) = (common::stdout(&out), common::stderr(&out));
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout, format!("NODE_OPTIONS={BEFORE}"), "{stderr}");
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("--import")).collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("v18.17.1") && said[0].contains("hard-coded vendor URL is not caught"),
        "{stderr}"
    );
    // The probe ran with PATH alone: no key of this exec reached whatever answered as node.
    let probed = std::fs::read_to_string(work.join("old/probe-env")).expect("node was asked");
    assert!(
        !probed.contains(KEY) && !probed.contains("OPENAI_API_KEY"),
        "{probed}"
    );
}

#[test]
fn a_node_with_import_gets_the_preload() {
    let work = Workdir::new();
    let node = fake_node(&work, "new", "v20.11.1");
    let out = exec(&work, node.parent().unwrap(), SHOW);
    let (stdout, stderr) = (common::stdout(&out), common::stderr(&out));
    assert!(out.status.success(), "{stderr}");
    let register = work.join("register.js");
    assert_eq!(
        stdout,
        format!("NODE_OPTIONS={BEFORE} --import \"{}\"", register.display()),
        "{stderr}"
    );
    assert!(!stderr.contains("has no --import"), "{stderr}");
}

#[test]
fn the_command_itself_is_asked_when_it_is_a_node() {
    let work = Workdir::new();
    // PATH finds a new Node, but the command runs an old one by its path.
    let new = fake_node(&work, "new", "v22.3.0");
    let old = fake_node(&work, "old", "v16.20.2");
    let out = exec(&work, new.parent().unwrap(), &[old.to_str().unwrap()]);
    let (stdout, stderr) = (common::stdout(&out), common::stderr(&out));
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout, format!("NODE_OPTIONS={BEFORE}"), "{stderr}");
    assert!(stderr.contains("v16.20.2"), "{stderr}");
    assert!(
        !work.join("new/probe-env").exists(),
        "PATH's node was asked"
    );
}
