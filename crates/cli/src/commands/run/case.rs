//! One case: its request through the recorder, then its graders (and for a judge grader, the
//! judge's votes through the same recorder), into the result line `cassette run` prints.

use crate::shared::call::{call, Stop};
use crate::shared::judge::Through;
use cassette_grade::answer::Answer;
use cassette_grade::grading::grade_case;
use cassette_grade::judge::JudgeConfig;
use cassette_grade::result::CaseResult;
use cassette_grade::suite::Case;
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
    let reply = call(recorder, case.request.clone()).await?;
    let mut result = grade_case(&Through(Some(recorder)), judge, case, &reply).await?;
    // A reason quotes the answer and the case: printed and written as a cassette would be.
    result.redact(recorder.redactor());
    Ok(Done {
        result,
        answer: reply.answer,
        seconds: started.elapsed().as_secs_f64(),
    })
}
