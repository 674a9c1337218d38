//! Per-route credentials through the proxy, over real sockets: a route with a key sends exactly
//! that key in its own style and drops whatever the client sent; a route without one passes the
//! client's credential through; no key ever reaches another route, a cassette, an error or
//! /healthz. The fake upstream keeps every header line it received, repeats included, so "two
//! credentials" would be seen.

use axum::extract::{Request, State};
use axum::response::Response;
use cassette_recorder::config::{ApiKey, AuthStyle};
use cassette_recorder::proxy::{spawn, ProxyConfig, RunningProxy};
use cassette_recorder::{Mode, Recorder, RecorderConfig, Route};
use cassette_store::DynStore;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const OPENAI_KEY: &str = "sk-proj-REALOPENAIKEY0123456789";
const ANTHROPIC_KEY: &str = "sk-ant-api03-REALANTHROPICKEY0123456789";
const GEMINI_KEY: &str = "AIzaSyREALGEMINIKEY0123456789abcdefgh";

/// One request as the fake upstream received it.
#[derive(Debug, Clone)]
struct Seen {
    uri: String,
    /// Every header line, lowercased names, in order, repeats kept.
    headers: Vec<(String, String)>,
}

impl Seen {
    /// The values of every header carrying a credential.
    fn credentials(&self) -> Vec<(String, String)> {
        self.headers
            .iter()
            .filter(|(n, _)| {
                matches!(
                    n.as_str(),
                    "authorization" | "x-api-key" | "api-key" | "x-goog-api-key"
                )
            })
            .cloned()
            .collect()
    }

    fn everything(&self) -> String {
        format!("{} {:?}", self.uri, self.headers)
    }
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// A fake vendor that answers every request with `answer` and logs what it received.
async fn fake(answer: Value) -> (String, Log) {
    let log: Log = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .fallback(
            |State((log, answer)): State<(Log, Value)>, request: Request| async move {
                log.lock().unwrap().push(Seen {
                    uri: request.uri().to_string(),
                    headers: request
                        .headers()
                        .iter()
                        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_owned()))
                        .collect(),
                });
                Response::builder()
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(answer.to_string()))
                    .unwrap()
            },
        )
        .with_state((log.clone(), answer));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, log)
}

fn route(name: &str, url: &str, auth: &str, key: Option<&str>) -> Route {
    let mut route = Route::new(name, url);
    route.auth = auth.parse().unwrap();
    route.api_key = key.and_then(ApiKey::new);
    route
}

async fn start(mode: Mode, routes: Vec<Route>, store: &DynStore) -> RunningProxy {
    let config = RecorderConfig {
        mode,
        routes,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::new(config, store.clone()).unwrap();
    spawn(recorder, &ProxyConfig::ephemeral()).await.unwrap()
}

fn chat(text: &str) -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": text}]})
}

/// Everything a store holds, as text.
async fn stored(store: &DynStore) -> String {
    let mut all = String::new();
    for key in store.list("").await.unwrap() {
        let bytes = store.get(&key).await.unwrap().unwrap();
        all.push_str(&String::from_utf8_lossy(&bytes));
    }
    all
}

