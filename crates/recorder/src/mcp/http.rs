//! Streamable HTTP MCP servers behind a proxy route (one named in
//! [`RecorderConfig::mcp_routes`](crate::RecorderConfig::mcp_routes)): `POST`ed JSON-RPC
//! requests are keyed with the `mcp` profile (the route name is the server), answers that come
//! as JSON or as server-sent events are stored as their JSON-RPC messages, and replay answers
//! in the recorded form with the client's id and session.
//!
//! * The `Mcp-Session-Id` header is never keyed. Replaying an `initialize` issues a fresh
//!   session id; other replayed answers carry the client's own.
//! * `GET` (a stream for messages the server starts on its own) is answered 405 in every mode,
//!   which the protocol allows, so a client behaves the same in record and replay.
//! * Notifications and the client's answers to server requests get 202 in replay and are
//!   relayed, never stored, otherwise; `DELETE` ends a session (relayed when a server is
//!   there).

use super::engine::{Answer, McpCall, McpRecorder, Recording, Transcript};
use super::message::{self, id_text, Message, INVALID_REQUEST};
use crate::engine::read_whole;
use crate::engine::Recorder;
use crate::error::{report, Error, Result};
use crate::mode::{Mode, Write};
use crate::response::{Outcome, Response, ResponseBody, Source};
use crate::upstream::{client_headers, response_headers, upstream_error};
use bytes::Bytes;
use cassette_keying::{Key, Keyed};
use cassette_tape::headers::header;
use cassette_tape::Request;
use cassette_wire::framing::{LineSplitter, SseParser};
use futures::StreamExt;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio::sync::mpsc;

/// The session header of Streamable HTTP.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// The `response.stream` value of an answer that came as server-sent events.
const SSE: &str = cassette_tape::mcp::SSE_STREAM;

/// Answers one HTTP request to an MCP route, through the recorder's own index, counters and
/// write path (the MCP recorder is only the route's name over them).
pub(crate) async fn handle(recorder: &Recorder, request: Request) -> Result<Outcome> {
    let server = request.target.clone();
    let engine = McpRecorder::new(
        recorder.clone(),
        &server,
        &upstream_label(recorder, &server),
    );
    match request.method.to_ascii_uppercase().as_str() {
        "POST" => post(&engine, request).await,
        "DELETE" if recorder.mode() != Mode::Replay => relay(&engine, request).await,
        "DELETE" => Ok(simple(&request, 200, Source::Replayed)),
        _ => Ok(Outcome {
            key: unkeyed(&server),
            source: Source::PassedThrough,
            response: Response {
                status: 405,
                headers: vec![("allow".into(), "POST, DELETE".into())],
                body: ResponseBody::Full(Bytes::new()),
            },
        }),
    }
}

fn upstream_label(recorder: &Recorder, server: &str) -> String {
    recorder
        .config()
        .route(server)
        .map(|r| r.base_url.clone())
        .unwrap_or_default()
}

async fn post(engine: &McpRecorder, request: Request) -> Result<Outcome> {
    let value: Value = serde_json::from_slice(&request.body).map_err(|e| {
        Error::InvalidRequest(format!(
            "an MCP request body must be one JSON-RPC message: {e}"
        ))
    })?;
    let call = match Message::classify(&value) {
        Ok(Message::Request { id, method, params }) => McpCall { id, method, params },
        Ok(Message::Notification { .. } | Message::Response { .. }) => {
            return match engine.mode() {
                Mode::Replay => Ok(simple(&request, 202, Source::Replayed)),
                _ => relay(engine, request).await,
            };
        }
        Err(reason) => {
            let id = value.get("id").cloned().unwrap_or(Value::Null);
            let line =
                message::error_line(&id, INVALID_REQUEST, &format!("cassette: {reason}"), None);
            let key = unkeyed(&request.target);
            return Ok(json_rpc(&request, key, line, Source::PassedThrough));
        }
    };
    // Keyed once per request: in sequence mode this counts the occurrence.
    let keyed = engine.key_in_session(&call);
    match engine.answer(&call, &keyed).await? {
        Answer::Replay(messages) => replayed(engine, &request, &call, keyed, messages).await,
        Answer::Miss(miss) => {
            tracing::warn!("{miss}");
            let line = miss.error_line(&call.id);
            Ok(json_rpc(&request, keyed.key, line, Source::Missed))
        }
        Answer::Forward(write) => forward(engine, request, call, keyed, write).await,
    }
}

