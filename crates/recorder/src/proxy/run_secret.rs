//! The per-run secret of a proxy a runner started (`cassette exec`, the pytest plugin, the
//! Node helpers): in every mode that may call an upstream, only requests that carry it are
//! sent there, so another local program (another Unix user's included) cannot spend the
//! owner's keys or write cassettes through the proxy's loopback port.
//!
//! A request carries it as the first segment of its path (`/_run/SECRET/v1/...`: the base
//! URLs the runner hands its clients begin so) or in the `x-cassette-run` header. Either is
//! taken off before anything else sees the request, so it is never routed, keyed, forwarded,
//! recorded or logged.

use crate::error::{Error, Setting};
use std::fmt;

/// The first path segment that carries the secret: `/_run/SECRET/...`.
pub const RUN_SEGMENT: &str = "_run";

/// The header that carries the secret, for clients whose URL cannot.
pub const RUN_SECRET_HEADER: &str = "x-cassette-run";

/// The fewest characters a secret has: shorter ones could be guessed.
const MIN_LEN: usize = 16;

/// The most characters a secret has.
const MAX_LEN: usize = 128;

/// A per-run secret: 16 to 128 ASCII letters, digits, `-` or `_` (it must survive a URL path
/// unescaped). Its `Debug` does not show it, so no settings dump or log line can.
#[derive(Clone, PartialEq, Eq)]
pub struct RunSecret(String);

impl fmt::Debug for RunSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RunSecret(hidden)")
    }
}

impl RunSecret {
    /// Checks `secret`'s form; the error never quotes it.
    pub fn new(secret: impl Into<String>) -> Result<RunSecret, Error> {
        let secret = secret.into();
        let fits = (MIN_LEN..=MAX_LEN).contains(&secret.len())
            && secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
        if !fits {
            return Err(Error::InvalidSetting {
                setting: Setting::RunSecret,
                reason: "a run secret is 16 to 128 letters, digits, `-` or `_`",
            });
        }
        Ok(RunSecret(secret))
    }

    /// The path prefix that carries it, `/_run/SECRET`: a client's base URL is the proxy's
    /// URL followed by it.
    pub fn path_prefix(&self) -> String {
        format!("/{RUN_SEGMENT}/{}", self.0)
    }

    /// `text` with every copy of the secret replaced by `…`, for what is shown of a URL that
    /// carries it (a variable's value named in advice).
    pub fn hide(&self, text: &str) -> String {
        text.replace(&self.0, "…")
    }

    /// Whether `presented` is the secret, compared in constant time (for a given length), so
    /// the time a refusal takes tells nothing about how much of a guess was right.
    pub(super) fn matches(&self, presented: &[u8]) -> bool {
        same_bytes(self.0.as_bytes(), presented)
    }
}

/// Whether `a` and `b` are equal, in a time that depends on their lengths only: what the
/// proxy's secrets (this one, the control token) are compared with.
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// What a request's path says about the secret: `/_run/X/rest` split into `X` and `rest`
/// (`/` when nothing follows); `None` when its first segment is not `_run`.
pub(super) fn split_run(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix('/')?.strip_prefix(RUN_SEGMENT)?;
    if rest.is_empty() {
        return Some(("", "/"));
    }
    let rest = rest.strip_prefix('/')?;
    Some(match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_has_a_form_and_is_never_shown_by_debug() {
        assert!(RunSecret::new("short").is_err());
        assert!(RunSecret::new("a/b-cdefghijklmnop").is_err());
        assert!(RunSecret::new("x".repeat(129)).is_err());
        let secret = RunSecret::new("0123456789abcdef-_XY").unwrap();
        assert!(!format!("{secret:?}").contains("0123456789abcdef"));
        assert_eq!(secret.path_prefix(), "/_run/0123456789abcdef-_XY");
        assert_eq!(
            secret.hide("http://h/_run/0123456789abcdef-_XY/v1"),
            "http://h/_run/…/v1"
        );
        assert!(secret.matches(b"0123456789abcdef-_XY"));
        assert!(!secret.matches(b"0123456789abcdef-_XZ"));
        assert!(!secret.matches(b"0123456789abcdef"));
    }

    #[test]
    fn only_a_first_segment_named_run_is_split_off() {
        assert_eq!(
            split_run("/_run/s3cr3t/v1/chat"),
            Some(("s3cr3t", "/v1/chat"))
        );
        assert_eq!(split_run("/_run/s3cr3t"), Some(("s3cr3t", "/")));
        assert_eq!(split_run("/_run"), Some(("", "/")));
        assert_eq!(split_run("/_runner/v1"), None);
        assert_eq!(split_run("/v1/_run/s/x"), None);
    }
}
