//! The distinct misses a recorder has seen, bounded, for the report at the end of a run
//! (`cassette exec` lists each missed key with its one-line explanation).

use cassette_keying::Key;
use serde::Serialize;
use std::collections::HashMap;

/// Distinct misses kept with their explanation; later ones are only counted.
const KEPT_NOTES: usize = 100;

/// Distinct keys remembered for counting; past this, [`MissLog::distinct`] is a lower bound
/// (a client sending millions of different requests must not grow the recorder without end).
const TRACKED_KEYS: usize = 100_000;

/// One distinct missed key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissNote {
    /// The key that missed.
    pub key: Key,
    /// The request, in a few words (`POST /v1/chat/completions (target default, model m)`, or
    /// an MCP method and tool).
    pub request: String,
    /// The explanation's one-line summary.
    pub summary: String,
    /// How many requests missed with this key.
    pub count: u64,
}

/// The distinct misses so far: the first ones with their explanations, and how many there were.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MissLog {
    /// The first distinct misses, in the order they happened.
    pub notes: Vec<MissNote>,
    /// Distinct keys that missed (at least this many once more than 100,000 were seen).
    pub distinct: u64,
    /// Requests that missed, repeats included.
    pub total: u64,
}

/// The recorder's book of misses, behind its mutex.
#[derive(Debug, Default)]
pub(crate) struct MissBook {
    log: MissLog,
    /// Every tracked key, with its note's index when it has one.
    seen: HashMap<Key, Option<usize>>,
}

impl MissBook {
    /// Notes a miss of `key`.
    pub(crate) fn note(&mut self, key: &Key, request: impl FnOnce() -> String, summary: &str) {
        self.log.total += 1;
        if let Some(seen) = self.seen.get(key) {
            if let Some(note) = seen.and_then(|i| self.log.notes.get_mut(i)) {
                note.count += 1;
            }
            return;
        }
        self.log.distinct += 1;
        if self.seen.len() >= TRACKED_KEYS {
            return;
        }
        let index = (self.log.notes.len() < KEPT_NOTES).then(|| {
            self.log.notes.push(MissNote {
                key: key.clone(),
                request: request(),
                summary: summary.to_owned(),
                count: 1,
            });
            self.log.notes.len() - 1
        });
        self.seen.insert(key.clone(), index);
    }

    /// What was noted so far.
    pub(crate) fn log(&self) -> MissLog {
        self.log.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32) -> Key {
        Key::parse(&format!("{n:064x}")).expect("64 hex characters")
    }

    #[test]
    fn repeats_are_counted_once_and_notes_are_bounded() {
        let mut book = MissBook::default();
        for n in 0..150 {
            book.note(&key(n), || format!("request {n}"), "why");
        }
        book.note(&key(3), || unreachable!("a repeat builds no note"), "why");
        book.note(&key(120), || unreachable!("a repeat builds no note"), "why");
        let log = book.log();
        assert_eq!((log.distinct, log.total), (150, 152));
        assert_eq!(log.notes.len(), KEPT_NOTES);
        assert_eq!(log.notes[3].count, 2);
        assert_eq!(log.notes[3].request, "request 3");
        assert!(log.notes.iter().all(|n| n.key != key(120)));
    }
}
