//! Recording an HTTP exchange: an upstream answer (or, in adopt, a tape's answer standing for
//! it) becomes a cassette, handed to the one write path; a stream is relayed to the client
//! piece by piece while it is assembled.

use super::echo::Echo;
use super::flight::{Flight, Landed};
use super::relay::{Assembled, Relay, Relayed};
use super::write::{Stamp, Stored};
use super::{Asker, Recorder, Via};
use crate::config::{ErrorRecording, Sharing, StreamReplay};
use crate::error::{report, Error, Result};
use crate::mode::Write;
use crate::response::{BodyStream, Outcome, Response, ResponseBody, Source};
use crate::upstream::{client_headers, response_headers};
use bytes::Bytes;
use cassette_keying::{Key, Keyed, Profile};
use cassette_tape::document::{format_for, format_of};
use cassette_tape::headers::{declares_json, header, lowercased};
use cassette_tape::{
    Cassette, KeySettings, Meta, Request, Sequence, StoredBody, StoredRequest, StoredResponse,
    UpstreamFailure,
};
use cassette_wire::StreamFormat;
use futures::StreamExt;
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::mpsc;

/// What is known about a recording before its body is complete.
pub(super) struct Draft {
    pub(super) recorder: Recorder,
    pub(super) request: Request,
    pub(super) keyed_key: Key,
    /// Which occurrence of its request this is, when a later one (sequence mode).
    pub(super) sequence: Option<Sequence>,
    /// The key material of the request as received, when known: what indexes the recording
    /// when redaction changed nothing the key reads, without keying the request again.
    pub(super) material: Option<Value>,
    pub(super) profile: Profile,
    /// The test that made the request, when a test runner named one.
    pub(super) test: Option<String>,
    /// Whether the test's answers are its own (adopt): a create-only write that finds another
    /// test's recording stored keeps this answer apart when it differs.
    pub(super) sharing: Sharing,
    /// The route's base URL, without credentials.
    pub(super) upstream: String,
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    pub(super) started: Instant,
    pub(super) write: Write,
    /// The single flight this recording leads, if any.
    pub(super) flight: Option<Flight>,
    /// The upstream gave no answer: what it did instead (recorded with error recording on).
    pub(super) failure: Option<UpstreamFailure>,
}

/// The answer a recording stores.
pub(super) struct Answer {
    pub(super) body: StoredBody,
    /// The text of a whole JSON answer as the client got it, for `body_text`: sealing keeps
    /// it (or its member order, when redaction changed the answer).
    pub(super) text: Option<String>,
    pub(super) stream: Option<StreamFormat>,
    pub(super) events: Option<Vec<Value>>,
}

impl Answer {
    /// A whole answer (not a stream), as received.
    pub(super) fn whole(bytes: &[u8]) -> Answer {
        let body = StoredBody::from_bytes(bytes);
        let text = match body {
            StoredBody::Json(_) => std::str::from_utf8(bytes).ok().map(str::to_owned),
            _ => None,
        };
        Answer {
            body,
            text,
            stream: None,
            events: None,
        }
    }

    /// A stream's assembled answer, with its events when exact streams are kept.
    pub(super) fn streamed(
        body: StoredBody,
        format: StreamFormat,
        events: Option<Vec<Value>>,
    ) -> Answer {
        Answer {
            body,
            text: None,
            stream: Some(format),
            events,
        }
    }
}

impl Draft {
    /// Tells the requests waiting for this recording how it ended.
    pub(super) fn land(&mut self, landed: Landed) {
        if let Some(flight) = self.flight.take() {
            flight.land(landed);
        }
    }

    /// Reports a recording that was to be stored and was not (counted and logged when the mode
    /// records; a warning in mode `off`, where nothing is stored anyway).
    fn fail(&self, reason: String) {
        match self.write {
            Write::Nothing => tracing::warn!("{reason}"),
            Write::Overwrite | Write::CreateOnly => {
                self.recorder.record_failure(&self.keyed_key, reason);
            }
        }
    }

