//! `cassette grade`: one expectation of an ordinary test (pytest, vitest, jest) graded by the
//! suite runner's own graders, judge included, through the recorder: a judge verdict is
//! recorded in record mode, replayed in replay mode, and missing in replay is a miss that
//! explains itself, as any other request. Behind a cassette proxy (`cassette exec`, the pytest
//! plugin, the vitest and jest helpers) the votes go through that proxy instead, which holds
//! the real keys and counts the miss for the test running.
//!
//! A request is JSON: the answer (`text`, or a whole provider `response` read with the
//! recorder's own normalization), and the grader with its expectation exactly as a suite case
//! gives them (`grader`, `expect`). The answer is JSON too. `--jsonl` serves one request a line
//! on stdin and answers one line each on stdout until stdin closes: the Python and Node helpers
//! start it once per test session, so a replayed verdict costs a pipe round trip instead of a
//! process. The recorder is built on the first judged request, so a session that only checks
//! text never opens the store.
//!
//! Exit status of a single request: 0 it passed, 1 it failed, 2 a replay miss or an error. With
//! `--jsonl`, each line carries its own verdict and the exit status is 0 unless stdin or stdout
//! failed.

use crate::shared::call::Stop;
use crate::shared::judge::{self, JudgeArgs, Through};
use crate::shared::miss::miss_lines;
use crate::shared::runtime::EXIT_ERROR;
use crate::shared::settings::{RecorderArgs, RecorderSettings, SettingsFile};
use anyhow::{bail, Context};
use cassette_grade::answer::{self, Answer};
use cassette_grade::graders::{self, Check, Grader};
use cassette_grade::grading::{self, Graded};
use cassette_grade::judge::{JudgeConfig, Judgement};
use cassette_keying::Profile;
use cassette_recorder::config::DEFAULT_TARGET;
use cassette_recorder::{Miss, Mode, Recorder};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `cassette grade`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "A request (one JSON object; with --jsonl, one a line):\n  \
{\"text\": \"...\" | \"response\": {...}, \"grader\": NAME | [...], \"expect\": {...}, \"id\": ANY}\n\
The grader and expect are a suite case's (docs/suite.md); `response` is a whole OpenAI chat, \
Responses, Anthropic, Gemini or Ollama response. The answer: {\"id\", \"verdict\": \
\"pass\"|\"fail\"|\"miss\"|\"error\", \"message\", \"graders\": [...], \"answer\", \"miss\"}.\n\
Exit status: 0 pass, 1 fail, 2 a replay miss or an error; with --jsonl 0 unless stdin or \
stdout failed (each line has its verdict).\n\nExamples:\n  \
echo '{\"text\":\"Paris\",\"grader\":\"contains\",\"expect\":{\"needle\":\"paris\"}}' | cassette grade\n  \
cassette grade --jsonl --judge-model gpt-4o-mini   # what the test helpers run"
)]
pub(crate) struct GradeArgs {
    /// A file holding the request [default: stdin].
    #[arg(value_name = "REQUEST.json", conflicts_with = "jsonl")]
    request: Option<PathBuf>,

    /// Answer requests one JSON line at a time on stdin, one JSON line each on stdout, until
    /// stdin closes.
    #[arg(long)]
    jsonl: bool,

    #[command(flatten)]
    recorder: RecorderArgs,

    #[command(flatten)]
    judge: JudgeArgs,
}

/// One expectation to grade.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    /// Echoed in the answer, so a caller can match answers to requests.
    #[serde(default)]
    id: Option<Value>,
    /// The answer's text.
    #[serde(default)]
    text: Option<String>,
    /// A whole provider response, read as `cassette run` reads a case's answer.
    #[serde(default)]
    response: Option<Value>,
    /// The grader or graders, as a suite case names them.
    #[serde(default)]
    grader: Option<Value>,
    /// Their fields.
    #[serde(default)]
    expect: Option<Value>,
}

/// What a request's grading came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Verdict {
    /// Every grader passed.
    Pass,
    /// A grader failed.
    Fail,
    /// A judge vote had no recording in replay.
    Miss,
    /// The request was bad, or the judge could not be asked.
    Error,
    /// No grader was named: the answer was only read.
    Read,
}

/// The answer to one request.
#[derive(Debug, Serialize)]
struct Answered {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<Value>,
    verdict: Verdict,
    /// Whether every judge vote was replayed (true when nothing was judged).
    hit: bool,
    /// For a failure, a miss or an error: what an assertion says, one line per failing grader
    /// (and per vote of a failing judge), or the miss explained.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    /// Each grader's outcome, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    graders: Vec<GraderAnswer>,
    /// The answer as the graders read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    answer: Option<Answer>,
    /// The miss, for a miss.
    #[serde(skip_serializing_if = "Option::is_none")]
    miss: Option<MissAnswer>,
}

