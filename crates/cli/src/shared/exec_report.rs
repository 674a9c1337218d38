//! What `cassette exec` leaves behind when asked: `--report FILE.json` (every request's key,
//! route, outcome and, for a miss, the explanation; the counters; the MCP misses, failed
//! recordings and bypasses), `--junit FILE.xml` (one test case per request, a miss an error),
//! and the Markdown summary (`--markdown FILE`, and the GitHub step summary). Files are written
//! whole or not at all, and everything in them went through the recorder's redaction.
//!
//! `cassette diff-runs` reads two reports (`ExecReport::cases`) to say which requests started
//! to miss between two runs.

use crate::shared::mcp_report::ReportedMiss;
use crate::shared::review::output::write_atomic;
use crate::shared::review::RECORD;
use anyhow::Context;
use cassette_grade::junit;
use cassette_grade::result::{CaseResult, SavedCase, Verdict};
use cassette_recorder::miss::{Explanation, MissLog};
use cassette_recorder::proxy::{Answered, JournalEntry, JournalLog, ProxyStats};
use cassette_recorder::RecordingFailure;
use cassette_review::markdown::{exec_summary, ExecMiss};
use cassette_tape::redact::Redactor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The version of the report's layout, its first member.
pub(crate) const REPORT_FORMAT: u32 = 1;

/// Where exec's records of a run go.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outputs {
    /// The JSON report.
    pub(crate) report: Option<PathBuf>,
    /// The JUnit report.
    pub(crate) junit: Option<PathBuf>,
    /// The Markdown summary.
    pub(crate) markdown: Option<PathBuf>,
}

impl Outputs {
    /// Whether the proxy must keep one entry per request.
    pub(crate) fn need_journal(&self) -> bool {
        self.report.is_some() || self.junit.is_some()
    }
}

/// The JSON report of one `cassette exec`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ExecReport {
    /// [`REPORT_FORMAT`].
    pub(crate) cassette_exec_report: u32,
    /// The command run, redacted.
    pub(crate) command: Vec<String>,
    /// The mode.
    pub(crate) mode: String,
    /// The store, redacted.
    pub(crate) store: String,
    /// The exit status cassette exec gave.
    pub(crate) exit: u8,
    /// How long the run took, from cassette exec's start to its report, in seconds (0 in a
    /// report written before it was kept).
    #[serde(default)]
    pub(crate) duration_seconds: f64,
    /// The counters.
    pub(crate) counts: Counts,
    /// Every request the proxy answered, in order.
    pub(crate) requests: Vec<Request>,
    /// Requests answered after the journal was full, only counted.
    #[serde(default)]
    pub(crate) requests_not_listed: u64,
    /// Misses `cassette mcp` servers the command started reported.
    #[serde(default)]
    pub(crate) mcp_misses: Vec<McpMiss>,
    /// Answers that were to be recorded and were not.
    #[serde(default)]
    pub(crate) recording_failures: Vec<Failure>,
    /// Traffic that bypassed the base URL, by host.
    #[serde(default)]
    pub(crate) bypassed: Vec<Bypass>,
}

/// The counters of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Counts {
    pub(crate) requests: u64,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    pub(crate) distinct_misses: u64,
    pub(crate) recorded: u64,
    pub(crate) failed_recordings: u64,
    pub(crate) upstream_requests: u64,
    pub(crate) upstream_errors: u64,
    /// Recorded upstream failures (resets, timeouts) replayed: not answers, so not hits.
    #[serde(default)]
    pub(crate) failures_replayed: u64,
    pub(crate) bypassed: u64,
}

/// One request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Request {
    /// Its key, when it got that far.
    pub(crate) key: Option<String>,
    pub(crate) route: String,
    pub(crate) method: String,
    pub(crate) path: String,
    /// `replayed`, `recorded`, `recording`, `passed-through`, `missed` or `failed`.
    pub(crate) outcome: String,
    pub(crate) status: u16,
    /// For a miss: the nearest recording and what differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) explanation: Option<Explained>,
    /// For a failure: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

/// A miss's explanation as the report keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Explained {
    pub(crate) summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) nearest: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) differences: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct McpMiss {
    pub(crate) key: String,
    pub(crate) request: String,
    pub(crate) summary: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Failure {
    pub(crate) key: String,
    pub(crate) reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Bypass {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) refused: u64,
    pub(crate) tunnelled: u64,
}

/// Everything a run's records are made of.
pub(crate) struct Run<'a> {
    pub(crate) command: Vec<String>,
    pub(crate) mode: String,
    pub(crate) store: String,
    pub(crate) exit: u8,
    /// How long the run took, up to the report.
    pub(crate) duration: std::time::Duration,
    pub(crate) stats: &'a ProxyStats,
    pub(crate) journal: JournalLog,
    pub(crate) missed: &'a MissLog,
    pub(crate) mcp: &'a [ReportedMiss],
    pub(crate) failures: &'a [RecordingFailure],
    /// The one-line summary exec prints.
    pub(crate) summary_line: String,
}

