//! Re-keying: a stored cassette written again under the key that today's contract and keying
//! settings give its stored request (after a change to `ignore` or `volatile`, or a key
//! version upgrade), through the one write path, so a settings change re-keys recordings
//! instead of orphaning them. A cassette whose stored request cannot give back its own key
//! (redaction replaced keyed material, or it was edited) is never moved: it would be filed
//! under a key no client sends.

use super::write::Stamp;
use super::Recorder;
use crate::error::Result;
use crate::mode::Write;
use crate::Stored;
use cassette_keying::{Key, KEY_VERSION};
use cassette_tape::{Cassette, KeySettings};

/// What re-keying one cassette did (or, for [`Write::Nothing`], would do).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Rekeyed {
    /// Its key is today's already (its recorded keying settings are brought up to date).
    Unchanged,
    /// Written under its new key.
    Moved,
    /// The new key already held the same answer.
    Same,
    /// The new key already holds another answer (another cassette that keys to it now); it is
    /// kept, and this cassette stays under its old key.
    Collision {
        /// The other cassette's test, when known.
        test: Option<String>,
        /// The other cassette's source (an imported one) or tool.
        source: String,
    },
    /// The stored request cannot give back the cassette's key: not moved.
    Unrecoverable {
        /// Why.
        reason: String,
    },
}

impl Recorder {
    /// Re-keys `cassette` (stored under `cassette.key`) as `write` says: [`Write::CreateOnly`]
    /// writes it under its new key, keeping what is there; [`Write::Nothing`] only says what
    /// would happen. The old document is left for the caller to remove. Returns the new key.
    pub async fn rekey(&self, mut cassette: Cassette, write: Write) -> Result<(Key, Rekeyed)> {
        let old = cassette.key.clone();
        if cassette.meta.request_redacted {
            let reason = "redaction replaced keyed material in its stored request, so the request \
                          cannot give back its key"
                .to_owned();
            return Ok((old, Rekeyed::Unrecoverable { reason }));
        }
        // Under the settings it records, the stored request must key to its key: else the
        // request is not the one that was keyed, and a new key computed from it is no key a
        // client sends. Only the current key version can be recomputed.
        if cassette.key_version == KEY_VERSION {
            if let Some(Ok(recorded)) = cassette.key_settings.as_ref().map(KeySettings::key_config)
            {
                let again = cassette.keyed_request(&recorded).key;
                if again != old {
                    let reason = format!(
                        "its stored request keys to {again} under the settings it records, not to \
                         its key: the request was edited or redacted after it was keyed"
                    );
                    return Ok((old, Rekeyed::Unrecoverable { reason }));
                }
            }
        }
        let config = &self.inner.config.key;
        let keyed = cassette.keyed_request(config);
        let settings = KeySettings::of(config);
        let new = keyed.key.clone();
        if new == old {
            let current = cassette.key_version == KEY_VERSION
                && cassette.key_settings.as_ref() == Some(&settings);
            if !current && write != Write::Nothing {
                cassette.key_version = KEY_VERSION;
                cassette.key_settings = Some(settings);
                let stamp = stamp_of(&cassette);
                self.write(cassette, stamp, Write::Overwrite, None).await?;
            }
            return Ok((new, Rekeyed::Unchanged));
        }
        cassette.key = new.clone();
        cassette.key_version = KEY_VERSION;
        cassette.key_settings = Some(settings);
        // A test-scoped recording stays test-scoped: its key and plain key both move.
        if let Some(scope) = &mut cassette.test_scope {
            scope.plain_key = keyed.clone().for_test(None).key;
        }
        if let Some(sequence) = &mut cassette.sequence {
            sequence.base_key = keyed.occurrence(1).for_test(None).key;
        }
        let outcome = match write {
            Write::Nothing => match self.inner.store.get(&new).await? {
                None => Rekeyed::Moved,
                Some(document) => compare(&cassette, &document),
            },
            Write::CreateOnly | Write::Overwrite => {
                let probe = cassette.clone();
                let stamp = stamp_of(&cassette);
                match self.write(cassette, stamp, Write::CreateOnly, None).await? {
                    Stored::Won | Stored::Nothing => Rekeyed::Moved,
                    Stored::Kept => match self.inner.store.get(&new).await? {
                        Some(document) => compare(&probe, &document),
                        None => Rekeyed::Collision {
                            test: None,
                            source: "a cassette deleted while re-keying".to_owned(),
                        },
                    },
                }
            }
        };
        Ok((new, outcome))
    }
}

/// The cassette's own provenance, kept as it is: a re-key is no new recording.
fn stamp_of(cassette: &Cassette) -> Stamp {
    Stamp {
        recorded_at: cassette.recorded_at.clone(),
        tool: cassette.tool.clone(),
        latency_ms: cassette.meta.latency_ms,
    }
}

/// Whether the stored `document` answers as `cassette` does (status and body).
fn compare(cassette: &Cassette, document: &[u8]) -> Rekeyed {
    match Cassette::from_document(document) {
        Ok(stored)
            if stored.response.status == cassette.response.status
                && stored.response.body == cassette.response.body =>
        {
            Rekeyed::Same
        }
        Ok(stored) => Rekeyed::Collision {
            test: stored.meta.test,
            source: stored.meta.source.unwrap_or(stored.tool),
        },
        Err(err) => Rekeyed::Collision {
            test: None,
            source: format!("a stored document that does not parse ({err})"),
        },
    }
}
