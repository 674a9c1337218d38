//! The recorder: answers a request from the store or the upstream, according to the mode.

use crate::cassette::{
    Cassette, KeySettings, Meta, StoredBody, StoredRequest, StoredResponse, FORMAT_VERSION,
};
use crate::config::{ErrorRecording, RecorderConfig};
use crate::error::{Error, Result};
use crate::miss::{Miss, NearestIndex};
use crate::mode::Mode;
use crate::redact::Redactor;
use crate::stream::{self, Assembler, StreamFormat, SynthesisOptions};
use crate::upstream::{Upstream, HOP_BY_HOP};
use bytes::Bytes;
use cassette_keying::{Key, Keyed, Profile};
use cassette_store::{Created, DynStore};
use futures::{Stream, StreamExt};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc;

/// The version string recorded in cassettes.
const TOOL: &str = concat!("cassette ", env!("CARGO_PKG_VERSION"));

/// A request as the recorder sees it: already routed (the route prefix stripped from `path`).
#[derive(Debug, Clone)]
pub struct IncomingRequest {
    /// Route name; `default` for the unnamed route.
    pub target: String,
    /// HTTP method.
    pub method: String,
    /// Path as the upstream will see it, without the query.
    pub path: String,
    /// Raw query string without `?`.
    pub query: String,
    /// Headers as received, repeats allowed.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Bytes,
}

impl IncomingRequest {
    /// A POST of a JSON body to the default target.
    pub fn post_json(path: &str, body: &Value) -> IncomingRequest {
        IncomingRequest {
            target: crate::config::DEFAULT_TARGET.to_owned(),
            method: "POST".to_owned(),
            path: path.to_owned(),
            query: String::new(),
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: Bytes::from(body.to_string()),
        }
    }

    /// The key of this request under `config`.
    pub fn key(&self, config: &cassette_keying::KeyConfig) -> Keyed {
        let mut request = cassette_keying::Request::new(&self.method, &self.path)
            .target(&self.target)
            .query(&self.query)
            .body(&self.body);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        request.key(config)
    }
}

/// A body stream handed to the client.
pub type BodyStream = Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>;

/// A response body: complete, or streamed as it arrives.
pub enum ResponseBody {
    /// The whole body.
    Full(Bytes),
    /// Pieces, in order.
    Stream(BodyStream),
}

impl fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseBody::Full(b) => f.debug_tuple("Full").field(&b.len()).finish(),
            ResponseBody::Stream(_) => f.write_str("Stream(..)"),
        }
    }
}

/// A response to hand to the client.
#[derive(Debug)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// Headers (no hop-by-hop or length headers: the server sets those).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: ResponseBody,
}

impl Response {
    /// Reads the whole body, waiting for a stream to end.
    pub async fn into_bytes(self) -> std::io::Result<Bytes> {
        match self.body {
            ResponseBody::Full(bytes) => Ok(bytes),
            ResponseBody::Stream(mut stream) => {
                let mut out = Vec::new();
                while let Some(piece) = stream.next().await {
                    out.extend_from_slice(&piece?);
                }
                Ok(Bytes::from(out))
            }
        }
    }

    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Where an answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Replayed from a cassette.
    Replayed,
    /// Fetched from the upstream and stored.
    Recorded,
    /// Fetched from the upstream and not stored (mode `off`, an error answer, or a create-only
    /// write that another recorder won).
    PassedThrough,
    /// Not recorded, answered with an error in the protocol's own form (an MCP route answers a
    /// replay miss with a JSON-RPC error, which MCP clients show as it is).
    Missed,
}

/// The answer to a request.
#[derive(Debug)]
pub struct Outcome {
    /// The request's key.
    pub key: Key,
    /// Where the answer came from.
    pub source: Source,
    /// The answer.
    pub response: Response,
}

/// Counters since the recorder was built.
#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    recorded: AtomicU64,
    upstream_requests: AtomicU64,
    upstream_errors: AtomicU64,
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
    /// Requests sent to an upstream.
    pub upstream_requests: u64,
    /// Upstream requests that failed to connect, timed out or broke off.
    pub upstream_errors: u64,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} hits, {} misses, {} recorded, {} upstream requests, {} upstream errors",
            self.hits, self.misses, self.recorded, self.upstream_requests, self.upstream_errors
        )
    }
}

/// How a recording is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Persist {
    /// Replace any previous recording (mode `record`: the user asked to re-record).
    Overwrite,
    /// Keep a recording another runner stored first (mode `auto` filling a miss).
    CreateOnly,
    /// Store nothing (mode `off`).
    Nothing,
}

