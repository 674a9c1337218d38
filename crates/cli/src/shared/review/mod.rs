//! The command line's side of reviews (`cassette-review` renders them): where they are written
//! (`output`: files written whole, the GitHub step summary appended to), the redaction they go
//! through, built from the settings file and the routes' keys (`redact`), when `cassette diff`
//! fails, and the words a review uses for this command line's flags and variables.

pub(crate) mod output;
pub(crate) mod redact;

use cassette_grade::answer::Answer;
use cassette_recorder::Cassette;
use cassette_review::{Drift, Facts};
use cassette_wire::ResponseSummary;

/// How a review tells its reader to record what missed.
pub(crate) const RECORD: &str = "CASSETTE_MODE=record";

/// How a summary of `cassette diff` names the whole review.
pub(crate) const WHOLE_DIFF: &str = "cassette diff --html";

/// How a review tells its reader to delete the recordings a re-record replaced that its
/// store still holds: a replay of everything that logs the keys it uses, then the collector
/// of the ones it did not (never one something still replays).
pub(crate) const STALE: &str = "a replay of every suite and test with --usage-log used.log, \
then cassette gc --unused --usage-log used.log";

/// When `cassette diff` exits 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FailOn {
    /// Any verdict but `same` (a reworded answer too).
    Reworded,
    /// A `changed`, `added` or `removed` verdict; reworded answers pass.
    Changed,
}

impl FailOn {
    /// Whether `verdict` fails the run.
    pub(crate) fn fails(self, verdict: Drift) -> bool {
        match self {
            FailOn::Reworded => verdict >= Drift::Reworded,
            FailOn::Changed => verdict >= Drift::Added,
        }
    }
}

/// An answer as a review reads it.
fn summary(answer: Answer) -> ResponseSummary {
    ResponseSummary {
        model: answer.model,
        finish_reason: answer.finish,
        usage: None,
        text: answer.text,
        tool_calls: answer.tool_calls,
    }
}

/// The facts of a cassette's answer, read as every command reads answers (a route whose path
/// names no API may well serve one: see `answer::from_json`).
pub(crate) fn facts(cassette: &Cassette) -> Facts {
    Facts::of(
        cassette,
        summary(crate::shared::cassettes::cassette_answer(cassette)),
    )
}

/// The facts of an answer a run got (no cassette: no status to compare, no usage).
pub(crate) fn answer_facts(answer: Answer) -> Facts {
    Facts {
        status: 0,
        text: answer.text,
        tool_calls: answer.tool_calls,
        model: answer.model,
        finish: answer.finish,
        usage: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_on_reads_the_severity_ladder() {
        assert!(!FailOn::Changed.fails(Drift::Reworded));
        assert!(FailOn::Changed.fails(Drift::Added));
        assert!(FailOn::Changed.fails(Drift::Removed));
        assert!(FailOn::Changed.fails(Drift::Changed));
        assert!(FailOn::Reworded.fails(Drift::Reworded));
        assert!(!FailOn::Reworded.fails(Drift::Same));
        assert_eq!(Drift::BY_SEVERITY[0], Drift::Changed);
    }
}
