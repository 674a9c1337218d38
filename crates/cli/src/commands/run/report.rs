//! What `cassette run` writes besides its result lines: the JUnit report, the saved run, the
//! summary on stderr and the explanation of a replay miss.

use super::case::Done;
use crate::shared::review::output::write_atomic;
use anyhow::Context;
use cassette_grade::junit;
use cassette_grade::result::{judge_summary, CaseResult, SavedCase, Verdict};
use cassette_grade::suite::Case;
use cassette_recorder::{Miss, Recorder};
use cassette_tape::redact::Redactor;
use std::path::Path;
use std::process::ExitCode;

/// A case that reached a verdict, as JUnit reports it.
pub(super) fn junit_case(done: &Done) -> junit::TestCase {
    junit::TestCase::graded(&done.result, done.seconds)
}

/// Writes the JUnit report of the suite at `suite` to `path`, redacted by `redactor` as the
/// cassettes are.
pub(super) fn write_junit(
    path: &Path,
    suite: &Path,
    cases: &[junit::TestCase],
    seconds: f64,
    redactor: &Redactor,
) -> anyhow::Result<()> {
    let name = suite
        .file_stem()
        .map(|s| redactor.text(&s.to_string_lossy()))
        .unwrap_or_else(|| "suite".to_owned());
    let cases: Vec<junit::TestCase> = cases
        .iter()
        .map(|case| {
            let mut case = case.clone();
            case.redact(redactor);
            case
        })
        .collect();
    write_atomic(path, junit::render(&name, &cases, seconds).as_bytes())
        .with_context(|| format!("writing the JUnit report {}", path.display()))
}

/// A case that reached a verdict, as a saved run keeps it: the result and the answer.
pub(super) fn saved_case(done: &Done) -> SavedCase {
    SavedCase::answered(done.result.clone(), &done.answer)
}

/// The result line of a case that missed: the key that missed and why.
pub(super) fn miss_result(case: &Case, miss: &Miss) -> CaseResult {
    CaseResult::missed(
        case.id.clone(),
        miss.key.to_string(),
        miss.explanation.summary.clone(),
    )
}

/// Saves every case's result and answer to `path`, for `cassette diff-runs`, redacted by
/// `redactor` as the cassettes are.
pub(super) fn save_run(
    path: &Path,
    saved: &[SavedCase],
    redactor: &Redactor,
) -> anyhow::Result<()> {
    let mut text = Vec::new();
    for case in saved {
        let mut case = case.clone();
        case.redact(redactor);
        serde_json::to_writer(&mut text, &case)?;
        text.push(b'\n');
    }
    write_atomic(path, &text).with_context(|| format!("saving the run {}", path.display()))
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
    if let Some(line) = judge_summary(done.iter().map(|d| &d.result)) {
        eprintln!("cassette run: judge: {line}");
    }
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
