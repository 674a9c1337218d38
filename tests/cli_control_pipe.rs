//! `cassette proxy --control-pipe`: test scopes begun and ended by lines on the proxy's stdin,
//! and a line on its stdout when a scope sees a problem (what the pytest plugin uses instead of
//! three round trips to the control endpoint a test).
#![cfg(unix)]

mod common;

use common::cli_env::Workdir;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// `cassette proxy` as a runner plugin starts it, before its mode and store.
const AS_A_PLUGIN: &[&str] = &[
    "proxy",
    "--listen",
    "127.0.0.1:0",
    "--ready",
    "json",
    "--control",
    "--control-pipe",
];

/// A proxy started as a runner plugin starts it, in replay on an empty store: every request
/// to a route misses.
struct Piped {
    child: Child,
    stdin: Option<ChildStdin>,
    notices: Receiver<String>,
    port: u16,
    token: String,
}

impl Piped {
    fn start(work: &Workdir) -> Piped {
        let store = work.store("tapes");
        let mut child = work
            .cassette()
            .args(AS_A_PLUGIN)
            .args(["--mode", "replay", "--store", &store])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting cassette proxy");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let ready = common::ready_line(&mut stdout);
        assert_eq!(ready["control"]["pipe"], json!(true), "{ready}");
        let port = common::ready_port(&ready);
        let token = ready["control"]["token"].as_str().unwrap().to_owned();
        // Bounded: a test that stops reading notices leaves them in the pipe, as a runner would.
        let (tx, notices) = mpsc::sync_channel(1024);
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Piped {
            child,
            stdin: Some(stdin),
            notices,
            port,
            token,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
    }

    fn begin(&mut self, test: &str) {
        self.begin_in("default", test);
    }

    fn begin_in(&mut self, scope: &str, test: &str) {
        self.send(&json!({"op": "begin", "scope": scope, "test": test}).to_string());
    }

    /// One HTTP/1.1 request on a fresh connection: its status and body.
    fn http(&self, method: &str, path: &str, control: bool, body: &str) -> (u16, Value) {
        let token = if control {
            format!("x-cassette-control: {}\r\n", self.token)
        } else {
            String::new()
        };
        let (status, body) = common::raw_request(self.port, method, path, &token, body);
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    /// A chat request nothing was recorded for, in the default scope or scope `scope`.
    fn miss(&self, scope: Option<&str>, n: usize) {
        let path = match scope {
            Some(id) => format!("/_scope/{id}/v1/chat/completions"),
            None => "/v1/chat/completions".to_owned(),
        };
        let body =
            json!({"model": "m", "messages": [{"role": "user", "content": format!("q{n}")}]});
        let (status, _) = self.http("POST", &path, false, &body.to_string());
        assert_eq!(status, 409);
    }

    fn tally(&self) -> Value {
        let (status, tally) = self.http("GET", "/_cassette/scopes/default", true, "");
        assert_eq!(status, 200, "{tally}");
        tally
    }

    fn notice(&self) -> String {
        self.notices
            .recv_timeout(Duration::from_secs(30))
            .expect("a notice on stdout")
    }
}

impl Drop for Piped {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_begin_written_on_the_pipe_scopes_the_very_next_request() {
    let work = Workdir::new();
    let mut proxy = Piped::start(&work);
    // No pause between the line and the request: the request drains the pipe first.
    for n in 0..40 {
        let test = format!("tests/test_x.py::test_{n}");
        proxy.begin(&test);
        proxy.miss(None, n);
        assert_eq!(proxy.notice(), r#"{"problem":"default"}"#);
        let tally = proxy.tally();
        assert_eq!(tally["test"], json!(test), "{tally}");
        assert_eq!(
            (tally["requests"].clone(), tally["misses"].clone()),
            (json!(1), json!(1))
        );
        assert_eq!(tally["missed"].as_array().unwrap().len(), 1, "{tally}");
        proxy.send(r#"{"op":"end","scope":"default"}"#);
    }
    let (_, ended) = proxy.http("GET", "/_cassette/scopes", true, "");
    assert_eq!(ended["ended"]["tests"], json!(40), "{ended}");
    assert_eq!(ended["ended"]["misses"], json!(40), "{ended}");
    // Strangers learn nothing of it.
    let (status, _) = proxy.http("GET", "/_cassette/scopes", false, "");
    assert_eq!(status, 403);
}

#[test]
fn a_scope_gets_one_notice_until_its_tally_is_read() {
    let work = Workdir::new();
    let mut proxy = Piped::start(&work);
    proxy.begin("t1");
    proxy.begin_in("w1", "w1");
    proxy.begin_in("w2", "w2");
    for n in 0..20 {
        proxy.miss(None, n);
    }
    // A miss in another scope marks where the default scope's notices must have ended (the
    // proxy writes its lines in order).
    proxy.miss(Some("w1"), 0);
    assert_eq!(proxy.notice(), r#"{"problem":"default"}"#);
    assert_eq!(proxy.notice(), r#"{"problem":"w1"}"#);
    assert_eq!(proxy.tally()["misses"], json!(20));
    // Read: the next problem is told again.
    proxy.miss(None, 99);
    proxy.miss(Some("w2"), 0);
    assert_eq!(proxy.notice(), r#"{"problem":"default"}"#);
    assert_eq!(proxy.notice(), r#"{"problem":"w2"}"#);
}

#[test]
fn tests_that_send_nothing_never_fill_the_pipe() {
    let work = Workdir::new();
    let proxy = Piped::start(&work);
    // Far more than a pipe holds (64 KiB), and no request to drain it: the proxy follows the
    // pipe on its own, or this write blocks forever.
    let mut lines = String::new();
    for n in 0..20_000 {
        lines.push_str(
            &json!({"op": "begin", "scope": "default", "test": format!("t{n}")}).to_string(),
        );
        lines.push('\n');
        lines.push_str("{\"op\":\"end\",\"scope\":\"default\"}\n");
    }
    let mut stdin = std::fs::File::from(
        std::os::fd::AsFd::as_fd(proxy.stdin.as_ref().unwrap())
            .try_clone_to_owned()
            .unwrap(),
    );
    let writer = std::thread::spawn(move || stdin.write_all(lines.as_bytes()).is_ok());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !writer.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "the runner's writes blocked on a full control pipe"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(writer.join().unwrap());
    let (_, ended) = proxy.http("GET", "/_cassette/scopes", true, "");
    assert_eq!(ended["ended"]["tests"], json!(20_000), "{ended}");
}

#[test]
fn a_line_that_is_not_a_message_fails_the_test_that_runs() {
    let work = Workdir::new();
    let mut proxy = Piped::start(&work);
    proxy.begin("t1");
    proxy.send("not json");
    proxy.send(r#"{"op":"begin","scope":"../etc","test":"x"}"#);
    proxy.send(r#"{"op":"begin","scope":"default","mode":"record-everything"}"#);
    let tally = proxy.tally();
    assert_eq!(tally["test"], json!("t1"), "{tally}");
    assert_eq!(tally["errors"], json!(3), "{tally}");
    let failed = tally["failed"].to_string();
    assert!(failed.contains("one line of JSON"), "{failed}");
    assert!(failed.contains("../etc"), "{failed}");
    assert!(failed.contains("record-everything"), "{failed}");
    assert_eq!(proxy.notice(), r#"{"problem":"default"}"#);
}

#[test]
fn the_control_pipe_needs_a_pipe_and_the_control_endpoint() {
    let work = Workdir::new();
    let out = work
        .cassette()
        .args(AS_A_PLUGIN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        common::cli_env::code(&out),
        2,
        "{}",
        common::cli_env::both(&out)
    );
    assert!(
        common::stderr(&out).contains("stdin must be a pipe"),
        "{}",
        common::stderr(&out)
    );
    let out = work
        .cassette()
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--ready",
            "json",
            "--control-pipe",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        common::stderr(&out).contains("--control"),
        "{}",
        common::stderr(&out)
    );
}

#[test]
fn the_proxy_stops_when_its_runner_closes_the_pipe() {
    // A runner killed with SIGKILL cannot stop its proxy; its end of the pipe closes, though.
    let work = Workdir::new();
    let mut proxy = Piped::start(&work);
    drop(proxy.stdin.take());
    let status = common::cli_env::exited_within(&mut proxy.child, Duration::from_secs(30))
        .expect("the proxy kept serving after its runner closed the control pipe");
    assert!(status.success(), "{status}");
}

/// The lines of a tally's failure text.
fn failure(tally: &Value) -> Vec<String> {
    let lines = tally["failure"]
        .as_array()
        .unwrap_or_else(|| panic!("{tally}"));
    lines
        .iter()
        .map(|l| l.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_tally_carries_its_failure_text_and_a_reporting_read_tells_it_once() {
    let work = Workdir::new();
    let mut proxy = Piped::start(&work);
    proxy.begin("tests/test_x.py::test_a");
    proxy.miss(None, 0);
    // A read that reports nothing (a test asking for its counts) tells it all, and changes
    // nothing for the runner's read.
    let counts = proxy.tally();
    let (_, reported) = proxy.http("GET", "/_cassette/scopes/default?report=true", true, "");
    assert_eq!(counts["failure"], reported["failure"], "{reported}");
    let summary =
        "No recording exists at /v1/chat/completions for target default (0 cassettes stored).";
    let key = reported["missed"][0]["key"].as_str().unwrap().to_owned();
    assert_eq!(
        failure(&reported),
        [
            format!(
                "cassette miss: no recording for POST /v1/chat/completions (target default, \
                 model m) (key {key})"
            ),
            format!("  {summary}"),
            "  (replay never calls the vendor: record it with CASSETTE_MODE=record or auto, \
             which calls the vendor with your key)"
                .to_owned(),
        ]
    );
    assert_eq!(
        reported["headline"],
        json!(format!(
            "POST /v1/chat/completions (target default, model m): {summary}"
        ))
    );
    // Told once: a later phase of the test tells only what is new.
    let (_, again) = proxy.http("GET", "/_cassette/scopes/default?report=true", true, "");
    assert_eq!(failure(&again), Vec::<String>::new(), "{again}");
    assert_eq!(again["headline"], reported["headline"]);
    proxy.miss(None, 1);
    // The runner hands in what it refused itself (a client with the vendor's URL in code).
    let refused = r#"{"refused": [{"host": "intranet.example:443", "requests": 2}]}"#;
    let (status, ended) = proxy.http(
        "DELETE",
        "/_cassette/scopes/default?report=true",
        true,
        refused,
    );
    assert_eq!(status, 200, "{ended}");
    let lines = failure(&ended);
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(lines[0].contains(&format!(
        "(key {})",
        ended["missed"][1]["key"].as_str().unwrap()
    )));
    assert!(lines[2].starts_with("  (replay never calls the vendor: "));
    assert!(
        lines[3].starts_with(
            "cassette: 2 request(s) to intranet.example:443 bypassed the base URL and were refused"
        ),
        "{lines:#?}"
    );
    // A host that is no LLM API: allowed the way exec's report says (issue 34, item 9).
    assert!(
        lines[3].contains("[bypass] allow in cassette.toml"),
        "{lines:#?}"
    );
    // A body that is not a list of refusals is refused, naming what it takes.
    proxy.begin("tests/test_x.py::test_b");
    let (status, answer) = proxy.http(
        "DELETE",
        "/_cassette/scopes/default",
        true,
        r#"{"refused": "all"}"#,
    );
    assert_eq!(status, 400, "{answer}");
    assert!(answer.to_string().contains("refused"), "{answer}");
}

#[test]
fn a_scope_the_runner_never_began_is_refused_and_kept_nowhere() {
    let work = Workdir::new();
    let mut proxy = Piped::start(&work);
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "q"}]}).to_string();
    for n in 0..50 {
        let path = format!("/_scope/made-up-{n}/v1/chat/completions");
        let (status, answer) = proxy.http("POST", &path, false, &body);
        assert_eq!(status, 400, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("made-up-{n}")), "{answer}");
        assert!(message.contains("never begun"), "{answer}");
    }
    // No notice for any of them: the first line the runner reads is its own scope's.
    proxy.begin_in("w1", "t");
    proxy.miss(Some("w1"), 0);
    assert_eq!(proxy.notice(), r#"{"problem":"w1"}"#);
}

#[test]
fn a_runner_that_does_not_read_its_notices_never_blocks_requests() {
    // Every begun scope that misses writes a notice; nobody reads them, so the pipe fills
    // (64 KiB is about 3,000 notices): requests must go on being answered all the same.
    let work = Workdir::new();
    let mut proxy = Piped::start(&work);
    let started = std::time::Instant::now();
    let (tx, done) = mpsc::channel();
    let port = proxy.port;
    let mut lines = String::new();
    for n in 0..6000 {
        lines.push_str(&json!({"op": "begin", "scope": format!("s{n}"), "test": "t"}).to_string());
        lines.push('\n');
    }
    proxy.send(lines.trim_end());
    // The notices are not read: past the test's buffer of them, they stay in the pipe.
    std::thread::spawn(move || {
        for n in 0..6000 {
            let path = format!("/_scope/s{n}/v1/chat/completions");
            let body = json!({"model": "m", "messages": [{"role": "user", "content": "q"}]});
            if status_at(port, &path, &body.to_string()) != 409 {
                let _ = tx.send(Err(n));
                return;
            }
        }
        let _ = tx.send(Ok(()));
    });
    let outcome = done
        .recv_timeout(Duration::from_secs(120))
        .expect("requests hung on a full control pipe");
    assert_eq!(outcome, Ok(()), "after {:?}", started.elapsed());
}

/// The status of one POST on a fresh connection to the proxy at `port`.
fn status_at(port: u16, path: &str, body: &str) -> u16 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}
