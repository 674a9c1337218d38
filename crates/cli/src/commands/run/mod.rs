//! `cassette run SUITE.jsonl`: a prompt regression suite through the recorder, configured
//! exactly as the proxy is, with graders looked up by name.
//!
//! Exit status: 2 when a case missed in replay (every case still runs, each miss is printed with
//! its key and explanation, `--fail-fast` stops at the first) or on any other error, else 1
//! when a verdict failed, else 0. Cases run concurrently (`--jobs`) but are reported in suite
//! order.

mod case;
mod live;
mod report;
mod reviewed;
mod suite;

use crate::shared::call::Stop;
use crate::shared::judge::{self, JudgeArgs};
use crate::shared::miss::print_miss;
use crate::shared::progress::Progress;
use crate::shared::runs::{run_file, LAST_RUN, RUNS_DIR};
use crate::shared::settings::{is_plain_name, RecorderArgs, RecorderSettings, SettingsFile};
use anyhow::{bail, Context};
use case::{run_case, Done};
use cassette_grade::graders::Check;
use cassette_grade::judge::JudgeConfig;
use cassette_grade::junit;
use cassette_grade::result::{SavedCase, Verdict};
use cassette_grade::suite::Case;
use cassette_recorder::{Miss, Recorder};
use futures::StreamExt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Cases in flight when `--jobs` is not given.
const DEFAULT_JOBS: u16 = 8;

/// Arguments of `cassette run`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 all cases passed, 1 a verdict failed, 2 a replay miss \
(every case still runs; --fail-fast stops at the first) or another error.\n\nExamples:\n  \
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

    /// Cases in flight at once; output stays in suite order [default: 8].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=512))]
    jobs: Option<u16>,

    /// Stop at the first replay miss instead of running every case.
    #[arg(long)]
    fail_fast: bool,

    /// Run only these cases (comma-separated ids; repeatable).
    #[arg(long, value_delimiter = ',', value_name = "ID,...")]
    only: Vec<String>,

    /// Run at most the first N cases (after --only).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    limit: Option<u32>,

    /// Drift check: run each case replayed from its cassette and live against the upstream
    /// (mode off: nothing is stored), compare verdicts, answers and answering models, and exit 1
    /// on a regression (passed on tape, fails live). Pick a handful with --limit or --only.
    #[arg(long)]
    live: bool,

    /// Also write a JUnit XML report to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,

    /// Also write a self-contained HTML review to FILE: each case with its verdict, graders,
    /// answer and, for a miss, the explanation (with --live: each answer on tape next to the
    /// live one).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,

    /// Also write a Markdown summary (counts, misses with their explanation, failures; with
    /// --live, the answers that drifted) to FILE, for a pull request comment.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,

    /// Also keep every case's output and verdict as NAME, for `cassette diff-runs` (every run
    /// is kept as `last` anyway).
    #[arg(long, value_name = "NAME", value_parser = parse_run_name)]
    save_run: Option<String>,

    /// Where saved runs are kept [default: .cassette/runs].
    #[arg(long, value_name = "DIR")]
    runs_dir: Option<PathBuf>,

    #[command(flatten)]
    judge: JudgeArgs,
}

/// `cassette run`'s settings, validated before the store is opened or a request is sent.
struct RunSettings {
    /// How the recorder is built.
    recorder: RecorderSettings,
    /// What is run and reported.
    suite: SuiteRun,
    /// Replay alone, or replay against live.
    against: Against,
}

/// What a run compares its answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Against {
    /// Nothing: grade the answers of the configured mode.
    Nothing,
    /// `--live`: replay and live side by side.
    Live,
}

