//! One case: its request through the recorder, then its grader (and for `judge`, the judge's
//! votes through the same recorder), into the result line `cassette run` prints.

use super::call::{call, Stop};
use super::graders::judge::{JudgeConfig, Judgement};
use super::graders::Check;
use super::suite::Case;
use super::{CaseResult, JudgeTally, Verdict};
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
    let mut hit = called.hit;
    let mut tally = None;
    let outcome = if !(200..300).contains(&called.status) {
        Err(format!(
            "the upstream answered HTTP {}: {}",
            called.status,
            answer::shorten(called.answer.text.trim())
        ))
    } else {
        match &case.check {
            Check::Local(grader) => grader.grade(&called.answer),
            Check::Judge(spec) => {
                let judgement = judge.judge(recorder, spec, &called.answer.text).await?;
                hit &= judgement.votes.iter().all(|v| v.hit);
                tally = Some(JudgeTally::from(&judgement));
                judgement.verdict()
            }
        }
    };
    Ok(Done {
        result: CaseResult {
            id: case.id.clone(),
            hit,
            verdict: if outcome.is_ok() {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            finish: called.answer.finish.clone(),
            key: called.key,
            reason: outcome.err(),
            judge: tally,
        },
        answer: called.answer,
        seconds: started.elapsed().as_secs_f64(),
    })
}

impl From<&Judgement> for JudgeTally {
    fn from(judgement: &Judgement) -> Self {
        JudgeTally {
            passed: judgement.passed,
            failed: judgement.failed,
            // Three decimals are plenty for a share of at most 15 votes.
            disagreement: (judgement.disagreement * 1000.0).round() / 1000.0,
        }
    }
}