    /// Forwards an upstream stream piece by piece as it arrives while assembling it, and stores
    /// the assembled response before the body ends, so a client that has read a whole stream
    /// can replay it at once. A stream that breaks off or cannot be assembled is not stored
    /// and counts as a failed recording. A stream that grows over the answer limit is not
    /// stored either: when it was to be recorded, the client gets the whole events sent so
    /// far and an error event naming the limit, and nothing more; otherwise (mode `off`) it is
    /// passed on whole, no longer assembled. Either way memory stays within the limit.
    /// With `echo`, the route's key the upstream echoes is replaced in what the client gets,
    /// also when it is split across pieces or spelled across events' text (the recording is
    /// redacted by the store).
    pub(super) fn relay_stream(
        mut self,
        format: StreamFormat,
        response: Body,
        echo: Option<Echo>,
    ) -> BodyStream {
        let mut echo = echo.map(|echo| echo.stream(format));
        let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(16);
        let config = &self.recorder.inner.config;
        let mut relay = Relay::new(
            format,
            self.upstream.clone(),
            config.stream_replay == StreamReplay::Exact,
            config.errors == ErrorRecording::Record,
            config.max_answer,
            self.write != Write::Nothing,
        );
        tokio::spawn(async move {
            let mut upstream = response.into_stream();
            // The client may hang up; reading goes on so the recording completes.
            let mut client = Some(tx);
            while let Some(piece) = upstream.next().await {
                let bytes = match piece {
                    Ok(bytes) => bytes,
                    Err(err) => {
                        if let (Some(echo), Some(tx)) = (&mut echo, &client) {
                            let _ = tx.send(Ok(echo.finish())).await;
                        }
                        self.broke_off(format, err, client.as_ref(), relay.assembling())
                            .await;
                        return;
                    }
                };
                let bytes = match relay.chunk(bytes) {
                    Relayed::Pass(bytes) => bytes,
                    Relayed::PassOverLimit(bytes) => {
                        tracing::warn!(
                            "the {} stream from upstream {} is over the answer limit of {} \
                             bytes; passed on, no longer assembled",
                            format.name(),
                            self.upstream,
                            self.recorder.inner.config.max_answer
                        );
                        bytes
                    }
                    Relayed::Cut { ending, error } => {
                        self.fail(report(&error));
                        self.land(Landed::NotStored);
                        if let Some(tx) = client.take() {
                            for piece in ending {
                                // Each piece of the ending ends an event or the body: what
                                // was held back goes with it.
                                let piece = match (&mut echo, piece) {
                                    (Some(echo), Ok(bytes)) => {
                                        let mut out = echo.chunk(bytes).to_vec();
                                        out.extend_from_slice(&echo.finish());
                                        Ok(Bytes::from(out))
                                    }
                                    (Some(echo), Err(err)) => {
                                        let _ = tx.send(Ok(echo.finish())).await;
                                        Err(err)
                                    }
                                    (None, piece) => piece,
                                };
                                let _ = tx.send(piece).await;
                            }
                        }
                        return;
                    }
                };
                let bytes = match &mut echo {
                    Some(echo) => echo.chunk(bytes),
                    None => bytes,
                };
                if let Some(tx) = &client {
                    if !bytes.is_empty() && tx.send(Ok(bytes)).await.is_err() {
                        client = None;
                    }
                }
            }
            if let (Some(echo), Some(tx)) = (&mut echo, &client) {
                let held = echo.finish();
                if !held.is_empty() && tx.send(Ok(held)).await.is_err() {
                    client = None;
                }
            }
            match relay.finish() {
                None => return,
                Some(Ok(Assembled {
                    body,
                    format,
                    events,
                })) => match self.store(Answer::streamed(body, format, events)).await {
                    Ok(Stored::Nothing) => {}
                    // Its key was logged before it was stored (`Recorder::write`).
                    Ok(Stored::Won | Stored::Kept) => self.land(Landed::Stored),
                    Err(err) => self.fail(report(&err)),
                },
                Some(Err(err)) => self.fail(format!(
                    "the {} stream from upstream {} cannot be assembled: {err}",
                    format.name(),
                    self.upstream
                )),
            }
            // `client` goes here: the body ends only now, after the recording was stored.
            drop(client);
        });
        Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
    }