impl Run<'_> {
    /// The JSON report, redacted.
    pub(crate) fn report(&self, redactor: &Redactor) -> ExecReport {
        let text = |s: &str| redactor.text(s);
        let s = &self.stats.recorder;
        ExecReport {
            cassette_exec_report: REPORT_FORMAT,
            command: self.command.iter().map(|a| text(a)).collect(),
            mode: self.mode.clone(),
            store: redactor.url(&self.store),
            exit: self.exit,
            // Milliseconds are all a CI dashboard shows.
            duration_seconds: (self.duration.as_secs_f64() * 1000.0).round() / 1000.0,
            counts: Counts {
                requests: self.stats.requests,
                hits: s.hits,
                misses: s.misses + self.mcp.len() as u64,
                distinct_misses: self.missed.distinct,
                recorded: s.recorded,
                failed_recordings: s.failed_recordings,
                upstream_requests: s.upstream_requests,
                upstream_errors: s.upstream_errors,
                failures_replayed: s.failures_replayed,
                bypassed: self.stats.bypass_count(),
            },
            requests: self
                .journal
                .entries
                .iter()
                .map(|e| request(e, redactor))
                .collect(),
            requests_not_listed: self.journal.dropped,
            mcp_misses: self
                .mcp
                .iter()
                .map(|m| McpMiss {
                    key: m.key.clone(),
                    request: text(&m.request),
                    summary: text(&m.summary),
                })
                .collect(),
            recording_failures: self
                .failures
                .iter()
                .map(|f| Failure {
                    key: f.key.to_string(),
                    reason: text(&f.reason),
                })
                .collect(),
            bypassed: self
                .stats
                .bypassed
                .iter()
                .map(|b| Bypass {
                    host: b.host.clone(),
                    port: b.port,
                    refused: b.refused,
                    tunnelled: b.tunnelled,
                })
                .collect(),
        }
    }

    /// The Markdown summary: the counts line and the distinct misses, HTTP and MCP.
    pub(crate) fn markdown(&self, redactor: &Redactor) -> String {
        let notes: Vec<(String, String, String)> = self
            .missed
            .notes
            .iter()
            .map(|n| (n.key.to_string(), n.request.clone(), n.summary.clone()))
            .chain(
                self.mcp
                    .iter()
                    .map(|m| (m.key.clone(), m.request.clone(), m.summary.clone())),
            )
            .map(|(k, r, s)| (k, redactor.text(&r), redactor.text(&s)))
            .collect();
        let mut seen = std::collections::HashSet::new();
        let misses: Vec<ExecMiss<'_>> = notes
            .iter()
            .filter(|(k, _, _)| seen.insert(k.clone()))
            .map(|(key, request, why)| ExecMiss { key, request, why })
            .collect();
        let distinct = self.missed.distinct.max(misses.len() as u64);
        exec_summary(
            &redactor.text(&self.summary_line),
            &misses,
            distinct,
            RECORD,
        )
    }
}

fn request(entry: &JournalEntry, redactor: &Redactor) -> Request {
    Request {
        key: entry.key.as_ref().map(ToString::to_string),
        route: entry.route.clone(),
        method: entry.method.clone(),
        path: entry.path.clone(),
        outcome: entry.outcome.as_str().to_owned(),
        status: entry.status,
        explanation: entry.explanation.as_ref().map(|e| explained(e, redactor)),
        error: entry.error.clone(),
    }
}

fn explained(explanation: &Explanation, redactor: &Redactor) -> Explained {
    Explained {
        summary: redactor.text(&explanation.summary),
        nearest: explanation.nearest.as_ref().map(|n| n.key.to_string()),
        differences: explanation
            .nearest
            .as_ref()
            .map(|n| n.differences.iter().map(|d| redactor.text(d)).collect())
            .unwrap_or_default(),
    }
}

