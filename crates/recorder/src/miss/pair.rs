//! Pairing a re-record: after a prompt edit the new recording has a new key, so two sets of
//! cassettes (before and after) each hold recordings the other lacks. Each new one is paired
//! with the old one a replay miss of its request would name as the nearest recording (the
//! index's rule: same target, path and profile, ranked by leaves, the best few diffed exactly),
//! one to one, when it is near enough.
//!
//! A re-record usually writes its new keys beside the old ones, so the recording a new one
//! replaces may still be in the new set too: [`replaced`] looks for it among every old
//! recording, a recording of the same test (its metadata's `test`) first, and says which.

use super::index::NearestIndex;
use cassette_keying::{diff, Difference, Key, KeyConfig};
use cassette_review::PairedBy;
use cassette_store::memory::MemoryStore;
use cassette_store::{DynStore, StoreExt};
use cassette_tape::Cassette;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// Rounds of pairing: new recordings whose nearest old one was taken by a nearer new one look
/// again among the rest, at most this many times (then they stay unpaired), so a crowd of
/// unrelated recordings all nearest to one old one cannot make pairing quadratic in rounds.
const ROUNDS: usize = 16;

/// A recording of the old set and its nearest recording in the new set.
#[derive(Debug, Clone, PartialEq)]
pub struct Paired {
    /// The old recording's key.
    pub old: Key,
    /// The new recording's key.
    pub new: Key,
    /// How far apart their requests are, as a miss weighs it: each difference counts 1, a
    /// changed string only the share of its characters that changed.
    pub distance: f64,
    /// What differs, old value first, in keying's terms ([`request_differences`]).
    pub differences: Vec<Difference>,
}

/// Pairs each of `new` with the nearest of `old` by the nearest-recording rule, one to one:
/// when two new recordings are nearest to the same old one, the nearer one gets it and the
/// other looks again. Pairs whose distance is over `within` are not made. Keyed under `config`.
/// Pairs come out in the order of `new`.
pub async fn pair(
    old: &[Cassette],
    new: &[Cassette],
    config: &KeyConfig,
    within: f64,
) -> Vec<Paired> {
    if old.is_empty() || new.is_empty() {
        return Vec::new();
    }
    // The old recordings not yet paired, as a store the index reads: a pairing deletes its old
    // recording, and the index forgets what its store no longer lists.
    //
    // Their bytes do not go through the seal, and need not: this store is scratch memory of
    // this call, read only by the index here and dropped when it returns; nothing in it is ever
    // stored, shown or copied (what `diff` shows comes from the cassettes themselves, already
    // read from the user's stores).
    let store: DynStore = Arc::new(MemoryStore::new());
    for cassette in old {
        let document = serde_json::to_vec(cassette).unwrap_or_default();
        // A memory store cannot fail.
        let _ = store.put(&cassette.key, document.into()).await;
    }
    let mut index = NearestIndex::default();
    let mut waiting: Vec<usize> = (0..new.len()).collect();
    let mut found: Vec<(usize, Key, f64)> = Vec::new();
    for _ in 0..ROUNDS {
        let mut proposals = Vec::new();
        for &i in &waiting {
            if let Some((key, d, _)) = index.nearest_to(&store, config, &new[i]).await {
                if d <= within {
                    proposals.push((d, i, key));
                }
            }
        }
        if proposals.is_empty() {
            break;
        }
        proposals.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut taken: HashSet<Key> = HashSet::new();
        let mut again = Vec::new();
        for (d, i, key) in proposals {
            if taken.insert(key.clone()) {
                let _ = store.delete(&key).await;
                found.push((i, key, d));
            } else {
                again.push(i);
            }
        }
        waiting = again;
        if waiting.is_empty() {
            break;
        }
    }
    found.sort_by_key(|(i, _, _)| *i);
    found
        .into_iter()
        .filter_map(|(i, old_key, d)| {
            let before = old.iter().find(|c| c.key == old_key)?;
            let after = &new[i];
            Some(Paired {
                old: old_key,
                new: after.key.clone(),
                distance: d,
                differences: request_differences(before, after, config),
            })
        })
        .collect()
}

/// What differs between the requests two cassettes stored, keyed under `config`, old value
/// first. The system prompt's hash is left out: the key holds it beside the body it is taken
/// from, so a changed system prompt shows (as text) in the body's own difference.
pub fn request_differences(old: &Cassette, new: &Cassette, config: &KeyConfig) -> Vec<Difference> {
    let before = old.keyed_request(config).material;
    let after = new.keyed_request(config).material;
    diff(&before, &after)
        .into_iter()
        .filter(|d| d.path != "system_sha256")
        .collect()
}

