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

use crate::mcp::ReportedMiss;
use crate::proxy::{init_logging, summary};
use crate::settings::{
    keys_summary, RecorderArgs, RecorderSettings, RouteKey, ServeArgs, ServeSettings, SettingsFile,
};
use crate::EXIT_ERROR;
use anyhow::{bail, Context};
use cassette_recorder::miss::MissLog;
use cassette_recorder::proxy::{spawn, ProxyConfig, ProxyStats};
use cassette_recorder::Mode;
use std::collections::HashSet;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::process::{ExitCode, ExitStatus};

/// The API key the command gets in every key variable: SDKs refuse to construct without one,
/// and the proxy replaces it with the route's real key (or, in replay, never sends anything).
pub(crate) const PLACEHOLDER_API_KEY: &str = "cassette";

/// Key variables popular clients need set to construct, whatever the routes are.
const CLIENT_KEY_VARIABLES: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
];

/// cassette's own key variable: no client reads it, so the command does not get it at all.
const CASSETTE_KEY_VARIABLE: &str = "UPSTREAM_API_KEY";

/// The base-URL variables popular clients read, and the proxy path each must point at (the
/// client table of docs/proxy.md says who reads which).
const BASE_URL_VARIABLES: &[(&str, &str)] = &[
    // openai (Python, Node), langchain-openai, instructor, pydantic-ai, openai-agents, Vercel AI SDK
    ("OPENAI_BASE_URL", "/v1"),
    // llama-index, litellm, older langchain
    ("OPENAI_API_BASE", "/v1"),
    // anthropic (Python, Node), langchain-anthropic, Vercel AI SDK
    ("ANTHROPIC_BASE_URL", "/anthropic"),
    // ollama (Python, JS)
    ("OLLAMA_HOST", "/ollama"),
    // litellm's ollama providers
    ("OLLAMA_API_BASE", "/ollama"),
    // google-genai, pydantic-ai `google:`
    ("GOOGLE_GEMINI_BASE_URL", "/gemini"),
    // groq (Python): joins /openai/v1/... itself
    ("GROQ_BASE_URL", "/groq"),
    // cohere (Python)
    ("CO_API_URL", "/cohere"),
];

/// The route Azure OpenAI clients are pointed at, when one is configured (an Azure resource has
/// no fixed upstream, so there is no built-in one), and the variable they read.
const AZURE_ROUTE: &str = "azure";
const AZURE_ENDPOINT_VARIABLE: &str = "AZURE_OPENAI_ENDPOINT";

/// Settings of clients that would otherwise call out on their own, whatever their base URL:
/// set unless the user set them. litellm downloads its price list when imported;
/// openai-agents posts traces to the vendor directly (and only with the placeholder key); the
/// rest are the documented telemetry opt-outs of popular frameworks, whose reports replay would
/// refuse (failing an all-hits run) and record would send out unrecorded.
const CLIENT_DEFAULTS: &[(&str, &str)] = &[
    ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
    ("OPENAI_AGENTS_DISABLE_TRACING", "1"),
    // CrewAI: telemetry.crewai.com
    ("CREWAI_DISABLE_TELEMETRY", "true"),
    // Haystack: its PostHog telemetry
    ("HAYSTACK_TELEMETRY_ENABLED", "False"),
    // chromadb: PostHog product telemetry
    ("ANONYMIZED_TELEMETRY", "False"),
    // mem0: PostHog telemetry
    ("MEM0_TELEMETRY", "False"),
    // huggingface_hub: usage pings
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    // Gradio: analytics
    ("GRADIO_ANALYTICS_ENABLED", "False"),
    // unstructured and other Scarf-instrumented packages
    ("SCARF_NO_ANALYTICS", "true"),
    // The shared convention many tools honour (consoledonottrack.com)
    ("DO_NOT_TRACK", "1"),
];

/// The proxy variables clients honour (curl reads only the lower-case `http_proxy`; most
/// others either form).
const PROXY_VARIABLES: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];
const NO_PROXY_VARIABLES: &[&str] = &["NO_PROXY", "no_proxy"];

