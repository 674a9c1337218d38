//! `cassette exec -- COMMAND [ARGS...]`: run a command with its LLM SDKs pointed at an
//! in-process proxy on a free loopback port, then report what happened.
//!
//! The command's environment points every popular client at the proxy (the base-URL variables
//! each reads, see docs/proxy.md), gives SDKs placeholder keys, and, unless the catch is off,
//! sets the proxy variables to the proxy too: a client whose base URL still points at a vendor
//! then sends its traffic to the proxy as a forward proxy, where it is counted and, in replay,
//! refused.
//!
//! Exit status: 2 when any replay miss happened, or any request bypassed the base URL in
//! replay (a missing recording is a different signal from a failed test and should reach a
//! different person), or an answer that was to be recorded was not stored; otherwise the
//! command's own status (128+N when a signal N ended it).

use crate::shared::child_env::{
    child_env, in_process_base_urls, EnvChange, ProxyAddress, IN_PROCESS_URLS_ENV,
};
use crate::shared::mcp_report::ReportedMiss;
use crate::shared::runtime::init_logging;
use crate::shared::runtime::EXIT_ERROR;
use crate::shared::served::summary;
use crate::shared::settings::{
    keys_summary, RecorderArgs, RecorderSettings, ServeArgs, SettingsFile,
};
use anyhow::{bail, Context};
use cassette_recorder::miss::MissLog;
use cassette_recorder::proxy::{spawn, Channel, Journal, ProxyConfig, ProxyStats};
use cassette_recorder::Mode;
use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitCode, ExitStatus};

/// Arguments of `cassette exec`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The command sees (docs/proxy.md has the table per client):\n  \
    OPENAI_BASE_URL and OPENAI_API_BASE=<proxy>/v1\n  \
    ANTHROPIC_BASE_URL=<proxy>/anthropic\n  \
    OLLAMA_HOST and OLLAMA_API_BASE=<proxy>/ollama\n  \
    GOOGLE_GEMINI_BASE_URL=<proxy>/gemini\n  \
    GROQ_BASE_URL=<proxy>/groq, CO_API_URL=<proxy>/cohere\n  \
    AZURE_OPENAI_ENDPOINT=<proxy>/azure, when a route named azure exists\n  \
    HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (and lower case)=<proxy>, NO_PROXY=localhost,127.0.0.1,::1\n    \
    and the allowed hosts, unless --no-catch-bypass\n  \
    CASSETTE_PROXY_URL=<proxy>\n  \
    CASSETTE_MODE, CASSETTE_STORE, CASSETTE_REPEATS (and CASSETTE_CACHE) of this exec\n  \
    CASSETTE_EXEC_REPORT=<file where cassette mcp reports misses>\n  \
    LITELLM_LOCAL_MODEL_COST_MAP, LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS,\n    \
    OPENAI_AGENTS_DISABLE_TRACING and the telemetry opt-outs\n    \
    CREWAI_DISABLE_TELEMETRY, HAYSTACK_TELEMETRY_ENABLED, ANONYMIZED_TELEMETRY, MEM0_TELEMETRY,\n    \
    HF_HUB_DISABLE_TELEMETRY, GRADIO_ANALYTICS_ENABLED, SCARF_NO_ANALYTICS, DO_NOT_TRACK,\n    \
    each unless already set\n\
    and OPENAI_API_KEY=cassette (ANTHROPIC_API_KEY, GEMINI_API_KEY, GOOGLE_API_KEY, GROQ_API_KEY,\n\
    CO_API_KEY and every\n\
    route's key variable alike): the real keys stay with the proxy, which sends each route's\n\
    own key upstream. A client key variable no route reads is passed on as set.\n\
    Exit status: 2 on any replay miss, failed recording or request that bypassed the base URL\n\
    in replay, else the command's status.\n\
    Examples:\n  \
    CASSETTE_MODE=record OPENAI_API_KEY=sk-... cassette exec -- pytest\n  \
    cassette exec -- pytest        # replay in CI: no key, no network\n  \
    cassette exec --listen 127.0.0.1:8089 -- ./app   # a client configured with a fixed URL"
)]
pub(crate) struct ExecArgs {
    #[command(flatten)]
    recorder: RecorderArgs,

