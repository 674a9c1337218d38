//! The transport-independent half of MCP record/replay: keys, lookups, recordings as cassette
//! documents, replayed messages and miss explanations. The stdio relay and the proxy's MCP
//! routes both answer through an [`McpRecorder`], which asks the mode what to do
//! ([`McpRecorder::answer`]) and stores through the recorder's one write path.

use super::message::{self, id_text, subject, with_id, MISS_CODE};
use crate::engine::{Recorder, Stamp, Stored};
use crate::error::{Error, Result};
use crate::miss::{Explanation, Repeat};
use crate::mode::{Mode, OnHit, OnMiss, Write};
use crate::ErrorRecording;
use cassette_keying::{KeyConfig, Keyed, McpRequest};
use cassette_tape::document::format_for;
use cassette_tape::headers::lowercased;
use cassette_tape::mcp::{MCP_METHOD, MCP_PROFILE, SSE_STREAM};
use cassette_tape::{
    Cassette, KeySettings, Meta, Sequence, StoredBody, StoredRequest, StoredResponse,
};
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt;
use std::sync::Arc;

/// Called with every miss as it happens (for `cassette exec`'s report).
pub type MissHook = Arc<dyn Fn(&McpMiss) + Send + Sync>;

/// A request from the client.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCall {
    /// The client's JSON-RPC id.
    pub id: Value,
    /// The method.
    pub method: String,
    /// The params, when present.
    pub params: Option<Value>,
}

impl McpCall {
    /// What the request is about (tool, prompt or resource), for messages.
    pub fn subject(&self) -> Option<String> {
        subject(&self.method, self.params.as_ref())
    }
}

/// What a server answered to one request: the notifications it sent in the course of the call,
/// in order, and the response message (with the recorded id).
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// Notifications, as whole JSON-RPC messages.
    pub notifications: Vec<Value>,
    /// The response, as a whole JSON-RPC message.
    pub response: Value,
}

impl Recording {
    /// Whether the response is a JSON-RPC error.
    pub fn is_error(&self) -> bool {
        self.response.get("error").is_some()
    }

    fn to_body(&self) -> Value {
        json!({"notifications": self.notifications, "response": self.response})
    }

    fn from_body(body: &Value) -> std::result::Result<Recording, String> {
        let response = body
            .get("response")
            .filter(|r| r.get("result").is_some() || r.get("error").is_some())
            .cloned()
            .ok_or("an MCP cassette needs a `response` with a `result` or an `error`")?;
        let notifications = match body.get("notifications") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(_) => return Err("`notifications` must be an array".to_owned()),
        };
        Ok(Recording {
            notifications,
            response,
        })
    }

    /// The messages to send the client for `call`: the notifications in order, then the
    /// response with the client's id. Progress notifications carry the client's own progress
    /// token, and are left out when the client asked for no progress.
    pub fn replay_messages(&self, call: &McpCall, recorded_token: Option<&Value>) -> Vec<Value> {
        let token = message::progress_token(call.params.as_ref());
        let mut out = Vec::with_capacity(self.notifications.len() + 1);
        for note in &self.notifications {
            let carries = note.get("params").and_then(|p| p.get("progressToken"));
            match (carries, token) {
                (None, _) => out.push(note.clone()),
                (Some(_), None) => {}
                (Some(carried), Some(token)) => {
                    if recorded_token.is_some_and(|r| id_text(r) != id_text(carried)) {
                        // Progress of another call that was in flight at the same time.
                        continue;
                    }
                    let mut note = note.clone();
                    note["params"]["progressToken"] = token.clone();
                    out.push(note);
                }
            }
        }
        out.push(with_id(self.response.clone(), &call.id));
        out
    }
}

/// What a transport knows about a recorded exchange besides its messages.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    /// Request headers (kept from the redaction allow-list only).
    pub request_headers: Vec<(String, String)>,
    /// The HTTP status (200 for stdio).
    pub status: u16,
    /// Response headers (redacted like any response's).
    pub response_headers: Vec<(String, String)>,
    /// Whether the answer came as server-sent events.
    pub sse: bool,
    /// Milliseconds from the request to the response.
    pub latency_ms: u64,
}

/// What the mode makes of a request, once the store was asked (see [`McpRecorder::answer`]).
#[derive(Debug)]
pub enum Answer {
    /// Replayed: the messages to send, in order (notifications, then the response).
    Replay(Vec<Value>),
    /// A miss in replay: the explanation, counted already.
    Miss(Box<McpMiss>),
    /// Ask the server, and write its answer so.
    Forward(Write),
}

