//! One case: its request through the recorder, then its grader (and for `judge`, the judge's
//! votes through the same recorder), into the result line `cassette run` prints.

use super::call::{call, Stop};
use super::graders::judge::JudgeConfig;
use super::grading::{self, Graded};
use super::result::{CaseResult, Verdict};
use super::suite::Case;
use crate::answer::{self, Answer};
use cassette_recorder::Recorder;
use std::time::Instant;

/// A case that ran to a verdict.
pub(super) struct Done {
    /// What `cassette run` prints for it.
    pub(super) result: CaseResult,
    /// What was answered.
    pub(super) answer: Answer,
    /// How long it took.
    pub(super) seconds: f64,
}

/// Runs one case. A replay miss or an error that is not a verdict stops it.
pub(super) async fn run_case(
    recorder: &Recorder,
    judge: &JudgeConfig,
    case: &Case,
) -> Result<Done, Stop> {
    let started = Instant::now();
    let called = call(recorder, case.request.clone()).await?;
    // With several graders, failures and scores say which grader they are of.
    let named = case.graders.len() > 1;
    let (hit, failures, graded) = if !(200..300).contains(&called.status) {
        let failure = format!(
            "the upstream answered HTTP {}: {}",
            called.status,
            answer::shorten(called.answer.text.trim())
        );
        (called.hit, vec![failure], Graded::default())
    } else {
        let graded = grading::grade(Some(recorder), judge, &case.graders, &called.answer).await?;
        (called.hit && graded.hit, graded.failures(named), graded)
    };
    // A failed upstream answer was not graded, so no score stands for its verdict.
    let verdict_score = graded.verdict_score();
    Ok(Done {
        result: CaseResult {
            id: case.id.clone(),
            hit,
            verdict: if failures.is_empty() {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            finish: called.answer.finish.clone(),
            key: called.key,
            reason: (!failures.is_empty()).then(|| failures.join("; ")),
            summary: None,
            judge: graded.judge_tally(),
            judges: graded.criteria(),
            score: verdict_score.as_ref().map(|s| s.score),
            threshold: verdict_score.as_ref().map(|s| s.threshold),
            // With one grader, `score` and `threshold` say it all.
            scores: if named { graded.scores() } else { Vec::new() },
        },
        answer: called.answer,
        seconds: started.elapsed().as_secs_f64(),
    })
}
