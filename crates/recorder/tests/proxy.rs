//! The proxy end to end over real sockets: a reqwest client, the proxy in-process on a free
//! port, and a fake upstream (axum on 127.0.0.1:0) that stands in for the vendor and counts
//! the connections it accepts.

mod support;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::serve::ListenerExt;
use bytes::Bytes;
use cassette_recorder::proxy::{spawn, ProxyConfig, RunningProxy};
use cassette_recorder::{Mode, Recorder, RecorderConfig, Route};
use cassette_store::DynStore;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, Semaphore};

/// How the fake upstream behaves beyond answering.
#[derive(Default)]
struct Fake {
    connections: AtomicU64,
    requests: AtomicU64,
    /// Paths the fake saw, in order.
    paths: Mutex<Vec<String>>,
    /// When set, a request waits here until the test lets it go.
    hold: Option<Semaphore>,
    /// When set, a streamed answer sends its first events, then waits for this before the
    /// rest.
    gate: Option<Notify>,
}

struct Upstream {
    url: String,
    fake: Arc<Fake>,
}

impl Upstream {
    async fn start(fake: Fake) -> Upstream {
        let fake = Arc::new(fake);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let counter = fake.clone();
        let listener = listener.tap_io(move |_| {
            counter.connections.fetch_add(1, Ordering::SeqCst);
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Upstream { url, fake }
    }

    fn connections(&self) -> u64 {
        self.fake.connections.load(Ordering::SeqCst)
    }

    fn requests(&self) -> u64 {
        self.fake.requests.load(Ordering::SeqCst)
    }
}

fn chat_completion(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop", "logprobs": null}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    })
}

async fn answer(State(fake): State<Arc<Fake>>, request: Request) -> Response {
    fake.requests.fetch_add(1, Ordering::SeqCst);
    let path = request.uri().path().to_owned();
    fake.paths.lock().unwrap().push(path.clone());
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Some(hold) = &fake.hold {
        hold.acquire().await.unwrap().forget();
    }
    let json_response = |value: Value| {
        Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(value.to_string()))
            .unwrap()
    };
    match path.as_str() {
        "/v1/chat/completions" if body["stream"] == json!(true) => {
            let events = support::chat_stream_events();
            let fake = fake.clone();
            let stream = async_stream(events, fake);
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        "/v1/chat/completions" => json_response(chat_completion("Hello")),
        "/v1/messages" => json_response(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-haiku-20241022",
            "content": [{"type": "text", "text": "Hi"}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 3, "output_tokens": 1}
        })),
        other => json_response(json!({"path": other})),
    }
}

