//! The report file between `cassette exec` and the `cassette mcp` sessions it runs: exec
//! creates it and names it in [`REPORT_ENV`]; each session appends one JSON line per miss as it
//! happens and one line of counters when it ends; exec reads them back, so it exits 2 on an
//! MCP miss as on an HTTP one (see docs/mcp.md).

use anyhow::{bail, Context};
use cassette_recorder::mcp::stdio::StdioReport;
use cassette_recorder::mcp::McpMiss;
use cassette_recorder::Stats;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The environment variable naming the file where `cassette mcp` reports to `cassette exec`.
pub(crate) const REPORT_ENV: &str = "CASSETTE_EXEC_REPORT";

pub(crate) fn session_line(name: &str, session: &StdioReport, stats: &Stats) -> Value {
    json!({
        "event": "session",
        "server": name,
        "requests": session.stats.requests,
        "hits": stats.hits,
        "misses": stats.misses,
        "recorded": stats.recorded,
        "server_starts": session.stats.server_starts,
        "errors": session.stats.errors,
    })
}

pub(crate) fn miss_reporter(path: PathBuf, name: &str) -> cassette_recorder::mcp::MissHook {
    let name = name.to_owned();
    let lock = Arc::new(Mutex::new(()));
    Arc::new(move |miss: &McpMiss| {
        let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        append_line(
            &path,
            &json!({
                "event": "miss",
                "server": name,
                "key": miss.key,
                "method": miss.method,
                "subject": miss.subject,
                "request": miss.request_line(),
                "summary": miss.explanation.summary,
                "differences": miss.explanation_lines(),
            }),
        );
    })
}

/// Appends one JSON line with a single write, so lines of concurrent `cassette mcp` processes
/// never interleave (the file is opened with `O_APPEND`).
pub(crate) fn append_line(path: &Path, line: &Value) {
    let mut bytes = line.to_string().into_bytes();
    bytes.push(b'\n');
    let written = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(&bytes));
    if let Err(err) = written {
        eprintln!(
            "cassette mcp: cannot report to cassette exec through {}: {err}",
            path.display()
        );
    }
}

/// What the `cassette mcp` sessions run under one `cassette exec` reported.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ExecMcpReport {
    /// Sessions that ended and reported their counters.
    pub(crate) sessions: u64,
    /// Requests, hits, recordings and server starts over all sessions.
    pub(crate) requests: u64,
    /// Hits.
    pub(crate) hits: u64,
    /// Cassettes written.
    pub(crate) recorded: u64,
    /// Server starts.
    pub(crate) server_starts: u64,
    /// Misses, in the order they were reported (repeats included).
    pub(crate) misses: Vec<ReportedMiss>,
}

/// One MCP miss as a `cassette mcp` session reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReportedMiss {
    /// The key that missed.
    pub(crate) key: String,
    /// The request in a few words: method, tool and server.
    pub(crate) request: String,
    /// The explanation's one-line summary.
    pub(crate) summary: String,
}

impl ExecMcpReport {
    /// A one-line summary for exec's output, or `None` when no session ran.
    pub(crate) fn summary(&self) -> Option<String> {
        if self.sessions == 0 && self.misses.is_empty() {
            return None;
        }
        Some(format!(
            "mcp: {} sessions, {} requests: {} hits, {} misses, {} recorded, {} server starts",
            self.sessions,
            self.requests,
            self.hits,
            self.misses.len(),
            self.recorded,
            self.server_starts
        ))
    }
}

/// The report file of one `cassette exec` run: created empty (owner-only) before the command
/// starts, read and deleted after it ends.
#[derive(Debug)]
pub(crate) struct ExecReportFile {
    path: PathBuf,
}

impl ExecReportFile {
    /// Creates a new, empty report file in the temporary directory.
    pub(crate) fn create() -> anyhow::Result<ExecReportFile> {
        let dir = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        for attempt in 0..100u32 {
            let path = dir.join(format!(
                "cassette-exec-{}-{nanos}-{attempt}.jsonl",
                std::process::id()
            ));
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            match options.open(&path) {
                Ok(_) => return Ok(ExecReportFile { path }),
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(err) => {
                    return Err(err).with_context(|| {
                        format!("cannot create the MCP report file in {}", dir.display())
                    })
                }
            }
        }
        bail!("cannot create the MCP report file in {}", dir.display())
    }

    /// The path to hand to the command in [`REPORT_ENV`].
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads what was reported; unreadable lines are skipped with a warning.
    pub(crate) fn read(&self) -> ExecMcpReport {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        parse_report(&text)
    }
}

impl Drop for ExecReportFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn parse_report(text: &str) -> ExecMcpReport {
    let mut report = ExecMcpReport::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            eprintln!("cassette exec: skipped an unreadable line of the MCP report: {line}");
            continue;
        };
        let count = |name: &str| value.get(name).and_then(Value::as_u64).unwrap_or(0);
        let text = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or("?");
        match value.get("event").and_then(Value::as_str) {
            Some("miss") => {
                let subject = value
                    .get("subject")
                    .and_then(Value::as_str)
                    .map(|s| format!(" `{s}`"))
                    .unwrap_or_default();
                let request = value
                    .get("request")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| {
                        format!(
                            "{}{subject} on MCP server `{}`",
                            text("method"),
                            text("server")
                        )
                    });
                report.misses.push(ReportedMiss {
                    key: text("key").to_owned(),
                    request,
                    summary: value
                        .get("summary")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                });
            }
            Some("session") => {
                report.sessions += 1;
                report.requests += count("requests");
                report.hits += count("hits");
                report.recorded += count("recorded");
                report.server_starts += count("server_starts");
            }
            _ => {}
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_add_up_sessions_and_list_misses() {
        let text = concat!(
            r#"{"event":"miss","server":"notes","key":"ab","method":"tools/call","subject":"search","differences":[]}"#,
            "\n",
            r#"{"event":"session","server":"notes","requests":3,"hits":2,"misses":1,"recorded":0,"server_starts":0,"errors":0}"#,
            "\n",
            "not json\n",
            r#"{"event":"session","server":"clock","requests":1,"hits":1,"misses":0,"recorded":0,"server_starts":0,"errors":0}"#,
            "\n"
        );
        let report = parse_report(text);
        assert_eq!(report.sessions, 2);
        assert_eq!(report.requests, 4);
        assert_eq!(report.hits, 3);
        assert_eq!(
            report.misses,
            [ReportedMiss {
                key: "ab".into(),
                request: "tools/call `search` on MCP server `notes`".into(),
                summary: String::new()
            }]
        );
        assert!(report.summary().unwrap().contains("1 misses"));
        assert_eq!(parse_report("").summary(), None);
    }

    #[test]
    fn report_files_are_created_empty_and_removed() {
        let file = ExecReportFile::create().unwrap();
        let path = file.path().to_owned();
        append_line(&path, &json!({"event": "session", "requests": 1}));
        assert_eq!(file.read().requests, 1);
        drop(file);
        assert!(!path.exists());
    }
}