/// A re-record paired with the recording it replaces, and what matched them.
#[derive(Debug, Clone, PartialEq)]
pub struct Replacement {
    /// The two keys, how far apart and what differs.
    pub paired: Paired,
    /// Same test, or nearest request.
    pub by: PairedBy,
}

/// Pairs each of `new` (recordings the old set lacks) with the recording of `old` it replaces,
/// one to one. `kept` names the old recordings the new set still holds: they are taken only
/// after the ones it no longer holds, since a re-record that deleted its old tapes is the
/// plainer evidence. In that order, at each stage:
///
/// 1. a recording of the same test (`meta.test`), at the same route, path and profile, nearest
///    first: one the new set no longer holds at any distance, one it still holds within
///    `within`;
/// 2. the nearest request within `within`, unless both name a test and the tests differ (two
///    tests' recordings are never one re-record).
///
/// Pairs come out in the order of `new`.
pub async fn replaced(
    old: &[Cassette],
    kept: &HashSet<Key>,
    new: &[Cassette],
    config: &KeyConfig,
    within: f64,
) -> Vec<Replacement> {
    let mut taken_old: HashSet<Key> = HashSet::new();
    let mut done_new: HashSet<Key> = HashSet::new();
    let mut found: Vec<Replacement> = Vec::new();
    for (stage, by) in [
        (Stage::Gone, PairedBy::SameTest),
        (Stage::Kept, PairedBy::SameTest),
        (Stage::Gone, PairedBy::Nearest),
        (Stage::Kept, PairedBy::Nearest),
    ] {
        let limit = match (stage, by) {
            (Stage::Gone, PairedBy::SameTest) => f64::INFINITY,
            _ => within,
        };
        let olds: Vec<&Cassette> = old
            .iter()
            .filter(|c| !taken_old.contains(&c.key))
            .filter(|c| kept.contains(&c.key) == (stage == Stage::Kept))
            .collect();
        let news: Vec<&Cassette> = new.iter().filter(|c| !done_new.contains(&c.key)).collect();
        for (olds, news) in groups(by, &olds, &news) {
            // Groups of one stage may share old recordings: one an earlier group took is gone.
            let olds: Vec<Cassette> = olds
                .into_iter()
                .filter(|c| !taken_old.contains(&c.key))
                .cloned()
                .collect();
            let news: Vec<Cassette> = news.into_iter().cloned().collect();
            for paired in pair(&olds, &news, config, limit).await {
                taken_old.insert(paired.old.clone());
                done_new.insert(paired.new.clone());
                found.push(Replacement { paired, by });
            }
        }
    }
    let order: BTreeMap<&Key, usize> = new.iter().enumerate().map(|(i, c)| (&c.key, i)).collect();
    found.sort_by_key(|r| order.get(&r.paired.new).copied().unwrap_or(usize::MAX));
    found
}

/// Which old recordings a stage looks among.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The ones the new set no longer holds.
    Gone,
    /// The ones it still holds.
    Kept,
}

/// The groups pairing runs in, old and new side: by test, one group per test both sides name;
/// by nearest request, the new recordings naming no test with every old one, and those naming
/// one with the old ones naming none.
fn groups<'a>(
    by: PairedBy,
    old: &[&'a Cassette],
    new: &[&'a Cassette],
) -> Vec<(Vec<&'a Cassette>, Vec<&'a Cassette>)> {
    let test = |c: &&Cassette| c.meta.test.clone();
    match by {
        PairedBy::SameTest => {
            let mut tests: BTreeMap<String, (Vec<&Cassette>, Vec<&Cassette>)> = BTreeMap::new();
            for c in new {
                if let Some(t) = test(c) {
                    tests.entry(t).or_default().1.push(c);
                }
            }
            for c in old {
                if let Some(group) = test(c).and_then(|t| tests.get_mut(&t)) {
                    group.0.push(c);
                }
            }
            tests.into_values().filter(|(o, _)| !o.is_empty()).collect()
        }
        PairedBy::Nearest => {
            let untested: Vec<&Cassette> =
                old.iter().copied().filter(|c| test(c).is_none()).collect();
            let (named, unnamed): (Vec<&Cassette>, Vec<&Cassette>) =
                new.iter().copied().partition(|c| test(c).is_some());
            vec![(old.to_vec(), unnamed), (untested, named)]
        }
    }
}
