//! Progress on long work (`run`, `import`, `copy`, `gc`, `verify`, `index`), drawn with
//! indicatif on stderr only when stderr is a terminal: under a pipe or a file (CI logs) a bar is
//! hidden and prints nothing at all. Lines a command prints while a bar is drawn go through
//! [`Progress::println`] (or [`Progress::suspend`]) so they are not drawn over.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// How often a spinner or an elapsed time is redrawn when nothing else happens.
const TICK: Duration = Duration::from_millis(200);

/// A progress bar, or nothing when stderr is not a terminal. Dropped (a command that stops
/// early), it clears itself rather than leave a bar under the error message.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: ProgressBar,
}

/// Whether progress is drawn: stderr is a terminal.
pub(crate) fn drawn() -> bool {
    std::io::stderr().is_terminal()
}

impl Progress {
    /// A bar of `len` steps of `unit` (`cases`, `cassettes`), with elapsed time, rate and a
    /// message.
    pub(crate) fn bar(len: u64, unit: &str) -> Progress {
        let bar = Self::target(ProgressBar::with_draw_target(
            Some(len),
            ProgressDrawTarget::hidden(),
        ));
        let template = format!("{{elapsed_precise}} {{bar:30}} {{pos}}/{{len}} {unit} {{msg}}");
        bar.set_style(
            ProgressStyle::with_template(&template)
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Progress { bar }
    }

    /// A spinner for work of unknown length, with its elapsed time.
    pub(crate) fn spinner(what: &str) -> Progress {
        let bar = Self::target(ProgressBar::with_draw_target(
            None,
            ProgressDrawTarget::hidden(),
        ));
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(what.to_owned());
        if drawn() {
            bar.enable_steady_tick(TICK);
        }
        Progress { bar }
    }

    /// Draws on stderr when it is a terminal; stays hidden otherwise.
    fn target(bar: ProgressBar) -> ProgressBar {
        let bar = bar.with_finish(ProgressFinish::AndClear);
        if drawn() {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        bar
    }

    /// One more step done.
    pub(crate) fn inc(&self) {
        self.bar.inc(1);
    }

    /// The message after the counts.
    pub(crate) fn message(&self, message: String) {
        self.bar.set_message(message);
    }

    /// Prints a line on stderr above the bar.
    pub(crate) fn println(&self, line: impl AsRef<str>) {
        let line = line.as_ref();
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// Runs `f` (which prints) with the bar out of the way.
    pub(crate) fn suspend<T>(&self, f: impl FnOnce() -> T) -> T {
        self.bar.suspend(f)
    }

    /// Removes the bar, leaving the terminal as it was.
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