/// A suite ready to run: its cases, the judge, and where the reports go.
struct SuiteRun {
    /// The suite file, for messages.
    path: PathBuf,
    /// Its cases, parsed and their graders built.
    cases: Vec<Case>,
    /// The judge endpoint, for cases graded by `judge`.
    judge: JudgeConfig,
    /// Cases in flight at once.
    jobs: usize,
    /// Whether a replay miss stops the run.
    on_miss: OnMiss,
    /// Where the JUnit report goes.
    junit: Option<PathBuf>,
    /// Where the HTML review and the Markdown summary go.
    review: reviewed::ReviewFiles,
    /// The name and file the run is saved as with `--save-run`.
    save_run: Option<(String, PathBuf)>,
    /// The file every run is saved as (`last`).
    last_run: PathBuf,
}

impl RunArgs {
    /// Loads the suite and validates every setting; no store is opened, no request sent.
    fn resolve(&self, file: &SettingsFile) -> anyhow::Result<RunSettings> {
        let cases = self.pick(suite::load(&self.suite)?)?;
        let judge = self.judge.resolve(file);
        let mut recorder = self.recorder.resolve(file)?;
        // A suite asks each request once: answers kept ready to send would only take memory
        // (about 15% of a 100,000-case replay's time and 80 MB), unless asked for.
        if !self.recorder.replay_memory_set(file) {
            recorder.config.replay_memory = 0;
        }
        self.check_routes(&cases, &recorder, file)?;
        self.check_judge(&cases, &judge, &recorder)?;
        let runs_dir = self.runs_dir.as_deref().unwrap_or(Path::new(RUNS_DIR));
        Ok(RunSettings {
            recorder,
            against: if self.live {
                Against::Live
            } else {
                Against::Nothing
            },
            suite: SuiteRun {
                path: self.suite.clone(),
                cases,
                judge,
                jobs: usize::from(self.jobs.unwrap_or(DEFAULT_JOBS)),
                on_miss: if self.fail_fast {
                    OnMiss::Stop
                } else {
                    OnMiss::Continue
                },
                junit: self.junit.clone(),
                review: reviewed::ReviewFiles {
                    html: self.html.clone(),
                    markdown: self.markdown.clone(),
                },
                save_run: self
                    .save_run
                    .as_ref()
                    .map(|name| (name.clone(), run_file(runs_dir, name))),
                last_run: run_file(runs_dir, LAST_RUN),
            },
        })
    }

    /// The cases `--only` and `--limit` pick, in suite order; an id `--only` names that the
    /// suite lacks is an error.
    fn pick(&self, cases: Vec<Case>) -> anyhow::Result<Vec<Case>> {
        let only: Vec<&str> = self
            .only
            .iter()
            .map(|id| id.trim())
            .filter(|id| !id.is_empty())
            .collect();
        let unknown: Vec<&str> = only
            .iter()
            .copied()
            .filter(|id| !cases.iter().any(|c| c.id == *id))
            .collect();
        if !unknown.is_empty() {
            bail!(
                "--only names cases {} does not have: {}",
                self.suite.display(),
                unknown.join(", ")
            );
        }
        let picked = cases
            .into_iter()
            .filter(|c| only.is_empty() || only.contains(&c.id.as_str()));
        Ok(match self.limit {
            Some(limit) => picked.take(limit as usize).collect(),
            None => picked.collect(),
        })
    }

    /// Every case's target is a route, so no case fails half-way through a recording.
    fn check_routes(
        &self,
        cases: &[Case],
        recorder: &RecorderSettings,
        file: &SettingsFile,
    ) -> anyhow::Result<()> {
        let mut unknown = Vec::new();
        for case in cases {
            let target = &case.request.target;
            if recorder.config.route(target).is_none() {
                unknown.push(format!(
                    "{}:{}: case {:?}: target {target:?} is not a route",
                    self.suite.display(),
                    case.line,
                    case.id
                ));
            }
        }
        let Some(first) = cases
            .iter()
            .find(|c| recorder.config.route(&c.request.target).is_none())
        else {
            return Ok(());
        };
        let target = &first.request.target;
        let known: Vec<&str> = recorder
            .config
            .routes
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        let fix = match &file.path {
            Some(path) => format!(
                "add [routes.{target}] with an upstream to {} or pass --route {target}=URL",
                path.display()
            ),
            None => format!(
                "add [routes.{target}] with an upstream to cassette.toml or pass --route {target}=URL"
            ),
        };
        bail!(
            "{}\nthe routes are {}; {fix}. Nothing was run",
            unknown.join("\n"),
            known.join(", ")
        )
    }

