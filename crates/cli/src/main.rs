//! The `cassette` command line: parses arguments into typed commands and maps results to exit
//! codes.

// The doc comments of the argument structs are `--help` text (clap reads them): there
// `[default: ...]`, `[REDACTED]` and bare URLs are meant as written, not as rustdoc links.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::bare_urls)]

mod commands;
mod shared;

/// jemalloc instead of the system allocator: a replay hit allocates and frees buffers of a few
/// kilobytes (the request body, the cassette read), and glibc's malloc spent about a tenth of
/// the proxy's CPU under load consolidating them (BENCHMARKS.md, "Proxy"). Peak memory of the
/// large-body tests (`tests/memory.rs`) went down with it, where mimalloc's went up. jemalloc
/// does not build with MSVC, so Windows keeps its system allocator.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use commands::{config, exec, grade, init, key, mcp, proxy, run};
use shared::runtime::EXIT_ERROR;
use shared::{advice, settings};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "cassette",
    version,
    about = "Record real LLM API calls once, replay them offline."
)]
struct Cli {
    /// Which settings file is read (global: `--config FILE`, `--no-config`).
    #[command(flatten)]
    settings: settings::FileArgs,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write a commented starter cassette.toml here (never over an existing one).
    Init(init::InitArgs),
    /// Print the effective settings and where each came from (flag, env, file, default).
    Config(config::ConfigArgs),
    /// Print the key of a request.
    Key(key::KeyArgs),
    /// Serve record/replay over HTTP: point any SDK's base URL at it.
    Proxy(proxy::ProxyArgs),
    /// Run a command with its SDKs pointed at an in-process proxy; exit 2 on any replay miss
    /// or any request that bypassed it in replay.
    Exec(exec::ExecArgs),
    /// Run a JSONL prompt suite through the recorder and grade each answer.
    Run(run::RunArgs),
    /// Grade one answer (or, with --jsonl, one a line) with the suite graders, the judge
    /// recorded and replayed: what the pytest, vitest and jest helpers call.
    Grade(grade::GradeArgs),
    /// Record or replay a stdio MCP tool server: `cassette mcp -- COMMAND [ARGS...]`.
    Mcp(mcp::McpArgs),
    /// Is a request recorded? If not, the nearest recording and what differs.
    Explain(commands::explain::ExplainArgs),
    /// List the recorded cassettes.
    Ls(commands::ls::LsArgs),
    /// Print one cassette readably (a unique key prefix is enough).
    Show(commands::show::ShowArgs),
    /// Check that cassettes parse, keys still match, and no credential is stored.
    Verify(commands::verify::VerifyArgs),
    /// Delete cassettes that no usage log names.
    Gc(commands::gc::GcArgs),
    /// Rewrite a jsonl:// log without the bytes of deleted and replaced cassettes.
    Compact(commands::compact::CompactArgs),
    /// Copy cassettes between stores (create-only and resumable by default).
    Copy(commands::copy::CopyArgs),
    /// Convert tapes of other tools (seed-harness JSON, vcrpy YAML) into cassettes.
    Import(commands::import::ImportArgs),
    /// Key every cassette again from its stored request under today's keying settings and key
    /// version (after a change to `ignore` or `volatile`, or an upgrade).
    Rekey(commands::rekey::RekeyArgs),
    /// Compact the nearest-recording index, so a miss does not read every cassette.
    Index(commands::index::IndexArgs),
    /// Compare two sets of cassettes (stores, folders, git revisions): re-recorded pairs,
    /// drift verdicts, HTML and Markdown reviews.
    Diff(commands::diff::DiffArgs),
    /// Compare two saved runs: regressions, fixes, added and removed cases.
    DiffRuns(commands::diff_runs::DiffRunsArgs),
    /// Send a request live N times (never stored) and count distinct answers.
    Probe(commands::probe::ProbeArgs),
    /// Keep the cases whose score is near their threshold, for a canary suite.
    Canary(commands::canary::CanaryArgs),
}

fn main() -> ExitCode {
    // npm's postinstall puts this binary in place of its JavaScript shim on Unix only.
    #[cfg(unix)]
    if let Some(code) = commands::npm::redirect_to_override() {
        return code;
    }
    if std::env::args_os().nth(1).is_some_and(|a| a == "mcp") {
        mcp::inherit_exec_env();
    }
    let matches = match Cli::command().try_get_matches() {
        Ok(matches) => matches,
        Err(err) => exit_shown(err),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => exit_shown(err),
    };
    // Library warnings (a damaged log line, a cache bypassed, an upstream that broke off) reach
    // stderr whatever the command.
    shared::runtime::init_logging();
    if cli.command.only_prints() {
        shared::runtime::restore_default_sigpipe();
    }
    // `init` writes a new file: a broken one in a parent folder must not stop it.
    let file = match (&cli.command, cli.settings.load()) {
        (Command::Init(_), Err(_)) => Ok(settings::SettingsFile::default()),
        (_, loaded) => loaded,
    };
    let result = file.and_then(|file| run_command(cli.command, &file, &matches));
    match result {
        Ok(code) => code,
        Err(err) => {
            // Every URL a message quotes is shown without credentials.
            let message = match advice::for_chain(&err) {
                Some(advice) => format!("cassette: {err:#} ({advice})"),
                None => format!("cassette: {err:#}"),
            };
            eprintln!("{}", cassette_keying::shown_urls(&message));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Ends on a command-line error, which quotes the value refused (a URL with a password, say):
/// shown without credentials when it has any, else as clap shows it.
fn exit_shown(err: clap::Error) -> ! {
    let text = err.to_string();
    if let std::borrow::Cow::Owned(shown) = cassette_keying::shown_urls(&text) {
        eprint!("{shown}");
        std::process::exit(err.exit_code());
    }
    err.exit()
}

/// Runs one command with the settings file already read and validated.
fn run_command(
    command: Command,
    file: &settings::SettingsFile,
    matches: &ArgMatches,
) -> anyhow::Result<ExitCode> {
    match command {
        Command::Init(args) => init::run(args, file),
        Command::Config(args) => {
            let sub = matches.subcommand_matches("config").unwrap_or(matches);
            config::run(args, file, sub)
        }
        Command::Key(args) => key::run(args, file),
        Command::Proxy(args) => proxy::run(args, file),
        Command::Exec(args) => exec::run(args, file),
        Command::Run(args) => run::run(args, file),
        Command::Grade(args) => grade::run(args, file),
        Command::Mcp(args) => mcp::run(args, file),
        Command::Explain(args) => commands::explain::run(args, file),
        Command::Ls(args) => commands::ls::run(args, file),
        Command::Show(args) => commands::show::run(args, file),
        Command::Verify(args) => commands::verify::run(args, file),
        Command::Gc(args) => commands::gc::run(args, file),
        Command::Compact(args) => commands::compact::run(args, file),
        Command::Copy(args) => commands::copy::run(args),
        Command::Import(args) => commands::import::run(args, file),
        Command::Rekey(args) => commands::rekey::run(args, file),
        Command::Index(args) => commands::index::run(args, file),
        Command::Diff(args) => commands::diff::run(args, file),
        Command::DiffRuns(args) => commands::diff_runs::run(args),
        Command::Probe(args) => commands::probe::run(args, file),
        Command::Canary(args) => commands::canary::run(args),
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