/// Hosts that always stay direct: the proxy itself and the tests' own local servers.
const LOOPBACK: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// Node 24 (and 22.21+) honours the proxy variables in `fetch` and `http` only when asked.
const NODE_PROXY_SWITCH: (&str, &str) = ("NODE_USE_ENV_PROXY", "1");

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
    LITELLM_LOCAL_MODEL_COST_MAP, OPENAI_AGENTS_DISABLE_TRACING and the telemetry opt-outs\n    \
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

    /// The command and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

/// What the child's environment gains or loses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EnvChange {
    Set(String, String),
    Remove(String),
}

/// The environment changes for the child, given the proxy's base URL, where the routes' keys
/// come from (one entry per route), the catch, and the current environment (`lookup`).
pub(crate) fn child_env(
    url: &str,
    keys: &[RouteKey],
    serve: &ServeSettings,
    lookup: impl Fn(&str) -> Option<String>,
) -> Vec<EnvChange> {
    let set = |name: &str, value: String| EnvChange::Set(name.to_owned(), value);
    let is_set = |name: &str| matches!(lookup(name), Some(v) if !v.trim().is_empty());
    let mut env = vec![set("CASSETTE_PROXY_URL", url.to_owned())];
    for (name, path) in BASE_URL_VARIABLES {
        env.push(set(name, format!("{url}{path}")));
    }
    if keys.iter().any(|k| k.route == AZURE_ROUTE) {
        env.push(set(AZURE_ENDPOINT_VARIABLE, format!("{url}/{AZURE_ROUTE}")));
    }
    for (name, value) in CLIENT_DEFAULTS {
        if !is_set(name) {
            env.push(set(name, (*value).to_owned()));
        }
    }
    if serve.catches() {
        env.extend(proxy_env(url, serve, &is_set));
    }
    env.extend(key_env(keys, &lookup));
    env
}

/// The proxy variables: everything through the proxy but loopback and the allowed hosts.
fn proxy_env(url: &str, serve: &ServeSettings, is_set: &dyn Fn(&str) -> bool) -> Vec<EnvChange> {
    let mut direct: Vec<String> = LOOPBACK.iter().map(|h| (*h).to_owned()).collect();
    for pattern in serve.allowed() {
        let entry = pattern.no_proxy_entry();
        if !direct.contains(&entry) {
            direct.push(entry);
        }
    }
    let direct = direct.join(",");
    let mut env: Vec<EnvChange> = PROXY_VARIABLES
        .iter()
        .map(|name| EnvChange::Set((*name).to_owned(), url.to_owned()))
        .chain(
            NO_PROXY_VARIABLES
                .iter()
                .map(|name| EnvChange::Set((*name).to_owned(), direct.clone())),
        )
        .collect();
    let (name, value) = NODE_PROXY_SWITCH;
    if !is_set(name) {
        env.push(EnvChange::Set(name.to_owned(), value.to_owned()));
    }
    env
}

/// Placeholder keys: in every route's key variable and every client key variable left unset,
/// so SDKs construct and never see a real key; cassette's own key variable removed.
fn key_env(keys: &[RouteKey], lookup: &dyn Fn(&str) -> Option<String>) -> Vec<EnvChange> {
    let held = |name: &str| keys.iter().any(|k| k.sources.iter().any(|s| s == name));
    let mut names: Vec<&str> = CLIENT_KEY_VARIABLES.to_vec();
    for key in keys {
        for source in &key.sources {
            if !names.contains(&source.as_str()) {
                names.push(source);
            }
        }
    }
    let mut env = Vec::new();
    for name in names {
        let unset = !matches!(lookup(name), Some(v) if !v.trim().is_empty());
        if name == CASSETTE_KEY_VARIABLE {
            env.push(EnvChange::Remove(name.to_owned()));
        } else if held(name) || unset {
            env.push(EnvChange::Set(
                name.to_owned(),
                PLACEHOLDER_API_KEY.to_owned(),
            ));
        }
    }
    if !names_contain(&env, CASSETTE_KEY_VARIABLE) && lookup(CASSETTE_KEY_VARIABLE).is_some() {
        env.push(EnvChange::Remove(CASSETTE_KEY_VARIABLE.to_owned()));
    }
    env
}

