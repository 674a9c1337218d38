//! Issue 32, the channel: `cassette proxy --channel` also listens on a Unix socket only its
//! owner can reach, where requests carry their original URL. A vendor's host is routed to its
//! route (recorded through the route's upstream, the fake standing in, and replayed without
//! reaching it), a host no route serves is refused naming the host, the client and
//! `[bypass] allow`, an allowed or loopback host is told to go direct, and the socket is gone
//! once the proxy stops. Issue 35 item 8: a request naming its test's alias
//! (`x-cassette-scope`) is that test's while it runs, and a late request of it once it ended.
#![cfg(unix)]

mod common;

use common::cli_env::Workdir;
use common::fake_llm::FakeLlm;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

/// A `cassette proxy --channel` child, its socket and its ready line.
struct Channel {
    child: Child,
    socket: PathBuf,
    ready: Value,
}

impl Channel {
    fn start(work: &Workdir, args: &[&str]) -> Channel {
        Channel::spawn(work, args, Stdio::null())
    }

    fn spawn(work: &Workdir, args: &[&str], stdin: Stdio) -> Channel {
        let mut child = work
            .cassette()
            .args([
                "proxy",
                "--listen",
                "127.0.0.1:0",
                "--ready",
                "json",
                "--channel",
            ])
            .args(args)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting cassette proxy");
        let ready = common::ready_line(&mut BufReader::new(child.stdout.take().unwrap()));
        let socket = PathBuf::from(ready["channel"].as_str().expect("a channel path"));
        Channel {
            child,
            socket,
            ready,
        }
    }

    /// One request with its original URL; the status, headers (lowercase) and body.
    fn send(&self, method: &str, url: &str, body: &Value) -> (u16, String, String) {
        self.send_as(method, url, url, "", body)
    }

    /// One request with `target` as its request target and `extra` header lines.
    fn send_as(
        &self,
        method: &str,
        url: &str,
        target: &str,
        extra: &str,
        body: &Value,
    ) -> (u16, String, String) {
        let mut stream = UnixStream::connect(&self.socket).expect("connecting to the channel");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let host = url.split('/').nth(2).unwrap();
        let body = body.to_string();
        // One write of the whole request: the proxy may answer a GET and close before reading
        // its body, and a request written in pieces then meets a closed socket (EPIPE).
        let request = format!(
            "{method} {target} HTTP/1.1\r\nhost: {host}\r\n{extra}user-agent: OpenAI/Python 1.99.0\r\n\
             authorization: Bearer cassette\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let status = answer[9..12].parse().unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        (status, head.to_ascii_lowercase(), body.to_owned())
    }

    fn stop(mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn chat(prompt: &str) -> Value {
    json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]})
}

fn messages(prompt: &str) -> Value {
    json!({"model": "claude-3-5-haiku-latest", "max_tokens": 64,
           "messages": [{"role": "user", "content": prompt}]})
}

const OPENAI: &str = "https://api.openai.com/v1/chat/completions";
const ANTHROPIC: &str = "https://api.anthropic.com/v1/messages";

