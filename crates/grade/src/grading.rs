//! Grading one answer with its graders: the deterministic ones in place, the judge ones through
//! whoever implements [`Ask`]. `cassette run` (each case) and `cassette grade` (each expectation
//! of a test) grade only through here, so a grader cannot mean one thing in a suite and another
//! in a test.

use crate::answer::{shorten, Answer, Reply};
use crate::graders::{Check, Grader, Score};
use crate::judge::{Ask, JudgeConfig, Judgement};
use crate::result::{CaseResult, CriterionTally, GraderScore, JudgeTally, Verdict};
use crate::suite::Case;

/// What one grader found.
#[derive(Debug)]
pub struct Outcome {
    /// The grader's registered name.
    pub grader: &'static str,
    /// `Ok` when it passed, else why not.
    pub verdict: Result<(), String>,
    /// Its score, for graders that score.
    pub score: Option<Score>,
    /// The judge's votes, for judge graders.
    pub judgement: Option<Judgement>,
}

/// What all the graders of one answer found, in their order.
#[derive(Debug, Default)]
pub struct Graded {
    /// One outcome per grader.
    pub outcomes: Vec<Outcome>,
    /// Whether every judge vote was replayed (true when nothing was judged).
    pub hit: bool,
}

/// Whether any grader asks the judge, so needs an [`Ask`] that can send requests.
pub fn needs_judge(graders: &[Grader]) -> bool {
    graders.iter().any(|g| matches!(g.check, Check::Judge(_)))
}

/// Grades `answer` with every grader, asking `judge` through `ask` for judge graders. An error of
/// `ask` (a replay miss of a judge vote, or another error that is no verdict) stops the grading
/// and is returned as it is.
pub async fn grade<A: Ask + ?Sized>(
    ask: &A,
    judge: &JudgeConfig,
    graders: &[Grader],
    answer: &Answer,
) -> Result<Graded, A::Error> {
    let mut graded = Graded {
        outcomes: Vec::with_capacity(graders.len()),
        hit: true,
    };
    for grader in graders {
        let outcome = match &grader.check {
            Check::Local(local) => Outcome {
                grader: grader.name,
                verdict: local.grade(answer),
                score: local.score(answer),
                judgement: None,
            },
            Check::Judge(spec) => {
                let judgement = judge.judge(ask, spec, &answer.text).await?;
                graded.hit &= judgement.votes.iter().all(|v| v.hit);
                Outcome {
                    grader: grader.name,
                    verdict: judgement.verdict(),
                    score: Some(judgement.score()),
                    judgement: Some(judgement),
                }
            }
        };
        graded.outcomes.push(outcome);
    }
    Ok(graded)
}

