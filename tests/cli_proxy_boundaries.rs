//! What a recording proxy keeps to itself (issue 35): paths under `/_cassette/` are the
//! proxy's own (a near miss of a control path is its 404, never an upstream request), and the
//! runner's control token never leaves the machine, whatever path carries it.
#![cfg(unix)]

mod common;

use common::cli_env::Workdir;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};

/// The route key the recording proxy adds (the client sends none).
const KEY: &str = "sk-boundaries-0123456789abcdef";

/// An upstream that keeps every request it gets, as raw text, and answers a chat completion.
struct Upstream {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let kept = kept.clone();
                std::thread::spawn(move || answer(stream, &kept));
            }
        });
        Upstream { url, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// Reads one request (headers and a `content-length` body) and answers it.
fn answer(stream: TcpStream, kept: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    kept.lock()
        .unwrap()
        .push(format!("{head}{}", String::from_utf8_lossy(&body)));
    let reply = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    })
    .to_string();
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{reply}",
        reply.len()
    );
}

/// A recording proxy with the control endpoint, in front of `upstream`.
struct Recording {
    child: Child,
    port: u16,
    token: String,
}

impl Recording {
    fn start(work: &Workdir, upstream: &Upstream) -> Recording {
        let mut child = work
            .cassette()
            .args(["proxy", "--listen", "127.0.0.1:0", "--ready", "json"])
            .args(["--control", "--mode", "record", "--no-config"])
            .args(["--store", &work.store("tapes"), "--upstream", &upstream.url])
            .env("OPENAI_API_KEY", KEY)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting cassette proxy");
        let ready = common::ready_line(&mut BufReader::new(child.stdout.take().unwrap()));
        let port = common::ready_port(&ready);
        let token = ready["control"]["token"].as_str().unwrap().to_owned();
        Recording { child, port, token }
    }

    /// One request carrying the control token: its status and body.
    fn send(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let token = format!("x-cassette-control: {}\r\n", self.token);
        common::raw_request(self.port, method, path, &token, body)
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under `dir`, read as text.
fn all_text(dir: &std::path::Path) -> String {
    let mut text = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return text;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            text.push_str(&all_text(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    text
}

#[test]
fn near_misses_of_control_paths_are_the_proxys_404_and_the_token_never_leaves() {
    let work = Workdir::new();
    let upstream = Upstream::start();
    let proxy = Recording::start(&work, &upstream);
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "q"}]}).to_string();
    for path in [
        "/_cassette/scopes/",
        "/_cassette/",
        "/_cassette",
        "/_Cassette/stats",
        "/%5Fcassette/scopes/default",
        "//_cassette/scopes/x/y",
        "/_cassette/stats/",
        "/_cassettes",
        "/_scope/w1/_cassette/scopes/default",
        "/anthropic/_cassette/scopes/default",
    ] {
        let (status, body) = proxy.send("POST", path, &chat);
        assert_eq!(status, 404, "{path}: {body}");
        assert!(body.contains("/_cassette/"), "{path}: {body}");
    }
    assert_eq!(
        upstream.seen(),
        Vec::<String>::new(),
        "nothing went upstream"
    );
    // A request the proxy does forward carries the token too: it is taken off first.
    let (status, body) = proxy.send("POST", "/v1/chat/completions", &chat);
    assert_eq!(status, 200, "{body}");
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].contains(KEY),
        "the route's key was added: {}",
        seen[0]
    );
    assert!(!seen[0].contains(&proxy.token), "{}", seen[0]);
    assert!(
        !seen[0].to_ascii_lowercase().contains("x-cassette-control"),
        "{}",
        seen[0]
    );
    let stored = all_text(&work.join("tapes"));
    assert!(!stored.is_empty(), "the request was recorded");
    assert!(!stored.contains(&proxy.token), "the token was recorded");
    // The control endpoint still reads the token.
    let (status, body) = proxy.send("GET", "/_cassette/scopes", "");
    assert_eq!(status, 200, "{body}");
}
