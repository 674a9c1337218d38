//! Who a request is for: the test a test runner is running when it arrives, and what that test
//! asks of the recorder. A test runner's plugin names the test through the proxy's control
//! endpoint; the recorder records the test as each cassette's provenance, numbers repeats per
//! test in sequence mode, answers from the test's own test-scoped recordings first, and
//! compares a miss with that test's own recordings first.

use crate::config::{Repeats, Sharing};
use crate::error::{Error, Result};
use crate::mode::Mode;

/// The test a request belongs to, with what it asks of the recorder. The default scope is no
/// test: the recorder's own settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// The test's id as its runner names it (a pytest node id, a test file and name).
    pub test: Option<String>,
    /// A mode for this test's requests instead of the recorder's own.
    pub mode: Option<Mode>,
    /// How this test's repeats of one request are answered, instead of the recorder's setting.
    pub repeats: Option<Repeats>,
    /// Whether recordings other tests made answer this test (adopt asks for its own).
    pub sharing: Sharing,
    /// The vcrpy tapes this test's answers come from, for a recorder that answers from tapes
    /// (adopt; [`Answers::Tapes`](crate::config::Answers::Tapes)).
    pub tapes: Option<TapeSet>,
    /// Whether the requests this test sends are kept for its runner (the pytest plugin's `vcr`
    /// fixture reads them as vcrpy's cassette's `requests`), without credentials.
    pub keep_requests: bool,
}

/// The vcrpy tapes of one test, as its runner names them (pytest-recording's tape of the test
/// and the extra ones its `vcr` marker names), and the `match_on` they were recorded with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TapeSet {
    /// The tape files, as paths the recorder can open (relative to its working folder or
    /// absolute), in the order their interactions are tried.
    pub paths: Vec<String>,
    /// vcrpy's matcher names (`method`, `path`, `body`, ...); vcrpy's default when empty.
    pub match_on: Vec<String>,
    /// The tapes of `paths` only the suite's own serializer or persister reads, as the runner
    /// deserialized them with it (vcrpy's dict shape, bytes as `{"!!binary": base64}`), or a
    /// string saying why it could not; read instead of the file.
    pub documents: std::collections::BTreeMap<String, serde_json::Value>,
    /// What vcrpy's `filter_headers` and `filter_query_parameters` take out of (or replace in)
    /// a request before matching: today's request is matched as vcrpy would match it.
    pub filters: TapeFilters,
    /// Whether the runner judges, for each request it sends in process, which interactions
    /// match it (the suite's own matchers and `before_record_request` are its code, applied
    /// where that code runs) and names them in `x-cassette-adopt-allow`: such a request is
    /// answered by the first unplayed one of those, and only a request without the header is
    /// matched here.
    pub judged: bool,
}

/// The header in which a runner names the interactions of a test's tapes that match a request
/// as the suite's own vcrpy settings decide ([`TapeSet::judged`]): `TAPE:NUMBER` pairs,
/// comma-separated, the tape its place in [`TapeSet::paths`] from 0 and the interaction its
/// place on that tape from 1 (empty: none matches). Only adopt reads it, and no recording,
/// key or kept request holds it.
pub(crate) const ADOPT_ALLOW_HEADER: &str = "x-cassette-adopt-allow";

/// vcrpy's request filters: a name, and the value it is replaced by (removed when `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TapeFilters {
    /// `filter_headers`.
    pub headers: Vec<(String, Option<String>)>,
    /// `filter_query_parameters`.
    pub query: Vec<(String, Option<String>)>,
}

impl Scope {
    /// The scope of `test`, with the recorder's own settings.
    pub fn test(test: impl Into<String>) -> Scope {
        Scope {
            test: Some(test.into()),
            ..Scope::default()
        }
    }

    /// The mode this scope's requests are answered in, given the recorder's own `mode`. A
    /// scope may ask for any mode that calls the upstream no more than the recorder's own: a
    /// replaying recorder owns no upstream client, and a test cannot change that (a marker in
    /// a test file is no more trusted than a settings file).
    pub(crate) fn mode(&self, mode: Mode) -> Result<Mode> {
        match self.mode {
            None => Ok(mode),
            Some(asked) if asked.may_call_upstream() && !mode.may_call_upstream() => {
                Err(Error::ModeRefused {
                    test: self.test.clone().unwrap_or_default(),
                    asked,
                    mode,
                })
            }
            Some(asked) => Ok(asked),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_never_makes_a_replaying_recorder_call_out() {
        let asks = |mode| Scope {
            mode: Some(mode),
            ..Scope::test("t")
        };
        for asked in [Mode::Record, Mode::Auto, Mode::Off] {
            let err = asks(asked).mode(Mode::Replay).unwrap_err();
            assert!(matches!(err, Error::ModeRefused { .. }), "{err}");
            assert!(err.to_string().contains("`t`"), "{err}");
        }
        assert_eq!(asks(Mode::Replay).mode(Mode::Record).unwrap(), Mode::Replay);
        assert_eq!(asks(Mode::Record).mode(Mode::Auto).unwrap(), Mode::Record);
        assert_eq!(Scope::default().mode(Mode::Auto).unwrap(), Mode::Auto);
    }
}
