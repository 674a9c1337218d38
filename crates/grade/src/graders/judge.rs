//! The judge graders, built from a case's `expect`: `judge` with the suite's own criterion,
//! and `contains_intent`, `not_contains_intent`, `tone` and `grounded`, which are the judge with
//! a fixed criterion. Each gives a [`JudgeSpec`]; how the judge is asked and its votes counted
//! is [`crate::judge`].

use super::fields::Fields;
use crate::error::{bail, Result};

/// Most votes a case may ask for.
pub const MAX_VOTES: u64 = 15;

/// How a case's judge is configured in the suite.
#[derive(Debug, Clone)]
pub struct JudgeSpec {
    /// What the text must do (intent, tone, groundedness...).
    pub criterion: String,
    /// Material the text must be grounded in.
    pub context: Option<String>,
    /// Independent judgements; the majority decides.
    pub votes: u32,
    /// The judge's model for this case, over the endpoint's default.
    pub model: Option<String>,
}

/// Reads a judged case's `expect`: `criterion`, `context`, `votes` and `model`.
pub(super) fn spec(f: &Fields) -> Result<JudgeSpec> {
    f.only(&["criterion", "context", "votes", "model"])?;
    let criterion = non_empty(f, "criterion")?;
    judged(f, criterion, f.optional_string("context")?)
}

/// Criteria of the judge graders that name what the text must do rather than spell out a
/// criterion. Each template is part of the judge's question, and so of every key it is asked
/// under: editing one re-asks every verdict of its grader.
const INTENT: &str = "The text expresses this intent: {}";
const NOT_INTENT: &str = "The text does not express this intent: {}";
const TONE: &str = "The tone of the text is {}";
const GROUNDED: &str = "Every claim the text makes is supported by the context";

/// Whether `contains_intent` asks for the intent or for its absence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Intent {
    /// `contains_intent`.
    Present,
    /// `not_contains_intent`.
    Absent,
}

/// `contains_intent` and `not_contains_intent`: `intent`, optional `context`, `votes`, `model`.
pub(super) fn intent(f: &Fields, want: Intent) -> Result<JudgeSpec> {
    f.only(&["intent", "context", "votes", "model"])?;
    let intent = non_empty(f, "intent")?;
    let template = match want {
        Intent::Present => INTENT,
        Intent::Absent => NOT_INTENT,
    };
    judged(
        f,
        template.replace("{}", intent.trim()),
        f.optional_string("context")?,
    )
}

/// `tone`: `tone`, optional `votes`, `model`.
pub(super) fn tone(f: &Fields) -> Result<JudgeSpec> {
    f.only(&["tone", "votes", "model"])?;
    let tone = non_empty(f, "tone")?;
    judged(f, TONE.replace("{}", tone.trim()), None)
}

/// `grounded`: `context` (required), optional `votes`, `model`.
pub(super) fn grounded(f: &Fields) -> Result<JudgeSpec> {
    f.only(&["context", "votes", "model"])?;
    let context = non_empty(f, "context")?;
    judged(f, GROUNDED.to_owned(), Some(context))
}

fn non_empty(f: &Fields, name: &str) -> Result<String> {
    let value = f.string(name)?;
    if value.trim().is_empty() {
        bail!(grader, "expect.{name} must not be empty");
    }
    Ok(value)
}

/// The fields every judge grader shares: `votes` and `model`.
fn judged(f: &Fields, criterion: String, context: Option<String>) -> Result<JudgeSpec> {
    let votes = f.optional_count("votes", MAX_VOTES)?.unwrap_or(1);
    if votes == 0 {
        bail!(grader, "expect.votes must be at least 1");
    }
    Ok(JudgeSpec {
        criterion,
        context,
        votes: votes as u32,
        model: f.optional_string("model")?,
    })
}
