//! The judge's command-line half: its flags, shared by `cassette run` and `cassette grade`, the
//! check that its route exists, and its requests sent through the recorder (the pure half, its
//! requests, prompt and votes, is `cassette_grade::judge`).

use crate::shared::call::{call, Stop};
use crate::shared::settings::RecorderSettings;
use anyhow::bail;
use cassette_grade::answer::Reply;
use cassette_grade::judge::{Ask, JudgeApi, JudgeConfig};
use cassette_recorder::{Recorder, Request};

/// The API the judge endpoint speaks, as `--judge-api` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Api {
    /// OpenAI-compatible `/v1/chat/completions` (OpenAI, vLLM, llama.cpp, LM Studio, ...).
    Openai,
    /// Ollama `/api/chat` with `stream: false`.
    Ollama,
}

/// The judge's flags, shared by `cassette run` and `cassette grade`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct JudgeArgs {
    /// The judge's model, for judge graders that do not name one (`expect.model`).
    #[arg(long, env = "CASSETTE_JUDGE_MODEL", value_name = "MODEL")]
    judge_model: Option<String>,

    /// The route (key target) the judge is reached through, e.g. `ollama` or a `--route` name
    /// [default: default].
    #[arg(long, env = "CASSETTE_JUDGE_ROUTE", value_name = "NAME")]
    judge_route: Option<String>,

    /// The judge endpoint's API [default: openai].
    #[arg(long, env = "CASSETTE_JUDGE_API", value_enum)]
    judge_api: Option<Api>,

    /// The judge request path [default: /v1/chat/completions, or /api/chat for ollama].
    #[arg(long, env = "CASSETTE_JUDGE_PATH", value_name = "PATH")]
    judge_path: Option<String>,
}

impl JudgeArgs {
    /// The judge endpoint the flags name.
    pub(crate) fn resolve(&self) -> JudgeConfig {
        let api = match self.judge_api.unwrap_or(Api::Openai) {
            Api::Openai => JudgeApi::Openai,
            Api::Ollama => JudgeApi::Ollama,
        };
        let mut judge = JudgeConfig::new(api);
        judge.model = self.judge_model.clone();
        if let Some(route) = &self.judge_route {
            judge.route = route.clone();
        }
        if let Some(path) = &self.judge_path {
            judge.path = path.clone();
        }
        judge
    }
}

/// The judge's route exists in the recorder's settings.
pub(crate) fn check_route(judge: &JudgeConfig, recorder: &RecorderSettings) -> anyhow::Result<()> {
    if recorder.config.route(&judge.route).is_none() {
        bail!(
            "--judge-route {:?} is not a route; mount it with --route {}=URL",
            judge.route,
            judge.route
        );
    }
    Ok(())
}

/// The judge asked through the recorder: each vote is replayed, recorded or a miss like any
/// other request. `None` until a recorder is built (`cassette grade` builds it on the first
/// judged request); asking then is an error.
pub(crate) struct Through<'a>(pub(crate) Option<&'a Recorder>);

impl Ask for Through<'_> {
    type Error = Stop;

    async fn ask(&self, request: Request) -> Result<Reply, Stop> {
        match self.0 {
            Some(recorder) => call(recorder, request).await,
            None => Err(Stop::Fatal(anyhow::anyhow!(
                "the judge was asked, and no recorder was built"
            ))),
        }
    }
}
