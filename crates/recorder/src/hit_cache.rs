//! Ready-to-send replay answers kept in memory, keyed by cassette key, so a replay hit does not
//! parse and render its cassette document again.
//!
//! A cached answer is only ever served for the document it was rendered from: every hit reads
//! the cassette from the store as before, and the cache compares a 128-bit hash of the bytes
//! it got (and their length) with those of the bytes the answer was made from. An edited,
//! replaced or restored tape (even one of the same size), or another key's tape copied over
//! this one, differs, so it goes through the full path again (parsing, the key check,
//! rendering) and replaces the entry; a deleted tape is a miss before the cache is asked. What
//! the cache saves is everything after the read but one hash of the document.
//!
//! Memory is bounded by a budget in bytes (rendered answers plus a fixed cost per entry; the
//! documents themselves are not kept). When it is full, only one new answer in
//! [`ADMIT_WHEN_FULL`] is kept, in place of random entries not served since they were last
//! looked at: a load that cycles through more cassettes than fit keeps hitting the ones that
//! stay (oldest-first would evict each one just before it is asked again), and a load that
//! moves on still replaces what it no longer asks for. A budget of 0 turns the cache off.

use bytes::Bytes;
use cassette_keying::{Key, Streaming};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// What an entry costs besides its answers (map slot, key, fingerprint), so a budget holds
/// even for tiny answers.
const ENTRY_OVERHEAD: usize = 256;

/// When the cache is full, one new answer in this many is kept (picked at random).
const ADMIT_WHEN_FULL: u64 = 8;

/// Random entries looked at for one not served since, before one is evicted anyway.
const EVICTION_TRIES: usize = 4;

/// What identifies a stored document's content: its length and XXH3-128 hash.
///
/// XXH3 rather than SHA-256 because it runs at memory speed (0.4 µs for a 10 KB cassette
/// against 5.8 µs, which was the largest single cost of a replay hit of a realistic request).
/// It is not built to resist a forged collision, and need not be: the fingerprint only guards
/// against serving an answer for a document that changed by accident or by hand (an edit, a
/// restore, another key's tape copied over), and anyone able to store a crafted document under
/// this key could store any answer they liked there anyway. For accidents, 128 bits make a
/// collision out of the question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    len: usize,
    xxh3: u128,
}

impl Fingerprint {
    /// The fingerprint of `document`.
    pub(crate) fn of(document: &[u8]) -> Fingerprint {
        Fingerprint {
            len: document.len(),
            xxh3: xxhash_rust::xxh3::xxh3_128(document),
        }
    }
}

/// A replay answer as sent: status, headers and the whole body.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: Arc<[(String, String)]>,
    pub(crate) body: Bytes,
    /// The test that recorded it (`meta.test`): a request of another test looks for its own
    /// test-scoped recording first.
    pub(crate) test: Option<Arc<str>>,
    /// The upstream it was recorded from (`upstream`): a route that now points at another
    /// origin does not replay it.
    pub(crate) upstream: Arc<str>,
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

/// How a request asked for its answer, beyond its key: a stream or not, with usage or not,
/// and its query string (which can choose a stream's format, as Gemini's `alt=sse` does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Asked {
    pub(crate) streaming: Streaming,
    pub(crate) query: String,
}

/// The answers rendered from one cassette document, one per way of asking.
struct Entry {
    document: Fingerprint,
    answers: Vec<(Asked, Answer)>,
    size: usize,
    /// Served since it was cached or last looked at for eviction.
    served: bool,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    /// The keys that may be evicted; may name keys already removed (skipped on eviction).
    keys: Vec<Key>,
    bytes: usize,
    served: u64,
    refreshed: u64,
    evicted: u64,
    /// xorshift state for picking the entry to evict.
    random: u64,
}

