//! `cassette gc --unused` beside a recorder (issue 25 item 4): a recorder logs a cassette's key
//! before it stores the cassette and gc reads the usage logs again after listing the store, so
//! gc never deletes a cassette younger than the log it first read; a gc looping beside a
//! recording proxy deletes nothing the proxy recorded.

mod common;

use common::cli_env::{both, code, json_lines, Workdir};
use common::fake_llm::FakeLlm;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

fn case(id: &str, prompt: &str) -> String {
    format!(
        r#"{{"id":"{id}","prompt":"{prompt}","params":{{"model":"m","temperature":0}},"grader":"contains","expect":{{"needle":"said"}}}}"#
    )
}

/// The file a cassette lives in, in a `file://` store folder.
fn tape(store: &std::path::Path, key: &str) -> std::path::PathBuf {
    store.join(&key[..2]).join(format!("{key}.json"))
}

/// Records `suite` into `store` in auto mode, with a usage log when one is given; the keys.
fn record(
    dir: &Workdir,
    fake: &FakeLlm,
    suite: &str,
    store: &str,
    log: Option<&str>,
) -> Vec<String> {
    dir.write("suite.jsonl", suite);
    let mut args = vec![
        "run",
        "suite.jsonl",
        "--mode",
        "auto",
        "--store",
        store,
        "--upstream",
        &fake.url,
    ];
    if let Some(log) = log {
        args.extend(["--usage-log", log]);
    }
    let out = dir.run(&args);
    assert_eq!(code(&out), 0, "{}", both(&out));
    json_lines(&out)
        .iter()
        .map(|l| l["key"].as_str().unwrap().to_owned())
        .collect()
}

/// A store that notes, at every write, whether the usage log already names the key.
#[derive(Debug)]
struct LogChecking {
    inner: cassette_store::DynStore,
    log: std::path::PathBuf,
    logged_first: std::sync::Mutex<Vec<bool>>,
}

impl LogChecking {
    fn note(&self, key: &cassette_store::Key) {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let named = log.lines().any(|l| l.trim() == key.as_str());
        self.logged_first.lock().unwrap().push(named);
    }
}

impl std::fmt::Display for LogChecking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.inner.location())
    }
}

#[async_trait::async_trait]
impl cassette_store::Store for LogChecking {
    async fn get(&self, key: &cassette_store::Key) -> cassette_store::Result<Option<bytes::Bytes>> {
        self.inner.get(key).await
    }
    async fn get_raw(
        &self,
        key: &cassette_store::Key,
    ) -> cassette_store::Result<Option<bytes::Bytes>> {
        self.inner.get_raw(key).await
    }
    async fn put_with(
        &self,
        key: &cassette_store::Key,
        document: bytes::Bytes,
        mode: cassette_store::PutMode,
    ) -> cassette_store::Result<cassette_store::Created> {
        self.note(key);
        self.inner.put_with(key, document, mode).await
    }
    async fn delete(&self, key: &cassette_store::Key) -> cassette_store::Result<()> {
        self.inner.delete(key).await
    }
    async fn list(&self, prefix: &str) -> cassette_store::Result<Vec<cassette_store::Key>> {
        self.inner.list(prefix).await
    }
    fn location(&self) -> String {
        self.inner.location()
    }
    fn keeps_segments(&self) -> bool {
        self.inner.keeps_segments()
    }
    async fn put_segment(
        &self,
        name: &cassette_store::SegmentName,
        document: bytes::Bytes,
    ) -> cassette_store::Result<cassette_store::Created> {
        self.inner.put_segment(name, document).await
    }
    async fn get_segment(
        &self,
        name: &cassette_store::SegmentName,
    ) -> cassette_store::Result<Option<bytes::Bytes>> {
        self.inner.get_segment(name).await
    }
    async fn list_segments(&self) -> cassette_store::Result<Vec<cassette_store::SegmentName>> {
        self.inner.list_segments().await
    }
    async fn delete_segment(
        &self,
        name: &cassette_store::SegmentName,
    ) -> cassette_store::Result<()> {
        self.inner.delete_segment(name).await
    }
}

