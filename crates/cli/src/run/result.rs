//! What a suite run reports per case: the verdict, the result line printed and saved, and the
//! saved run line (`--save-run`, `diff-runs`, `canary`).

use serde::{Deserialize, Serialize};

/// A case's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    /// The grader passed.
    Pass,
    /// The grader failed, or the upstream answered an error.
    Fail,
    /// A request of the case (its own or a judge vote) had no recording in replay.
    Miss,
}

impl Verdict {
    /// The verdict as printed.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Miss => "miss",
        }
    }
}

/// One case's result: the stdout line, and with `--save-run` the saved one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CaseResult {
    /// The case id.
    pub(crate) id: String,
    /// Whether every request of the case (including judge votes) was replayed.
    pub(crate) hit: bool,
    /// The verdict.
    pub(crate) verdict: Verdict,
    /// The answer's finish reason.
    pub(crate) finish: Option<String>,
    /// The case request's key, or for a miss the key that missed.
    pub(crate) key: String,
    /// Why the verdict failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// For a miss: the explanation's one-line summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) summary: Option<String>,
    /// The judge's votes over all its criteria, for judged cases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) judge: Option<JudgeTally>,
    /// Each judged criterion's votes, for judged cases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) judges: Vec<CriterionTally>,
    /// The score closest to flipping its verdict, when a grader scores (for `cassette canary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) score: Option<f64>,
    /// Where that score flips the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) threshold: Option<f64>,
    /// Every grader's score, when the case has several scoring graders.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) scores: Vec<GraderScore>,
}

/// One grader's score in a case result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GraderScore {
    /// The grader.
    pub(crate) grader: String,
    /// Its score, from 0 to 1.
    pub(crate) score: f64,
    /// Where its verdict flips.
    pub(crate) threshold: f64,
}

/// The judge's tally in a case result, over every criterion the case judges.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct JudgeTally {
    /// Votes that passed.
    pub(crate) passed: u32,
    /// Votes that failed or did not start with PASS/FAIL.
    pub(crate) failed: u32,
    /// Share of votes against their own criterion's majority.
    pub(crate) disagreement: f64,
}

/// One judged criterion in a case result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CriterionTally {
    /// The grader (`judge`, `contains_intent`, `tone`, ...).
    pub(crate) grader: String,
    /// What the text was judged against.
    pub(crate) criterion: String,
    /// Whether a strict majority of its votes passed.
    pub(crate) pass: bool,
    /// Votes that passed.
    pub(crate) passed: u32,
    /// Votes that failed or did not start with PASS/FAIL.
    pub(crate) failed: u32,
    /// Share of votes against the majority: 0 when all agree.
    pub(crate) disagreement: f64,
    /// Whether one vote the other way would have changed the verdict.
    pub(crate) by_one_vote: bool,
}

impl SavedCase {
    /// A saved line for a case that has no answer (a miss).
    pub(crate) fn without_answer(result: CaseResult) -> SavedCase {
        SavedCase {
            result,
            text: String::new(),
            tool_calls: Vec::new(),
        }
    }
}

/// A saved run line: the result plus what was answered.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SavedCase {
    /// The result as printed.
    #[serde(flatten)]
    pub(crate) result: CaseResult,
    /// The answer's text.
    #[serde(default)]
    pub(crate) text: String,
    /// The answer's tool calls.
    #[serde(default)]
    pub(crate) tool_calls: Vec<serde_json::Value>,
}