#[tokio::test]
async fn a_route_key_replaces_every_client_credential_and_is_sent_once() {
    let (url, log) = fake(json!({"ok": true})).await;
    let store = cassette_store::open("memory://").unwrap();
    let proxy = start(
        Mode::Record,
        vec![route("default", &url, "bearer", Some(OPENAI_KEY))],
        &store,
    )
    .await;
    let client = reqwest::Client::new();
    // A placeholder in every credential header at once, and a credential in the query.
    let status = client
        .post(format!(
            "{}/v1/chat/completions?key=cassette&x=1",
            proxy.url()
        ))
        .header("authorization", "Bearer cassette")
        .header("x-api-key", "cassette")
        .header("api-key", "cassette")
        .header("x-goog-api-key", "cassette")
        .json(&chat("hi"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].credentials(),
        [("authorization".to_owned(), format!("Bearer {OPENAI_KEY}"))]
    );
    assert_eq!(seen[0].uri, "/v1/chat/completions?x=1");
    assert!(!seen[0].everything().contains("cassette"), "{seen:?}");
    let tapes = stored(&store).await;
    assert!(
        !tapes.contains(OPENAI_KEY) && !tapes.contains("REALOPENAI"),
        "{tapes}"
    );
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn each_route_sends_only_its_own_key_and_keyless_routes_pass_the_client_credential() {
    let (url, log) = fake(json!({"ok": true})).await;
    let store = cassette_store::open("memory://").unwrap();
    let routes = vec![
        route("default", &url, "bearer", Some(OPENAI_KEY)),
        route("anthropic", &url, "x-api-key", Some(ANTHROPIC_KEY)),
        route("ollama", &url, "bearer", None),
    ];
    let proxy = start(Mode::Auto, routes, &store).await;
    let client = reqwest::Client::new();
    for (path, text) in [
        ("/v1/chat/completions", "to default"),
        ("/anthropic/v1/messages", "to anthropic"),
        ("/ollama/api/chat", "to ollama"),
    ] {
        let status = client
            .post(format!("{}{path}", proxy.url()))
            .header("authorization", "Bearer client-own-token-42")
            .header("x-api-key", "cassette")
            .json(&chat(text))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 200, "{path}");
    }
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    assert_eq!(
        seen[0].credentials(),
        [("authorization".to_owned(), format!("Bearer {OPENAI_KEY}"))]
    );
    assert_eq!(
        seen[1].credentials(),
        [("x-api-key".to_owned(), ANTHROPIC_KEY.to_owned())]
    );
    // No key for ollama: what the client sent goes through, untouched.
    assert_eq!(
        seen[2].credentials(),
        [
            (
                "authorization".to_owned(),
                "Bearer client-own-token-42".to_owned()
            ),
            ("x-api-key".to_owned(), "cassette".to_owned())
        ]
    );
    // One route's key never reaches another route.
    assert!(!seen[0].everything().contains(ANTHROPIC_KEY));
    assert!(!seen[1].everything().contains(OPENAI_KEY));
    for other in &seen[2..] {
        assert!(!other.everything().contains(OPENAI_KEY));
        assert!(!other.everything().contains(ANTHROPIC_KEY));
    }
    // Nor /healthz, nor the store.
    let health = client
        .get(format!("{}/healthz", proxy.url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(health.contains("\"anthropic\""), "{health}");
    let tapes = stored(&store).await;
    for key in [OPENAI_KEY, ANTHROPIC_KEY] {
        assert!(!health.contains(key), "{health}");
        assert!(!tapes.contains(key), "{tapes}");
    }
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn goog_header_and_query_styles() {
    let (url, log) = fake(json!({"candidates": []})).await;
    let store = cassette_store::open("memory://").unwrap();
    let routes = vec![
        route("default", &url, "bearer", None),
        route("gemini", &url, "x-goog-api-key", Some(GEMINI_KEY)),
        route("gq", &url, "query:key", Some(GEMINI_KEY)),
    ];
    let proxy = start(Mode::Off, routes, &store).await;
    let client = reqwest::Client::new();
    let path = "/v1beta/models/gemini-2.0-flash:generateContent";
    for prefix in ["/gemini", "/gq"] {
        let status = client
            .post(format!(
                "{}{prefix}{path}?alt=sse&key=cassette",
                proxy.url()
            ))
            .header("x-goog-api-key", "cassette")
            .json(&json!({"contents": []}))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 200);
    }
    let seen = log.lock().unwrap().clone();
    assert_eq!(
        seen[0].credentials(),
        [("x-goog-api-key".to_owned(), GEMINI_KEY.to_owned())]
    );
    assert_eq!(seen[0].uri, format!("{path}?alt=sse"));
    assert!(seen[1].credentials().is_empty(), "{seen:?}");
    assert_eq!(seen[1].uri, format!("{path}?alt=sse&key={GEMINI_KEY}"));
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn a_key_in_the_query_never_shows_in_errors_and_an_echoed_key_is_not_stored() {
    // Nothing listens on port 9 of the loopback: the call fails, naming the endpoint.
    let store = cassette_store::open("memory://").unwrap();
    let routes = vec![route(
        "default",
        "http://127.0.0.1:9",
        "query:key",
        Some(GEMINI_KEY),
    )];
    let proxy = start(Mode::Record, routes, &store).await;
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url()))
        .json(&chat("hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 502);
    let text = answer.text().await.unwrap();
    assert!(text.contains("127.0.0.1:9"), "{text}");
    assert!(!text.contains(GEMINI_KEY), "{text}");
    proxy.stop().await.unwrap();

    // An upstream that echoes the key back (an error answer quoting it, say). The key has no
    // known credential shape: only the route's own key tells the redactor about it.
    let opaque = "gw7Hq2xZ9pL4mNopaque";
    let (url, _log) = fake(json!({"error": format!("bad key {opaque} for project")})).await;
    let store = cassette_store::open("memory://").unwrap();
    let routes = vec![route("default", &url, "bearer", Some(opaque))];
    let proxy = start(Mode::Record, routes, &store).await;
    reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url()))
        .json(&chat("hi"))
        .send()
        .await
        .unwrap();
    let tapes = stored(&store).await;
    assert!(tapes.contains("bad key [REDACTED] for project"), "{tapes}");
    assert!(!tapes.contains(opaque), "{tapes}");
    proxy.stop().await.unwrap();
}

#[test]
fn auth_styles_are_the_documented_ones() {
    assert_eq!("x-goog-api-key".parse(), Ok(AuthStyle::XGoogApiKey));
    assert_eq!("query:key".parse(), Ok(AuthStyle::Query("key".into())));
}
