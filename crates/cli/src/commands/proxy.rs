//! `cassette proxy`: serve record/replay over HTTP so any client in any language can use it by
//! changing its base URL. See docs/proxy.md.

use crate::shared::child_env::{child_env, in_process_base_urls, EnvChange, ProxyAddress};
use crate::shared::run_secret::{self, RUN_SECRET_ENV};
use crate::shared::runtime::{init_logging, shutdown_signal};
use crate::shared::served::summary;
use crate::shared::settings::{
    parse_size, RecorderArgs, RecorderSettings, ServeArgs, ServeSettings, SettingsFile,
};
use anyhow::{bail, Context};
use cassette_recorder::proxy::{
    Channel, ControlPipe, Exposure, Proxy, ProxyConfig, ProxyStats, Runner,
};
use cassette_recorder::Answers;
use std::net::SocketAddr;
use std::process::ExitCode;

/// Arguments of `cassette proxy`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Point the SDKs at it:\n  \
    OPENAI_BASE_URL=http://127.0.0.1:8089/v1\n  \
    ANTHROPIC_BASE_URL=http://127.0.0.1:8089/anthropic\n  \
    OLLAMA_HOST=http://127.0.0.1:8089/ollama\n  \
    GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8089/gemini\n\
    Examples:\n  \
    CASSETTE_MODE=record UPSTREAM_API_KEY=sk-... cassette proxy\n  \
    cassette proxy --store file://tests/cassettes --listen 127.0.0.1:9000")]
pub(crate) struct ProxyArgs {
    #[command(flatten)]
    recorder: RecorderArgs,

    #[command(flatten)]
    serve: ServeArgs,

    /// Address to listen on [default: 127.0.0.1:8089; 127.0.0.1:$PORT when PORT is set]. Port 0
    /// picks a free port; the URL is printed on stderr.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// Port on 127.0.0.1 when --listen is not given.
    #[arg(long, env = "PORT", value_name = "PORT")]
    port: Option<u16>,

    /// Allow listening on a non-loopback address (anyone who reaches it can use the upstream
    /// API key).
    #[arg(long)]
    allow_remote: bool,

    /// Largest request body accepted; larger ones get 413 [default: 32MiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_body: Option<usize>,

    /// Also serve requests addressed to this host name (such as a container's service name);
    /// loopback names and addresses and the listening address are always served. Repeatable.
    #[arg(long = "serve-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,

    /// Serve browser requests from this web page origin (scheme://host[:port]), with CORS
    /// headers; every other browser request is refused. Repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allowed_origins: Vec<String>,

    /// Once the proxy answers, print one line of JSON on stdout: its URL, process id and mode,
    /// and the environment a test process needs (what `cassette exec` sets), for test runner
    /// plugins that start it. Nothing else is printed on stdout but --control-pipe's notices.
    #[arg(long, value_name = "FORMAT", value_enum)]
    ready: Option<Ready>,

    /// Serve the control endpoint of test runners (per-test attribution, /_cassette/scopes)
    /// with a fresh token, printed on the --ready line only.
    #[arg(long, requires = "ready")]
    control: bool,

    /// With --control: also begin and end test scopes by lines of JSON on stdin, and print
    /// `{"problem":SCOPE}` on stdout when a scope sees a miss, an error or a refused bypass
    /// (Unix; for a runner plugin that starts the proxy with pipes, see docs/pytest.md).
    #[arg(long, requires = "control")]
    control_pipe: bool,

    /// Adopt a vcrpy suite (what the pytest plugin's --cassette=adopt starts): what the mode
    /// forwards is answered from the running test's vcrpy tapes, named when the test's scope
    /// begins, matched as vcrpy matched them, and stored as any answer is; nothing connects
    /// anywhere, and traffic that bypassed the base URL is refused. Needs mode auto or record.
    #[arg(long, requires = "control")]
    adopt: bool,

    /// Also listen on a Unix socket only you can connect to, for in-process transports that
    /// send each request with its original URL (the Python package's, under the pytest plugin
    /// and `cassette exec`): a vendor's host is routed to its route, a host no route serves is
    /// refused. Without PATH, a socket in a fresh private directory; its path is on the
    /// --ready line. Unix only.
    #[arg(long, value_name = "PATH", num_args = 0..=1)]
    channel: Option<Option<std::path::PathBuf>>,

    /// Serve API requests in modes that may call an upstream (record, auto, off) only when they
    /// carry a per-run secret, as the first path segment of their base URL
    /// (`http://127.0.0.1:8089/_run/SECRET/v1`) or the x-cassette-run header; any other local
    /// program, another user's included, gets 403. The secret is CASSETTE_RUN_SECRET when set
    /// (16 to 128 letters, digits, `-` or `_`), else a fresh one, on the --ready line only
    /// (`base`, and every base URL of `env`): what the pytest plugin and the Node helpers pass.
    /// Replay serves any local program either way.
    #[arg(long)]
    run_secret: bool,

