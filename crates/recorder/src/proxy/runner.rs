//! The runner watch: a proxy a test runner started stops once that runner is gone, however it
//! died (see [`Runner`]), by the same path as SIGTERM and the control pipe's end.
//!
//! Why the process and not a pipe: a runner killed with SIGKILL closes its end of a pipe only
//! when every process holding it is gone, and a child a test forked holds it as long as it
//! lives; a runner without a control pipe (the Node helpers, the pytest plugin told to use
//! none) has no pipe to close at all. Why polling and not a parent-death signal: `PR_SET_PDEATHSIG` is
//! Linux only and fires when the thread that spawned the proxy exits, not its process.
//!
//! Unix only: the setting is refused elsewhere.

use super::config::Runner;
use crate::error::{Error, Setting};
use std::time::Duration;

/// How often the runner is looked at: a killed runner's proxy is gone within about this long.
const EVERY: Duration = Duration::from_millis(250);

/// The runner a proxy watches, once it was found alive.
#[derive(Debug)]
pub(super) struct Watch {
    pid: libc::pid_t,
    /// Whether it is the proxy's parent: then it is gone once it no longer is (the proxy is
    /// handed to another process when its parent exits), which neither a zombie nor a later
    /// process with the same id can fake.
    parent: bool,
}

impl Watch {
    /// The watch `runner` asks for, if any; an error when no such process runs now.
    pub(super) fn new(runner: Runner) -> Result<Option<Watch>, Error> {
        let Runner::Pid(pid) = runner else {
            return Ok(None);
        };
        let pid = libc::pid_t::try_from(pid).map_err(|_| Error::InvalidSetting {
            setting: Setting::Runner,
            reason: "a process id is a number from 1 to 2147483647",
        })?;
        // SAFETY: getppid has no preconditions and cannot fail.
        let parent = unsafe { libc::getppid() } == pid;
        let watch = Watch { pid, parent };
        if !watch.alive() {
            return Err(Error::InvalidSetting {
                setting: Setting::Runner,
                reason: "no process has that id (the runner is gone already)",
            });
        }
        Ok(Some(watch))
    }

    /// Whether the runner still runs.
    fn alive(&self) -> bool {
        if self.parent {
            // SAFETY: getppid has no preconditions and cannot fail.
            return unsafe { libc::getppid() } == self.pid;
        }
        // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
        let found = unsafe { libc::kill(self.pid, 0) } == 0;
        // EPERM: it exists, run by another user.
        found || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }

    /// Completes once the runner is gone.
    pub(super) async fn gone(self) {
        let mut every = tokio::time::interval(EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if !self.alive() {
                tracing::info!("the test runner (process {}) is gone: stopping", self.pid);
                return;
            }
        }
    }
}