/// Grades the reply to a case's own request into the case's result line. A reply other than a
/// success fails the case ungraded; otherwise every grader grades its answer, the judge ones
/// through `ask`, and the case is a hit when its request and every judge vote were replayed.
/// With several graders, failures and scores say which grader they are of.
pub async fn grade_case<A: Ask + ?Sized>(
    ask: &A,
    judge: &JudgeConfig,
    case: &Case,
    reply: &Reply,
) -> Result<CaseResult, A::Error> {
    let named = case.graders.len() > 1;
    let (hit, failures, graded) = if !reply.succeeded() {
        let failure = format!(
            "the upstream answered HTTP {}: {}",
            reply.status,
            shorten(reply.answer.text.trim())
        );
        (reply.hit, vec![failure], Graded::default())
    } else {
        let graded = grade(ask, judge, &case.graders, &reply.answer).await?;
        (reply.hit && graded.hit, graded.failures(named), graded)
    };
    // A failed upstream answer was not graded, so no score stands for its verdict.
    let verdict_score = graded.verdict_score();
    Ok(CaseResult {
        id: case.id.clone(),
        hit,
        verdict: if failures.is_empty() {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        finish: reply.answer.finish.clone(),
        key: reply.key.clone(),
        reason: (!failures.is_empty()).then(|| failures.join("; ")),
        summary: None,
        judge: graded.judge_tally(),
        judges: graded.criteria(),
        score: verdict_score.as_ref().map(|s| s.score),
        threshold: verdict_score.as_ref().map(|s| s.threshold),
        // With one grader, `score` and `threshold` say it all.
        scores: if named { graded.scores() } else { Vec::new() },
    })
}

impl Graded {
    /// Whether every grader passed.
    pub fn passed(&self) -> bool {
        self.outcomes.iter().all(|o| o.verdict.is_ok())
    }

    /// Why graders failed, each prefixed with its grader's name when `named` (several graders
    /// grade one answer, so the reason must say which one failed).
    pub fn failures(&self, named: bool) -> Vec<String> {
        self.outcomes
            .iter()
            .filter_map(|o| {
                o.verdict.as_ref().err().map(|reason| {
                    if named {
                        format!("{}: {reason}", o.grader)
                    } else {
                        reason.clone()
                    }
                })
            })
            .collect()
    }

    /// Every score, rounded, with its grader.
    pub fn scores(&self) -> Vec<GraderScore> {
        self.outcomes
            .iter()
            .filter_map(|o| {
                o.score.map(|score| GraderScore {
                    grader: o.grader.to_owned(),
                    score: round(score.value),
                    threshold: score.threshold,
                })
            })
            .collect()
    }

    /// The score that stands for the answer's verdict: the one closest to flipping among the
    /// graders that decided it. When the answer passed, every grader did; when it failed, only
    /// the failing graders decided it, so a passing grader's score (a similarity of 1.0 next
    /// to a failed length check) never stands for a failed verdict. `None` when no grader that
    /// decided the verdict scores.
    pub fn verdict_score(&self) -> Option<GraderScore> {
        let failed = !self.passed();
        self.outcomes
            .iter()
            .filter(|o| !failed || o.verdict.is_err())
            .filter_map(|o| {
                o.score.map(|score| GraderScore {
                    grader: o.grader.to_owned(),
                    score: round(score.value),
                    threshold: score.threshold,
                })
            })
            .min_by(|a, b| {
                (a.score - a.threshold)
                    .abs()
                    .total_cmp(&(b.score - b.threshold).abs())
            })
    }

    /// Each judged criterion's votes, in grader order.
    pub fn criteria(&self) -> Vec<CriterionTally> {
        self.outcomes
            .iter()
            .filter_map(|o| {
                o.judgement
                    .as_ref()
                    .map(|j| CriterionTally::new(o.grader, j))
            })
            .collect()
    }

    /// The judge's votes over every criterion: how many passed and failed, and the share that
    /// went against their own criterion's majority. `None` when nothing was judged.
    pub fn judge_tally(&self) -> Option<JudgeTally> {
        let judged: Vec<&Judgement> = self
            .outcomes
            .iter()
            .filter_map(|o| o.judgement.as_ref())
            .collect();
        if judged.is_empty() {
            return None;
        }
        let passed: u32 = judged.iter().map(|j| j.passed).sum();
        let failed: u32 = judged.iter().map(|j| j.failed).sum();
        let against: u32 = judged.iter().map(|j| j.passed.min(j.failed)).sum();
        Some(JudgeTally {
            passed,
            failed,
            disagreement: round(f64::from(against) / f64::from((passed + failed).max(1))),
        })
    }
}

impl CriterionTally {
    fn new(grader: &str, judgement: &Judgement) -> CriterionTally {
        CriterionTally {
            grader: grader.to_owned(),
            criterion: judgement.criterion.clone(),
            pass: judgement.pass,
            passed: judgement.passed,
            failed: judgement.failed,
            disagreement: round(judgement.disagreement),
            by_one_vote: judgement.decided_by_one_vote(),
        }
    }
}

/// Three decimals are plenty for a score or a share of at most 15 votes, and keep result lines
/// stable and readable.
pub fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::Reply;
    use crate::graders::from_case;
    use crate::judge::JudgeApi;
    use cassette_tape::Request;
    use serde_json::json;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    /// A judge that must not be asked.
    struct Unasked;

    impl Ask for Unasked {
        type Error = ();

        async fn ask(&self, _: Request) -> Result<Reply, ()> {
            Err(())
        }
    }

    fn local(grader: serde_json::Value, answer: &str) -> Graded {
        let graders = from_case(Some(&grader), None).unwrap();
        let answer = Answer {
            text: answer.to_owned(),
            ..Answer::default()
        };
        let judge = JudgeConfig::new(JudgeApi::Openai);
        let mut grading = std::pin::pin!(grade(&Unasked, &judge, &graders, &answer));
        match grading
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(Ok(graded)) => graded,
            Poll::Ready(Err(())) => panic!("local graders do not ask the judge"),
            Poll::Pending => panic!("local graders wait for nothing"),
        }
    }

    #[test]
    fn a_failed_answer_is_never_scored_by_a_grader_that_passed() {
        // Similarity 1.0 passes, the length check fails: the verdict is the length check's.
        let graded = local(
            json!([
                {"grader": "similarity", "expect": {"text": "the capital is Paris", "threshold": 0.8}},
                {"grader": "length", "expect": {"max_words": 2}}
            ]),
            "Paris is the capital",
        );
        assert!(!graded.passed());
        assert_eq!(graded.scores()[0].score, 1.0);
        assert!(
            graded.verdict_score().is_none(),
            "{:?}",
            graded.verdict_score()
        );
        // Two scoring graders, one failing: the failing one stands for the verdict.
        let graded = local(
            json!([
                {"grader": "similarity", "expect": {"text": "the capital is Paris", "threshold": 0.8}},
                {"grader": "similarity", "expect": {"text": "Lyon is a city in France", "threshold": 0.9}}
            ]),
            "Paris is the capital",
        );
        let score = graded.verdict_score().unwrap();
        assert!(score.score < 0.9, "{score:?}");
        assert_eq!(score.threshold, 0.9);
        // A pass is stood for by the score closest to flipping.
        let graded = local(
            json!([
                {"grader": "similarity", "expect": {"text": "the capital is Paris", "threshold": 0.8}},
                {"grader": "similarity", "expect": {"text": "Paris is the capital city", "threshold": 0.5}}
            ]),
            "Paris is the capital",
        );
        assert!(graded.passed());
        assert_eq!(graded.verdict_score().unwrap().threshold, 0.8);
    }

    #[test]
    fn reasons_name_their_grader_when_several_grade_one_answer() {
        let graded = local(
            json!([
                {"grader": "contains", "expect": {"needle": "lyon"}},
                {"grader": "length", "expect": {"max_words": 2}}
            ]),
            "Paris is the capital",
        );
        assert_eq!(
            graded.failures(true),
            [
                "contains: text does not contain \"lyon\"",
                "length: 4 words, more than 2"
            ]
        );
        assert_eq!(graded.failures(false)[0], "text does not contain \"lyon\"");
    }
}