    /// The upstream broke off the stream: counted, the client told, and a recording under way
    /// failed.
    async fn broke_off(
        &self,
        format: StreamFormat,
        err: reqwest::Error,
        client: Option<&mpsc::Sender<std::io::Result<Bytes>>>,
        assembling: bool,
    ) {
        // The URL may hold a route's key (a `query:` auth style).
        let err = err.without_url();
        let counters = &self.recorder.inner.counters;
        counters.upstream_errors.fetch_add(1, Ordering::Relaxed);
        let reason = format!(
            "upstream {} broke off the {} stream: {}",
            self.upstream,
            format.name(),
            report(&err)
        );
        if let Some(tx) = client {
            let _ = tx.send(Err(std::io::Error::other(reason.clone()))).await;
        }
        if assembling {
            self.fail(reason);
        }
    }

    /// Writes the recording as `write` says, made now.
    pub(super) async fn store(&mut self, answer: Answer) -> Result<Stored> {
        let stamp = Stamp::now(self.started.elapsed().as_millis() as u64);
        self.store_stamped(answer, stamp).await
    }

    /// Writes the recording as `write` says, with its provenance; what it did (a create-only
    /// write that lost keeps the other recording).
    pub(super) async fn store_stamped(&mut self, answer: Answer, stamp: Stamp) -> Result<Stored> {
        if self.write == Write::Nothing {
            return Ok(Stored::Nothing);
        }
        let cassette = self.cassette(answer);
        let material = self.material.take();
        let own = self.sharing == Sharing::Own && self.write == Write::CreateOnly;
        let apart = own.then(|| (cassette.clone(), stamp.clone()));
        let stored = self
            .recorder
            .write(cassette, stamp, self.write, material)
            .await?;
        match (stored, apart) {
            (Stored::Kept, Some((cassette, stamp))) => {
                self.recorder.keep_apart(cassette, stamp).await
            }
            (stored, _) => {
                // Only an overwrite needs remembering: the other writes read the store first.
                if stored == Stored::Won && self.write == Write::Overwrite {
                    self.recorder.note_recorded_here(&self.keyed_key);
                }
                Ok(stored)
            }
        }
    }

    /// The cassette of this exchange as received; the write path seals it.
    pub(super) fn cassette(&self, answer: Answer) -> Cassette {
        let Answer {
            body: response_body,
            text: body_text,
            stream,
            events,
        } = answer;
        let request = &self.request;
        let mut cassette = Cassette {
            format: format_for(self.sequence.as_ref(), None),
            key: self.keyed_key.clone(),
            key_version: cassette_keying::KEY_VERSION,
            key_settings: Some(KeySettings::of(&self.recorder.inner.config.key)),
            sequence: self.sequence.clone(),
            test_scope: None,
            // Stamped by the write path.
            recorded_at: String::new(),
            tool: String::new(),
            target: request.target.clone(),
            upstream: self.upstream.clone(),
            request: StoredRequest {
                method: request.method.to_ascii_uppercase(),
                path: request.path.clone(),
                query: request.query.clone(),
                headers: lowercased(&request.headers),
                body: StoredBody::from_bytes(&request.body),
            },
            response: StoredResponse {
                status: self.status,
                headers: lowercased(&self.headers),
                body: response_body,
                stream: stream.map(|f| f.name().to_owned()),
                events,
                body_text,
                failure: self.failure,
            },
            meta: Meta {
                profile: self.profile.to_string(),
                test: self.test.clone(),
                ..Meta::default()
            },
        };
        cassette.format = format_of(&cassette);
        cassette
    }
}

