//! `cassette diff-runs RUN_A RUN_B`: compares two runs that `cassette run` kept (every run is
//! kept as `last`; `--save-run NAME` keeps one under a name): regressions (passed in A, failed
//! in B), fixes, cases that missed in B, cases that missed in A and have a verdict in B, added
//! and removed cases, and cases whose answer changed with the same verdict. Two reports of
//! `cassette exec --report` compare the same way, request by request (by route, method, path
//! and key): a request that was replayed in A and missed in B is named with its explanation.

use crate::shared::runs::{run_file, RUNS_DIR};
use anyhow::{bail, Context};
use cassette_grade::result::{SavedCase, Verdict};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `cassette diff-runs`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "RUN_A and RUN_B are names given to --save-run, `last` (the latest run), or \
paths to saved run files, or two reports of `cassette exec --report`.\n\
Exit status: 0; with --fail-on-regression, 2 when a case misses in RUN_B that did not in \
RUN_A (its verdict is unknown, so the gate cannot pass), else 1 when a case regressed; 2 error."
)]
pub(crate) struct DiffRunsArgs {
    /// The earlier run.
    run_a: String,
    /// The later run.
    run_b: String,

    /// Exit 1 when any case passed in RUN_A and fails in RUN_B, and 2 when a case misses in
    /// RUN_B that did not in RUN_A.
    #[arg(long)]
    fail_on_regression: bool,

    /// Where saved runs are kept.
    #[arg(long, value_name = "DIR", default_value = RUNS_DIR)]
    runs_dir: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnRegression {
    Report,
    Fail,
}

/// Runs `cassette diff-runs`.
pub(crate) fn run(args: DiffRunsArgs) -> anyhow::Result<ExitCode> {
    let policy = if args.fail_on_regression {
        OnRegression::Fail
    } else {
        OnRegression::Report
    };
    let (kind_a, a) = load(&args.runs_dir, &args.run_a)?;
    let (kind_b, b) = load(&args.runs_dir, &args.run_b)?;
    if kind_a != kind_b {
        bail!(
            "{} is {} and {} is {}: compare two saved suite runs or two exec reports",
            args.run_a,
            kind_a.describe(),
            args.run_b,
            kind_b.describe()
        );
    }
    let (mut regressions, mut fixes, mut changed) = (Vec::new(), Vec::new(), Vec::new());
    let (mut missed, mut recorded) = (Vec::new(), Vec::new());
    for (id, old) in &a {
        let Some(new) = b.get(id) else { continue };
        match (old.result.verdict, new.result.verdict) {
            (Verdict::Pass, Verdict::Fail) => regressions.push((id, new)),
            (Verdict::Fail, Verdict::Pass) => fixes.push(id),
            // A miss says the tape is stale, not that the model got worse.
            (was, Verdict::Miss) if was != Verdict::Miss => missed.push((id, was)),
            // Recorded since: a verdict again, though none to compare it with.
            (Verdict::Miss, now) if now != Verdict::Miss => recorded.push((id, new)),
            (Verdict::Miss, _) | (_, Verdict::Miss) => {}
            _ if old.text != new.text || old.tool_calls != new.tool_calls => changed.push(id),
            _ => {}
        }
    }
    let added: Vec<&String> = b.keys().filter(|id| !a.contains_key(*id)).collect();
    let removed: Vec<&String> = a.keys().filter(|id| !b.contains_key(*id)).collect();
    for (id, new) in &regressions {
        println!(
            "regression: {id}: {}",
            new.result.reason.as_deref().unwrap_or("failed")
        );
    }
    for id in &fixes {
        println!("fixed: {id}");
    }
    for (id, was) in &missed {
        let why = b[*id]
            .result
            .summary
            .as_deref()
            .map(|s| format!(": {s}"))
            .unwrap_or_default();
        println!(
            "missed: {id} (was {}; its recording is stale or missing){why}",
            verdict(*was)
        );
    }
    for (id, new) in &recorded {
        match (new.result.verdict, new.result.reason.as_deref()) {
            (Verdict::Fail, Some(reason)) => {
                println!(
                    "recorded: {id} (missed in {}, now fail: {reason})",
                    args.run_a
                )
            }
            (now, _) => println!(
                "recorded: {id} (missed in {}, now {})",
                args.run_a,
                verdict(now)
            ),
        }
    }
    for id in &added {
        println!("added: {id} ({})", verdict(b[*id].result.verdict));
    }
    for id in &removed {
        println!("removed: {id}");
    }
    for id in &changed {
        println!(
            "answer changed: {id} (still {})",
            verdict(b[*id].result.verdict)
        );
    }
    // A case added in B that misses is as unknown as one that used to have a verdict.
    let new_misses = missed.len()
        + added
            .iter()
            .filter(|id| b[**id].result.verdict == Verdict::Miss)
            .count();
    eprintln!(
        "{} regressions, {} fixes, {} missed, {} recorded, {} added, {} removed, {} answers changed ({} -> {})",
        regressions.len(),
        fixes.len(),
        missed.len(),
        recorded.len(),
        added.len(),
        removed.len(),
        changed.len(),
        args.run_a,
        args.run_b
    );
    if policy == OnRegression::Fail && new_misses > 0 {
        eprintln!(
            "{new_misses} case(s) miss in {} and have no verdict to compare: record them (CASSETTE_MODE=record or auto) and run again",
            args.run_b
        );
        return Ok(ExitCode::from(crate::shared::runtime::EXIT_ERROR));
    }
    Ok(match (policy, regressions.is_empty()) {
        (OnRegression::Fail, false) => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

fn verdict(v: Verdict) -> &'static str {
    v.as_str()
}

/// What a run file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A suite run `cassette run` saved (JSON Lines).
    Suite,
    /// A report of `cassette exec --report`.
    Exec,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Suite => "a saved suite run",
            Kind::Exec => "an exec report",
        }
    }
}

/// A run by path, or by name in the runs folder.
fn load(runs_dir: &Path, run: &str) -> anyhow::Result<(Kind, BTreeMap<String, SavedCase>)> {
    let as_path = PathBuf::from(run);
    let path = if as_path.is_file() {
        as_path
    } else {
        let named = run_file(runs_dir, run);
        if !named.is_file() {
            bail!(
                "no saved run {run:?}: neither a file nor {} (save one with cassette run --save-run {run})",
                named.display()
            );
        }
        named
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading the run {}", path.display()))?;
    if crate::shared::exec_report::is_report(&text) {
        let report: crate::shared::exec_report::ExecReport = serde_json::from_str(&text)
            .with_context(|| format!("{}: not an exec report of this version", path.display()))?;
        if report.cassette_exec_report != crate::shared::exec_report::REPORT_FORMAT {
            bail!(
                "{}: an exec report of format {}, this cassette reads format {}",
                path.display(),
                report.cassette_exec_report,
                crate::shared::exec_report::REPORT_FORMAT
            );
        }
        return Ok((Kind::Exec, report.cases()));
    }
    let mut cases = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: SavedCase = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not a saved case", path.display(), i + 1))?;
        cases.insert(case.result.id.clone(), case);
    }
    Ok((Kind::Suite, cases))
}
