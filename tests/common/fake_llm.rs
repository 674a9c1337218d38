//! A fake LLM upstream for end-to-end tests, the example suite and the suite benchmark: an axum
//! server on 127.0.0.1 that answers OpenAI-compatible chat, Anthropic messages and
//! Ollama chat deterministically from the prompt, and counts the requests it receives.
//!
//! It runs on its own thread and runtime, so synchronous tests can start it, point the binary at
//! it and stop it; once stopped it is unreachable, not half-open. Connections are kept alive and
//! use TCP_NODELAY, so the record benchmark measures cassette, not socket setup.
//!
//! How it answers (first rule that applies):
//! - a judge request (system prompt starting "You are a strict evaluator"): `FAIL` when the
//!   graded text (all of it between its fence) contains "rude", `FAIL` on even votes when it contains "[split]", else `PASS`;
//! - tools offered and the prompt says "weather in CITY" (one word): a `get_weather` call;
//! - the prompt mentions "json": `{"name": "Ada", "age": 36}`;
//! - the prompt mentions "bomb" or "hack": a refusal;
//! - "[noisy]" in the prompt: an answer that changes on every request;
//! - "[echo-auth]" in the prompt: an answer quoting the credential the request carried (an
//!   upstream that echoes the route's own key);
//! - "capital of France": "The capital of France is Paris.";
//! - anything else: "You said: PROMPT".
//!
//! A request with `"stream": true` for an OpenAI chat or Anthropic messages answer of text gets
//! that API's event stream, its text cut into deltas of four characters: a secret said back is
//! split across events, as a model streams it (a tool call is answered whole, as JSON).
//!
//! A variant string (see [`FakeLlm::start_variant`]) is appended to every plain answer, to
//! stand in for a model whose answers drifted; [`FakeLlm::start_drifted`] also names another
//! answering model (`MODEL-DATE`, `MODEL-2024-01-01` by default), an alias that moved.

#![allow(dead_code)] // Each test binary uses its own subset.

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use axum::Router;
use serde_json::{json, Value};
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::TcpListener;

/// A running fake upstream. Stops when dropped.
pub(crate) struct FakeLlm {
    /// Its base URL, `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    requests: Arc<AtomicUsize>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What every request handler shares.
#[derive(Clone)]
struct Fake {
    requests: Arc<AtomicUsize>,
    variant: Arc<str>,
    model_date: Arc<str>,
}

impl FakeLlm {
    /// Starts a fake on a free loopback port.
    pub(crate) fn start() -> FakeLlm {
        Self::start_variant("")
    }

    /// Starts a fake whose plain answers end with `variant`.
    pub(crate) fn start_variant(variant: &str) -> FakeLlm {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), variant)
            .expect("starting the fake upstream")
    }

    /// Starts a fake whose plain answers end with `variant` and whose OpenAI-compatible answers
    /// name the model `MODEL-{model_date}`.
    pub(crate) fn start_drifted(variant: &str, model_date: &str) -> FakeLlm {
        Self::start_full(SocketAddr::from(([127, 0, 0, 1], 0)), variant, model_date)
            .expect("starting the fake upstream")
    }

    /// Starts a fake on `addr` (port 0 for a free one).
    pub(crate) fn start_on(addr: SocketAddr, variant: &str) -> std::io::Result<FakeLlm> {
        Self::start_full(addr, variant, "2024-01-01")
    }

    fn start_full(addr: SocketAddr, variant: &str, model_date: &str) -> std::io::Result<FakeLlm> {
        let requests = Arc::new(AtomicUsize::new(0));
        let fake = Fake {
            requests: requests.clone(),
            variant: Arc::from(variant),
            model_date: Arc::from(model_date),
        };
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("fake upstream runtime");
            runtime.block_on(serve(addr, fake, bound_tx, stop));
            // Dropping the runtime ends every connection task, so a stopped fake really is
            // unreachable rather than half-open.
        });
        let bound = bound_rx
            .recv()
            .unwrap_or_else(|_| Err(std::io::Error::other("the fake upstream thread ended")));
        match bound {
            Ok(addr) => Ok(FakeLlm {
                url: format!("http://{addr}"),
                requests,
                shutdown: Some(shutdown),
                thread: Some(thread),
            }),
            Err(err) => {
                let _ = thread.join();
                Err(err)
            }
        }
    }

    /// Requests answered so far.
    pub(crate) fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Stops listening and closes every connection.
    pub(crate) fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Binds `addr`, reports the bound address (or why not), and serves until `stop`.
