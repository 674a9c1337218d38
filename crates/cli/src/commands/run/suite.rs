//! Suite files read from disk for `cassette run`: what a suite is, and how it is parsed and
//! validated, is `cassette_grade::suite`; this adds the file's name to every bad line.

use anyhow::Context;
use cassette_grade::suite::{self, Case};
use cassette_grade::Error;
use std::fmt::Write as _;
use std::path::Path;

/// Reads and validates a whole suite. Every bad line is reported, not just the first.
pub(crate) fn load(path: &Path) -> anyhow::Result<Vec<Case>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read suite {}", path.display()))?;
    suite::parse(&text).map_err(|err| match err {
        Error::Suite { lines } => {
            let mut message = format!(
                "suite {} has {} bad line(s); nothing was run:",
                path.display(),
                lines.len()
            );
            for bad in &lines {
                let _ = write!(
                    message,
                    "\n  {}:{}: {}",
                    path.display(),
                    bad.line,
                    bad.reason
                );
            }
            anyhow::Error::msg(message)
        }
        Error::EmptySuite => anyhow::anyhow!(
            "suite {} has no cases (only blank lines and comments, or nothing at all); nothing \
             was run",
            path.display()
        ),
        other => anyhow::Error::new(other).context(format!("suite {}", path.display())),
    })
}
