//! `cassette run SUITE.jsonl`: a prompt regression suite through the recorder, configured
//! exactly as the proxy is, with graders looked up by name.
//!
//! Exit status: 2 on the first replay miss (the key and explanation are printed and the run
//! stops) or on any other error, else 1 when a verdict failed, else 0. Cases run concurrently
//! (`--jobs`) but are reported in suite order.

mod call;
pub(crate) mod graders;
pub(crate) mod junit;
pub(crate) mod suite;

use crate::answer::{self, Answer, ToolCall};
use crate::settings::RecorderArgs;
use anyhow::{anyhow, bail, Context};
use call::{call, Stop};
use cassette_recorder::{Miss, Recorder};
use futures::StreamExt;
use graders::judge::{JudgeApi, JudgeConfig, Judgement};
use graders::Check;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use suite::Case;

/// Where `--save-run` keeps runs, relative to the working directory.
pub(crate) const RUNS_DIR: &str = ".cassette/runs";

/// Arguments of `cassette run`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 all cases passed, 1 a verdict failed, 2 a replay miss \
(the run stops at the first) or another error.\n\nExamples:\n  \
cassette run examples/suite/suite.jsonl --store file://examples/suite/cassettes\n  \
CASSETTE_MODE=record UPSTREAM_API_KEY=sk-... cassette run suite.jsonl --judge-model gpt-4o-mini\n  \
cassette run suite.jsonl --junit report.xml --save-run main"
)]
pub(crate) struct RunArgs {
    /// The suite: JSON Lines, one case a line (see docs/suite.md).
    #[arg(value_name = "SUITE.jsonl")]
    suite: PathBuf,

    #[command(flatten)]
    recorder: RecorderArgs,

    /// Cases in flight at once; output stays in suite order.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=512))]
    jobs: u16,

    /// Also write a JUnit XML report to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,

    /// Keep every case's output and verdict as NAME, for `cassette diff-runs`.
    #[arg(long, value_name = "NAME")]
    save_run: Option<String>,

    /// Where saved runs are kept.
    #[arg(long, value_name = "DIR", default_value = RUNS_DIR)]
    runs_dir: PathBuf,

    /// The judge's model, for cases graded by `judge` that do not name one.
    #[arg(long, env = "CASSETTE_JUDGE_MODEL", value_name = "MODEL")]
    judge_model: Option<String>,

    /// The route (key target) the judge is reached through, e.g. `ollama` or a `--route` name.
    #[arg(long, default_value = "default", value_name = "NAME")]
    judge_route: String,

    /// The judge endpoint's API.
    #[arg(long, value_enum, default_value = "openai")]
    judge_api: JudgeApi,

    /// The judge request path [default: /v1/chat/completions, or /api/chat for ollama].
    #[arg(long, value_name = "PATH")]
    judge_path: Option<String>,
}

/// A case's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    /// The grader passed.
    Pass,
    /// The grader failed, or the upstream answered an error.
    Fail,
}

/// One case's result: the stdout line, and with `--save-run` the saved one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CaseResult {
    /// The case id.
    pub(crate) id: String,
    /// Whether every request of the case (including judge votes) was replayed.
    pub(crate) hit: bool,
    /// The verdict.
    pub(crate) verdict: Verdict,
    /// The answer's finish reason.
    pub(crate) finish: Option<String>,
    /// The case request's key.
    pub(crate) key: String,
    /// Why the verdict failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// The judge's tally, for judged cases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) judge: Option<JudgeTally>,
}

/// The judge's tally in a case result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct JudgeTally {
    /// Votes that passed.
    pub(crate) passed: u32,
    /// Votes that failed or did not start with PASS/FAIL.
    pub(crate) failed: u32,
    /// Share of votes against the majority.
    pub(crate) disagreement: f64,
}

/// A saved run line: the result plus what was answered.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SavedCase {
    /// The result as printed.
    #[serde(flatten)]
    pub(crate) result: CaseResult,
    /// The answer's text.
    #[serde(default)]
    pub(crate) text: String,
    /// The answer's tool calls.
    #[serde(default)]
    pub(crate) tool_calls: Vec<serde_json::Value>,
}

struct Done {
    result: CaseResult,
    answer: Answer,
    seconds: f64,
}

