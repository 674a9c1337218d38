//! `cassette exec -- COMMAND [ARGS...]`: run a command with its LLM SDKs pointed at an
//! in-process proxy on a free loopback port, then report what happened.
//!
//! Exit status: 2 when any replay miss happened (a missing recording is a different signal
//! from a failed test and should reach a different person) or an answer that was to be
//! recorded was not stored, otherwise the command's own status (128+N when a signal N ended
//! it).

use crate::proxy::summary;
use crate::settings::{RecorderArgs, RecorderSettings};
use crate::EXIT_ERROR;
use anyhow::Context;
use cassette_recorder::proxy::{spawn, ProxyConfig};
use cassette_recorder::Mode;
use std::ffi::OsString;
use std::process::{ExitCode, ExitStatus};

/// The API key given to SDKs in replay mode when none is set: SDKs refuse to construct without
/// one, and replay never sends it anywhere.
pub(crate) const PLACEHOLDER_API_KEY: &str = "cassette-replay-placeholder-key";

/// Arguments of `cassette exec`.
#[derive(Debug, clap::Args)]
#[command(after_help = "The command sees:\n  \
    OPENAI_BASE_URL=<proxy>/v1\n  \
    ANTHROPIC_BASE_URL=<proxy>/anthropic\n  \
    OLLAMA_HOST=<proxy>/ollama\n  \
    CASSETTE_PROXY_URL=<proxy>\n  \
    CASSETTE_MODE, CASSETTE_STORE (and CASSETTE_CACHE) of this exec\n  \
    CASSETTE_EXEC_REPORT=<file where cassette mcp reports misses>\n\
    and, in replay mode, placeholder OPENAI_API_KEY/ANTHROPIC_API_KEY when unset.\n\
    Exit status: 2 on any replay miss or failed recording, else the command's status.\n\
    Examples:\n  \
    CASSETTE_MODE=record cassette exec -- pytest\n  \
    cassette exec -- pytest        # replay in CI: no key, no network")]
pub(crate) struct ExecArgs {
    #[command(flatten)]
    recorder: RecorderArgs,

    /// The command and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

/// The environment the child gets, given the proxy's base URL.
pub(crate) fn child_env(url: &str, mode: Mode) -> Vec<(String, String)> {
    let mut env = vec![
        ("CASSETTE_PROXY_URL".to_owned(), url.to_owned()),
        ("OPENAI_BASE_URL".to_owned(), format!("{url}/v1")),
        ("ANTHROPIC_BASE_URL".to_owned(), format!("{url}/anthropic")),
        ("OLLAMA_HOST".to_owned(), format!("{url}/ollama")),
    ];
    if mode == Mode::Replay {
        for name in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"] {
            let set = std::env::var_os(name).is_some_and(|v| !v.is_empty());
            if !set {
                env.push((name.to_owned(), PLACEHOLDER_API_KEY.to_owned()));
            }
        }
    }
    env
}

/// The settings a `cassette` command run by the command inherits (a `cassette mcp` that an
/// MCP client starts): the same mode, store and cache as this exec.
fn nested_env(settings: &RecorderSettings) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "CASSETTE_MODE".to_owned(),
            settings.config.mode.as_str().to_owned(),
        ),
        ("CASSETTE_STORE".to_owned(), settings.store.to_string()),
    ];
    if let Some(cache) = &settings.cache {
        env.push(("CASSETTE_CACHE".to_owned(), cache.to_string()));
    }
    env
}

/// Runs the command behind the proxy.
pub(crate) fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given: cassette exec -- COMMAND [ARGS...]")?;
    let settings = args.recorder.resolve()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let recorder = settings.clone().build()?;
        let mode = recorder.mode();
        let store = recorder.store().location();
        let config = ProxyConfig {
            advice: Some(crate::advice::for_recorder),
            ..ProxyConfig::ephemeral()
        };
        let proxy = spawn(recorder.clone(), &config)
            .await
            .context("cannot start the in-process proxy")?;
        let url = proxy.url();

        let mcp_report = crate::mcp::ExecReportFile::create()?;
        let mut command = tokio::process::Command::new(program);
        command
            .args(rest)
            .envs(child_env(&url, mode))
            .envs(nested_env(&settings))
            .env(crate::mcp::REPORT_ENV, mcp_report.path());
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot run `{}`", program.to_string_lossy()))?;
        let status = wait_forwarding_signals(&mut child).await?;

        let stats = proxy
            .stop()
            .await
            .context("cannot stop the in-process proxy")?;
        let mcp = mcp_report.read();
        let misses = stats.recorder.misses + mcp.misses.len() as u64;
        let hint = if misses > 0 {
            " (replay misses: exit 2; record them with CASSETTE_MODE=record or auto)"
        } else {
            ""
        };
        let mcp_summary = mcp.summary().map(|s| format!("; {s}")).unwrap_or_default();
        eprintln!(
            "cassette exec ({mode}, store {store}): {}{mcp_summary}{hint}",
            summary(&stats)
        );
        for miss in &mcp.misses {
            eprintln!("cassette exec: MCP miss: {miss}");
        }
        // A recording that was not stored leaves a tape missing that the run seemed to make:
        // as loud as a miss, with the key.
        let failures = recorder.recording_failures();
        for failure in &failures {
            eprintln!("cassette exec: {failure}");
        }
        Ok(if misses > 0 || !failures.is_empty() {
            ExitCode::from(EXIT_ERROR)
        } else {
            ExitCode::from(status_code(status))
        })
    })
}

/// Waits for the child. SIGINT from a terminal already reaches the whole process group, so it
/// is only kept from killing cassette before the child is done; SIGTERM sent to cassette alone
/// is passed on to the child.
async fn wait_forwarding_signals(child: &mut tokio::process::Child) -> anyhow::Result<ExitStatus> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        loop {
            tokio::select! {
                status = child.wait() => return status.context("cannot wait for the command"),
                _ = int.recv() => {}
                _ = term.recv() => {
                    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                        // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped,
                        // since wait() has not returned) and a valid signal number.
                        unsafe {
                            libc::kill(pid, libc::SIGTERM);
                        }
                    }
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        child.wait().await.context("cannot wait for the command")
    }
}

/// The exit status to pass on: the child's code, or 128+N for a signal N.
fn status_code(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        // Exit codes are 0..=255 on Unix; anything else is reported as a plain failure.
        return u8::try_from(code).unwrap_or(1);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return u8::try_from(128 + signal).unwrap_or(1);
        }
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_env_points_every_sdk_at_the_proxy() {
        let env = child_env("http://127.0.0.1:5", Mode::Record);
        let get = |n: &str| env.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(get("OPENAI_BASE_URL"), Some("http://127.0.0.1:5/v1"));
        assert_eq!(
            get("ANTHROPIC_BASE_URL"),
            Some("http://127.0.0.1:5/anthropic")
        );
        assert_eq!(get("OLLAMA_HOST"), Some("http://127.0.0.1:5/ollama"));
        assert_eq!(get("CASSETTE_PROXY_URL"), Some("http://127.0.0.1:5"));
        // Record mode never invents keys: the real upstream must get real ones.
        assert_eq!(get("OPENAI_API_KEY"), None);
    }

    #[cfg(unix)]
    #[test]
    fn exit_statuses_pass_through() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(status_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(status_code(ExitStatus::from_raw(libc::SIGKILL)), 128 + 9);
    }
}
