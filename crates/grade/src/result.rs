//! What a suite run reports per case: the verdict, the result line printed and saved, the saved
//! run line (what `diff-runs` and `canary` read), and the judge's line of the run's summary.

use crate::answer::Answer;
use cassette_tape::redact::Redactor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A case's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The grader passed.
    Pass,
    /// The grader failed, or the upstream answered an error.
    Fail,
    /// A request of the case (its own or a judge vote) had no recording in replay.
    Miss,
}

impl Verdict {
    /// The verdict as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Miss => "miss",
        }
    }
}

/// One case's result: the line printed, and the one saved with the answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    /// The case id.
    pub id: String,
    /// Whether every request of the case (including judge votes) was replayed.
    pub hit: bool,
    /// The verdict.
    pub verdict: Verdict,
    /// The answer's finish reason.
    pub finish: Option<String>,
    /// The case request's key, or for a miss the key that missed.
    pub key: String,
    /// Why the verdict failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For a miss: the explanation's one-line summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The judge's votes over all its criteria, for judged cases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeTally>,
    /// Each judged criterion's votes, for judged cases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub judges: Vec<CriterionTally>,
    /// The score closest to flipping its verdict, when a grader scores (for `cassette canary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Where that score flips the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// Every grader's score, when the case has several scoring graders.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<GraderScore>,
}

/// One grader's score in a case result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GraderScore {
    /// The grader.
    pub grader: String,
    /// Its score, from 0 to 1.
    pub score: f64,
    /// Where its verdict flips.
    pub threshold: f64,
}

/// The judge's tally in a case result, over every criterion the case judges.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JudgeTally {
    /// Votes that passed.
    pub passed: u32,
    /// Votes that failed or did not start with PASS/FAIL.
    pub failed: u32,
    /// Share of votes against their own criterion's majority.
    pub disagreement: f64,
}

/// One judged criterion in a case result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CriterionTally {
    /// The grader (`judge`, `contains_intent`, `tone`, ...).
    pub grader: String,
    /// What the text was judged against.
    pub criterion: String,
    /// Whether a strict majority of its votes passed.
    pub pass: bool,
    /// Votes that passed.
    pub passed: u32,
    /// Votes that failed or did not start with PASS/FAIL.
    pub failed: u32,
    /// Share of votes against the majority: 0 when all agree.
    pub disagreement: f64,
    /// Whether one vote the other way would have changed the verdict.
    pub by_one_vote: bool,
}

impl CaseResult {
    /// The result line of a case that missed: the key that missed and the one-line summary of
    /// why.
    pub fn missed(id: String, key: String, summary: String) -> CaseResult {
        CaseResult {
            id,
            hit: false,
            verdict: Verdict::Miss,
            finish: None,
            key,
            reason: None,
            summary: Some(summary),
            judge: None,
            judges: Vec::new(),
            score: None,
            threshold: None,
            scores: Vec::new(),
        }
    }

    /// Redacts every text of the result with `redactor` (the recorder's, as the cassettes
    /// are), as it is printed and written. Every field is named, so one added does not compile
    /// until it is redacted or said to hold no text.
    pub fn redact(&mut self, redactor: &Redactor) {
        let CaseResult {
            id,
            hit: _,
            verdict: _,
            finish,
            // The hash the recording is stored under: an identifier, never a secret's place.
            key: _,
            reason,
            summary,
            judge: _,
            judges,
            score: _,
            threshold: _,
            scores,
        } = self;
        *id = redactor.text(id);
        for text in [finish, reason, summary].into_iter().flatten() {
            *text = redactor.text(text);
        }
        for tally in judges {
            tally.grader = redactor.text(&tally.grader);
            tally.criterion = redactor.text(&tally.criterion);
        }
        for score in scores {
            score.grader = redactor.text(&score.grader);
        }
    }
}

/// How far a run's judge verdicts can be trusted, for its summary: how many there were, the
/// disagreement (flip) rate, the share of verdicts asked with several votes whose votes split,
/// how many of those one vote the other way would have flipped, and how many rest on a single
/// vote. `None` when nothing was judged.
pub fn judge_summary<'a>(results: impl IntoIterator<Item = &'a CaseResult>) -> Option<String> {
    let verdicts: Vec<&CriterionTally> = results.into_iter().flat_map(|r| &r.judges).collect();
    if verdicts.is_empty() {
        return None;
    }
    let criteria: BTreeSet<&str> = verdicts.iter().map(|v| v.criterion.as_str()).collect();
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

impl SavedCase {
    /// The saved line of a case that reached a verdict: its result and what was answered.
    pub fn answered(result: CaseResult, answer: &Answer) -> SavedCase {
        SavedCase {
            result,
            text: answer.text.clone(),
            tool_calls: answer
                .tool_calls
                .iter()
                .map(|call| serde_json::json!({"name": call.name, "arguments": call.arguments}))
                .collect(),
        }
    }

    /// Redacts the line with `redactor`, as a saved run is written: its result, its text and
    /// its tool calls.
    pub fn redact(&mut self, redactor: &Redactor) {
        let SavedCase {
            result,
            text,
            tool_calls,
        } = self;
        result.redact(redactor);
        *text = redactor.text(text);
        for call in tool_calls {
            redactor.json(call);
        }
    }

    /// A saved line for a case that has no answer (a miss).
    pub fn without_answer(result: CaseResult) -> SavedCase {
        SavedCase {
            result,
            text: String::new(),
            tool_calls: Vec::new(),
        }
    }
}

/// A saved run line: the result plus what was answered.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedCase {
    /// The result as printed.
    #[serde(flatten)]
    pub result: CaseResult,
    /// The answer's text.
    #[serde(default)]
    pub text: String,
    /// The answer's tool calls.
    #[serde(default)]
    pub tool_calls: Vec<serde_json::Value>,
}