    /// Stop, as on SIGTERM, once the process PID is gone, however it ended (SIGKILL included;
    /// looked at about every 250 ms): what a test runner that starts the proxy passes, its own
    /// process id, so that no proxy outlives it. Unix only.
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..=i64::from(i32::MAX)))]
    runner_pid: Option<u32>,
}

/// How `cassette proxy` says it is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Ready {
    /// One line of JSON on stdout.
    Json,
}

/// `cassette proxy`'s settings, validated.
struct ProxySettings {
    recorder: RecorderSettings,
    proxy: ProxyConfig,
    serve: ServeSettings,
    ready: Option<Ready>,
}

impl ProxyArgs {
    /// Applies the defaults and validates; no IO.
    fn resolve(&self, file: &SettingsFile) -> anyhow::Result<ProxySettings> {
        let defaults = ProxyConfig::default();
        let serve = self.serve.resolve(file);
        let listen = match (self.listen, self.port, file.listen) {
            (Some(addr), _, _) => addr,
            (None, Some(port), _) => SocketAddr::from(([127, 0, 0, 1], port)),
            (None, None, Some(addr)) => addr,
            (None, None, None) => defaults.listen,
        };
        let exposure = if self.allow_remote {
            Exposure::AllowRemote
        } else {
            Exposure::LoopbackOnly
        };
        if !listen.ip().is_loopback() && exposure == Exposure::LoopbackOnly {
            bail!(
                "--listen {listen} is not a loopback address; anyone who can reach it can use the \
                 proxy (and its upstream API key). Pass --allow-remote to listen there anyway"
            );
        }
        let proxy = ProxyConfig {
            listen,
            max_body: self.max_body.or(file.max_body).unwrap_or(defaults.max_body),
            exposure,
            advice: Some(crate::shared::advice::for_recorder),
            miss_status: serve.miss_status,
            retrying_miss_status: serve.retrying_miss_status,
            forwarding: serve.forwarding.clone(),
            allowed_hosts: self.allowed_hosts.clone(),
            allowed_origins: self.allowed_origins.clone(),
            control_token: if self.control {
                Some(run_secret::fresh_hex()?)
            } else {
                None
            },
            control_pipe: if self.control_pipe {
                ControlPipe::Stdio
            } else {
                ControlPipe::Off
            },
            channel: match &self.channel {
                None => Channel::Off,
                Some(None) => Channel::Fresh,
                Some(Some(path)) => Channel::At(path.clone()),
            },
            runner: match self.runner_pid {
                None => Runner::Unwatched,
                Some(pid) => Runner::Pid(pid),
            },
            run_secret: self.run_secret()?,
            ..defaults
        };
        proxy.validate()?;
        let mut recorder = self.recorder.resolve(file)?;
        recorder.config.max_body = proxy.max_body;
        if self.adopt {
            recorder.config.answers = Answers::Tapes;
            recorder.config.validate()?;
        }
        let settings = ProxySettings {
            recorder,
            proxy,
            serve,
            ready: self.ready,
        };
        Ok(settings)
    }
}

impl ProxyArgs {
    /// The run secret `--run-secret` asks for: `CASSETTE_RUN_SECRET`'s, else a fresh one,
    /// which only the ready line can tell.
    fn run_secret(&self) -> anyhow::Result<Option<cassette_recorder::proxy::RunSecret>> {
        if !self.run_secret {
            return Ok(None);
        }
        if let Some(secret) = run_secret::from_env()? {
            return Ok(Some(secret));
        }
        if self.ready.is_none() {
            bail!(
                "--run-secret without {RUN_SECRET_ENV} draws a fresh secret, which only the \
                 --ready line tells: pass --ready json, or set {RUN_SECRET_ENV} to the secret \
                 your clients carry (http://127.0.0.1:8089/_run/SECRET/v1)"
            );
        }
        run_secret::fresh().map(Some)
    }
}

