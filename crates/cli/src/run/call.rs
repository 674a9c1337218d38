//! One request through the recorder and its answer read out: what a case and each judge vote
//! do.

use crate::answer::{self, Answer};
use cassette_keying::Profile;
use cassette_recorder::{Error, Miss, Recorder, Request, Source};

/// Why a run stops early.
pub(crate) enum Stop {
    /// Replay found no cassette.
    Miss(Box<Miss>),
    /// Anything else that is not a verdict.
    Fatal(anyhow::Error),
}

/// One request's answer.
pub(crate) struct Called {
    /// Its key.
    pub(crate) key: String,
    /// Whether it was replayed.
    pub(crate) hit: bool,
    /// HTTP status.
    pub(crate) status: u16,
    /// What it said.
    pub(crate) answer: Answer,
}

/// Sends one request through the recorder and reads the answer.
pub(crate) async fn call(recorder: &Recorder, request: Request) -> Result<Called, Stop> {
    let profile = Profile::from_path(&request.path);
    match recorder.handle(request).await {
        Ok(outcome) => {
            let status = outcome.response.status;
            let key = outcome.key.to_string();
            let body = outcome.response.into_bytes().await.map_err(|e| {
                Stop::Fatal(anyhow::Error::new(e).context(format!("reading the answer for {key}")))
            })?;
            Ok(Called {
                hit: outcome.source == Source::Replayed,
                status,
                answer: redacted_answer(recorder, profile, &body),
                key,
            })
        }
        Err(Error::Miss(miss)) => Err(Stop::Miss(miss)),
        Err(other) => Err(Stop::Fatal(other.into())),
    }
}

/// The answer read out of `body` after the recorder's own redaction of a stored response body
/// (credential names and shapes, the routes' keys, the user's paths and patterns): what a
/// recording stores is all a result line, a saved run, a JUnit report or a grader ever sees,
/// so a live answer and its replay grade, print and save alike, and a key the model streamed
/// or an upstream echoed never reaches `.cassette/runs/`.
pub(crate) fn redacted_answer(recorder: &Recorder, profile: Profile, body: &[u8]) -> Answer {
    let redactor = recorder.redactor();
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(mut value) => {
            redactor.json(&mut value);
            answer::from_json(profile, &value)
        }
        Err(_) => answer::from_bytes(
            profile,
            redactor.text(&String::from_utf8_lossy(body)).as_bytes(),
        ),
    }
}