/// One grader's outcome.
#[derive(Debug, Serialize)]
struct GraderAnswer {
    grader: &'static str,
    verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    threshold: Option<f64>,
    /// For a judge: the criterion, the tally and each vote.
    #[serde(skip_serializing_if = "Option::is_none")]
    judge: Option<Judgement>,
}

/// A judge vote's miss.
#[derive(Debug, Serialize)]
struct MissAnswer {
    key: String,
    request: String,
    summary: String,
    explanation: Vec<String>,
}

/// Runs `cassette grade`.
pub(crate) fn run(args: GradeArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    // Validated before anything is read, as every command does; the store is opened on the
    // first judged request.
    let settings = args.recorder.resolve(file)?;
    let mut grader = Session {
        judge: args.judge.resolve(file),
        settings: Some(settings),
        recorder: None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    if args.jsonl {
        let code = serve_lines(&mut grader, &runtime);
        grader.finish(&runtime);
        return code;
    }
    let text = match &args.request {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the request {}", path.display()))?,
        None => std::io::read_to_string(std::io::stdin()).context("cannot read stdin")?,
    };
    let answered = grader.answer(&runtime, &text);
    grader.finish(&runtime);
    if let (Verdict::Miss | Verdict::Error, Some(message)) = (answered.verdict, &answered.message) {
        eprintln!("cassette grade: {message}");
    }
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &answered)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(match answered.verdict {
        Verdict::Pass | Verdict::Read => ExitCode::SUCCESS,
        Verdict::Fail => ExitCode::from(1),
        Verdict::Miss | Verdict::Error => ExitCode::from(EXIT_ERROR),
    })
}

/// Answers lines until stdin closes. Each line gets one answer line, whatever it held.
fn serve_lines(
    grader: &mut Session,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line).context("cannot read stdin")? == 0 {
            return Ok(ExitCode::SUCCESS);
        }
        if line.trim().is_empty() {
            continue;
        }
        let answered = grader.answer(runtime, &line);
        serde_json::to_writer(&mut out, &answered)?;
        out.write_all(b"\n")?;
        // The caller waits for this line before it sends the next request.
        out.flush().context("cannot write the answer to stdout")?;
    }
}

/// What one grade process keeps between requests: the judge, and the recorder once built.
struct Session {
    judge: JudgeConfig,
    /// The recorder's settings until it is built.
    settings: Option<RecorderSettings>,
    recorder: Option<Recorder>,
}

impl Session {
    /// Grades one request's text; never fails, an error is an answer.
    fn answer(&mut self, runtime: &tokio::runtime::Runtime, text: &str) -> Answered {
        let request: Request = match serde_json::from_str(text) {
            Ok(request) => request,
            Err(err) => return error(None, format!("the request is not a grade request: {err}")),
        };
        let id = request.id.clone();
        match self.prepare(request) {
            Ok((answer, None)) => Answered {
                id,
                verdict: Verdict::Read,
                hit: true,
                message: None,
                graders: Vec::new(),
                answer: Some(answer),
                miss: None,
            },
            Ok((answer, Some(graders))) => {
                let asked = Through(self.recorder.as_ref());
                match runtime.block_on(grading::grade(&asked, &self.judge, &graders, &answer)) {
                    Ok(graded) => answered(id, answer, &graded),
                    Err(Stop::Miss(miss)) => missed(id, answer, &miss),
                    Err(Stop::Fatal(err)) => error(id, format!("{err:#}")),
                }
            }
            Err(err) => error(id, format!("{err:#}")),
        }
    }

    /// The answer and its graders, with the recorder built when a grader asks the judge.
    fn prepare(&mut self, request: Request) -> anyhow::Result<(Answer, Option<Vec<Grader>>)> {
        let answer = match (request.text, request.response) {
            (Some(text), None) => Answer {
                text,
                ..Answer::default()
            },
            (None, Some(response)) => answer::from_json(Profile::Http, &response),
            (Some(_), Some(_)) => bail!("give the answer as \"text\" or as \"response\", not both"),
            (None, None) => bail!("the request has no answer: give \"text\" or \"response\""),
        };
        let Some(grader) = request.grader else {
            if request.expect.is_some() {
                bail!("\"expect\" without \"grader\": name the grader");
            }
            return Ok((answer, None));
        };
        let graders = graders::from_case(Some(&grader), request.expect.as_ref())?;
        for grader in &graders {
            if let Check::Judge(spec) = &grader.check {
                if self.judge.model_for(spec).is_none() {
                    bail!(
                        "grader {:?} asks the judge, which has no model: set --judge-model (or CASSETTE_JUDGE_MODEL) or expect.model",
                        grader.name
                    );
                }
            }
        }
        if grading::needs_judge(&graders) && self.recorder.is_none() {
            self.build_recorder()?;
        }
        Ok((answer, Some(graders)))
    }

