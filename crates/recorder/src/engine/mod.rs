//! The engine: answers an HTTP request from the store or the upstream, as the mode decides
//! (`recording` builds what the upstream answered into a cassette, `write` is the one path that
//! stores recordings, `replay` turns a cassette back into an answer, `flight` lets identical
//! requests in flight at once share one upstream call, `import` stores exchanges recorded
//! elsewhere). The MCP relays build on it through the crate-private counters and lookups below.

mod download;
mod echo;
mod flight;
mod hit;
mod import;
mod recording;
mod rekey;
mod relay;
mod replay;
mod write;

pub use download::{download_key, is_download_method, Download};
pub use import::{Exchange, Imported};
pub(crate) use recording::read_whole;
pub use rekey::Rekeyed;
pub(crate) use write::Stamp;
pub use write::Stored;

use crate::config::{Answers, RecorderConfig, Repeats, Sharing};
use crate::error::{Error, Result};
use crate::hit_cache::{HitCache, HitCacheStats};
use crate::miss::{
    write_segment, Explanation, IndexRecord, Miss, MissBook, MissLog, Nearest, NearestIndex,
    Repeat, SegmentKind,
};
use crate::mode::{Mode, OnHit, OnMiss, Write};
use crate::response::{Outcome, Response, Source};
use crate::scope::Scope;
use crate::tapes::{TapeDeck, TapeReport};
use crate::upstream::Upstream;
use cassette_keying::{Key, Keyed, Profile, Streaming};
use cassette_store::{DynStore, StoreExt};
use cassette_tape::redact::{Redactor, Secret};
use cassette_tape::{Cassette, Request};
use flight::{Flights, Landed, Turn};
use hit::Hit;
use replay::replay_response;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How long recorded cassettes wait for more before their index records are written.
const FLUSH_DELAY: std::time::Duration = std::time::Duration::from_secs(1);

/// Index records written at once when recordings come faster than [`FLUSH_DELAY`].
const FLUSH_BATCH: usize = 256;

/// Counters since the recorder was built.
#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    recorded: AtomicU64,
    failed_recordings: AtomicU64,
    upstream_requests: AtomicU64,
    upstream_errors: AtomicU64,
    failures_replayed: AtomicU64,
}

/// A snapshot of the recorder's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Stats {
    /// Requests answered from a cassette.
    pub hits: u64,
    /// Replay misses.
    pub misses: u64,
    /// Cassettes written.
    pub recorded: u64,
    /// Answers that were to be recorded but were not: the store failed (read-only, disk full),
    /// or the upstream's stream broke off or could not be assembled. The client got the live
    /// answer; [`Recorder::recording_failures`] names the keys.
    pub failed_recordings: u64,
    /// Requests sent to an upstream.
    pub upstream_requests: u64,
    /// Upstream requests that failed to connect, timed out or broke off.
    pub upstream_errors: u64,
    /// Recorded upstream failures (a reset, a timeout) replayed: not answers, so not hits.
    pub failures_replayed: u64,
    /// The replay hit cache: its memory and how often it answered.
    pub hit_cache: HitCacheStats,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} hits, {} misses, {} recorded, {} failed recordings, {} upstream requests, {} \
             upstream errors",
            self.hits,
            self.misses,
            self.recorded,
            self.failed_recordings,
            self.upstream_requests,
            self.upstream_errors
        )?;
        if self.failures_replayed > 0 {
            write!(f, ", {} failures replayed", self.failures_replayed)?;
        }
        Ok(())
    }
}

/// Where what the mode forwards is answered ([`Answers`]).
#[derive(Clone, Copy)]
pub(super) enum Via<'a> {
    /// The route's upstream, over the network.
    Network(&'a Upstream),
    /// The running test's vcrpy tapes.
    Tapes(&'a TapeDeck),
}

/// Who asked for a recording: the test, and whether its answers are its own.
#[derive(Debug, Clone, Default)]
pub(crate) struct Asker {
    pub(crate) test: Option<String>,
    pub(crate) sharing: Sharing,
}

/// A recording that was to be stored and was not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingFailure {
    /// The key of the request whose answer was not stored.
    pub key: Key,
    /// Why, with its causes.
    pub reason: String,
}

