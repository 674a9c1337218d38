//! `cassette run SUITE --live`: the nightly drift check in one command. Each picked case is run
//! twice: replayed from its cassette, and live against the upstream (mode `off`: nothing is
//! stored), then the two are compared: a case that passed on tape and fails live is a
//! regression (exit 1), and a changed answer or answering model is reported.

use super::case::{run_case, Done};
use super::report;
use super::{SavedCase, SuiteRun, Verdict};
use crate::shared::call::Stop;
use crate::shared::review::output::{append_step_summary, write_atomic};
use crate::shared::review::{answer_facts, STALE, WHOLE_DIFF};
use anyhow::Context;
use cassette_grade::suite::Case;
use cassette_recorder::config::Replays;
use cassette_recorder::Recorder;
use cassette_review::verdict::judge;
use cassette_review::{html, markdown, DiffReview, Drift, Judged, Pairing, Recording, Reviewed};
use cassette_store::Key;
use futures::StreamExt;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

/// One case compared, as printed on stdout.
#[derive(Debug, Serialize)]
struct Compared {
    id: String,
    /// The verdict replayed from the cassette (`miss` when there is none).
    replayed: Verdict,
    /// The verdict of the live answer.
    live: Verdict,
    /// Passed on tape, fails live.
    regression: bool,
    /// Whether the live answer's text or tool calls differ from the recorded one (absent when
    /// nothing was recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    answer_changed: Option<bool>,
    /// The answering model, when it changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<Changed>,
    /// The finish reason, when it changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    finish: Option<Changed>,
    /// Why the live verdict failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// The case request's key.
    key: String,
}

/// A value on tape and live.
#[derive(Debug, Serialize)]
struct Changed {
    replayed: Option<String>,
    live: Option<String>,
}

/// Runs the picked cases replayed and live, prints one comparison a line, keeps the live
/// results as the last run, and exits 1 on a regression.
pub(super) async fn run_live(
    suite: &SuiteRun,
    replay: &Recorder,
    live: &Recorder,
) -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut results = futures::stream::iter(suite.cases.iter().map(|case| async move {
        let replayed = run_case(replay, &suite.judge, case).await;
        let lived = run_case(live, &suite.judge, case).await;
        (case, replayed, lived)
    }))
    .buffered(suite.jobs);
    let mut compared = Vec::with_capacity(suite.cases.len());
    let mut saved = Vec::with_capacity(suite.cases.len());
    let mut reviewed = Vec::with_capacity(suite.cases.len());
    while let Some((case, replayed, lived)) = results.next().await {
        let replayed = match replayed {
            Ok(done) => Some(done),
            Err(Stop::Miss(_)) => None,
            Err(Stop::Fatal(err)) => return Err(fatal(err, suite, case, "replaying")),
        };
        let lived = lived.map_err(|stop| match stop {
            Stop::Fatal(err) => fatal(err, suite, case, "asking live"),
            Stop::Miss(miss) => anyhow::anyhow!("a live request missed: {miss}"),
        })?;
        let line = compare(case, replayed.as_ref(), &lived);
        reviewed.push(review_item(case, replayed.as_ref(), &lived, live));
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
        saved.push(report::saved_case(&lived));
        compared.push(line);
    }
    out.flush()?;
    if let Err(err) = report::save_run(&suite.last_run, &saved, live.redactor()) {
        eprintln!("cassette run: warning: not kept as the last run: {err:#}");
    }
    if let Some((name, path)) = &suite.save_run {
        report::save_run(path, &saved, live.redactor())?;
        eprintln!("cassette run: saved as {name} ({})", path.display());
    }
    let review = DiffReview::new(
        format!("{} (replayed from its cassettes)", suite.path.display()),
        "live".to_owned(),
        (
            reviewed.iter().filter(|r| r.old.is_some()).count(),
            reviewed.len(),
        ),
        reviewed,
    );
    write_review(&suite.review, &review)?;
    Ok(summary(&compared, saved.as_slice()))
}

/// The drift of one case, as `cassette diff` reviews a re-record: its answer on tape (none when
/// it is not recorded) next to the live one, with a verdict.
fn review_item(case: &Case, replayed: Option<&Done>, live: &Done, recorder: &Recorder) -> Reviewed {
    let redactor = recorder.redactor();
    let recording = |done: &Done, when: &str| {
        let mut answer = done.answer.clone();
        answer.text = redactor.text(&answer.text);
        for call in &mut answer.tool_calls {
            redactor.json(&mut call.arguments);
        }
        Recording {
            key: Key::parse(&done.result.key).unwrap_or_else(|| case_key(case)),
            request: redactor.text(&format!("{} {}", case.request.method, case.request.path)),
            route: case.request.target.clone(),
            requested_model: case.request.model().map(|m| redactor.text(&m)),
            recorded_at: when.to_owned(),
            // A non-2xx answer fails the case already; the status is not what drifts here.
            facts: Ok(answer_facts(answer)),
        }
    };
    let new = recording(live, "live, now");
    match replayed {
        Some(done) => {
            let old = recording(done, "on tape");
            let judged = judge(
                old.facts.as_ref().map_err(String::as_str),
                new.facts.as_ref().map_err(String::as_str),
            );
            Reviewed {
                judged,
                pairing: Pairing::SameKey,
                old: Some(old),
                new: Some(new),
                request: Vec::new(),
            }
        }
        None => Reviewed {
            judged: Judged {
                drift: Drift::Added,
                reasons: vec!["not recorded".to_owned()],
                notes: Vec::new(),
            },
            pairing: Pairing::Alone,
            old: None,
            new: Some(new),
            request: Vec::new(),
        },
    }
}

