//! Forward-proxy requests end to end over real sockets: what a client whose base URL bypasses
//! the proxy sends when the proxy variables point at it (`CONNECT host:port`, absolute-form
//! `http://host/...`). In replay they are refused without connecting anywhere and counted by
//! host; in record they are tunnelled or relayed unrecorded, carrying only what the client
//! sent, never a route's key. A fake upstream counts the connections it gets.

mod support;

use cassette_recorder::config::ApiKey;
use cassette_recorder::proxy::{spawn, Exposure, Forwarding, ProxyConfig, RunningProxy};
use cassette_recorder::{Mode, Recorder, RecorderConfig, Route};
use cassette_store::DynStore;
use serde_json::{json, Value};
use std::net::SocketAddr;
use support::{FakeUpstream, Reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ROUTE_KEY: &str = "sk-route-secret-0123456789";

fn chat_reply() -> Reply {
    Reply::json(
        200,
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        }),
    )
}

fn memory() -> DynStore {
    cassette_store::open("memory://").unwrap()
}

/// A proxy whose default route (holding a key) points at `upstream`.
async fn proxy(mode: Mode, upstream: &str, store: &DynStore, config: ProxyConfig) -> RunningProxy {
    let mut route = Route::new("default", upstream);
    route.api_key = ApiKey::new(ROUTE_KEY);
    let recorder = Recorder::new(
        RecorderConfig {
            mode,
            routes: vec![route],
            ..RecorderConfig::default()
        },
        store.clone(),
    )
    .unwrap();
    spawn(recorder, &config).await.unwrap()
}

fn authority(url: &str) -> &str {
    url.trim_start_matches("http://")
}

/// Sends `CONNECT target` on a fresh connection to the proxy; returns the status line and the
/// connection, positioned after the answer's head.
async fn connect(proxy: SocketAddr, target: &str, extra: &str) -> (String, TcpStream) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    let head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{extra}\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let head = read_head(&mut stream).await;
    (head.lines().next().unwrap_or_default().to_owned(), stream)
}

/// Reads up to the end of an HTTP head (`\r\n\r\n`).
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).await.unwrap();
        assert!(n > 0, "closed mid-head: {}", String::from_utf8_lossy(&head));
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

/// A client that sends everything through `proxy` as a forward proxy.
fn via(proxy: &RunningProxy) -> reqwest::Client {
    reqwest::Client::builder()
        .proxy(reqwest::Proxy::all(proxy.url()).unwrap())
        .build()
        .unwrap()
}

fn chat_body() -> Value {
    json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn replay_refuses_a_tunnel_without_connecting_and_names_the_host() {
    let upstream = FakeUpstream::start().await;
    let store = memory();
    let proxy = proxy(
        Mode::Replay,
        &upstream.url,
        &store,
        ProxyConfig::ephemeral(),
    )
    .await;

    let (status, _) = connect(proxy.addr(), authority(&upstream.url), "").await;
    assert!(status.contains(" 403 "), "{status}");
    let (status, _) = connect(proxy.addr(), "api.openai.com:443", "").await;
    assert!(status.contains(" 403 "), "{status}");
    let (status, _) = connect(proxy.addr(), "api.openai.com:443", "").await;
    assert!(status.contains(" 403 "), "{status}");

    assert_eq!(upstream.connections(), 0, "replay connected somewhere");
    let stats = proxy.stop().await.unwrap();
    assert_eq!(
        stats.requests, 0,
        "a bypass is not a request through a route"
    );
    assert_eq!(stats.bypass_count(), 3);
    let openai = stats
        .bypassed
        .iter()
        .find(|b| b.host == "api.openai.com")
        .unwrap();
    assert_eq!((openai.port, openai.refused, openai.tunnelled), (443, 2, 0));
}

#[tokio::test]
async fn replay_refuses_an_absolute_form_request_even_for_a_recorded_path() {
    let mut upstream = FakeUpstream::start().await;
    upstream.reply("/v1/chat/completions", chat_reply());
    let store = memory();
    // Record the request through the route, so a replay could answer it if it were routed.
    let recording = proxy(
        Mode::Record,
        &upstream.url,
        &store,
        ProxyConfig::ephemeral(),
    )
    .await;
    let routed = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", recording.url()))
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(routed.status(), 200);
    recording.stop().await.unwrap();
    let before = upstream.connections();
    upstream.stop();

    let proxy = proxy(
        Mode::Replay,
        &upstream.url,
        &store,
        ProxyConfig::ephemeral(),
    )
    .await;
    // The vendor URL, hard-coded: the absolute form names the vendor, not the proxy.
    let answer = via(&proxy)
        .post(format!("{}/v1/chat/completions", upstream.url))
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 403);
    assert_eq!(answer.headers()["x-should-retry"], "false");
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["type"], "cassette_bypass");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bypassed the proxy's routes"),
        "{body}"
    );
    // `http://host/healthz` is not the proxy's health check either.
    let health = via(&proxy)
        .get("http://example.invalid/healthz")
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 403);
    assert_eq!(upstream.connections(), before);
    let stats = proxy.stop().await.unwrap();
    assert_eq!((stats.requests, stats.recorder.hits), (0, 0));
    assert_eq!(stats.bypass_count(), 2);
}