impl fmt::Display for RecordingFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the recording of {} failed: {}", self.key, self.reason)
    }
}

struct Inner {
    config: RecorderConfig,
    store: DynStore,
    /// The upstream client, for the modes that call one: a replay-mode recorder owns no HTTP
    /// client at all, nor does one that answers from tapes.
    upstream: Option<Upstream>,
    /// The running tests' vcrpy tapes, for a recorder that answers from them (adopt).
    tapes: Option<TapeDeck>,
    redactor: Redactor,
    counters: Counters,
    failures: Mutex<Vec<RecordingFailure>>,
    flights: Arc<Flights>,
    index: tokio::sync::Mutex<NearestIndex>,
    misses: Mutex<MissBook>,
    /// Index records of cassettes written and not yet in a segment.
    pending: Mutex<Vec<IndexRecord>>,
    /// One segment write at a time.
    flushing: tokio::sync::Mutex<()>,
    usage_log: Option<Mutex<std::fs::File>>,
    /// How often each request (by base key) was asked so far, in sequence mode.
    /// By test (when a test runner named one) and base key.
    occurrences: Mutex<HashMap<(Option<String>, Key), u32>>,
    /// The keys this recorder stored, so that a record session answers a request it already
    /// recorded from that recording ([`Mode::on_recorded_here`]). 32 bytes a recording.
    recorded_here: Mutex<HashSet<Key>>,
    /// Ready-to-send replay answers, checked against the stored document on every hit.
    hit_cache: HitCache,
}

/// Answers LLM API requests from cassettes or the upstream. Cheap to clone; clones share
/// counters and the store.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("mode", &self.inner.config.mode)
            .field("store", &self.inner.store.location())
            .finish()
    }
}

impl Recorder {
    /// Builds a recorder over `store`. The configuration is validated first; no IO happens
    /// here, and no HTTP client exists at all in replay mode.
    pub fn new(config: RecorderConfig, store: DynStore) -> Result<Recorder> {
        Self::with_usage_log(config, store, None)
    }

    /// Opens the store at `store_url`, with an optional local cache in front of it,
    /// and builds a recorder over it. The configuration is validated before the store is
    /// touched; in replay mode the store is wrapped read-only, so replay cannot write.
    pub fn open(
        config: RecorderConfig,
        store_url: &str,
        cache_url: Option<&str>,
    ) -> Result<Recorder> {
        config.validate()?;
        let store = cassette_store::open_tiered(store_url, cache_url)?;
        let store: DynStore = match config.mode {
            Mode::Replay => Arc::new(cassette_store::readonly::ReadOnlyStore::new(store)),
            _ => store,
        };
        Self::new(config, store)
    }