    /// Every judged case has a model, and the judge's route exists.
    fn check_judge(
        &self,
        cases: &[Case],
        judge: &JudgeConfig,
        recorder: &RecorderSettings,
    ) -> anyhow::Result<()> {
        let mut judged = false;
        let judged_specs = cases.iter().flat_map(|case| {
            case.graders.iter().filter_map(move |g| match &g.check {
                Check::Judge(spec) => Some((case, spec)),
                Check::Local(_) => None,
            })
        });
        for (case, spec) in judged_specs {
            judged = true;
            if judge.model_for(spec).is_none() {
                bail!(
                    "{}:{}: case {:?} is graded by judge but names no model: set --judge-model (or CASSETTE_JUDGE_MODEL) or expect.model",
                    self.suite.display(),
                    case.line,
                    case.id
                );
            }
        }
        if judged {
            judge::check_route(judge, recorder)?;
        }
        Ok(())
    }
}

/// What a replay miss does to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnMiss {
    /// Mark the case and run the others (the default), so one run names every stale tape.
    Continue,
    /// Stop at the first (`--fail-fast`).
    Stop,
}

/// Checks a `--save-run` name: it becomes a file name.
fn parse_run_name(name: &str) -> Result<String, String> {
    // A leading '.' would make `..` possible, and hide the file.
    if !is_plain_name(name) || name.starts_with('.') {
        return Err(format!(
            "{name:?}: a run name is letters, digits, '-', '_' or '.', not starting with '.'"
        ));
    }
    Ok(name.to_owned())
}

/// Runs `cassette run`.
pub(crate) fn run(args: RunArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    // Everything is validated before the store is opened or a request is sent.
    let RunSettings {
        recorder,
        suite,
        against,
    } = args.resolve(file)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match against {
        Against::Nothing => {
            let recorder = recorder.build()?;
            runtime.block_on(run_suite(&suite, &recorder))
        }
        Against::Live => {
            let (replay, live) = live::recorders(&recorder)?;
            runtime.block_on(live::run_live(&suite, &replay, &live))
        }
    }
}

/// Runs the cases, then writes the reports: the JUnit file, the saved run and the summary
/// (with every miss named).
async fn run_suite(suite: &SuiteRun, recorder: &Recorder) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let ran = run_cases(suite, recorder).await;
    crate::shared::runtime::flush_index(recorder).await;
    let ran = ran?;
    let seconds = started.elapsed().as_secs_f64();
    if let Some(path) = &suite.junit {
        report::write_junit(path, &suite.path, &ran.junit, seconds, recorder.redactor())?;
    }
    // The last run is a convenience: a checkout where it cannot be written still gets its
    // verdicts, with a warning.
    if let Err(err) = report::save_run(&suite.last_run, &ran.saved, recorder.redactor()) {
        eprintln!("cassette run: warning: not kept as the last run: {err:#}");
    }
    if let Some((name, path)) = &suite.save_run {
        report::save_run(path, &ran.saved, recorder.redactor())?;
        eprintln!("cassette run: saved as {name} ({})", path.display());
    }
    reviewed::write(&suite.review, suite, &ran, recorder, seconds)?;
    let missed: Vec<&str> = ran
        .missed
        .iter()
        .map(|(case, _)| case.id.as_str())
        .collect();
    let code = report::summary(&ran.done, missed.len(), recorder, seconds);
    if missed.is_empty() {
        return Ok(code);
    }
    let total = ran.saved.len() + ran.unrun;
    eprintln!(
        "cassette run: {} of {total} cases missed: {}{}",
        missed.len(),
        missed.join(", "),
        if ran.unrun > 0 {
            format!(
                " (the run stopped at the first miss; {} not run)",
                ran.unrun
            )
        } else {
            String::new()
        }
    );
    eprintln!("  Record them with CASSETTE_MODE=record (or auto), or fix the requests.");
    Ok(ExitCode::from(crate::shared::runtime::EXIT_ERROR))
}

