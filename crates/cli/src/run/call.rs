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
                answer: answer::from_bytes(profile, &body),
                key,
            })
        }
        Err(Error::Miss(miss)) => Err(Stop::Miss(miss)),
        Err(other) => Err(Stop::Fatal(other.into())),
    }
}
