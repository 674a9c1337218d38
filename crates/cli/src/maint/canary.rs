//! `cassette canary RESULTS.jsonl --band 0.1`: keeps the cases whose score lies within the band
//! of their threshold, the only ones that can plausibly flip, to record and freeze as a cheap
//! canary suite.
//!
//! RESULTS.jsonl holds one JSON object a line with at least `id` (string or number), `score`
//! and `threshold` (numbers); other members are kept as they are. With `--suite`, the suite
//! lines of the kept ids are printed instead, which is the canary suite itself.

use anyhow::{bail, Context};
use serde_json::Value;
use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `cassette canary`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  cassette canary results.jsonl --band 0.05 --suite suite.jsonl > canary.jsonl"
)]
pub(crate) struct CanaryArgs {
    /// Scored results: one {"id", "score", "threshold"} object a line.
    #[arg(value_name = "RESULTS.jsonl")]
    results: PathBuf,

    /// Keep cases with |score - threshold| <= BAND (in score units).
    #[arg(long, value_name = "BAND")]
    band: f64,

    /// Print these suite lines (matched by id) instead of the result lines.
    #[arg(long, value_name = "SUITE.jsonl")]
    suite: Option<PathBuf>,
}

/// Runs `cassette canary`.
pub(crate) fn run(args: CanaryArgs) -> anyhow::Result<ExitCode> {
    if !args.band.is_finite() || args.band < 0.0 {
        bail!("--band must be a number of at least 0, found {}", args.band);
    }
    let text = std::fs::read_to_string(&args.results)
        .with_context(|| format!("reading {}", args.results.display()))?;
    let mut kept: Vec<(String, &str)> = Vec::new();
    let mut total = 0usize;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", args.results.display(), i + 1);
        let value: Value =
            serde_json::from_str(line).with_context(|| format!("{}: invalid JSON", at()))?;
        let id = id_of(&value).with_context(|| format!("{}: missing \"id\"", at()))?;
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
        "kept {} of {total} cases within {} of their threshold",
        kept.len(),
        args.band
    );
    Ok(ExitCode::SUCCESS)
}

fn id_of(value: &Value) -> Option<String> {
    match value.get("id")? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