impl State {
    fn next_random(&mut self) -> u64 {
        // xorshift64: eviction needs spread, not secrecy.
        let mut x = if self.random == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            self.random
        };
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.random = x;
        x
    }
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

    /// Whether the cache keeps anything at all.
    pub(crate) fn is_on(&self) -> bool {
        self.budget > 0
    }

    /// The answer rendered for `key` from exactly the document `fingerprint` identifies, asked
    /// as `asked` says. An entry made from other bytes is dropped: the store's content has
    /// changed.
    pub(crate) fn get(&self, key: &Key, document: &Fingerprint, asked: &Asked) -> Option<Answer> {
        if self.budget == 0 {
            return None;
        }
        let mut state = self.state();
        let entry = state.entries.get_mut(key)?;
        if entry.document != *document {
            let stale = state.entries.remove(key).map_or(0, |e| e.size);
            state.bytes -= stale;
            state.refreshed += 1;
            return None;
        }
        let answer = entry
            .answers
            .iter()
            .find(|(how, _)| how == asked)
            .map(|(_, answer)| answer.clone())?;
        entry.served = true;
        state.served += 1;
        Some(answer)
    }

    /// Keeps `answer`, rendered for `key` from `document` asked as `asked` says. Answers too
    /// large for the budget are not kept.
    pub(crate) fn put(&self, key: &Key, document: Fingerprint, asked: Asked, answer: Answer) {
        let added = answer.size() + asked.query.len();
        if self.budget == 0 || added + ENTRY_OVERHEAD > self.budget / 4 {
            return;
        }
        let mut state = self.state();
        let same_document = state
            .entries
            .get(key)
            .is_some_and(|e| e.document == document);
        if same_document {
            let entry = state.entries.get_mut(key).expect("checked above");
            if entry.answers.iter().any(|(how, _)| *how == asked) {
                return;
            }
            entry.answers.push((asked, answer));
            entry.size += added;
            state.bytes += added;
        } else {
            let size = added + ENTRY_OVERHEAD;
            let full = state.bytes + size > self.budget;
            if full
                && !state.entries.contains_key(key)
                && !state.next_random().is_multiple_of(ADMIT_WHEN_FULL)
            {
                return;
            }
            let replaced = state.entries.insert(
                key.clone(),
                Entry {
                    document,
                    answers: vec![(asked, answer)],
                    size,
                    served: false,
                },
            );
            state.bytes = state.bytes - replaced.map_or(0, |e| e.size) + size;
            state.keys.push(key.clone());
        }
        self.evict(&mut state, key);
    }

    /// Drops random entries (never `keep`, the one just added), preferring ones not served
    /// since they were last looked at, until the budget holds.
    fn evict(&self, state: &mut State, keep: &Key) {
        while state.bytes > self.budget && state.entries.len() > 1 {
            let mut at = 0;
            for _ in 0..EVICTION_TRIES {
                at = state.next_random() as usize % state.keys.len();
                let Some(entry) = state.entries.get_mut(&state.keys[at]) else {
                    break; // a key left behind by a stale entry: drop it
                };
                if &state.keys[at] != keep && !std::mem::take(&mut entry.served) {
                    break;
                }
            }
            if &state.keys[at] == keep {
                continue;
            }
            let victim = state.keys.swap_remove(at);
            if let Some(entry) = state.entries.remove(&victim) {
                state.bytes -= entry.size;
                state.evicted += 1;
            }
        }
        // Keys of entries dropped as stale linger in the list; keep it from growing without end.
        if state.keys.len() > 2 * state.entries.len() + 64 {
            let entries = &state.entries;
            let mut seen = HashSet::new();
            state
                .keys
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
            test: None,
            upstream: Arc::from("https://api.openai.com"),
            status: 200,
            headers: Arc::from(vec![(
                "content-type".to_owned(),
                "application/json".to_owned(),
            )]),
            body: Bytes::from(body.to_owned()),
        }
    }

    fn doc(bytes: &[u8]) -> Fingerprint {
        Fingerprint::of(bytes)
    }

    fn asked(wanted: bool, query: &str) -> Asked {
        Asked {
            streaming: Streaming {
                wanted,
                include_usage: false,
            },
            query: query.to_owned(),
        }
    }

    #[test]
    fn an_answer_is_served_only_for_the_document_it_was_made_from() {
        let cache = HitCache::new(1 << 20);
        let one = doc(b"{\"answer\":\"one\"}");
        cache.put(&key(1), one, asked(false, ""), answer("one"));
        assert_eq!(
            cache.get(&key(1), &one, &asked(false, "")).unwrap().body,
            "one"
        );
        // Same size, other content: not served, and the entry is gone.
        let two = doc(b"{\"answer\":\"two\"}");
        assert!(cache.get(&key(1), &two, &asked(false, "")).is_none());
        assert!(cache.get(&key(1), &one, &asked(false, "")).is_none());
        let stats = cache.stats();
        assert_eq!((stats.served, stats.refreshed, stats.entries), (1, 1, 0));
        assert_eq!(stats.bytes, 0);
    }

    #[test]
    fn each_way_of_asking_has_its_own_answer() {
        let cache = HitCache::new(1 << 20);
        let old = doc(b"doc");
        cache.put(&key(1), old, asked(false, ""), answer("json"));
        assert!(cache.get(&key(1), &old, &asked(true, "")).is_none());
        cache.put(&key(1), old, asked(true, ""), answer("sse"));
        assert_eq!(
            cache.get(&key(1), &old, &asked(true, "")).unwrap().body,
            "sse"
        );
        assert_eq!(
            cache.get(&key(1), &old, &asked(false, "")).unwrap().body,
            "json"
        );
        assert!(
            cache.get(&key(1), &old, &asked(true, "alt=sse")).is_none(),
            "another query"
        );
        assert!(
            cache.get(&key(2), &old, &asked(false, "")).is_none(),
            "another key"
        );
        // A new document for the key replaces both answers.
        let new = doc(b"new");
        cache.put(&key(1), new, asked(false, ""), answer("new"));
        assert!(cache.get(&key(1), &new, &asked(true, "")).is_none());
        assert_eq!(
            cache.get(&key(1), &new, &asked(false, "")).unwrap().body,
            "new"
        );
    }

    #[test]
    fn the_budget_holds_and_a_cycling_load_still_hits() {
        let budget = 16 * (ENTRY_OVERHEAD + 200);
        let cache = HitCache::new(budget);
        let body = "x".repeat(80);
        // Three rounds over 64 cassettes, four times what fits: oldest-first eviction would
        // never hit, nor would replacing a random entry on every miss, much.
        let mut hits = 0;
        for _ in 0..3 {
            for n in 0..64u8 {
                let fingerprint = doc(&[n; 100]);
                if cache
                    .get(&key(n), &fingerprint, &asked(false, ""))
                    .is_some()
                {
                    hits += 1;
                    continue;
                }
                cache.put(&key(n), fingerprint, asked(false, ""), answer(&body));
                assert!(cache.stats().bytes as usize <= budget);
            }
        }
        let stats = cache.stats();
        assert!(stats.entries > 4 && stats.entries < 64, "{stats:?}");
        assert!(hits > 20, "{hits} hits, {stats:?}");
        assert!(stats.evicted > 0, "{stats:?}");
        // An answer too large for the budget is not kept at all.
        let big = doc(b"big");
        cache.put(
            &key(200),
            big,
            asked(false, ""),
            answer(&"y".repeat(budget)),
        );
        assert!(cache.get(&key(200), &big, &asked(false, "")).is_none());
    }

    #[test]
    fn a_zero_budget_keeps_nothing() {
        let cache = HitCache::new(0);
        let d = doc(b"d");
        cache.put(&key(1), d, asked(false, ""), answer("a"));
        assert!(cache.get(&key(1), &d, &asked(false, "")).is_none());
        assert_eq!(cache.stats(), HitCacheStats::default());
    }
}
