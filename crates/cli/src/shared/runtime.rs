//! The process around a command: its exit status for errors, logging, the async runtime, the
//! signals that stop it (and SIGPIPE for printing commands), and the index flushed before it
//! ends.

use anyhow::Context;

/// Exit status for errors that are not a test verdict: usage errors, missing files, replay
/// misses. Distinct from 1, which means "an assertion failed".
pub(crate) const EXIT_ERROR: u8 = 2;

/// Writes the index records of the cassettes a command recorded (see
/// `cassette_recorder::miss`), warning rather than failing: the cassettes are written already,
/// and the index only makes explaining a later miss cheaper.
pub(crate) async fn flush_index(recorder: &cassette_recorder::Recorder) {
    if let Err(err) = recorder.flush_index().await {
        eprintln!(
            "cassette: warning: the nearest-recording index was not updated: {:#} (run `cassette index` later)",
            anyhow::Error::new(err)
        );
    }
}

/// A small runtime for commands that only talk to stores.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Completes on the first SIGINT or SIGTERM. The signals are listened for from the call on,
/// not from the first poll.
pub(crate) fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(int), Ok(term)) => Some((int, term)),
            _ => None,
        }
    };
    async move {
        #[cfg(unix)]
        if let Some((mut int, mut term)) = signals {
            tokio::select! {
                _ = int.recv() => {},
                _ = term.recv() => {},
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Standard error for log lines, with every URL in them shown without credentials: library
/// messages quote what a store or an upstream library said, URLs included. The formatter
/// writes each line whole.
struct ShownStderr;

impl std::io::Write for ShownStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let shown = cassette_keying::shown_urls(&text);
        std::io::Write::write_all(&mut std::io::stderr(), shown.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::Write::flush(&mut std::io::stderr())
    }
}

/// Warnings (misses with their explanation, upstream failures) on stderr; `RUST_LOG` overrides.
pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Another command may have installed a subscriber already; keeping it is fine.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| ShownStderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .try_init();
}

/// Lets a printing command end quietly when its reader goes away (`cassette show KEY | head`),
/// as Unix tools do. Rust ignores SIGPIPE, which turns a closed pipe into a panic inside
/// `println!`. Commands that serve sockets or run children keep ignoring it. Windows has no
/// SIGPIPE: there a closed pipe stays a write error.
pub(crate) fn restore_default_sigpipe() {
    // SAFETY: called before any thread is started; SIG_DFL is a valid disposition for SIGPIPE.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