fn names_contain(env: &[EnvChange], name: &str) -> bool {
    env.iter().any(|change| match change {
        EnvChange::Set(n, _) | EnvChange::Remove(n) => n == name,
    })
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

/// Runs the command behind the proxy.
pub(crate) fn run(args: ExecArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    init_logging();
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given: cassette exec -- COMMAND [ARGS...]")?;
    let settings = args.recorder.resolve(file)?;
    let serve = args.serve.resolve(file);
    let listen = match args.listen {
        Some(addr) if !addr.ip().is_loopback() => bail!(
            "--listen {addr} is not a loopback address; cassette exec only listens on this machine"
        ),
        Some(addr) => addr,
        None => ProxyConfig::ephemeral().listen,
    };
    let config = ProxyConfig {
        listen,
        advice: Some(crate::advice::for_recorder),
        miss_status: serve.miss_status,
        forwarding: serve.forwarding.clone(),
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
        let proxy = spawn(recorder, &config)
            .await
            .context("cannot start the in-process proxy")?;
        let url = proxy.url();

        let mcp_report = crate::mcp::ExecReportFile::create()?;
        let mut command = tokio::process::Command::new(program);
        command
            .args(rest)
            .envs(nested_env(&settings))
            .env(crate::mcp::REPORT_ENV, mcp_report.path());
        let lookup = |name: &str| std::env::var(name).ok();
        let mut set = std::collections::HashMap::new();
        for change in child_env(&url, &settings.keys, &serve, lookup) {
            match change {
                EnvChange::Set(name, value) => {
                    command.env(&name, &value);
                    set.insert(name, value);
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
        let stats = proxy
            .stop()
            .await
            .context("cannot stop the in-process proxy")?;
        crate::flush_index(&recording).await;
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
        Ok(outcome.report(&settings, status))
    })
}

/// What happened while the command ran.
struct Outcome {
    mode: Mode,
    store: String,
    stats: ProxyStats,
    /// The distinct HTTP misses.
    missed: MissLog,
    mcp: crate::mcp::ExecMcpReport,
    /// The answers that were to be recorded and were not stored.
    failures: Vec<cassette_recorder::RecordingFailure>,
    /// The variables exec set for the command, and their values (for the bypass report).
    set: std::collections::HashMap<String, String>,
}

impl Outcome {
    /// Prints the summary line (and the bypasses and MCP misses after it); the exit status.
    fn report(&self, settings: &RecorderSettings, status: ExitStatus) -> ExitCode {
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
        eprintln!(
            "cassette exec ({mode}, store {store}): {}{mcp_summary}{keys}{idle}{hint}",
            summary(stats)
        );
        for line in crate::bypass::report(stats, *mode, &|name| self.set.get(name).cloned()) {
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
        if misses > 0 || refused || !failures.is_empty() {
            ExitCode::from(EXIT_ERROR)
        } else {
            ExitCode::from(status_code(status))
        }
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
    use cassette_recorder::proxy::Forwarding;

    fn route_key(route: &str, sources: &[&str], from: Option<&str>) -> RouteKey {
        RouteKey {
            route: route.to_owned(),
            sources: sources.iter().map(|s| (*s).to_owned()).collect(),
            from: from.map(str::to_owned),
        }
    }

    fn built_in(from: Option<&str>, anthropic: Option<&str>) -> Vec<RouteKey> {
        vec![
            route_key("default", &["UPSTREAM_API_KEY", "OPENAI_API_KEY"], from),
            route_key("anthropic", &["ANTHROPIC_API_KEY"], anthropic),
            route_key("ollama", &[], None),
            route_key("gemini", &["GEMINI_API_KEY", "GOOGLE_API_KEY"], None),
        ]
    }

    fn catching(allow: &[&str]) -> ServeSettings {
        ServeSettings {
            miss_status: 409,
            forwarding: Forwarding::Catch {
                allow: allow.iter().map(|a| a.parse().unwrap()).collect(),
            },
        }
    }

    fn env_of(keys: &[RouteKey], lookup: impl Fn(&str) -> Option<String>) -> Vec<EnvChange> {
        child_env("http://127.0.0.1:5", keys, &catching(&[]), lookup)
    }

    fn get<'a>(env: &'a [EnvChange], name: &str) -> Option<&'a str> {
        env.iter().find_map(|c| match c {
            EnvChange::Set(n, v) if n == name => Some(v.as_str()),
            _ => None,
        })
    }

    fn removed(env: &[EnvChange], name: &str) -> bool {
        env.contains(&EnvChange::Remove(name.to_owned()))
    }

    #[test]
    fn child_env_points_every_client_at_the_proxy() {
        let env = env_of(&built_in(None, None), |_| None);
        for (name, value) in [
            ("CASSETTE_PROXY_URL", "http://127.0.0.1:5"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:5/v1"),
            ("OPENAI_API_BASE", "http://127.0.0.1:5/v1"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:5/anthropic"),
            ("OLLAMA_HOST", "http://127.0.0.1:5/ollama"),
            ("OLLAMA_API_BASE", "http://127.0.0.1:5/ollama"),
            ("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:5/gemini"),
            ("GROQ_BASE_URL", "http://127.0.0.1:5/groq"),
            ("CO_API_URL", "http://127.0.0.1:5/cohere"),
            ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
            ("OPENAI_AGENTS_DISABLE_TRACING", "1"),
            ("CREWAI_DISABLE_TELEMETRY", "true"),
            ("HAYSTACK_TELEMETRY_ENABLED", "False"),
            ("ANONYMIZED_TELEMETRY", "False"),
            ("DO_NOT_TRACK", "1"),
        ] {
            assert_eq!(get(&env, name), Some(value), "{name}");
        }
        // No azure route, no Azure endpoint: the user's own (if any) is left alone.
        assert_eq!(get(&env, "AZURE_OPENAI_ENDPOINT"), None);
        // Nothing set: every client gets a placeholder, so SDKs construct.
        for name in CLIENT_KEY_VARIABLES {
            assert_eq!(get(&env, name), Some(PLACEHOLDER_API_KEY), "{name}");
        }
    }

    #[test]
    fn an_azure_route_gets_the_azure_endpoint_and_its_key_a_placeholder() {
        let mut keys = built_in(None, None);
        keys.push(route_key(
            "azure",
            &["AZURE_OPENAI_API_KEY"],
            Some("AZURE_OPENAI_API_KEY"),
        ));
        let real = |name: &str| (name == "AZURE_OPENAI_API_KEY").then(|| "az-real".to_owned());
        let env = env_of(&keys, real);
        assert_eq!(
            get(&env, "AZURE_OPENAI_ENDPOINT"),
            Some("http://127.0.0.1:5/azure")
        );
        assert_eq!(get(&env, "AZURE_OPENAI_API_KEY"), Some(PLACEHOLDER_API_KEY));
    }

    #[test]
    fn everything_but_loopback_and_allowed_hosts_goes_through_the_proxy() {
        let serve = catching(&["huggingface.co", "*.internal.example", "db.local:5432"]);
        let env = child_env("http://127.0.0.1:5", &built_in(None, None), &serve, |_| {
            None
        });
        for name in PROXY_VARIABLES {
            assert_eq!(get(&env, name), Some("http://127.0.0.1:5"), "{name}");
        }
        for name in NO_PROXY_VARIABLES {
            assert_eq!(
                get(&env, name),
                Some("localhost,127.0.0.1,::1,huggingface.co,.internal.example,db.local"),
                "{name}"
            );
        }
        assert_eq!(get(&env, "NODE_USE_ENV_PROXY"), Some("1"));

        // The catch off: no proxy variable at all (the user's own stay as they are).
        let off = ServeSettings {
            miss_status: 409,
            forwarding: Forwarding::Off,
        };
        let env = child_env("http://127.0.0.1:5", &built_in(None, None), &off, |_| None);
        for name in PROXY_VARIABLES.iter().chain(NO_PROXY_VARIABLES) {
            assert_eq!(get(&env, name), None, "{name}");
        }
        assert_eq!(get(&env, "NODE_USE_ENV_PROXY"), None);
    }

    #[test]
    fn a_users_own_client_settings_win_over_the_defaults() {
        let own = |name: &str| match name {
            "LITELLM_LOCAL_MODEL_COST_MAP" => Some("False".to_owned()),
            "CREWAI_DISABLE_TELEMETRY" => Some("false".to_owned()),
            "NODE_USE_ENV_PROXY" => Some("0".to_owned()),
            _ => None,
        };
        let env = env_of(&built_in(None, None), own);
        assert_eq!(get(&env, "LITELLM_LOCAL_MODEL_COST_MAP"), None);
        assert_eq!(get(&env, "CREWAI_DISABLE_TELEMETRY"), None);
        assert_eq!(get(&env, "NODE_USE_ENV_PROXY"), None);
        assert_eq!(get(&env, "OPENAI_AGENTS_DISABLE_TRACING"), Some("1"));
    }

    #[test]
    fn the_command_never_sees_a_key_the_proxy_holds() {
        let real = |name: &str| match name {
            "OPENAI_API_KEY" => Some("sk-real-openai".to_owned()),
            "UPSTREAM_API_KEY" => Some("sk-real-upstream".to_owned()),
            "ANTHROPIC_API_KEY" => Some("sk-ant-real".to_owned()),
            "GEMINI_API_KEY" => Some("AIza-real-gemini".to_owned()),
            "ACME_LLM_KEY" => Some("acme-real".to_owned()),
            "MISTRAL_API_KEY" => Some("mistral-own".to_owned()),
            _ => None,
        };
        let mut keys = vec![
            route_key(
                "default",
                &["UPSTREAM_API_KEY", "OPENAI_API_KEY"],
                Some("UPSTREAM_API_KEY"),
            ),
            route_key(
                "anthropic",
                &["ANTHROPIC_API_KEY"],
                Some("ANTHROPIC_API_KEY"),
            ),
            route_key("ollama", &[], None),
            route_key(
                "gemini",
                &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
                Some("GEMINI_API_KEY"),
            ),
        ];
        keys.push(route_key("acme", &["ACME_LLM_KEY"], Some("ACME_LLM_KEY")));
        let env = env_of(&keys, real);
        for name in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "ACME_LLM_KEY",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
        ] {
            assert_eq!(get(&env, name), Some(PLACEHOLDER_API_KEY), "{name}");
        }
        assert!(removed(&env, "UPSTREAM_API_KEY"));
        // No route reads MISTRAL_API_KEY: the client's own key passes through as set.
        assert_eq!(get(&env, "MISTRAL_API_KEY"), None);
        assert!(!removed(&env, "MISTRAL_API_KEY"));
        // A client key variable no route reads keeps a value the user set.
        let keys = vec![route_key("default", &["OPENAI_API_KEY"], None)];
        let env = env_of(&keys, |n| {
            (n == "GEMINI_API_KEY").then(|| "AIza-own".to_owned())
        });
        assert_eq!(get(&env, "GEMINI_API_KEY"), None);
        let shown = format!("{:?}", env_of(&built_in(None, None), real));
        for secret in ["sk-real", "sk-ant-real", "acme-real", "AIza-real"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    #[test]
    fn the_summary_names_where_each_key_came_from() {
        let mut keys = built_in(Some("OPENAI_API_KEY"), None);
        keys.push(route_key("acme", &["ACME_LLM_KEY"], Some("ACME_LLM_KEY")));
        assert_eq!(
            keys_summary(&keys),
            "keys held for default (OPENAI_API_KEY), acme (ACME_LLM_KEY); none for anthropic, ollama, gemini"
        );
        assert_eq!(
            keys_summary(&built_in(None, None)),
            "no route holds a key (clients' own credentials pass through)"
        );
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