/// A replayed answer: server-sent events when it was recorded as such and the client accepts
/// them, else JSON (the response alone).
async fn replayed(
    engine: &McpRecorder,
    request: &Request,
    call: &McpCall,
    keyed: Keyed,
    messages: Vec<Value>,
) -> Result<Outcome> {
    let (recorded_sse, stored_headers) = recorded_form(engine, &keyed).await?;
    let accepts_sse = header(&request.headers, "accept")
        .is_some_and(|accept| accept.contains("text/event-stream"));
    let mut headers: Vec<(String, String)> = stored_headers
        .into_iter()
        .filter(|(name, _)| {
            !matches!(
                name.as_str(),
                "content-type" | "content-length" | "cache-control" | SESSION_HEADER
            )
        })
        .collect();
    let body = if recorded_sse && accepts_sse {
        headers.push(("content-type".into(), "text/event-stream".into()));
        headers.push(("cache-control".into(), "no-cache".into()));
        let mut out = String::new();
        for message in &messages {
            out.push_str("event: message\ndata: ");
            out.push_str(&message.to_string());
            out.push_str("\n\n");
        }
        out
    } else {
        headers.push(("content-type".into(), "application/json".into()));
        messages.last().map(Value::to_string).unwrap_or_default()
    };
    if let Some(session) = replayed_session(request, call) {
        headers.push((SESSION_HEADER.into(), session));
    }
    Ok(Outcome {
        key: keyed.key,
        source: Source::Replayed,
        response: Response {
            status: 200,
            headers,
            body: ResponseBody::Full(Bytes::from(body)),
        },
    })
}

/// The session a replayed answer carries: a new one for `initialize` (so two replaying
/// clients never share one), the client's own for everything else.
fn replayed_session(request: &Request, call: &McpCall) -> Option<String> {
    if call.method == "initialize" {
        return Some(new_session_id());
    }
    header(&request.headers, SESSION_HEADER).map(str::to_owned)
}

fn new_session_id() -> String {
    static ISSUED: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = format!(
        "{nanos}-{}-{}",
        std::process::id(),
        ISSUED.fetch_add(1, Ordering::Relaxed)
    );
    cassette_keying::sha256_hex(seed.as_bytes())[..32].to_owned()
}

/// Whether the recording came as server-sent events, and its stored response headers.
async fn recorded_form(
    engine: &McpRecorder,
    keyed: &Keyed,
) -> Result<(bool, Vec<(String, String)>)> {
    let store = engine.recorder().store();
    let Some(bytes) = store.get(&keyed.key).await? else {
        return Ok((false, Vec::new()));
    };
    let cassette =
        cassette_tape::Cassette::from_stored(&bytes, &keyed.key).map_err(|e| Error::Corrupt {
            key: keyed.key.clone(),
            location: store.location(),
            reason: e.to_string(),
        })?;
    Ok((
        cassette.response.stream.as_deref() == Some(SSE),
        cassette.response.headers.into_iter().collect(),
    ))
}