/// The order that makes gc safe beside a recorder: a cassette's key is in the usage log before
/// the cassette is in the store, so a gc that lists the store and then reads the log finds it.
#[test]
fn a_recorder_logs_a_key_before_it_stores_the_cassette() {
    use cassette_recorder::{Mode, Recorder, RecorderConfig, Request, Route};
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    let log = dir.join("used.log");
    let store = std::sync::Arc::new(LogChecking {
        inner: cassette_store::open(&dir.store("tapes")).unwrap(),
        log: log.clone(),
        logged_first: std::sync::Mutex::new(Vec::new()),
    });
    let config = RecorderConfig {
        mode: Mode::Auto,
        routes: vec![Route::new("default", &fake.url)],
        ..RecorderConfig::default()
    };
    let recorder = Recorder::with_usage_log(config, store.clone(), Some(log.clone())).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for (prompt, stream) in [("one", false), ("two", true)] {
            let body = serde_json::json!({"model": "m", "stream": stream,
                "messages": [{"role": "user", "content": prompt}]});
            let outcome = recorder
                .handle(Request::post_json("/v1/chat/completions", &body))
                .await
                .unwrap();
            // A streamed answer is stored when its body has been read.
            let _ = outcome.response.into_bytes().await.unwrap();
        }
    });
    let noted = store.logged_first.lock().unwrap().clone();
    assert_eq!(
        noted,
        [true, true],
        "a cassette was stored before its key was logged"
    );
}

/// A `cassette proxy` in auto mode, logging usage; killed when dropped.
struct Proxy {
    child: Child,
    url: String,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped yet.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

#[test]
fn gc_looping_beside_a_recording_proxy_deletes_nothing_it_recorded() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    let store = dir.store("tapes");
    // One cassette nobody uses, recorded long ago: what gc is for.
    let stale = record(&dir, &fake, &case("stale", "stale"), &store, None);
    let stale_tape = tape(&dir.join("tapes"), &stale[0]);
    let text = std::fs::read_to_string(&stale_tape).unwrap();
    let stamp = serde_json::from_str::<serde_json::Value>(&text).unwrap()["recorded_at"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(&stale_tape, text.replace(&stamp, "2020-01-01T00:00:00Z")).unwrap();

    let mut child = dir
        .cassette()
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--mode",
            "auto",
            "--store",
            &store,
        ])
        .args(["--upstream", &fake.url, "--usage-log", "used.log"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut proxy = Proxy {
        child,
        url: String::new(),
    };
    let mut line = String::new();
    while proxy.url.is_empty() {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "the proxy died");
        if let Some(rest) = line.split("listening on ").nth(1) {
            proxy.url = rest.split_whitespace().next().unwrap().to_owned();
        }
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));

    let url = proxy.url.clone();
    let sender = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let client = reqwest::Client::new();
            let mut keys = Vec::new();
            for i in 0..120 {
                let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": format!("prompt {i}")}]});
                let answer = client
                    .post(format!("{url}/v1/chat/completions"))
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status(), 200);
                keys.push(answer.headers()["x-cassette-key"].to_str().unwrap().to_owned());
            }
            keys
        })
    });
    let mut gcs = 0;
    while !sender.is_finished() {
        // Until the first key is logged, gc refuses (an empty log); either way it must not
        // delete anything the proxy recorded.
        let _ = dir.run(&[
            "gc",
            "--unused",
            "--usage-log",
            "used.log",
            "--store",
            &store,
        ]);
        gcs += 1;
    }
    let keys = sender.join().unwrap();
    drop(proxy);
    let out = dir.run(&[
        "gc",
        "--unused",
        "--usage-log",
        "used.log",
        "--store",
        &store,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(gcs > 1, "gc ran beside the recorder");
    for key in &keys {
        assert!(tape(&dir.join("tapes"), key).exists(), "{key} was deleted");
    }
    assert!(!stale_tape.exists(), "the stale cassette stays collectable");
}
