//! End-to-end tests of `cassette key` through the built binary: the issue's vectors, `--json`,
//! raw and stdin bodies, request files and the exit status of mistakes.

mod common;

use cassette_keying::{sha256_hex, KeyConfig, Request};
use common::{cassette, stderr, stdout};
use serde_json::Value;
use std::io::Write;
use std::process::{Output, Stdio};

const VECTOR1_BODY: &str = r#"{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse.  \nAnswer briefly.\t"},{"role":"user","content":"Where is my refund?"}],"stream":true,"user":"u-42"}"#;
const VECTOR1_KEY: &str = "0137a00afad39e5e38a42ac95d5ed2eb013790cc49f8a19be09d30278b70d1db";
const VECTOR2_BODY: &str = r#"{"model":"claude-sonnet-4-5","max_tokens":256,"system":"Be kind.","messages":[{"role":"user","content":"Hi"}]}"#;
const VECTOR2_KEY: &str = "09ad68985024e40a7117473ce85ce3f93d71fbe6f5060a744d3dcbc097b3c415";

fn run(args: &[&str]) -> Output {
    cassette().args(args).output().expect("running cassette")
}

/// Runs `cassette` expecting success and returns its standard output.
fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "cassette {args:?} failed: {:?}\n{}",
        out.status,
        stderr(&out)
    );
    stdout(&out)
}

fn write_file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("writing a test file");
    path.to_str().expect("temp paths are UTF-8").to_owned()
}

#[test]
fn vector_1_from_a_body_file() {
    let dir = tempfile::tempdir().unwrap();
    let body = write_file(&dir, "body.json", VECTOR1_BODY.as_bytes());
    assert_eq!(
        ok(&["key", "--path", "/v1/chat/completions", &body]),
        format!("{VECTOR1_KEY}\n")
    );
}

#[test]
fn vector_2_with_target_and_headers() {
    let dir = tempfile::tempdir().unwrap();
    let body = write_file(&dir, "body.json", VECTOR2_BODY.as_bytes());
    let out = ok(&[
        "key",
        "--path",
        "/v1/messages",
        "--method",
        "post",
        "--target",
        "anthropic",
        "--header",
        "anthropic-version: 2023-06-01",
        "--header",
        "x-api-key: sk-ant-secret",
        &body,
    ]);
    assert_eq!(out.trim_end(), VECTOR2_KEY);
}

#[test]
fn body_from_stdin() {
    let mut child = cassette()
        .args(["key", "--path", "/v1/chat/completions", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning cassette");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(VECTOR1_BODY.as_bytes())
        .expect("writing the body");
    let out = child.wait_with_output().expect("waiting for cassette");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim_end(), VECTOR1_KEY);
}

#[test]
fn json_output_has_key_version_material_and_system_hash() {
    let out = ok(&[
        "key",
        "--request",
        "examples/requests/anthropic.json",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).expect("--json prints JSON");
    let members: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(members, ["key", "material", "system_sha256", "version"]);
    assert_eq!(v["key"], VECTOR2_KEY);
    assert_eq!(v["version"], 1);
    assert_eq!(v["system_sha256"], sha256_hex(b"Be kind."));
    assert_eq!(v["material"]["profile"], "anthropic.messages");
    assert_eq!(v["material"]["target"], "anthropic");
    assert_eq!(
        v["material"]["headers"],
        serde_json::json!({"anthropic-version": "2023-06-01"})
    );
    assert_eq!(v["material"]["body"]["temperature"], 1);
}

#[test]
fn json_output_without_system_prompt_has_null_hash() {
    let out = ok(&["key", "--path", "/v1/models", "--method", "GET", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["system_sha256"].is_null());
    assert_eq!(v["material"]["profile"], "http");
    assert_eq!(v["material"]["method"], "GET");
}

#[test]
fn raw_bodies_are_keyed_not_rejected() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        ("bin", &b"\xff\xfe\x00binary"[..]),
        ("text", b"hello, not json {"),
    ] {
        let body = write_file(&dir, name, bytes);
        let out = ok(&["key", "--path", "/v1/chat/completions", "--json", &body]);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert!(v["material"]["body"].is_null(), "{name}");
        assert_eq!(v["material"]["body_sha256"], sha256_hex(bytes), "{name}");
        let expected = Request::new("POST", "/v1/chat/completions")
            .body(bytes)
            .key(&KeyConfig::default());
        assert_eq!(v["key"], expected.key.as_str(), "{name}");
    }
}

#[test]
fn query_and_headers_follow_the_library() {
    let out = ok(&[
        "key",
        "--path",
        "//v1/models/",
        "--method",
        "GET",
        "--query",
        "?b=2&a=1&api_key=secret",
        "--header",
        "OpenAI-Beta:  assistants=v2 ",
        "--header",
        "Authorization: Bearer sk-x",
    ]);
    let expected = Request::new("GET", "/v1/models")
        .query("a=1&b=2")
        .header("openai-beta", "assistants=v2")
        .key(&KeyConfig::default());
    assert_eq!(out.trim_end(), expected.key.as_str());
}

#[test]
fn readme_example_request_prints_vector_1() {
    assert_eq!(
        ok(&["key", "--request", "examples/requests/chat.json"]).trim_end(),
        VECTOR1_KEY
    );
}

#[test]
fn request_files_take_text_and_base64_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let text = serde_json::json!({"path": "/v1/chat/completions", "body_text": VECTOR1_BODY});
    let file = write_file(&dir, "text.json", text.to_string().as_bytes());
    assert_eq!(ok(&["key", "--request", &file]).trim_end(), VECTOR1_KEY);

    let b64 = r#"{"path": "/upload", "method": "PUT", "body_base64": "/w=="}"#;
    let file = write_file(&dir, "b64.json", b64.as_bytes());
    let v: Value = serde_json::from_str(&ok(&["key", "--request", &file, "--json"])).unwrap();
    assert_eq!(v["material"]["body_sha256"], sha256_hex(&[0xff]));
    assert_eq!(v["material"]["method"], "PUT");
}