/// Runs the proxy until SIGINT or SIGTERM, then prints the counters.
pub(crate) fn run(args: ProxyArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    init_logging();
    // The test processes of a runner plugin run beside it with the same user.
    crate::shared::child_env::hide_own_environment();
    let settings = args.resolve(file)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let mode = settings.recorder.config.mode;
    let stats = runtime.block_on(serve(settings))?;
    eprintln!("cassette proxy: stopped; {}", summary(&stats));
    // The proxy sets no variable for anyone: each bypass is told what to set.
    for line in crate::shared::bypass::report(&stats, mode, &|_| None) {
        eprintln!("cassette proxy: {line}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn serve(settings: ProxySettings) -> anyhow::Result<ProxyStats> {
    // Listening for the signals before anyone learns the address: a runner that stops the
    // proxy right after its ready line must not kill it instead.
    let shutdown = shutdown_signal();
    let keys = settings.recorder.keys.clone();
    let honoured: Vec<String> = settings
        .recorder
        .honoured
        .iter()
        .map(|h| h.line())
        .collect();
    for line in &honoured {
        eprintln!("cassette proxy: {line}");
    }
    let honoured_by = settings.recorder.honoured.clone();
    let recorder = settings.recorder.build()?;
    let mode = recorder.mode();
    let recorder_answers = recorder.config().answers;
    let store = recorder.store().location();
    let recording = recorder.clone();
    let proxy = Proxy::bind(recorder, &settings.proxy).await?;
    if !settings.proxy.listen.ip().is_loopback() {
        eprintln!(
            "cassette proxy: WARNING: listening on {}, reachable from other machines; \
             anyone who can connect can use the upstream API key",
            proxy.local_addr()
        );
    }
    // Tests and scripts read this line to learn the port when they asked for port 0.
    eprintln!(
        "cassette proxy: listening on {} (mode {mode}, store {store})",
        proxy.url()
    );
    if let Some(channel) = proxy.channel_path() {
        eprintln!("cassette proxy: channel {}", channel.display());
    }
    if recorder_answers == Answers::Tapes {
        eprintln!("cassette proxy: answering from the running test's vcrpy tapes (adopt)");
    } else if mode.may_call_upstream() {
        eprintln!(
            "cassette proxy: {}",
            crate::shared::settings::keys_summary(&keys)
        );
    }
    if mode.may_call_upstream() && settings.proxy.run_secret.is_none() {
        eprintln!(
            "cassette proxy: any program of this machine (other users' too) can send requests \
             through this proxy, which calls upstreams with its keys and records; to serve only \
             clients that carry a secret, start it with --run-secret and \
             {RUN_SECRET_ENV}=SECRET, and give them base URLs such as {}/_run/SECRET/v1",
            proxy.url()
        );
    }
    let address = ProxyAddress::new(&proxy.url(), settings.proxy.run_secret.as_ref());
    if let Some(Ready::Json) = settings.ready {
        let env = child_env(&address, &keys, &settings.serve, |name| {
            std::env::var(name).ok()
        });
        let mut line = ready_line(
            &address,
            mode,
            &env,
            settings.proxy.control_token.as_deref(),
            settings.proxy.control_pipe,
        );
        if let Some(channel) = proxy.channel_path() {
            line["channel"] = serde_json::Value::from(channel.to_string_lossy().into_owned());
            let urls = in_process_base_urls(&honoured_by, &settings.serve, |name| {
                std::env::var(name).ok()
            });
            line["in_process"] = serde_json::Value::Object(urls);
        }
        if !honoured.is_empty() {
            line["honoured"] = serde_json::Value::from(honoured.clone());
        }
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .context("cannot print the ready line on stdout")?;
    }
    let stats = proxy.serve(shutdown).await;
    crate::shared::runtime::flush_index(&recording).await;
    Ok(stats?)
}

/// The ready line: the URL, the base its clients use (the URL followed by the run secret's
/// path, when there is one), the process id, the mode, the environment a test process needs
/// (variables to set, and to remove), and the control token when there is one (and whether
/// the control pipe is open).
fn ready_line(
    address: &ProxyAddress,
    mode: cassette_recorder::Mode,
    env: &[EnvChange],
    control_token: Option<&str>,
    pipe: ControlPipe,
) -> serde_json::Value {
    let mut set = serde_json::Map::new();
    let mut unset = Vec::new();
    for change in env {
        match change {
            EnvChange::Set(name, value) => {
                set.insert(name.clone(), serde_json::Value::from(value.clone()));
            }
            EnvChange::Remove(name) => unset.push(name.clone()),
        }
    }
    let url = &address.url;
    let mut line = serde_json::json!({
        "url": url,
        "base": address.base,
        "pid": std::process::id(),
        "mode": mode.as_str(),
        "env": set,
        "unset": unset,
    });
    if let Some(token) = control_token {
        line["control"] = serde_json::json!({
            "token": token,
            "scopes": format!("{url}/_cassette/scopes"),
            "prefix": format!("{}/_scope", address.base),
            "pipe": pipe == ControlPipe::Stdio,
        });
    }
    line
}
