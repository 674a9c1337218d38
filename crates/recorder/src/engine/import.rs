//! Importing: an exchange recorded by another tool (a vcrpy cassette, an older harness's tape)
//! becomes a cassette keyed by the current contract, through the same redaction, stream
//! assembly and atomic writes as a live recording. Nothing is sent anywhere. An answer already
//! stored under the same key is compared with the imported one, so that two recordings of one
//! request with different answers are reported, never silently merged.

use super::recording::{Answer, Draft};
use super::write::{Stamp, Stored};
use super::Recorder;
use crate::error::Result;
use crate::mode::Write;
use bytes::Bytes;
use cassette_keying::Key;
use cassette_tape::headers::header;
use cassette_tape::{Cassette, Request, Sealed, Sequence, StoredBody};
use cassette_wire::{Assembler, StreamError, StreamFormat};
use std::time::Instant;

/// A finished exchange recorded elsewhere.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The request as it was sent (routed: `target` names the route).
    pub request: Request,
    /// The answer's status.
    pub status: u16,
    /// The answer's headers.
    pub headers: Vec<(String, String)>,
    /// The answer's body, decoded (no content encoding); a stream as it was sent.
    pub body: Bytes,
    /// The upstream's base URL (credentials are removed before it is stored).
    pub upstream: String,
    /// When it was recorded, RFC 3339.
    pub recorded_at: String,
    /// What recorded it, for the cassette's `tool` field.
    pub tool: String,
    /// Which occurrence of its request within its recording this is (1 for the first): the
    /// n-th is stored under its sequence-mode occurrence key, as a live recording in sequence
    /// mode would be.
    pub occurrence: u32,
    /// The test that made the request, when known (`meta.test`).
    pub test: Option<String>,
    /// Where it was recorded: the other tool's file and the place in it (`meta.source`).
    pub source: Option<String>,
}

/// What importing one exchange did (or, for [`Write::Nothing`], would do).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Imported {
    /// Stored under its key (a dry run: nothing is stored there yet).
    Stored,
    /// Stored in place of a cassette that answered differently ([`Write::Overwrite`]).
    Replaced,
    /// A cassette with the same answer is already stored under the key; it is kept.
    Same,
    /// A cassette with another answer is already stored under the key; it is kept and this
    /// exchange is not stored. Holds where the stored one came from.
    Conflict {
        /// The stored cassette's test, when known.
        test: Option<String>,
        /// The stored cassette's source (an imported one) or its tool.
        source: String,
    },
    /// Another test's cassette with another answer is stored under the key: this exchange,
    /// whose test is known, is stored under its request's test-scoped key
    /// (`docs/keying.md`, "Test-scoped keys"), so each test is answered with its own answer.
    TestScoped {
        /// The test-scoped key it is (or, for a dry run, would be) stored under.
        key: Key,
        /// The stored cassette's test, when known.
        test: Option<String>,
        /// The stored cassette's source (an imported one) or its tool.
        source: String,
    },
}

impl Recorder {
    /// The key the current contract gives the `occurrence`-th occurrence of `request` (1 for
    /// the first), as [`Recorder::import`] stores it.
    pub fn key_of(&self, request: &Request, occurrence: u32) -> Key {
        if occurrence <= 1 {
            return request.hit_key(&self.inner.config.key).key;
        }
        request
            .key(&self.inner.config.key)
            .occurrence(occurrence)
            .key
    }

    /// Stores `exchange` as a cassette under the key the current contract gives its request
    /// (its occurrence key for a later occurrence). A streamed answer of a known format is
    /// assembled into its final response, as when recording; a stream that ends in an error
    /// event the upstream sent is kept event by event, so replay sends what was recorded.
    /// `write` says whether a cassette stored under the same key is replaced
    /// ([`Write::Overwrite`]), kept ([`Write::CreateOnly`]: an import run twice changes
    /// nothing), or nothing is written at all ([`Write::Nothing`]: a dry run that still checks
    /// the exchange converts and what it would meet in the store). Returns the key and what
    /// was done.
    pub async fn import(&self, exchange: Exchange, write: Write) -> Result<(Key, Imported)> {
        let keyed = exchange
            .request
            .key(&self.inner.config.key)
            .occurrence(exchange.occurrence);
        let sequence = Sequence::of(&keyed);
        let success = (200..300).contains(&exchange.status);
        let detected = success
            .then(|| {
                let content_type = header(&exchange.headers, "content-type").unwrap_or_default();
                StreamFormat::detect(keyed.profile, content_type)
            })
            .flatten();
        let answer = match detected {
            Some(format) => {
                let mut assembler = Assembler::new(format);
                assembler.push(&exchange.body);
                match assembler.finish() {
                    Ok(final_response) => {
                        Answer::streamed(StoredBody::Json(final_response), format, None)
                    }
                    // The upstream's own error event ends the stream: what the test saw is
                    // the events, kept verbatim in the format's framing.
                    Err(StreamError::Upstream { .. }) => {
                        let framing = format.framing();
                        let mut events = Assembler::new(framing);
                        events.push(&exchange.body);
                        Answer::streamed(StoredBody::Json(events.finish()?), framing, None)
                    }
                    Err(err) => return Err(err.into()),
                }
            }
            None => Answer::whole(&exchange.body),
        };
        let draft = Draft {
            recorder: self.clone(),
            upstream: self.inner.redactor.url(&exchange.upstream),
            request: exchange.request,
            keyed_key: keyed.key.clone(),
            profile: keyed.profile,
            test: exchange.test,
            sharing: crate::config::Sharing::Shared,
            sequence,
            material: None,
            status: exchange.status,
            headers: exchange.headers,
            started: Instant::now(),
            write,
            flight: None,
            failure: None,
        };
        let mut cassette = draft.cassette(answer);
        cassette.meta.source = exchange.source;
        let stamp = Stamp {
            recorded_at: exchange.recorded_at,
            tool: exchange.tool,
            latency_ms: 0,
        };
        self.store_imported(keyed, cassette, stamp, write, Apart::ForTest)
            .await
    }