    #[command(flatten)]
    serve: ServeArgs,

    /// Listen on this loopback address instead of a free port, for clients configured with a
    /// fixed URL (such as http://127.0.0.1:8089/v1).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// In replay, do not also serve the `ollama` route on Ollama's default address
    /// (127.0.0.1:11434) for clients that read no variable (ollama JS).
    #[arg(long, env = "CASSETTE_NO_OLLAMA_STAND_IN", value_parser = crate::shared::settings::parse_flag)]
    no_ollama_stand_in: bool,

    /// Also write a JSON record of the run to FILE: every request's key, route and outcome
    /// (with the explanation of a miss), the counters, MCP misses, failed recordings and
    /// bypasses. `cassette diff-runs` compares two of them.
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,

    /// Also write a JUnit XML report to FILE: one test case per request, a miss an error.
    #[arg(long, value_name = "FILE.xml")]
    junit: Option<PathBuf>,

    /// Also write a Markdown summary (counts, misses with their explanation) to FILE.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,

    /// The command and its arguments (after `--`).
    // No `allow_hyphen_values`: with it, a mistyped flag before the command (`exec --strict
    // ...`) became the command's name. After the first value every argument is the command's.
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// The settings a `cassette` command run by the command inherits (a `cassette mcp` that an
/// MCP client starts): the same mode, store, cache and handling of repeats as this exec.
fn nested_env(settings: &RecorderSettings) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "CASSETTE_MODE".to_owned(),
            settings.config.mode.as_str().to_owned(),
        ),
        ("CASSETTE_STORE".to_owned(), settings.store.to_string()),
        (
            "CASSETTE_REPEATS".to_owned(),
            settings.config.repeats.as_str().to_owned(),
        ),
    ];
    if let Some(cache) = &settings.cache {
        env.push(("CASSETTE_CACHE".to_owned(), cache.to_string()));
    }
    // The same settings file, wherever the nested command runs.
    if let Some(path) = &settings.file {
        env.push(("CASSETTE_CONFIG".to_owned(), path.display().to_string()));
    }
    env
}

/// The variable naming the channel's socket to the command's in-process transports.
pub(crate) const CHANNEL_ENV: &str = "CASSETTE_CHANNEL";

/// The variable the npm package's `cassette` shim sets to its preload (`lib/register.js`), which
/// sends every request of a Node process over the channel.
const NODE_REGISTER_ENV: &str = "CASSETTE_NODE_REGISTER";

/// Node's variable of extra command-line options, read by every Node process of the command.
const NODE_OPTIONS: &str = "NODE_OPTIONS";

/// The npm package's preload: the one the JavaScript shim named, else, when this binary is the
/// npm command itself (the postinstall step put it in place of `bin/cassette.js`), the
/// package's `lib/register.js` beside it.
fn node_register() -> Option<std::path::PathBuf> {
    if let Some(named) = std::env::var_os(NODE_REGISTER_ENV).filter(|v| !v.is_empty()) {
        return Some(named.into());
    }
    let me = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .ok()?;
    if me.file_name()? != "cassette.js" {
        return None;
    }
    let register = me.parent()?.parent()?.join("lib").join("register.js");
    register.is_file().then_some(register)
}

/// NODE_OPTIONS with the npm package's preload imported (`--import`), when there is one and
/// the command's Node takes `--import`; `None` leaves the variable as it is. The path is
/// quoted, as NODE_OPTIONS splits on spaces.
async fn node_options(current: Option<String>, program: &OsStr) -> Option<String> {
    let register = node_register()?;
    if !register.is_file() {
        eprintln!(
            "cassette exec: {NODE_REGISTER_ENV} names {}, which is not a file: Node processes \
             of the command are not caught in process",
            register.display()
        );
        return None;
    }
    if let NodeImport::Lacking(version) = node_import(program).await {
        // A Node without `--import` refuses to start with it in NODE_OPTIONS: every Node
        // process of the command would fail, so the command is run as it would be without
        // the preload, and that is said.
        eprintln!(
            "cassette exec: the command's node is {version}, which has no --import (Node \
             18.18+ or 19+): its processes are not caught in process, so a client with a \
             hard-coded vendor URL is not caught; clients reading the base-URL variables \
             (OPENAI_BASE_URL, ...) are"
        );
        return None;
    }
    let import = format!("--import \"{}\"", register.display());
    Some(match current {
        Some(options) if options.contains(&import) => return None,
        Some(options) if !options.trim().is_empty() => format!("{options} {import}"),
        _ => import,
    })
}

