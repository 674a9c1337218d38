//! The one write path of every recording, HTTP, MCP or imported: stamped, sealed, written as the
//! mode says, counted, logged as used and noted for the nearest-recording index.

use super::Recorder;
use crate::error::Result;
use crate::mode::Write;
use cassette_store::Created;
use cassette_tape::document::format_of;
use cassette_tape::{Cassette, Sealed, TestScope};
use serde_json::Value;
use std::sync::atomic::Ordering;

/// The version string recorded in cassettes.
const TOOL: &str = concat!("cassette ", env!("CARGO_PKG_VERSION"));

/// Where a recording came from: when, by what, how long the upstream took.
#[derive(Debug, Clone)]
pub(crate) struct Stamp {
    pub(crate) recorded_at: String,
    pub(crate) tool: String,
    pub(crate) latency_ms: u64,
}

impl Stamp {
    /// A recording made now by this tool, whose answer took `latency_ms`.
    pub(crate) fn now(latency_ms: u64) -> Stamp {
        Stamp {
            recorded_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            tool: TOOL.to_owned(),
            latency_ms,
        }
    }
}

/// What storing a recording did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Nothing was to be stored (mode `off`, or an answer that is not recorded).
    Nothing,
    /// This recording is the stored one now.
    Won,
    /// Another writer stored the key first and its recording was kept (create-only).
    Kept,
}

impl Recorder {
    /// Stores `cassette` as `write` says: stamped with `stamp`, sealed (every stored field
    /// redacted, review facts derived), its key logged as used, written atomically, counted and
    /// noted for the index. `received` is the key material of the request as received, when
    /// known (see [`Sealed::seal`]).
    pub(crate) async fn write(
        &self,
        mut cassette: Cassette,
        stamp: Stamp,
        write: Write,
        received: Option<Value>,
    ) -> Result<Stored> {
        let Some(mode) = write.put_mode() else {
            return Ok(Stored::Nothing);
        };
        cassette.recorded_at = stamp.recorded_at;
        cassette.tool = stamp.tool;
        cassette.meta.latency_ms = stamp.latency_ms;
        let sealed = Sealed::seal(cassette, &self.inner.redactor, received);
        let key = sealed.cassette().key.clone();
        let redaction = sealed.redaction();
        for (part, body) in [
            ("request", redaction.request),
            ("response", redaction.response),
        ] {
            if body.in_binary > 0 {
                tracing::warn!(
                    "cassette {key}: the {part} body is binary and held {} credential-shaped \
                     run(s); they are stored as [REDACTED] in its bytes",
                    body.in_binary
                );
            }
        }
        let document = sealed.to_document();
        let store = &self.inner.store;
        // Logged before it is stored: a collector of unused cassettes that lists the store and
        // then reads the usage log finds the key of every cassette it listed (a recording that
        // then fails leaves a logged key with no cassette, which deletes nothing).
        self.log_usage(&key);
        if store.put_with(&key, document, mode).await? == Created::AlreadyExists {
            tracing::info!("cassette {key} was recorded by another runner first; kept it");
            return Ok(Stored::Kept);
        }
        self.inner.counters.recorded.fetch_add(1, Ordering::Relaxed);
        self.note_recorded(sealed.cassette(), sealed.material());
        Ok(Stored::Won)
    }

    /// A create-only write of a test keeping its own answers (adopt) found the key of
    /// `cassette` stored. A recording this test made is kept (and answers). One another test
    /// made (or none named) never answers this test: `cassette` is stored under its
    /// test-scoped key (`docs/keying.md`, "Test-scoped keys"), unless it answers the same
    /// (status, body and events, as they would be stored), when the one recording serves
    /// both and nothing is written. Either way the client gets its own answer (`Won` or
    /// `Nothing`, never `Kept`).
    pub(crate) async fn keep_apart(&self, mut cassette: Cassette, stamp: Stamp) -> Result<Stored> {
        let plain_key = cassette.key.clone();
        let Some(test) = cassette.meta.test.clone() else {
            return Ok(Stored::Kept);
        };
        let kept = match self.inner.store.get(&plain_key).await? {
            Some(document) => Cassette::from_document(&document).ok(),
            None => None,
        };
        let Some(kept) = kept else {
            // Deleted or unreadable since: nothing answers in its place, nothing is stored.
            return Ok(Stored::Nothing);
        };
        if kept.meta.test.as_deref() == Some(test.as_str()) {
            return Ok(Stored::Kept);
        }
        let sealed = Sealed::seal(cassette.clone(), &self.inner.redactor, None);
        let ours = &sealed.cassette().response;
        let theirs = &kept.response;
        if ours.status == theirs.status && ours.body == theirs.body && ours.events == theirs.events
        {
            tracing::info!(
                "cassette {plain_key}: test `{test}` got the answer another test recorded; the \
                 one cassette serves both"
            );
            return Ok(Stored::Nothing);
        }
        cassette.test_scope = Some(TestScope {
            test,
            plain_key: plain_key.clone(),
        });
        let keyed = cassette.keyed_request(&self.inner.config.key);
        if keyed.clone().for_test(None).key != plain_key {
            let reason = format!(
                "its answer differs from the one another test recorded under {plain_key}, and \
                 its request as stored does not key back to that key, so it cannot be stored \
                 under its test-scoped key"
            );
            self.record_failure(&plain_key, reason);
            return Ok(Stored::Nothing);
        }
        cassette.key = keyed.key.clone();
        cassette.format = format_of(&cassette);
        match self
            .write(cassette, stamp, Write::CreateOnly, Some(keyed.material))
            .await?
        {
            Stored::Won => Ok(Stored::Won),
            Stored::Kept | Stored::Nothing => Ok(Stored::Nothing),
        }
    }
}
