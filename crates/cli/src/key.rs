//! `cassette key`: print the key of a request (filled in by the keying work).

use std::process::ExitCode;

/// Arguments of `cassette key`.
#[derive(Debug, clap::Args)]
pub struct KeyArgs {}

/// Runs `cassette key`.
pub fn run(_args: KeyArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
