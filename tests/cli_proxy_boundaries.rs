//! What a recording proxy keeps to itself (issue 35): paths under `/_cassette/` are the
//! proxy's own (a near miss of a control path is its 404, never an upstream request), the
//! runner's control token never leaves the machine, whatever path carries it, and a proxy a
//! runner started (`--run-secret`, `cassette exec`) serves only requests carrying its run
//! secret, which is never sent upstream, stored or printed.
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
    ready: serde_json::Value,
}

impl Recording {
    fn start(work: &Workdir, upstream: &Upstream) -> Recording {
        Recording::start_with(work, upstream, &["--mode", "record"])
    }

    /// With `args` besides; its stderr goes to `proxy.log` in `work`.
    fn start_with(work: &Workdir, upstream: &Upstream, args: &[&str]) -> Recording {
        let log = std::fs::File::create(work.join("proxy.log")).unwrap();
        let mut child = work
            .cassette()
            .args(["proxy", "--listen", "127.0.0.1:0", "--ready", "json"])
            .args(["--control", "--no-config"])
            .args(args)
            .args(["--store", &work.store("tapes"), "--upstream", &upstream.url])
            .env("OPENAI_API_KEY", KEY)
            .env_remove("CASSETTE_RUN_SECRET")
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("starting cassette proxy");
        let ready = common::ready_line(&mut BufReader::new(child.stdout.take().unwrap()));
        let port = common::ready_port(&ready);
        let token = ready["control"]["token"].as_str().unwrap().to_owned();
        Recording {
            child,
            port,
            token,
            ready,
        }
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

/// A chat completion request asking `prompt`.
fn chat(prompt: &str) -> String {
    json!({"model": "m", "messages": [{"role": "user", "content": prompt}]}).to_string()
}

#[test]
fn a_recording_proxy_a_runner_started_serves_only_requests_carrying_its_run_secret() {
    let work = Workdir::new();
    let upstream = Upstream::start();
    let proxy = Recording::start_with(&work, &upstream, &["--mode", "record", "--run-secret"]);
    let url = proxy.ready["url"].as_str().unwrap().to_owned();
    let base = proxy.ready["base"].as_str().unwrap_or_default().to_owned();
    let secret = base
        .strip_prefix(&format!("{url}/_run/"))
        .unwrap_or_else(|| panic!("the base {base:?} is {url}/_run/SECRET"))
        .to_owned();
    assert!(secret.len() >= 16, "{secret:?}");
    assert_eq!(proxy.ready["env"]["OPENAI_BASE_URL"], format!("{base}/v1"));
    assert_eq!(proxy.ready["env"]["CASSETTE_PROXY_URL"], base);
    assert_eq!(
        proxy.ready["env"]["HTTPS_PROXY"], url,
        "a forward proxy has no path"
    );

    // Another program of this machine, with the proxy's port only: refused, nothing sent or
    // stored. So is a wrong secret, in the path or the header.
    let wrong = format!("x-cassette-run: {}\r\n", "0".repeat(secret.len()));
    for (path, headers) in [
        ("/v1/chat/completions".to_owned(), ""),
        ("/anthropic/v1/messages".to_owned(), ""),
        (
            format!("/_run/{}/v1/chat/completions", "0".repeat(secret.len())),
            "",
        ),
        ("/_run//v1/chat/completions".to_owned(), ""),
        ("/v1/chat/completions".to_owned(), wrong.as_str()),
    ] {
        let (status, body) = common::raw_request(proxy.port, "POST", &path, headers, &chat("q"));
        assert_eq!(status, 403, "{path}: {body}");
        assert!(
            body.contains("cassette_forbidden") && body.contains("run secret"),
            "{body}"
        );
        assert!(
            !body.contains(&secret),
            "the refusal names the secret: {body}"
        );
    }
    assert_eq!(
        upstream.seen(),
        Vec::<String>::new(),
        "nothing went upstream"
    );
    assert_eq!(all_text(&work.join("tapes")), "", "nothing was recorded");
    // The proxy's own paths stay as they were, and show no secret.
    let (status, health) = common::raw_request(proxy.port, "GET", "/healthz", "", "");
    assert_eq!(status, 200, "{health}");
    assert!(!health.contains(&secret), "{health}");

    // The run's clients: the base URL's path, a scope under it, or the header.
    let path = format!("/_run/{secret}/v1/chat/completions");
    let (status, body) = common::raw_request(proxy.port, "POST", &path, "", &chat("one"));
    assert_eq!(status, 200, "{body}");
    let header = format!("x-cassette-run: {secret}\r\n");
    let (status, body) = common::raw_request(
        proxy.port,
        "POST",
        "/v1/chat/completions",
        &header,
        &chat("two"),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = proxy.send("PUT", "/_cassette/scopes/t1", r#"{"test": "t1"}"#);
    assert_eq!(status, 200, "{body}");
    let prefix = proxy.ready["control"]["prefix"].as_str().unwrap();
    assert_eq!(prefix, format!("{base}/_scope"));
    let scoped = format!("{}/t1/v1/chat/completions", &prefix[url.len()..]);
    let (status, body) = common::raw_request(proxy.port, "POST", &scoped, "", &chat("three"));
    assert_eq!(status, 200, "{body}");
    let (status, tally) = proxy.send("GET", "/_cassette/scopes/t1", "");
    assert_eq!(status, 200, "{tally}");
    assert!(
        tally.contains(r#""recorded":1"#),
        "the scope counted it: {tally}"
    );

    let seen = upstream.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    for request in &seen {
        assert!(
            request.starts_with("POST /v1/chat/completions "),
            "{request}"
        );
        assert!(
            request.contains(KEY),
            "the route's key was added: {request}"
        );
        assert!(
            !request.contains(&secret),
            "the secret went upstream: {request}"
        );
        assert!(
            !request.to_ascii_lowercase().contains("x-cassette-run"),
            "{request}"
        );
    }
    let stored = all_text(&work.join("tapes"));
    assert!(stored.contains("one") && stored.contains("two"), "recorded");
    assert!(!stored.contains(&secret), "the secret was recorded");
    drop(proxy);
    let log = std::fs::read_to_string(work.join("proxy.log")).unwrap();
    assert!(
        log.contains("without the run secret"),
        "the refusal is logged: {log}"
    );
    assert!(!log.contains(&secret), "the secret was logged: {log}");
}

#[test]
fn replay_serves_any_local_program_and_a_hand_run_recording_proxy_says_who_can_use_it() {
    let work = Workdir::new();
    let upstream = Upstream::start();
    let replay = Recording::start_with(&work, &upstream, &["--mode", "replay", "--run-secret"]);
    let (status, body) =
        common::raw_request(replay.port, "POST", "/v1/chat/completions", "", &chat("q"));
    assert_eq!(status, 409, "a miss, not a refusal: {body}");
    drop(replay);

    let open = Recording::start_with(&work, &upstream, &["--mode", "record"]);
    let (status, body) =
        common::raw_request(open.port, "POST", "/v1/chat/completions", "", &chat("q"));
    assert_eq!(status, 200, "{body}");
    drop(open);
    let log = std::fs::read_to_string(work.join("proxy.log")).unwrap();
    assert!(
        log.contains("other users' too") && log.contains("--run-secret"),
        "{log}"
    );
}

#[test]
fn exec_serves_its_command_and_refuses_a_request_without_its_run_secret() {
    let work = Workdir::new();
    let upstream = Upstream::start();
    // The command's client uses the base URL exec gave it; a stranger knows the port only.
    let script = r#"curl -s -o /dev/null -w '%{http_code} ' -H 'content-type: application/json' \
        -d '{"model":"m","messages":[{"role":"user","content":"mine"}]}' \
        "$OPENAI_BASE_URL/chat/completions"
      curl -s -o /dev/null -w '%{http_code} ' -H 'content-type: application/json' \
        -d '{"model":"m","messages":[{"role":"user","content":"stranger"}]}' \
        "$HTTPS_PROXY/v1/chat/completions"
      printf '%s' "$OPENAI_BASE_URL" > base.txt"#;
    let out = work
        .cassette()
        .args(["exec", "--mode", "record", "--no-config"])
        .args(["--store", &work.store("tapes"), "--upstream", &upstream.url])
        .args(["--", "sh", "-c", script])
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout, "200 403 ", "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("mine"), "{}", seen[0]);
    let base = std::fs::read_to_string(work.join("base.txt")).unwrap();
    let secret = base.split("/_run/").nth(1).unwrap().trim_end_matches("/v1");
    assert!(secret.len() >= 16, "{base}");
    assert!(!stderr.contains(secret), "{stderr}");
    let stored = all_text(&work.join("tapes"));
    assert!(
        stored.contains("mine") && !stored.contains("stranger"),
        "{stored}"
    );
    assert!(!stored.contains(secret), "{stored}");
}