    /// Stores the imported `cassette` under `keyed` as `write` says, compared with what is
    /// stored there already; `apart` says whether another test's different answer sends it
    /// under its test-scoped key or is a conflict.
    pub(super) async fn store_imported(
        &self,
        keyed: cassette_keying::Keyed,
        cassette: Cassette,
        stamp: Stamp,
        write: Write,
        apart_for: Apart,
    ) -> Result<(Key, Imported)> {
        let key = keyed.key.clone();
        let scoped_key = keyed.for_test(cassette.meta.test.as_deref()).key;
        let apart = |found: Imported, ours: &Cassette, scoped_key: &Key| match apart_for {
            Apart::ForTest => apart(found, ours, scoped_key),
            Apart::Never => found,
        };
        let existing = match write {
            Write::CreateOnly => None,
            Write::Overwrite | Write::Nothing => self.inner.store.get(&key).await?,
        };
        let outcome = match write {
            Write::Nothing => match existing {
                None => Imported::Stored,
                Some(document) => {
                    match apart(self.compare(&cassette, &document), &cassette, &scoped_key) {
                        scoped @ Imported::TestScoped { .. } => {
                            match self.inner.store.get(&scoped_key).await? {
                                Some(own) => self.compare(&cassette, &own),
                                None => scoped,
                            }
                        }
                        other => other,
                    }
                }
            },
            Write::Overwrite => {
                let before = existing.map(|document| self.compare(&cassette, &document));
                self.write(cassette, stamp, write, None).await?;
                match before {
                    None | Some(Imported::Same) => Imported::Stored,
                    Some(_) => Imported::Replaced,
                }
            }
            Write::CreateOnly => {
                let probe = cassette.clone();
                match self.write(cassette, stamp.clone(), write, None).await? {
                    Stored::Won | Stored::Nothing => Imported::Stored,
                    Stored::Kept => match self.inner.store.get(&key).await? {
                        Some(document) => {
                            let found = self.compare(&probe, &document);
                            match apart(found.clone(), &probe, &scoped_key) {
                                scoped @ Imported::TestScoped { .. } => {
                                    match self.inner.store.get(&scoped_key).await? {
                                        // An earlier run stored it apart already.
                                        Some(own) => self.compare(&probe, &own),
                                        None => match self.keep_apart(probe, stamp).await? {
                                            Stored::Won => scoped,
                                            // It cannot key back (its request was redacted),
                                            // or the plain cassette went: not its own.
                                            Stored::Kept | Stored::Nothing => found,
                                        },
                                    }
                                }
                                other => other,
                            }
                        }
                        // Deleted since: nothing to compare with, and nothing was stored.
                        None => Imported::Conflict {
                            test: None,
                            source: "a cassette deleted while importing".to_owned(),
                        },
                    },
                }
            }
        };
        Ok((key, outcome))
    }

    /// Whether the stored `document` answers as `cassette` would once sealed: the same status
    /// and body (headers such as dates and request ids differ between any two recordings).
    fn compare(&self, cassette: &Cassette, document: &Bytes) -> Imported {
        let stored = match Cassette::from_document(document) {
            Ok(stored) => stored,
            Err(err) => {
                return Imported::Conflict {
                    test: None,
                    source: format!("a stored document that does not parse ({err})"),
                }
            }
        };
        let sealed = Sealed::seal(cassette.clone(), &self.inner.redactor, None);
        let ours = &sealed.cassette().response;
        if ours.status == stored.response.status && ours.body == stored.response.body {
            return Imported::Same;
        }
        Imported::Conflict {
            test: stored.meta.test,
            source: stored.meta.source.unwrap_or(stored.tool),
        }
    }
}

/// Whether an imported answer that differs from another test's stored one is kept apart
/// under its test-scoped key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Apart {
    /// Kept apart: replay under a test runner reads the test's own key first.
    ForTest,
    /// A conflict: replay reads the plain key only (a download).
    Never,
}

/// A conflict with another test's cassette, for an exchange whose test is known, is no
/// conflict: the exchange goes under its test-scoped key.
fn apart(found: Imported, ours: &Cassette, scoped_key: &Key) -> Imported {
    match found {
        Imported::Conflict { test, source }
            if ours.meta.test.is_some() && test.as_deref() != ours.meta.test.as_deref() =>
        {
            Imported::TestScoped {
                key: scoped_key.clone(),
                test,
                source,
            }
        }
        other => other,
    }
}
