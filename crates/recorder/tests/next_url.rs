//! Issue 33: an answer header that carries the URL of the client's next request (Gemini's
//! resumable upload, `x-goog-upload-url`) is stored as the upstream sent it, less credentials,
//! and reaches the client as an absolute URL into the proxy with the prefixes its base URL had
//! (`/_run/SECRET/`, `/_scope/ID/`), in record and replay alike; the run secret is never stored.

mod support;

use bytes::Bytes;
use cassette_recorder::proxy::{spawn, ProxyConfig, RunSecret, RunningProxy};
use cassette_recorder::{Mode, Recorder, RecorderConfig, Route};
use cassette_store::DynStore;
use serde_json::{json, Value};
use std::path::Path;
use support::{FakeUpstream, Reply};

const SECRET: &str = "RunSecret0123456789abcdef";
const TOKEN: &str = "control-token-0123456789";
const UPLOAD: &str = "/upload/v1beta/files";
const ROUTE_KEY: &str = "AIzaSyRouteKey0123456789abcdefghijklmno";

async fn proxy(mode: Mode, upstream: &str, store: &DynStore) -> RunningProxy {
    let config = RecorderConfig {
        mode,
        routes: vec![Route::new("gemini", upstream)],
        ..RecorderConfig::default()
    };
    let recorder = Recorder::new(config, store.clone()).unwrap();
    let config = ProxyConfig {
        run_secret: Some(RunSecret::new(SECRET).unwrap()),
        control_token: Some(TOKEN.to_owned()),
        ..ProxyConfig::ephemeral()
    };
    spawn(recorder, &config).await.unwrap()
}

async fn begin(proxy: &RunningProxy, scope: &str) {
    let begun = reqwest::Client::new()
        .put(format!("{}/_cassette/scopes/{scope}", proxy.url()))
        .header("x-cassette-control", TOKEN)
        .json(&json!({"test": format!("tests/test_upload.py::{scope}")}))
        .send()
        .await
        .unwrap();
    assert_eq!(begun.status(), 200, "{}", begun.text().await.unwrap());
}

/// The start of a resumable upload, as google-genai sends it, to `url`.
async fn start(url: &str, secret_header: bool) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("x-goog-api-key", "client-key")
        .header("x-goog-upload-protocol", "resumable")
        .header("x-goog-upload-command", "start")
        .header("x-goog-upload-header-content-length", "12")
        .header("x-goog-upload-header-content-type", "text/plain")
        .json(&json!({"file": {"displayName": "notes.txt"}}));
    if secret_header {
        request = request.header("x-cassette-run", SECRET);
    }
    request.send().await.unwrap()
}

/// The bytes, sent where the start's answer said.
async fn upload(url: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("x-goog-api-key", "client-key")
        .header("x-goog-upload-command", "upload, finalize")
        .header("x-goog-upload-offset", "0")
        .body("hello, file!")
        .send()
        .await
        .unwrap()
}

fn header<'r>(response: &'r reqwest::Response, name: &str) -> &'r str {
    match response.headers().get(name) {
        Some(value) => value.to_str().unwrap(),
        None => panic!("no {name} in {:?}", response.headers()),
    }
}

fn file_json() -> Value {
    json!({"file": {"name": "files/abc123", "displayName": "notes.txt", "mimeType": "text/plain",
                    "sizeBytes": "12", "state": "ACTIVE",
                    "uri": "https://generativelanguage.googleapis.com/v1beta/files/abc123"}})
}

fn every_stored_byte(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            text.push_str(&every_stored_byte(&path));
        } else {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
    text
}

