//! Two processes recording the same key at once leave one complete cassette.
//!
//! The test re-executes its own binary as the two writers (role given by an environment
//! variable), so the writers are real processes racing on a real file store.

mod support;

use cassette_recorder::{Cassette, Mode, Recorder, RecorderConfig, Request, Route};
use serde_json::json;
use std::path::Path;
use support::{FakeUpstream, Reply};

const ROLE: &str = "CASSETTE_TEST_WRITER_STORE";
const UPSTREAM: &str = "CASSETTE_TEST_WRITER_UPSTREAM";
const TEST_NAME: &str = "two_processes_recording_one_key_leave_one_complete_cassette";

fn request() -> Request {
    Request::post_json(
        "/v1/chat/completions",
        &json!({"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "Weather?"}]}),
    )
}

async fn write_as_child(store_url: &str, upstream: &str) {
    let config = RecorderConfig {
        mode: Mode::Record,
        routes: vec![Route::new("default", upstream)],
        ..RecorderConfig::default()
    };
    let store = cassette_store::open(store_url).unwrap();
    let outcome = Recorder::new(config, store)
        .unwrap()
        .handle(request())
        .await
        .unwrap();
    outcome.response.into_bytes().await.unwrap();
}

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test]
async fn two_processes_recording_one_key_leave_one_complete_cassette() {
    if let (Ok(store_url), Ok(upstream)) = (std::env::var(ROLE), std::env::var(UPSTREAM)) {
        return write_as_child(&store_url, &upstream).await;
    }
    let fake = FakeUpstream::start().await;
    fake.reply(
        "/v1/chat/completions",
        Reply::Stream {
            content_type: "text/event-stream".into(),
            body: support::fixture("openai_chat_tool.sse"),
            // Many small pieces with a pause between each: the two writers overlap.
            pieces: vec![9],
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("file://{}", dir.path().display());
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            tokio::process::Command::new(&exe)
                .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
                .env(ROLE, &store_url)
                .env(UPSTREAM, &fake.url)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().await.unwrap().success());
    }
    assert_eq!(fake.requests(), 2, "each writer calls the upstream once");

    let files = files_under(dir.path());
    assert_eq!(
        files.len(),
        1,
        "expected one cassette and no temp files: {files:?}"
    );
    let cassette = Cassette::from_document(&std::fs::read(&files[0]).unwrap()).unwrap();
    let expected: serde_json::Value =
        serde_json::from_slice(&support::fixture("openai_chat_tool.final.json")).unwrap();
    assert_eq!(cassette.response.body.as_json(), Some(&expected));
}