async fn serve(
    addr: SocketAddr,
    fake: Fake,
    bound: std::sync::mpsc::Sender<std::io::Result<SocketAddr>>,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = match TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(err) => {
            let _ = bound.send(Err(err));
            return;
        }
    };
    if bound.send(listener.local_addr()).is_err() {
        return;
    }
    let listener = listener.tap_io(|socket| {
        let _ = socket.set_nodelay(true);
    });
    let app = Router::new()
        .fallback(answer)
        .layer(DefaultBodyLimit::disable())
        .with_state(fake);
    tokio::select! {
        _ = stop => {}
        _ = axum::serve(listener, app).into_future() => {}
    }
}

/// Answers any request, counting it.
async fn answer(
    State(fake): State<Fake>,
    uri: Uri,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let n = fake.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let mut request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let credential = ["authorization", "x-api-key", "x-goog-api-key", "api-key"]
        .iter()
        .find_map(|name| headers.get(*name)?.to_str().ok())
        .unwrap_or("none")
        .to_owned();
    if let Value::Object(map) = &mut request {
        // Seen only by `decide`, through the prompt's "[echo-auth]".
        map.insert("__credential".to_owned(), Value::from(credential));
    }
    let (status, answer) = respond(uri.path(), &request, n, &fake);
    let streamed = (status == StatusCode::OK && request["stream"] == Value::Bool(true))
        .then(|| event_stream(uri.path(), &answer))
        .flatten();
    if let Some(events) = streamed {
        return (
            status,
            [
                (header::CONTENT_TYPE, "text/event-stream".to_owned()),
                (
                    header::HeaderName::from_static("x-request-id"),
                    format!("req-{n}"),
                ),
            ],
            events,
        )
            .into_response();
    }
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (
                header::HeaderName::from_static("x-request-id"),
                format!("req-{n}"),
            ),
        ],
        answer.to_string(),
    )
        .into_response()
}

/// The text of the last user message and the system prompt, in any of the three APIs.
fn prompt_of(request: &Value) -> (String, String) {
    let text = |content: &Value| -> String {
        match content {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
            _ => String::new(),
        }
    };
    let mut system = request.get("system").map(&text).unwrap_or_default();
    let mut user = String::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        match message["role"].as_str() {
            Some("system") => system = text(&message["content"]),
            Some("user") => user = text(&message["content"]),
            _ => {}
        }
    }
    (system, user)
}

/// One answer: the text, or a tool call.
enum Reply {
    Text(String),
    Tool { name: String, arguments: Value },
}