/// What running the cases gave: the cases that reached a verdict, the ones that missed, every
/// result line in suite order, the JUnit entries, and how many cases a `--fail-fast` stop left
/// unrun.
struct Ran<'a> {
    done: Vec<Done>,
    missed: Vec<(&'a Case, Box<Miss>)>,
    saved: Vec<SavedCase>,
    junit: Vec<junit::TestCase>,
    unrun: usize,
}

/// Runs the cases `suite.jobs` at a time, printing each result line in suite order as soon as
/// it is known, and each miss's explanation on stderr. A miss marks its case (and stops the run
/// with `--fail-fast`); another error ends the run with the case named.
async fn run_cases<'a>(suite: &'a SuiteRun, recorder: &Recorder) -> anyhow::Result<Ran<'a>> {
    let stdout = std::io::stdout();
    // Result lines on a terminal go out one by one, with the bar out of the way.
    let stdout_is_terminal = std::io::IsTerminal::is_terminal(&stdout);
    let mut out = std::io::BufWriter::new(stdout.lock());
    let progress = Progress::bar(suite.cases.len() as u64, "cases");
    let mut results = futures::stream::iter(
        suite
            .cases
            .iter()
            .map(|case| async move { (case, run_case(recorder, &suite.judge, case).await) }),
    )
    .buffered(suite.jobs);
    let mut ran = Ran {
        done: Vec::with_capacity(suite.cases.len()),
        missed: Vec::new(),
        saved: Vec::with_capacity(suite.cases.len()),
        junit: Vec::with_capacity(suite.cases.len()),
        unrun: 0,
    };
    while let Some((case, result)) = results.next().await {
        progress.inc();
        let stats = recorder.stats();
        progress.message(format!(
            "· {} hits · {} misses · {} recorded",
            stats.hits, stats.misses, stats.recorded
        ));
        match result {
            Ok(done) => {
                serde_json::to_writer(&mut out, &done.result)?;
                out.write_all(b"\n")?;
                if stdout_is_terminal {
                    progress.suspend(|| out.flush())?;
                }
                ran.junit.push(report::junit_case(&done));
                ran.saved.push(report::saved_case(&done));
                ran.done.push(done);
            }
            Err(Stop::Miss(miss)) => {
                let mut result = report::miss_result(case, &miss);
                result.redact(recorder.redactor());
                serde_json::to_writer(&mut out, &result)?;
                out.write_all(b"\n")?;
                progress.suspend(|| -> std::io::Result<()> {
                    // Flushed first so the explanation follows its result line in a terminal.
                    out.flush()?;
                    eprintln!(
                        "cassette run: replay miss in case {:?} ({}:{}):",
                        case.id,
                        suite.path.display(),
                        case.line
                    );
                    print_miss(&miss);
                    Ok(())
                })?;
                ran.junit.push(junit::TestCase {
                    id: case.id.clone(),
                    seconds: 0.0,
                    outcome: junit::Outcome::Error(miss.to_string()),
                });
                ran.saved.push(SavedCase::without_answer(result));
                ran.missed.push((case, miss));
                if suite.on_miss == OnMiss::Stop {
                    ran.unrun = suite.cases.len() - ran.saved.len();
                    break;
                }
            }
            Err(Stop::Fatal(err)) => {
                out.flush()?;
                return Err(err.context(format!(
                    "case {:?} ({}:{})",
                    case.id,
                    suite.path.display(),
                    case.line
                )));
            }
        }
    }
    progress.finish();
    out.flush()?;
    Ok(ran)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_are_file_names() {
        assert!(parse_run_name("main-2024.11_a").is_ok());
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            assert!(parse_run_name(bad).is_err(), "{bad}");
        }
    }
}
