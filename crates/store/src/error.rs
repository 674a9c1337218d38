//! The one public error type of the store crate.

use cassette_keying::Key;
use std::path::PathBuf;

/// A store result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a store can fail with. Each variant names where (backend, file or endpoint) and
/// what (key), so a message can tell the user what to do. A variant that wraps a cause returns
/// it from [`std::error::Error::source`] and leaves it out of its own message: print the chain.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store URL could not be understood.
    #[error("invalid store URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A list prefix is not lowercase hex, so no key can start with it.
    #[error("invalid list prefix `{prefix}`: {reason}")]
    InvalidPrefix {
        /// The prefix as given.
        prefix: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A document handed to a store that keeps JSON (files, JSON Lines) is not valid JSON.
    #[error("cassette {key} for {location} is not valid JSON: {reason}; nothing was written")]
    InvalidDocument {
        /// The store.
        location: String,
        /// The key it was to be stored under.
        key: Key,
        /// What is wrong with it.
        reason: String,
    },
    /// A stored document is damaged (for example truncated JSON).
    #[error("corrupt cassette {key} in {location}: {reason}; re-record it or delete the file")]
    Corrupt {
        /// Where the document lives (file path or store URL).
        location: String,
        /// Its key.
        key: Key,
        /// What is wrong.
        reason: String,
    },
    /// Filesystem trouble in a file, JSON Lines or sled store.
    #[error("{store} store: {action} {}", path.display())]
    Io {
        /// The backend (`file`, `jsonl`, `sled`).
        store: &'static str,
        /// What was being done (`reading`, `writing`, ...).
        action: &'static str,
        /// The file or folder involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A store's file was deleted (or moved away) while the store was open: nothing is read
    /// from or written to a file nobody can see any more.
    #[error(
        "{} was deleted or moved away while {location} was open; nothing more is read from or \
         written to it (cassettes recorded into it since it was opened are gone with it): put it \
         back and open the store again",
        path.display()
    )]
    Vanished {
        /// The store.
        location: String,
        /// The file that is gone.
        path: PathBuf,
    },
    /// The store is locked by another process (sled allows one process at a time).
    #[error("{location} is in use by another process{}; stop it or use another path", holder.as_deref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Locked {
        /// The store.
        location: String,
        /// Which process holds it, when known.
        holder: Option<String>,
    },
    /// A write was refused by a read-only store.
    #[error("{location} is read-only (replay mode): refusing to write cassette {key}")]
    ReadOnly {
        /// The store.
        location: String,
        /// The key that was to be written.
        key: Key,
    },
    /// A write of an index segment was refused by a read-only store.
    #[error("{location} is read-only (replay mode): refusing to write index segment {name}")]
    ReadOnlySegment {
        /// The store.
        location: String,
        /// The segment.
        name: String,
    },
    /// The store does not keep what was asked of it (index segments, for a JSON Lines log).
    #[error("{location} does not keep {what}")]
    Unsupported {
        /// The store.
        location: String,
        /// What it does not keep.
        what: String,
    },
    /// A remote store (S3-compatible) failed or could not be reached.
    #[error("{store} store at {endpoint}: {action} {key}")]
    Remote {
        /// The backend (`s3`).
        store: &'static str,
        /// The endpoint and bucket.
        endpoint: String,
        /// What was being done.
        action: &'static str,
        /// The key or prefix involved.
        key: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Any other backend failure.
    #[error("{store} store at {location} failed")]
    Generic {
        /// The backend.
        store: &'static str,
        /// Where.
        location: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
