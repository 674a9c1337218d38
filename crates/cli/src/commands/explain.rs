//! `cassette explain REQUEST`: is this request recorded, and if not, which recording is nearest
//! and what differs. Reads the store only, whatever the mode.

use crate::shared::miss::print_miss;
use crate::shared::request_file;
use crate::shared::settings::{RecorderArgs, SettingsFile};
use cassette_recorder::Mode;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `cassette explain`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit status: 0 recorded, 1 not recorded, 2 error.")]
pub(crate) struct ExplainArgs {
    /// A request file, as `cassette key --request` takes it.
    #[arg(value_name = "REQUEST")]
    request: PathBuf,

    #[command(flatten)]
    recorder: RecorderArgs,

    /// Print the explanation as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `cassette explain`.
pub(crate) fn run(args: ExplainArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let request = request_file::load(&args.request)?;
    let mut settings = args.recorder.resolve(file)?;
    // Explaining must never reach an upstream, whatever CASSETTE_MODE says.
    settings.config.mode = Mode::Replay;
    let recorder = settings.build()?;
    let key = request.key(&recorder.config().key).key.to_string();
    let miss = crate::shared::runtime::runtime()?.block_on(recorder.explain(&request))?;
    match miss {
        None => {
            if args.json {
                println!("{}", serde_json::json!({"key": key, "recorded": true}));
            } else {
                println!("recorded: {key} in {}", recorder.store().location());
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(miss) => {
            if args.json {
                let mut value = serde_json::to_value(&miss)?;
                value["recorded"] = serde_json::Value::Bool(false);
                println!("{value}");
            } else {
                println!("not recorded: {key}");
                print_miss(&miss);
            }
            Ok(ExitCode::from(1))
        }
    }
}