#[test]
fn missing_body_file_is_exit_2_naming_the_file() {
    let out = run(&[
        "key",
        "--path",
        "/v1/chat/completions",
        "no-such-body-7f3a.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("no-such-body-7f3a.json"), "{err}");
    assert!(err.starts_with("cassette: "), "{err}");
    assert!(stdout(&out).is_empty());
}

#[test]
fn missing_or_broken_request_file_is_exit_2_naming_the_file() {
    let out = run(&["key", "--request", "no-such-request-7f3a.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no-such-request-7f3a.json"),
        "{}",
        stderr(&out)
    );

    let dir = tempfile::tempdir().unwrap();
    let file = write_file(&dir, "broken.json", br#"{"pth": "/v1/models"}"#);
    let out = run(&["key", "--request", &file]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("broken.json") && err.contains("\"pth\""),
        "{err}"
    );
}

#[test]
fn malformed_header_is_exit_2() {
    let out = run(&[
        "key",
        "--path",
        "/v1/messages",
        "--header",
        "anthropic-version 2023-06-01",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("Name: value"), "{}", stderr(&out));
}

#[test]
fn request_file_and_flags_conflict() {
    let out = run(&[
        "key",
        "--request",
        "examples/requests/chat.json",
        "--path",
        "/x",
    ]);
    assert!(!out.status.success());
    assert!(stdout(&out).is_empty());
}

#[test]
fn volatile_flags_match_the_recorder_settings() {
    let dir = tempfile::tempdir().unwrap();
    let with_seed = write_file(&dir, "a.json", br#"{"model":"m","messages":[],"seed":1}"#);
    let other_seed = write_file(&dir, "b.json", br#"{"model":"m","messages":[],"seed":2}"#);
    let chat = ["key", "--path", "/v1/chat/completions"];
    let key = |file: &str, extra: &[&str]| {
        let mut args = chat.to_vec();
        args.extend_from_slice(extra);
        args.push(file);
        ok(&args)
    };
    assert_ne!(key(&with_seed, &[]), key(&other_seed, &[]));
    assert_eq!(
        key(&with_seed, &["--volatile", "seed"]),
        key(&other_seed, &["--volatile", "seed"])
    );
    // `stream` is volatile by default; keeping it puts it back in the key.
    let streamed = write_file(
        &dir,
        "c.json",
        br#"{"model":"m","messages":[],"stream":true}"#,
    );
    let plain = write_file(&dir, "d.json", br#"{"model":"m","messages":[]}"#);
    assert_eq!(key(&streamed, &[]), key(&plain, &[]));
    assert_ne!(
        key(&streamed, &["--keep-volatile", "stream"]),
        key(&plain, &["--keep-volatile", "stream"])
    );
}
