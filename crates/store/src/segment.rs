//! Index segments: small documents a store keeps beside its cassettes, in a namespace of their
//! own, for the recorder's nearest-recording index (so the first miss of a run reads a handful
//! of segments instead of every cassette). Stores treat them as opaque bytes, like cassettes.

use crate::Error;
use std::fmt;

/// The name of an index segment: 1 to 100 characters of `a-z`, `0-9`, `-`, `_` and `.`, not
/// starting with `.`. Validated like keys, so a name can never leave the store's index folder.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SegmentName(String);

impl SegmentName {
    /// The name, when `name` is one.
    pub fn parse(name: &str) -> Option<SegmentName> {
        let ok = (1..=100).contains(&name.len())
            && !name.starts_with('.')
            && name
                .bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.'));
        ok.then(|| SegmentName(name.to_owned()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// What a store that keeps no segments (see [`crate::Store::keeps_segments`]) answers to a
    /// write of this one, `location` being its own.
    pub fn unsupported_in(&self, location: String) -> Error {
        Error::Unsupported {
            location,
            what: format!("index segment {self}"),
        }
    }
}

impl fmt::Display for SegmentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The folder (file store) or object prefix (S3) segments live in, beside the shards.
pub(crate) const SEGMENT_FOLDER: &str = "_index";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_file_names() {
        for ok in ["w-1700000000000-ab12.jsonl", "base_1", "a"] {
            assert!(SegmentName::parse(ok).is_some(), "{ok}");
        }
        let long = "a".repeat(101);
        for bad in ["", ".hidden", "../x", "a/b", "A", "a b", &long] {
            assert!(SegmentName::parse(bad).is_none(), "{bad}");
        }
    }
}
