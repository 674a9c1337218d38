//! `cassette probe INPUT --n 5`: sends a request live N times and counts the distinct answers:
//! how much of an "improvement" is sampling noise.
//!
//! INPUT is a request file, one suite line, or a suite with `--only` picking the cases (`-`
//! reads stdin, so `sed -n 7p suite.jsonl | cassette probe -` works). A suite case's answers are
//! also graded by its deterministic graders. Nothing is stored, unless the mode is `record`:
//! then every answer is recorded as a re-record would, and the cassette keeps the last one.

use crate::shared::settings::{RecorderArgs, SettingsFile};
use anyhow::{bail, Context};
use cassette_grade::answer::Answer;
use cassette_grade::graders::Check;
use cassette_grade::request_file;
use cassette_grade::suite::{self, Case};
use cassette_recorder::{Mode, Recorder, Request, Source};
use serde::Serialize;
use serde_json::{json, Value};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `cassette probe`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "INPUT is a request file (as `cassette key --request` takes it), one \
suite line, or a suite with --only; `-` reads stdin.\n\
Nothing is stored unless the mode is record (then the cassette keeps the last answer).\n\
Exit status: 0, or 1 when a probe gave more distinct answers than --max-distinct; 2 error.\n\n\
Examples:\n  \
cassette probe request.json --n 10\n  \
cassette probe suite.jsonl --only refund,greeting --n 5 --max-distinct 1\n  \
sed -n 7p suite.jsonl | cassette probe - --json"
)]
pub(crate) struct ProbeArgs {
    /// A request file, a suite line or a suite; `-` for stdin.
    #[arg(value_name = "INPUT")]
    input: String,

    /// The suite cases to probe (comma-separated ids; repeatable).
    #[arg(long, value_delimiter = ',', value_name = "ID,...")]
    only: Vec<String>,

    /// How many times to send each request.
    #[arg(long, short = 'n', default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=1000))]
    n: u16,

    /// Exit 1 when a request gives more distinct answers than this.
    #[arg(long, value_name = "K")]
    max_distinct: Option<usize>,

    /// One JSON object per probed request instead of text.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    recorder: RecorderArgs,
}

/// One thing to probe: a request, and the suite case it comes from.
struct Target {
    request: Request,
    case: Option<Case>,
}