#[tokio::test]
async fn record_tunnels_bytes_untouched_and_never_adds_the_route_key() {
    let upstream = FakeUpstream::start().await;
    upstream.reply("/v1/chat/completions", chat_reply());
    let store = memory();
    let proxy = proxy(
        Mode::Record,
        &upstream.url,
        &store,
        ProxyConfig::ephemeral(),
    )
    .await;

    // A TLS-less stand-in: plain HTTP inside the tunnel, as TLS would pass through it.
    let (status, mut tunnel) = connect(proxy.addr(), authority(&upstream.url), "").await;
    assert!(status.contains(" 200 "), "{status}");
    let body = chat_body().to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: vendor\r\nAuthorization: Bearer client-own\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tunnel.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tunnel.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("Hello"), "{answer}");

    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["authorization"], "Bearer client-own");
    assert!(!format!("{seen:?}").contains(ROUTE_KEY));
    let stats = proxy.stop().await.unwrap();
    assert_eq!(stats.recorder.recorded, 0, "a tunnel cannot be recorded");
    assert_eq!(stats.bypassed.len(), 1);
    assert_eq!(
        (stats.bypassed[0].tunnelled, stats.bypassed[0].refused),
        (1, 0)
    );
    assert!(store.list("").await.unwrap().is_empty());
}

#[tokio::test]
async fn record_relays_plain_http_with_the_clients_own_credential_only() {
    let upstream = FakeUpstream::start().await;
    upstream.reply("/v1/chat/completions", chat_reply());
    let store = memory();
    let proxy = proxy(Mode::Auto, &upstream.url, &store, ProxyConfig::ephemeral()).await;
    let answer = via(&proxy)
        .post(format!("{}/v1/chat/completions?x=1", upstream.url))
        .bearer_auth("client-own")
        .header("proxy-authorization", "Basic c2VjcmV0")
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["x-request-id"], "req_fake_1");
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "Hello");
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].uri, "/v1/chat/completions?x=1");
    assert_eq!(seen[0].headers["authorization"], "Bearer client-own");
    assert!(!seen[0].headers.contains_key("proxy-authorization"));
    assert!(!format!("{seen:?}").contains(ROUTE_KEY));
    let stats = proxy.stop().await.unwrap();
    assert_eq!((stats.requests, stats.recorder.recorded), (0, 0));
    assert_eq!(stats.bypass_count(), 1);
}