struct Inner {
    config: RecorderConfig,
    store: DynStore,
    upstream: Option<Upstream>,
    redactor: Redactor,
    counters: Counters,
    index: tokio::sync::Mutex<NearestIndex>,
    usage_log: Option<Mutex<std::fs::File>>,
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

    /// Opens the store at `store_url`, with an optional local cache in front of it (`--cache`),
    /// and builds a recorder over it. The configuration is validated before the store is
    /// touched; in replay mode the store is wrapped read-only, so replay cannot write.
    pub fn open(
        config: RecorderConfig,
        store_url: &str,
        cache_url: Option<&str>,
    ) -> Result<Recorder> {
        config.validate().map_err(Error::Config)?;
        let store = cassette_store::open_tiered(store_url, cache_url)?;
        let store: DynStore = match config.mode {
            Mode::Replay => Arc::new(cassette_store::readonly::ReadOnlyStore::new(store)),
            _ => store,
        };
        Self::new(config, store)
    }

    /// Like [`Recorder::new`], also appending the key of every cassette served or recorded to
    /// `usage_log` (one key a line), for `cassette gc --unused`.
    pub fn with_usage_log(
        config: RecorderConfig,
        store: DynStore,
        usage_log: Option<PathBuf>,
    ) -> Result<Recorder> {
        config.validate().map_err(Error::Config)?;
        let redactor = redactor_with_keys(&config)?;
        let upstream = if config.mode.may_call_upstream() {
            Some(Upstream::new(config.upstream_timeout)?)
        } else {
            None
        };
        let usage_log = match usage_log {
            None => None,
            Some(path) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| {
                        Error::Config(format!("cannot open usage log {}: {e}", path.display()))
                    })?,
            )),
        };
        Ok(Recorder {
            inner: Arc::new(Inner {
                config,
                store,
                upstream,
                redactor,
                counters: Counters::default(),
                index: tokio::sync::Mutex::new(NearestIndex::default()),
                usage_log,
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
            upstream_requests: c.upstream_requests.load(Ordering::Relaxed),
            upstream_errors: c.upstream_errors.load(Ordering::Relaxed),
        }
    }

    /// Answers `request` according to the mode.
    pub async fn handle(&self, request: IncomingRequest) -> Result<Outcome> {
        let limit = self.inner.config.max_body;
        if request.body.len() > limit {
            return Err(Error::BodyTooLarge {
                size: request.body.len(),
                limit,
            });
        }
        if self.inner.config.is_mcp_route(&request.target) {
            return crate::mcp::http::handle(self, request).await;
        }
        let keyed = request.key(&self.inner.config.key);
        match self.inner.config.mode {
            Mode::Replay => match self.lookup(&keyed).await? {
                Some(cassette) => self.replay(&request, keyed, cassette),
                None => Err(self.miss(&request, &keyed).await),
            },
            Mode::Auto => match self.lookup(&keyed).await? {
                Some(cassette) => self.replay(&request, keyed, cassette),
                None => self.forward(request, keyed, Persist::CreateOnly).await,
            },
            Mode::Record => self.forward(request, keyed, Persist::Overwrite).await,
            Mode::Off => self.forward(request, keyed, Persist::Nothing).await,
        }
    }

    /// Explains why `request` has no recording (or says it has one): the nearest recording at
    /// the same target and path and what differs. Reads the store only.
    pub async fn explain(&self, request: &IncomingRequest) -> Result<Option<Miss>> {
        let keyed = request.key(&self.inner.config.key);
        if self.inner.store.get(keyed.key.as_str()).await?.is_some() {
            return Ok(None);
        }
        Ok(Some(self.build_miss(request, &keyed).await))
    }

    async fn lookup(&self, keyed: &Keyed) -> Result<Option<Cassette>> {
        let key = keyed.key.as_str();
        let Some(bytes) = self.inner.store.get(key).await? else {
            return Ok(None);
        };
        Cassette::from_document(&bytes)
            .map(Some)
            .map_err(|reason| Error::Corrupt {
                key: key.to_owned(),
                location: self.inner.store.location(),
                reason,
            })
    }

    async fn miss(&self, request: &IncomingRequest, keyed: &Keyed) -> Error {
        self.inner.counters.misses.fetch_add(1, Ordering::Relaxed);
        Error::Miss(Box::new(self.build_miss(request, keyed).await))
    }

    async fn build_miss(&self, request: &IncomingRequest, keyed: &Keyed) -> Miss {
        let explanation = {
            let mut index = self.inner.index.lock().await;
            index
                .refresh(&self.inner.store, &self.inner.config.key)
                .await;
            index.explain(&request.target, &request.path, &keyed.material)
        };
        Miss {
            key: keyed.key.to_string(),
            profile: keyed.profile.to_string(),
            target: request.target.clone(),
            method: request.method.to_ascii_uppercase(),
            path: request.path.clone(),
            model: request_model(&request.body),
            store: self.inner.store.location(),
            explanation,
        }
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

    fn replay(
        &self,
        request: &IncomingRequest,
        keyed: Keyed,
        cassette: Cassette,
    ) -> Result<Outcome> {
        self.inner.counters.hits.fetch_add(1, Ordering::Relaxed);
        self.log_usage(&keyed.key);
        let response = replay_response(
            keyed.profile,
            &request.body,
            cassette,
            self.inner.config.stream_chunk_size,
        )
        .map_err(|reason| Error::Corrupt {
            key: keyed.key.to_string(),
            location: self.inner.store.location(),
            reason,
        })?;
        Ok(Outcome {
            key: keyed.key,
            source: Source::Replayed,
            response,
        })
    }

    async fn forward(
        &self,
        request: IncomingRequest,
        keyed: Keyed,
        persist: Persist,
    ) -> Result<Outcome> {
        let inner = &self.inner;
        let route = inner
            .config
            .route(&request.target)
            .ok_or_else(|| Error::NoUpstream {
                target: request.target.clone(),
            })?
            .clone();
        let upstream = inner
            .upstream
            .as_ref()
            .ok_or_else(|| Error::Config("this recorder has no upstream client".to_owned()))?;
        inner
            .counters
            .upstream_requests
            .fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let (endpoint, response) = upstream
            .send(&route, &request, &inner.redactor)
            .await
            .inspect_err(|_| {
                inner
                    .counters
                    .upstream_errors
                    .fetch_add(1, Ordering::Relaxed);
            })?;
        let status = response.status().as_u16();
        let headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let content_type = header_value(&headers, "content-type").unwrap_or_default();
        let success = (200..300).contains(&status);
        let keep = success || inner.config.errors == ErrorRecording::Record;
        let persist = if keep { persist } else { Persist::Nothing };
        let client_headers = client_headers(&headers);
        let draft = Draft {
            recorder: self.clone(),
            request,
            keyed_key: keyed.key.clone(),
            profile: keyed.profile,
            upstream: inner.redactor.url(&route.base_url),
            status,
            headers,
            started,
            persist,
        };

        let format = if success {
            StreamFormat::detect(keyed.profile, &content_type)
        } else {
            None
        };
        let body = match format {
            Some(format) => ResponseBody::Stream(draft.clone().relay_stream(format, response)),
            None => {
                let bytes = response.bytes().await.map_err(|e| {
                    inner
                        .counters
                        .upstream_errors
                        .fetch_add(1, Ordering::Relaxed);
                    let e = e.without_url();
                    crate::error::upstream_error(&endpoint, &e, inner.config.upstream_timeout)
                })?;
                let stored = StoredBody::from_bytes(&bytes);
                draft.clone().store(stored, None).await?;
                ResponseBody::Full(bytes)
            }
        };
        let source = match persist {
            Persist::Nothing => Source::PassedThrough,
            _ => Source::Recorded,
        };
        if source == Source::Recorded {
            self.log_usage(&keyed.key);
        }
        Ok(Outcome {
            key: keyed.key,
            source,
            response: Response {
                status,
                headers: client_headers,
                body,
            },
        })
    }
}

/// What is known about a recording before its body is complete.
#[derive(Clone)]
struct Draft {
    recorder: Recorder,
    request: IncomingRequest,
    keyed_key: Key,
    profile: Profile,
    upstream: String,
    status: u16,
    headers: Vec<(String, String)>,
    started: Instant,
    persist: Persist,
}

impl Draft {
    /// Forwards an upstream stream piece by piece as it arrives while assembling it; stores
    /// the assembled response before the client sees the last piece, so a client that has
    /// read a whole stream can replay it at once.
    fn relay_stream(self, format: StreamFormat, response: reqwest::Response) -> BodyStream {
        let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(16);
        tokio::spawn(async move {
            let mut upstream = response.bytes_stream();
            let mut assembler = Assembler::new(format);
            let mut held: Option<Bytes> = None;
            let mut client_gone = false;
            while let Some(piece) = upstream.next().await {
                match piece {
                    Ok(bytes) => {
                        assembler.push(&bytes);
                        if let Some(previous) = held.replace(bytes) {
                            // The client may hang up; keep reading so the recording completes.
                            client_gone |= tx.send(Ok(previous)).await.is_err();
                        }
                    }
                    Err(err) => {
                        // The URL may hold a route's key (a `query:` auth style).
                        let err = err.without_url();
                        let counters = &self.recorder.inner.counters;
                        counters.upstream_errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            "upstream {} broke off a stream: {err}; nothing was recorded",
                            self.upstream
                        );
                        if let Some(previous) = held.take() {
                            let _ = tx.send(Ok(previous)).await;
                        }
                        let _ = tx
                            .send(Err(std::io::Error::other(format!(
                                "upstream broke off the stream: {err}"
                            ))))
                            .await;
                        return;
                    }
                }
            }
            let stored = match assembler.finish() {
                Ok(final_response) => Some(StoredBody::Json(final_response)),
                Err(err) => {
                    tracing::warn!(
                        "cannot assemble the {} stream for {}: {err}; nothing was recorded",
                        format.name(),
                        self.keyed_key
                    );
                    None
                }
            };
            if let Some(stored) = stored {
                if let Err(err) = self.store(stored, Some(format)).await {
                    tracing::error!("{err}");
                }
            }
            if let (Some(last), false) = (held, client_gone) {
                let _ = tx.send(Ok(last)).await;
            }
        });
        Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
    }

    /// Writes the recording according to `persist`.
    async fn store(self, body: StoredBody, stream: Option<StreamFormat>) -> Result<()> {
        if self.persist == Persist::Nothing {
            return Ok(());
        }
        let inner = &self.recorder.inner;
        let cassette = self.cassette(body, stream);
        let key = self.keyed_key.as_str();
        let document = cassette.to_document();
        match self.persist {
            Persist::Overwrite => inner.store.put(key, document).await?,
            Persist::CreateOnly => {
                if inner.store.put_if_absent(key, document).await? == Created::AlreadyExists {
                    tracing::info!("cassette {key} was recorded by another runner first; kept it");
                    return Ok(());
                }
            }
            Persist::Nothing => return Ok(()),
        }
        inner.counters.recorded.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn cassette(&self, response_body: StoredBody, stream: Option<StreamFormat>) -> Cassette {
        let redactor = &self.recorder.inner.redactor;
        let key_config = &self.recorder.inner.config.key;
        let request = &self.request;

        let mut request_body = StoredBody::from_bytes(&request.body);
        redact_body(redactor, &mut request_body);
        let mut response_body = response_body;
        redact_body(redactor, &mut response_body);

        let stored_request = StoredRequest {
            method: request.method.to_ascii_uppercase(),
            path: request.path.clone(),
            query: redactor.query(&request.query),
            headers: redactor
                .request_headers(&request.headers)
                .into_iter()
                .collect(),
            body: request_body,
        };
        let summary = response_body
            .as_json()
            .map(|v| stream::response_summary(self.profile, v));
        let mut cassette = Cassette {
            format: FORMAT_VERSION,
            key: self.keyed_key.to_string(),
            key_version: cassette_keying::KEY_VERSION,
            key_settings: Some(KeySettings::of(key_config)),
            recorded_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            tool: TOOL.to_owned(),
            target: request.target.clone(),
            upstream: self.upstream.clone(),
            request: stored_request,
            response: StoredResponse {
                status: self.status,
                headers: redactor
                    .response_headers(&self.headers)
                    .into_iter()
                    .collect::<BTreeMap<_, _>>(),
                body: response_body,
                stream: stream.map(|f| f.name().to_owned()),
            },
            meta: Meta {
                profile: self.profile.to_string(),
                requested_model: request_model(&request.body),
                response_model: summary.as_ref().and_then(|s| s.model.clone()),
                finish_reason: summary.as_ref().and_then(|s| s.finish_reason.clone()),
                usage: summary.and_then(|s| s.usage),
                latency_ms: self.started.elapsed().as_millis() as u64,
                request_redacted: false,
            },
        };
        cassette.meta.request_redacted =
            crate::miss::keyed_stored_request(&cassette, key_config).key != self.keyed_key;
        cassette
    }
}

/// Keys shorter than this are not added to the redaction rules: a short word ("local", "test")
/// would mangle every stored answer that contains it, and is no secret anyway.
const MIN_REDACTED_KEY: usize = 8;

/// The configured redactor, also replacing every route key wherever it would be stored (an
/// upstream that echoes the key in an error answer, say): keys never reach a cassette.
fn redactor_with_keys(config: &RecorderConfig) -> Result<Redactor> {
    let mut rules = config.redaction.clone();
    let user_rules = rules.patterns.len();
    rules.patterns.extend(
        config
            .routes
            .iter()
            .filter_map(|r| r.api_key.as_ref())
            .filter(|k| k.expose().len() >= MIN_REDACTED_KEY)
            .map(|k| regex::escape(k.expose())),
    );
    Redactor::new(&rules).or_else(|_| {
        // The error would quote the pattern, which is a key: name the user's rule instead, or
        // say what failed without the key.
        rules.patterns.truncate(user_rules);
        Redactor::new(&rules)?;
        Err(Error::Config(
            "a route key cannot be turned into a redaction rule (too long?)".to_owned(),
        ))
    })
}

fn redact_body(redactor: &Redactor, body: &mut StoredBody) {
    match body {
        StoredBody::Json(value) => redactor.json(value),
        StoredBody::Text(text) => *text = redactor.text(text),
        StoredBody::Empty | StoredBody::Base64(_) => {}
    }
}

/// Builds the replayed response: a re-synthesized stream when the request asks for one and the
/// recording holds a final response, else the stored body.
fn replay_response(
    profile: Profile,
    request_body: &[u8],
    cassette: Cassette,
    chunk_size: usize,
) -> std::result::Result<Response, String> {
    let request_json: Option<Value> = serde_json::from_slice(request_body).ok();
    let wants_stream = request_json
        .as_ref()
        .is_some_and(|b| stream::wants_stream(profile, b));
    let stored = cassette.response;
    let recorded_format = stored.stream.as_deref().and_then(StreamFormat::from_name);
    let mut headers: Vec<(String, String)> = stored.headers.into_iter().collect();

    let synthesize_as = match (recorded_format, stored.body.as_json()) {
        // Generic streams are only ever replayed as they were recorded.
        (Some(f @ (StreamFormat::GenericSse | StreamFormat::GenericNdjson)), Some(_)) => Some(f),
        (recorded, Some(_)) if wants_stream && (200..300).contains(&stored.status) => {
            recorded.or_else(|| StreamFormat::for_profile(profile))
        }
        _ => None,
    };
    let body = match (synthesize_as, stored.body.as_json()) {
        (Some(format), Some(final_response)) => {
            let include_usage = request_json.as_ref().is_some_and(stream::include_usage);
            let options = SynthesisOptions {
                chunk_size,
                include_usage,
            };
            let pieces =
                stream::synthesize(format, final_response, &options).map_err(|e| e.to_string())?;
            set_header(&mut headers, "content-type", format.content_type());
            set_header(&mut headers, "cache-control", "no-cache");
            ResponseBody::Stream(Box::pin(futures::stream::iter(
                pieces.into_iter().map(Ok::<_, std::io::Error>),
            )))
        }
        _ => {
            if recorded_format.is_some() {
                set_header(&mut headers, "content-type", "application/json");
            }
            ResponseBody::Full(stored.body.to_bytes()?)
        }
    };
    Ok(Response {
        status: stored.status,
        headers,
        body,
    })
}

fn set_header(headers: &mut Vec<(String, String)>, name: &str, value: &str) {
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    headers.push((name.to_owned(), value.to_owned()));
}

fn header_value(headers: &[(String, String)], name: &str) -> Option<String> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.clone())
}

/// Upstream headers fit to pass on: the server frames the body itself.
pub(crate) fn client_headers(headers: &[(String, String)]) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(n, _)| !HOP_BY_HOP.contains(&n.to_ascii_lowercase().as_str()))
        .cloned()
        .collect()
}

fn request_model(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    value.get("model")?.as_str().map(str::to_owned)
}

// For the MCP engine (`crate::mcp`), which answers through the same store, counters, usage log
// and upstream client as HTTP requests, so `cassette exec` and the proxy's stats see its hits
// and misses.
impl Recorder {
    pub(crate) fn count_hit(&self) {
        self.inner.counters.hits.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_miss(&self) {
        self.inner.counters.misses.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_recorded(&self) {
        self.inner.counters.recorded.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_upstream_request(&self) {
        let counters = &self.inner.counters;
        counters.upstream_requests.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_upstream_error(&self) {
        let counters = &self.inner.counters;
        counters.upstream_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn upstream_client(&self) -> Option<&Upstream> {
        self.inner.upstream.as_ref()
    }

    pub(crate) fn redactor(&self) -> &Redactor {
        &self.inner.redactor
    }
}
