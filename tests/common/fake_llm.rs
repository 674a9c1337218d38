//! A fake LLM upstream for end-to-end tests, the example suite and the suite benchmark: a tiny
//! HTTP/1.1 server on 127.0.0.1 that answers OpenAI-compatible chat, Anthropic messages and
//! Ollama chat deterministically from the prompt, and counts the requests it receives.
//!
//! Plain tokio and hand-written HTTP on purpose: it needs no dependency the workspace does not
//! already have, and keep-alive keeps the record benchmark about cassette, not about sockets.
//!
//! How it answers (first rule that applies):
//! - a judge request (system prompt starting "You are a strict evaluator"): `FAIL` when the
//!   graded text contains "rude", `FAIL` on even votes when it contains "[split]", else `PASS`;
//! - tools offered and the prompt says "weather in CITY" (one word): a `get_weather` call;
//! - the prompt mentions "json": `{"name": "Ada", "age": 36}`;
//! - the prompt mentions "bomb" or "hack": a refusal;
//! - "[noisy]" in the prompt: an answer that changes on every request;
//! - "capital of France": "The capital of France is Paris.";
//! - anything else: "You said: PROMPT".
//!
//! A variant string (see [`FakeLlm::start_variant`]) is appended to every plain answer, to
//! stand in for a model whose answers drifted.

#![allow(dead_code)] // Each test binary uses its own subset.

use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A running fake upstream. Stops when dropped.
pub struct FakeLlm {
    /// Its base URL, `http://127.0.0.1:PORT`.
    pub url: String,
    requests: Arc<AtomicUsize>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeLlm {
    /// Starts a fake on a free loopback port.
    pub fn start() -> FakeLlm {
        Self::start_variant("")
    }

    /// Starts a fake whose plain answers end with `variant`.
    pub fn start_variant(variant: &str) -> FakeLlm {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), variant)
    }

    /// Starts a fake on `addr` (port 0 for a free one).
    pub fn start_on(addr: SocketAddr, variant: &str) -> FakeLlm {
        let requests = Arc::new(AtomicUsize::new(0));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (shutdown, mut stop) = tokio::sync::oneshot::channel::<()>();
        let counter = requests.clone();
        let variant = Arc::new(variant.to_owned());
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("fake upstream runtime");
            runtime.block_on(async move {
                let listener = TcpListener::bind(addr)
                    .await
                    .expect("binding the fake upstream");
                addr_tx
                    .send(listener.local_addr().expect("fake upstream address"))
                    .expect("reporting the fake upstream address");
                loop {
                    tokio::select! {
                        _ = &mut stop => break,
                        accepted = listener.accept() => {
                            let Ok((socket, _)) = accepted else { continue };
                            let counter = counter.clone();
                            let variant = variant.clone();
                            tokio::spawn(serve(socket, counter, variant));
                        }
                    }
                }
            });
            // Dropping the runtime ends every connection task, so a stopped fake really is
            // unreachable rather than half-open.
        });
        let addr = addr_rx.recv().expect("fake upstream did not start");
        FakeLlm {
            url: format!("http://{addr}"),
            requests,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// Requests answered so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Stops listening and closes every connection.
    pub fn stop(mut self) {
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

async fn serve(socket: TcpStream, counter: Arc<AtomicUsize>, variant: Arc<String>) {
    let _ = socket.set_nodelay(true);
    let mut reader = BufReader::new(socket);
    loop {
        let mut request_line = String::new();
        match reader.read_line(&mut request_line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("/")
            .to_owned();
        let mut length = 0usize;
        let mut close = false;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).await.unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let name = name.trim().to_ascii_lowercase();
                if name == "content-length" {
                    length = value.trim().parse().unwrap_or(0);
                } else if name == "connection" && value.trim().eq_ignore_ascii_case("close") {
                    close = true;
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).await.is_err() {
            return;
        }
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (status, answer) = respond(&path, &request, n, &variant);
        let payload = answer.to_string();
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-request-id: req-{n}\r\n\r\n",
            payload.len()
        );
        // One write per response: a head and body in two writes would meet Nagle's algorithm
        // and delayed ACKs, and the benchmark would measure a 40 ms TCP stall.
        let mut response = head.into_bytes();
        response.extend_from_slice(payload.as_bytes());
        if reader.get_mut().write_all(&response).await.is_err() {
            return;
        }
        if close {
            return;
        }
    }
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
        let graded = prompt
            .split("Text:\n<<<\n")
            .nth(1)
            .and_then(|rest| rest.split("\n>>>").next())
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
    let text = if lower.contains("[noisy]") {
        format!("Answer number {n}.")
    } else if lower.contains("capital of france") {
        "The capital of France is Paris.".to_owned()
    } else {
        format!("You said: {prompt}")
    };
    Reply::Text(format!("{text}{variant}"))
}

fn respond(path: &str, request: &Value, n: usize, variant: &str) -> (&'static str, Value) {
    let model = request["model"].as_str().unwrap_or("fake-model").to_owned();
    if request.get("model").and_then(Value::as_str) == Some("fail-500") {
        return (
            "500 Internal Server Error",
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
            "200 OK",
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
            "200 OK",
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
        "200 OK",
        json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1700000000,
               "model": format!("{model}-2024-01-01"),
               "choices": [{"index": 0, "message": message, "finish_reason": finish}],
               "usage": usage}),
    )
}