impl ExecReport {
    /// One JUnit test case per request (a miss or a failure an error, a recording that was not
    /// stored a failure), then one per MCP miss and per host whose traffic was refused.
    pub(crate) fn junit(&self) -> String {
        let failed: std::collections::HashSet<&str> = self
            .recording_failures
            .iter()
            .map(|f| f.key.as_str())
            .collect();
        let mut cases: Vec<junit::TestCase> = Vec::new();
        for (n, r) in self.requests.iter().enumerate() {
            let key = r.key.as_deref().unwrap_or("");
            let id = format!(
                "{} {} {} #{} {}",
                r.route,
                r.method,
                r.path,
                n + 1,
                key.get(..12).unwrap_or(key)
            );
            let outcome = match r.outcome.as_str() {
                "missed" => {
                    let why = r.explanation.as_ref().map_or_else(String::new, |e| {
                        let mut lines = vec![e.summary.clone()];
                        lines.extend(e.differences.iter().map(|d| format!("- {d}")));
                        lines.join("\n")
                    });
                    junit::Outcome::Error(format!("replay miss, key {key}: {why}"))
                }
                "failed" => junit::Outcome::Error(r.error.clone().unwrap_or_default()),
                _ if failed.contains(key) => {
                    junit::Outcome::Failed(format!("the recording of {key} was not stored"))
                }
                _ => junit::Outcome::Passed,
            };
            cases.push(junit::TestCase {
                id,
                seconds: 0.0,
                outcome,
            });
        }
        for m in &self.mcp_misses {
            cases.push(junit::TestCase {
                id: format!("mcp {} {}", m.request, m.key.get(..12).unwrap_or(&m.key)),
                seconds: 0.0,
                outcome: junit::Outcome::Error(format!(
                    "replay miss, key {}: {}",
                    m.key, m.summary
                )),
            });
        }
        if self.mode == "replay" {
            for b in self.bypassed.iter().filter(|b| b.refused > 0) {
                cases.push(junit::TestCase {
                    id: format!("bypass {}:{}", b.host, b.port),
                    seconds: 0.0,
                    outcome: junit::Outcome::Error(format!(
                        "{} requests to {}:{} bypassed the base URL and were refused in replay",
                        b.refused, b.host, b.port
                    )),
                });
            }
        }
        junit::render("cassette exec", &cases, 0.0)
    }

    /// The requests as cases of a saved run, for `cassette diff-runs`: one per key (the route,
    /// method, path and key prefix as its id), missed when any request with that key missed,
    /// failed when any failed, passed otherwise.
    pub(crate) fn cases(&self) -> BTreeMap<String, SavedCase> {
        let mut cases: BTreeMap<String, SavedCase> = BTreeMap::new();
        for r in &self.requests {
            let key = r.key.clone().unwrap_or_default();
            let id = format!(
                "{} {} {} {}",
                r.route,
                r.method,
                r.path,
                key.get(..16).unwrap_or(&key)
            );
            let verdict = match r.outcome.as_str() {
                "missed" => Verdict::Miss,
                "failed" => Verdict::Fail,
                _ => Verdict::Pass,
            };
            let hit = r.outcome == Answered::Replayed.as_str();
            let entry = cases.entry(id.clone()).or_insert_with(|| {
                SavedCase::without_answer(CaseResult {
                    id,
                    hit,
                    verdict,
                    finish: None,
                    key: key.clone(),
                    reason: None,
                    summary: None,
                    judge: None,
                    judges: Vec::new(),
                    score: None,
                    threshold: None,
                    scores: Vec::new(),
                })
            });
            let result = &mut entry.result;
            result.hit &= hit;
            let rank = |v: Verdict| match v {
                Verdict::Pass => 0,
                Verdict::Fail => 1,
                Verdict::Miss => 2,
            };
            if rank(verdict) > rank(result.verdict) {
                result.verdict = verdict;
            }
            if result.summary.is_none() {
                result.summary = r.explanation.as_ref().map(|e| e.summary.clone());
            }
            if result.reason.is_none() {
                result.reason = r.error.clone();
            }
        }
        cases
    }
}

/// Writes the report files exec was asked for.
pub(crate) fn write(outputs: &Outputs, run: &Run<'_>, redactor: &Redactor) -> anyhow::Result<()> {
    let report = run.report(redactor);
    if let Some(path) = &outputs.report {
        let mut text = serde_json::to_vec_pretty(&report)?;
        text.push(b'\n');
        write_file(path, &text, "report")?;
    }
    if let Some(path) = &outputs.junit {
        write_file(path, report.junit().as_bytes(), "JUnit report")?;
    }
    let summary = run.markdown(redactor);
    if let Some(path) = &outputs.markdown {
        write_file(path, summary.as_bytes(), "Markdown summary")?;
    }
    crate::shared::review::output::append_step_summary("exec", &summary);
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8], what: &str) -> anyhow::Result<()> {
    write_atomic(path, bytes).with_context(|| format!("writing the {what} {}", path.display()))
}

/// Whether a file is an exec report (a JSON object whose first member says so).
pub(crate) fn is_report(text: &str) -> bool {
    text.trim_start().starts_with('{') && text.contains("\"cassette_exec_report\"")
}
