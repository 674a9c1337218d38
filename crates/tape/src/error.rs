//! The one public error type of the tape crate.

use cassette_keying::Key;

/// A tape result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can be wrong with a document, a request or a redaction rule. Messages name what to
/// change; callers add the key and the store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes are not a cassette document: not JSON, a member missing or of the wrong type, a
    /// key that is not 64 lowercase hex characters.
    #[error("{reason}")]
    Unreadable {
        /// What the parser said.
        reason: String,
    },
    /// The document was written by a newer version of the tool.
    #[error(
        "cassette format {found} is newer than this tool understands ({supported}); upgrade \
         cassette"
    )]
    NewerFormat {
        /// The document's format.
        found: u32,
        /// The newest format this tool reads.
        supported: u32,
    },
    /// The document stored under one key is the recording of another (a file copied or renamed
    /// over another key's file): it would answer a question it was not recorded for.
    #[error(
        "the document is the recording of key {recorded}, not of {asked} (a file copied or \
         renamed over another key's file?); it was not served"
    )]
    OtherKey {
        /// The key the document says it records.
        recorded: Key,
        /// The key it is stored under.
        asked: Key,
    },
    /// A stored document holds what the current redaction rules would not store (a credential
    /// shape, a credential name, a header outside today's allow-lists), named by place.
    #[error(
        "the document holds what the current redaction rules would not store ({problems}); \
         redact or re-record it"
    )]
    Unredacted {
        /// Each problem, by place and shape, never by value.
        problems: String,
    },
    /// A POST declared as JSON whose body is not: recorded, it would be keyed and forwarded as
    /// something the client did not mean to send.
    #[error("the request body is declared as JSON but does not parse: {reason}")]
    NotJson {
        /// Where it breaks.
        reason: String,
    },
    /// A user redaction regex does not compile.
    #[error("invalid redaction pattern `{pattern}`: {reason}")]
    InvalidPattern {
        /// The pattern as configured.
        pattern: String,
        /// Why it was rejected.
        reason: String,
    },
    /// Secrets (API keys) that cannot be turned into redaction rules, named by whose they are
    /// (their route), never quoted.
    #[error("the secret of {names} cannot be turned into a redaction rule (too long?)")]
    UnusableSecret {
        /// Whose secrets they are, comma-separated.
        names: String,
    },
    /// A user redaction JSON path does not parse.
    #[error("invalid redaction JSON path `{path}`: {reason}")]
    InvalidJsonPath {
        /// The path as configured.
        path: String,
        /// Why it was rejected.
        reason: String,
    },
}