    fn build_recorder(&mut self) -> anyhow::Result<()> {
        let Some(mut settings) = self.settings.take() else {
            bail!("the recorder could not be built (see the first error)");
        };
        judge::check_route(&self.judge, &settings)?;
        if let Some(proxy) = std::env::var(PROXY_URL_ENV)
            .ok()
            .filter(|url| !url.trim().is_empty())
        {
            relay_to(&mut settings, proxy.trim().trim_end_matches('/'));
        }
        self.recorder = Some(settings.build()?);
        Ok(())
    }

    /// Writes the index of what was recorded.
    fn finish(&self, runtime: &tokio::runtime::Runtime) {
        if let Some(recorder) = &self.recorder {
            runtime.block_on(crate::shared::runtime::flush_index(recorder));
        }
    }
}

/// Set by `cassette exec` and the test runner plugins for the command behind their proxy.
const PROXY_URL_ENV: &str = "CASSETTE_PROXY_URL";

/// Behind a cassette proxy, the judge is asked through it: that proxy holds the routes' real
/// keys (this process sees only placeholders), records and replays in its own store, and
/// counts a miss for the test running, so `exec` exits 2 on it and the pytest plugin fails that
/// test. This process only passes the votes on (mode off: no store is opened, nothing is
/// written twice), each route to its mount on the proxy, with no key of its own.
fn relay_to(settings: &mut RecorderSettings, proxy: &str) {
    settings.config.mode = Mode::Off;
    settings.cache = None;
    settings.usage_log = None;
    for route in &mut settings.config.routes {
        route.base_url = if route.name == DEFAULT_TARGET {
            proxy.to_owned()
        } else {
            format!("{proxy}/{}", route.name)
        };
        route.api_key = None;
    }
}

fn answered(id: Option<Value>, answer: Answer, graded: &Graded) -> Answered {
    let graders: Vec<GraderAnswer> = graded
        .outcomes
        .iter()
        .map(|o| GraderAnswer {
            grader: o.grader,
            verdict: if o.verdict.is_ok() {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            reason: o.verdict.as_ref().err().cloned(),
            score: o.score.map(|s| grading::round(s.value)),
            threshold: o.score.map(|s| s.threshold),
            judge: o.judgement.clone(),
        })
        .collect();
    let mut message = Vec::new();
    for (outcome, grader) in graded.outcomes.iter().zip(&graders) {
        let Err(reason) = &outcome.verdict else {
            continue;
        };
        match &outcome.judgement {
            Some(judgement) => {
                message.push(format!(
                    "{} failed: criterion {:?}: {} of {} votes passed",
                    grader.grader,
                    judgement.criterion,
                    judgement.passed,
                    judgement.votes.len()
                ));
                let count = judgement.votes.len();
                for (i, vote) in judgement.votes.iter().enumerate() {
                    message.push(format!(
                        "  vote {} of {count}: {}: {}",
                        i + 1,
                        vote.verdict,
                        vote.reply
                    ));
                }
            }
            None => message.push(format!("{} failed: {reason}", grader.grader)),
        }
    }
    Answered {
        id,
        verdict: if graded.passed() {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        hit: graded.hit,
        message: (!message.is_empty()).then(|| message.join("\n")),
        graders,
        answer: Some(answer),
        miss: None,
    }
}

fn missed(id: Option<Value>, answer: Answer, miss: &Miss) -> Answered {
    let mut lines = vec![format!(
        "replay miss: the judge's verdict is not recorded ({})",
        miss.explanation.summary
    )];
    lines.extend(miss_lines(miss));
    Answered {
        id,
        verdict: Verdict::Miss,
        hit: false,
        message: Some(lines.join("\n")),
        graders: Vec::new(),
        answer: Some(answer),
        miss: Some(MissAnswer {
            key: miss.key.to_string(),
            request: miss.request_line(),
            summary: miss.explanation.summary.clone(),
            explanation: miss.explanation_lines(),
        }),
    }
}

fn error(id: Option<Value>, message: String) -> Answered {
    Answered {
        id,
        verdict: Verdict::Error,
        hit: true,
        message: Some(message),
        graders: Vec::new(),
        answer: None,
        miss: None,
    }
}
