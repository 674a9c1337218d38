//! LLM-as-judge, the one grader that is not deterministic: the judge is asked through the same
//! recorder as the cases, so a verdict is recorded once and then replayed like any other tape.
//!
//! Everything that could change a verdict is in the judge request's body, and so in its key:
//! the judge model, the full prompt template, the criterion, the context, the graded text, and
//! the vote's number and count. Editing any of them asks a new question; an old verdict can
//! never answer it.

use super::fields::Fields;
use crate::answer::shorten;
use crate::run::call::{call, Stop, CHAT_PATH};
use crate::settings::RecorderSettings;
use anyhow::bail;
use cassette_recorder::config::DEFAULT_TARGET;
use cassette_recorder::{Recorder, Request};
use serde::Serialize;
use serde_json::{json, Value};

/// Most votes a case may ask for.
pub(crate) const MAX_VOTES: u64 = 15;

/// The instructions the judge model gets. Part of every judge key: editing it re-asks.
const INSTRUCTIONS: &str = "You are a strict evaluator of text written by an AI assistant. \
You are given a criterion, optionally some context, and the text. Decide whether the text \
meets the criterion. When context is given, the text must be grounded in it: claims the \
context does not support fail. Your reply must start with exactly one word, PASS or FAIL, \
in capitals; a one-sentence reason may follow on the same line.";

/// The judge's request for one vote. Part of every judge key: editing it re-asks.
const QUESTION: &str = "Criterion: {criterion}\n\n{context}Text:\n<<<\n{text}\n>>>\n\n\
(Vote {vote} of {votes}.) Reply PASS or FAIL first.";

/// How a case's judge is configured in the suite.
#[derive(Debug, Clone)]
pub(crate) struct JudgeSpec {
    /// What the text must do (intent, tone, groundedness...).
    pub(crate) criterion: String,
    /// Material the text must be grounded in.
    pub(crate) context: Option<String>,
    /// Independent judgements; the majority decides.
    pub(crate) votes: u32,
    /// Overrides `--judge-model` for this case.
    pub(crate) model: Option<String>,
}

/// Reads a judged case's `expect`: `criterion`, `context`, `votes` and `model`.
pub(super) fn spec(f: &Fields) -> anyhow::Result<JudgeSpec> {
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
pub(super) fn intent(f: &Fields, want: Intent) -> anyhow::Result<JudgeSpec> {
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
pub(super) fn tone(f: &Fields) -> anyhow::Result<JudgeSpec> {
    f.only(&["tone", "votes", "model"])?;
    let tone = non_empty(f, "tone")?;
    judged(f, TONE.replace("{}", tone.trim()), None)
}

/// `grounded`: `context` (required), optional `votes`, `model`.
pub(super) fn grounded(f: &Fields) -> anyhow::Result<JudgeSpec> {
    f.only(&["context", "votes", "model"])?;
    let context = non_empty(f, "context")?;
    judged(f, GROUNDED.to_owned(), Some(context))
}

fn non_empty(f: &Fields, name: &str) -> anyhow::Result<String> {
    let value = f.string(name)?;
    if value.trim().is_empty() {
        bail!("expect.{name} must not be empty");
    }
    Ok(value)
}

/// The fields every judge grader shares: `votes` and `model`.
fn judged(f: &Fields, criterion: String, context: Option<String>) -> anyhow::Result<JudgeSpec> {
    let votes = f.optional_count("votes", MAX_VOTES)?.unwrap_or(1);
    if votes == 0 {
        bail!("expect.votes must be at least 1");
    }
    Ok(JudgeSpec {
        criterion,
        context,
        votes: votes as u32,
        model: f.optional_string("model")?,
    })
}

/// The API the judge endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum JudgeApi {
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
    judge_api: Option<JudgeApi>,

    /// The judge request path [default: /v1/chat/completions, or /api/chat for ollama].
    #[arg(long, env = "CASSETTE_JUDGE_PATH", value_name = "PATH")]
    judge_path: Option<String>,
}

impl JudgeArgs {
    /// The judge endpoint the flags name.
    pub(crate) fn resolve(&self) -> JudgeConfig {
        let api = self.judge_api.unwrap_or(JudgeApi::Openai);
        JudgeConfig {
            model: self.judge_model.clone(),
            route: self
                .judge_route
                .clone()
                .unwrap_or_else(|| DEFAULT_TARGET.to_owned()),
            api,
            path: self.judge_path.clone().unwrap_or_else(|| {
                match api {
                    JudgeApi::Openai => CHAT_PATH,
                    JudgeApi::Ollama => "/api/chat",
                }
                .to_owned()
            }),
        }
    }
}

/// The judge endpoint, from the command line.
#[derive(Debug, Clone)]
pub(crate) struct JudgeConfig {
    /// Default judge model.
    pub(crate) model: Option<String>,
    /// The route (key target) the judge is reached through.
    pub(crate) route: String,
    /// The API.
    pub(crate) api: JudgeApi,
    /// The request path.
    pub(crate) path: String,
}

/// One vote.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Vote {
    /// The judge request's key.
    pub(crate) key: String,
    /// Whether it was replayed.
    pub(crate) hit: bool,
    /// `pass`, `fail`, or `invalid` when the reply did not start with PASS or FAIL.
    pub(crate) verdict: &'static str,
    /// The judge's reply, shortened.
    pub(crate) reply: String,
}