/// An MCP request that replay could not answer.
#[derive(Debug, Clone, Serialize)]
pub struct McpMiss {
    /// The request's key (64 hex).
    pub key: String,
    /// Set when a repeat of a recorded request was asked more times than it was recorded
    /// (sequence mode).
    pub repeat: Option<Repeat>,
    /// The server's identity.
    pub server: String,
    /// The JSON-RPC method.
    pub method: String,
    /// The tool, prompt or resource the request is about.
    pub subject: Option<String>,
    /// Where the engine looked.
    pub store: String,
    /// The nearest recording of the same server and method, and what differs.
    pub explanation: Explanation,
}

impl McpMiss {
    /// The request in a few words: ``tools/call `search` on MCP server `notes` ``.
    pub fn request_line(&self) -> String {
        match &self.subject {
            Some(subject) => format!(
                "{} `{subject}` on MCP server `{}`",
                self.method, self.server
            ),
            None => format!("{} on MCP server `{}`", self.method, self.server),
        }
    }

    /// The differences from the nearest recording, one a line, or why there is none.
    pub fn explanation_lines(&self) -> Vec<String> {
        match &self.explanation.nearest {
            Some(nearest) => nearest.differences.clone(),
            None => vec![self.explanation.summary.clone()],
        }
    }

    /// The JSON-RPC error answering the client's request `id`.
    pub fn error_line(&self, id: &Value) -> String {
        let mut data = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut data {
            map.insert("type".into(), Value::from("cassette_miss"));
        }
        message::error_line(id, MISS_CODE, &self.to_string(), Some(data))
    }
}

impl fmt::Display for McpMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cassette miss: no recording of {}", self.method)?;
        match (self.method.as_str(), &self.subject) {
            ("tools/call", Some(tool)) => write!(f, " of tool `{tool}`")?,
            ("prompts/get", Some(prompt)) => write!(f, " of prompt `{prompt}`")?,
            (_, Some(subject)) => write!(f, " of `{subject}`")?,
            (_, None) => {}
        }
        write!(
            f,
            " on MCP server `{}` with key {} in {}. {} Record it in record or auto mode.",
            self.server, self.key, self.store, self.explanation.summary
        )
    }
}

struct Inner {
    recorder: Recorder,
    server: String,
    upstream: String,
}

/// Records and replays the requests of one MCP server through a [`Recorder`]'s store, mode,
/// redaction rules, counters, usage log, write path and nearest-recording index: it holds no
/// state of its own but the server's name, so the proxy's MCP routes and a stdio relay of the
/// same recorder share every lookup, recording and index. Cheap to clone.
#[derive(Clone)]
pub struct McpRecorder {
    inner: Arc<Inner>,
    miss_hook: Option<MissHook>,
}

impl fmt::Debug for McpRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpRecorder")
            .field("server", &self.inner.server)
            .field("recorder", &self.inner.recorder)
            .finish()
    }
}

impl McpRecorder {
    /// An engine for the server named `server` (its key identity) over `recorder`; `upstream`
    /// describes where the server is, for the cassettes' `upstream` field (never a secret: a
    /// command's file name or a URL without credentials).
    pub fn new(recorder: Recorder, server: &str, upstream: &str) -> McpRecorder {
        McpRecorder {
            inner: Arc::new(Inner {
                recorder,
                server: server.to_owned(),
                upstream: upstream.to_owned(),
            }),
            miss_hook: None,
        }
    }

    /// Also calls `hook` with every miss, as it happens.
    pub fn with_miss_hook(mut self, hook: MissHook) -> McpRecorder {
        self.miss_hook = Some(hook);
        self
    }

    /// The server's identity in keys.
    pub fn server(&self) -> &str {
        &self.inner.server
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.inner.recorder.mode()
    }

    /// The recorder whose store and counters this engine uses.
    pub fn recorder(&self) -> &Recorder {
        &self.inner.recorder
    }

    /// The key of a request to this server (its base key: the first occurrence).
    pub fn key(&self, call: &McpCall) -> Keyed {
        let request = McpRequest::new(&self.inner.server, &call.method);
        match &call.params {
            Some(params) => request.params(params).key(),
            None => request.key(),
        }
    }

