//! What changed, for people: the drift verdict of a re-recorded answer ([`verdict`]), the
//! review of two sets of recordings as data ([`diff`]), its self-contained HTML pages and those
//! of a suite run ([`html`]), Markdown summaries for pull requests ([`markdown`]), the one
//! line per difference of a miss, long strings as a word diff ([`render`]), and the failure
//! text of a test that missed or failed on cassette's account, which test runner helpers print
//! as it is ([`failure`]). What a review shows goes through a cassette's redaction once more
//! ([`redact`]).
//!
//! The recorder renders a miss's differences and a test's failure text with this crate, the
//! command line its reviews: one renderer, so a miss reads the same in a 409, a test runner's
//! failure, `cassette diff` and an HTML page.
//!
//! # Architecture invariant
//!
//! This crate is pure: no IO, no async runtime, no clock, no environment. It depends on the
//! other pure crates (`cassette-keying`, `cassette-wire`, `cassette-tape`) and on data and
//! text crates only, so the compiler keeps it so: it turns data into text and markup, and
//! whoever embeds it writes that text where it belongs. Like every library here it names no
//! flag or environment variable of the command line; where its text tells the reader what to
//! do, the embedder hands in its own words for it.

#![deny(missing_docs)]

pub mod diff;
pub mod failure;
pub mod html;
pub mod markdown;
pub mod redact;
pub mod render;
pub mod verdict;

pub use diff::{DiffReview, OldTape, PairedBy, Pairing, Recording, RequestLine, Reviewed};
pub use render::{difference_line, difference_lines, difference_pieces, word_diff, Piece};
pub use verdict::{Drift, Facts, Judged};