// The record path of the engine: calling the upstream and recording what it answers.
impl Recorder {
    /// Calls the upstream and hands its answer on, recording it as `write` says (and not at
    /// all when it is an error answer the configuration does not record). `flight`, the single
    /// flight this request leads, lands once the recording is stored or given up.
    pub(super) async fn forward(
        &self,
        upstream: Via<'_>,
        request: Request,
        mut keyed: Keyed,
        write: Write,
        flight: Option<Flight>,
        asker: Asker,
    ) -> Result<Outcome> {
        // The canonical text is as large as the request and no longer needed: a large request
        // is not held twice while the upstream answers.
        keyed.canonical = String::new();
        let started = Instant::now();
        let mut sent = match self.send(upstream, &request, asker.test.as_deref()).await {
            Ok(sent) => sent,
            Err(err) => {
                let upstream = match upstream {
                    Via::Network(_) => self.inner.config.route(&request.target),
                    Via::Tapes(_) => None,
                };
                let Some(route) = upstream else {
                    return Err(err);
                };
                let failure = match &err {
                    Error::Upstream {
                        timed_out,
                        connected: true,
                        ..
                    } => {
                        let after_ms = started.elapsed().as_millis() as u64;
                        Some(match timed_out {
                            true => UpstreamFailure::Timeout { after_ms },
                            false => UpstreamFailure::Reset { after_ms },
                        })
                    }
                    _ => None,
                };
                let write = match self.inner.config.errors {
                    ErrorRecording::Record => write,
                    ErrorRecording::PassThrough => Write::Nothing,
                };
                let (Some(failure), true) = (failure, write != Write::Nothing) else {
                    return Err(err);
                };
                let mut draft = Draft {
                    recorder: self.clone(),
                    upstream: self.inner.redactor.url(&route.base_url),
                    request,
                    keyed_key: keyed.key.clone(),
                    sequence: Sequence::of(&keyed),
                    material: Some(std::mem::take(&mut keyed.material)),
                    profile: keyed.profile,
                    test: asker.test,
                    sharing: asker.sharing,
                    status: 0,
                    headers: Vec::new(),
                    started,
                    write,
                    flight,
                    failure: Some(failure),
                };
                // Kept like an error answer; the client gets the error as it would without,
                // told that it was recorded.
                let mut err = err;
                match draft.store(Answer::whole(b"")).await {
                    Ok(Stored::Won | Stored::Kept) => {
                        draft.land(Landed::Stored);
                        if let Error::Upstream { recorded, .. } = &mut err {
                            *recorded = true;
                        }
                    }
                    Ok(Stored::Nothing) => {}
                    Err(store) => self.record_failure(&keyed.key, report(&store)),
                }
                return Err(err);
            }
        };
        let status = sent.status;
        let mut headers = std::mem::take(&mut sent.headers);
        let mut client = client_headers(&headers);
        sandbox_locations(&sent, &request.target, &mut headers, &mut client);
        let echo = sent.echo.take();
        if let Some(echo) = &echo {
            for (_, value) in client.iter_mut() {
                *value = echo.text(value);
            }
        }
        let success = (200..300).contains(&status);
        let keep = success || self.inner.config.errors == ErrorRecording::Record;
        let mut write = if keep { write } else { Write::Nothing };
        let encoding = undecoded_encoding(&headers);
        if let (Some(encoding), true) = (&encoding, write != Write::Nothing) {
            let reason = format!(
                "upstream {} answered with content-encoding `{encoding}`, which cassette cannot \
                 decode; the answer was passed on as sent",
                sent.endpoint
            );
            self.record_failure(&keyed.key, reason);
            write = Write::Nothing;
        }
        // Only a successful, readable answer is a stream worth re-assembling; anything else is
        // kept as sent.
        let format = (success && encoding.is_none())
            .then(|| {
                let content_type = header(&headers, "content-type").unwrap_or_default();
                let wants_stream = keyed.streaming.wanted;
                StreamFormat::detect_for_request(keyed.profile, wants_stream, content_type)
            })
            .flatten();
        let draft = Draft {
            recorder: self.clone(),
            request,
            keyed_key: keyed.key.clone(),
            sequence: Sequence::of(&keyed),
            material: Some(std::mem::take(&mut keyed.material)),
            profile: keyed.profile,
            test: asker.test,
            sharing: asker.sharing,
            upstream: sent.upstream,
            status,
            headers,
            started: sent.started,
            write,
            flight,
            failure: None,
        };
        let Some(format) = format else {
            return self
                .relay_whole(draft, keyed, client, &sent.endpoint, sent.body, echo)
                .await;
        };
        // The headers go out before the stream is complete: what is known now is that it is
        // being recorded. Whether it was stored shows in the counters and the log.
        let source = match write {
            Write::Nothing => Source::PassedThrough,
            Write::Overwrite | Write::CreateOnly => Source::Recording,
        };
        Ok(Outcome {
            key: keyed.key,
            source,
            response: Response {
                status,
                headers: client,
                body: ResponseBody::Stream(draft.relay_stream(format, sent.body, echo)),
            },
        })
    }

