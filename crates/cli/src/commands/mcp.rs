//! `cassette mcp -- COMMAND [ARGS...]`: record and replay a stdio MCP tool server. An MCP client
//! starts `cassette mcp -- python server.py` where it would start `python server.py`.
//!
//! Under `cassette exec`, misses reach exec through the report file it names in
//! [`REPORT_ENV`]: one JSON line per miss as it happens, and one line of counters per session,
//! so exec exits 2 on an MCP miss as on an HTTP one (see docs/mcp.md).

use crate::commands::proxy::{init_logging, shutdown_signal};
use crate::shared::runtime::EXIT_ERROR;
use crate::shared::settings::{parse_size, RecorderArgs, SettingsFile};
use anyhow::{anyhow, bail, Context};
use cassette_recorder::mcp::stdio::{self, ServerCommand, StdioOptions, StdioReport};
use cassette_recorder::mcp::{McpMiss, McpRecorder};
use cassette_recorder::Stats;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The environment variable naming the file where `cassette mcp` reports to `cassette exec`.
pub(crate) const REPORT_ENV: &str = "CASSETTE_EXEC_REPORT";

/// Programs that start many different servers: a server started by one of them is not told
/// apart from another by the program's name alone.
const LAUNCHERS: &[&str] = &[
    "python", "node", "npx", "uv", "uvx", "bun", "bunx", "deno", "sh", "bash", "java", "docker",
    "podman", "ruby", "go", "cargo", "pipx", "dotnet", "php", "perl", "env",
];

/// Arguments of `cassette mcp`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Modes (CASSETTE_MODE / --mode):\n  \
    replay  answer from cassettes; the server is never started; a miss is a JSON-RPC error\n  \
    record  start the server, relay every message, store each answer\n  \
    auto    replay hits, start the server at the first miss and record it\n  \
    off     relay, store nothing\n\
    Examples:\n  \
    CASSETTE_MODE=record cassette mcp --name notes -- python notes_server.py\n  \
    cassette mcp --name notes -- python notes_server.py     # replay: no server runs")]
pub(crate) struct McpArgs {
    #[command(flatten)]
    pub(crate) recorder: RecorderArgs,

    /// The server's identity in keys [default: the file name of COMMAND]. Name every server
    /// started by an interpreter (python, node, npx, uvx, ...): the key then survives moving
    /// or re-packaging it, and two servers never share recordings.
    #[arg(long, value_name = "NAME")]
    pub(crate) name: Option<String>,

    /// Largest message accepted from the client (and recorded from the server).
    #[arg(long, value_name = "SIZE", default_value = "32MiB", value_parser = parse_size)]
    pub(crate) max_message: usize,

    /// The server's command and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub(crate) command: Vec<OsString>,
}

/// Runs one MCP session on stdin/stdout.
pub(crate) fn run(args: McpArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    init_logging();
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| anyhow!("no server command given: cassette mcp -- COMMAND [ARGS...]"))?;
    let command = ServerCommand::new(program.clone(), rest.to_vec());
    let name = server_name(args.name.as_deref(), &command)?;
    let settings = args.recorder.resolve(file)?;
    let report = std::env::var_os(REPORT_ENV).map(PathBuf::from);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let outcome = runtime.block_on(async {
        let recorder = settings.build()?;
        let mode = recorder.mode();
        let store = recorder.store().location();
        let upstream = format!("stdio:{}", command.file_name());
        let mut engine = McpRecorder::new(recorder, &name, &upstream);
        if let Some(path) = &report {
            engine = engine.with_miss_hook(miss_reporter(path.clone(), &name));
        }
        let session = stdio::serve(
            engine.clone(),
            Arc::new(command),
            tokio::io::stdin(),
            tokio::io::stdout(),
            StdioOptions {
                max_message: args.max_message,
                ..StdioOptions::default()
            },
        );
        // On SIGINT or SIGTERM the session is dropped, which kills the server's process group.
        let report_of_session = tokio::select! {
            report = session => report?,
            _ = shutdown_signal() => bail!("stopped by a signal"),
        };
        crate::shared::runtime::flush_index(engine.recorder()).await;
        let stats = engine.recorder().stats();
        eprintln!(
            "cassette mcp ({mode}, server {name}, store {store}): {}",
            summary(&report_of_session, &stats)
        );
        if let Some(path) = &report {
            append_line(path, &session_line(&name, &report_of_session, &stats));
        }
        anyhow::Ok((report_of_session, stats))
    });
    // The blocking reader of stdin would otherwise hold the runtime open until the client
    // writes again.
    runtime.shutdown_timeout(Duration::from_millis(100));
    let (session, stats) = outcome?;
    Ok(if stats.misses > 0 {
        ExitCode::from(EXIT_ERROR)
    } else {
        match session.server_exit_code {
            Some(code) if session.ending == stdio::Ending::ServerExited => {
                ExitCode::from(u8::try_from(code).unwrap_or(1))
            }
            _ => ExitCode::SUCCESS,
        }
    })
}

