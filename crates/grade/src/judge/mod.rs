//! LLM-as-judge, the one grader that is not deterministic, in its pure half: the judge
//! endpoint ([`JudgeConfig`]), the request of each vote, and the votes read and tallied. The
//! request itself is sent by whoever implements [`Ask`]: the CLI sends it through the same
//! recorder as the cases, so a verdict is recorded once and then replayed like any other tape.
//!
//! Everything that could change a verdict is in the judge request's body, and so in its key:
//! the judge model, the full prompt template, the criterion, the context, the graded text, and
//! the vote's number and count. Editing any of them asks a new question; an old verdict can
//! never answer it.

mod prompt;
mod votes;

pub use votes::{parse_verdict, Ballot, Judgement, Vote};

use crate::answer::Reply;
use crate::graders::JudgeSpec;
use crate::suite::CHAT_PATH;
use cassette_tape::{Request, DEFAULT_TARGET};
use serde_json::{json, Value};
use std::future::Future;

/// The test the judge's votes are asked for, as a recorder names the test of a request: their
/// cassettes carry it as their `meta.test`, so a review tells them from the application's, and
/// a judge vote that misses is compared with the judge's own recordings first. Spaces and the
/// parentheses keep it from being any test runner's test id.
pub const JUDGE_TEST: &str = "(cassette judge)";

/// Sends a judge request to the judge's model and brings its reply back: the one thing the
/// judge needs from outside. The CLI implements it over the recorder (replayed, recorded, or a
/// miss that stops the grading); tests implement it with canned replies.
pub trait Ask {
    /// Why a request got no reply that can be graded (a replay miss, an upstream that could not
    /// be reached): it stops the grading, and is handed back as it is.
    type Error;

    /// Sends `request` and reads the reply.
    fn ask(&self, request: Request) -> impl Future<Output = Result<Reply, Self::Error>> + Send;
}

/// The API the judge endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JudgeApi {
    /// OpenAI-compatible `/v1/chat/completions` (OpenAI, vLLM, llama.cpp, LM Studio, ...).
    Openai,
    /// Ollama `/api/chat` with `stream: false`.
    Ollama,
}

impl JudgeApi {
    /// The request path of the API when none is configured.
    pub fn default_path(self) -> &'static str {
        match self {
            JudgeApi::Openai => CHAT_PATH,
            JudgeApi::Ollama => "/api/chat",
        }
    }
}

/// The judge endpoint.
#[derive(Debug, Clone)]
pub struct JudgeConfig {
    /// Default judge model, for judge graders that name none.
    pub model: Option<String>,
    /// The route (key target) the judge is reached through.
    pub route: String,
    /// The API.
    pub api: JudgeApi,
    /// The request path.
    pub path: String,
}

impl JudgeConfig {
    /// An endpoint of `api` on the default route at the API's own path, with no default model.
    pub fn new(api: JudgeApi) -> JudgeConfig {
        JudgeConfig {
            model: None,
            route: DEFAULT_TARGET.to_owned(),
            api,
            path: api.default_path().to_owned(),
        }
    }

    /// The model for a case, or `None` when neither the case nor the endpoint names one.
    pub fn model_for<'a>(&'a self, spec: &'a JudgeSpec) -> Option<&'a str> {
        spec.model.as_deref().or(self.model.as_deref())
    }

    /// The request for one vote.
    pub fn request(&self, spec: &JudgeSpec, text: &str, vote: u32) -> Request {
        let messages = json!([
            {"role": "system", "content": prompt::INSTRUCTIONS},
            {"role": "user", "content": prompt::question(spec, text, vote)},
        ]);
        // One vote is asked deterministically; several need sampling to be independent.
        let temperature = if spec.votes > 1 { 1.0 } else { 0.0 };
        let model = self.model_for(spec).unwrap_or_default();
        let body: Value = match self.api {
            JudgeApi::Openai => json!({
                "model": model,
                "messages": messages,
                "temperature": temperature,
                "seed": vote,
                "max_tokens": 100,
            }),
            JudgeApi::Ollama => json!({
                "model": model,
                "messages": messages,
                "stream": false,
                "options": {"temperature": temperature, "seed": vote},
            }),
        };
        let mut request = Request::post_json(&self.path, &body);
        request.target = self.route.clone();
        request
    }

    /// Asks the judge `spec.votes` times about `text`, one request at a time, and tallies the
    /// votes. An error of `ask` stops the asking and is returned as it is.
    pub async fn judge<A: Ask + ?Sized>(
        &self,
        ask: &A,
        spec: &JudgeSpec,
        text: &str,
    ) -> Result<Judgement, A::Error> {
        let mut votes = Vec::with_capacity(spec.votes as usize);
        for vote in 1..=spec.votes {
            let reply = ask.ask(self.request(spec, text, vote)).await?;
            votes.push(Vote::read(reply));
        }
        Ok(Judgement::tally(spec.criterion.clone(), votes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> JudgeConfig {
        JudgeConfig {
            model: Some("judge-1".into()),
            ..JudgeConfig::new(JudgeApi::Openai)
        }
    }

    fn spec() -> JudgeSpec {
        JudgeSpec {
            criterion: "is polite".into(),
            context: None,
            votes: 1,
            model: None,
        }
    }

    #[test]
    fn every_input_of_a_verdict_is_in_its_key() {
        let keying = cassette_keying::KeyConfig::default();
        let key = |c: &JudgeConfig, s: &JudgeSpec, text: &str, vote: u32| {
            c.request(s, text, vote).key(&keying).key.to_string()
        };
        let base = key(&config(), &spec(), "Hello", 1);
        assert_eq!(base, key(&config(), &spec(), "Hello", 1));
        let other_model = JudgeConfig {
            model: Some("judge-2".into()),
            ..config()
        };
        let other_criterion = JudgeSpec {
            criterion: "is rude".into(),
            ..spec()
        };
        let with_context = JudgeSpec {
            context: Some("facts".into()),
            ..spec()
        };
        let three_votes = JudgeSpec { votes: 3, ..spec() };
        let variants = [
            key(&other_model, &spec(), "Hello", 1),
            key(&config(), &other_criterion, "Hello", 1),
            key(&config(), &with_context, "Hello", 1),
            key(&config(), &spec(), "Hello!", 1),
            key(&config(), &three_votes, "Hello", 1),
            key(&config(), &three_votes, "Hello", 2),
        ];
        for (i, variant) in variants.iter().enumerate() {
            assert_ne!(&base, variant, "variant {i} reused the base key");
        }
    }
}