/// Whether the command's Node knows `--import`, which the preload is loaded with.
#[derive(Debug, PartialEq, Eq)]
enum NodeImport {
    /// It does (Node 18.18+ or 19+).
    Known,
    /// It does not; its `--version` answer.
    Lacking(String),
    /// No Node answered (none on PATH, or an answer that is not a version): the preload is
    /// set, as a Node started by another path may take it.
    Unknown,
}

/// Asks the command's Node for its version, once: the command itself when it is a `node`, else
/// the `node` the command's PATH finds (exec leaves PATH as it is). The probe gets PATH alone:
/// whatever answers as `node` sees none of the keys this process holds.
async fn node_import(program: &OsStr) -> NodeImport {
    let named = std::path::Path::new(program)
        .file_stem()
        .is_some_and(|stem| stem == "node");
    let node = if named { program } else { OsStr::new("node") };
    let mut probe = tokio::process::Command::new(node);
    probe
        .arg("--version")
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    if let Some(path) = std::env::var_os("PATH") {
        probe.env("PATH", path);
    }
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), probe.output()).await;
    match answer {
        Ok(Ok(out)) if out.status.success() => {
            node_import_of(String::from_utf8_lossy(&out.stdout).trim())
        }
        _ => NodeImport::Unknown,
    }
}

/// What a `node --version` answer (`v20.6.0`) says of `--import`: added in Node 19.0.0 and
/// backported to 18.18.0.
fn node_import_of(version: &str) -> NodeImport {
    let mut parts = version.strip_prefix('v').unwrap_or(version).split('.');
    let number = |part: Option<&str>| part.and_then(|p| p.parse::<u32>().ok());
    match (number(parts.next()), number(parts.next())) {
        (Some(major), Some(minor)) if major > 18 || (major == 18 && minor >= 18) => {
            NodeImport::Known
        }
        (Some(_), Some(_)) => NodeImport::Lacking(version.to_owned()),
        _ => NodeImport::Unknown,
    }
}

/// Ollama's default address, which a client that reads no variable calls (ollama JS does).
const OLLAMA_DEFAULT: ([u8; 4], u16) = ([127, 0, 0, 1], 11434);

/// In replay, a second proxy of the same recorder on Ollama's default address, serving the
/// `ollama` route, for a client that ignores every variable: loopback is exempt from the proxy
/// variables, so without it such a client would reach a local Ollama unrecorded (or fail on a
/// closed port). When the address is taken by something other than another cassette, that is
/// named.
async fn ollama_stand_in(
    recorder: &cassette_recorder::Recorder,
    config: &ProxyConfig,
) -> Option<cassette_recorder::proxy::RunningProxy> {
    let route = "ollama";
    recorder.config().route(route)?;
    let address = SocketAddr::from(OLLAMA_DEFAULT);
    let stand_in = ProxyConfig {
        listen: address,
        unrouted: route.to_owned(),
        channel: Channel::Off,
        ..config.clone()
    };
    match spawn(recorder.clone(), &stand_in).await {
        Ok(proxy) => Some(proxy),
        Err(_) => {
            if !is_cassette(address).await {
                eprintln!(
                    "cassette exec: {address}, Ollama's default address, is taken (a local \
                     Ollama?): a client that ignores OLLAMA_HOST (ollama JS) reaches it \
                     directly and unrecorded; give the client its host in code \
                     (`host: process.env.OLLAMA_HOST`)"
                );
            }
            None
        }
    }
}

/// Whether a cassette proxy answers at `address` (another exec's stand-in).
async fn is_cassette(address: SocketAddr) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
        stream
            .write_all(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .ok()?;
        let mut answer = Vec::new();
        stream.take(4096).read_to_end(&mut answer).await.ok()?;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        Some(answer.contains("\"routes\"") && answer.contains("\"mode\""))
    };
    tokio::time::timeout(std::time::Duration::from_secs(1), probe)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// Runs the command behind the proxy.
