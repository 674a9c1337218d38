//! `cassette gc --unused` beside a recorder (issue 25 item 4): a recorder stores a cassette and
//! only then logs its key, so gc must never delete a cassette younger than the usage logs it
//! read; and a gc looping beside a recording proxy deletes nothing the proxy recorded.

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

#[test]
fn gc_keeps_cassettes_younger_than_the_usage_logs() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    let store = dir.store("tapes");
    let used = record(&dir, &fake, &case("used", "one"), &store, Some("used.log"));
    // Recorded by a recorder that has not logged them yet (or logs elsewhere): the logs know
    // nothing of them.
    let fresh = record(
        &dir,
        &fake,
        &[case("fresh", "two"), case("old", "three")].join("\n"),
        &store,
        None,
    );
    // One of them was in fact recorded long ago: that one the logs can judge.
    let old = tape(&dir.join("tapes"), &fresh[1]);
    let text = std::fs::read_to_string(&old).unwrap();
    let stamp = serde_json::from_str::<serde_json::Value>(&text).unwrap()["recorded_at"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(&old, text.replace(&stamp, "2020-01-01T00:00:00Z")).unwrap();

    let out = dir.run(&[
        "gc",
        "--unused",
        "--usage-log",
        "used.log",
        "--store",
        &store,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(
        common::stdout(&out).trim(),
        format!("deleted {}", fresh[1]),
        "{}",
        both(&out)
    );
    assert!(
        common::stderr(&out).contains("kept 1 recorded since the usage logs were last written"),
        "{}",
        both(&out)
    );
    assert!(tape(&dir.join("tapes"), &used[0]).exists());
    assert!(
        tape(&dir.join("tapes"), &fresh[0]).exists(),
        "the young cassette was deleted"
    );
    assert!(!old.exists());
    // Its replay still hits.
    dir.write("fresh.jsonl", &case("fresh", "two"));
    let out = dir.run(&["run", "fresh.jsonl", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(json_lines(&out)[0]["hit"], true);
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
