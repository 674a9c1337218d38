//! Key and prefix validation, shared by every backend so that a key is always a safe file name.

use crate::{Error, Result};

/// Keys are SHA-256 hex digests today; the bound only keeps file and object names sane.
const MAX_KEY_LEN: usize = 128;

fn is_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Accepts non-empty lowercase hex of at most 128 characters: such a key can never contain a path
/// separator, `..` or a character a filesystem or bucket would mangle.
pub(crate) fn validate_key(key: &str) -> Result<()> {
    let reason = if key.is_empty() {
        "a key must not be empty"
    } else if key.len() > MAX_KEY_LEN {
        "a key must be at most 128 characters"
    } else if !is_hex(key) {
        "a key must be lowercase hex (0-9, a-f), like the keys `cassette-keying` computes"
    } else {
        return Ok(());
    };
    Err(Error::InvalidKey {
        key: key.to_owned(),
        reason: reason.to_owned(),
    })
}

/// A list prefix is the start of a key: empty, or lowercase hex.
pub(crate) fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.len() <= MAX_KEY_LEN && is_hex(prefix) {
        return Ok(());
    }
    Err(Error::InvalidKey {
        key: prefix.to_owned(),
        reason: "a list prefix must be empty or lowercase hex (0-9, a-f)".to_owned(),
    })
}

/// The folder a key is sharded into: its first two characters, so that 100,000 keys spread over
/// 256 folders of about 400 files each.
pub(crate) fn shard(key: &str) -> &str {
    &key[..key.len().min(2)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        for ok in ["0", "ab", &"0123456789abcdef".repeat(4), &"f".repeat(128)] {
            assert!(validate_key(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "AB",
            "g0",
            "../etc",
            "ab/cd",
            "ab.json",
            " ab",
            &"a".repeat(129),
        ] {
            assert!(
                matches!(validate_key(bad), Err(Error::InvalidKey { .. })),
                "{bad}"
            );
        }
        assert!(validate_prefix("").is_ok());
        assert!(validate_prefix("a").is_ok());
        assert!(matches!(
            validate_prefix("A"),
            Err(Error::InvalidKey { .. })
        ));
        assert_eq!(shard("abcdef"), "ab");
        assert_eq!(shard("a"), "a");
    }
}
