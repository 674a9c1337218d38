//! `cassette exec -- COMMAND [ARGS...]`: run a command with its LLM SDKs pointed at an
//! in-process proxy on a free loopback port, then report what happened.
//!
//! Exit status: 2 when any replay miss happened (a missing recording is a different signal
//! from a failed test and should reach a different person), otherwise the command's own
//! status (128+N when a signal N ended it).

use crate::mcp::ReportedMiss;
use crate::proxy::{init_logging, summary};
use crate::settings::{RecorderArgs, RecorderSettings};
use crate::EXIT_ERROR;
use anyhow::Context;
use cassette_recorder::miss::MissLog;
use cassette_recorder::proxy::{spawn, ProxyConfig};
use cassette_recorder::Mode;
use std::collections::HashSet;
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
    Exit status: 2 on any replay miss, else the command's status.\n\
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
    init_logging();
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
        let recording = recorder.clone();
        let proxy = spawn(recorder, &config)
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

        let handle = proxy.stats_handle();
        let stats = proxy
            .stop()
            .await
            .context("cannot stop the in-process proxy")?;
        crate::flush_index(&recording).await;
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
        for line in missed_lines(&handle.misses(), &mcp.misses) {
            eprintln!("{line}");
        }
        Ok(if misses > 0 {
            ExitCode::from(EXIT_ERROR)
        } else {
            ExitCode::from(status_code(status))
        })
    })
}

/// Distinct missed keys listed before the rest are only counted.
const LISTED_MISSES: usize = 20;

/// One line per distinct missed key (HTTP and MCP together), the first [`LISTED_MISSES`], with
/// the request and the explanation's summary, then how many more there were.
fn missed_lines(http: &MissLog, mcp: &[ReportedMiss]) -> Vec<String> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut listed: Vec<(&str, &str, &str)> = Vec::new();
    let notes = http
        .notes
        .iter()
        .map(|n| (n.key.as_str(), n.request.as_str(), n.summary.as_str()));
    let reported = mcp
        .iter()
        .map(|m| (m.key.as_str(), m.request.as_str(), m.summary.as_str()));
    let mut distinct = http.distinct;
    for (key, request, summary) in notes.chain(reported) {
        if seen.insert(key) {
            listed.push((key, request, summary));
        }
    }
    // HTTP keys past the notes are counted in `http.distinct` already; MCP keys are not.
    distinct += (listed.len() - http.notes.len()) as u64;
    if distinct == 0 {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "cassette exec: {distinct} distinct key{} missed:",
        if distinct == 1 { "" } else { "s" }
    )];
    for (key, request, summary) in listed.iter().take(LISTED_MISSES) {
        lines.push(format!("  {key} {request}: {summary}"));
    }
    let shown = listed.len().min(LISTED_MISSES) as u64;
    if distinct > shown {
        lines.push(format!("  ... and {} more", distinct - shown));
    }
    lines
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

    #[test]
    fn distinct_misses_are_listed_up_to_twenty_then_counted() {
        use cassette_recorder::miss::MissNote;
        let key = |n: usize| cassette_keying::Key::parse(&format!("{n:064x}")).unwrap();
        let note = |n: usize| MissNote {
            key: key(n),
            request: format!("POST /r{n}"),
            summary: format!("why {n}"),
            count: 1,
        };
        let http = MissLog {
            notes: (0..15).map(note).collect(),
            distinct: 15,
            total: 17,
        };
        let mcp: Vec<ReportedMiss> = (10..25)
            .map(|n| ReportedMiss {
                key: key(n).to_string(),
                request: format!("tools/call {n}"),
                summary: format!("mcp {n}"),
            })
            .collect();
        let lines = missed_lines(&http, &mcp);
        assert_eq!(lines[0], "cassette exec: 25 distinct keys missed:");
        assert_eq!(lines[1], format!("  {} POST /r0: why 0", key(0)));
        assert_eq!(lines[16], format!("  {} tools/call 15: mcp 15", key(15)));
        assert_eq!(lines.len(), 1 + 20 + 1);
        assert_eq!(lines[21], "  ... and 5 more");
        assert!(missed_lines(&MissLog::default(), &[]).is_empty());
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
