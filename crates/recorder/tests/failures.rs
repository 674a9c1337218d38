//! Issue 34 item 7: with error recording on, an upstream that resets the connection or never
//! answers is recorded as such, and replay reproduces the failure (a connection closed without
//! an answer, after the recorded delay) without opening an upstream connection, counted apart
//! from answers. Without error recording nothing is stored. Over real sockets, with a real
//! HTTP client (reqwest).

use cassette_recorder::proxy::{spawn, ProxyConfig, RunningProxy};
use cassette_recorder::{ErrorRecording, Mode, Recorder, RecorderConfig, Route};
use cassette_store::DynStore;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// How a fake upstream fails: it reads the request, then closes the connection, or holds it
/// open without a word.
#[derive(Clone, Copy)]
enum Failing {
    Reset,
    Stall,
}

/// A fake upstream on 127.0.0.1 that fails every request; counts its connections.
async fn failing(how: Failing) -> (String, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicU64::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let _ = socket.read(&mut buf).await;
                match how {
                    Failing::Reset => drop(socket),
                    Failing::Stall => {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        drop(socket);
                    }
                }
            });
        }
    });
    (url, connections)
}

fn config(mode: Mode, upstream: &str, errors: ErrorRecording) -> RecorderConfig {
    RecorderConfig {
        mode,
        routes: vec![Route::new("default", format!("{upstream}/v1"))],
        errors,
        upstream_timeout: Duration::from_millis(400),
        ..RecorderConfig::default()
    }
}

async fn proxy(config: RecorderConfig, store: &DynStore) -> RunningProxy {
    let recorder = Recorder::new(config, store.clone()).unwrap();
    spawn(recorder, &ProxyConfig::ephemeral()).await.unwrap()
}

async fn ask(proxy: &RunningProxy, timeout: Duration) -> Result<reqwest::Response, reqwest::Error> {
    let body = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .unwrap()
        .post(format!("{}/v1/chat/completions", proxy.url()))
        .json(&body)
        .send()
        .await
}

#[tokio::test]
async fn a_recorded_reset_and_timeout_replay_as_the_same_failure() {
    for how in [Failing::Reset, Failing::Stall] {
        let (upstream, connections) = failing(how).await;
        let store = cassette_store::open("memory://").unwrap();
        let record = proxy(
            config(Mode::Record, &upstream, ErrorRecording::Record),
            &store,
        )
        .await;
        // While recording, the client gets the proxy's error for the failure, as without.
        let live = ask(&record, Duration::from_secs(10)).await.unwrap();
        let expected = match how {
            Failing::Reset => 502,
            Failing::Stall => 504,
        };
        assert_eq!(live.status().as_u16(), expected);
        // ... told that it was kept, not the "nothing was recorded" of an unrecorded failure.
        let said = live.text().await.unwrap();
        assert!(said.contains("recorded as such"), "{said}");
        assert!(!said.contains("nothing was recorded"), "{said}");
        let stats = record.stop().await.unwrap();
        assert_eq!(stats.recorder.recorded, 1);
        let keys = store.list("").await.unwrap();
        assert_eq!(keys.len(), 1, "the failure is stored");
        let stored = store.get(&keys[0]).await.unwrap().unwrap();
        let cassette = cassette_tape::Cassette::from_document(&stored).unwrap();
        assert_eq!(cassette.format, 4);
        let failure = cassette.response.failure.expect("a failure is stored");
        match (how, failure) {
            (Failing::Reset, cassette_tape::UpstreamFailure::Reset { after_ms }) => {
                assert!(after_ms < 400, "{after_ms}")
            }
            (Failing::Stall, cassette_tape::UpstreamFailure::Timeout { after_ms }) => {
                assert!((400..5_000).contains(&after_ms), "{after_ms}")
            }
            (_, other) => panic!("recorded as {other:?}"),
        }

        let seen = connections.load(Ordering::SeqCst);
        let replay = proxy(
            config(Mode::Replay, &upstream, ErrorRecording::PassThrough),
            &store,
        )
        .await;
        let started = Instant::now();
        let err = ask(&replay, Duration::from_secs(10)).await.unwrap_err();
        let waited = started.elapsed();
        assert!(!err.is_timeout() && !err.is_status(), "{err:?}");
        assert!(err.is_request(), "no answer at all: {err:?}");
        if let Failing::Stall = how {
            assert!(waited >= Duration::from_millis(380), "{waited:?}");
            // A client with a shorter timeout of its own sees its read time out.
            let err = ask(&replay, Duration::from_millis(150)).await.unwrap_err();
            assert!(err.is_timeout(), "{err:?}");
        }
        let stats = replay.stop().await.unwrap();
        assert_eq!(
            connections.load(Ordering::SeqCst),
            seen,
            "replay called out"
        );
        assert_eq!(stats.recorder.hits, 0, "a failure is no answer");
        assert_eq!(stats.recorder.misses, 0);
        let replayed = match how {
            Failing::Reset => 1,
            Failing::Stall => 2,
        };
        assert_eq!(stats.recorder.failures_replayed, replayed);
        assert_eq!(stats.recorder.upstream_requests, 0);
    }
}

#[tokio::test]
async fn without_error_recording_a_failure_is_not_stored() {
    for how in [Failing::Reset, Failing::Stall] {
        let (upstream, _) = failing(how).await;
        let store = cassette_store::open("memory://").unwrap();
        let record = proxy(
            config(Mode::Record, &upstream, ErrorRecording::PassThrough),
            &store,
        )
        .await;
        let live = ask(&record, Duration::from_secs(10)).await.unwrap();
        assert!(live.status().is_server_error());
        let said = live.text().await.unwrap();
        assert!(said.contains("nothing was recorded"), "{said}");
        let stats = record.stop().await.unwrap();
        assert_eq!(stats.recorder.recorded, 0);
        assert!(store.list("").await.unwrap().is_empty());
    }
}

/// A connection that cannot be made at all (nothing listens) is the environment, not the
/// upstream's behaviour: it is never stored, error recording or not.
#[tokio::test]
async fn an_upstream_that_cannot_be_reached_is_not_stored() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let store = cassette_store::open("memory://").unwrap();
    let record = proxy(
        config(
            Mode::Record,
            &format!("http://127.0.0.1:{port}"),
            ErrorRecording::Record,
        ),
        &store,
    )
    .await;
    let live = ask(&record, Duration::from_secs(10)).await.unwrap();
    assert_eq!(live.status().as_u16(), 502);
    record.stop().await.unwrap();
    assert!(store.list("").await.unwrap().is_empty());
}