    /// The key of `call` as this occurrence of it in the recorder's session: its base key,
    /// or, when the recorder answers repeats in sequence, the n-th occurrence key the n-th
    /// time it is asked. Call it once per request the client sends.
    pub fn key_in_session(&self, call: &McpCall) -> Keyed {
        let recorder = &self.inner.recorder;
        recorder.in_session(self.key(call), recorder.config().repeats, None)
    }

    /// What the mode does with `call`: the messages to send when it replays a recording, the
    /// explanation when replay has none (counted, and passed to the miss hook; the caller logs
    /// it and answers the client), or how to write the server's answer when it is to be asked.
    /// The store is read only in the modes whose answer depends on it.
    pub async fn answer(&self, call: &McpCall, keyed: &Keyed) -> Result<Answer> {
        let mode = self.mode();
        if mode.reads_store() {
            if let Some(messages) = self.replay_hit(call, keyed).await? {
                return Ok(match mode.on_hit() {
                    OnHit::Replay => Answer::Replay(messages),
                    OnHit::Forward(write) => Answer::Forward(write),
                });
            }
        }
        Ok(match mode.on_miss() {
            OnMiss::Fail => Answer::Miss(Box::new(self.miss(call, keyed).await)),
            OnMiss::Forward(write) => Answer::Forward(write),
        })
    }

    /// The messages that answer `call` when it is recorded (counted as a hit), else `None`
    /// (not counted: in mode `auto` a missing recording is recorded, not a miss).
    pub async fn replay_hit(&self, call: &McpCall, keyed: &Keyed) -> Result<Option<Vec<Value>>> {
        let Some((recording, recorded_token)) = self.lookup(keyed).await? else {
            return Ok(None);
        };
        let recorder = &self.inner.recorder;
        recorder.count_hit();
        recorder.log_usage(&keyed.key);
        Ok(Some(
            recording.replay_messages(call, recorded_token.as_ref()),
        ))
    }

    /// The recording of `keyed` and the progress token its request carried, if recorded.
    pub async fn lookup(&self, keyed: &Keyed) -> Result<Option<(Recording, Option<Value>)>> {
        let store = self.inner.recorder.store();
        let key = &keyed.key;
        let Some(bytes) = store.get(key).await? else {
            return Ok(None);
        };
        let corrupt = |reason: String| Error::Corrupt {
            key: key.clone(),
            location: store.location(),
            reason,
        };
        let cassette = Cassette::from_stored(&bytes, key).map_err(|e| corrupt(e.to_string()))?;
        let body = cassette
            .response
            .body
            .as_json()
            .ok_or_else(|| corrupt("an MCP cassette's response body must be JSON".into()))?;
        let recording = Recording::from_body(body).map_err(corrupt)?;
        let token = cassette
            .request
            .body
            .as_json()
            .and_then(|params| message::progress_token(Some(params)))
            .cloned();
        Ok(Some((recording, token)))
    }

    /// Counts a miss of `call` and explains it: the nearest recording of the same server and
    /// method and what differs.
    pub async fn miss(&self, call: &McpCall, keyed: &Keyed) -> McpMiss {
        let recorder = &self.inner.recorder;
        recorder.count_miss();
        let store = recorder.store();
        let repeat = recorder.repeat(keyed).await;
        let explanation = match &repeat {
            Some(repeat) => repeat.explanation(),
            None => {
                let (server, method) = (&self.inner.server, &call.method);
                let mut explanation = recorder.nearest(server, method, keyed, None).await;
                if explanation.nearest.is_none() {
                    explanation.summary =
                        format!("Nothing is recorded for {} on this server.", call.method);
                }
                explanation
            }
        };
        let miss = McpMiss {
            key: keyed.key.to_string(),
            repeat,
            server: self.inner.server.clone(),
            method: call.method.clone(),
            subject: call
                .subject()
                .map(|subject| recorder.redactor().text(&subject)),
            store: recorder.redactor().url(&store.location()),
            explanation,
        };
        recorder.note_miss(
            &keyed.key,
            || miss.request_line(),
            &miss.explanation.summary,
        );
        if let Some(hook) = &self.miss_hook {
            hook(&miss);
        }
        miss
    }

    /// Whether an answer is kept: results always, JSON-RPC errors only when the settings ask
    /// for error recording (an outage should not become a tape).
    pub fn keeps(&self, recording: &Recording) -> bool {
        !recording.is_error() || self.inner.recorder.config().errors == ErrorRecording::Record
    }