fn decide(request: &Value, n: usize, variant: &str) -> Reply {
    let (system, prompt) = prompt_of(request);
    let lower = prompt.to_lowercase();
    if system.starts_with("You are a strict evaluator") {
        // The text between its fence: `<<<` and `>>>`, or `<<<TAG` and `TAG>>>` (docs/suite.md).
        let graded = prompt
            .split_once("Text:\n<<<")
            .and_then(|(_, rest)| rest.split_once('\n'))
            .and_then(|(tag, rest)| rest.split(&format!("\n{tag}>>>")).next())
            .unwrap_or("");
        let vote = request
            .get("seed")
            .or_else(|| request.pointer("/options/seed"))
            .and_then(Value::as_u64)
            .unwrap_or(1);
        let verdict = if graded.contains("rude") || (graded.contains("[split]") && vote & 1 == 0) {
            "FAIL. It does not meet the criterion."
        } else {
            "PASS. It meets the criterion."
        };
        return Reply::Text(verdict.to_owned());
    }
    let has_tools = request.get("tools").is_some_and(|t| !t.is_null());
    if let (true, Some(at)) = (has_tools, lower.find("weather in ")) {
        let city: String = prompt[at + "weather in ".len()..]
            .chars()
            .take_while(|c| c.is_alphabetic())
            .collect();
        return Reply::Tool {
            name: "get_weather".to_owned(),
            arguments: json!({"city": city.trim()}),
        };
    }
    if lower.contains("json") {
        return Reply::Text(r#"{"name": "Ada", "age": 36}"#.to_owned());
    }
    if lower.contains("bomb") || lower.contains("hack") {
        return Reply::Text("I'm sorry, I can't help with that.".to_owned());
    }
    if lower.contains("[echo-auth]") {
        let credential = request["__credential"].as_str().unwrap_or("none");
        return Reply::Text(format!("You sent the credential {credential}{variant}"));
    }
    let text = if lower.contains("[noisy]") {
        format!("Answer number {n}.")
    } else if lower.contains("capital of france") {
        "The capital of France is Paris.".to_owned()
    } else {
        format!("You said: {prompt}")
    };
    Reply::Text(format!("{text}{variant}"))
}

fn respond(path: &str, request: &Value, n: usize, fake: &Fake) -> (StatusCode, Value) {
    let variant = &*fake.variant;
    let model = request["model"].as_str().unwrap_or("fake-model").to_owned();
    if request.get("model").and_then(Value::as_str) == Some("fail-500") {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": {"message": "the fake upstream was asked to fail", "type": "server_error"}}),
        );
    }
    let reply = decide(request, n, variant);
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    if path.ends_with("/messages") {
        let (content, stop) = match reply {
            Reply::Text(text) => (json!([{"type": "text", "text": text}]), "end_turn"),
            Reply::Tool { name, arguments } => (
                json!([{"type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": arguments}]),
                "tool_use",
            ),
        };
        return (
            StatusCode::OK,
            json!({"id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": model,
                   "content": content, "stop_reason": stop,
                   "usage": {"input_tokens": 10, "output_tokens": 5}}),
        );
    }
    if path.ends_with("/api/chat") {
        let message = match reply {
            Reply::Text(text) => json!({"role": "assistant", "content": text}),
            Reply::Tool { name, arguments } => json!({"role": "assistant", "content": "",
                "tool_calls": [{"function": {"name": name, "arguments": arguments}}]}),
        };
        return (
            StatusCode::OK,
            json!({"model": model, "created_at": "2026-01-01T00:00:00Z", "message": message,
                   "done": true, "done_reason": "stop", "eval_count": 5}),
        );
    }
    let (message, finish) = match reply {
        Reply::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Reply::Tool { name, arguments } => (
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": format!("call_{n}"), "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}}]}),
            "tool_calls",
        ),
    };
    (
        StatusCode::OK,
        json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1700000000,
               "model": format!("{model}-{}", fake.model_date),
               "choices": [{"index": 0, "message": message, "finish_reason": finish}],
               "usage": usage}),
    )
}

/// The deltas a streamed text is sent in: four characters each.
fn deltas(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(4).map(|c| c.iter().collect()).collect()
}

/// A text answer as its API streams it: Anthropic's `message_start` ... `message_stop` events,
/// or OpenAI's `chat.completion.chunk` lines ending with `[DONE]`; `None` for any other answer.
fn event_stream(path: &str, answer: &Value) -> Option<String> {
    let mut out = String::new();
    let mut event = |name: Option<&str>, data: Value| {
        if let Some(name) = name {
            out.push_str(&format!("event: {name}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    };
    if path.ends_with("/messages") {
        let [block] = answer["content"].as_array()?.as_slice() else {
            return None;
        };
        let text = block["text"].as_str()?;
        let mut start = answer.clone();
        start["content"] = json!([]);
        start["stop_reason"] = Value::Null;
        event(
            Some("message_start"),
            json!({"type": "message_start", "message": start}),
        );
        event(
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
        );
        for piece in deltas(text) {
            event(
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": piece}}),
            );
        }
        event(
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": 0}),
        );
        event(
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": answer["stop_reason"]},
                   "usage": {"output_tokens": 5}}),
        );
        event(Some("message_stop"), json!({"type": "message_stop"}));
        return Some(out);
    }
    let text = answer.pointer("/choices/0/message/content")?.as_str()?;
    let chunk = |delta: Value, finish: Value| {
        json!({"id": answer["id"], "object": "chat.completion.chunk", "created": answer["created"],
               "model": answer["model"],
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    event(
        None,
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
    );
    for piece in deltas(text) {
        event(None, chunk(json!({"content": piece}), Value::Null));
    }
    event(
        None,
        chunk(json!({}), answer["choices"][0]["finish_reason"].clone()),
    );
    out.push_str("data: [DONE]\n\n");
    Some(out)
}