/// Lets a `cassette mcp` started by an MCP client under `cassette exec` use exec's settings
/// and report to it even when the client did not pass its environment on (the official MCP
/// SDKs start servers with only `HOME`, `PATH` and a few others): when `CASSETTE_EXEC_REPORT`
/// is not set here, the `CASSETTE_*` variables of the nearest ancestor process that has it are
/// used for the ones not set here (Linux, through `/proc`). Called before the arguments are
/// parsed and before any thread starts.
pub(crate) fn inherit_exec_env() {
    if std::env::var_os(REPORT_ENV).is_some() {
        return;
    }
    for (name, value) in ancestor_exec_env() {
        if std::env::var_os(&name).is_none() {
            std::env::set_var(name, value);
        }
    }
}

/// The `CASSETTE_*` variables of the nearest ancestor that runs under `cassette exec`.
#[cfg(target_os = "linux")]
fn ancestor_exec_env() -> Vec<(String, String)> {
    let mut pid = parent_pid("self");
    for _ in 0..64 {
        let Some(current) = pid.filter(|p| *p > 1) else {
            break;
        };
        if let Ok(environ) = std::fs::read(format!("/proc/{current}/environ")) {
            let vars: Vec<(String, String)> = environ
                .split(|b| *b == 0)
                .filter_map(|entry| std::str::from_utf8(entry).ok())
                .filter_map(|entry| entry.split_once('='))
                .filter(|(name, _)| name.starts_with("CASSETTE_"))
                .map(|(name, value)| (name.to_owned(), value.to_owned()))
                .collect();
            if vars.iter().any(|(name, _)| name == REPORT_ENV) {
                return vars;
            }
        }
        pid = parent_pid(&current.to_string());
    }
    Vec::new()
}

#[cfg(not(target_os = "linux"))]
fn ancestor_exec_env() -> Vec<(String, String)> {
    Vec::new()
}

/// The parent of a process, from `/proc/PID/stat` (the fields after the command name, which
/// may itself hold spaces and parentheses).
#[cfg(target_os = "linux")]
fn parent_pid(pid: &str) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

/// The server's identity: `--name`, else the command's file name, with a warning when that
/// name is an interpreter's that many servers share.
fn server_name(name: Option<&str>, command: &ServerCommand) -> anyhow::Result<String> {
    if let Some(name) = name {
        let name = name.trim();
        if name.is_empty() || name.chars().any(char::is_control) {
            bail!("--name must be a non-empty name without control characters");
        }
        return Ok(name.to_owned());
    }
    let file_name = command.file_name();
    let stem = file_name
        .trim_end_matches(".exe")
        .trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if LAUNCHERS.contains(&stem) {
        eprintln!(
            "cassette mcp: this server is keyed as `{file_name}`, the name of its command, so it \
             shares recordings with every other server `{file_name}` starts; give it a name: \
             cassette mcp --name NAME -- ..."
        );
    }
    Ok(file_name)
}

fn summary(session: &StdioReport, stats: &Stats) -> String {
    format!(
        "{} requests: {} hits, {} misses, {} recorded, {} server starts, {} errors",
        session.stats.requests,
        stats.hits,
        stats.misses,
        stats.recorded,
        session.stats.server_starts,
        session.stats.errors
    )
}

fn session_line(name: &str, session: &StdioReport, stats: &Stats) -> Value {
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

fn miss_reporter(path: PathBuf, name: &str) -> cassette_recorder::mcp::MissHook {
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
fn append_line(path: &Path, line: &Value) {
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
    fn launchers_are_recognised_with_versions() {
        let python = ServerCommand::new("/usr/bin/python3.11", vec![]);
        assert_eq!(server_name(None, &python).unwrap(), "python3.11");
        let named = server_name(Some(" notes "), &python).unwrap();
        assert_eq!(named, "notes");
        assert!(server_name(Some(""), &python).is_err());
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