/// One criterion judged.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Judgement {
    /// What the text was judged against.
    pub(crate) criterion: String,
    /// Whether a strict majority of votes passed.
    pub(crate) pass: bool,
    /// Votes that passed.
    pub(crate) passed: u32,
    /// Votes that failed or were invalid.
    pub(crate) failed: u32,
    /// The share of votes against the majority: 0 when all agree.
    pub(crate) disagreement: f64,
    /// Each vote.
    pub(crate) votes: Vec<Vote>,
}

impl Judgement {
    /// The share of votes that passed, against the one half a strict majority must exceed.
    pub(crate) fn score(&self) -> super::deterministic::Score {
        super::deterministic::Score {
            value: f64::from(self.passed) / self.votes.len().max(1) as f64,
            threshold: 0.5,
        }
    }

    /// The verdict: `Ok` when the majority passed, else the criterion and every vote's reply.
    pub(crate) fn verdict(&self) -> Result<(), String> {
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
    pub(crate) fn decided_by_one_vote(&self) -> bool {
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
pub(crate) fn parse_verdict(reply: &str) -> Option<bool> {
    let first = reply.split_whitespace().next()?;
    match first.trim_end_matches(['.', ',', ':', ';', '!']) {
        "PASS" => Some(true),
        "FAIL" => Some(false),
        _ => None,
    }
}

impl JudgeConfig {
    /// The judge's route exists in the recorder's settings.
    pub(crate) fn check_route(&self, recorder: &RecorderSettings) -> anyhow::Result<()> {
        if recorder.config.route(&self.route).is_none() {
            bail!(
                "--judge-route {:?} is not a route; mount it with --route {}=URL",
                self.route,
                self.route
            );
        }
        Ok(())
    }

    /// The model for a case, or `None` when neither the case nor `--judge-model` names one.
    pub(crate) fn model_for<'a>(&'a self, spec: &'a JudgeSpec) -> Option<&'a str> {
        spec.model.as_deref().or(self.model.as_deref())
    }

    /// The request for one vote.
    pub(crate) fn request(&self, spec: &JudgeSpec, text: &str, vote: u32) -> Request {
        let context = match &spec.context {
            Some(context) => format!("Context:\n<<<\n{context}\n>>>\n\n"),
            None => String::new(),
        };
        let question = QUESTION
            .replace("{criterion}", &spec.criterion)
            .replace("{context}", &context)
            .replace("{vote}", &vote.to_string())
            .replace("{votes}", &spec.votes.to_string())
            .replace("{text}", text);
        let messages = json!([
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": question},
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

    /// Asks the judge `spec.votes` times about `text`.
    pub(crate) async fn judge(
        &self,
        recorder: &Recorder,
        spec: &JudgeSpec,
        text: &str,
    ) -> Result<Judgement, Stop> {
        let mut votes = Vec::with_capacity(spec.votes as usize);
        for vote in 1..=spec.votes {
            let answer = call(recorder, self.request(spec, text, vote)).await?;
            let verdict = if !(200..300).contains(&answer.status) {
                "invalid"
            } else {
                match parse_verdict(&answer.answer.text) {
                    Some(true) => "pass",
                    Some(false) => "fail",
                    None => "invalid",
                }
            };
            let reply = if (200..300).contains(&answer.status) {
                shorten(answer.answer.text.trim())
            } else {
                format!("judge answered HTTP {}", answer.status)
            };
            votes.push(Vote {
                key: answer.key,
                hit: answer.hit,
                verdict,
                reply,
            });
        }
        let passed = votes.iter().filter(|v| v.verdict == "pass").count() as u32;
        let failed = spec.votes - passed;
        let majority = passed.max(failed);
        Ok(Judgement {
            criterion: spec.criterion.clone(),
            pass: passed * 2 > spec.votes,
            passed,
            failed,
            disagreement: f64::from(spec.votes - majority) / f64::from(spec.votes),
            votes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> JudgeConfig {
        JudgeConfig {
            model: Some("judge-1".into()),
            route: "default".into(),
            api: JudgeApi::Openai,
            path: "/v1/chat/completions".into(),
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
    fn verdicts_are_parsed_strictly() {
        assert_eq!(parse_verdict("PASS"), Some(true));
        assert_eq!(parse_verdict("  FAIL. The text is rude."), Some(false));
        assert_eq!(parse_verdict("PASS: polite"), Some(true));
        for reply in ["Pass", "**PASS**", "I think PASS", "", "PASSED"] {
            assert_eq!(parse_verdict(reply), None, "{reply:?}");
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