    /// Reads a whole answer, records it, and answers with it, or with the answer another
    /// recorder stored first for the same key (so every client of a key gets the kept answer).
    /// A success that declares JSON but does not parse (a truncated or garbled body) is an
    /// upstream error: passed on and never recorded, not even when error answers are, since
    /// it would replay as a success the client cannot read, forever (error recording keeps the
    /// upstream's error answers, which say what they are). With `echo`, the client gets the
    /// answer without the route's key it may echo.
    async fn relay_whole(
        &self,
        mut draft: Draft,
        keyed: Keyed,
        client: Vec<(String, String)>,
        endpoint: &str,
        response: Body,
        echo: Option<Echo>,
    ) -> Result<Outcome> {
        let limit = self.inner.config.max_answer;
        let bytes = match response.read_whole(limit).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                let err = Error::AnswerTooLarge {
                    endpoint: endpoint.to_owned(),
                    limit,
                };
                if draft.write != Write::Nothing {
                    self.record_failure(&keyed.key, report(&err));
                }
                return Err(err);
            }
            Err(e) => {
                let counters = &self.inner.counters;
                counters.upstream_errors.fetch_add(1, Ordering::Relaxed);
                // The URL may hold a route's key (a `query:` auth style).
                let e = e.without_url();
                let timeout = self.inner.config.upstream_timeout;
                let err = crate::upstream::upstream_error(endpoint, &e, timeout);
                if draft.write != Write::Nothing {
                    self.record_failure(&keyed.key, crate::error::report(&err));
                }
                return Err(err);
            }
        };
        let status = draft.status;
        if (200..300).contains(&status) && declares_json(&draft.headers) {
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
                let counters = &self.inner.counters;
                counters.upstream_errors.fetch_add(1, Ordering::Relaxed);
                let reason = format!(
                    "upstream {endpoint} answered {status} with a body declared as JSON that \
                     does not parse ({e}): an upstream error, passed on as sent and not \
                     recorded (it would replay as a broken success)"
                );
                match draft.write {
                    Write::Nothing => tracing::warn!("{reason}"),
                    Write::Overwrite | Write::CreateOnly => {
                        self.record_failure(&keyed.key, reason);
                        draft.write = Write::Nothing;
                    }
                }
            }
        }
        let source = match draft.store(Answer::whole(&bytes)).await {
            Ok(Stored::Won) => Source::Recorded,
            Ok(Stored::Nothing) => Source::PassedThrough,
            Ok(Stored::Kept) => {
                draft.land(Landed::Stored);
                if let Some(cassette) = self.lookup(&keyed).await? {
                    return self.replay(&draft.request, keyed, cassette);
                }
                Source::PassedThrough
            }
            Err(err) => {
                self.record_failure(&keyed.key, crate::error::report(&err));
                return Err(err);
            }
        };
        if source == Source::Recorded {
            draft.land(Landed::Stored);
        }
        let bytes = match &echo {
            Some(echo) => echo.whole(bytes),
            None => bytes,
        };
        Ok(Outcome {
            key: keyed.key,
            source,
            response: Response {
                status,
                headers: client,
                body: ResponseBody::Full(bytes),
            },
        })
    }

    /// Sends `request` to its route's upstream (or has the tapes of `test` answer it),
    /// counting the call and a failure to get an answer. The body of the answer is left to
    /// stream.
    async fn send(&self, via: Via<'_>, request: &Request, test: Option<&str>) -> Result<Sent> {
        let inner = &self.inner;
        let route = inner
            .config
            .route(&request.target)
            .ok_or_else(|| Error::NoUpstream {
                target: request.target.clone(),
            })?;
        let counters = &inner.counters;
        counters.upstream_requests.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let via_network = matches!(via, Via::Network(_));
        let answered =
            match via {
                Via::Network(upstream) => upstream.send(route, request, &inner.redactor).await.map(
                    |(endpoint, response)| {
                        let status = response.status().as_u16();
                        let headers = response_headers(&response);
                        (endpoint, status, headers, Body::Network(response))
                    },
                ),
                Via::Tapes(deck) => {
                    let key = &inner.config.key;
                    crate::tapes::answer(deck, route, request, test, key, &inner.redactor).map(
                        |answer| {
                            let body = Body::Tape(answer.body);
                            (answer.endpoint, answer.status, answer.headers, body)
                        },
                    )
                }
            };
        let (endpoint, status, headers, body) = answered.inspect_err(|_| {
            counters.upstream_errors.fetch_add(1, Ordering::Relaxed);
        })?;
        // Only the key the proxy itself added is kept from the client; a route without one
        // passes the answer on untouched.
        let echo = match (via_network, &route.api_key) {
            (true, Some(key)) => Echo::new(key.expose()),
            _ => None,
        };
        Ok(Sent {
            echo,
            upstream: inner.redactor.url(&route.base_url),
            endpoint,
            status,
            headers,
            body,
            started,
        })
    }
}