#[tokio::test]
async fn an_absolute_form_request_for_the_proxy_itself_goes_through_its_routes() {
    let upstream = FakeUpstream::start().await;
    upstream.reply("/v1/chat/completions", chat_reply());
    let store = memory();
    let proxy = proxy(
        Mode::Record,
        &upstream.url,
        &store,
        ProxyConfig::ephemeral(),
    )
    .await;
    // The second asks what the first recorded: a record session asks the upstream once.
    for (own, source) in [
        (proxy.url(), "recorded"),
        (
            format!("http://localhost:{}", proxy.addr().port()),
            "replayed",
        ),
    ] {
        let answer = via(&proxy)
            .post(format!("{own}/v1/chat/completions"))
            .json(&chat_body())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{own}");
        assert_eq!(answer.headers()["x-cassette"], source, "{own}");
    }
    let health = via(&proxy)
        .get(format!("{}/healthz", proxy.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let stats = proxy.stop().await.unwrap();
    assert_eq!((stats.requests, stats.bypass_count()), (2, 0));
    // The route's key went where it belongs: to the route's upstream, through the route.
    assert!(upstream
        .seen()
        .iter()
        .all(|s| s.headers["authorization"] == format!("Bearer {ROUTE_KEY}")));
}

#[tokio::test]
async fn allowed_hosts_are_not_counted_and_replay_still_never_connects() {
    let upstream = FakeUpstream::start().await;
    upstream.reply("/v1/chat/completions", chat_reply());
    let store = memory();
    let allow = ProxyConfig {
        forwarding: Forwarding::Catch {
            allow: vec!["127.0.0.1".parse().unwrap()],
        },
        ..ProxyConfig::ephemeral()
    };
    let recording = proxy(Mode::Record, &upstream.url, &store, allow.clone()).await;
    let (status, _) = connect(recording.addr(), authority(&upstream.url), "").await;
    assert!(status.contains(" 200 "), "{status}");
    assert_eq!(recording.stop().await.unwrap().bypass_count(), 0);
    let before = upstream.connections();

    let replaying = proxy(Mode::Replay, &upstream.url, &store, allow).await;
    let (status, _) = connect(replaying.addr(), authority(&upstream.url), "").await;
    assert!(status.contains(" 403 "), "{status}");
    assert_eq!(replaying.stop().await.unwrap().bypass_count(), 0);
    assert_eq!(upstream.connections(), before);
}

#[tokio::test]
async fn a_web_pages_request_is_never_forwarded() {
    let upstream = FakeUpstream::start().await;
    let store = memory();
    let proxy = proxy(
        Mode::Record,
        &upstream.url,
        &store,
        ProxyConfig::ephemeral(),
    )
    .await;
    let (status, _) = connect(
        proxy.addr(),
        authority(&upstream.url),
        "Origin: https://evil.example\r\n",
    )
    .await;
    assert!(status.contains(" 403 "), "{status}");
    let answer = via(&proxy)
        .get(format!("{}/x", upstream.url))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 403);
    assert_eq!(upstream.connections(), 0);
    let stats = proxy.stop().await.unwrap();
    assert_eq!(stats.bypassed[0].refused, 2);
}

#[tokio::test]
async fn forwarding_off_refuses_without_counting() {
    let upstream = FakeUpstream::start().await;
    let store = memory();
    let off = ProxyConfig {
        forwarding: Forwarding::Off,
        ..ProxyConfig::ephemeral()
    };
    let proxy = proxy(Mode::Record, &upstream.url, &store, off).await;
    let (status, _) = connect(proxy.addr(), authority(&upstream.url), "").await;
    assert!(status.contains(" 403 "), "{status}");
    assert_eq!(upstream.connections(), 0);
    assert_eq!(proxy.stop().await.unwrap().bypass_count(), 0);
}

#[tokio::test]
async fn a_tunnel_to_the_proxy_itself_is_refused() {
    let upstream = FakeUpstream::start().await;
    let store = memory();
    let proxy = proxy(
        Mode::Record,
        &upstream.url,
        &store,
        ProxyConfig::ephemeral(),
    )
    .await;
    let own = authority(&proxy.url()).to_owned();
    let (status, _) = connect(proxy.addr(), &own, "").await;
    assert!(status.contains(" 400 "), "{status}");
    assert_eq!(proxy.stop().await.unwrap().bypass_count(), 0);
}

/// This machine's address on a non-loopback interface, if it has one.
fn non_loopback_ip() -> Option<std::net::IpAddr> {
    // Connecting a UDP socket sends nothing; it only picks the outgoing interface.
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("10.255.255.255:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[tokio::test]
async fn a_proxy_exposed_to_the_network_forwards_for_this_machine_only() {
    let Some(ip) = non_loopback_ip() else {
        eprintln!("no non-loopback interface on this machine: nothing to check");
        return;
    };
    let upstream = FakeUpstream::start().await;
    let store = memory();
    let exposed = ProxyConfig {
        listen: SocketAddr::new(ip, 0),
        exposure: Exposure::AllowRemote,
        ..ProxyConfig::ephemeral()
    };
    let proxy = proxy(Mode::Record, &upstream.url, &store, exposed).await;
    // Reached through the network address, the peer is not loopback.
    let (status, _) = connect(proxy.addr(), authority(&upstream.url), "").await;
    assert!(status.contains(" 403 "), "{status}");
    assert_eq!(upstream.connections(), 0);
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn the_miss_status_is_configurable_and_checked() {
    let upstream = FakeUpstream::start().await;
    let store = memory();
    let config = ProxyConfig {
        miss_status: 424,
        ..ProxyConfig::ephemeral()
    };
    let proxy = proxy(Mode::Replay, &upstream.url, &store, config).await;
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url()))
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 424);
    assert_eq!(answer.headers()["x-should-retry"], "false");
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["type"], "cassette_miss");
    assert_eq!(body["error"]["key"].as_str().map(str::len), Some(64));
    // Other errors keep their own status.
    let big = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url()))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), 400);
    proxy.stop().await.unwrap();

    for bad in [200, 302, 600, 0] {
        let config = ProxyConfig {
            miss_status: bad,
            ..ProxyConfig::ephemeral()
        };
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("miss status"), "{bad}: {err}");
    }
}