#[test]
fn vendor_urls_record_and_replay_over_the_channel_and_strangers_are_refused() {
    let work = Workdir::new();
    let store = work.store("tapes");
    let fake = FakeLlm::start();
    let anthropic = format!("anthropic={}", fake.url);
    let record = Channel::start(
        &work,
        &[
            "--mode",
            "record",
            "--store",
            &store,
            "--upstream",
            &fake.url,
            "--route",
            &anthropic,
            "--allow-host",
            "internal.example",
        ],
    );

    // Only the owner can reach it: a private directory, an owner-only socket.
    let dir_mode = std::fs::metadata(record.socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    let socket_mode = std::fs::metadata(&record.socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700, "{dir_mode:o}");
    assert_eq!(socket_mode & 0o777, 0o600, "{socket_mode:o}");

    let (status, head, body) = record.send("POST", OPENAI, &chat("capital of France"));
    assert_eq!(status, 200, "{head}{body}");
    assert!(head.contains("x-cassette: recorded"), "{head}");
    assert!(body.contains("Paris"), "{body}");
    let (status, head, body) = record.send("POST", ANTHROPIC, &messages("capital of France"));
    assert_eq!(status, 200, "{head}{body}");
    assert!(head.contains("x-cassette: recorded"), "{head}");
    // Streams over the channel: tests/sdk/test_in_process.py, with the SDKs' stream helpers.
    let reached = fake.requests();
    assert_eq!(reached, 2);

    // A host no route serves is refused even in record, naming what to do.
    let (status, head, body) = record.send(
        "POST",
        "https://llm.example.com/v1/chat/completions?key=secret",
        &chat("hi"),
    );
    assert_eq!(status, 403, "{head}{body}");
    assert!(head.contains("x-should-retry: false"), "{head}");
    for needle in [
        "llm.example.com:443",
        "OpenAI/Python",
        "[bypass] allow in cassette.toml",
        "cassette_unrouted",
    ] {
        assert!(body.contains(needle), "{needle}: {body}");
    }
    assert!(!body.contains("secret"), "the query stays out: {body}");
    // Allowed and loopback hosts: the transport sends those itself.
    for url in [
        "https://internal.example/x",
        "http://127.0.0.1:9/x",
        "http://localhost:9/x",
    ] {
        let (status, head, body) = record.send("GET", url, &json!({}));
        assert_eq!(status, 421, "{url}: {head}{body}");
        assert!(head.contains("x-cassette: direct"), "{url}: {head}");
    }
    assert_eq!(
        fake.requests(),
        reached,
        "nothing more reached the upstream"
    );
    let socket = record.socket.clone();
    record.stop();
    assert!(
        !socket.exists(),
        "the socket is removed when the proxy stops"
    );
    assert!(
        !socket.parent().unwrap().exists(),
        "and its fresh directory"
    );

    // Replay: answered from the tapes, the fake not reached.
    let replay = Channel::start(
        &work,
        &[
            "--mode",
            "replay",
            "--store",
            &store,
            "--upstream",
            &fake.url,
            "--route",
            &anthropic,
        ],
    );
    let (status, head, body) = replay.send("POST", OPENAI, &chat("capital of France"));
    assert_eq!(status, 200, "{head}{body}");
    assert!(head.contains("x-cassette: replayed"), "{head}");
    assert!(body.contains("Paris"), "{body}");
    let (status, head, _) = replay.send("POST", ANTHROPIC, &messages("capital of France"));
    assert_eq!(status, 200, "{head}");
    // A transport that writes the path (aiohttp) names the URL in a header.
    let (status, head, _) = replay.send_as(
        "POST",
        OPENAI,
        "/v1/chat/completions",
        &format!("x-cassette-url: {OPENAI}\r\n"),
        &chat("capital of France"),
    );
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("x-cassette: replayed"), "{head}");
    // Where a host's requests go, asked before any is sent: nothing forwarded or counted.
    for (url, verdict) in [
        ("https://api.anthropic.com/", "routed"),
        ("http://127.0.0.1:9/", "direct"),
        ("https://llm.example.com/", "refused"),
    ] {
        let (status, head, _) =
            replay.send_as("OPTIONS", url, url, "x-cassette-probe: 1\r\n", &json!({}));
        assert_eq!(status, 204, "{url}: {head}");
        assert!(
            head.contains(&format!("x-cassette: {verdict}")),
            "{url}: {head}"
        );
    }
    // A miss is explained, as over HTTP.
    let (status, head, body) = replay.send("POST", OPENAI, &chat("capital of Spain"));
    assert_eq!(status, 409, "{head}{body}");
    assert!(
        body.contains("cassette_miss") && body.contains("capital of"),
        "{body}"
    );
    assert_eq!(
        fake.requests(),
        reached,
        "replay never reaches the upstream"
    );
    replay.stop();
}

