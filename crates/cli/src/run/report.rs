//! What `cassette run` writes besides its result lines: the JUnit report, the saved run, the
//! summary on stderr and the explanation of a replay miss.

use super::case::Done;
use super::suite::Case;
use super::{junit, CaseResult, SavedCase, Verdict};
use crate::answer::ToolCall;
use crate::review::output::write_atomic;
use anyhow::Context;
use cassette_recorder::{Miss, Recorder};
use std::path::Path;
use std::process::ExitCode;

/// A case that reached a verdict, as JUnit reports it.
pub(super) fn junit_case(done: &Done) -> junit::TestCase {
    junit::TestCase {
        id: done.result.id.clone(),
        seconds: done.seconds,
        outcome: match &done.result.reason {
            None => junit::Outcome::Passed,
            Some(reason) => junit::Outcome::Failed(reason.clone()),
        },
    }
}

/// Writes the JUnit report of the suite at `suite` to `path`.
pub(super) fn write_junit(
    path: &Path,
    suite: &Path,
    cases: &[junit::TestCase],
    seconds: f64,
) -> anyhow::Result<()> {
    let name = suite
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "suite".to_owned());
    write_atomic(path, junit::render(&name, cases, seconds).as_bytes())
        .with_context(|| format!("writing the JUnit report {}", path.display()))
}

/// A case that reached a verdict, as a saved run keeps it: the result and the answer.
pub(super) fn saved_case(done: &Done) -> SavedCase {
    SavedCase {
        result: done.result.clone(),
        text: done.answer.text.clone(),
        tool_calls: done.answer.tool_calls.iter().map(tool_call_json).collect(),
    }
}

/// The result line of a case that missed: the key that missed and why.
pub(super) fn miss_result(case: &Case, miss: &Miss) -> CaseResult {
    CaseResult {
        id: case.id.clone(),
        hit: false,
        verdict: Verdict::Miss,
        finish: None,
        key: miss.key.to_string(),
        reason: None,
        summary: Some(miss.explanation.summary.clone()),
        judge: None,
        judges: Vec::new(),
        score: None,
        threshold: None,
        scores: Vec::new(),
    }
}

/// Saves every case's result and answer to `path`, for `cassette diff-runs`.
pub(super) fn save_run(path: &Path, saved: &[SavedCase]) -> anyhow::Result<()> {
    let mut text = Vec::new();
    for case in saved {
        serde_json::to_writer(&mut text, case)?;
        text.push(b'\n');
    }
    write_atomic(path, &text).with_context(|| format!("saving the run {}", path.display()))
}

fn tool_call_json(call: &ToolCall) -> serde_json::Value {
    serde_json::json!({"name": call.name, "arguments": call.arguments})
}

/// Prints the failed cases and the summary line; the exit status is 1 when a verdict failed.
pub(super) fn summary(done: &[Done], missed: usize, recorder: &Recorder, seconds: f64) -> ExitCode {
    let passed = done
        .iter()
        .filter(|d| d.result.verdict == Verdict::Pass)
        .count();
    let failed = done.len() - passed;
    let missed_part = if missed > 0 {
        format!(", {missed} missed")
    } else {
        String::new()
    };
    let stats = recorder.stats();
    let requests = stats.hits + stats.misses + stats.upstream_requests;
    let hit_rate = if requests == 0 {
        0.0
    } else {
        stats.hits as f64 / requests as f64
    };
    for case in done.iter().filter(|d| d.result.verdict == Verdict::Fail) {
        eprintln!(
            "FAIL {}: {}",
            case.result.id,
            case.result.reason.as_deref().unwrap_or("")
        );
    }
    eprintln!(
        "cassette run: {} cases: {passed} passed, {failed} failed{missed_part}, hit_rate {hit_rate:.2} \
         ({} of {requests} requests replayed, {} recorded; mode {}, {seconds:.2}s)",
        done.len() + missed,
        stats.hits,
        stats.recorded,
        recorder.mode(),
    );
    if let Some(line) = judge_summary(done) {
        eprintln!("cassette run: judge: {line}");
    }
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// How far the suite's judge verdicts can be trusted: how many there were, the disagreement
/// (flip) rate, the share of verdicts asked with several votes whose votes split, how many of
/// those one vote the other way would have flipped, and how many rest on a single vote. `None`
/// when nothing was judged.
pub(super) fn judge_summary(done: &[Done]) -> Option<String> {
    let verdicts: Vec<&super::result::CriterionTally> =
        done.iter().flat_map(|d| &d.result.judges).collect();
    if verdicts.is_empty() {
        return None;
    }
    let criteria: std::collections::BTreeSet<&str> =
        verdicts.iter().map(|v| v.criterion.as_str()).collect();
    let several: Vec<_> = verdicts
        .iter()
        .filter(|v| v.passed + v.failed > 1)
        .collect();
    let split = several
        .iter()
        .filter(|v| v.passed > 0 && v.failed > 0)
        .count();
    let by_one = several.iter().filter(|v| v.by_one_vote).count();
    let single = verdicts.len() - several.len();
    let rate = if several.is_empty() {
        "n/a".to_owned()
    } else {
        format!("{:.2}", split as f64 / several.len() as f64)
    };
    Some(format!(
        "{} verdicts on {} criteria, disagreement rate {rate} ({split} of {} verdicts with several votes split), {by_one} decided by one vote, {single} from a single vote",
        verdicts.len(),
        criteria.len(),
        several.len(),
    ))
}

/// Prints a miss the way every command does: key, request, nearest recording, differences.
pub(crate) fn print_miss(miss: &Miss) {
    for line in miss_lines(miss) {
        eprintln!("{line}");
    }
}

/// A miss as every command explains it, one line each: key, request, store, the nearest
/// recording and what differs, and what to do.
pub(crate) fn miss_lines(miss: &Miss) -> Vec<String> {
    let mut lines = vec![
        format!("  key:     {}", miss.key),
        format!(
            "  request: {} {} (target {}, profile {}{})",
            miss.method,
            miss.path,
            miss.target,
            miss.profile,
            miss.model
                .as_deref()
                .map(|m| format!(", model {m}"))
                .unwrap_or_default()
        ),
        format!("  store:   {}", miss.store),
    ];
    match &miss.explanation.nearest {
        Some(nearest) => {
            lines.push(format!(
                "  nearest: {} (recorded {}), which differs in:",
                nearest.key, nearest.recorded_at
            ));
            lines.extend(nearest.differences.iter().map(|l| format!("    - {l}")));
        }
        None => lines.push(format!("  {}", miss.explanation.summary)),
    }
    lines.push("  Record it with CASSETTE_MODE=record (or auto), or fix the request.".to_owned());
    lines
}