/// A key for a case whose result names none (never expected: every answered case has one).
fn case_key(case: &Case) -> Key {
    case.request.key(&cassette_keying::KeyConfig::default()).key
}

/// Writes the live run's HTML review and Markdown summary, and the step summary.
fn write_review(files: &super::reviewed::ReviewFiles, review: &DiffReview) -> anyhow::Result<()> {
    if let Some(path) = &files.html {
        write_atomic(path, html::diff_page(review).as_bytes())
            .with_context(|| format!("writing the HTML review {}", path.display()))?;
    }
    let summary = markdown::diff_summary(review, WHOLE_DIFF, STALE);
    if let Some(path) = &files.markdown {
        write_atomic(path, summary.as_bytes())
            .with_context(|| format!("writing the Markdown summary {}", path.display()))?;
    }
    append_step_summary("run --live", &summary);
    Ok(())
}

fn fatal(err: anyhow::Error, suite: &SuiteRun, case: &Case, doing: &str) -> anyhow::Error {
    err.context(format!(
        "{doing} case {:?} ({}:{})",
        case.id,
        suite.path.display(),
        case.line
    ))
}

/// The comparison of one case's replayed and live runs.
fn compare(case: &Case, replayed: Option<&Done>, live: &Done) -> Compared {
    let replayed_verdict = replayed.map_or(Verdict::Miss, |d| d.result.verdict);
    let changed = |a: &Option<String>, b: &Option<String>| {
        (a != b).then(|| Changed {
            replayed: a.clone(),
            live: b.clone(),
        })
    };
    Compared {
        id: case.id.clone(),
        replayed: replayed_verdict,
        live: live.result.verdict,
        regression: replayed_verdict == Verdict::Pass && live.result.verdict == Verdict::Fail,
        answer_changed: replayed.map(|r| {
            r.answer.text != live.answer.text || r.answer.tool_calls != live.answer.tool_calls
        }),
        model: replayed.and_then(|r| changed(&r.answer.model, &live.answer.model)),
        finish: replayed.and_then(|r| changed(&r.answer.finish, &live.answer.finish)),
        reason: live.result.reason.clone(),
        key: live.result.key.clone(),
    }
}

/// Prints the regressions and the summary; exit 1 on a regression.
fn summary(compared: &[Compared], saved: &[SavedCase]) -> ExitCode {
    let ids = |keep: &dyn Fn(&Compared) -> bool| -> Vec<&str> {
        compared
            .iter()
            .filter(|c| keep(c))
            .map(|c| c.id.as_str())
            .collect()
    };
    for c in compared.iter().filter(|c| c.regression) {
        eprintln!(
            "REGRESSION {}: passed on tape, fails live: {}",
            c.id,
            c.reason.as_deref().unwrap_or("")
        );
    }
    let regressions = ids(&|c| c.regression);
    let fixed = ids(&|c| c.replayed == Verdict::Fail && c.live == Verdict::Pass);
    let changed = ids(&|c| c.answer_changed == Some(true));
    let unrecorded = ids(&|c| c.replayed == Verdict::Miss);
    let mut models: BTreeMap<String, usize> = BTreeMap::new();
    for c in compared {
        if let Some(model) = &c.model {
            let name = |m: &Option<String>| m.clone().unwrap_or_else(|| "(none)".to_owned());
            *models
                .entry(format!(
                    "{} -> {}",
                    name(&model.replayed),
                    name(&model.live)
                ))
                .or_default() += 1;
        }
    }
    let passed = saved
        .iter()
        .filter(|s| s.result.verdict == Verdict::Pass)
        .count();
    let list = |ids: &[&str]| {
        if ids.is_empty() {
            String::new()
        } else {
            format!(" ({})", ids.join(", "))
        }
    };
    eprintln!(
        "cassette run --live: {} cases: {passed} pass live, {} fail live; {} regressions{}, {} fixed{}, {} answers changed{}, {} not recorded{}",
        compared.len(),
        compared.len() - passed,
        regressions.len(),
        list(&regressions),
        fixed.len(),
        list(&fixed),
        changed.len(),
        list(&changed),
        unrecorded.len(),
        list(&unrecorded),
    );
    for (change, n) in &models {
        eprintln!("cassette run --live: model changed: {change} ({n} cases)");
    }
    if regressions.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Builds the two recorders of a live run from one set of settings: replay over a read-only
/// store, and `off` (calls the upstream, stores nothing).
pub(super) fn recorders(
    settings: &crate::shared::settings::RecorderSettings,
) -> anyhow::Result<(Recorder, Recorder)> {
    let mut replay = settings.clone();
    replay.config.mode = cassette_recorder::Mode::Replay;
    // The tapes are compared with whatever the route points at now: another vendor's
    // answers are what a live run may be asked to compare (`docs/keying.md`, "The upstream's
    // origin").
    for route in &mut replay.config.routes {
        route.replays = Replays::AnyOrigin;
    }
    let mut live = settings.clone();
    live.config.mode = cassette_recorder::Mode::Off;
    // Served keys are logged by the replay side only: the live side reads no cassette.
    live.usage_log = None;
    Ok((
        replay.build().context("building the replay side")?,
        live.build().context("building the live side")?,
    ))
}
