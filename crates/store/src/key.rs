//! Keys as names: the typed [`Key`] of `cassette-keying` is 64 lowercase hex characters, so it can
//! never name a path outside the store; list prefixes and names read back from a backend are
//! checked here with the same rule.

use crate::{Error, Result};
use cassette_keying::Key;

fn is_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A list prefix is the start of a key: empty, or lowercase hex no longer than a key.
pub(crate) fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.len() <= 64 && is_hex(prefix) {
        return Ok(());
    }
    Err(Error::InvalidPrefix {
        prefix: prefix.to_owned(),
        reason: "a list prefix must be empty or lowercase hex (0-9, a-f), at most 64 characters"
            .to_owned(),
    })
}

/// Whether a folder name can be the shard of some key (one or two hex characters).
pub(crate) fn is_shard_name(name: &str) -> bool {
    (1..=2).contains(&name.len()) && is_hex(name)
}

/// The key a stored name (file name, object name, database key, log entry) stands for, when it
/// is one that starts with `prefix`; anything else in a backend is not a cassette of ours.
pub(crate) fn stored_key(name: &str, prefix: &str) -> Option<Key> {
    Key::parse(name).filter(|key| key.as_str().starts_with(prefix))
}

/// The folder a key is sharded into: its first two characters, so that 100,000 keys spread over
/// 256 folders of about 400 files each.
pub(crate) fn shard(key: &Key) -> &str {
    &key.as_str()[..2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_names_and_shards() {
        let key = "0123456789abcdef".repeat(4);
        for ok in ["", "0", "ab", &key] {
            assert!(validate_prefix(ok).is_ok(), "{ok}");
        }
        for bad in [
            "AB",
            "g0",
            "../etc",
            "ab/cd",
            "ab.json",
            " ab",
            &format!("{key}0"),
        ] {
            assert!(
                matches!(validate_prefix(bad), Err(Error::InvalidPrefix { .. })),
                "{bad}"
            );
        }
        assert!(is_shard_name("a") && is_shard_name("ab"));
        assert!(!is_shard_name("") && !is_shard_name("abc") && !is_shard_name("AB"));
        let parsed = stored_key(&key, "0123").map(|k| shard(&k).to_owned());
        assert_eq!(parsed.as_deref(), Some("01"));
        assert!(stored_key(&key, "1").is_none());
        for bad in [
            "ab",
            "../etc",
            &key.to_ascii_uppercase(),
            &format!("{key}.json"),
        ] {
            assert!(stored_key(bad, "").is_none(), "{bad}");
        }
    }
}
