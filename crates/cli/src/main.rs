//! The `cassette` command line: parses arguments into typed commands and maps results to exit
//! codes.

mod advice;
mod answer;
mod exec;
mod key;
mod maint;
mod mcp;
mod proxy;
mod request_file;
mod run;
mod settings;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Exit status for errors that are not a test verdict: usage errors, missing files, replay
/// misses. Distinct from 1, which means "an assertion failed".
pub(crate) const EXIT_ERROR: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "cassette",
    version,
    about = "Record real LLM API calls once, replay them offline."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the key of a request.
    Key(key::KeyArgs),
    /// Serve record/replay over HTTP: point any SDK's base URL at it.
    Proxy(proxy::ProxyArgs),
    /// Run a command with its SDKs pointed at an in-process proxy; exit 2 on any replay miss.
    Exec(exec::ExecArgs),
    /// Run a JSONL prompt suite through the recorder and grade each answer.
    Run(run::RunArgs),
    /// Record or replay a stdio MCP tool server: `cassette mcp -- COMMAND [ARGS...]`.
    Mcp(mcp::McpArgs),
    /// Is a request recorded? If not, the nearest recording and what differs.
    Explain(maint::explain::ExplainArgs),
    /// List the recorded cassettes.
    Ls(maint::ls::LsArgs),
    /// Print one cassette readably (a unique key prefix is enough).
    Show(maint::show::ShowArgs),
    /// Check that cassettes parse, keys still match, and no credential is stored.
    Verify(maint::verify::VerifyArgs),
    /// Delete cassettes that no usage log names.
    Gc(maint::gc::GcArgs),
    /// Copy cassettes between stores (create-only and resumable by default).
    Copy(maint::copy::CopyArgs),
    /// Compare two stores: keys only in one, and changed answers.
    Diff(maint::diff::DiffArgs),
    /// Compare two saved runs: regressions, fixes, added and removed cases.
    DiffRuns(maint::diff_runs::DiffRunsArgs),
    /// Send a request live N times (never stored) and count distinct answers.
    Probe(maint::probe::ProbeArgs),
    /// Keep the cases whose score is near their threshold, for a canary suite.
    Canary(maint::canary::CanaryArgs),
}

fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|a| a == "mcp") {
        mcp::inherit_exec_env();
    }
    let cli = Cli::parse();
    // Library warnings (a damaged log line, a cache bypassed, an upstream that broke off) reach
    // stderr whatever the command.
    proxy::init_logging();
    if cli.command.only_prints() {
        restore_default_sigpipe();
    }
    let result = match cli.command {
        Command::Key(args) => key::run(args),
        Command::Proxy(args) => proxy::run(args),
        Command::Exec(args) => exec::run(args),
        Command::Run(args) => run::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Explain(args) => maint::explain::run(args),
        Command::Ls(args) => maint::ls::run(args),
        Command::Show(args) => maint::show::run(args),
        Command::Verify(args) => maint::verify::run(args),
        Command::Gc(args) => maint::gc::run(args),
        Command::Copy(args) => maint::copy::run(args),
        Command::Diff(args) => maint::diff::run(args),
        Command::DiffRuns(args) => maint::diff_runs::run(args),
        Command::Probe(args) => maint::probe::run(args),
        Command::Canary(args) => maint::canary::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            match advice::for_chain(&err) {
                Some(advice) => eprintln!("cassette: {err:#} ({advice})"),
                None => eprintln!("cassette: {err:#}"),
            }
            ExitCode::from(EXIT_ERROR)
        }
    }
}

impl Command {
    /// Commands that only print to stdout (no sockets, no children).
    fn only_prints(&self) -> bool {
        matches!(
            self,
            Command::Key(_)
                | Command::Ls(_)
                | Command::Show(_)
                | Command::Verify(_)
                | Command::Diff(_)
                | Command::DiffRuns(_)
                | Command::Canary(_)
                | Command::Explain(_)
        )
    }
}

/// Lets a printing command end quietly when its reader goes away (`cassette show KEY | head`),
/// as Unix tools do. Rust ignores SIGPIPE, which turns a closed pipe into a panic inside
/// `println!`. Commands that serve sockets or run children keep ignoring it.
fn restore_default_sigpipe() {
    // SAFETY: called before any thread is started; SIG_DFL is a valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
