//! The replay hit path: the request keyed in one pass (`hit_key`, no explanation), the
//! cassette read from the store, and the answer sent from the hit cache when the stored
//! document has the length and SHA-256 of the one it was rendered from; else the document is
//! parsed, checked (it must be the recording of this key) and rendered as any replay is, and
//! the answer cached.
//!
//! Every hit reads the store, so the store's current content always decides: an edited or
//! replaced tape is parsed and checked again, a deleted one is a miss. The full `key()` (the
//! explanation a miss report and a recording need) is only computed when nothing is stored.

use super::replay::replay_response;
use super::Recorder;
use crate::error::{Error, Result};
use crate::hit_cache::{Answer, Asked, Fingerprint};
use crate::request::Request;
use crate::response::{Outcome, Response, ResponseBody, Source};
use std::sync::Arc;

impl Recorder {
    /// Answers `request` from the store if a cassette is stored under its key; `Ok(None)` when
    /// none is (the caller keys the request fully for the miss or the recording).
    pub(super) async fn replay_hit(&self, request: &Request) -> Result<Option<Outcome>> {
        let hit = request.hit_key(&self.inner.config.key);
        let Some(document) = self.inner.store.get(&hit.key).await? else {
            return Ok(None);
        };
        let cache = &self.inner.hit_cache;
        let fingerprint = cache.is_on().then(|| Fingerprint::of(&document));
        // The query can choose a stream's format (Gemini's `alt=sse`), so it is part of how
        // the answer was asked for.
        let asked = Asked {
            streaming: hit.streaming,
            query: request.query.clone(),
        };
        let cached = fingerprint.and_then(|f| cache.get(&hit.key, &f, &asked));
        if let Some(answer) = cached {
            self.note_hit(&hit.key);
            return Ok(Some(Outcome {
                key: hit.key,
                source: Source::Replayed,
                response: Response {
                    status: answer.status,
                    headers: answer.headers.to_vec(),
                    body: ResponseBody::Full(answer.body),
                },
            }));
        }
        let cassette = self.parse_stored(&document, &hit.key)?;
        self.note_hit(&hit.key);
        let response = replay_response(
            hit.profile,
            hit.streaming,
            &request.query,
            cassette,
            self.inner.config.stream_chunk_size,
        )
        .map_err(|reason| Error::Corrupt {
            key: hit.key.clone(),
            location: self.inner.store.location(),
            reason,
        })?;
        // Streams are synthesized per request; whole bodies are kept as sent.
        if let (Some(fingerprint), ResponseBody::Full(body)) = (fingerprint, &response.body) {
            let answer = Answer {
                status: response.status,
                headers: Arc::from(response.headers.as_slice()),
                body: body.clone(),
            };
            cache.put(&hit.key, fingerprint, asked, answer);
        }
        Ok(Some(Outcome {
            key: hit.key,
            source: Source::Replayed,
            response,
        }))
    }
}