#[test]
fn a_channel_in_a_directory_others_can_enter_is_refused() {
    let work = Workdir::new();
    let open = work.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = open.join("c.sock");
    let out = work
        .cassette()
        .args(["proxy", "--listen", "127.0.0.1:0", "--channel"])
        .arg(&socket)
        .args(["--store", &work.store("tapes")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = common::stderr(&out);
    assert!(
        stderr.contains("0700") && stderr.contains("c.sock"),
        "{stderr}"
    );
    assert!(!socket.exists());

    // A path whose directory does not exist yet: created private, removed afterwards.
    let fresh = work.join("fresh").join("c.sock");
    let channel = {
        let mut child = work
            .cassette()
            .args([
                "proxy",
                "--listen",
                "127.0.0.1:0",
                "--ready",
                "json",
                "--channel",
            ])
            .arg(&fresh)
            .args(["--store", &work.store("tapes")])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(ready["channel"], json!(fresh.to_string_lossy()));
        Channel {
            child,
            socket: fresh.clone(),
            ready,
        }
    };
    let mode = std::fs::metadata(fresh.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    channel.stop();
    assert!(!fresh.exists());
}

/// Issue 35 item 8: a test begun with an alias owns every request naming it, whichever scope
/// runs when the request arrives: while it runs, the request is in its tally; once it ended
/// (the next test begun in the same scope), it is a late request of that test, in the proxy's
/// list of late tallies with its miss, and the running test's tally has none of it. An alias
/// nobody began is refused, and one already taken is not taken again.
#[test]
fn a_request_naming_an_ended_tests_alias_is_that_tests_late_request() {
    let work = Workdir::new();
    let store = work.store("tapes");
    let proxy = Channel::start(&work, &["--mode", "replay", "--store", &store, "--control"]);
    let token = proxy.ready["control"]["token"].as_str().unwrap().to_owned();
    let control = |method: &str, path: &str, body: &Value| {
        let extra = format!("x-cassette-control: {token}\r\n");
        let (status, head, body) = proxy.send_as(method, "http://127.0.0.1/", path, &extra, body);
        assert_eq!(status, 200, "{method} {path}: {head}{body}");
        serde_json::from_str::<Value>(&body).unwrap()
    };
    let from_test = |alias: &str, prompt: &str| {
        let extra = format!("x-cassette-scope: {alias}\r\n");
        proxy.send_as("POST", OPENAI, OPENAI, &extra, &chat(prompt))
    };
    let scope = "/_cassette/scopes/default";

    control("PUT", scope, &json!({"test": "test_a", "alias": "t1"}));
    let (status, _, body) = from_test("t1", "asked while test_a runs");
    assert_eq!(status, 409, "{body}");
    let a = control("DELETE", scope, &json!({}));
    assert_eq!(
        (a["test"].as_str(), a["misses"].as_u64()),
        (Some("test_a"), Some(1)),
        "{a}"
    );

    control("PUT", scope, &json!({"test": "test_b", "alias": "t2"}));
    // test_a's thread, still sending while test_b runs.
    let (status, _, body) = from_test("t1", "asked by test_a's thread");
    assert_eq!(status, 409, "{body}");
    let b = control("DELETE", scope, &json!({}));
    assert_eq!(
        (b["test"].as_str(), b["requests"].as_u64()),
        (Some("test_b"), Some(0)),
        "{b}"
    );

    let answer = control("GET", "/_cassette/scopes", &json!({}));
    let late = answer["late"].as_array().unwrap();
    assert_eq!(late.len(), 1, "{answer}");
    assert_eq!(late[0]["test"], "test_a", "{answer}");
    assert_eq!(late[0]["misses"], 1, "{answer}");
    let failure = late[0]["failure"].to_string();
    assert!(failure.contains("cassette miss"), "{failure}");
    assert_eq!(answer["ended"]["tests"], 2, "{answer}");

    // A stranger's alias begins nothing; a taken alias is not given to another test.
    let (status, _, body) = from_test("t9", "made up");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("was never begun"), "{body}");
    let extra = format!("x-cassette-control: {token}\r\n");
    let taken = json!({"test": "test_c", "alias": "t1"});
    let (status, _, body) = proxy.send_as("PUT", "http://127.0.0.1/", scope, &extra, &taken);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("alias `t1`"), "{body}");
    let c = control("GET", scope, &json!({}));
    assert!(c["failure"].to_string().contains("alias `t1`"), "{c}");
    proxy.stop();
}

#[test]
fn a_refusal_right_after_a_piped_begin_is_that_tests() {
    // The pipe's begin is read by the request that needs it: a runner writes it and the test's
    // first request comes at once, before any background reading of the pipe.
    let work = Workdir::new();
    let store = work.store("tapes");
    let mut proxy = Channel::spawn(
        &work,
        &[
            "--mode",
            "replay",
            "--store",
            &store,
            "--control",
            "--control-pipe",
        ],
        Stdio::piped(),
    );
    let token = proxy.ready["control"]["token"].as_str().unwrap().to_owned();
    let mut pipe = proxy.child.stdin.take().unwrap();
    for n in 1..=5 {
        let begin = json!({"op": "begin", "scope": "default", "test": format!("test_{n}"), "alias": format!("t{n}")});
        pipe.write_all(format!("{begin}\n").as_bytes()).unwrap();
        pipe.flush().unwrap();
        let extra = format!("x-cassette-scope: t{n}\r\n");
        let url = "https://unrouted.example/data";
        let (status, _, body) = proxy.send_as("GET", url, url, &extra, &json!({}));
        assert_eq!(status, 403, "{body}");
        let extra = format!("x-cassette-control: {token}\r\n");
        let (_, _, tally) = proxy.send_as(
            "GET",
            "http://127.0.0.1/",
            "/_cassette/scopes/default",
            &extra,
            &json!({}),
        );
        let tally: Value = serde_json::from_str(&tally).unwrap();
        assert_eq!(tally["test"], format!("test_{n}"), "{tally}");
        assert_eq!(
            tally["errors"], 1,
            "the refusal is the running test's: {tally}"
        );
        let end = json!({"op": "end", "scope": "default"});
        pipe.write_all(format!("{end}\n").as_bytes()).unwrap();
        pipe.flush().unwrap();
    }
    drop(pipe);
    proxy.stop();
}
