//! The proxy's journal: one entry per request it answered (key, route, outcome, and for a miss
//! the explanation), kept when asked for ([`Journal::Keep`]), so a run through `cassette exec`
//! leaves a machine-readable record of every request, not only counters and distinct misses.
//! Bounded: past [`KEPT_ENTRIES`] requests are only counted.

use crate::miss::Explanation;
use crate::response::Source;
use cassette_keying::Key;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Entries kept; later requests are counted in [`JournalLog::dropped`].
pub const KEPT_ENTRIES: usize = 100_000;

/// Whether the proxy keeps a journal of the requests it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Journal {
    /// Counters and distinct misses only (the default: a long-running proxy keeps no list that
    /// grows with its traffic).
    #[default]
    Off,
    /// One entry per request, up to [`KEPT_ENTRIES`].
    Keep,
}

/// What became of one request: where its answer came from ([`Source`], spelled as it is), or
/// that it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answered {
    /// Replayed from a cassette.
    Replayed,
    /// Answered by the upstream and stored.
    Recorded,
    /// A stream answered by the upstream and stored as it was relayed (whether it was stored
    /// is known only at its end: the recorder's recording failures name the keys that were not).
    Recording,
    /// Answered by the upstream, not stored (mode `off`, an error answer, a create-only write
    /// another recorder won).
    PassedThrough,
    /// No recording in replay: answered with the miss status (or, on an MCP route, a JSON-RPC
    /// error).
    Missed,
    /// Refused or failed before an answer (body too large, an upstream that could not be
    /// reached, a damaged cassette...).
    Failed,
}

impl Answered {
    /// The outcome as written in reports: a source as [`Source::as_str`] spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Answered::Replayed => Source::Replayed.as_str(),
            Answered::Recorded => Source::Recorded.as_str(),
            Answered::Recording => Source::Recording.as_str(),
            Answered::PassedThrough => Source::PassedThrough.as_str(),
            Answered::Missed => Source::Missed.as_str(),
            Answered::Failed => "failed",
        }
    }
}

impl From<Source> for Answered {
    fn from(source: Source) -> Answered {
        match source {
            Source::Replayed => Answered::Replayed,
            Source::Recorded => Answered::Recorded,
            Source::Recording => Answered::Recording,
            Source::PassedThrough => Answered::PassedThrough,
            Source::Missed => Answered::Missed,
        }
    }
}

/// One request the proxy answered. Everything in it has been through the recorder's redaction.
#[derive(Debug, Clone, Serialize)]
pub struct JournalEntry {
    /// The request's key; `None` when it was refused before it was keyed.
    pub key: Option<Key>,
    /// The route (key target).
    pub route: String,
    /// HTTP method.
    pub method: String,
    /// The path, as the route's upstream sees it.
    pub path: String,
    /// What became of it.
    pub outcome: Answered,
    /// The status the client got.
    pub status: u16,
    /// For a miss: the nearest recording and what differs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<Explanation>,
    /// For a failure: the error, with its causes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The journal so far.
#[derive(Debug, Clone, Default, Serialize)]
pub struct JournalLog {
    /// The entries, in the order the requests were answered.
    pub entries: Vec<JournalEntry>,
    /// Requests answered after [`KEPT_ENTRIES`] were kept, only counted.
    pub dropped: u64,
}

/// The journal behind the proxy's state.
#[derive(Debug, Default)]
pub(super) struct Book {
    keep: Journal,
    entries: Mutex<Vec<JournalEntry>>,
    dropped: AtomicU64,
}

impl Book {
    pub(super) fn new(keep: Journal) -> Book {
        Book {
            keep,
            ..Book::default()
        }
    }

    /// Whether entries are kept at all (so callers can skip building one).
    pub(super) fn keeps(&self) -> bool {
        self.keep == Journal::Keep
    }

    pub(super) fn note(&self, entry: JournalEntry) {
        if !self.keeps() {
            return;
        }
        // Every update is one push that cannot panic half-way; a poisoned lock is still whole.
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() < KEPT_ENTRIES {
            entries.push(entry);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn log(&self) -> JournalLog {
        JournalLog {
            entries: self
                .entries
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_is_spelled_as_its_source_in_text_and_json() {
        let sources = [
            Source::Replayed,
            Source::Recorded,
            Source::Recording,
            Source::PassedThrough,
            Source::Missed,
        ];
        for source in sources {
            let answered = Answered::from(source);
            assert_eq!(answered.as_str(), source.as_str());
            let json = serde_json::to_value(answered).unwrap();
            assert_eq!(json, source.as_str());
            assert_eq!(serde_json::to_value(source).unwrap(), source.as_str());
        }
        assert_eq!(Source::PassedThrough.as_str(), "passed-through");
        assert_eq!(serde_json::to_value(Answered::Failed).unwrap(), "failed");
    }
}