/// Sends the call to the server and records its answer (JSON or server-sent events) before
/// the client sees the response message.
async fn forward(
    engine: &McpRecorder,
    request: Request,
    call: McpCall,
    keyed: Keyed,
    write: Write,
) -> Result<Outcome> {
    let started = Instant::now();
    let (endpoint, response) = send(engine, &request).await?;
    let status = response.status().as_u16();
    let headers = response_headers(&response);
    let is_sse = header(&headers, "content-type")
        .is_some_and(|t| t.trim_start().starts_with("text/event-stream"));
    // Only a successful answer is recorded; an error status passes through.
    let write = if (200..300).contains(&status) {
        write
    } else {
        Write::Nothing
    };
    let draft = Draft {
        engine: engine.clone(),
        call,
        keyed: keyed.clone(),
        started,
        write,
        endpoint: endpoint.clone(),
        transcript: Transcript {
            request_headers: request.headers.clone(),
            status,
            response_headers: headers.clone(),
            sse: is_sse,
            latency_ms: 0,
        },
    };
    let mut source = match write {
        Write::Nothing => Source::PassedThrough,
        Write::Overwrite | Write::CreateOnly => Source::Recorded,
    };
    let body = if is_sse {
        ResponseBody::Stream(draft.relay_sse(response))
    } else {
        let limit = engine.recorder().config().max_answer;
        let bytes = match read_whole(response, limit).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                let err = Error::AnswerTooLarge { endpoint, limit };
                if draft.write != Write::Nothing {
                    engine.recorder().record_failure(&keyed.key, report(&err));
                }
                return Err(err);
            }
            Err(e) => {
                engine.recorder().count_upstream_error();
                let timeout = engine.recorder().config().upstream_timeout;
                return Err(upstream_error(&endpoint, &e, timeout));
            }
        };
        // Only the response to this call is a recording: a success whose body is not one
        // (not JSON, another id, not a response) would replay as a cassette that cannot be
        // read, forever.
        let want = id_text(&draft.call.id);
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(value)
                if matches!(Message::classify(&value),
                    Ok(Message::Response { id, .. }) if id_text(&id) == want) =>
            {
                draft.finish(Vec::new(), value).await;
            }
            _ if draft.write != Write::Nothing => {
                source = Source::PassedThrough;
                engine.recorder().record_failure(
                    &keyed.key,
                    format!(
                        "the MCP server {endpoint} answered {status} with a body that is not \
                         the JSON-RPC response to request {want}; passed on, not recorded"
                    ),
                );
            }
            _ => {}
        }
        ResponseBody::Full(bytes)
    };
    Ok(Outcome {
        key: keyed.key,
        source,
        response: Response {
            status,
            headers: client_headers(&headers),
            body,
        },
    })
}

/// Relays a message that is not recorded (a notification, the client's answer to a server
/// request, the end of a session) and passes the answer through.
async fn relay(engine: &McpRecorder, request: Request) -> Result<Outcome> {
    let key = unkeyed(&request.target);
    let (endpoint, response) = send(engine, &request).await?;
    let status = response.status().as_u16();
    let headers = response_headers(&response);
    let stream = response.bytes_stream().map(move |piece| {
        piece.map_err(|e| std::io::Error::other(format!("{endpoint} broke off: {e}")))
    });
    Ok(Outcome {
        key,
        source: Source::PassedThrough,
        response: Response {
            status,
            headers: client_headers(&headers),
            body: ResponseBody::Stream(Box::pin(stream)),
        },
    })
}

async fn send(engine: &McpRecorder, request: &Request) -> Result<(String, reqwest::Response)> {
    let recorder = engine.recorder();
    let route = recorder
        .config()
        .route(&request.target)
        .ok_or_else(|| Error::NoUpstream {
            target: request.target.clone(),
        })?;
    let upstream = recorder.upstream(&request.target)?;
    recorder.count_upstream_request();
    // Only a key configured for this very route is sent; an LLM route's key never is.
    upstream
        .send(route, request, recorder.redactor())
        .await
        .inspect_err(|_| recorder.count_upstream_error())
}

/// What is known about a call while its answer streams in.
#[derive(Clone)]
struct Draft {
    engine: McpRecorder,
    call: McpCall,
    keyed: Keyed,
    started: Instant,
    write: Write,
    transcript: Transcript,
    /// The server's URL as shown (without credentials), for messages.
    endpoint: String,
}