/// One distinct answer and how often it came.
#[derive(Debug, Serialize)]
struct Distinct {
    text: String,
    tool_calls: Vec<Value>,
    count: usize,
    /// `pass` or `fail` by the case's deterministic graders; absent for a bare request.
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// What probing one request found.
#[derive(Debug, Serialize)]
struct Probed {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    key: String,
    requests: u16,
    distinct: usize,
    /// Whether the answers were recorded (mode record).
    recorded: bool,
    answers: Vec<Distinct>,
}

/// Runs `cassette probe`.
pub(crate) fn run(args: ProbeArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let targets = targets(&args)?;
    let mut settings = args.recorder.resolve(file)?;
    // A probe measures the live model: it never replays. It records only when asked to.
    settings.config.mode = match settings.config.mode {
        Mode::Record => Mode::Record,
        _ => Mode::Off,
    };
    let recorder = settings.build()?;
    let runtime = crate::shared::runtime::runtime()?;
    let mut too_many = false;
    for target in &targets {
        let probed = runtime.block_on(probe(&recorder, target, args.n))?;
        too_many |= args.max_distinct.is_some_and(|max| probed.distinct > max);
        if args.json {
            println!("{}", serde_json::to_string(&probed)?);
        } else {
            print_text(&probed);
        }
    }
    runtime.block_on(crate::shared::runtime::flush_index(&recorder));
    if too_many {
        eprintln!(
            "cassette probe: more than {} distinct answers",
            args.max_distinct.unwrap_or_default()
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The requests INPUT names: a request file's, a suite line's, or the `--only` cases of a suite.
fn targets(args: &ProbeArgs) -> anyhow::Result<Vec<Target>> {
    let (name, text) = if args.input == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading INPUT from stdin")?;
        ("stdin".to_owned(), text)
    } else {
        let path = PathBuf::from(&args.input);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        (path.display().to_string(), text)
    };
    let single: Option<Value> = serde_json::from_str(&text).ok();
    let is_request_file = single
        .as_ref()
        .is_some_and(|v| v.is_object() && v.get("id").is_none());
    if is_request_file {
        if !args.only.is_empty() {
            bail!("--only picks suite cases, but {name} is a request file");
        }
        let request = request_file::parse(&text).with_context(|| format!("in {name}"))?;
        return Ok(vec![Target {
            request,
            case: None,
        }]);
    }
    let cases = suite::parse(&text).map_err(|err| {
        let lines: Vec<String> = match err {
            cassette_grade::Error::Suite { lines } => lines
                .iter()
                .map(|bad| format!("\n  {name}:{}: {}", bad.line, bad.reason))
                .collect(),
            other => vec![format!("\n  {name}: {other}")],
        };
        anyhow::anyhow!(
            "{name} is neither a request file nor a suite:{}",
            lines.concat()
        )
    })?;
    let only: Vec<&str> = args.only.iter().map(|s| s.trim()).collect();
    if only.is_empty() && cases.len() > 1 {
        let ids: Vec<&str> = cases.iter().take(5).map(|c| c.id.as_str()).collect();
        bail!(
            "{name} has {} cases; name the ones to probe with --only (for example --only {})",
            cases.len(),
            ids.join(",")
        );
    }
    if let Some(unknown) = only.iter().find(|id| !cases.iter().any(|c| c.id == **id)) {
        bail!("--only names a case {name} does not have: {unknown}");
    }
    Ok(cases
        .into_iter()
        .filter(|c| only.is_empty() || only.contains(&c.id.as_str()))
        .map(|case| Target {
            request: case.request.clone(),
            case: Some(case),
        })
        .collect())
}

/// Sends `target` `n` times and groups the answers.
async fn probe(recorder: &Recorder, target: &Target, n: u16) -> anyhow::Result<Probed> {
    let mut answers: Vec<(Answer, usize)> = Vec::new();
    let mut key = String::new();
    let mut recorded = false;
    for i in 0..n {
        let outcome = recorder.handle(target.request.clone()).await?;
        key = outcome.key.to_string();
        recorded |= outcome.source == Source::Recorded;
        let status = outcome.response.status;
        let content_type = outcome
            .response
            .headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
            .map(|(_, value)| value.clone());
        let body = outcome.response.into_bytes().await?;
        if !(200..300).contains(&status) {
            bail!(
                "request {} of {n} answered HTTP {status}: {}",
                i + 1,
                recorder.redactor().text(&String::from_utf8_lossy(&body))
            );
        }
        // Printed, never stored: redacted as a cassette would be all the same.
        let answer = crate::shared::call::redacted_answer(
            recorder,
            &target.request.path,
            content_type.as_deref(),
            &body,
        );
        match answers
            .iter_mut()
            .find(|(a, _)| a.text == answer.text && a.tool_calls == answer.tool_calls)
        {
            Some((_, count)) => *count += 1,
            None => answers.push((answer, 1)),
        }
    }
    Ok(Probed {
        id: target.case.as_ref().map(|c| c.id.clone()),
        key,
        requests: n,
        distinct: answers.len(),
        recorded,
        answers: answers
            .into_iter()
            .map(|(answer, count)| {
                let graded = target.case.as_ref().map(|case| grade(case, &answer));
                Distinct {
                    tool_calls: answer
                        .tool_calls
                        .iter()
                        .map(|c| json!({"name": c.name, "arguments": c.arguments}))
                        .collect(),
                    text: answer.text,
                    count,
                    verdict: graded
                        .as_ref()
                        .map(|g| if g.is_ok() { "pass" } else { "fail" }),
                    reason: graded.and_then(Result::err),
                }
            })
            .collect(),
    })
}

/// The verdict of a case's deterministic graders on one answer (a judge would be more live
/// calls per answer, so it is left out and said so).
fn grade(case: &Case, answer: &Answer) -> Result<(), String> {
    let mut failures = Vec::new();
    for grader in &case.graders {
        match &grader.check {
            Check::Local(local) => {
                if let Err(reason) = local.grade(answer) {
                    failures.push(format!("{}: {reason}", grader.name));
                }
            }
            Check::Judge(_) => {}
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

fn print_text(probed: &Probed) {
    let id = probed
        .id
        .as_deref()
        .map(|id| format!("case {id}: "))
        .unwrap_or_default();
    println!(
        "{id}{} requests, {} distinct answers{}",
        probed.requests,
        probed.distinct,
        if probed.recorded {
            format!(" (recorded as {}; the cassette keeps the last)", probed.key)
        } else {
            String::new()
        }
    );
    for (i, distinct) in probed.answers.iter().enumerate() {
        let verdict = match (distinct.verdict, &distinct.reason) {
            (Some(v), Some(reason)) => format!(", {v}: {reason}"),
            (Some(v), None) => format!(", {v}"),
            _ => String::new(),
        };
        println!("--- answer {} ({}x{verdict})", i + 1, distinct.count);
        println!("{}", distinct.text);
        for call in &distinct.tool_calls {
            println!("[tool call] {}({})", call["name"], call["arguments"]);
        }
    }
}
