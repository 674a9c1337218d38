//! `cassette proxy`: serve record/replay over HTTP so any client in any language can use it by
//! changing its base URL. See docs/proxy.md.

use crate::settings::{parse_size, RecorderArgs};
use anyhow::{anyhow, Context};
use cassette_recorder::proxy::{Exposure, Proxy, ProxyConfig, ProxyStats};
use std::net::SocketAddr;
use std::process::ExitCode;

/// Arguments of `cassette proxy`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Point the SDKs at it:\n  \
    OPENAI_BASE_URL=http://127.0.0.1:8089/v1\n  \
    ANTHROPIC_BASE_URL=http://127.0.0.1:8089/anthropic\n  \
    OLLAMA_HOST=http://127.0.0.1:8089/ollama\n\
    Examples:\n  \
    CASSETTE_MODE=record UPSTREAM_API_KEY=sk-... cassette proxy\n  \
    cassette proxy --store file://tests/cassettes --listen 127.0.0.1:9000")]
pub(crate) struct ProxyArgs {
    #[command(flatten)]
    pub(crate) recorder: RecorderArgs,

    /// Address to listen on [default: 127.0.0.1:8089; 127.0.0.1:$PORT when PORT is set]. Port 0
    /// picks a free port; the URL is printed on stderr.
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<SocketAddr>,

    /// Port on 127.0.0.1 when --listen is not given.
    #[arg(long, env = "PORT", value_name = "PORT")]
    pub(crate) port: Option<u16>,

    /// Allow listening on a non-loopback address (anyone who reaches it can use the upstream
    /// API key).
    #[arg(long)]
    pub(crate) allow_remote: bool,

    /// Largest request body accepted; larger ones get 413.
    #[arg(long, value_name = "SIZE", default_value = "32MiB", value_parser = parse_size)]
    pub(crate) max_body: usize,
}

impl ProxyArgs {
    fn proxy_config(&self) -> ProxyConfig {
        let listen = match (self.listen, self.port) {
            (Some(addr), _) => addr,
            (None, Some(port)) => SocketAddr::from(([127, 0, 0, 1], port)),
            (None, None) => ProxyConfig::default().listen,
        };
        ProxyConfig {
            listen,
            max_body: self.max_body,
            exposure: if self.allow_remote {
                Exposure::AllowRemote
            } else {
                Exposure::LoopbackOnly
            },
        }
    }
}

/// Runs the proxy until SIGINT or SIGTERM, then prints the counters.
pub(crate) fn run(args: ProxyArgs) -> anyhow::Result<ExitCode> {
    init_logging();
    let proxy_config = args.proxy_config();
    proxy_config.validate().map_err(|e| anyhow!("{e}"))?;
    let mut config = args.recorder.config()?;
    config.max_body = args.max_body;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let stats = runtime.block_on(async {
        let recorder = args.recorder.build(config)?;
        let mode = recorder.mode();
        let store = recorder.store().location();
        let proxy = Proxy::bind(recorder, &proxy_config)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        if !proxy_config.listen.ip().is_loopback() {
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
        proxy
            .serve(shutdown_signal())
            .await
            .map_err(|e| anyhow!("{e}"))
    })?;
    eprintln!("cassette proxy: stopped; {}", summary(&stats));
    Ok(ExitCode::SUCCESS)
}

/// One line of counters, as printed on shutdown and by `cassette exec`.
pub(crate) fn summary(stats: &ProxyStats) -> String {
    let s = &stats.recorder;
    format!(
        "{} requests: {} hits, {} misses, {} recorded, {} upstream requests, {} upstream errors",
        stats.requests, s.hits, s.misses, s.recorded, s.upstream_requests, s.upstream_errors
    )
}

/// Completes on the first SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut int), Ok(mut term)) => {
                tokio::select! {
                    _ = int.recv() => {},
                    _ = term.recv() => {},
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Warnings (misses with their explanation, upstream failures) on stderr; `RUST_LOG` overrides.
pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Another command may have installed a subscriber already; keeping it is fine.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .try_init();
}