/// An upstream answer whose headers have arrived.
struct Sent {
    /// The route's base URL, without credentials: what the cassette records as its upstream.
    upstream: String,
    /// The URL called, without credentials, for messages.
    endpoint: String,
    status: u16,
    /// The answer's headers that HTTP can carry as text.
    headers: Vec<(String, String)>,
    body: Body,
    started: Instant,
    /// The scrubber of the route's key, when the proxy sent one.
    echo: Option<Echo>,
}

/// The body of an answer: the upstream's, still arriving, or a tape's, whole.
pub(super) enum Body {
    Network(reqwest::Response),
    Tape(Bytes),
}

impl Body {
    /// The body piece by piece, as it arrives.
    fn into_stream(
        self,
    ) -> futures::stream::BoxStream<'static, std::result::Result<Bytes, reqwest::Error>> {
        match self {
            Body::Network(response) => response.bytes_stream().boxed(),
            Body::Tape(bytes) => futures::stream::once(async move { Ok(bytes) }).boxed(),
        }
    }

    /// The whole body, or `None` when it is over `limit` bytes.
    async fn read_whole(self, limit: usize) -> std::result::Result<Option<Bytes>, reqwest::Error> {
        match self {
            Body::Network(response) => read_whole(response, limit).await,
            Body::Tape(bytes) => Ok((bytes.len() <= limit).then_some(bytes)),
        }
    }
}

/// The `content-encoding` still on an answer after the HTTP client decoded what it can (gzip,
/// deflate, br): an encoding cassette cannot turn into a readable body.
fn undecoded_encoding(headers: &[(String, String)]) -> Option<String> {
    let encodings: Vec<&str> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-encoding"))
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty() && !e.eq_ignore_ascii_case("identity"))
        .collect();
    (!encodings.is_empty()).then(|| encodings.join(", "))
}

/// Keeps redirects inside the sandbox: a `Location` that leads back under the route's upstream
/// is pointed at the same place through the proxy, for the client and in the recording; one
/// that leads anywhere else is passed to the live client as sent but never stored, so replay
/// can never send a redirect-following client out to the network. The URL of a next request
/// (an upload's) is pointed through the proxy for the client only, and stored as sent.
fn sandbox_locations(
    sent: &Sent,
    target: &str,
    stored: &mut Vec<(String, String)>,
    client: &mut [(String, String)],
) {
    let through_proxy = |value: &str| {
        crate::upstream::location_through_proxy(value, &sent.endpoint, &sent.upstream, target)
    };
    stored.retain_mut(|(name, value)| {
        if !name.eq_ignore_ascii_case("location") {
            return true;
        }
        match through_proxy(value) {
            Some(local) => {
                *value = local;
                true
            }
            None => false,
        }
    });
    for (name, value) in client.iter_mut() {
        if name.eq_ignore_ascii_case("location") {
            if let Some(local) = through_proxy(value) {
                *value = local;
            }
        } else if crate::upstream::is_next_url_header(name) {
            // Stored as the upstream sent it (less credentials, by redaction); the client is
            // sent to the same place through the proxy, so the next request is recorded too.
            let local = crate::upstream::next_url_through_proxy(
                value,
                &sent.endpoint,
                &sent.upstream,
                target,
            );
            if let Some(local) = local {
                *value = local;
            }
        }
    }
}

/// The whole body of an answer, or `None` when it is over `limit` bytes (said by its
/// `content-length`, or found while reading, which then stops).
pub(crate) async fn read_whole(
    mut response: reqwest::Response,
    limit: usize,
) -> std::result::Result<Option<Bytes>, reqwest::Error> {
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Ok(None);
    }
    let mut body = bytes::BytesMut::new();
    while let Some(piece) = response.chunk().await? {
        if body.len() + piece.len() > limit {
            return Ok(None);
        }
        if body.is_empty() && response.content_length() == Some(piece.len() as u64) {
            // The whole body in one piece: no copy.
            return Ok(Some(piece));
        }
        body.extend_from_slice(&piece);
    }
    Ok(Some(body.freeze()))
}
