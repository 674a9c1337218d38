//! Ready-to-send replay answers kept in memory, keyed by cassette key, so a replay hit does not
//! parse and render its cassette document again.
//!
//! A cached answer is only ever served for the document it was rendered from: every hit reads
//! the cassette from the store as before and the cache compares the bytes it got with the
//! bytes the answer was made from. An edited, replaced or restored tape (even one of the same
//! size), or another key's tape copied over this one, differs, so it goes through the full
//! path again (parsing, the key check, rendering) and replaces the entry; a deleted tape is a
//! miss before the cache is asked. What the cache saves is everything after the read.
//!
//! Memory is bounded by a budget in bytes (documents plus rendered answers); the oldest
//! entries leave first. A budget of 0 turns the cache off.

use bytes::Bytes;
use cassette_keying::{Key, Streaming};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// What an entry costs besides its bytes (map slot, key, headers), so a budget holds even for
/// tiny answers.
const ENTRY_OVERHEAD: usize = 256;

/// A replay answer as sent: status, headers and the whole body.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: Arc<[(String, String)]>,
    pub(crate) body: Bytes,
}

impl Answer {
    fn size(&self) -> usize {
        self.body.len()
            + self
                .headers
                .iter()
                .map(|(n, v)| n.len() + v.len() + 48)
                .sum::<usize>()
    }
}

/// The cache's counters and size, reported with the recorder's stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct HitCacheStats {
    /// The memory budget in bytes (0: the cache is off).
    pub budget_bytes: u64,
    /// Bytes held now (documents, answers and per-entry overhead).
    pub bytes: u64,
    /// Cassettes held now.
    pub entries: u64,
    /// Hits answered from the cache.
    pub served: u64,
    /// Hits whose stored document had changed since it was cached, answered and cached anew.
    pub refreshed: u64,
    /// Entries dropped to stay within the budget.
    pub evicted: u64,
}

/// One cassette's document and the answers rendered from it, one per way of asking (a stream
/// or not, with usage or not).
struct Entry {
    document: Bytes,
    answers: Vec<(Streaming, Answer)>,
    size: usize,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    /// Insertion order, oldest first; may name keys already removed (skipped on eviction).
    order: VecDeque<Key>,
    bytes: usize,
    served: u64,
    refreshed: u64,
    evicted: u64,
}

/// The cache. Cheap to share behind the recorder's `Arc`.
pub(crate) struct HitCache {
    budget: usize,
    state: Mutex<State>,
}

