//! Issue 25, item 21: a client that reads no variable and calls Ollama's default address
//! (ollama JS: `http://127.0.0.1:11434`) is served by `cassette exec` in replay when that
//! address is free, so it replays instead of reaching a local Ollama unrecorded; its misses
//! come in Ollama's `{"error": "..."}` shape; a taken address is named.
//!
//! The only test that lets exec take the address (the others run with the stand-in off: tests
//! run in parallel, and two execs on one address would answer each other's requests).

mod common;

use common::cli_env::{both, code, Workdir};
use common::fake_llm::FakeLlm;
use serde_json::Value;

/// A client with a fixed URL: posts an Ollama chat to `url`, prints the status and the body.
const CLIENT: &str = r#"
import json, sys, urllib.request, urllib.error
url, prompt = sys.argv[1], sys.argv[2]
body = json.dumps({"model": "llama3.2", "stream": False,
                   "messages": [{"role": "user", "content": prompt}]}).encode()
request = urllib.request.Request(url, data=body, headers={"content-type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=30) as answer:
        print(json.dumps({"status": answer.status, "body": json.load(answer)}))
except urllib.error.HTTPError as error:
    print(json.dumps({"status": error.code, "body": json.load(error)}))
"#;

fn exec(
    dir: &Workdir,
    env: &[(&str, &str)],
    stand_in: bool,
    url: &str,
    prompt: &str,
) -> std::process::Output {
    let mut command = dir.cassette();
    if stand_in {
        command.env_remove("CASSETTE_NO_OLLAMA_STAND_IN");
    }
    command
        .envs(env.iter().copied())
        .args([
            "exec",
            "--store",
            &dir.store("c"),
            "--",
            "python3",
            "-c",
            CLIENT,
            url,
            prompt,
        ])
        .output()
        .expect("running cassette exec")
}

fn printed(out: &std::process::Output) -> Value {
    serde_json::from_str(common::stdout(out).trim())
        .unwrap_or_else(|e| panic!("{e}: {}", both(out)))
}

#[test]
fn a_client_that_calls_ollamas_default_address_replays_through_exec() {
    let dir = Workdir::new();
    let fake = FakeLlm::start();
    let route = format!("ollama={}", fake.url);
    // Recorded the way a well-behaved client reaches the proxy (OLLAMA_HOST).
    let recorded = {
        let mut command = dir.cassette();
        command
            .env("CASSETTE_MODE", "record")
            .args([
                "exec",
                "--store",
                &dir.store("c"),
                "--route",
                &route,
                "--",
                "sh",
                "-c",
            ])
            .arg(format!(
                "python3 -c '{}' \"$OLLAMA_HOST/api/chat\" 'Say hello'",
                CLIENT.replace('\'', "'\\''")
            ))
            .output()
            .unwrap()
    };
    assert_eq!(code(&recorded), 0, "{}", both(&recorded));
    let recorded = printed(&recorded);
    assert_eq!(recorded["status"], 200, "{recorded}");
    fake.stop();

    let fixed = "http://127.0.0.1:11434/api/chat";
    let taken = std::net::TcpListener::bind("127.0.0.1:11434").is_err();
    let replayed = exec(&dir, &[], true, fixed, "Say hello");
    if taken {
        // Something holds the address (a local Ollama): exec says so, and the client is not
        // replayed through it.
        let stderr = common::stderr(&replayed);
        assert!(
            stderr.contains("127.0.0.1:11434") && stderr.contains("OLLAMA_HOST"),
            "{}",
            both(&replayed)
        );
        return;
    }
    assert_eq!(code(&replayed), 0, "{}", both(&replayed));
    assert_eq!(printed(&replayed), recorded, "the same answer, replayed");
    assert!(
        common::stderr(&replayed).contains("1 hits"),
        "{}",
        both(&replayed)
    );

    // A miss through the stand-in: exit 2, and an error Ollama's clients can show.
    let missed = exec(&dir, &[], true, fixed, "Never recorded");
    assert_eq!(code(&missed), 2, "{}", both(&missed));
    let missed = printed(&missed);
    let error = missed["body"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("cassette miss"), "{missed}");
    assert_eq!(
        missed["body"]["cassette"]["type"], "cassette_miss",
        "{missed}"
    );

    // With the stand-in off, nothing answers there: the fixed address is not the proxy.
    let off = exec(&dir, &[], false, fixed, "Say hello");
    assert_ne!(code(&off), 0, "{}", both(&off));
}
