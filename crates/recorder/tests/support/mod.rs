//! A fake upstream LLM server for recorder tests: it stands in for the vendor, answers with
//! scripted replies (JSON, raw bytes, or a stream cut into irregular pieces) and counts the
//! connections and requests it receives, so tests can prove replay never called it.
#![allow(dead_code)]

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::serve::ListenerExt;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the fake answers on a path.
#[derive(Clone, Debug)]
pub(crate) enum Reply {
    /// A complete body with this status and content type.
    Body {
        status: u16,
        content_type: String,
        body: Bytes,
    },
    /// A streamed body, sent in pieces of the given sizes (cycled), with a short pause
    /// between pieces so the client really sees them separately.
    Stream {
        content_type: String,
        body: Bytes,
        pieces: Vec<usize>,
    },
    /// Accepts the request and never answers (well, not for a minute).
    Silent,
    /// A complete body with this status and exactly these headers (no others added).
    Raw {
        status: u16,
        headers: Vec<(String, String)>,
        body: Bytes,
    },
    /// Waits, then answers with the inner reply: keeps requests in flight at once.
    Delayed(Duration, Box<Reply>),
    /// Waits until the test releases it (see [`FakeUpstream::release`]), then answers a chat
    /// completion whose content names the request's number, so every upstream call gives a
    /// different answer.
    Numbered,
    /// Streams `body` in pieces, then breaks the connection off instead of ending the body.
    CutStream {
        content_type: String,
        body: Bytes,
        pieces: Vec<usize>,
    },
    /// Streams `pieces` one at a time, each only once the test released it with
    /// [`FakeUpstream::release`], so a test can see what the client holds between pieces.
    Gated {
        content_type: String,
        pieces: Vec<Bytes>,
    },
}

/// An OpenAI chat completion answering `text`.
pub(crate) fn completion(text: &str) -> serde_json::Value {
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}
    })
}

impl Reply {
    pub(crate) fn json(status: u16, value: serde_json::Value) -> Reply {
        Reply::Body {
            status,
            content_type: "application/json".into(),
            body: Bytes::from(value.to_string()),
        }
    }
}

/// A request the fake received.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub method: String,
    pub uri: String,
    pub headers: HashMap<String, String>,
    pub body: Bytes,
}

struct Shared {
    replies: Mutex<HashMap<String, Reply>>,
    gate: Arc<tokio::sync::Semaphore>,
    seen: Mutex<Vec<Seen>>,
    connections: AtomicU64,
    requests: AtomicU64,
}

pub(crate) struct FakeUpstream {
    pub url: String,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            replies: Mutex::default(),
            gate: Arc::new(tokio::sync::Semaphore::new(0)),
            seen: Mutex::default(),
            connections: AtomicU64::default(),
            requests: AtomicU64::default(),
        }
    }
}

