//! One case: its request through the recorder, then its grader (and for `judge`, the judge's
//! votes through the same recorder), into the result line `cassette run` prints.

use super::call::{call, Stop};
use super::graders::judge::{JudgeConfig, Judgement};
use super::graders::{Check, Score};
use super::result::{CaseResult, GraderScore, JudgeTally, Verdict};
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
    let mut hit = called.hit;
    let mut grades = Grades {
        named: case.graders.len() > 1,
        ..Grades::default()
    };
    if !(200..300).contains(&called.status) {
        grades.failures.push(format!(
            "the upstream answered HTTP {}: {}",
            called.status,
            answer::shorten(called.answer.text.trim())
        ));
    } else {
        for grader in &case.graders {
            match &grader.check {
                Check::Local(local) => {
                    grades.add(
                        grader.name,
                        local.grade(&called.answer),
                        local.score(&called.answer),
                    );
                }
                Check::Judge(spec) => {
                    let judgement = judge.judge(recorder, spec, &called.answer.text).await?;
                    hit &= judgement.votes.iter().all(|v| v.hit);
                    grades.tally = Some(JudgeTally::from(&judgement));
                    grades.add(grader.name, judgement.verdict(), Some(judgement.score()));
                }
            }
        }
    }
    let nearest = grades.nearest_flip().cloned();
    Ok(Done {
        result: CaseResult {
            id: case.id.clone(),
            hit,
            verdict: if grades.failures.is_empty() {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            finish: called.answer.finish.clone(),
            key: called.key,
            reason: (!grades.failures.is_empty()).then(|| grades.failures.join("; ")),
            summary: None,
            judge: grades.tally,
            score: nearest.as_ref().map(|s| s.score),
            threshold: nearest.as_ref().map(|s| s.threshold),
            // With one grader, `score` and `threshold` say it all.
            scores: if grades.named {
                grades.scores
            } else {
                Vec::new()
            },
        },
        answer: called.answer,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// What the graders of one case found.
#[derive(Default)]
struct Grades {
    /// Why graders failed, each prefixed with its name when the case has several.
    failures: Vec<String>,
    /// Whether the case has several graders, so failures say which one failed.
    named: bool,
    scores: Vec<GraderScore>,
    tally: Option<JudgeTally>,
}

impl Grades {
    fn add(&mut self, grader: &'static str, verdict: Result<(), String>, score: Option<Score>) {
        if let Err(reason) = verdict {
            self.failures.push(if self.named {
                format!("{grader}: {reason}")
            } else {
                reason
            });
        }
        if let Some(score) = score {
            self.scores.push(GraderScore {
                grader: grader.to_owned(),
                score: round(score.value),
                threshold: score.threshold,
            });
        }
    }

    /// The score closest to flipping its verdict: the one a canary watches.
    fn nearest_flip(&self) -> Option<&GraderScore> {
        self.scores.iter().min_by(|a, b| {
            (a.score - a.threshold)
                .abs()
                .total_cmp(&(b.score - b.threshold).abs())
        })
    }
}

/// Three decimals are plenty for a score, and keep result lines stable and readable.
fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
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
