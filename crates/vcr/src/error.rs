//! The one public error type of the vcrpy reader: a whole tape that is not read, or one
//! interaction of it that is not.

/// Why a tape, or one interaction of it, is not read. The messages say what the tape holds
/// instead of what was expected; they never quote a header value or a body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The tape is larger than a vcrpy cassette read here may be.
    #[error("it is {size} bytes; a vcrpy cassette read here is at most {limit}")]
    TooLarge {
        /// Its size in bytes.
        size: u64,
        /// [`crate::MAX_TAPE_BYTES`].
        limit: u64,
    },
    /// Flow collections nest deeper than any vcrpy cassette does (found before the YAML
    /// library, whose parser is quadratic in that depth).
    #[error(
        "not a vcrpy cassette: it nests collections more than {limit} levels deep at line \
         {line}, column {column} (a vcrpy cassette nests a few), so it is not read"
    )]
    TooDeep {
        /// The 1-based line of the bracket past the limit.
        line: usize,
        /// Its 1-based column.
        column: usize,
        /// [`crate::MAX_DEPTH`].
        limit: usize,
    },
    /// Block collections nest deeper than the YAML library's own limit.
    #[error(
        "not a vcrpy cassette: it nests collections too deeply for the YAML reader ({reason})"
    )]
    TooDeepForYaml {
        /// The YAML library's message.
        reason: String,
    },
    /// The text is not YAML.
    #[error("not valid YAML: {reason}")]
    NotYaml {
        /// The YAML library's message.
        reason: String,
    },
    /// The text holds the tag the reader uses for `!!binary` values itself.
    #[error("it holds the text {text:?}, which the reader uses itself")]
    ReservedText {
        /// The text.
        text: &'static str,
    },
    /// The document has no `interactions` list.
    #[error("no \"interactions\" list: not a vcrpy cassette")]
    NoInteractions,
    /// One interaction cannot be converted; the rest of its tape can.
    #[error("{reason}")]
    Interaction {
        /// What is wrong with it, outermost part first (`request body: ...`).
        reason: String,
    },
}
