//! The judge's votes: a reply read strictly as PASS or FAIL, and the votes of one criterion
//! tallied into its verdict (a strict majority passes), with the numbers that say how far the
//! verdict can be trusted.

use crate::answer::{shorten, Reply};
use crate::graders::Score;
use serde::Serialize;
use std::fmt;

/// What one vote said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ballot {
    /// The reply started with PASS.
    Pass,
    /// The reply started with FAIL.
    Fail,
    /// The reply started with neither, or the judge answered an error status.
    Invalid,
}

impl Ballot {
    /// The ballot as printed and serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Ballot::Pass => "pass",
            Ballot::Fail => "fail",
            Ballot::Invalid => "invalid",
        }
    }
}

impl fmt::Display for Ballot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One vote.
#[derive(Debug, Clone, Serialize)]
pub struct Vote {
    /// The judge request's key.
    pub key: String,
    /// Whether it was replayed.
    pub hit: bool,
    /// `pass`, `fail`, or `invalid` when the reply did not start with PASS or FAIL.
    pub verdict: Ballot,
    /// The judge's reply, shortened.
    pub reply: String,
}

impl Vote {
    /// The vote a judge's reply casts: its first word read by [`parse_verdict`] when the judge
    /// answered a success, else an invalid vote naming the status.
    pub fn read(reply: Reply) -> Vote {
        let success = reply.succeeded();
        let verdict = match success.then(|| parse_verdict(&reply.answer.text)).flatten() {
            Some(true) => Ballot::Pass,
            Some(false) => Ballot::Fail,
            None => Ballot::Invalid,
        };
        Vote {
            key: reply.key,
            hit: reply.hit,
            verdict,
            reply: if success {
                shorten(reply.answer.text.trim())
            } else {
                format!("judge answered HTTP {}", reply.status)
            },
        }
    }
}

/// One criterion judged.
#[derive(Debug, Clone, Serialize)]
pub struct Judgement {
    /// What the text was judged against.
    pub criterion: String,
    /// Whether a strict majority of votes passed.
    pub pass: bool,
    /// Votes that passed.
    pub passed: u32,
    /// Votes that failed or were invalid.
    pub failed: u32,
    /// The share of votes against the majority: 0 when all agree.
    pub disagreement: f64,
    /// Each vote.
    pub votes: Vec<Vote>,
}

impl Judgement {
    /// The votes on `criterion` counted: it passes when more than half of them passed.
    pub fn tally(criterion: String, votes: Vec<Vote>) -> Judgement {
        let total = votes.len() as u32;
        let passed = votes.iter().filter(|v| v.verdict == Ballot::Pass).count() as u32;
        let failed = total - passed;
        let majority = passed.max(failed);
        Judgement {
            criterion,
            pass: passed * 2 > total,
            passed,
            failed,
            disagreement: f64::from(total - majority) / f64::from(total.max(1)),
            votes,
        }
    }

    /// The share of votes that passed, against the one half a strict majority must exceed.
    pub fn score(&self) -> Score {
        Score {
            value: f64::from(self.passed) / self.votes.len().max(1) as f64,
            threshold: 0.5,
        }
    }

    /// The verdict: `Ok` when the majority passed, else the criterion and every vote's reply.
    pub fn verdict(&self) -> Result<(), String> {
        if self.pass {
            return Ok(());
        }
        let replies: Vec<String> = self
            .votes
            .iter()
            .map(|v| format!("{}: {}", v.verdict, v.reply))
            .collect();
        Err(format!(
            "criterion {:?}: {} of {} votes passed ({})",
            self.criterion,
            self.passed,
            self.votes.len(),
            replies.join(" | ")
        ))
    }

    /// Whether changing one vote would change the verdict (a single vote always would).
    pub fn decided_by_one_vote(&self) -> bool {
        let total = self.votes.len() as u32;
        if self.pass {
            (self.passed - 1) * 2 <= total
        } else {
            (self.passed + 1) * 2 > total
        }
    }
}

/// Reads a verdict from the first token of a judge reply. Strict on purpose: `PASS` or `FAIL`
/// in capitals, optionally followed by punctuation; anything else (`**PASS**`, `Pass`,
/// `I think PASS`) is not a verdict, so a chatty judge shows up as invalid votes rather than
/// as quietly guessed ones.
pub fn parse_verdict(reply: &str) -> Option<bool> {
    let first = reply.split_whitespace().next()?;
    match first.trim_end_matches(['.', ',', ':', ';', '!']) {
        "PASS" => Some(true),
        "FAIL" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_parsed_strictly() {
        assert_eq!(parse_verdict("PASS"), Some(true));
        assert_eq!(parse_verdict("  FAIL. The text is rude."), Some(false));
        assert_eq!(parse_verdict("PASS: polite"), Some(true));
        for reply in ["Pass", "**PASS**", "I think PASS", "", "PASSED"] {
            assert_eq!(parse_verdict(reply), None, "{reply:?}");
        }
    }
}
