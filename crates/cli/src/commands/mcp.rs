//! `cassette mcp -- COMMAND [ARGS...]`: record and replay a stdio MCP tool server. An MCP client
//! starts `cassette mcp -- python server.py` where it would start `python server.py`.
//!
//! Under `cassette exec`, misses reach exec through the report file it names in
//! [`REPORT_ENV`] (`shared/mcp_report.rs`): one JSON line per miss as it happens, and one line of
//! counters per session, so exec exits 2 on an MCP miss as on an HTTP one (see docs/mcp.md).

use crate::shared::mcp_report::{append_line, miss_reporter, session_line, REPORT_ENV};
use crate::shared::runtime::EXIT_ERROR;
use crate::shared::runtime::{init_logging, shutdown_signal};
use crate::shared::settings::{parse_size, RecorderArgs, SettingsFile};
use anyhow::{anyhow, bail, Context};
use cassette_recorder::mcp::stdio::{self, ServerCommand, StdioOptions, StdioReport};
use cassette_recorder::mcp::McpRecorder;
use cassette_recorder::Stats;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launchers_are_recognised_with_versions() {
        let python = ServerCommand::new("/usr/bin/python3.11", vec![]);
        assert_eq!(server_name(None, &python).unwrap(), "python3.11");
        let named = server_name(Some(" notes "), &python).unwrap();
        assert_eq!(named, "notes");
        assert!(server_name(Some(""), &python).is_err());
    }
}
