//! Single flight: identical requests (one key) in flight at once in one recorder share one
//! upstream call. The first leads and records; the others wait for it to land and then answer
//! from what was stored, so every one of them gets the stored answer. When the leader stored
//! nothing (an error answer, a failure, a client that went away), each waiter asks the upstream
//! itself.

use cassette_keying::Key;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// How a flight ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Landed {
    /// The store holds an answer for the key (this flight's, or another recorder's that won a
    /// create-only write).
    Stored,
    /// Nothing was stored.
    NotStored,
}

/// `None` while the flight is in the air.
type Signal = watch::Receiver<Option<Landed>>;

/// The flights in the air, by key.
#[derive(Debug, Default)]
pub(super) struct Flights {
    in_air: Mutex<HashMap<Key, (u64, Signal)>>,
    next_id: AtomicU64,
}

/// Whether a request leads a flight or waits for one.
pub(super) enum Turn {
    Lead(Flight),
    Follow(Wait),
}

impl Flights {
    /// Leads a new flight for `key`, or follows the one in the air.
    pub(super) fn join(self: &Arc<Self>, key: &Key) -> Turn {
        let mut in_air = self.in_air.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, signal)) = in_air.get(key) {
            return Turn::Follow(Wait(signal.clone()));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = watch::channel(None);
        in_air.insert(key.clone(), (id, rx));
        Turn::Lead(Flight {
            flights: Arc::clone(self),
            key: key.clone(),
            id,
            tx,
        })
    }

    fn land(&self, key: &Key, id: u64) {
        let mut in_air = self.in_air.lock().unwrap_or_else(|p| p.into_inner());
        if in_air
            .get(key)
            .is_some_and(|(in_air_id, _)| *in_air_id == id)
        {
            in_air.remove(key);
        }
    }
}

/// A flight being led. Dropping it (on any path: an error, a client gone) lands it as
/// [`Landed::NotStored`] unless [`Flight::land`] said otherwise first.
pub(super) struct Flight {
    flights: Arc<Flights>,
    key: Key,
    id: u64,
    tx: watch::Sender<Option<Landed>>,
}

impl Flight {
    /// Tells the waiters how the flight ended.
    pub(super) fn land(self, landed: Landed) {
        self.tx.send_replace(Some(landed));
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        // Out of the map first, so a waiter that wakes and finds nothing stored does not join
        // this finished flight again; then the sender goes, which wakes every waiter.
        self.flights.land(&self.key, self.id);
        self.tx.send_if_modified(|landed| {
            if landed.is_none() {
                *landed = Some(Landed::NotStored);
                true
            } else {
                false
            }
        });
    }
}

/// Waiting for a flight led by another request.
pub(super) struct Wait(Signal);

impl Wait {
    /// How the flight ended.
    pub(super) async fn landed(mut self) -> Landed {
        match self.0.wait_for(Option::is_some).await {
            Ok(landed) => landed.unwrap_or(Landed::NotStored),
            Err(_) => Landed::NotStored,
        }
    }
}
