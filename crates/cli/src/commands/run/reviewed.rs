//! A finished run as the review files show it (`--html`, `--markdown`, the GitHub step
//! summary): each case with its verdict, graders, answer and, for a miss, the explanation,
//! most severe first (misses, failures, passes), each group in suite order. Everything taken
//! from answers and misses goes through the recorder's redaction again.

use super::{Ran, SuiteRun, Verdict};
use crate::shared::review::output::{append_step_summary, write_atomic};
use crate::shared::review::{answer_facts, RECORD};
use anyhow::Context;
use cassette_recorder::{Miss, Recorder};
use cassette_review::html::{MissView, RunCase, RunReview};
use cassette_review::{html, markdown};
use cassette_tape::redact::Redactor;
use std::path::PathBuf;

/// Where a run's review files go.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReviewFiles {
    /// The HTML review.
    pub(crate) html: Option<PathBuf>,
    /// The Markdown summary.
    pub(crate) markdown: Option<PathBuf>,
}

/// Writes the review files asked for, and the step summary when GitHub Actions asks for one.
pub(super) fn write(
    files: &ReviewFiles,
    suite: &SuiteRun,
    ran: &Ran<'_>,
    recorder: &Recorder,
    seconds: f64,
) -> anyhow::Result<()> {
    let review = review(suite, ran, recorder, seconds);
    if let Some(path) = &files.html {
        write_atomic(path, html::run_page(&review).as_bytes())
            .with_context(|| format!("writing the HTML review {}", path.display()))?;
    }
    let summary = markdown::run_summary(&review, RECORD);
    if let Some(path) = &files.markdown {
        write_atomic(path, summary.as_bytes())
            .with_context(|| format!("writing the Markdown summary {}", path.display()))?;
    }
    append_step_summary("run", &summary);
    Ok(())
}

fn review(suite: &SuiteRun, ran: &Ran<'_>, recorder: &Recorder, seconds: f64) -> RunReview {
    let redactor = recorder.redactor();
    let text = |s: &str| redactor.text(s);
    let graders = |id: &str| -> Vec<String> {
        suite
            .cases
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.graders.iter().map(|g| g.name.to_owned()).collect())
            .unwrap_or_default()
    };
    let position: std::collections::HashMap<&str, usize> = suite
        .cases
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect();
    let order = |id: &str| position.get(id).copied().unwrap_or(usize::MAX);
    // (severity, suite position, case): misses first, then failures, then passes.
    let mut cases: Vec<(u8, usize, RunCase)> = Vec::new();
    for done in &ran.done {
        let r = &done.result;
        let mut details = Vec::new();
        for s in &r.scores {
            details.push(format!(
                "{}: score {} (threshold {})",
                s.grader, s.score, s.threshold
            ));
        }
        if r.scores.is_empty() {
            if let (Some(score), Some(threshold)) = (r.score, r.threshold) {
                details.push(format!("score {score} (threshold {threshold})"));
            }
        }
        if let Some(judge) = &r.judge {
            details.push(format!(
                "judge: {} passed, {} failed, disagreement {}",
                judge.passed, judge.failed, judge.disagreement
            ));
        }
        let mut answer = done.answer.clone();
        answer.text = text(&answer.text);
        for call in &mut answer.tool_calls {
            redactor.json(&mut call.arguments);
        }
        let rank = if r.verdict == Verdict::Fail { 1 } else { 2 };
        cases.push((
            rank,
            order(&r.id),
            RunCase {
                id: text(&r.id),
                verdict: r.verdict.as_str(),
                graders: graders(&r.id),
                key: r.key.clone(),
                hit: r.hit,
                reason: r.reason.as_deref().map(text),
                details,
                answer: Some(answer_facts(answer)),
                miss: None,
            },
        ));
    }
    for (case, miss) in &ran.missed {
        cases.push((
            0,
            order(&case.id),
            RunCase {
                id: text(&case.id),
                verdict: Verdict::Miss.as_str(),
                graders: case.graders.iter().map(|g| g.name.to_owned()).collect(),
                key: miss.key.to_string(),
                hit: false,
                reason: None,
                details: Vec::new(),
                answer: None,
                miss: Some(miss_view(miss, redactor)),
            },
        ));
    }
    cases.sort_by_key(|(rank, position, _)| (*rank, *position));
    let cases = cases.into_iter().map(|(_, _, case)| case).collect();
    let stats = recorder.stats();
    RunReview {
        suite: text(&suite.path.display().to_string()),
        setting: format!(
            "mode {}, store {}",
            recorder.mode(),
            redactor.url(&recorder.store().location())
        ),
        seconds,
        hits: stats.hits,
        recorded: stats.recorded,
        unrun: ran.unrun,
        cases,
    }
}

fn miss_view(miss: &Miss, redactor: &Redactor) -> MissView {
    let text = |s: &str| redactor.text(s);
    MissView {
        request: text(&miss.request_line()),
        nearest: miss
            .explanation
            .nearest
            .as_ref()
            .map(|n| (n.key.to_string(), n.recorded_at.clone())),
        lines: miss.explanation_lines().iter().map(|l| text(l)).collect(),
    }
}
