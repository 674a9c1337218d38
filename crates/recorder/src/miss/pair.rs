//! Pairing a re-record: after a prompt edit the new recording has a new key, so two sets of
//! cassettes (before and after) each hold recordings the other lacks. Each new one is paired
//! with the old one a replay miss of its request would name as the nearest recording (the
//! index's rule: same target, path and profile, ranked by leaves, the best few diffed exactly),
//! one to one, when it is near enough.

use super::index::NearestIndex;
use cassette_keying::{diff, Difference, Key, KeyConfig};
use cassette_store::memory::MemoryStore;
use cassette_store::{DynStore, StoreExt};
use cassette_tape::Cassette;
use std::collections::HashSet;
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
