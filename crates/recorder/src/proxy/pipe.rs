//! The control pipe: a test runner that started the proxy as its child begins and ends its
//! tests with one line on the proxy's stdin each, and reads a notice on its stdout when a test
//! saw a problem, instead of three round trips to the control endpoint per test.
//!
//! Why it is exact and not merely fast: the runner writes a test's `begin` before the test runs,
//! so the line is in the pipe before any of the test's requests can reach the proxy, and every
//! request drains the pipe before it is given a scope (a background task drains it too, every
//! [`POLL`], so a long run of tests that send nothing never fills it; on a timer, not on the
//! pipe's readiness, so that a test's two lines do not each wake the proxy while the test runs:
//! that wake-up was most of what the pipe cost a test). The other way, a notice is written
//! before the answer that caused it leaves the proxy, so once a test has its answers, its
//! notice is in the runner's pipe; a test with no notice had no miss, error or refused bypass,
//! and its tally need not be read.
//!
//! Unix only: the runner's end is a pipe it made (`subprocess.PIPE`), which no other process
//! holds, so the pipe needs no token.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::fd::AsFd;
use std::sync::Mutex;
use tokio::net::unix::pipe::Receiver;

/// The longest control message accepted (a test id is at most a few hundred bytes).
const MAX_LINE: usize = 64 * 1024;

/// How often the background task drains the pipe: a pipe holds 64 KiB, some 400 lines of
/// `begin` and `end`, far more than a runner writes in this time.
pub(super) const POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// The proxy's stdin, read without blocking (by a request, and by the background task every
/// [`POLL`]). It is not registered with the runtime's reactor: a write of the runner's would
/// wake it for nothing.
pub(super) struct Pipe {
    file: File,
    read: Mutex<Unread>,
}

#[derive(Default)]
struct Unread {
    /// The start of a line whose end has not arrived.
    partial: Vec<u8>,
    /// The runner closed its end (it stopped, or died).
    closed: bool,
}

impl Pipe {
    /// The proxy's stdin, which must be a pipe. Needs the async runtime.
    pub(super) fn stdin() -> std::io::Result<Pipe> {
        let stdin = std::io::stdin();
        // tokio checks that it is a pipe and makes it non-blocking (the flag belongs to the
        // pipe's end, not to one descriptor), then lets go of it again, left non-blocking.
        let checked = Receiver::from_owned_fd(stdin.as_fd().try_clone_to_owned()?)?;
        let file = File::from(checked.into_nonblocking_fd()?);
        Ok(Pipe {
            file,
            read: Mutex::default(),
        })
    }

    /// Reads what the pipe holds now and hands each whole line to `apply`, in order.
    pub(super) fn drain(&self, apply: impl FnMut(Result<&[u8], String>)) {
        self.drain_with(|buffer| (&self.file).read(buffer), apply);
    }

    /// Whether the runner closed its end (seen by a drain).
    pub(super) fn closed(&self) -> bool {
        self.read.lock().unwrap_or_else(|p| p.into_inner()).closed
    }

    /// Reads until the pipe is empty and hands each whole line to `apply`, in order, all under
    /// one lock: two requests draining at once must not apply a test's end before its begin.
    /// A line over the limit is handed over as an error.
    fn drain_with(
        &self,
        mut read: impl FnMut(&mut [u8]) -> std::io::Result<usize>,
        mut apply: impl FnMut(Result<&[u8], String>),
    ) {
        let mut unread = self.read.lock().unwrap_or_else(|p| p.into_inner());
        if unread.closed {
            return;
        }
        let mut buffer = [0u8; 8192];
        loop {
            match read(&mut buffer) {
                Ok(0) => {
                    unread.closed = true;
                    break;
                }
                Ok(n) => unread.partial.extend_from_slice(&buffer[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!("cannot read the control pipe (stdin): {e}; ignoring it");
                    unread.closed = true;
                    break;
                }
            }
        }
        let mut start = 0;
        while let Some(end) = unread.partial[start..].iter().position(|&b| b == b'\n') {
            let line = &unread.partial[start..start + end];
            if line.len() > MAX_LINE {
                apply(Err(format!(
                    "a control message of {} bytes, over the limit of {MAX_LINE}",
                    line.len()
                )));
            } else if !line.iter().all(u8::is_ascii_whitespace) {
                apply(Ok(line));
            }
            start += end + 1;
        }
        unread.partial.drain(..start);
        if unread.partial.len() > MAX_LINE {
            apply(Err(format!(
                "a control message over the limit of {MAX_LINE} bytes"
            )));
            unread.partial.clear();
        }
    }
}