impl FakeUpstream {
    pub(crate) async fn start() -> FakeUpstream {
        let shared = Arc::new(Shared::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let counter = shared.clone();
        let listener = listener.tap_io(move |_| {
            counter.connections.fetch_add(1, Ordering::SeqCst);
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(shared.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        FakeUpstream {
            url,
            shared,
            stop: Some(stop),
        }
    }

    /// Scripts the reply for a path (without query).
    pub(crate) fn reply(&self, path: &str, reply: Reply) {
        self.shared
            .replies
            .lock()
            .unwrap()
            .insert(path.to_owned(), reply);
    }

    /// Lets [`Reply::Gated`] streams send `n` more pieces, or `n` more [`Reply::Numbered`]
    /// requests be answered.
    pub(crate) fn release(&self, n: usize) {
        self.shared.gate.add_permits(n);
    }

    pub(crate) fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    pub(crate) fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    pub(crate) fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    shared.requests.fetch_add(1, Ordering::SeqCst);
    shared.seen.lock().unwrap().push(Seen {
        method: method.to_string(),
        uri: uri.to_string(),
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
        body,
    });
    let reply = shared.replies.lock().unwrap().get(uri.path()).cloned();
    respond(&shared, uri.path(), reply).await
}

async fn respond(shared: &Arc<Shared>, path: &str, reply: Option<Reply>) -> Response {
    match reply {
        None => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header("content-type", "application/json")
            .body(Body::from(format!(
                "{{\"error\":{{\"message\":\"fake upstream has no reply for {}\"}}}}",
                path
            )))
            .unwrap(),
        Some(Reply::Body {
            status,
            content_type,
            body,
        }) => Response::builder()
            .status(status)
            .header("content-type", content_type)
            .header("set-cookie", "session=fake-upstream-cookie-secret")
            .header("x-request-id", "req_fake_1")
            .body(Body::from(body))
            .unwrap(),
        Some(Reply::Silent) => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Response::new(Body::empty())
        }
        Some(Reply::Raw {
            status,
            headers,
            body,
        }) => {
            let mut response = Response::builder().status(status);
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response.body(Body::from(body)).unwrap()
        }
        Some(Reply::Numbered) => {
            let n = shared.requests.load(Ordering::SeqCst);
            shared.gate.acquire().await.unwrap().forget();
            let body = serde_json::json!({
                "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1,
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
                             "message": {"role": "assistant", "content": format!("answer {n}")}}]
            });
            Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap()
        }
        Some(Reply::Delayed(delay, inner)) => {
            tokio::time::sleep(delay).await;
            Box::pin(respond(shared, path, Some(*inner))).await
        }
        Some(Reply::CutStream {
            content_type,
            body,
            pieces,
        }) => {
            let chunks = cut(&body, &pieces);
            let stream = futures::stream::iter(chunks)
                .then(|chunk| async move {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    Ok::<_, std::io::Error>(chunk)
                })
                .chain(futures::stream::once(async {
                    Err(std::io::Error::other(
                        "the fake upstream cut the stream off",
                    ))
                }));
            Response::builder()
                .status(200)
                .header("content-type", content_type)
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Some(Reply::Gated {
            content_type,
            pieces,
        }) => {
            let gate = shared.gate.clone();
            let stream = futures::stream::iter(pieces).then(move |piece| {
                let gate = gate.clone();
                async move {
                    gate.acquire().await.unwrap().forget();
                    Ok::<_, std::io::Error>(piece)
                }
            });
            Response::builder()
                .status(200)
                .header("content-type", content_type)
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Some(Reply::Stream {
            content_type,
            body,
            pieces,
        }) => {
            let chunks = cut(&body, &pieces);
            let stream = futures::stream::iter(chunks).then(|chunk| async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                Ok::<_, std::io::Error>(chunk)
            });
            Response::builder()
                .status(200)
                .header("content-type", content_type)
                .body(Body::from_stream(stream))
                .unwrap()
        }
    }
}

use futures::StreamExt;

/// Cuts `body` into pieces of the given sizes, cycling through them.
pub(crate) fn cut(body: &Bytes, sizes: &[usize]) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < body.len() {
        let size = sizes[i % sizes.len()].max(1);
        let end = (at + size).min(body.len());
        out.push(body.slice(at..end));
        at = end;
        i += 1;
    }
    out
}

/// Reads a provider stream fixture (crates/wire/tests/fixtures).
pub(crate) fn fixture(name: &str) -> Bytes {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../wire/tests/fixtures")
        .join(name);
    Bytes::from(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// An OpenAI chat stream answering "Hello" in three pieces, as its SSE events.
pub(crate) fn chat_stream_events() -> Vec<String> {
    use serde_json::{json, Value};
    let chunk = |delta: Value, finish: Value| {
        let event = json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        });
        format!("data: {event}\n\n")
    };
    vec![
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "Hel"}), Value::Null),
        chunk(json!({"content": "lo"}), Value::Null),
        chunk(json!({}), json!("stop")),
        "data: [DONE]\n\n".to_owned(),
    ]
}

/// The key a keyed route adds (an Anthropic-shaped one), which the command itself never has:
/// it sends a placeholder.
pub(crate) const ROUTE_KEY: &str = "sk-ant-api03-Qw7Er9Ty2Ui4Op6As8Df0Gh1Jk3Lz5Xc7Vb9Nm";

/// A record-mode recorder whose default route at `upstream` adds [`ROUTE_KEY`].
pub(crate) fn keyed_recorder(
    upstream: &str,
    store: &cassette_store::DynStore,
) -> cassette_recorder::Recorder {
    let mut route = cassette_recorder::Route::new("default", upstream.to_owned());
    route.api_key = cassette_recorder::config::ApiKey::new(ROUTE_KEY);
    let config = cassette_recorder::RecorderConfig {
        mode: cassette_recorder::Mode::Record,
        routes: vec![route],
        ..cassette_recorder::RecorderConfig::default()
    };
    cassette_recorder::Recorder::new(config, store.clone()).unwrap()
}