#[tokio::test]
async fn an_upload_url_leads_back_through_the_proxy_with_the_clients_prefixes() {
    let fake = FakeUpstream::start().await;
    let vendor_upload = format!(
        "{}{UPLOAD}?upload_id=ABpAqW-u1&upload_protocol=resumable&key={ROUTE_KEY}",
        fake.url
    );
    fake.reply(
        UPLOAD,
        Reply::Raw {
            status: 200,
            headers: vec![
                ("x-goog-upload-url".into(), vendor_upload),
                ("x-goog-upload-status".into(), "active".into()),
                ("x-goog-upload-chunk-granularity".into(), "8388608".into()),
                ("content-type".into(), "text/plain; charset=utf-8".into()),
            ],
            body: Bytes::new(),
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let store = cassette_store::open(&format!("file://{}", dir.path().display())).unwrap();
    let recording = proxy(Mode::Record, &fake.url, &store).await;
    begin(&recording, "t1").await;
    let base = format!("{}/_run/{SECRET}/_scope/t1/gemini", recording.url());
    let started = start(&format!("{base}{UPLOAD}"), false).await;
    assert_eq!(started.status(), 200);
    assert_eq!(header(&started, "x-cassette"), "recorded");
    assert_eq!(header(&started, "x-goog-upload-status"), "active");
    // Absolute, behind the same prefixes, without the upstream's credential parameter.
    let next = header(&started, "x-goog-upload-url").to_owned();
    assert_eq!(
        next,
        format!("{base}{UPLOAD}?upload_id=ABpAqW-u1&upload_protocol=resumable")
    );
    fake.reply(
        UPLOAD,
        Reply::Raw {
            status: 200,
            headers: vec![
                ("x-goog-upload-status".into(), "final".into()),
                ("content-type".into(), "application/json".into()),
            ],
            body: Bytes::from(file_json().to_string()),
        },
    );
    let uploaded = upload(&next).await;
    assert_eq!(uploaded.status(), 200);
    assert_eq!(header(&uploaded, "x-goog-upload-status"), "final");
    assert_eq!(header(&uploaded, "x-cassette"), "recorded");
    let seen = fake.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        seen[1].uri,
        format!("{UPLOAD}?upload_id=ABpAqW-u1&upload_protocol=resumable")
    );
    assert_eq!(&seen[1].body[..], b"hello, file!");

    // A client that sends the secret as a header, outside any scope, gets neither in the URL.
    let by_header = start(&format!("{}/gemini{UPLOAD}", recording.url()), true).await;
    assert_eq!(
        header(&by_header, "x-goog-upload-url"),
        format!(
            "{}/gemini{UPLOAD}?upload_id=ABpAqW-u1&upload_protocol=resumable",
            recording.url()
        )
    );
    recording.stop().await.unwrap();

    // The tape holds the upstream's URL, without its key; never the run secret.
    let stored = every_stored_byte(dir.path());
    assert!(!stored.contains(SECRET), "{stored}");
    assert!(!stored.contains(ROUTE_KEY), "{stored}");
    assert!(!stored.contains("_run"), "{stored}");
    let upload_url = format!(
        "\"x-goog-upload-url\": \"{}{UPLOAD}?upload_id=ABpAqW-u1&upload_protocol=resumable\"",
        fake.url
    );
    assert!(stored.contains(&upload_url), "{stored}");

    // Replay: the same URLs, the vendor never called.
    let requests = fake.requests();
    let replay = proxy(Mode::Replay, &fake.url, &store).await;
    begin(&replay, "t2").await;
    let base = format!("{}/_run/{SECRET}/_scope/t2/gemini", replay.url());
    let started = start(&format!("{base}{UPLOAD}"), false).await;
    assert_eq!(header(&started, "x-cassette"), "replayed");
    let next = header(&started, "x-goog-upload-url").to_owned();
    assert_eq!(
        next,
        format!("{base}{UPLOAD}?upload_id=ABpAqW-u1&upload_protocol=resumable")
    );
    let uploaded = upload(&next).await;
    assert_eq!(header(&uploaded, "x-cassette"), "replayed");
    assert_eq!(header(&uploaded, "x-goog-upload-status"), "final");
    let file: Value = uploaded.json().await.unwrap();
    assert_eq!(file, file_json());
    replay.stop().await.unwrap();
    assert_eq!(
        fake.requests(),
        requests,
        "replay never reached the upstream"
    );
}
