//! Saved runs: where `cassette run --save-run` keeps them and how a name becomes a file, for
//! `run`, `diff-runs`, `canary` and `verify`.

use std::path::{Path, PathBuf};

/// Where `--save-run` keeps runs, relative to the working directory.
pub(crate) const RUNS_DIR: &str = ".cassette/runs";

/// The name every run is also saved under, so `cassette diff-runs last NAME` needs no flag.
pub(crate) const LAST_RUN: &str = "last";

/// The file a saved run `name` lives in.
pub(crate) fn run_file(runs_dir: &Path, name: &str) -> PathBuf {
    runs_dir.join(format!("{name}.jsonl"))
}
