//! End-to-end tests of the maintenance commands through the built binary: explain, ls, show,
//! verify, gc, copy, diff, diff-runs, probe and canary, on temp stores recorded from a fake
//! upstream.

mod common;

use common::cli_env::{both, code, json_lines, Workdir};
use common::fake_llm::FakeLlm;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn case(id: &str, prompt: &str, needle: &str) -> String {
    format!(
        r#"{{"id":"{id}","prompt":"{prompt}","params":{{"model":"m","temperature":0}},"grader":"contains","expect":{{"needle":"{needle}"}}}}"#
    )
}

/// Records `suite` into `store` (mode record) and returns the run's output lines.
fn record(dir: &Workdir, fake: &FakeLlm, suite: &str, store: &str) -> Vec<Value> {
    let name = format!("suite-{}.jsonl", fake.requests());
    dir.write(&name, suite);
    let out = dir.run(&[
        "run",
        &name,
        "--mode",
        "record",
        "--store",
        store,
        "--upstream",
        &fake.url,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    json_lines(&out)
}

/// The file of a cassette in a file store.
fn cassette_file(store_dir: &Path, key: &str) -> PathBuf {
    store_dir.join(&key[..2]).join(format!("{key}.json"))
}

fn edit(store_dir: &Path, key: &str, change: impl FnOnce(&mut Value)) {
    let path = cassette_file(store_dir, key);
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    change(&mut doc);
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
}

#[test]
fn explain_ls_and_show() {
    let dir = Workdir::new();
    let store = dir.store("c");
    let fake = FakeLlm::start();
    // 17 cassettes: by pigeonhole two keys share their first hex digit (for the ambiguity check).
    let mut cases = vec![case("capital", "What is the capital of France?", "paris")];
    cases.extend((0..16).map(|i| case(&format!("echo{i}"), &format!("Repeat {i}"), "said")));
    let lines = record(&dir, &fake, &cases.join("\n"), &store);
    let capital_key = lines[0]["key"].as_str().unwrap().to_owned();

    let request = |temperature: &str| {
        format!(
            r#"{{"path":"/v1/chat/completions","body":{{"model":"m","temperature":{temperature},"messages":[{{"role":"user","content":"What is the capital of France?"}}]}}}}"#
        )
    };
    dir.write("same.json", &request("0"));
    let out = dir.run(&["explain", "same.json", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        common::stdout(&out).contains(&format!("recorded: {capital_key}")),
        "{}",
        both(&out)
    );
    dir.write("warmer.json", &request("0.7"));
    let out = dir.run(&["explain", "warmer.json", "--store", &store]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    assert!(
        common::stdout(&out).contains("not recorded"),
        "{}",
        both(&out)
    );
    let err = common::stderr(&out);
    assert!(
        err.contains(&capital_key) && err.contains("body.temperature: 0 -> 0.7"),
        "{err}"
    );

    let out = dir.run(&["ls", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let listing = common::stdout(&out);
    assert_eq!(listing.lines().count(), 18, "{listing}");
    assert!(listing.contains(&capital_key[..16]) && listing.contains("/v1/chat/completions"));
    let out = dir.run(&["ls", "--json", "--store", &store]);
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 17);
    let row = rows
        .iter()
        .find(|r| r["key"] == capital_key.as_str())
        .unwrap();
    assert_eq!(row["model"], "m");
    assert_eq!(row["response_model"], "m-2024-01-01");
    assert_eq!(row["status"], 200);
    assert!(row["size"].as_u64().unwrap() > 100);

    let out = dir.run(&["show", &capital_key[..10], "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let shown = common::stdout(&out);
    for needle in [
        capital_key.as_str(),
        "m (answered by m-2024-01-01)",
        "--- request: POST /v1/chat/completions",
        "--- response: 200",
        "The capital of France is Paris.",
    ] {
        assert!(shown.contains(needle), "{needle}\n{shown}");
    }
    let keys: Vec<&str> = lines.iter().map(|l| l["key"].as_str().unwrap()).collect();
    let shared = (0..16)
        .map(|d| format!("{d:x}"))
        .find(|p| keys.iter().filter(|k| k.starts_with(p.as_str())).count() > 1)
        .unwrap();
    let out = dir.run(&["show", &shared, "--store", &store]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(common::stderr(&out).contains("ambiguous"), "{}", both(&out));
    let out = dir.run(&["show", "nothex", "--store", &store]);
    assert_eq!(code(&out), 2, "{}", both(&out));
}

#[test]
fn explain_shows_a_word_changed_late_in_a_long_prompt() {
    let dir = Workdir::new();
    let store = dir.store("c");
    let fake = FakeLlm::start();
    let prompt = |word: &str| {
        format!(
            "{}Then summarise the quarterly {word} figures for the board.",
            "Read the report carefully and keep every number exactly as written. ".repeat(45)
        )
    };
    record(
        &dir,
        &fake,
        &case("long", &prompt("revenue"), "said"),
        &store,
    );
    let request = serde_json::json!({"path": "/v1/chat/completions", "body": {
        "model": "m", "temperature": 0,
        "messages": [{"role": "user", "content": prompt("income")}]}});
    dir.write("income.json", &request.to_string());
    let out = dir.run(&["explain", "income.json", "--store", &store]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains(
            "body.messages[0].content: …Then summarise the quarterly [-revenue-]{+income+} figures for the board."
        ),
        "{err}"
    );
    let out = dir.run(&["explain", "income.json", "--store", &store, "--json"]);
    let explained: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let differences = explained["explanation"]["nearest"]["differences"].to_string();
    assert!(differences.contains("[-revenue-]{+income+}"), "{explained}");
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("running git");
    assert!(out.status.success(), "git {args:?}: {}", both(&out));
}

#[test]
fn verify_flags_hand_edits_old_versions_credentials_and_uncommitted_tapes() {
    let dir = Workdir::new();
    let store_dir = dir.join("c");
    let store = dir.store("c");
    let fake = FakeLlm::start();
    let suite = [
        case("a", "What is the capital of France?", "paris"),
        case("b", "Repeat b", "said"),
        case("c", "Repeat c", "said"),
        case("d", "Repeat d", "said"),
    ];
    let lines = record(&dir, &fake, &suite.join("\n"), &store);
    let key = |i: usize| lines[i]["key"].as_str().unwrap().to_owned();

    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "c"]);
    git(
        dir.path(),
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "-m",
            "tapes",
        ],
    );
    let out = dir.run(&["verify", "--strict", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("verified 4 cassettes"),
        "{}",
        both(&out)
    );

    edit(&store_dir, &key(0), |doc| {
        doc["request"]["body"]["json"]["temperature"] = 1.into()
    });
    edit(&store_dir, &key(1), |doc| doc["key_version"] = 0.into());
    let token = format!("ghp_{}", "A1b2".repeat(9));
    edit(&store_dir, &key(2), |doc| {
        doc["response"]["body"]["json"]["choices"][0]["message"]["content"] =
            format!("use {token}").into();
    });
    std::fs::write(cassette_file(&store_dir, &key(3)), "{ not json").unwrap();

    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let report = common::stdout(&out);
    assert!(
        report.contains(&format!("{}: its stored request keys to", key(0))),
        "{report}"
    );
    assert!(report.contains("edited by hand"), "{report}");
    assert!(
        report.contains(&format!("{}: keyed under key version 0", key(1))),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "{}: credential-shaped text (github_token)",
            key(2)
        )),
        "{report}"
    );
    assert!(
        !report.contains(&token),
        "verify must not print the secret: {report}"
    );
    assert!(
        report.contains(&format!("{}: does not parse", key(3))),
        "{report}"
    );

    // Without --strict the uncommitted edits are not the point; with it they fail the run.
    let out = dir.run(&["verify", "--strict", "--store", &store]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    assert!(
        common::stdout(&out).contains("uncommitted"),
        "{}",
        both(&out)
    );
    let out = dir.run(&["verify", "--strict", "--store", "memory://"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
}

/// Issue 10, items 9 to 12: `verify` audits what older versions (or a gateway, or a hand
/// edit) stored and today's redaction would not: keys after an escape, credential names, cookie
/// and token headers outside the allow-list, keys in binary bodies and split across stream
/// events, credential query parameters. By place, never by value; a clean store passes.
#[test]
fn verify_audits_what_older_versions_stored() {
    let dir = Workdir::new();
    let store_dir = dir.join("c");
    let store = dir.store("c");
    let fake = FakeLlm::start();
    let suite: Vec<String> = (0..7)
        .map(|i| {
            case(
                &format!("c{i}"),
                &format!("Repeat {i}, mind the password and max tokens"),
                "said",
            )
        })
        .collect();
    let lines = record(&dir, &fake, &suite.join("\n"), &store);
    let key = |i: usize| lines[i]["key"].as_str().unwrap().to_owned();
    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 0, "a clean store passes: {}", both(&out));

    let secret = "sk-proj-7Fh2Kd9Lq3Wz8Xc1Vb6Nm4Tr0Yp5Ju2Ie8Ow3Aq";
    edit(&store_dir, &key(0), |doc| {
        let headers = &mut doc["response"]["headers"];
        headers["llm_provider-set-cookie"] = "_cfuvid=opaque-cookie; path=/; HttpOnly".into();
        headers["x-gateway-session"] = "Ab12Cd34Ef56Gh78Ij90Kl-opaque".into();
        headers["server"] = "cloudflare".into();
        headers["etag"] = "W/\"3f9a2c7e1b5d4f60a8e2c9b1d0e7f6a5\"".into();
    });
    edit(&store_dir, &key(1), |doc| {
        doc["response"]["body"]["json"]["openai_api_key"] = "opaque-named".into();
    });
    edit(&store_dir, &key(2), |doc| {
        doc["response"]["body"]["json"]["choices"][0]["message"]["content"] =
            format!("line one\n{secret}").into();
    });
    edit(&store_dir, &key(3), |doc| {
        doc["response"]["stream"] = "sse".into();
        doc["response"]["body"] = serde_json::json!({"json": {"events": [
            {"data": "The key is "}, {"data": &secret[..14]}, {"data": &secret[14..]}
        ]}});
    });
    edit(&store_dir, &key(4), |doc| {
        let mut binary = vec![0xff, 0x00, b' '];
        binary.extend_from_slice(secret.as_bytes());
        binary.push(0x80);
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(binary);
        doc["response"]["body"] = serde_json::json!({ "base64": encoded });
    });
    edit(&store_dir, &key(5), |doc| {
        doc["request"]["query"] = "alt=sse&access-token=opaque-query".into();
    });
    // Issue 20: the events an exact stream keeps, with a key an older version stored in pieces.
    edit(&store_dir, &key(6), |doc| {
        let delta = |text: &str| {
            serde_json::json!({"data": serde_json::json!(
                {"choices": [{"index": 0, "delta": {"content": text}}]}
            ).to_string()})
        };
        doc["response"]["stream"] = "openai.chat".into();
        doc["response"]["events"] = serde_json::json!([
            delta("The key is "), delta(&secret[..14]), delta(&secret[14..]), {"data": "[DONE]"}
        ]);
    });

    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let report = common::stdout(&out);
    for (i, needle) in [
        (0, "response.headers.llm_provider-set-cookie holds a cookie-shaped value"),
        (0, "response.headers.x-gateway-session holds a token-shaped value"),
        (1, "response.body.openai_api_key holds a value under a credential name"),
        (2, "credential-shaped text (openai_api_key)"),
        (3, "response.body.events[1].data holds a piece of a secret split across stream events"),
        (4, "response.body holds 1 credential-shaped run(s) in binary content stored as base64 (openai_api_key)"),
        (5, "request.query holds a credential parameter"),
        (6, "response.events[1].data holds a piece of a secret split across stream events"),
    ] {
        let line = format!("{}: {needle}", key(i));
        assert!(report.contains(&line), "{line}\n{report}");
    }
    for harmless in ["server", "etag"] {
        assert!(!report.contains(&format!("headers.{harmless}")), "{report}");
    }
    for leaked in ["opaque", secret, &secret[..14], &secret[14..]] {
        assert!(
            !report.contains(leaked),
            "verify printed `{leaked}`:\n{report}"
        );
    }
}

#[test]
fn verify_fails_on_a_missing_or_empty_store_and_names_files_that_are_not_cassettes() {
    let dir = Workdir::new();
    let missing = dir.store("nowhere");
    let out = dir.run(&["verify", "--store", &missing]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("does not exist"),
        "{}",
        both(&out)
    );
    assert!(
        !dir.join("nowhere").exists(),
        "verify must not create the store"
    );
    let out = dir.run(&[
        "verify",
        "--store",
        &format!("jsonl://{}", dir.join("none.jsonl").display()),
    ]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let out = dir.run(&["verify", "--store", "memory://"]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("holds no cassette"),
        "{}",
        both(&out)
    );

    // A folder of the seed harness's flat tapes: nothing cassette reads, and both ls and
    // verify say so instead of passing over them.
    dir.write(
        "seed/0123456789abcdef.json",
        r#"{"key":"0123456789abcdef","params":{"model":"m","prompt":"Hi"},"text":"Hello"}"#,
    );
    dir.write("seed/openai.yaml", "interactions: []\n");
    let seed = dir.store("seed");
    let out = dir.run(&["verify", "--store", &seed]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let report = common::stdout(&out);
    assert!(
        report.contains("0123456789abcdef.json: a tape of the seed harness (key, params, text), not read by cassette: convert it with `cassette import`"),
        "{report}"
    );
    assert!(
        report.contains("openai.yaml: a YAML file, perhaps a vcrpy cassette"),
        "{report}"
    );
    assert!(
        common::stderr(&out).contains("holds no cassette"),
        "{}",
        both(&out)
    );
    let out = dir.run(&["ls", "--json", "--store", &seed]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(common::stdout(&out).is_empty());
    let err = common::stderr(&out);
    assert!(
        err.contains("not listed: ")
            && err.contains("0123456789abcdef.json: a tape of the seed harness"),
        "{err}"
    );
    assert!(
        err.contains("0 cassettes in") && err.contains("2 other files not listed"),
        "{err}"
    );
}

#[test]
fn import_converts_seed_tapes_and_vcrpy_cassettes_into_replayable_cassettes() {
    use base64::Engine;
    use std::io::Write;
    let dir = Workdir::new();
    dir.write(
        "old/0123456789abcdef.json",
        r#"{"key":"0123456789abcdef","params":{"model":"m","system":"Be brief.","prompt":"Name a colour.","temperature":0},"text":"Blue."}"#,
    );
    let openai_answer = r#"{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}"#;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(r#"{"object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Rome."},"finish_reason":"stop"}]}"#.as_bytes()).unwrap();
    let gzipped = base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap());
    let stream = std::fs::read_to_string(
        common::workspace_root().join("crates/wire/tests/fixtures/anthropic_tool_use.sse"),
    )
    .unwrap();
    let q = |s: &str| serde_json::to_string(s).unwrap();
    let chat = |question: &str| {
        q(&format!(
            r#"{{"messages":[{{"role":"user","content":"{question}"}}],"model":"gpt-4o-mini","temperature":0}}"#
        ))
    };
    let anthropic_request = r#"{"model":"claude-sonnet-4-5","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"What is the weather in Paris?"}]}"#;
    let yaml = format!(
        r#"interactions:
- request:
    body: {}
    headers:
      authorization: [Bearer sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD]
      content-type: [application/json]
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body: {{string: {}}}
    headers: {{Content-Type: [application/json]}}
    status: {{code: 200, message: OK}}
- request:
    body: {}
    headers: {{content-type: [application/json]}}
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body: {{string: !!binary "{gzipped}"}}
    headers: {{Content-Type: [application/json], Content-Encoding: [gzip]}}
    status: {{code: 200, message: OK}}
- request:
    body: {}
    headers: {{x-api-key: [sk-ant-api03-secretsecretsecret], anthropic-version: ['2023-06-01']}}
    method: POST
    uri: https://api.anthropic.com/v1/messages
  response:
    body: {{string: {}}}
    headers: {{content-type: [text/event-stream]}}
    status: {{code: 200, message: OK}}
version: 1
"#,
        chat("What is the capital of France?"),
        q(openai_answer),
        chat("What is the capital of Italy?"),
        q(anthropic_request),
        q(&stream),
    );
    dir.write("old/test_chat.yaml", &yaml);
    dir.write("old/notes.txt", "not a tape");
    let store = dir.store("cassettes");
    let out = dir.run(&["import", "old", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(
        common::stdout(&out).matches("imported ").count(),
        4,
        "{}",
        both(&out)
    );
    let err = common::stderr(&out);
    assert!(
        err.contains("skipped old/notes.txt") && err.contains("imported 4, kept 0"),
        "{err}"
    );
    // Create-only: importing again changes nothing.
    let out = dir.run(&["import", "old", "--store", &store]);
    assert!(
        common::stderr(&out).contains("imported 0, kept 4"),
        "{}",
        both(&out)
    );
    // No credential reached the store, and every imported cassette verifies.
    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    for secret in ["sk-proj-abcdef", "sk-ant-api03"] {
        let out = std::process::Command::new("grep")
            .args(["-r", secret])
            .arg(dir.join("cassettes"))
            .output()
            .unwrap();
        assert!(out.stdout.is_empty(), "{secret} reached the store");
    }

    // The imported tapes answer the same requests in replay.
    dir.write(
        "suite.jsonl",
        &[
            r#"{"id":"seed","prompt":"Name a colour.","params":{"model":"m","system":"Be brief.","temperature":0},"grader":"equals","expect":{"value":"Blue."}}"#,
            r#"{"id":"openai","prompt":"What is the capital of France?","params":{"model":"gpt-4o-mini","temperature":0},"grader":"equals","expect":{"value":"Paris."}}"#,
            r#"{"id":"gzip","prompt":"What is the capital of Italy?","params":{"model":"gpt-4o-mini","temperature":0},"grader":"equals","expect":{"value":"Rome."}}"#,
            r#"{"id":"stream","request":{"target":"anthropic","path":"/v1/messages","headers":{"anthropic-version":"2023-06-01"},"body":{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"What is the weather in Paris?"}]}},"grader":"tool_called","expect":{"name":"get_weather"}}"#,
        ]
        .join("\n"),
    );
    let out = dir.run(&["run", "suite.jsonl", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        json_lines(&out).iter().all(|l| l["hit"] == true),
        "{}",
        both(&out)
    );

    // A truncated gzip answer is an error naming the file and interaction; nothing is stored.
    let truncated = yaml.replace(&gzipped, &gzipped[..gzipped.len() / 2]);
    dir.write("bad/broken.yaml", &truncated);
    let fresh = dir.store("fresh");
    let out = dir.run(&["import", "bad", "--store", &fresh]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("bad/broken.yaml interaction 2")
            || common::stderr(&out).contains("broken.yaml: interaction 2"),
        "{}",
        both(&out)
    );
}

#[test]
fn recordings_index_themselves_and_index_compacts_the_segments() {
    let dir = Workdir::new();
    let store = dir.store("c");
    let fake = FakeLlm::start();
    let segments = |folder: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join(folder).join("_index"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    record(
        &dir,
        &fake,
        &[case("a", "Repeat a", "said"), case("b", "Repeat b", "said")].join("\n"),
        &store,
    );
    record(&dir, &fake, &case("c", "Repeat c", "said"), &store);
    let written = segments("c");
    assert_eq!(
        written.len(),
        2,
        "one segment per recording run: {written:?}"
    );
    assert!(written.iter().all(|n| n.starts_with("w-")), "{written:?}");

    let out = dir.run(&["index", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("indexed 3 cassettes"),
        "{}",
        both(&out)
    );
    assert!(
        common::stderr(&out).contains("0 read, 2 segments folded in"),
        "{}",
        both(&out)
    );
    let compacted = segments("c");
    assert_eq!(compacted.len(), 1, "{compacted:?}");
    assert!(compacted[0].starts_with("base-"), "{compacted:?}");
    // The index folder is the store's own: verify and ls pass over it.
    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));

    // A copy indexes what it copied in its destination.
    let out = dir.run(&["copy", &store, &dir.store("d")]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(segments("d").len(), 1);
    // A store that keeps no segments says so.
    let jsonl = format!("jsonl://{}", dir.join("e.jsonl").display());
    let out = dir.run(&["index", "--store", &jsonl]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("keeps no index segments"),
        "{}",
        both(&out)
    );
}

/// `copy` keeps documents byte for byte, so it writes one only when it passes the audit: a
/// document holding a credential (an older version's recording, a hand edit) or filed under
/// another key fails, named by place and never by value, and is not written; the others are
/// copied as they are.
#[test]
fn copy_writes_only_what_passes_the_audit() {
    let dir = Workdir::new();
    let from = dir.store("a");
    let fake = FakeLlm::start();
    let suite = [
        case("a", "Repeat a", "said"),
        case("b", "Repeat b", "said"),
        case("c", "Repeat c", "said"),
    ];
    let lines = record(&dir, &fake, &suite.join("\n"), &from);
    let keys: Vec<String> = lines
        .iter()
        .map(|line| line["key"].as_str().unwrap().to_owned())
        .collect();
    let secret = format!("sk-proj-{}", "Ab1".repeat(16));
    edit(&dir.join("a"), &keys[0], |doc| {
        doc["response"]["body"]["json"]["leak"] = secret.clone().into();
    });
    let (renamed, sound) = (&keys[1], &keys[2]);
    std::fs::copy(
        cassette_file(&dir.join("a"), sound),
        cassette_file(&dir.join("a"), renamed),
    )
    .unwrap();

    let to = dir.store("b");
    let out = dir.run(&["copy", &from, &to]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    let err = common::stderr(&out);
    assert!(err.contains("copied 1, skipped 0, failed 2"), "{err}");
    let leak = err
        .lines()
        .find(|l| l.contains(&format!("cannot copy {}", keys[0])))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(leak.contains("credential-shaped text"), "{leak}");
    let other = err
        .lines()
        .find(|l| l.contains(&format!("cannot copy {renamed}")))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        other.contains(&format!("recording of key {sound}")),
        "{other}"
    );
    assert!(!both(&out).contains(&secret), "{}", both(&out));
    let copied = json_lines(&dir.run(&["ls", "--json", "--store", &to]));
    assert_eq!(copied.len(), 1, "{copied:?}");
    assert_eq!(copied[0]["key"], sound.as_str());
    assert_eq!(
        std::fs::read(cassette_file(&dir.join("b"), sound)).unwrap(),
        std::fs::read(cassette_file(&dir.join("a"), sound)).unwrap(),
        "copied byte for byte"
    );
}

#[test]
fn gc_copy_and_diff() {
    let dir = Workdir::new();
    let store_a = dir.store("a");
    let fake = FakeLlm::start();
    let suite = [
        case("capital", "What is the capital of France?", "paris"),
        case("b", "Repeat b", "said"),
        case("c", "Repeat c", "said"),
    ];
    let lines = record(&dir, &fake, &suite.join("\n"), &store_a);
    let unused_key = lines[2]["key"].as_str().unwrap().to_owned();

    // A replay of two of the three cases logs the keys it used.
    dir.write("two.jsonl", &suite[..2].join("\n"));
    let out = dir.run(&[
        "run",
        "two.jsonl",
        "--store",
        &store_a,
        "--usage-log",
        "used.log",
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = dir.run(&[
        "gc",
        "--unused",
        "--usage-log",
        "used.log",
        "--dry-run",
        "--store",
        &store_a,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(
        common::stdout(&out).trim(),
        format!("would delete {unused_key}")
    );
    assert_eq!(
        json_lines(&dir.run(&["ls", "--json", "--store", &store_a])).len(),
        3
    );
    let out = dir.run(&[
        "gc",
        "--unused",
        "--usage-log",
        "used.log",
        "--store",
        &store_a,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(common::stdout(&out).trim(), format!("deleted {unused_key}"));
    assert_eq!(
        json_lines(&dir.run(&["ls", "--json", "--store", &store_a])).len(),
        2
    );
    dir.write("empty.log", "");
    let out = dir.run(&[
        "gc",
        "--unused",
        "--usage-log",
        "empty.log",
        "--store",
        &store_a,
    ]);
    assert_eq!(
        code(&out),
        2,
        "an empty log must not delete everything: {}",
        both(&out)
    );
    assert_eq!(
        json_lines(&dir.run(&["ls", "--json", "--store", &store_a])).len(),
        2
    );

    // Copy to another backend: create-only, so a second copy skips everything.
    let store_b = format!("jsonl://{}", dir.join("b.jsonl").display());
    let out = dir.run(&["copy", &store_a, &store_b]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("copied 2, skipped 0"),
        "{}",
        both(&out)
    );
    let out = dir.run(&["copy", &store_a, &store_b]);
    assert!(
        common::stderr(&out).contains("copied 0, skipped 2"),
        "{}",
        both(&out)
    );
    let out = dir.run(&["copy", &store_a, &store_b, "--overwrite"]);
    assert!(
        common::stderr(&out).contains("copied 2, skipped 0, failed 0"),
        "{}",
        both(&out)
    );
    let out = dir.run(&["diff", &store_a, &store_b]);
    assert_eq!(code(&out), 0, "{}", both(&out));

    // A re-record whose answers drifted, plus a case only the new store has.
    let drifted = FakeLlm::start_variant(" Indeed.");
    let store_c = dir.store("c");
    record(
        &dir,
        &drifted,
        &[suite[0].clone(), case("new", "Repeat new", "said")].join("\n"),
        &store_c,
    );
    let out = dir.run(&["diff", &store_a, &store_c]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let report = common::stdout(&out);
    let (capital, b) = (
        lines[0]["key"].as_str().unwrap(),
        lines[1]["key"].as_str().unwrap(),
    );
    assert!(
        report.contains(&format!(
            "reworded: {capital} (POST /v1/chat/completions, m): text\n"
        )),
        "{report}"
    );
    assert!(
        report.contains("- The capital of France is Paris.\n"),
        "{report}"
    );
    assert!(
        report.contains("+ The capital of France is Paris. Indeed."),
        "{report}"
    );
    // The case only A has and the one only B has ask nearly the same: a re-record, paired.
    assert!(
        report.contains(&format!(
            "reworded: {b} (POST /v1/chat/completions, m) re-recorded as "
        )),
        "{report}"
    );
    assert!(
        report.contains(r#"    request: body.messages[0].content: "Repeat b" -> "Repeat new""#),
        "{report}"
    );
    // Not paired, they are a key removed and a key added.
    let out = dir.run(&["diff", &store_a, &store_c, "--pair-within", "0"]);
    let report = common::stdout(&out);
    assert!(
        report.contains(&format!(
            "removed: {b} (POST /v1/chat/completions, m): only in A"
        )),
        "{report}"
    );
    assert_eq!(report.matches("added: ").count(), 1, "{report}");

    // Drift the key cannot see: the same keys answered by another model, with another finish
    // reason, or another usage.
    let store_d = dir.store("d");
    let out = dir.run(&["copy", &store_a, &store_d]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    edit(&dir.join("d"), capital, |doc| {
        doc["response"]["body"]["json"]["model"] = "m-2024-06-01".into();
    });
    edit(&dir.join("d"), b, |doc| {
        let answer = &mut doc["response"]["body"]["json"];
        answer["choices"][0]["finish_reason"] = "length".into();
        answer["usage"]["completion_tokens"] = 100.into();
    });
    let out = dir.run(&["diff", &store_a, &store_d]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let report = common::stdout(&out);
    for needle in [
        format!("changed: {capital} (POST /v1/chat/completions, m): model m-2024-01-01 -> m-2024-06-01\n    model: m-2024-01-01 -> m-2024-06-01\n"),
        format!("changed: {b} (POST /v1/chat/completions, m): finish reason stop -> length\n    finish: stop -> length\n    usage: "),
    ] {
        assert!(report.contains(&needle), "{needle}\n{report}");
    }
    assert!(
        !report.contains("    - "),
        "the text did not change: {report}"
    );
    let out = dir.run(&["diff", &store_a, &store_d, "--summary"]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    assert_eq!(
        common::stdout(&out),
        "2 changed, 0 removed, 0 added, 0 reworded, 0 same\n  changed: 1 finish reason stop -> length, 1 model alias m -> m-2024-06-01\n"
    );
    let out = dir.run(&["diff", &store_a, &store_c, "--summary"]);
    assert_eq!(
        common::stdout(&out),
        "0 changed, 0 removed, 0 added, 2 reworded, 0 same\n  reworded: 2 text only\n  re-recorded under a new key: 1\n",
        "{}",
        both(&out)
    );
}

#[test]
fn diff_runs_reports_regressions_fixes_and_membership() {
    let dir = Workdir::new();
    let store = dir.store("c");
    let fake = FakeLlm::start();
    let run = |suite: &str, name: &str| {
        dir.write("suite.jsonl", suite);
        dir.run(&[
            "run",
            "suite.jsonl",
            "--mode",
            "auto",
            "--store",
            &store,
            "--upstream",
            &fake.url,
            "--save-run",
            name,
        ])
    };
    let before = run(
        &[
            case("capital", "What is the capital of France?", "paris"),
            case("echo", "Repeat x", "nope"),
            case("gone", "Repeat gone", "said"),
        ]
        .join("\n"),
        "before",
    );
    assert_eq!(code(&before), 1, "{}", both(&before));
    assert!(dir.join(".cassette/runs/before.jsonl").is_file());
    let after = run(
        &[
            case("capital", "What is the capital of France?", "lyon"),
            case("echo", "Repeat x", "said"),
            case("added", "Repeat added", "said"),
        ]
        .join("\n"),
        "after",
    );
    assert_eq!(code(&after), 1, "{}", both(&after));

    let out = dir.run(&["diff-runs", "before", "after"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let report = common::stdout(&out);
    for needle in [
        "regression: capital: text does not contain \"lyon\"",
        "fixed: echo",
        "added: added (pass)",
        "removed: gone",
    ] {
        assert!(report.contains(needle), "{needle}\n{report}");
    }
    let out = dir.run(&["diff-runs", "before", "after", "--fail-on-regression"]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let out = dir.run(&[
        "diff-runs",
        "after",
        ".cassette/runs/after.jsonl",
        "--fail-on-regression",
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = dir.run(&["diff-runs", "before", "nope"]);
    assert_eq!(code(&out), 2, "{}", both(&out));

    // Every run is kept as `last`, misses included: a replay with one reworded prompt.
    dir.write(
        "suite.jsonl",
        &[
            case("capital", "What is the capital of France?", "lyon"),
            case("echo", "Repeat x again", "said"),
            case("added", "Repeat added", "said"),
        ]
        .join("\n"),
    );
    let replay = dir.run(&["run", "suite.jsonl", "--store", &store]);
    assert_eq!(code(&replay), 2, "{}", both(&replay));
    let out = dir.run(&["diff-runs", "after", "last", "--fail-on-regression"]);
    // A miss is not a regression, but its verdict is unknown: the gate cannot pass.
    assert_eq!(code(&out), 2, "{}", both(&out));
    let report = common::stdout(&out);
    assert!(
        report.contains("missed: echo (was pass; its recording is stale or missing)"),
        "{report}"
    );
    assert!(
        common::stderr(&out).contains("0 regressions, 0 fixes, 1 missed"),
        "{}",
        both(&out)
    );
}

#[test]
fn diff_runs_names_a_case_recorded_since_and_gates_on_new_misses() {
    let dir = Workdir::new();
    let store = dir.store("c");
    let fake = FakeLlm::start();
    let suite = [
        case("capital", "What is the capital of France?", "paris"),
        case("echo", "Repeat x", "nope"),
    ]
    .join("\n");
    dir.write("suite.jsonl", &suite);
    let run = |mode: &str, name: &str| {
        dir.run(&[
            "run",
            "suite.jsonl",
            "--mode",
            mode,
            "--store",
            &store,
            "--upstream",
            &fake.url,
            "--save-run",
            name,
        ])
    };
    // Nothing recorded yet: both cases miss.
    let missed = run("replay", "missed");
    assert_eq!(code(&missed), 2, "{}", both(&missed));
    let recorded = run("auto", "recorded");
    assert_eq!(code(&recorded), 1, "{}", both(&recorded));

    let out = dir.run(&["diff-runs", "missed", "recorded", "--fail-on-regression"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(
        common::stdout(&out),
        "recorded: capital (missed in missed, now pass)\n\
         recorded: echo (missed in missed, now fail: text does not contain \"nope\")\n",
        "{}",
        both(&out)
    );
    assert!(
        common::stderr(&out).contains("0 regressions, 0 fixes, 0 missed, 2 recorded"),
        "{}",
        both(&out)
    );

    // The other way round, the new misses fail the gate with the miss status, not 0.
    let out = dir.run(&["diff-runs", "recorded", "missed", "--fail-on-regression"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("2 case(s) miss in missed and have no verdict to compare"),
        "{}",
        both(&out)
    );
    // Without the flag it only reports.
    let out = dir.run(&["diff-runs", "recorded", "missed"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
}

#[test]
fn probe_asks_live_and_stores_nothing() {
    let dir = Workdir::new();
    let store = dir.store("c");
    let fake = FakeLlm::start();
    let request = |prompt: &str| {
        format!(
            r#"{{"path":"/v1/chat/completions","body":{{"model":"m","messages":[{{"role":"user","content":"{prompt}"}}]}}}}"#
        )
    };
    dir.write("noisy.json", &request("Tell me something [noisy]"));
    dir.write("stable.json", &request("What is the capital of France?"));
    // CASSETTE_MODE=replay in the environment must not turn a probe into a replay.
    let probe = |file: &str| {
        dir.cassette()
            .env("CASSETTE_MODE", "replay")
            .args([
                "probe",
                file,
                "--n",
                "4",
                "--store",
                &store,
                "--upstream",
                &fake.url,
            ])
            .output()
            .unwrap()
    };
    let out = probe("noisy.json");
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        common::stdout(&out).starts_with("4 requests, 4 distinct answers"),
        "{}",
        both(&out)
    );
    let out = probe("stable.json");
    assert!(
        common::stdout(&out).starts_with("4 requests, 1 distinct answers"),
        "{}",
        both(&out)
    );
    assert!(common::stdout(&out).contains("(4x)\nThe capital of France is Paris."));
    assert_eq!(fake.requests(), 8);
    assert!(json_lines(&dir.run(&["ls", "--json", "--store", &store])).is_empty());

    // Suite cases: picked with --only, graded, as JSON, and held to --max-distinct.
    dir.write(
        "suite.jsonl",
        &[
            case("noisy", "Tell me something [noisy]", "number 10"),
            case("stable", "What is the capital of France?", "paris"),
        ]
        .join("\n"),
    );
    let probe_suite = |extra: &[&str]| {
        let mut args = vec![
            "probe",
            "suite.jsonl",
            "--n",
            "3",
            "--json",
            "--store",
            &store,
            "--upstream",
            &fake.url,
        ];
        args.extend_from_slice(extra);
        dir.run(&args)
    };
    let out = probe_suite(&["--only", "noisy,stable", "--max-distinct", "1"]);
    assert_eq!(
        code(&out),
        1,
        "noisy gives 3 distinct answers: {}",
        both(&out)
    );
    let probed = json_lines(&out);
    assert_eq!(probed.len(), 2, "{}", both(&out));
    assert_eq!(
        (&probed[0]["id"], &probed[0]["distinct"]),
        (&"noisy".into(), &3.into())
    );
    let verdicts: Vec<&str> = probed[0]["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(
        verdicts.iter().filter(|v| **v == "pass").count(),
        1,
        "{verdicts:?}"
    );
    assert_eq!(probed[1]["answers"][0]["count"], 3);
    assert_eq!(probed[1]["answers"][0]["verdict"], "pass");
    assert_eq!(probed[1]["recorded"], false);
    let out = probe_suite(&["--only", "stable", "--max-distinct", "1"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = probe_suite(&[]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("name the ones to probe with --only"),
        "{}",
        both(&out)
    );
    assert!(json_lines(&dir.run(&["ls", "--json", "--store", &store])).is_empty());

    // One suite line on stdin, in record mode: the answers are stored.
    let mut child = dir
        .cassette()
        .args([
            "probe",
            "-",
            "--n",
            "2",
            "--mode",
            "record",
            "--store",
            &store,
            "--upstream",
            &fake.url,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(case("stable", "What is the capital of France?", "paris").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        common::stdout(&out)
            .starts_with("case stable: 2 requests, 1 distinct answers (recorded as "),
        "{}",
        both(&out)
    );
    assert!(
        common::stdout(&out).contains("(2x, pass)"),
        "{}",
        both(&out)
    );
    assert_eq!(
        json_lines(&dir.run(&["ls", "--json", "--store", &store])).len(),
        1
    );
}

#[test]
fn canary_keeps_the_cases_near_their_threshold() {
    let dir = Workdir::new();
    dir.write(
        "results.jsonl",
        concat!(
            r#"{"id":"far-above","score":0.95,"threshold":0.7}"#,
            "\n",
            r#"{"id":"just-above","score":0.75,"threshold":0.7,"note":"kept as is"}"#,
            "\n",
            r#"{"id":"just-below","score":0.62,"threshold":0.7}"#,
            "\n",
            r#"{"id":3,"score":0.1,"threshold":0.7}"#,
            "\n",
            r#"{"id":"edge","score":0.8,"threshold":0.7}"#,
        ),
    );
    let out = dir.run(&["canary", "results.jsonl", "--band", "0.1"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let kept: Vec<String> = json_lines(&out)
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kept, ["just-above", "just-below", "edge"]);
    assert!(common::stdout(&out).contains(r#""note":"kept as is""#));
    assert!(
        common::stderr(&out).contains("kept 3 of 5"),
        "{}",
        both(&out)
    );

    dir.write(
        "suite.jsonl",
        &[
            case("far-above", "a", "a"),
            case("just-below", "b", "b"),
            case("edge", "c", "c"),
        ]
        .join("\n"),
    );
    let out = dir.run(&[
        "canary",
        "results.jsonl",
        "--band",
        "0.1",
        "--suite",
        "suite.jsonl",
    ]);
    let ids: Vec<String> = json_lines(&out)
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["just-below", "edge"]);
    assert!(
        common::stderr(&out).contains("\"just-above\" is not in"),
        "{}",
        both(&out)
    );

    dir.write("bad.jsonl", "{\"id\":\"a\",\"score\":1,\"threshold\":1}\n{\"id\":\"b\",\"score\":\"high\",\"threshold\":1}\n");
    let out = dir.run(&["canary", "bad.jsonl", "--band", "0.1"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("bad.jsonl:2: \"score\" must be a number"),
        "{}",
        both(&out)
    );
    let out = dir.run(&["canary", "results.jsonl", "--band", "-1"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
}

/// A printing command whose reader goes away ends quietly instead of panicking.
#[test]
fn a_closed_pipe_ends_a_printing_command_quietly() {
    let dir = common::cli_env::Workdir::new();
    let examples = common::workspace_root().join("examples/suite/cassettes");
    let store = format!("file://{}", examples.display());
    let mut child = dir
        .cassette()
        .args(["show", "d49c7636", "--store", &store])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before the child writes.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}

#[test]
fn verify_names_a_tape_keyed_under_another_profile() {
    let dir = Workdir::new();
    let store_dir = dir.join("c");
    let store = dir.store("c");
    let fake = FakeLlm::start();
    let lines = record(&dir, &fake, &case("a", "Hi", "said"), &store);
    let key = lines[0]["key"].as_str().unwrap().to_owned();
    // The tape as a cassette from before its profile existed would have stored it: keyed by
    // the `http` profile, so under another key.
    let old_key = "e".repeat(64);
    let mut doc: Value =
        serde_json::from_slice(&std::fs::read(cassette_file(&store_dir, &key)).unwrap()).unwrap();
    doc["key"] = old_key.clone().into();
    doc["meta"]["profile"] = "http".into();
    std::fs::remove_file(cassette_file(&store_dir, &key)).unwrap();
    let moved = cassette_file(&store_dir, &old_key);
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::write(&moved, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();

    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let report = common::stdout(&out);
    assert!(
        report.contains(&format!(
            "{old_key}: keyed under the `http` profile; this tool keys these requests with the `openai.chat` profile"
        )),
        "{report}"
    );
}

#[test]
fn ls_and_show_name_the_test_that_recorded() {
    let dir = Workdir::new();
    let store = dir.store("c");
    let fake = FakeLlm::start();
    let lines = record(
        &dir,
        &fake,
        &[
            case("a", "First prompt", "said"),
            case("b", "Second prompt", "said"),
        ]
        .join("\n"),
        &store,
    );
    let (tested, untested) = (
        lines[0]["key"].as_str().unwrap().to_owned(),
        lines[1]["key"].as_str().unwrap().to_owned(),
    );
    // What a test runner's plugin leaves in meta.test (provenance) when it records.
    let node = "tests/test_chat.py::test_refund[gpt-4o]";
    edit(&dir.path().join("c"), &tested, |doc| {
        doc["meta"]["test"] = Value::from(node)
    });

    let out = dir.run(&["ls", "--json", "--store", &store]);
    let rows = json_lines(&out);
    let row = |key: &str| rows.iter().find(|r| r["key"] == key).unwrap().clone();
    assert_eq!(row(&tested)["test"], node);
    assert_eq!(row(&untested)["test"], Value::Null);
    let out = dir.run(&["ls", "--store", &store]);
    let listing = common::stdout(&out);
    let line = |key: &str| {
        listing
            .lines()
            .find(|l| l.starts_with(&key[..16]))
            .unwrap()
            .to_owned()
    };
    assert!(
        listing.lines().next().unwrap().ends_with("TEST"),
        "{listing}"
    );
    assert!(line(&tested).ends_with(node), "{listing}");
    assert!(line(&untested).ends_with(" -"), "{listing}");

    let out = dir.run(&["show", &tested, "--store", &store]);
    assert!(
        common::stdout(&out).contains(&format!("\ntest           {node}\n")),
        "{}",
        both(&out)
    );
    let out = dir.run(&["show", &untested, "--store", &store]);
    assert!(!common::stdout(&out).contains("\ntest "), "{}", both(&out));
}

/// Issue 34, item 3: `verify` checks the team's own `[redact]` rules too, so a tape recorded
/// before a rule was added is named, with the rule it breaks.
#[test]
fn verify_names_tapes_breaking_the_configured_redact_rules() {
    let dir = Workdir::new();
    let store = dir.store("c");
    let fake = FakeLlm::start();
    let lines = record(
        &dir,
        &fake,
        &case("a", "my email is jane.doe@example.com", "said"),
        &store,
    );
    let key = lines[0]["key"].as_str().unwrap().to_owned();
    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));

    dir.write(
        "cassette.toml",
        "[redact]\npatterns = ['[\\w.+-]+@[\\w-]+\\.[\\w.]+']\npaths = [\"$.temperature\"]\n",
    );
    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let report = common::stdout(&out);
    assert!(
        report.contains(&format!(
            "{key}: request.body.json.messages[0].content holds a value the `[redact]` pattern `[\\w.+-]+@[\\w-]+\\.[\\w.]+` replaces"
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "{key}: request.body.json.temperature holds a value the `[redact]` path `$.temperature` replaces"
        )),
        "{report}"
    );
    assert!(!report.contains("jane.doe"), "{report}");
    assert!(both(&out).contains("problem(s)"), "{}", both(&out));
}
