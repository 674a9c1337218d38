//! The redaction a review applies to what it shows: a stored cassette sealed once more with
//! the embedder's [`Redactor`] (its rules, the built-in credential names and shapes, the
//! secrets it holds). Stored cassettes went through redaction when they were recorded; a
//! review redacts them again, for a rule added since or a tape another tool wrote.

use cassette_tape::redact::Redactor;
use cassette_tape::{Cassette, Sealed};

/// A cassette as it would be stored today: every field through `redactor` again.
pub fn reseal(cassette: Cassette, redactor: &Redactor) -> Cassette {
    Sealed::seal(cassette, redactor, None).into_cassette()
}
