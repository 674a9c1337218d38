//! The `cassette` command line: parses arguments into typed commands and maps results to exit
//! codes.

mod exec;
mod key;
mod proxy;
mod request_file;
mod settings;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Exit status for errors that are not a test verdict: usage errors, missing files, replay
/// misses. Distinct from 1, which means "an assertion failed".
pub const EXIT_ERROR: u8 = 2;

#[derive(Debug, Parser)]
#[command(name = "cassette", version, about = "Record real LLM API calls once, replay them offline.")]
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Key(args) => key::run(args),
        Command::Proxy(args) => proxy::run(args),
        Command::Exec(args) => exec::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("cassette: {err:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