/// Sends the first two events, then waits for the gate (if any), then sends the rest.
fn async_stream(
    events: Vec<String>,
    fake: Arc<Fake>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    tokio::spawn(async move {
        for (i, event) in events.into_iter().enumerate() {
            if i == 2 {
                if let Some(gate) = &fake.gate {
                    gate.notified().await;
                }
            }
            if tx.send(Ok(Bytes::from(event))).await.is_err() {
                return;
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

fn config(mode: Mode, upstream: &str) -> RecorderConfig {
    RecorderConfig {
        mode,
        routes: vec![
            Route::new("default", format!("{upstream}/v1")),
            Route::new("anthropic", upstream),
        ],
        ..RecorderConfig::default()
    }
}

async fn proxy(mode: Mode, upstream: &str, store: &DynStore) -> RunningProxy {
    let recorder = Recorder::new(config(mode, upstream), store.clone()).unwrap();
    spawn(recorder, &ProxyConfig::ephemeral()).await.unwrap()
}

fn memory() -> DynStore {
    cassette_store::open("memory://").unwrap()
}

fn chat_body(question: &str) -> Value {
    json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": question}]})
}

async fn post(client: &reqwest::Client, url: String, body: &Value) -> reqwest::Response {
    client.post(url).json(body).send().await.unwrap()
}

#[tokio::test]
async fn v1_is_never_doubled_and_routes_strip_their_prefix() {
    let upstream = Upstream::start(Fake::default()).await;
    let store = memory();
    let proxy = proxy(Mode::Record, &upstream.url, &store).await;
    let client = reqwest::Client::new();

    // OPENAI_BASE_URL=<proxy>/v1 against UPSTREAM_BASE=<upstream>/v1.
    let chat = post(
        &client,
        format!("{}/v1/chat/completions", proxy.url()),
        &chat_body("a"),
    )
    .await;
    assert_eq!(chat.status(), 200);
    assert_eq!(chat.headers()["x-cassette"], "recorded");
    // ANTHROPIC_BASE_URL=<proxy>/anthropic against --route anthropic=<upstream>.
    let body = json!({"model": "claude-3-5-haiku-latest", "max_tokens": 10,
                      "messages": [{"role": "user", "content": "hi"}]});
    let msg = post(
        &client,
        format!("{}/anthropic/v1/messages", proxy.url()),
        &body,
    )
    .await;
    assert_eq!(msg.status(), 200);
    assert_eq!(
        msg.json::<Value>().await.unwrap()["content"][0]["text"],
        "Hi"
    );

    let paths = upstream.fake.paths.lock().unwrap().clone();
    assert_eq!(paths, ["/v1/chat/completions", "/v1/messages"]);
    let stats = proxy.stop().await.unwrap();
    assert_eq!(stats.recorder.recorded, 2);
    assert_eq!(store.list("").await.unwrap().len(), 2);
}

#[tokio::test]
async fn replay_never_connects_upstream_hits_and_misses_alike() {
    let upstream = Upstream::start(Fake::default()).await;
    let store = memory();
    let recording = proxy(Mode::Record, &upstream.url, &store).await;
    let client = reqwest::Client::new();
    let recorded = post(
        &client,
        format!("{}/v1/chat/completions", recording.url()),
        &chat_body("q"),
    )
    .await
    .json::<Value>()
    .await
    .unwrap();
    recording.stop().await.unwrap();
    let connections_before = upstream.connections();
    assert!(connections_before >= 1);

    let replay = proxy(Mode::Replay, &upstream.url, &store).await;
    let url = format!("{}/v1/chat/completions", replay.url());
    let hit = post(&client, url.clone(), &chat_body("q")).await;
    assert_eq!(hit.status(), 200);
    assert_eq!(hit.headers()["x-cassette"], "replayed");
    assert_eq!(hit.json::<Value>().await.unwrap(), recorded);
    let miss = post(&client, url, &chat_body("another question")).await;
    assert_eq!(miss.status(), 409);
    let stats = replay.stop().await.unwrap();
    assert_eq!((stats.recorder.hits, stats.recorder.misses), (1, 1));
    assert_eq!(stats.recorder.upstream_requests, 0);
    assert_eq!(upstream.connections(), connections_before);
}

#[tokio::test]
async fn a_miss_is_a_409_with_the_key_and_no_retry() {
    let upstream = Upstream::start(Fake::default()).await;
    let store = memory();
    // One recording at the same path, so the explanation names the nearest one.
    let recording = proxy(Mode::Record, &upstream.url, &store).await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", recording.url());
    post(&client, url, &chat_body("Where is my refund?")).await;
    recording.stop().await.unwrap();

    let replay = proxy(Mode::Replay, &upstream.url, &store).await;
    let url = format!("{}/v1/chat/completions", replay.url());
    for stream in [false, true] {
        let mut body = chat_body("Where's my refund?");
        body["stream"] = json!(stream);
        let response = post(&client, url.clone(), &body).await;
        assert_eq!(response.status(), 409, "stream={stream}");
        assert_eq!(response.headers()["x-should-retry"], "false");
        // Even for a streaming request the answer is a JSON error, not an event stream.
        assert_eq!(response.headers()["content-type"], "application/json");
        let body: Value = response.json().await.unwrap();
        let error = &body["error"];
        assert_eq!(error["type"], "cassette_miss");
        let key = error["key"].as_str().unwrap();
        assert_eq!(key.len(), 64);
        assert!(error["message"].as_str().unwrap().contains(key));
        assert_eq!(error["path"], "/v1/chat/completions");
        assert_eq!(error["target"], "default");
        let differences = error["explanation"]["nearest"]["differences"].to_string();
        assert!(differences.contains("refund"), "{differences}");
    }
    let stats = replay.stop().await.unwrap();
    assert_eq!(stats.recorder.misses, 2);
    assert_eq!(stats.requests, 2);
}

/// Issue 25, item 22: clients that retry a 409 whatever `x-should-retry` says (the Vercel AI
/// SDK, Mastra on it, Cohere's client) get 424, which they fail on at once; the OpenAI and
/// Anthropic SDKs keep their 409 (`ConflictError`); a status the user chose answers everyone.
#[tokio::test]
async fn a_miss_answers_clients_that_retry_409_with_a_status_they_do_not_retry() {
    let upstream = Upstream::start(Fake::default()).await;
    let store = memory();
    let recorder = Recorder::new(config(Mode::Replay, &upstream.url), store.clone()).unwrap();
    let replay = spawn(recorder.clone(), &ProxyConfig::ephemeral())
        .await
        .unwrap();
    let chosen = ProxyConfig {
        retrying_miss_status: None,
        ..ProxyConfig::ephemeral()
    };
    let chose_409 = spawn(recorder, &chosen).await.unwrap();
    let client = reqwest::Client::new();
    let miss = |url: String, agent: &'static str| {
        let client = client.clone();
        async move {
            client
                .post(format!("{url}/v1/chat/completions"))
                .header("user-agent", agent)
                .json(&chat_body("never recorded"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    for (agent, status) in [
        ("ai/6.0.7 ai-sdk/openai/3.0.1 runtime/node.js/v20.20.2", 424),
        ("ai-sdk/anthropic/3.0.0 ai-sdk/provider-utils/4.0.0", 424),
        ("cohere/7.3.1", 424),
        ("OpenAI/Python 2.54.0", 409),
        ("Anthropic/JS 1.14.0", 409),
        ("curl/8.5.0", 409),
    ] {
        assert_eq!(miss(replay.url(), agent).await, status, "{agent}");
        assert_eq!(miss(chose_409.url(), agent).await, 409, "{agent}: chosen");
    }
    replay.stop().await.unwrap();
    chose_409.stop().await.unwrap();
}

/// A prompt of about 3,000 characters with one word near its end.
fn long_prompt(word: &str) -> String {
    let filler =
        "Read the attached report carefully and keep every number exactly as written. ".repeat(40);
    format!("{filler}Then summarise the quarterly {word} figures for the board.")
}

#[tokio::test]
async fn a_miss_on_a_word_late_in_a_long_prompt_shows_that_word_in_the_409() {
    let upstream = Upstream::start(Fake::default()).await;
    let store = memory();
    let recording = proxy(Mode::Record, &upstream.url, &store).await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", recording.url());
    post(&client, url, &chat_body(&long_prompt("revenue"))).await;
    recording.stop().await.unwrap();

    let replay = proxy(Mode::Replay, &upstream.url, &store).await;
    let url = format!("{}/v1/chat/completions", replay.url());
    let response = post(&client, url, &chat_body(&long_prompt("income"))).await;
    assert_eq!(response.status(), 409);
    let body: Value = response.json().await.unwrap();
    let error = &body["error"];
    let differences = &error["explanation"]["nearest"]["differences"];
    assert_eq!(
        differences,
        &json!([
            "body.messages[0].content: …Then summarise the quarterly [-revenue-]{+income+} figures for the board."
        ]),
        "{body}"
    );
    let summary = error["explanation"]["summary"].as_str().unwrap();
    assert!(summary.contains("[-revenue-]{+income+}"), "{summary}");
    assert!(error["message"]
        .as_str()
        .unwrap()
        .contains("[-revenue-]{+income+}"));
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_and_the_proxy_keeps_serving() {
    let recorder = Recorder::new(config(Mode::Replay, "http://127.0.0.1:9"), memory()).unwrap();
    let proxy_config = ProxyConfig {
        max_body: 1024,
        ..ProxyConfig::ephemeral()
    };
    let proxy = spawn(recorder, &proxy_config).await.unwrap();
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", proxy.url());
    let big = chat_body(&"x".repeat(64 * 1024));
    let response = post(&client, url.clone(), &big).await;
    assert_eq!(response.status(), 413);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "request_too_large");
    assert!(body["error"]["message"].as_str().unwrap().contains("1024"));

    // Without a content-length (chunked), the limit is enforced while reading.
    let chunks = futures::stream::iter(
        (0..64).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 1024]))),
    );
    let response = client
        .post(url.clone())
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);

    let health = client
        .get(format!("{}/healthz", proxy.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    proxy.stop().await.unwrap();
}

/// A body declared as JSON that is not JSON is refused in every mode, before the store or the
/// upstream sees it (record mode would otherwise key it as opaque bytes and forward it).
#[tokio::test]
async fn malformed_requests_get_400_with_a_reason() {
    let upstream = Upstream::start(Fake::default()).await;
    for mode in [Mode::Replay, Mode::Record, Mode::Auto, Mode::Off] {
        let store = memory();
        let recorder = Recorder::new(config(mode, &upstream.url), store.clone()).unwrap();
        let proxy = spawn(recorder, &ProxyConfig::ephemeral()).await.unwrap();
        let client = reqwest::Client::new();
        let bodies: [&[u8]; 3] = [
            b"{\"model\": \"gpt-4o\", \"messages\": [",
            b"{\"model\": \"gpt-4o\"} trailing",
            b"{\"model\": \"gpt-4o\xff\"}",
        ];
        for sent in bodies {
            let response = client
                .post(format!("{}/v1/chat/completions", proxy.url()))
                .header("content-type", "application/json; charset=utf-8")
                .body(sent)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 400, "{mode:?}");
            assert_eq!(response.headers()["x-should-retry"], "false");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["error"]["type"], "invalid_request_error");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("declared as JSON but does not parse"),
                "{body}"
            );
        }
        assert!(store.list("").await.unwrap().is_empty(), "{mode:?}");
        proxy.stop().await.unwrap();
    }
    assert_eq!(upstream.requests(), 0);
}

#[tokio::test]
async fn healthz_and_stats_report_mode_store_and_counters() {
    let store = memory();
    let recorder =
        Recorder::new(config(Mode::Replay, "http://127.0.0.1:9"), store.clone()).unwrap();
    let proxy = spawn(recorder, &ProxyConfig::ephemeral()).await.unwrap();
    let client = reqwest::Client::new();
    let health: Value = client
        .get(format!("{}/healthz", proxy.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["mode"], "replay");
    assert_eq!(health["store"], store.location());

    // The same miss twice and another once: three misses of two distinct keys.
    let mut keys = Vec::new();
    for question in ["q", "q", "r"] {
        let missed = post(
            &client,
            format!("{}/v1/chat/completions", proxy.url()),
            &chat_body(question),
        )
        .await;
        keys.push(missed.json::<Value>().await.unwrap()["error"]["key"].clone());
    }
    let mut stats: Value = client
        .get(format!("{}/_cassette/stats", proxy.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let missed = stats.as_object_mut().unwrap().remove("missed").unwrap();
    assert_eq!(
        stats,
        json!({"requests": 3, "hits": 0, "misses": 3, "recorded": 0, "failed_recordings": 0,
               "upstream_requests": 0, "upstream_errors": 0, "failures_replayed": 0,
               "bypassed": [],
               "distinct_misses": 2,
               "hit_cache": {"budget_bytes": 64 << 20, "bytes": 0, "entries": 0, "served": 0,
                             "refreshed": 0, "evicted": 0}})
    );
    assert_eq!(missed.as_array().unwrap().len(), 2, "{missed}");
    assert_eq!(missed[0]["key"], keys[0]);
    assert_eq!(missed[0]["count"], 2);
    assert_eq!(
        missed[0]["request"],
        "POST /v1/chat/completions (target default, model gpt-4o-mini)"
    );
    assert!(missed[0]["summary"]
        .as_str()
        .unwrap()
        .contains("No recording"));
    let handle = proxy.stats_handle();
    proxy.stop().await.unwrap();
    let log = handle.misses();
    assert_eq!((log.distinct, log.total), (2, 3));
    assert_eq!(serde_json::to_value(&log.notes[1].key).unwrap(), keys[2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_replay_hits_are_all_served() {
    let upstream = Upstream::start(Fake::default()).await;
    let store = memory();
    let recording = proxy(Mode::Record, &upstream.url, &store).await;
    let client = reqwest::Client::new();
    for i in 0..4 {
        post(
            &client,
            format!("{}/v1/chat/completions", recording.url()),
            &chat_body(&format!("q{i}")),
        )
        .await;
    }
    recording.stop().await.unwrap();
    let connections = upstream.connections();

    let replay = proxy(Mode::Replay, &upstream.url, &store).await;
    let url = format!("{}/v1/chat/completions", replay.url());
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let client = reqwest::Client::new();
            let url = url.clone();
            tokio::spawn(async move {
                let response = post(&client, url, &chat_body(&format!("q{}", i % 4))).await;
                (
                    response.status().as_u16(),
                    response.json::<Value>().await.unwrap(),
                )
            })
        })
        .collect();
    for task in tasks {
        let (status, body) = task.await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(body["choices"][0]["message"]["content"], "Hello");
    }
    let stats = replay.stop().await.unwrap();
    assert_eq!(stats.recorder.hits, 64);
    assert_eq!(upstream.connections(), connections);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recording_one_key_twice_at_once_calls_once_and_leaves_one_complete_cassette() {
    let upstream = Upstream::start(Fake {
        hold: Some(Semaphore::new(0)),
        ..Fake::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = cassette_store::open(&format!("file://{}", dir.path().display())).unwrap();
    let proxy = proxy(Mode::Record, &upstream.url, &store).await;
    let url = format!("{}/v1/chat/completions", proxy.url());
    let (one, two) = (reqwest::Client::new(), reqwest::Client::new());
    let body = chat_body("same");
    let both = tokio::spawn({
        let url = url.clone();
        async move {
            tokio::join!(
                post(&one, url.clone(), &body),
                post(&two, url.clone(), &body)
            )
        }
    });
    // The fake answers nothing until both reached the proxy, so the two really overlap.
    while proxy.stats().requests < 2 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    upstream.fake.hold.as_ref().unwrap().add_permits(2);
    let (a, b) = both.await.unwrap();
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
    let (a, b): (Value, Value) = (a.json().await.unwrap(), b.json().await.unwrap());
    assert_eq!(a, b);
    let stats = proxy.stop().await.unwrap();
    assert_eq!(stats.recorder.upstream_requests, 1);
    assert_eq!(upstream.requests(), 1);

    let keys = store.list("").await.unwrap();
    assert_eq!(keys.len(), 1);
    let document: Value =
        serde_json::from_slice(&store.get(&keys[0]).await.unwrap().unwrap()).unwrap();
    assert_eq!(document["key"], keys[0].as_str());
    assert_eq!(
        document["response"]["body"]["json"]["choices"][0]["message"]["content"],
        "Hello"
    );
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502_naming_it() {
    // A port that was free a moment ago and has no listener now.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let upstream = format!("http://127.0.0.1:{port}");
    let store = memory();
    let proxy = proxy(Mode::Record, &upstream, &store).await;
    let client = reqwest::Client::new();
    let response = post(
        &client,
        format!("{}/v1/chat/completions", proxy.url()),
        &chat_body("q"),
    )
    .await;
    assert_eq!(response.status(), 502);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "cassette_upstream_error");
    let needle = format!("127.0.0.1:{port}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains(&needle),
        "{body}"
    );
    assert!(
        body["error"]["upstream"]
            .as_str()
            .unwrap()
            .contains(&needle),
        "{body}"
    );
    let stats = proxy.stop().await.unwrap();
    assert_eq!(stats.recorder.upstream_errors, 1);
    assert!(store.list("").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_forwarded_as_they_arrive_and_shutdown_waits_for_them() {
    let upstream = Upstream::start(Fake {
        gate: Some(Notify::new()),
        ..Fake::default()
    })
    .await;
    let store = memory();
    let proxy = proxy(Mode::Record, &upstream.url, &store).await;
    let mut body = chat_body("stream please");
    body["stream"] = json!(true);
    let response = post(
        &reqwest::Client::new(),
        format!("{}/v1/chat/completions", proxy.url()),
        &body,
    )
    .await;
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    // The upstream has sent two events and is holding the rest back: the client must already
    // have the first one.
    let first = futures::StreamExt::next(&mut stream)
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("chat.completion.chunk"));

    // Stopping now must let this stream finish rather than cut it.
    let stopping = tokio::spawn(proxy.stop());
    upstream.fake.gate.as_ref().unwrap().notify_one();
    let mut rest = first.to_vec();
    while let Some(piece) = futures::StreamExt::next(&mut stream).await {
        rest.extend_from_slice(&piece.unwrap());
    }
    let text = String::from_utf8(rest).unwrap();
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    let stats = stopping.await.unwrap().unwrap();
    assert_eq!(stats.recorder.recorded, 1);
    assert_eq!(store.list("").await.unwrap().len(), 1);
}

/// An answer passed through is `passed-through` in the `x-cassette` header and in the
/// journal a report is written from, as text and as JSON (the journal once said
/// `passed_through`).
#[tokio::test]
async fn passed_through_is_spelled_one_way_in_the_header_and_the_journal() {
    let upstream = Upstream::start(Fake::default()).await;
    let store = memory();
    let recorder = Recorder::new(config(Mode::Off, &upstream.url), store.clone()).unwrap();
    let settings = ProxyConfig {
        journal: cassette_recorder::proxy::Journal::Keep,
        ..ProxyConfig::ephemeral()
    };
    let proxy = spawn(recorder, &settings).await.unwrap();
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", proxy.url());
    let live = post(&client, url, &chat_body("q")).await;
    assert_eq!(live.headers()["x-cassette"], "passed-through");
    let journal = proxy.stats_handle().journal();
    let entry = &journal.entries[0];
    assert_eq!(entry.outcome.as_str(), "passed-through");
    let json = serde_json::to_value(&journal).unwrap();
    assert_eq!(json["entries"][0]["outcome"], "passed-through", "{json}");
    proxy.stop().await.unwrap();
}
