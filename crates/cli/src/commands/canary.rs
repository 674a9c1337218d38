//! `cassette canary RESULTS --band 0.1`: keeps the cases whose score lies within the band of
//! their threshold, the only ones that can plausibly flip, to record and freeze as a cheap
//! canary suite.
//!
//! RESULTS holds one JSON object a line with at least `id` (string or number), `score` and
//! `threshold` (numbers); other members are kept as they are. `cassette run` writes exactly
//! that for cases with a scoring grader, so its output (a file, `-` for stdin) and its saved
//! runs (`last`, or a `--save-run` name) are read directly; lines without a score (unscored
//! cases, misses) are skipped. With `--suite`, the suite lines of the kept ids are printed
//! instead, which is the canary suite itself.

use crate::shared::runs::{run_file, RUNS_DIR};
use anyhow::{bail, Context};
use serde_json::Value;
use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `cassette canary`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
cassette canary last --suite suite.jsonl > canary.jsonl      # the latest cassette run\n  \
cassette run suite.jsonl | cassette canary - --band 0.05\n  \
cassette canary results.jsonl --band 0.05")]
pub(crate) struct CanaryArgs {
    /// Scored results, one {"id", "score", "threshold"} object a line: a file, `-` for stdin,
    /// or a run `cassette run` kept (`last`, or a --save-run name).
    #[arg(value_name = "RESULTS")]
    results: String,

    /// Keep cases with |score - threshold| <= BAND (in score units).
    #[arg(long, value_name = "BAND", default_value_t = 0.10)]
    band: f64,

    /// Where saved runs are kept.
    #[arg(long, value_name = "DIR", default_value = RUNS_DIR)]
    runs_dir: PathBuf,

    /// Print these suite lines (matched by id) instead of the result lines.
    #[arg(long, value_name = "SUITE.jsonl")]
    suite: Option<PathBuf>,
}

/// Runs `cassette canary`.
pub(crate) fn run(args: CanaryArgs) -> anyhow::Result<ExitCode> {
    if !args.band.is_finite() || args.band < 0.0 {
        bail!("--band must be a number of at least 0, found {}", args.band);
    }
    let (source, text) = read_results(&args.results, &args.runs_dir)?;
    let mut kept: Vec<(String, &str)> = Vec::new();
    let mut total = 0usize;
    let mut unscored = 0usize;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{source}:{}", i + 1);
        let value: Value =
            serde_json::from_str(line).with_context(|| format!("{}: invalid JSON", at()))?;
        let id = id_of(&value).with_context(|| format!("{}: missing \"id\"", at()))?;
        if value.get("score").is_none() && value.get("threshold").is_none() {
            // A case without a scoring grader, or a miss: nothing that could flip.
            unscored += 1;
            continue;
        }
        let number = |name: &str| {
            value
                .get(name)
                .and_then(Value::as_f64)
                .with_context(|| format!("{}: \"{name}\" must be a number", at()))
        };
        let (score, threshold) = (number("score")?, number("threshold")?);
        total += 1;
        if (score - threshold).abs() <= args.band + f64::EPSILON {
            kept.push((id, line));
        }
    }
    match &args.suite {
        None => {
            for (_, line) in &kept {
                println!("{line}");
            }
        }
        Some(suite) => {
            let suite_text = std::fs::read_to_string(suite)
                .with_context(|| format!("reading {}", suite.display()))?;
            let wanted: HashSet<&str> = kept.iter().map(|(id, _)| id.as_str()).collect();
            let mut found = HashSet::new();
            for line in suite_text.lines() {
                let id = serde_json::from_str::<Value>(line)
                    .ok()
                    .and_then(|v| id_of(&v));
                if let Some(id) = id.filter(|id| wanted.contains(id.as_str())) {
                    println!("{line}");
                    found.insert(id);
                }
            }
            for (id, _) in &kept {
                if !found.contains(id) {
                    eprintln!("warning: case {id:?} is not in {}", suite.display());
                }
            }
        }
    }
    eprintln!(
        "kept {} of {total} scored cases within {} of their threshold{}",
        kept.len(),
        args.band,
        if unscored > 0 {
            format!(" ({unscored} lines without a score skipped)")
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// The results text and how messages name it: stdin for `-`, a file, or a saved run by name.
fn read_results(results: &str, runs_dir: &Path) -> anyhow::Result<(String, String)> {
    if results == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the results from stdin")?;
        return Ok(("stdin".to_owned(), text));
    }
    let path = PathBuf::from(results);
    let path = if path.is_file() {
        path
    } else {
        let named = run_file(runs_dir, results);
        if !named.is_file() {
            bail!(
                "no results {results:?}: neither a file nor a saved run {} (every cassette run is kept as `last`)",
                named.display()
            );
        }
        named
    };
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok((path.display().to_string(), text))
}

fn id_of(value: &Value) -> Option<String> {
    match value.get("id")? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