impl Draft {
    async fn finish(mut self, notifications: Vec<Value>, response: Value) {
        self.transcript.latency_ms = self.started.elapsed().as_millis() as u64;
        let recording = Recording {
            notifications,
            response,
        };
        self.engine
            .store_or_log(
                &self.call,
                &self.keyed,
                &recording,
                &self.transcript,
                self.write,
            )
            .await;
    }

    /// Passes the events on as they arrive while reading their messages; the piece that
    /// completes the response message is held until the recording is stored.
    fn relay_sse(self, response: reqwest::Response) -> crate::BodyStream {
        let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(16);
        tokio::spawn(async move {
            let mut upstream = response.bytes_stream();
            let mut lines = LineSplitter::new("mcp.sse");
            let mut parser = SseParser::default();
            let mut notifications = Vec::new();
            let mut draft = Some(self);
            let want = draft.as_ref().map(|d| id_text(&d.call.id));
            let limit = draft
                .as_ref()
                .map_or(usize::MAX, |d| d.engine.recorder().config().max_answer);
            let mut received = 0usize;
            while let Some(piece) = upstream.next().await {
                let bytes = match piece {
                    Ok(bytes) => bytes,
                    Err(err) => {
                        let _ = tx
                            .send(Err(std::io::Error::other(format!(
                                "the MCP server broke off the stream: {err}; nothing was recorded"
                            ))))
                            .await;
                        return;
                    }
                };
                received = received.saturating_add(bytes.len());
                if received > limit {
                    // Passed on as it comes, no longer read: a runaway stream is never held.
                    if let Some(draft) = draft.take() {
                        notifications = Vec::new();
                        let err = Error::AnswerTooLarge {
                            endpoint: draft.endpoint.clone(),
                            limit,
                        };
                        if draft.write != Write::Nothing {
                            let recorder = draft.engine.recorder();
                            recorder.record_failure(&draft.keyed.key, report(&err));
                        }
                    }
                }
                let mut split = Vec::new();
                if draft.is_some() && lines.push(&bytes, &mut split).is_ok() {
                    for line in &split {
                        let Some(event) = parser.line(line) else {
                            continue;
                        };
                        let Ok(message) = serde_json::from_str::<Value>(&event.data) else {
                            continue;
                        };
                        match Message::classify(&message) {
                            Ok(Message::Notification { .. }) => notifications.push(message),
                            Ok(Message::Response { id, .. }) if Some(id_text(&id)) == want => {
                                if let Some(draft) = draft.take() {
                                    draft
                                        .finish(std::mem::take(&mut notifications), message)
                                        .await;
                                }
                            }
                            _ => {}
                        }
                    }
                }
                if tx.send(Ok(bytes)).await.is_err() && draft.is_none() {
                    return;
                }
            }
        });
        Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
    }
}

/// An answer of cassette's own with a JSON-RPC body.
fn json_rpc(request: &Request, key: Key, line: String, source: Source) -> Outcome {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    if let Some(session) = header(&request.headers, SESSION_HEADER) {
        headers.push((SESSION_HEADER.into(), session.to_owned()));
    }
    Outcome {
        key,
        source,
        response: Response {
            status: 200,
            headers,
            body: ResponseBody::Full(Bytes::from(line)),
        },
    }
}

/// An empty answer with the client's session.
fn simple(request: &Request, status: u16, source: Source) -> Outcome {
    let mut headers = Vec::new();
    if let Some(session) = header(&request.headers, SESSION_HEADER) {
        headers.push((SESSION_HEADER.into(), session.to_owned()));
    }
    Outcome {
        key: unkeyed(&request.target),
        source,
        response: Response {
            status,
            headers,
            body: ResponseBody::Full(Bytes::new()),
        },
    }
}

/// The key reported for an answer that answers no keyed request (a notification, a `GET`): the
/// key of the server with an empty method, which no request has.
fn unkeyed(server: &str) -> Key {
    cassette_keying::McpRequest::new(server, "").key().key
}
