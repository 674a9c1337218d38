//! `cassette probe REQUEST --n 5`: sends one request live N times, never stored, and counts the
//! distinct answers: how much of an "improvement" is sampling noise.

use crate::answer;
use crate::request_file;
use crate::settings::{RecorderArgs, SettingsFile};
use cassette_keying::Profile;
use cassette_recorder::Mode;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `cassette probe`.
#[derive(Debug, clap::Args)]
pub(crate) struct ProbeArgs {
    /// A request file, as `cassette key --request` takes it.
    #[arg(value_name = "REQUEST")]
    request: PathBuf,

    /// How many times to send it.
    #[arg(long, short = 'n', default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=1000))]
    n: u16,

    #[command(flatten)]
    recorder: RecorderArgs,
}

/// Runs `cassette probe`.
pub(crate) fn run(args: ProbeArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let request = request_file::load(&args.request)?;
    let profile = Profile::from_path(&request.path);
    let mut settings = args.recorder.resolve(file)?;
    // A probe measures the live model: it never reads a cassette and never writes one.
    settings.config.mode = Mode::Off;
    let recorder = settings.build()?;
    let answers = super::runtime()?.block_on(async {
        let mut answers: Vec<(String, usize)> = Vec::new();
        for i in 0..args.n {
            let outcome = recorder.handle(request.clone()).await?;
            let status = outcome.response.status;
            let body = outcome.response.into_bytes().await?;
            if !(200..300).contains(&status) {
                anyhow::bail!(
                    "request {} of {} answered HTTP {status}: {}",
                    i + 1,
                    args.n,
                    String::from_utf8_lossy(&body)
                );
            }
            let answer = answer::from_bytes(profile, &body);
            let mut text = answer.text;
            for call in answer.tool_calls {
                text.push_str(&format!("\n[tool call] {}({})", call.name, call.arguments));
            }
            match answers.iter_mut().find(|(t, _)| *t == text) {
                Some((_, count)) => *count += 1,
                None => answers.push((text, 1)),
            }
        }
        anyhow::Ok(answers)
    })?;
    println!("{} requests, {} distinct answers", args.n, answers.len());
    for (i, (text, count)) in answers.iter().enumerate() {
        println!("--- answer {} ({count}x)", i + 1);
        println!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}
