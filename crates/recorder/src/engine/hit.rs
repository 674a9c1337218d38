//! The replay hit path: the request keyed in one pass (`hit_key`, no explanation), the
//! cassette read from the store, and the answer sent from the hit cache when the stored
//! document has the length and hash of the one it was rendered from; else the document is
//! parsed, checked (it must be the recording of this key) and rendered as any replay is, and
//! the answer cached. A test's request answered by a cassette another test recorded looks for
//! the test's own test-scoped recording first (`docs/keying.md`, "Test-scoped keys"). The document is read unchecked ([`cassette_store::Store::get_raw`]): a
//! fingerprint match means it is the document already checked, and parsing checks any other.
//!
//! Every hit reads the store, so the store's current content always decides: an edited or
//! replaced tape is parsed and checked again, a deleted one is a miss. The full `key()` (the
//! explanation a miss report and a recording need) is only computed when nothing is stored.

use super::Recorder;
use crate::error::Result;
use crate::hit_cache::{Answer, Asked, Fingerprint};
use crate::response::{Outcome, Response, ResponseBody, Source};
use cassette_tape::Request;
use std::sync::Arc;

/// What the hit path found.
pub(super) enum Hit {
    /// The answer, replayed.
    Answered(Outcome),
    /// Nothing stored under the key.
    Nothing,
    /// A recording from another origin than the route's: the caller's lookup decides (a miss
    /// that names both, or a recording afresh).
    Moved,
}

impl Recorder {
    /// Answers `request` from the store if a cassette is stored under its key; `Ok(None)` when
    /// none is (the caller keys the request fully for the miss or the recording). For a
    /// request of `test`, a cassette another test recorded (or none named) answers only when
    /// `test` has no test-scoped recording of the request: the one extra lookup is made only
    /// then, so a plain hit, and a test's own, costs what it did.
    pub(super) async fn replay_hit(&self, request: &Request, test: Option<&str>) -> Result<Hit> {
        let another = |owner: Option<&str>| test.is_some_and(|test| owner != Some(test));
        let hit = request.hit_key(&self.inner.config.key);
        request.check_declared_json(hit.body)?;
        let Some(document) = self.inner.store.get_raw(&hit.key).await? else {
            return Ok(Hit::Nothing);
        };
        let cache = &self.inner.hit_cache;
        let mut fingerprint = cache.is_on().then(|| Fingerprint::of(&document));
        // The query can choose a stream's format (Gemini's `alt=sse`), so it is part of how
        // the answer was asked for.
        let asked = Asked {
            streaming: hit.streaming,
            query: request.query.clone(),
        };
        let cached = fingerprint.and_then(|f| cache.get(&hit.key, &f, &asked));
        if let Some(answer) = cached {
            if self.moved_from(&request.target, &answer.upstream) {
                return Ok(Hit::Moved);
            }
            if another(answer.test.as_deref()) {
                if let Some(outcome) = self.scoped_hit(request, test).await? {
                    return Ok(Hit::Answered(outcome));
                }
            }
            self.note_hit(&hit.key);
            return Ok(Hit::Answered(Outcome {
                key: hit.key,
                source: Source::Replayed,
                response: Response {
                    status: answer.status,
                    headers: answer.headers.to_vec(),
                    body: ResponseBody::Full(answer.body),
                },
            }));
        }
        let cassette = match self.parse_stored(&document, &hit.key) {
            Ok(cassette) => cassette,
            // Read again with the store's own check, which names the damaged file where the
            // store has files; a document that is JSON but no cassette is this error. A store
            // holding a sound copy elsewhere answers the checked read with it (a tiered store
            // whose cache file is damaged reads its remote), and that copy is answered.
            Err(err) => match self.inner.store.get(&hit.key).await? {
                Some(checked) if checked != document => {
                    let cassette = self.parse_stored(&checked, &hit.key)?;
                    fingerprint = cache.is_on().then(|| Fingerprint::of(&checked));
                    cassette
                }
                _ => return Err(err),
            },
        };
        if self.moved(&request.target, &cassette).is_some() {
            return Ok(Hit::Moved);
        }
        if another(cassette.meta.test.as_deref()) {
            if let Some(outcome) = self.scoped_hit(request, test).await? {
                return Ok(Hit::Answered(outcome));
            }
        }
        let owner: Option<Arc<str>> = cassette.meta.test.as_deref().map(Arc::from);
        let upstream: Arc<str> = Arc::from(cassette.upstream.as_str());
        self.note_replay(&hit.key, &cassette);
        let response = self.render(
            &hit.key,
            hit.profile,
            hit.streaming,
            &request.query,
            cassette,
        )?;
        // Streams are synthesized per request; whole bodies are kept as sent.
        if let (Some(fingerprint), ResponseBody::Full(body)) = (fingerprint, &response.body) {
            let answer = Answer {
                status: response.status,
                headers: Arc::from(response.headers.as_slice()),
                body: body.clone(),
                test: owner,
                upstream,
            };
            cache.put(&hit.key, fingerprint, asked, answer);
        }
        Ok(Hit::Answered(Outcome {
            key: hit.key,
            source: Source::Replayed,
            response,
        }))
    }

    /// Whether a recording from `upstream` is from another origin than `target`'s route.
    fn moved_from(&self, target: &str, upstream: &str) -> bool {
        let route = self.inner.config.route(target);
        route.is_some_and(|route| route.other_origin(upstream).is_some())
    }

    /// The answer of `test`'s test-scoped recording of `request`, when it has one.
    async fn scoped_hit(&self, request: &Request, test: Option<&str>) -> Result<Option<Outcome>> {
        let keyed = request.key(&self.inner.config.key).for_test(test);
        match self.lookup(&keyed).await? {
            Some(cassette) => self.replay(request, keyed, cassette).map(Some),
            None => Ok(None),
        }
    }
}
