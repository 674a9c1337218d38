//! vcrpy cassettes ("tapes"), read once for every part of cassette that reads them: `cassette
//! import` turns their interactions into cassettes, and the adopt run's proxy answers a
//! test's requests from its tapes, matched as vcrpy matched them. Both get the same
//! interactions from the same text, so a tape reads the same way through either.
//!
//! - [`read`]: a tape's text into its interactions, each converted or its error (every body
//!   and header shape real suites write, compressed answers decoded; a header value that
//!   cannot be converted is left out and noted, never the interaction); [`read_document`]:
//!   the same from a tape the suite's own serializer deserialized (vcrpy's dict shape);
//! - [`test_id`]: the test a pytest-recording tape belongs to, from its path;
//! - [`MatchOn`], [`Matcher`], [`Sent`]: vcrpy's `match_on` over an interaction.
//!
//! # Architecture invariant
//!
//! No IO: text in, interactions out, and matching is a function of two requests. The crate
//! reads no file, opens no connection and depends on no IO crate (`tests/library_boundaries.rs`,
//! and `cargo tree` in `scripts/test.sh`); its callers read the tapes.

mod decode;
mod depth;
mod error;
mod matching;
mod reader;
mod test_id;

pub use depth::MAX_DEPTH;
pub use error::Error;
pub use matching::{credential_header, matches, MatchOn, Matcher, Sent, DEFAULT_MATCH_ON};
pub use reader::{read, read_document, Interaction, MAX_TAPE_BYTES};
pub use test_id::test_id;