    /// Like [`Recorder::new`], also appending the key of every cassette served or recorded to
    /// `usage_log` (one key a line), so that cassettes no run used can be found and removed.
    pub fn with_usage_log(
        config: RecorderConfig,
        store: DynStore,
        usage_log: Option<PathBuf>,
    ) -> Result<Recorder> {
        config.validate()?;
        let redactor = redactor_with_keys(&config)?;
        let upstream = match (config.mode.may_call_upstream(), config.answers) {
            (true, Answers::Upstream) => Some(Upstream::new(config.upstream_timeout)?),
            _ => None,
        };
        let tapes = (config.answers == Answers::Tapes).then(TapeDeck::default);
        let usage_log = match usage_log {
            None => None,
            Some(path) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|source| Error::UsageLog { path, source })?,
            )),
        };
        let hit_cache = HitCache::new(config.replay_memory);
        Ok(Recorder {
            inner: Arc::new(Inner {
                hit_cache,
                config,
                store,
                upstream,
                tapes,
                redactor,
                counters: Counters::default(),
                failures: Mutex::default(),
                flights: Arc::default(),
                index: tokio::sync::Mutex::new(NearestIndex::default()),
                misses: Mutex::new(MissBook::default()),
                pending: Mutex::new(Vec::new()),
                flushing: tokio::sync::Mutex::new(()),
                usage_log,
                occurrences: Mutex::new(HashMap::new()),
                recorded_here: Mutex::default(),
            }),
        })
    }

    /// The mode, fixed when the recorder was built.
    pub fn mode(&self) -> Mode {
        self.inner.config.mode
    }

    /// The configuration.
    pub fn config(&self) -> &RecorderConfig {
        &self.inner.config
    }

    /// The store.
    pub fn store(&self) -> &DynStore {
        &self.inner.store
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        let c = &self.inner.counters;
        Stats {
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            recorded: c.recorded.load(Ordering::Relaxed),
            failed_recordings: c.failed_recordings.load(Ordering::Relaxed),
            upstream_requests: c.upstream_requests.load(Ordering::Relaxed),
            upstream_errors: c.upstream_errors.load(Ordering::Relaxed),
            failures_replayed: c.failures_replayed.load(Ordering::Relaxed),
            hit_cache: self.inner.hit_cache.stats(),
        }
    }

    /// The recordings that failed so far, in the order they failed.
    pub fn recording_failures(&self) -> Vec<RecordingFailure> {
        self.inner
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Counts and logs an answer that was to be recorded and was not.
    pub(crate) fn record_failure(&self, key: &Key, reason: String) {
        let failure = RecordingFailure {
            key: key.clone(),
            reason,
        };
        tracing::error!("{failure}; the client got the live answer, but nothing was stored");
        let counters = &self.inner.counters;
        counters.failed_recordings.fetch_add(1, Ordering::Relaxed);
        let mut failures = self
            .inner
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        failures.push(failure);
    }

    /// The distinct keys that missed so far, the first ones with their one-line explanation.
    pub fn misses(&self) -> MissLog {
        self.miss_book().log()
    }

    fn miss_book(&self) -> std::sync::MutexGuard<'_, MissBook> {
        // Every update is one call that cannot panic half-way; a poisoned lock is still whole.
        self.inner.misses.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes a miss for [`Recorder::misses`].
    pub(crate) fn note_miss(&self, key: &Key, request: impl FnOnce() -> String, summary: &str) {
        self.miss_book().note(key, request, summary);
    }

    /// Answers an HTTP request (not one to an MCP route) as the mode decides, for the test
    /// `scope` names.
    pub(crate) async fn handle_http(&self, mut request: Request, scope: &Scope) -> Result<Outcome> {
        self.to_api_path(&mut request);
        let mode = scope.mode(self.inner.config.mode)?;
        let repeats = scope.repeats.unwrap_or(self.inner.config.repeats);
        // A hit needs only the key: keyed in one pass and answered from the hit cache when the
        // stored document is unchanged. In sequence mode the occurrence count needs the full key.
        // Adopt's own answers: a recording another test made is no hit, and what the upstream
        // answers is compared with it when it is written (`Draft::store_stamped`).
        let sharing = match scope.sharing {
            Sharing::Own if mode.on_miss() == OnMiss::Forward(Write::CreateOnly) => Sharing::Own,
            _ => Sharing::Shared,
        };
        let hits_first =
            repeats == Repeats::Same && mode.reads_store() && sharing == Sharing::Shared;
        let mut plain_missed = false;
        if hits_first {
            match self.replay_hit(&request, scope.test.as_deref()).await? {
                Hit::Answered(outcome) => return Ok(outcome),
                Hit::Nothing => plain_missed = true,
                // Looked up again below, where the mode decides what another origin's
                // recording is.
                Hit::Moved => {}
            }
        }
        let keyed = request.key(&self.inner.config.key);
        request.check_declared_json(keyed.body)?;
        let keyed = self.in_session(keyed, repeats, scope.test.as_deref());
        let (keyed, stored, on_hit) = match mode.reads_store() {
            true => {
                let (keyed, stored) = self
                    .lookup_for(keyed, scope.test.as_deref(), sharing, plain_missed)
                    .await?;
                (keyed, stored, mode.on_hit())
            }
            // A mode that calls the upstream for every request still asks it once a session.
            false if self.recorded_here(&keyed.key) => {
                let stored = self.lookup(&keyed).await?;
                (keyed, stored, mode.on_recorded_here())
            }
            false => (keyed, None, mode.on_hit()),
        };
        let moved = stored
            .as_ref()
            .and_then(|cassette| self.moved(&request.target, cassette));
        let write = match (stored, moved) {
            (Some(cassette), Some(origins)) => match mode.on_moved() {
                OnMiss::Fail => {
                    return Err(self.moved_miss(&request, &keyed, &cassette, origins).await)
                }
                OnMiss::Forward(write) => {
                    let (then, now) = origins;
                    tracing::warn!(
                        "cassette {}: recorded from {then}, the route `{}` now points at \
                         {now}: asked again there, not replayed",
                        keyed.key,
                        request.target
                    );
                    write
                }
            },
            (Some(cassette), None) => match on_hit {
                OnHit::Replay => return self.replay(&request, keyed, cassette),
                OnHit::Forward(write) => write,
            },
            (None, _) => match mode.on_miss() {
                OnMiss::Fail => return Err(self.miss(&request, &keyed, scope).await),
                OnMiss::Forward(write) => write,
            },
        };
        let upstream = self.via(&request.target)?;
        let asker = Asker {
            test: scope.test.clone(),
            sharing,
        };
        match write {
            Write::Nothing => {
                self.forward(upstream, request, keyed, write, None, asker)
                    .await
            }
            Write::Overwrite | Write::CreateOnly => {
                self.record_once(upstream, request, keyed, write, asker)
                    .await
            }
        }
    }

    /// What is stored for `keyed` (already looked up, and missing, when `plain_missed`), asked
    /// by `test`: a recording `test` made itself, else its test-scoped recording of the
    /// request, else the recording any test made (`Sharing::Shared`) or none
    /// (`Sharing::Own`: the upstream is asked, and its answer compared when written). Without
    /// a test, the plain recording. The key returned is the one answered or to record under.
    async fn lookup_for(
        &self,
        keyed: Keyed,
        test: Option<&str>,
        sharing: Sharing,
        plain_missed: bool,
    ) -> Result<(Keyed, Option<Cassette>)> {
        let plain = match plain_missed {
            true => None,
            false => self.lookup(&keyed).await?,
        };
        let Some(test) = test else {
            return Ok((keyed, plain));
        };
        if plain
            .as_ref()
            .is_some_and(|c| c.meta.test.as_deref() == Some(test))
        {
            return Ok((keyed, plain));
        }
        // Only now, when another test (or none) recorded the plain key or nothing is stored:
        // a test's own recordings cost no second lookup.
        let scoped = keyed.clone().for_test(Some(test));
        if let Some(cassette) = self.lookup(&scoped).await? {
            return Ok((scoped, Some(cassette)));
        }
        match sharing {
            Sharing::Shared => Ok((keyed, plain)),
            Sharing::Own => Ok((keyed, None)),
        }
    }

    /// Records `request`, unless an identical one (same key) is being recorded right now: then
    /// waits for it and answers with what it stored, so one upstream call serves them all and
    /// every one of them gets the answer that is kept.
    async fn record_once(
        &self,
        upstream: Via<'_>,
        request: Request,
        keyed: Keyed,
        write: Write,
        asker: Asker,
    ) -> Result<Outcome> {
        match self.inner.flights.join(&keyed.key) {
            Turn::Lead(flight) => {
                self.forward(upstream, request, keyed, write, Some(flight), asker)
                    .await
            }
            // A test keeping its own answers asks for itself: what another test in flight
            // stores is not its answer.
            Turn::Follow(wait) if asker.sharing == Sharing::Shared => {
                if wait.landed().await == Landed::Stored {
                    if let Some(cassette) = self.lookup(&keyed).await? {
                        return self.replay(&request, keyed, cassette);
                    }
                }
                // Nothing was kept (an error answer, a failure): ask for ourselves.
                self.forward(upstream, request, keyed, write, None, asker)
                    .await
            }
            Turn::Follow(_) => {
                self.forward(upstream, request, keyed, write, None, asker)
                    .await
            }
        }
    }

    /// Explains why `request` has no recording (or says it has one): the nearest recording at
    /// the same target and path and what differs. Reads the store only.
    pub async fn explain(&self, request: &Request) -> Result<Option<Miss>> {
        let mut request = request.clone();
        self.to_api_path(&mut request);
        let request = &request;
        let keyed = request.key(&self.inner.config.key);
        if self.inner.store.get(&keyed.key).await?.is_some() {
            return Ok(None);
        }
        Ok(Some(self.build_miss(request, &keyed, None).await))
    }

    /// Spells the request's path as its route's API does ([`crate::Route::api_path`]), before
    /// it is keyed or forwarded.
    fn to_api_path(&self, request: &mut Request) {
        let Some(route) = self.inner.config.route(&request.target) else {
            return;
        };
        if let std::borrow::Cow::Owned(path) = route.api_path(&request.path) {
            request.path = path;
        }
    }

    async fn lookup(&self, keyed: &Keyed) -> Result<Option<Cassette>> {
        let key = &keyed.key;
        let Some(bytes) = self.inner.store.get(key).await? else {
            return Ok(None);
        };
        self.parse_stored(&bytes, key).map(Some)
    }

    /// The cassette document stored under `key`, parsed and checked: it must be the recording
    /// of that key.
    fn parse_stored(&self, bytes: &[u8], key: &Key) -> Result<Cassette> {
        Cassette::from_stored(bytes, key).map_err(|e| Error::Corrupt {
            key: key.clone(),
            location: self.inner.store.location(),
            reason: e.to_string(),
        })
    }

    async fn miss(&self, request: &Request, keyed: &Keyed, scope: &Scope) -> Error {
        self.inner.counters.misses.fetch_add(1, Ordering::Relaxed);
        let miss = self.build_miss(request, keyed, scope.test.as_deref()).await;
        self.note_miss(&miss.key, || miss.request_line(), &miss.explanation.summary);
        Error::Miss(Box::new(miss))
    }

    /// The origins `cassette` was recorded from and `target`'s route now points at, when they
    /// differ and the route's upstream was named for this run ([`crate::Route::other_origin`]).
    pub(super) fn moved(&self, target: &str, cassette: &Cassette) -> Option<(String, String)> {
        self.inner
            .config
            .route(target)?
            .other_origin(&cassette.upstream)
    }

    /// The miss of a request whose recording came from another origin: it names both.
    async fn moved_miss(
        &self,
        request: &Request,
        keyed: &Keyed,
        cassette: &Cassette,
        (then, now): (String, String),
    ) -> Error {
        self.inner.counters.misses.fetch_add(1, Ordering::Relaxed);
        let mut miss = self.build_miss(request, keyed, None).await;
        let redactor = &self.inner.redactor;
        let (then, now) = (redactor.url(&then), redactor.url(&now));
        miss.explanation = Explanation {
            nearest: Some(Nearest {
                key: cassette.key.clone(),
                recorded_at: cassette.recorded_at.clone(),
                differences: vec![format!("upstream: {then} -> {now}")],
                hint: None,
            }),
            summary: format!(
                "recorded from {then}, the route `{}` now points at {now}: another upstream's \
                 answer is not replayed (record it again from {now}, or point the route back)",
                request.target
            ),
        };
        self.note_miss(&miss.key, || miss.request_line(), &miss.explanation.summary);
        Error::Miss(Box::new(miss))
    }

    async fn build_miss(&self, request: &Request, keyed: &Keyed, test: Option<&str>) -> Miss {
        let repeat = self.repeat(keyed).await;
        let explanation = match &repeat {
            Some(repeat) => repeat.explanation(),
            None => {
                self.nearest(&request.target, &request.path, keyed, test)
                    .await
            }
        };
        // A miss is shown in 409 bodies, logs and CI output: nothing in it may echo a
        // credential the request carried.
        let redactor = &self.inner.redactor;
        Miss {
            repeat,
            key: keyed.key.clone(),
            profile: keyed.profile.to_string(),
            target: request.target.clone(),
            method: request.method.to_ascii_uppercase(),
            path: redactor.text(&request.path),
            model: request.model().map(|model| redactor.text(&model)),
            store: redactor.url(&self.inner.store.location()),
            explanation,
        }
    }

    /// The nearest recording of a request at `target` and `path` (an MCP server and method)
    /// that missed, and what differs, from the one index of this recorder: among the
    /// recordings `test` made first, when a test runner named the test and it made any.
    pub(crate) async fn nearest(
        &self,
        target: &str,
        path: &str,
        keyed: &Keyed,
        test: Option<&str>,
    ) -> Explanation {
        let mut index = self.inner.index.lock().await;
        let (store, config) = (&self.inner.store, &self.inner.config.key);
        // Explained as the request itself: a first occurrence missing is what matters.
        let base = keyed.clone().occurrence(1);
        let asked = (target, path, &base.material);
        index
            .explain(store, config, &self.inner.redactor, asked, test)
            .await
    }

    /// The keys of the recordings `test` made (their cassettes' `meta.test`), as the index
    /// knows them: what a strict test runner checks were all used.
    pub async fn recordings_of_test(&self, test: &str) -> Vec<Key> {
        let mut index = self.inner.index.lock().await;
        let (store, config) = (&self.inner.store, &self.inner.config.key);
        index.recordings_of(store, config, test).await
    }

    /// Store requests the nearest-recording index has made so far (segment and key listings,
    /// segment and cassette reads), for benchmarks and tests of its cost.
    pub async fn index_requests(&self) -> u64 {
        self.inner.index.lock().await.requests()
    }

    /// Writes the index records of the cassettes written so far into a segment of the store, so
    /// a later miss finds them without reading every cassette. Happens on its own within a
    /// second of a recording; call it before the process exits to write the last ones.
    pub async fn flush_index(&self) -> Result<()> {
        let _one_at_a_time = self.inner.flushing.lock().await;
        let records = std::mem::take(&mut *self.pending());
        if let Err(err) = write_segment(&self.inner.store, &records, SegmentKind::Writer).await {
            // Put back, so a later flush tries again; the index is a hint, the cassettes are
            // written already.
            self.pending().extend(records);
            return Err(err);
        }
        Ok(())
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Vec<IndexRecord>> {
        self.inner.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes a cassette just written, whose stored request keys to `material`, for the next
    /// index segment.
    fn note_recorded(&self, cassette: &Cassette, material: &serde_json::Value) {
        if !self.inner.store.keeps_segments() {
            return;
        }
        let record = IndexRecord::new(cassette, material);
        let waiting = {
            let mut pending = self.pending();
            pending.push(record);
            pending.len()
        };
        // The first pending record schedules a flush a moment later, batching a burst of
        // recordings into one segment; a long burst is flushed as it goes.
        let delay = match waiting {
            1 => Some(FLUSH_DELAY),
            n if n >= FLUSH_BATCH => Some(std::time::Duration::ZERO),
            _ => None,
        };
        if let (Some(delay), Ok(runtime)) = (delay, tokio::runtime::Handle::try_current()) {
            let recorder = self.clone();
            runtime.spawn(async move {
                tokio::time::sleep(delay).await;
                if let Err(err) = recorder.flush_index().await {
                    tracing::warn!(
                        "cannot write an index segment: {}",
                        crate::error::report(&err)
                    );
                }
            });
        }
    }

    /// The key of `keyed` as this occurrence of its request: in sequence mode the n-th time a
    /// request is asked (within `test`, when a test runner named one, so that the numbering
    /// does not depend on which tests ran before, or on which worker) gets its n-th occurrence
    /// key; otherwise every repeat is the request itself.
    pub(crate) fn in_session(&self, keyed: Keyed, repeats: Repeats, test: Option<&str>) -> Keyed {
        match repeats {
            Repeats::Same => keyed,
            Repeats::Sequence => {
                let n = {
                    let mut seen = self.occurrences();
                    let count = seen
                        .entry((test.map(str::to_owned), keyed.key.clone()))
                        .or_insert(0);
                    *count = count.saturating_add(1);
                    *count
                };
                keyed.occurrence(n)
            }
        }
    }

    fn occurrences(&self) -> std::sync::MutexGuard<'_, HashMap<(Option<String>, Key), u32>> {
        self.inner
            .occurrences
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Starts `test` afresh: its repeats are numbered from the first again (a test run twice
    /// in one session, by a rerun plugin say, asks what it asked the first time).
    pub fn begin_test(&self, test: &str) {
        self.occurrences()
            .retain(|(owner, _), _| owner.as_deref() != Some(test));
    }

    /// Begins the test `scope` names, afresh ([`Recorder::begin_test`]); a recorder that
    /// answers from tapes reads the test's tapes now (one that cannot be read is reported for
    /// the test). Tapes named to a recorder that answers from its upstreams, or for no test,
    /// are an invalid request.
    pub fn begin(&self, scope: &Scope) -> Result<()> {
        let Some(test) = &scope.test else {
            return match scope.tapes {
                Some(_) => Err(Error::InvalidRequest(
                    "tapes are named for a test: the scope names none".to_owned(),
                )),
                None => Ok(()),
            };
        };
        self.begin_test(test);
        match (&self.inner.tapes, &scope.tapes) {
            (Some(deck), tapes) => deck.begin(test, tapes.as_ref(), &self.inner.redactor),
            (None, Some(_)) => {
                return Err(Error::InvalidRequest(format!(
                    "tapes were named for test `{test}`, but this recorder answers from its \
                     upstreams, not from tapes"
                )))
            }
            (None, None) => {}
        }
        Ok(())
    }

    /// What `test`'s tapes answered so far, for a recorder that answers from tapes; `end`
    /// forgets them.
    pub(crate) fn tape_report(&self, test: &str, end: bool) -> Option<TapeReport> {
        self.inner.tapes.as_ref()?.report(test, end)
    }

    /// For a later occurrence that missed: how many occurrences of the request are recorded
    /// (the first ones in a row), when at least the first is; `None` otherwise (then the
    /// request itself is what is missing).
    pub(crate) async fn repeat(&self, keyed: &Keyed) -> Option<Repeat> {
        let asked = keyed.occurrence_number();
        if asked < 2 {
            return None;
        }
        let mut recorded = 0;
        for n in 1..asked {
            let key = keyed.clone().occurrence(n).key;
            match self.inner.store.contains(&key).await {
                Ok(true) => recorded = n,
                _ => break,
            }
        }
        (recorded > 0).then(|| Repeat {
            base_key: keyed.clone().occurrence(1).key,
            asked,
            recorded,
        })
    }

    pub(crate) fn log_usage(&self, key: &Key) {
        if let Some(log) = &self.inner.usage_log {
            let mut file = log.lock().unwrap_or_else(|p| p.into_inner());
            // One write per line on an O_APPEND file keeps concurrent writers' lines whole.
            if let Err(err) = file.write_all(format!("{key}\n").as_bytes()) {
                tracing::warn!("cannot append to the usage log: {err}");
            }
        }
    }

    /// The answer a replay of `cassette` (stored under `key`) sends, as the request asked for
    /// it; a cassette whose answer cannot be rendered is corrupt.
    fn render(
        &self,
        key: &Key,
        profile: Profile,
        streaming: Streaming,
        query: &str,
        cassette: Cassette,
    ) -> Result<Response> {
        if let Some(failure) = cassette.response.failure {
            return Err(Error::FailureReplayed {
                key: key.clone(),
                failure,
            });
        }
        let chunk_size = self.inner.config.stream_chunk_size;
        replay_response(profile, streaming, query, cassette, chunk_size).map_err(|reason| {
            Error::Corrupt {
                key: key.clone(),
                location: self.inner.store.location(),
                reason,
            }
        })
    }

    /// Counts a replay hit and logs its key as used.
    /// Whether this recorder stored the recording of `key` itself.
    fn recorded_here(&self, key: &Key) -> bool {
        self.inner
            .recorded_here
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(key)
    }

    /// Notes that this recorder stored the recording of `key`.
    pub(super) fn note_recorded_here(&self, key: &Key) {
        self.inner
            .recorded_here
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone());
    }

    fn note_hit(&self, key: &Key) {
        self.inner.counters.hits.fetch_add(1, Ordering::Relaxed);
        self.log_usage(key);
    }

    /// Counts a replay of `cassette`: a hit, or, for a recorded upstream failure, a failure
    /// replayed (counted apart: it answers nothing).
    fn note_replay(&self, key: &Key, cassette: &Cassette) {
        match cassette.response.failure {
            Some(_) => {
                let counters = &self.inner.counters;
                counters.failures_replayed.fetch_add(1, Ordering::Relaxed);
                self.log_usage(key);
            }
            None => self.note_hit(key),
        }
    }

    fn replay(&self, request: &Request, keyed: Keyed, cassette: Cassette) -> Result<Outcome> {
        self.note_replay(&keyed.key, &cassette);
        let response = self.render(
            &keyed.key,
            keyed.profile,
            keyed.streaming,
            &request.query,
            cassette,
        )?;
        Ok(Outcome {
            key: keyed.key,
            source: Source::Replayed,
            response,
        })
    }
}

/// The configured redactor, also replacing every route key wherever it would be stored (an
/// upstream that echoes the key in an error answer, say): keys never reach a cassette.
fn redactor_with_keys(config: &RecorderConfig) -> Result<Redactor> {
    let secrets: Vec<Secret<'_>> = config
        .routes
        .iter()
        .filter_map(|r| {
            Some(Secret {
                name: r.name.as_str(),
                value: r.api_key.as_ref()?.expose(),
            })
        })
        .collect();
    Redactor::with_secrets(&config.redaction, &secrets).map_err(|err| match err {
        cassette_tape::Error::UnusableSecret { names } => Error::InvalidRoute {
            name: names,
            reason: "a key of this route cannot be turned into a redaction rule (too long?)"
                .to_owned(),
        },
        other => other.into(),
    })
}

// For the MCP relays, which answer through the same store, counters, usage log, index and
// upstream client as HTTP requests, so `cassette exec` and the proxy's stats see their hits and
// misses, and a miss finds its nearest recording in the one index.
impl Recorder {
    pub(crate) fn count_hit(&self) {
        self.inner.counters.hits.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_miss(&self) {
        self.inner.counters.misses.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_upstream_request(&self) {
        let counters = &self.inner.counters;
        counters.upstream_requests.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_upstream_error(&self) {
        let counters = &self.inner.counters;
        counters.upstream_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// The upstream client for a request to `target`; none in replay mode, which never calls
    /// out (asking for one there is a bug, reported instead of calling out), nor for a
    /// recorder that answers from tapes.
    pub(crate) fn upstream(&self, target: &str) -> Result<&Upstream> {
        let target = target.to_owned();
        match (&self.inner.upstream, &self.inner.tapes) {
            (Some(upstream), _) => Ok(upstream),
            (None, Some(_)) => Err(Error::TapesOnly { target }),
            (None, None) => Err(Error::ReplayOnly { target }),
        }
    }

    /// Where a request to `target` the mode forwards is answered.
    fn via(&self, target: &str) -> Result<Via<'_>> {
        match &self.inner.tapes {
            Some(deck) => Ok(Via::Tapes(deck)),
            None => self.upstream(target).map(Via::Network),
        }
    }

    /// The redaction every cassette goes through (with the routes' keys as literal secrets),
    /// for callers that write what a recorder answered anywhere else.
    pub fn redactor(&self) -> &Redactor {
        &self.inner.redactor
    }
}