pub(crate) fn run(args: ExecArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    // The run's duration, for the report, counts the proxy's start and stop too.
    let started = std::time::Instant::now();
    init_logging();
    crate::shared::child_env::hide_own_environment();
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given: cassette exec -- COMMAND [ARGS...]")?;
    let settings = args.recorder.resolve(file)?;
    for honoured in &settings.honoured {
        eprintln!("cassette exec: {}", honoured.line());
    }
    let serve = args.serve.resolve(file);
    let listen = match args.listen {
        Some(addr) if !addr.ip().is_loopback() => bail!(
            "--listen {addr} is not a loopback address; cassette exec only listens on this machine"
        ),
        Some(addr) => addr,
        None => ProxyConfig::ephemeral().listen,
    };
    let outputs = crate::shared::exec_report::Outputs {
        report: args.report.clone(),
        junit: args.junit.clone(),
        markdown: args.markdown.clone(),
    };
    let config = ProxyConfig {
        listen,
        advice: Some(crate::shared::advice::for_recorder),
        miss_status: serve.miss_status,
        retrying_miss_status: serve.retrying_miss_status,
        forwarding: serve.forwarding.clone(),
        journal: if outputs.need_journal() {
            Journal::Keep
        } else {
            Journal::Off
        },
        // Python processes of the command send every request over it (CASSETTE_CHANNEL).
        channel: if cfg!(unix) {
            Channel::Fresh
        } else {
            Channel::Off
        },
        // The command's clients carry it in their base URLs: no other program of this machine
        // may send requests upstream with the keys this exec holds.
        run_secret: Some(crate::shared::run_secret::fresh()?),
        ..ProxyConfig::ephemeral()
    };
    config.validate()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let recorder = settings.clone().build()?;
        let mode = recorder.mode();
        let store = recorder.store().location();
        let recording = recorder.clone();
        let stand_in = match (mode, args.no_ollama_stand_in) {
            (Mode::Replay, false) => ollama_stand_in(&recorder, &config).await,
            _ => None,
        };
        let proxy = spawn(recorder, &config)
            .await
            .context("cannot start the in-process proxy")?;
        let url = proxy.url();

        let mcp_report = crate::shared::mcp_report::ExecReportFile::create()?;
        let mut command = tokio::process::Command::new(program);
        command
            .args(rest)
            .envs(nested_env(&settings))
            .env(crate::shared::mcp_report::REPORT_ENV, mcp_report.path());
        if let Some(channel) = proxy.channel_path() {
            command.env(CHANNEL_ENV, channel);
            // A Python process catching in process sees the vendors' URLs in its base-URL
            // variables (cassette_cli/_base_urls.py), its children the proxy's.
            let urls =
                in_process_base_urls(&settings.honoured, &serve, |name| std::env::var(name).ok());
            command.env(
                IN_PROCESS_URLS_ENV,
                serde_json::Value::Object(urls).to_string(),
            );
            if let Some(options) = node_options(std::env::var(NODE_OPTIONS).ok(), program).await {
                command.env(NODE_OPTIONS, options);
            }
        }
        let lookup = |name: &str| std::env::var(name).ok();
        let mut set = std::collections::HashMap::new();
        let address = ProxyAddress::new(&url, config.run_secret.as_ref());
        for change in child_env(&address, &settings.keys, &serve, lookup) {
            match change {
                EnvChange::Set(name, value) => {
                    command.env(&name, &value);
                    // Kept for the advice on bypasses, which names values as they are shown.
                    set.insert(name, address.shown(&value));
                }
                EnvChange::Remove(name) => {
                    command.env_remove(name);
                }
            };
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot run `{}`", program.to_string_lossy()))?;
        let status = wait_forwarding_signals(&mut child).await?;

        let handle = proxy.stats_handle();
        let mut stats = proxy
            .stop()
            .await
            .context("cannot stop the in-process proxy")?;
        if let Some(stand_in) = stand_in {
            let more = stand_in
                .stop()
                .await
                .context("cannot stop the proxy on Ollama's default address")?;
            // The recorder's counters are shared; the requests each proxy received are not.
            stats.requests += more.requests;
            stats.bypassed.extend(more.bypassed);
        }
        crate::shared::runtime::flush_index(&recording).await;
        let mcp = mcp_report.read();
        let outcome = Outcome {
            mode,
            store,
            stats,
            missed: handle.misses(),
            mcp,
            failures: recording.recording_failures(),
            set,
        };
        let (code, summary_line) = outcome.report(&settings, status);
        let mut command = vec![program.to_string_lossy().into_owned()];
        command.extend(rest.iter().map(|a| a.to_string_lossy().into_owned()));
        let run = crate::shared::exec_report::Run {
            command,
            mode: outcome.mode.as_str().to_owned(),
            store: outcome.store.clone(),
            exit: code,
            duration: started.elapsed(),
            stats: &outcome.stats,
            journal: handle.journal(),
            missed: &outcome.missed,
            mcp: &outcome.mcp.misses,
            failures: &outcome.failures,
            summary_line,
        };
        crate::shared::exec_report::write(&outputs, &run, recording.redactor())?;
        Ok(ExitCode::from(code))
    })
}

