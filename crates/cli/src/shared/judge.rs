//! The judge's command-line half: its flags, shared by `cassette run` and `cassette grade` (and
//! shown by `cassette config`), over the settings file's `[judge]` table, the check that its
//! route exists, and its requests sent through the recorder as the judge's, so their cassettes
//! say so and a judge miss is compared with the judge's own recordings (the pure half, its
//! requests, prompt and votes, is `cassette_grade::judge`).

use crate::shared::call::{call_in, Stop};
use crate::shared::settings::{RecorderSettings, SettingsFile};
use anyhow::bail;
use cassette_grade::answer::Reply;
use cassette_grade::judge::{Ask, JudgeApi, JudgeConfig, JUDGE_TEST};
use cassette_recorder::{Recorder, Request, Scope};

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
    /// The judge's model, for judge graders that do not name one (`expect.model`)
    /// [default: `[judge] model` of cassette.toml, else none].
    #[arg(long, env = "CASSETTE_JUDGE_MODEL", value_name = "MODEL")]
    judge_model: Option<String>,

    /// The route (key target) the judge is reached through, e.g. `ollama` or a `--route` name
    /// [default: `[judge] route` of cassette.toml, else default].
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
    /// The judge endpoint the flags (or their variables) name, over the settings file's
    /// `[judge]` table, over the defaults.
    pub(crate) fn resolve(&self, file: &SettingsFile) -> JudgeConfig {
        let api = match self.judge_api.unwrap_or(Api::Openai) {
            Api::Openai => JudgeApi::Openai,
            Api::Ollama => JudgeApi::Ollama,
        };
        let mut judge = JudgeConfig::new(api);
        judge.model = self
            .judge_model
            .clone()
            .or_else(|| file.judge_model.clone());
        if let Some(route) = self.judge_route.as_ref().or(file.judge_route.as_ref()) {
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
            "--judge-route {:?} (or CASSETTE_JUDGE_ROUTE, or `[judge] route` in cassette.toml) \
             is not a route; mount it with --route {}=URL or a [routes.{}] table",
            judge.route,
            judge.route,
            judge.route
        );
    }
    Ok(())
}

/// The judge asked through the recorder: each vote is replayed, recorded or a miss like any
/// other request, as the judge's ([`JUDGE_TEST`]: its cassettes name it, and a miss is compared
/// with its recordings first, never with the application's when it has any there). `None`
/// until a recorder is built (`cassette grade` builds it on the first judged request); asking
/// then is an error.
pub(crate) struct Through<'a>(pub(crate) Option<&'a Recorder>);

impl Ask for Through<'_> {
    type Error = Stop;

    async fn ask(&self, request: Request) -> Result<Reply, Stop> {
        match self.0 {
            Some(recorder) => call_in(recorder, request, &Scope::test(JUDGE_TEST)).await,
            None => Err(Stop::Fatal(anyhow::anyhow!(
                "the judge was asked, and no recorder was built"
            ))),
        }
    }
}