    /// Stores `recording` as the answer to `call` as `write` says, through the recorder's
    /// one write path. Returns whether a cassette was written.
    pub async fn store(
        &self,
        call: &McpCall,
        keyed: &Keyed,
        recording: &Recording,
        transcript: &Transcript,
        write: Write,
    ) -> Result<bool> {
        if write == Write::Nothing || !self.keeps(recording) {
            return Ok(false);
        }
        let cassette = self.cassette(call, keyed, recording, transcript);
        let stamp = Stamp::now(transcript.latency_ms);
        let stored = self
            .inner
            .recorder
            .write(cassette, stamp, write, None)
            .await?;
        Ok(stored == Stored::Won)
    }

    /// Like [`McpRecorder::store`], logging a failure instead of returning it: the answer
    /// still reaches the client, only the recording is lost, and the log says which.
    pub async fn store_or_log(
        &self,
        call: &McpCall,
        keyed: &Keyed,
        recording: &Recording,
        transcript: &Transcript,
        write: Write,
    ) {
        let stored = self.store(call, keyed, recording, transcript, write).await;
        if let Err(err) = stored {
            tracing::error!(
                "cannot record {} {} for MCP server `{}`: {err}",
                call.method,
                keyed.key,
                self.server()
            );
        }
    }

    /// The cassette of this exchange as received; the write path stamps and seals it.
    fn cassette(
        &self,
        call: &McpCall,
        keyed: &Keyed,
        recording: &Recording,
        transcript: &Transcript,
    ) -> Cassette {
        let request_body = match &call.params {
            None => StoredBody::Empty,
            Some(params) => StoredBody::Json(params.clone()),
        };
        let sequence = Sequence::of(keyed);
        Cassette {
            format: format_for(sequence.as_ref(), None),
            key: keyed.key.clone(),
            key_version: cassette_keying::KEY_VERSION,
            // MCP keys take no keying settings: stored as the none they were keyed with, so a
            // miss or `verify` never takes the cassette for one keyed under unknown settings.
            key_settings: Some(KeySettings::of(&KeyConfig::default())),
            sequence,
            test_scope: None,
            recorded_at: String::new(),
            tool: String::new(),
            target: self.inner.server.clone(),
            upstream: self.inner.upstream.clone(),
            request: StoredRequest {
                method: MCP_METHOD.to_owned(),
                path: call.method.clone(),
                query: String::new(),
                headers: lowercased(&transcript.request_headers),
                body: request_body,
            },
            response: StoredResponse {
                status: if transcript.status == 0 {
                    200
                } else {
                    transcript.status
                },
                headers: lowercased(&transcript.response_headers),
                body: StoredBody::Json(recording.to_body()),
                stream: transcript.sse.then(|| SSE_STREAM.to_owned()),
                events: None,
                body_text: None,
                failure: None,
            },
            meta: Meta {
                profile: MCP_PROFILE.to_owned(),
                ..Meta::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: Value, params: Value) -> McpCall {
        McpCall {
            id,
            method: "tools/call".into(),
            params: Some(params),
        }
    }

    #[test]
    fn replayed_messages_carry_the_clients_id_and_progress_token() {
        let recording = Recording {
            notifications: vec![
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "one"}}),
                json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 5, "progress": 1}}),
                json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 9, "progress": 1}}),
            ],
            response: json!({"jsonrpc": "2.0", "id": 3, "result": {"n": 1}}),
        };
        let with_token = call(json!("c-1"), json!({"_meta": {"progressToken": "t"}}));
        let out = recording.replay_messages(&with_token, Some(&json!(5)));
        assert_eq!(out.len(), 3, "{out:?}");
        assert_eq!(out[0]["params"]["data"], "one");
        assert_eq!(out[1]["params"]["progressToken"], "t");
        assert_eq!(out[2]["id"], "c-1");
        assert_eq!(out[2]["result"], json!({"n": 1}));

        let without = call(json!(8), json!({}));
        let out = recording.replay_messages(&without, Some(&json!(5)));
        assert_eq!(
            out.len(),
            2,
            "progress is only sent when asked for: {out:?}"
        );
        assert_eq!(out[1]["id"], 8);
    }

    #[test]
    fn recordings_round_trip_through_the_body() {
        let recording = Recording {
            notifications: vec![json!({"method": "n"})],
            response: json!({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "x"}}),
        };
        assert!(recording.is_error());
        assert_eq!(Recording::from_body(&recording.to_body()), Ok(recording));
        assert!(Recording::from_body(&json!({"response": {"id": 1}})).is_err());
        assert!(
            Recording::from_body(&json!({"notifications": 1, "response": {"result": 1}})).is_err()
        );
    }
}