impl HitCache {
    /// A cache holding at most `budget` bytes; 0 keeps nothing.
    pub(crate) fn new(budget: usize) -> HitCache {
        HitCache {
            budget,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state whole before anything can panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer rendered for `key` from exactly `document`, asked the way `streaming` says.
    /// An entry made from other bytes is dropped: the store's content has changed.
    pub(crate) fn get(&self, key: &Key, document: &[u8], streaming: Streaming) -> Option<Answer> {
        if self.budget == 0 {
            return None;
        }
        let mut state = self.state();
        let entry = state.entries.get(key)?;
        if entry.document != document {
            let stale = state.entries.remove(key).map_or(0, |e| e.size);
            state.bytes -= stale;
            state.refreshed += 1;
            return None;
        }
        let answer = entry
            .answers
            .iter()
            .find(|(asked, _)| *asked == streaming)
            .map(|(_, answer)| answer.clone())?;
        state.served += 1;
        Some(answer)
    }

    /// Keeps `answer`, rendered for `key` from `document` asked the way `streaming` says.
    /// Answers too large for the budget are not kept.
    pub(crate) fn put(&self, key: &Key, document: Bytes, streaming: Streaming, answer: Answer) {
        let added = answer.size();
        if self.budget == 0 || document.len() + added + ENTRY_OVERHEAD > self.budget / 4 {
            return;
        }
        let mut state = self.state();
        let same_document = state
            .entries
            .get(key)
            .is_some_and(|e| e.document == document);
        if same_document {
            let entry = state.entries.get_mut(key).expect("checked above");
            if entry.answers.iter().any(|(asked, _)| *asked == streaming) {
                return;
            }
            entry.answers.push((streaming, answer));
            entry.size += added;
            state.bytes += added;
        } else {
            let size = document.len() + added + ENTRY_OVERHEAD;
            let replaced = state.entries.insert(
                key.clone(),
                Entry {
                    document,
                    answers: vec![(streaming, answer)],
                    size,
                },
            );
            state.bytes = state.bytes - replaced.map_or(0, |e| e.size) + size;
            state.order.push_back(key.clone());
        }
        self.evict(&mut state, key);
    }

    /// Drops the oldest entries (never `keep`, the one just added) until the budget holds.
    fn evict(&self, state: &mut State, keep: &Key) {
        while state.bytes > self.budget {
            let Some(oldest) = state.order.pop_front() else {
                return;
            };
            if &oldest == keep {
                state.order.push_back(oldest);
                if state.order.len() == 1 {
                    return;
                }
                continue;
            }
            if let Some(entry) = state.entries.remove(&oldest) {
                state.bytes -= entry.size;
                state.evicted += 1;
            }
        }
        // Keys removed as stale linger in the order; keep the queue from growing without end.
        if state.order.len() > 2 * state.entries.len() + 64 {
            let entries = &state.entries;
            let mut seen = std::collections::HashSet::new();
            state
                .order
                .retain(|k| entries.contains_key(k) && seen.insert(k.clone()));
        }
    }

    /// The counters and size now.
    pub(crate) fn stats(&self) -> HitCacheStats {
        let state = self.state();
        HitCacheStats {
            budget_bytes: self.budget as u64,
            bytes: state.bytes as u64,
            entries: state.entries.len() as u64,
            served: state.served,
            refreshed: state.refreshed,
            evicted: state.evicted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> Key {
        Key::parse(&format!("{n:02x}").repeat(32)).unwrap()
    }

    fn answer(body: &str) -> Answer {
        Answer {
            status: 200,
            headers: Arc::from(vec![(
                "content-type".to_owned(),
                "application/json".to_owned(),
            )]),
            body: Bytes::from(body.to_owned()),
        }
    }

    const PLAIN: Streaming = Streaming {
        wanted: false,
        include_usage: false,
    };
    const STREAM: Streaming = Streaming {
        wanted: true,
        include_usage: false,
    };

    #[test]
    fn an_answer_is_served_only_for_the_document_it_was_made_from() {
        let cache = HitCache::new(1 << 20);
        let doc = Bytes::from_static(b"{\"answer\":\"one\"}");
        cache.put(&key(1), doc.clone(), PLAIN, answer("one"));
        assert_eq!(cache.get(&key(1), &doc, PLAIN).unwrap().body, "one");
        // Same size, other content: not served, and the entry is gone.
        assert!(cache.get(&key(1), b"{\"answer\":\"two\"}", PLAIN).is_none());
        assert!(cache.get(&key(1), &doc, PLAIN).is_none());
        let stats = cache.stats();
        assert_eq!((stats.served, stats.refreshed, stats.entries), (1, 1, 0));
        assert_eq!(stats.bytes, 0);
    }

    #[test]
    fn each_way_of_asking_has_its_own_answer() {
        let cache = HitCache::new(1 << 20);
        let doc = Bytes::from_static(b"doc");
        cache.put(&key(1), doc.clone(), PLAIN, answer("json"));
        assert!(cache.get(&key(1), &doc, STREAM).is_none());
        cache.put(&key(1), doc.clone(), STREAM, answer("sse"));
        assert_eq!(cache.get(&key(1), &doc, STREAM).unwrap().body, "sse");
        assert_eq!(cache.get(&key(1), &doc, PLAIN).unwrap().body, "json");
        assert!(cache.get(&key(2), &doc, PLAIN).is_none(), "another key");
        // A new document for the key replaces both answers.
        cache.put(&key(1), Bytes::from_static(b"new"), PLAIN, answer("new"));
        assert!(cache.get(&key(1), b"new", STREAM).is_none());
        assert_eq!(cache.get(&key(1), b"new", PLAIN).unwrap().body, "new");
    }

    #[test]
    fn the_budget_holds_and_the_oldest_leave_first() {
        let budget = 16 * (ENTRY_OVERHEAD + 200);
        let cache = HitCache::new(budget);
        for n in 0..100u8 {
            let doc = Bytes::from(vec![n; 100]);
            cache.put(&key(n), doc, PLAIN, answer(&"x".repeat(40)));
            assert!(cache.stats().bytes as usize <= budget);
        }
        let stats = cache.stats();
        assert!(stats.entries > 4 && stats.entries < 100, "{stats:?}");
        assert_eq!(stats.evicted + stats.entries, 100);
        assert!(
            cache.get(&key(0), &[0; 100], PLAIN).is_none(),
            "oldest evicted"
        );
        assert!(
            cache.get(&key(99), &[99; 100], PLAIN).is_some(),
            "newest kept"
        );
        // An answer too large for the budget is not kept at all.
        cache.put(
            &key(200),
            Bytes::from(vec![1; budget]),
            PLAIN,
            answer("big"),
        );
        assert!(cache.get(&key(200), &vec![1; budget], PLAIN).is_none());
    }

    #[test]
    fn a_zero_budget_keeps_nothing() {
        let cache = HitCache::new(0);
        cache.put(&key(1), Bytes::from_static(b"d"), PLAIN, answer("a"));
        assert!(cache.get(&key(1), b"d", PLAIN).is_none());
        assert_eq!(cache.stats(), HitCacheStats::default());
    }
}
