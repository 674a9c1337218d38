//! A scratch folder to run `cassette` commands in, with the environment cleared of every
//! cassette setting so a developer's shell cannot change what a test sees.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Variables the cassette commands read; removed from every child.
const SETTINGS: &[&str] = &[
    "CASSETTE_CONFIG",
    "CASSETTE_MODE",
    "CASSETTE_STORE",
    "CASSETTE_DIR",
    "CASSETTE_CACHE",
    "CASSETTE_USAGE_LOG",
    "CASSETTE_JUDGE_MODEL",
    "CASSETTE_JUDGE_ROUTE",
    "CASSETTE_JUDGE_API",
    "CASSETTE_JUDGE_PATH",
    "CASSETTE_STREAM_CHUNK",
    "CASSETTE_UPSTREAM_TIMEOUT",
    "CASSETTE_REPEATS",
    "CASSETTE_MISS_STATUS",
    "UPSTREAM_BASE",
    "UPSTREAM_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    // A user's own endpoint becomes its route's upstream (issue 32): a developer's shell must
    // not choose the tests' upstreams.
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "ANTHROPIC_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GROQ_BASE_URL",
    "CO_API_URL",
    "CASSETTE_PROXY_URL",
    "CASSETTE_CHANNEL",
    "PORT",
    // Under CI a settings file cannot choose a mode that calls an upstream; tests that mean CI
    // set it themselves.
    "CI",
    "CASSETTE_ALLOW_KEY_ENV",
    // A CI job's step summary: a test's own run must not append to it.
    "GITHUB_STEP_SUMMARY",
];

/// A temporary working folder.
pub(crate) struct Workdir {
    dir: tempfile::TempDir,
}

impl Workdir {
    /// A fresh empty folder.
    pub(crate) fn new() -> Workdir {
        Workdir {
            dir: tempfile::tempdir().expect("creating a temp folder"),
        }
    }

    /// Its path.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A path inside it.
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a file inside it and returns its path.
    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("creating a folder");
        }
        std::fs::write(&path, text).expect("writing a file");
        path
    }

    /// `file://` URL of a store folder inside it.
    pub(crate) fn store(&self, name: &str) -> String {
        format!("file://{}", self.join(name).display())
    }

    /// A `cassette` command run in this folder with a clean environment.
    pub(crate) fn cassette(&self) -> Command {
        let mut cmd = super::cassette();
        cmd.current_dir(self.path());
        for name in SETTINGS {
            cmd.env_remove(name);
        }
        cmd
    }

    /// Runs `cassette ARGS` here and returns its output.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.cassette()
            .args(args)
            .output()
            .expect("running cassette")
    }

    /// Runs `cassette ARGS` in a folder below this one (created when missing).
    pub(crate) fn run_in(&self, sub: &str, args: &[&str]) -> Output {
        let dir = self.join(sub);
        std::fs::create_dir_all(&dir).expect("creating a folder");
        self.cassette()
            .current_dir(dir)
            .args(args)
            .output()
            .expect("running cassette")
    }
}

/// Runs `cmd` with both streams captured, killed once `deadline` has passed: a command that
/// wrongly waits (a proxy that starts, a FIFO it reads) fails its test instead of hanging it.
/// The output, and how long the command took.
pub(crate) fn output_within(
    mut cmd: Command,
    deadline: std::time::Duration,
) -> (Output, std::time::Duration) {
    let started = std::time::Instant::now();
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if exited_within(&mut child, deadline).is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    (out, started.elapsed())
}

/// How `child` exited, once it has, or `None` when it still runs after `within` (it is left
/// running: the caller kills it or fails, as its test says).
pub(crate) fn exited_within(
    child: &mut std::process::Child,
    within: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if started.elapsed() > within {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The exit code, with both streams in the message when there is none.
pub(crate) fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or_else(|| {
        panic!(
            "killed by a signal\nstdout:\n{}\nstderr:\n{}",
            super::stdout(out),
            super::stderr(out)
        )
    })
}

/// Both streams, for assertion messages.
pub(crate) fn both(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        super::stdout(out),
        super::stderr(out)
    )
}

/// Standard output parsed as JSON Lines.
pub(crate) fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    json_lines_of(&super::stdout(out))
}

/// A JSON Lines text parsed.
pub(crate) fn json_lines_of(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not JSON: {e}")))
        .collect()
}