/// What happened while the command ran.
struct Outcome {
    mode: Mode,
    store: String,
    stats: ProxyStats,
    /// The distinct HTTP misses.
    missed: MissLog,
    mcp: crate::shared::mcp_report::ExecMcpReport,
    /// The answers that were to be recorded and were not stored.
    failures: Vec<cassette_recorder::RecordingFailure>,
    /// The variables exec set for the command, and their values (for the bypass report).
    set: std::collections::HashMap<String, String>,
}

impl Outcome {
    /// Prints the summary line (and the bypasses and MCP misses after it); the exit status, and
    /// the summary line for the Markdown summary.
    fn report(&self, settings: &RecorderSettings, status: ExitStatus) -> (u8, String) {
        let Outcome {
            mode,
            store,
            stats,
            missed,
            mcp,
            failures,
            set: _,
        } = self;
        let misses = stats.recorder.misses + mcp.misses.len() as u64;
        let refused = *mode == Mode::Replay && stats.bypass_count() > 0;
        let hint = match (misses > 0, refused) {
            (true, _) => " (replay misses: exit 2; record them with CASSETTE_MODE=record or auto)",
            (false, true) => " (requests bypassed the base URL in replay: exit 2)",
            (false, false) => "",
        };
        let keys = if mode.may_call_upstream() {
            format!("; {}", keys_summary(&settings.keys))
        } else {
            String::new()
        };
        let mcp_summary = mcp.summary().map(|s| format!("; {s}")).unwrap_or_default();
        let idle = if stats.requests == 0 && stats.bypass_count() == 0 && mcp.summary().is_none() {
            "; no request went through the proxy: do the command's clients read the variables \
             exec sets? (docs/proxy.md lists them per client)"
        } else {
            ""
        };
        let line = format!(
            "cassette exec ({mode}, store {store}): {}{mcp_summary}{keys}{idle}{hint}",
            summary(stats)
        );
        eprintln!("{line}");
        for line in crate::shared::bypass::report(stats, *mode, &|name| self.set.get(name).cloned())
        {
            eprintln!("cassette exec: {line}");
        }
        for line in missed_lines(missed, &mcp.misses) {
            eprintln!("{line}");
        }
        // A recording that was not stored leaves a tape missing that the run seemed to make:
        // as loud as a miss, with the key.
        for failure in failures {
            eprintln!("cassette exec: {failure}");
        }
        let code = if misses > 0 || refused || !failures.is_empty() {
            EXIT_ERROR
        } else {
            status_code(status)
        };
        (code, line)
    }
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
    fn node_takes_import_from_18_18_and_19() {
        for known in ["v18.18.0", "v18.20.8", "v19.0.0", "v20.0.0", "v22.23.5"] {
            assert_eq!(node_import_of(known), NodeImport::Known, "{known}");
        }
        for old in ["v16.20.2", "v18.17.1", "v18.0.0"] {
            assert_eq!(
                node_import_of(old),
                NodeImport::Lacking(old.to_owned()),
                "{old}"
            );
        }
        assert_eq!(node_import_of("not a version"), NodeImport::Unknown);
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
