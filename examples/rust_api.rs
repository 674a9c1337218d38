//! The Rust API end to end, offline: record one chat completion from a stand-in upstream through
//! a `Recorder`, stop the upstream, then replay it through the proxy started in-process on a
//! free port, as any HTTP client (or SDK) pointed at the proxy would.
//!
//! Run with `cargo run --example rust_api`.

use cassette_recorder::proxy::{self, ProxyConfig};
use cassette_recorder::{Mode, Recorder, RecorderConfig, Request, Route};
use serde_json::{json, Value};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A stand-in for the vendor's API, so the example needs no network and no key.
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let upstream_url = format!("http://{}", upstream.local_addr()?);
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|| async {
            axum::Json(json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "Refunds take 5 business days."}}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
            }))
        }),
    );
    let server = tokio::spawn(async move { axum::serve(upstream, app).await });

    let folder = tempfile::tempdir()?;
    let store_url = format!("file://{}", folder.path().display());
    let routes = vec![Route::new("default", upstream_url)];
    let question = json!({
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Where is my refund?"}]
    });

    // 1. Record through the recorder directly.
    let recording = RecorderConfig {
        mode: Mode::Record,
        routes: routes.clone(),
        ..RecorderConfig::default()
    };
    let recorder = Recorder::open(recording, &store_url, None)?;
    let outcome = recorder
        .handle(Request::post_json("/v1/chat/completions", &question))
        .await?;
    println!(
        "recorded cassette {} ({:?})",
        outcome.key.short(),
        outcome.source
    );
    outcome.response.into_bytes().await?;
    server.abort();

    // 2. Replay through the proxy, with the upstream gone.
    let replaying = RecorderConfig {
        mode: Mode::Replay,
        routes,
        ..RecorderConfig::default()
    };
    let proxy = proxy::spawn(
        Recorder::open(replaying, &store_url, None)?,
        &ProxyConfig::ephemeral(),
    )
    .await?;
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url()))
        .json(&question)
        .send()
        .await?
        .json()
        .await?;
    println!(
        "replayed through {}: {}",
        proxy.url(),
        answer["choices"][0]["message"]["content"]
    );
    let stats = proxy.stop().await?;
    println!("proxy counters: {stats:?}");
    Ok(())
}