async fn run_case(recorder: &Recorder, judge: &JudgeConfig, case: &Case) -> Result<Done, Stop> {
    let started = Instant::now();
    let called = call(recorder, case.request.clone()).await?;
    let mut hit = called.hit;
    let mut tally = None;
    let outcome = if !(200..300).contains(&called.status) {
        Err(format!(
            "the upstream answered HTTP {}: {}",
            called.status,
            answer::shorten(called.answer.text.trim())
        ))
    } else {
        match &case.check {
            Check::Local(grader) => grader.grade(&called.answer),
            Check::Judge(spec) => {
                let judgement: Judgement = judge.judge(recorder, spec, &called.answer.text).await?;
                hit &= judgement.votes.iter().all(|v| v.hit);
                tally = Some(JudgeTally {
                    passed: judgement.passed,
                    failed: judgement.failed,
                    disagreement: (judgement.disagreement * 1000.0).round() / 1000.0,
                });
                if judgement.pass {
                    Ok(())
                } else {
                    let replies: Vec<String> = judgement
                        .votes
                        .iter()
                        .map(|v| format!("{}: {}", v.verdict, v.reply))
                        .collect();
                    Err(format!(
                        "judge: {} of {} votes passed ({})",
                        judgement.passed,
                        spec.votes,
                        replies.join(" | ")
                    ))
                }
            }
        }
    };
    Ok(Done {
        result: CaseResult {
            id: case.id.clone(),
            hit,
            verdict: if outcome.is_ok() {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            finish: called.answer.finish.clone(),
            key: called.key,
            reason: outcome.err(),
            judge: tally,
        },
        answer: called.answer,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Checks a `--save-run` name: it becomes a file name.
fn valid_run_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        bail!("--save-run {name:?}: a run name is letters, digits, '-', '_' or '.', not starting with '.'");
    }
    Ok(())
}

/// The file a saved run `name` lives in.
pub(crate) fn run_file(runs_dir: &Path, name: &str) -> PathBuf {
    runs_dir.join(format!("{name}.jsonl"))
}

/// Runs `cassette run`.
pub(crate) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // Everything is validated before the store is opened or a request is sent.
    let cases = suite::load(&args.suite)?;
    if let Some(name) = &args.save_run {
        valid_run_name(name)?;
    }
    let judge = JudgeConfig {
        model: args.judge_model.clone(),
        route: args.judge_route.clone(),
        api: args.judge_api,
        path: args.judge_path.clone().unwrap_or_else(|| {
            match args.judge_api {
                JudgeApi::Openai => suite::CHAT_PATH,
                JudgeApi::Ollama => "/api/chat",
            }
            .to_owned()
        }),
    };
    let config = args.recorder.config()?;
    let judged: Vec<&Case> = cases
        .iter()
        .filter(|c| matches!(c.check, Check::Judge(_)))
        .collect();
    for case in &judged {
        if let Check::Judge(spec) = &case.check {
            if judge.model_for(spec).is_none() {
                bail!(
                    "{}:{}: case {:?} is graded by judge but names no model: set --judge-model (or CASSETTE_JUDGE_MODEL) or expect.model",
                    args.suite.display(),
                    case.line,
                    case.id
                );
            }
        }
    }
    if !judged.is_empty() && config.route(&judge.route).is_none() {
        bail!(
            "--judge-route {:?} is not a route; mount it with --route {}=URL",
            judge.route,
            judge.route
        );
    }
    let recorder = args.recorder.build(config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(run_suite(&args, &cases, &recorder, &judge))
}

async fn run_suite(
    args: &RunArgs,
    cases: &[Case],
    recorder: &Recorder,
    judge: &JudgeConfig,
) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut results = futures::stream::iter(
        cases
            .iter()
            .map(|case| async move { (case, run_case(recorder, judge, case).await) }),
    )
    .buffered(usize::from(args.jobs));

    let mut done: Vec<Done> = Vec::with_capacity(cases.len());
    let mut junit_cases = Vec::with_capacity(cases.len());
    let mut missed = None;
    while let Some((case, result)) = results.next().await {
        match result {
            Ok(case_done) => {
                serde_json::to_writer(&mut out, &case_done.result)?;
                out.write_all(b"\n")?;
                junit_cases.push(junit::TestCase {
                    id: case_done.result.id.clone(),
                    seconds: case_done.seconds,
                    outcome: match &case_done.result.reason {
                        None => junit::Outcome::Passed,
                        Some(reason) => junit::Outcome::Failed(reason.clone()),
                    },
                });
                done.push(case_done);
            }
            Err(Stop::Miss(miss)) => {
                let line = serde_json::json!({
                    "id": case.id, "hit": false, "verdict": "miss", "finish": null, "key": miss.key,
                });
                writeln!(out, "{line}")?;
                junit_cases.push(junit::TestCase {
                    id: case.id.clone(),
                    seconds: 0.0,
                    outcome: junit::Outcome::Error(miss.to_string()),
                });
                missed = Some((case, miss));
                break;
            }
            Err(Stop::Fatal(err)) => {
                out.flush()?;
                return Err(err.context(format!(
                    "case {:?} ({}:{})",
                    case.id,
                    args.suite.display(),
                    case.line
                )));
            }
        }
    }
    drop(results);
    out.flush()?;
    drop(out);

    let seconds = started.elapsed().as_secs_f64();
    if let Some(path) = &args.junit {
        let name = args
            .suite
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "suite".to_owned());
        write_atomic(path, junit::render(&name, &junit_cases, seconds).as_bytes())
            .with_context(|| format!("writing the JUnit report {}", path.display()))?;
    }

    if let Some((case, miss)) = missed {
        eprintln!(
            "cassette run: replay miss in case {:?} ({}:{}); the run stopped here.",
            case.id,
            args.suite.display(),
            case.line
        );
        print_miss(&miss);
        return Ok(ExitCode::from(crate::EXIT_ERROR));
    }

    if let Some(name) = &args.save_run {
        let path = run_file(&args.runs_dir, name);
        let mut text = Vec::new();
        for case_done in &done {
            let saved = SavedCase {
                result: case_done.result.clone(),
                text: case_done.answer.text.clone(),
                tool_calls: case_done
                    .answer
                    .tool_calls
                    .iter()
                    .map(tool_call_json)
                    .collect(),
            };
            serde_json::to_writer(&mut text, &saved)?;
            text.push(b'\n');
        }
        write_atomic(&path, &text).with_context(|| format!("saving the run {}", path.display()))?;
        eprintln!("cassette run: saved as {name} ({})", path.display());
    }

    let passed = done
        .iter()
        .filter(|d| d.result.verdict == Verdict::Pass)
        .count();
    let failed = done.len() - passed;
    let stats = recorder.stats();
    let requests = stats.hits + stats.misses + stats.upstream_requests;
    let hit_rate = if requests == 0 {
        0.0
    } else {
        stats.hits as f64 / requests as f64
    };
    for case_done in done.iter().filter(|d| d.result.verdict == Verdict::Fail) {
        eprintln!(
            "FAIL {}: {}",
            case_done.result.id,
            case_done.result.reason.as_deref().unwrap_or("")
        );
    }
    eprintln!(
        "cassette run: {} cases: {passed} passed, {failed} failed, hit_rate {hit_rate:.2} \
         ({} of {requests} requests replayed, {} recorded; mode {}, {seconds:.2}s)",
        done.len(),
        stats.hits,
        stats.recorded,
        recorder.mode(),
    );
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn tool_call_json(call: &ToolCall) -> serde_json::Value {
    serde_json::json!({"name": call.name, "arguments": call.arguments})
}

/// Prints a miss the way every command does: key, request, nearest recording, differences.
pub(crate) fn print_miss(miss: &Miss) {
    eprintln!("  key:     {}", miss.key);
    eprintln!(
        "  request: {} {} (target {}, profile {}{})",
        miss.method,
        miss.path,
        miss.target,
        miss.profile,
        miss.model
            .as_deref()
            .map(|m| format!(", model {m}"))
            .unwrap_or_default()
    );
    eprintln!("  store:   {}", miss.store);
    match &miss.explanation.nearest {
        Some(nearest) => {
            eprintln!(
                "  nearest: {} (recorded {}), which differs in:",
                nearest.key, nearest.recorded_at
            );
            for line in &nearest.differences {
                eprintln!("    - {line}");
            }
        }
        None => eprintln!("  {}", miss.explanation.summary),
    }
    eprintln!("  Record it with CASSETTE_MODE=record (or auto), or fix the request.");
}

/// Writes a file whole or not at all, creating its folder.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let file_name = path
        .file_name()
        .ok_or_else(|| anyhow!("{} is not a file path", path.display()))?;
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_are_file_names() {
        assert!(valid_run_name("main-2024.11_a").is_ok());
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            assert!(valid_run_name(bad).is_err(), "{bad}");
        }
    }
}
