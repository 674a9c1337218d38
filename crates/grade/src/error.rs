//! The one public error type of the grade crate.

use std::fmt;

/// A grade result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What is wrong with a grader, a request, a case or a suite. Messages name the member or field
/// to change (`expect.needle`, `"prompt"`, `grader[1]`); callers add the file it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A grader is unknown, or its fields (a case's `expect`) are not what it takes.
    #[error("{reason}")]
    Grader {
        /// What is wrong, from where it is to what to change.
        reason: String,
    },
    /// A request (a request file, a case's `request`) is not one.
    #[error("{reason}")]
    Request {
        /// What is wrong, from where it is to what to change.
        reason: String,
    },
    /// A line of a suite is not a case.
    #[error("{reason}")]
    Case {
        /// What is wrong, from where it is to what to change.
        reason: String,
    },
    /// Lines of a suite are not cases: every bad line, not just the first.
    #[error("{}", BadLines(lines))]
    Suite {
        /// The bad lines, in order.
        lines: Vec<BadLine>,
    },
    /// A suite holds no case: it is empty, or holds only blank lines and comments.
    #[error("the suite has no cases")]
    EmptySuite,
}

/// One line of a suite that is not a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// Its 1-based number.
    pub line: usize,
    /// Why it is not a case.
    pub reason: String,
}

struct BadLines<'a>(&'a [BadLine]);

impl fmt::Display for BadLines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the suite has {} bad line(s):", self.0.len())?;
        for bad in self.0 {
            write!(f, "\n  line {}: {}", bad.line, bad.reason)?;
        }
        Ok(())
    }
}

impl Error {
    pub(crate) fn grader(reason: impl fmt::Display) -> Error {
        Error::Grader {
            reason: reason.to_string(),
        }
    }

    pub(crate) fn request(reason: impl fmt::Display) -> Error {
        Error::Request {
            reason: reason.to_string(),
        }
    }

    pub(crate) fn case(reason: impl fmt::Display) -> Error {
        Error::Case {
            reason: reason.to_string(),
        }
    }

    /// The error with where it happened in front (`grader[1]: ...`), as a reader follows it
    /// from the outside in.
    pub(crate) fn within(self, at: impl fmt::Display) -> Error {
        let at = |reason: String| format!("{at}: {reason}");
        match self {
            Error::Grader { reason } => Error::Grader { reason: at(reason) },
            Error::Request { reason } => Error::Request { reason: at(reason) },
            Error::Case { reason } => Error::Case { reason: at(reason) },
            whole @ (Error::Suite { .. } | Error::EmptySuite) => whole,
        }
    }
}

/// Returns early with an error of the kind named (`grader`, `request`, `case`), its reason
/// formatted as `format!` does.
macro_rules! bail {
    ($kind:ident, $($arg:tt)+) => {
        return Err($crate::Error::$kind(format_args!($($arg)+)))
    };
}
pub(crate) use bail;
