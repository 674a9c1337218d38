//! `cassette import` of vcrpy tapes in the shapes real suites write (issue 23): the default
//! serializer, a custom serializer storing `parsed_body` and deleting vendor headers, repeats of
//! one request within a tape, two tapes with one request and different answers, a `!!binary`
//! header and a YAML-mapping request body, a stream ending in an error event, a fixture
//! download, an interaction that cannot be converted and an answer a serializer kept elsewhere.
//! No answer is lost silently or mixed with another; `--dry-run` stores nothing.

mod common;

use common::cli_env::{both, code, Workdir};
use serde_json::Value;
use std::path::Path;

/// A chat request body as a YAML single-quoted string.
fn chat(question: &str) -> String {
    format!(
        r#"'{{"messages":[{{"role":"user","content":"{question}"}}],"model":"gpt-4o-mini","temperature":1}}'"#
    )
}

fn answer(text: &str) -> String {
    format!(
        r#"'{{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{{"index":0,"message":{{"role":"assistant","content":"{text}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}}}'"#
    )
}

/// One interaction of the default serializer.
fn interaction(question: &str, text: &str) -> String {
    format!(
        r#"- request:
    body: {}
    headers:
      Content-Type: [application/json]
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body: {{string: {}}}
    headers:
      Content-Type: [application/json]
    status: {{code: 200, message: OK}}
"#,
        chat(question),
        answer(text)
    )
}

fn tape(interactions: &[String]) -> String {
    format!("interactions:\n{}version: 1\n", interactions.concat())
}

/// Every cassette of a file store, parsed.
fn cassettes(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    let Ok(shards) = std::fs::read_dir(dir) else {
        return out;
    };
    for shard in shards.flatten() {
        if !shard.path().is_dir() {
            continue;
        }
        for file in std::fs::read_dir(shard.path()).unwrap().flatten() {
            if file.path().extension().is_some_and(|e| e == "json") {
                out.push(serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap());
            }
        }
    }
    out
}

fn content(cassette: &Value) -> &str {
    cassette["response"]["body"]["json"]["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("")
}

#[test]
fn a_suite_of_tapes_imports_without_losing_or_mixing_an_answer() {
    let dir = Workdir::new();
    // Default serializer; three calls of one request with three answers (temperature 1).
    dir.write(
        "tests/cassettes/test_chat/test_colours.yaml",
        &tape(&[
            interaction("Name a colour.", "teal"),
            interaction("Name a colour.", "amber"),
            interaction("Name a colour.", "violet"),
        ]),
    );
    // Two tests, one request, different answers.
    dir.write(
        "tests/cassettes/test_chat/test_a.yaml",
        &tape(&[interaction("Pick a number.", "seven")]),
    );
    dir.write(
        "tests/cassettes/test_chat/test_b.yaml",
        &tape(&[interaction("Pick a number.", "three")]),
    );
    // A third with the same answer as the first is no conflict.
    dir.write(
        "tests/cassettes/test_more/TestAgain.test_c.yaml",
        &tape(&[interaction("Pick a number.", "seven")]),
    );
    // A custom serializer: headers lower-cased, anthropic-* deleted, JSON bodies as mappings
    // under parsed_body; a request body as a YAML mapping; a !!binary header; a fixture
    // download; an interaction that does not convert; an answer kept where nothing reads it.
    dir.write(
        "tests/cassettes/test_custom/test_parsed.yaml",
        r#"interactions:
- request:
    headers:
      content-type:
      - application/json
    method: POST
    parsed_body:
      max_tokens: 64
      messages:
      - content: What is the capital of France?
        role: user
      model: claude-sonnet-4-5
    uri: https://api.anthropic.com/v1/messages
  response:
    headers:
      content-type:
      - application/json
    parsed_body:
      content:
      - text: Paris.
        type: text
      id: msg_1
      model: claude-sonnet-4-5
      role: assistant
      stop_reason: end_turn
      type: message
      usage:
        input_tokens: 10
        output_tokens: 2
    status:
      code: 200
      message: OK
- request:
    body:
      messages:
      - {content: Capital of Italy?, role: user}
      model: gpt-4o-mini
    headers:
      content-type: [application/json]
      x-trace-id:
      - !!binary |
        dHJhY2UtNDJh
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body: {string: '{"object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Rome."},"finish_reason":"stop"}]}'}
    headers: {content-type: [application/json]}
    status: {code: 200, message: OK}
- request:
    body: null
    headers: {}
    method: GET
    uri: https://files.example.com/fixtures/cat.txt?sig=secret123
  response:
    body: {string: 'a cat'}
    headers: {content-type: [text/plain]}
    status: {code: 200, message: OK}
- request:
    body: {string: !!binary "not base64 at all!"}
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body: {string: '{}'}
    status: {code: 200, message: OK}
- request:
    body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Where is it?"}]}'
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    content: '{"choices":[]}'
    headers: {content-type: [application/json]}
    status: {code: 200, message: OK}
version: 1
"#,
    );
    // An Anthropic stream that ends in the vendor's error event.
    dir.write(
        "tests/cassettes/test_stream/test_overloaded.yaml",
        &format!(
            r#"interactions:
- request:
    body: '{{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{{"role":"user","content":"Tell a story."}}]}}'
    headers: {{anthropic-version: ['2023-06-01'], content-type: [application/json]}}
    method: POST
    uri: https://api.anthropic.com/v1/messages
  response:
    body: {{string: {}}}
    headers: {{content-type: [text/event-stream]}}
    status: {{code: 200, message: OK}}
version: 1
"#,
            serde_json::to_string(
                "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
            )
            .unwrap()
        ),
    );
    let store = dir.store("cassettes");

    // A dry run says per file what would happen, and stores nothing.
    let out = dir.run(&["import", "tests/cassettes", "--dry-run", "--store", &store]);
    let text = both(&out);
    assert_eq!(code(&out), 2, "{text}");
    assert!(cassettes(&dir.join("cassettes")).is_empty(), "{text}");
    assert!(
        text.contains("tests/cassettes/test_chat/test_colours.yaml: 3 interaction(s): 3 would be imported (2 as later occurrences), 0 already stored, 0 conflict(s)"),
        "{text}"
    );
    assert!(
        text.contains("tests/cassettes/test_chat/test_b.yaml: 1 interaction(s): 1 would be imported (0 as later occurrences, 1 kept apart for their test), 0 already stored, 0 conflict(s)"),
        "{text}"
    );
    assert!(
        text.contains("tests/cassettes/test_custom/test_parsed.yaml: 5 interaction(s): 2 would be imported (0 as later occurrences), 0 already stored, 0 conflict(s), 2 cannot be imported, 1 download(s) stored, 0 download(s) not imported"),
        "{text}"
    );
    assert!(
        text.contains("would import 8, kept 1 already stored, failed 2, 0 conflict(s)"),
        "{text}"
    );
    assert!(
        text.contains("would import tests/cassettes/test_chat/test_b.yaml interaction 1 under its test-scoped key for test tests/test_chat.py::test_b only (POST /v1/chat/completions): tests/cassettes/test_chat/test_a.yaml interaction 1 (test tests/test_chat.py::test_a) answers the same request differently"),
        "{text}"
    );

    // The import itself, the deleted anthropic-version restored by a rule.
    let out = dir.run(&[
        "import",
        "tests/cassettes",
        "--store",
        &store,
        "--restore-header",
        "anthropic:anthropic-version=2023-06-01",
    ]);
    let text = both(&out);
    assert_eq!(code(&out), 2, "{text}");
    // Repeats: numbered, and said to need sequence mode.
    assert!(
        text.contains("sequence: tests/cassettes/test_chat/test_colours.yaml sends POST /v1/chat/completions 3 times with different answers"),
        "{text}"
    );
    // Two tests, one request, two answers: the first tape's holds the plain key, the second is
    // kept apart under its test-scoped key, each named.
    assert!(
        text.contains("imported tests/cassettes/test_chat/test_b.yaml interaction 1 as ")
            && text.contains(" for test tests/test_chat.py::test_b only (POST /v1/chat/completions): tests/cassettes/test_chat/test_a.yaml interaction 1 (test tests/test_chat.py::test_a) answers the same request differently"),
        "{text}"
    );
    assert!(
        text.contains("kept ") && text.contains("already stored, same answer (tests/cassettes/test_more/TestAgain.test_c.yaml interaction 1)"),
        "{text}"
    );
    // What could not be converted is named, the rest of its file imported.
    assert!(
        text.contains("cannot import tests/cassettes/test_custom/test_parsed.yaml interaction 4: request body")
            && text.contains("not valid base64"),
        "{text}"
    );
    assert!(
        text.contains("cannot import tests/cassettes/test_custom/test_parsed.yaml interaction 5: the answer is empty (status 200)")
            && text.contains("holds content, headers {content-type}, status {code, message}"),
        "{text}"
    );
    assert!(
        text.contains("stored tests/cassettes/test_custom/test_parsed.yaml interaction 3 as ")
            && text.contains(" (GET https://files.example.com/fixtures/cat.txt: a download of https://files.example.com, served on replay)"),
        "{text}"
    );
    assert!(!text.contains("secret123"), "{text}");
    assert!(
        text.contains("restored tests/cassettes/test_custom/test_parsed.yaml interaction 1: anthropic-version: 2023-06-01"),
        "{text}"
    );
    assert!(
        text.contains("imported 8, kept 1 already stored, failed 2, 0 conflict(s) with another tape's answer, 2 repeat(s) numbered for sequence mode, 1 kept apart for their test, 1 download(s) stored (from https://files.example.com), 0 download(s) not imported"),
        "{text}"
    );

    let stored = cassettes(&dir.join("cassettes"));
    assert_eq!(stored.len(), 9, "{stored:#?}");
    // The fixture download, a recording of its host: the signed URL's credential left out.
    let download = stored
        .iter()
        .find(|c| c["meta"]["profile"] == "download")
        .expect("the download is stored");
    assert_eq!(
        download["target"], "https://files.example.com",
        "{download:#}"
    );
    assert_eq!(
        download["request"]["path"], "/fixtures/cat.txt",
        "{download:#}"
    );
    assert_eq!(
        download["response"]["body"]["text"], "a cat",
        "{download:#}"
    );
    assert!(!download.to_string().contains("secret123"), "{download:#}");
    // The repeats: one base key and two occurrences of it, each its own answer, in order.
    let colours: Vec<&Value> = stored
        .iter()
        .filter(|c| c["meta"]["test"] == "tests/test_chat.py::test_colours")
        .collect();
    assert_eq!(colours.len(), 3);
    let base = colours
        .iter()
        .find(|c| c.get("sequence").is_none())
        .expect("a first occurrence");
    assert_eq!(content(base), "teal");
    for (n, text) in [(2, "amber"), (3, "violet")] {
        let nth = colours
            .iter()
            .find(|c| c["sequence"]["occurrence"] == n)
            .unwrap_or_else(|| panic!("occurrence {n}: {colours:#?}"));
        assert_eq!(nth["sequence"]["base_key"], base["key"]);
        assert_eq!(content(nth), text);
        assert_eq!(
            nth["meta"]["source"],
            format!("tests/cassettes/test_chat/test_colours.yaml interaction {n}")
        );
    }
    // The plain key holds the first tape's answer; the second test's own answer is under its
    // test-scoped key, which names the plain one.
    let number = stored
        .iter()
        .find(|c| c["meta"]["test"] == "tests/test_chat.py::test_a")
        .unwrap();
    assert_eq!(content(number), "seven");
    assert!(
        number.get("test_scope").is_none_or(Value::is_null),
        "{number:#}"
    );
    let own = stored
        .iter()
        .find(|c| c["meta"]["test"] == "tests/test_chat.py::test_b")
        .expect("test_b's own answer is stored");
    assert_ne!(content(own), "seven", "{own:#}");
    assert_eq!(own["test_scope"]["plain_key"], number["key"], "{own:#}");
    assert_eq!(
        own["test_scope"]["test"], "tests/test_chat.py::test_b",
        "{own:#}"
    );
    assert_ne!(own["key"], number["key"]);
    // parsed_body: the request and the answer are the tape's, not empty.
    let parsed = stored
        .iter()
        .find(|c| c["meta"]["profile"] == "anthropic.messages" && c["response"]["stream"].is_null())
        .unwrap();
    assert_eq!(
        parsed["request"]["body"]["json"]["messages"][0]["content"],
        "What is the capital of France?"
    );
    assert_eq!(
        parsed["response"]["body"]["json"]["content"][0]["text"],
        "Paris."
    );
    assert_eq!(
        parsed["request"]["headers"]["anthropic-version"],
        "2023-06-01"
    );
    // The mapping body with the binary header.
    assert!(stored
        .iter()
        .any(
            |c| c["request"]["body"]["json"]["messages"][0]["content"] == "Capital of Italy?"
                && content(c) == "Rome."
        ));
    // The error stream is kept event by event.
    let overloaded = stored
        .iter()
        .find(|c| c["meta"]["test"] == "tests/test_stream.py::test_overloaded")
        .unwrap();
    assert_eq!(overloaded["response"]["stream"], "sse", "{overloaded:#}");
    assert!(overloaded.to_string().contains("overloaded_error"));

    // Imported again: nothing changes, every answer already there.
    let out = dir.run(&[
        "import",
        "tests/cassettes",
        "--store",
        &store,
        "--restore-header",
        "anthropic:anthropic-version=2023-06-01",
    ]);
    let text = both(&out);
    assert!(
        text.contains("imported 0, kept 10 already stored, failed 2, 0 conflict(s)"),
        "{text}"
    );

    // A tape imported alone into a store holding only the other test's answer: kept apart
    // there too, named from the stored cassette's meta.
    let alone = dir.store("alone");
    let out = dir.run(&[
        "import",
        "tests/cassettes/test_chat/test_a.yaml",
        "--store",
        &alone,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = dir.run(&[
        "import",
        "tests/cassettes/test_chat/test_b.yaml",
        "--store",
        &alone,
    ]);
    let text = both(&out);
    assert_eq!(code(&out), 0, "{text}");
    assert!(
        text.contains(" for test tests/test_chat.py::test_b only (POST /v1/chat/completions): tests/cassettes/test_chat/test_a.yaml interaction 1 (test tests/test_chat.py::test_a) answers the same request differently"),
        "{text}"
    );
    assert_eq!(cassettes(&dir.join("alone")).len(), 2);

    // The imported recordings replay: the parsed_body request as the SDK sends it (with the
    // restored header), and the mapping body.
    dir.write(
        "suite.jsonl",
        &[
            r#"{"id":"parsed","request":{"target":"anthropic","path":"/v1/messages","headers":{"anthropic-version":"2023-06-01"},"body":{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"What is the capital of France?"}]}},"grader":"contains","expect":{"needle":"Paris"}}"#,
            r#"{"id":"mapping","request":{"path":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Capital of Italy?"}]}},"grader":"contains","expect":{"needle":"Rome"}}"#,
        ]
        .join("\n"),
    );
    let out = dir.run(&["run", "suite.jsonl", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
}

#[test]
fn without_a_rule_a_deleted_vendor_header_is_noted_not_invented() {
    let dir = Workdir::new();
    dir.write(
        "t/cassettes/test_x/test_y.yaml",
        "interactions:\n- request:\n    method: POST\n    parsed_body: {model: claude-sonnet-4-5, max_tokens: 8, messages: [{role: user, content: Hi}]}\n    uri: https://api.anthropic.com/v1/messages\n  response:\n    parsed_body: {type: message, role: assistant, content: [{type: text, text: Hello}]}\n    status: {code: 200, message: OK}\nversion: 1\n",
    );
    let out = dir.run(&["import", "t", "--store", &dir.store("c")]);
    let text = both(&out);
    assert_eq!(code(&out), 0, "{text}");
    assert!(
        text.contains("note t/cassettes/test_x/test_y.yaml interaction 1: the request has no anthropic-version header")
            && text.contains("--restore-header anthropic:anthropic-version=VALUE"),
        "{text}"
    );
    let stored = cassettes(&dir.join("c"));
    assert_eq!(stored.len(), 1);
    assert!(stored[0]["request"]["headers"]
        .get("anthropic-version")
        .is_none());
    assert_eq!(stored[0]["meta"]["test"], "t/test_x.py::test_y");
    let out = dir.run(&[
        "import",
        "t",
        "--store",
        "memory://",
        "--restore-header",
        "nonsense",
    ]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        both(&out).contains("expected ROUTE:NAME=VALUE"),
        "{}",
        both(&out)
    );
}

#[test]
fn tapes_whose_tests_are_unknown_still_conflict_and_keep_the_first() {
    // Outside pytest-recording's layout no tape names its test: one key can hold one answer,
    // so the second answer is a conflict, named, not stored.
    let dir = Workdir::new();
    let tape = |answer: &str| {
        format!(
            "interactions:\n- request:\n    method: POST\n    body: '{{\"model\":\"gpt-4o-mini\",\"messages\":[{{\"role\":\"user\",\"content\":\"Pick a number\"}}]}}'\n    headers:\n      Content-Type: [application/json]\n    uri: https://api.openai.com/v1/chat/completions\n  response:\n    body: {{string: '{{\"id\":\"c\",\"object\":\"chat.completion\",\"model\":\"gpt-4o-mini\",\"choices\":[{{\"index\":0,\"finish_reason\":\"stop\",\"message\":{{\"role\":\"assistant\",\"content\":\"{answer}\"}}}}]}}'}}\n    headers:\n      Content-Type: [application/json]\n    status: {{code: 200, message: OK}}\nversion: 1\n"
        )
    };
    dir.write("tapes/one.yaml", &tape("seven"));
    dir.write("tapes/two.yaml", &tape("three"));
    let store = dir.store("c");
    let out = dir.run(&["import", "tapes", "--store", &store]);
    let text = both(&out);
    assert_eq!(code(&out), 2, "{text}");
    assert!(text.contains("1 conflict(s)"), "{text}");
    assert!(!text.contains("kept apart"), "{text}");
    let stored = cassettes(&dir.join("c"));
    assert_eq!(stored.len(), 1, "{stored:#?}");
    assert_eq!(content(&stored[0]), "seven");
}

/// The tapes of `tests/runners/vcr_odd_tapes` (the adopt run reads the same ones,
/// `tests/sdk/test_vcr_adopt.py`), written into `dir` where pytest-recording keeps them.
fn odd_tapes(dir: &Workdir) {
    let tapes = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/runners/vcr_odd_tapes/tests/cassettes/test_odd");
    for name in ["test_brotli", "test_broken", "test_binary_header"] {
        let text = std::fs::read_to_string(tapes.join(format!("{name}.yaml"))).unwrap();
        dir.write(&format!("tests/cassettes/test_odd/{name}.yaml"), &text);
    }
}

#[test]
fn odd_values_cost_only_what_cannot_be_converted() {
    // Issue 33: a response header kept as `!!binary` that is not UTF-8 (an AWS request id) is
    // left out, and its interaction imported with the header that is text; a brotli answer is
    // decoded; one interaction nothing can decode is named and the rest of its tape imported.
    let dir = Workdir::new();
    odd_tapes(&dir);
    let store = dir.store("cassettes");
    let out = dir.run(&["import", "tests", "--store", &store]);
    let text = both(&out);
    assert_eq!(code(&out), 2, "{text}");
    assert!(
        text.contains("imported 3, kept 0 already stored, failed 1, 0 conflict(s)"),
        "{text}"
    );
    assert!(
        text.contains("note tests/cassettes/test_odd/test_binary_header.yaml interaction 1: response header x-amz-id-2: its !!binary value is not UTF-8 text; left out"),
        "{text}"
    );
    assert!(
        text.contains("cannot import tests/cassettes/test_odd/test_broken.yaml interaction 2: the answer is zstd-encoded"),
        "{text}"
    );
    let stored = cassettes(&dir.join("cassettes"));
    let of = |test: &str| {
        stored
            .iter()
            .find(|c| c["meta"]["test"] == format!("tests/test_odd.py::{test}"))
            .unwrap_or_else(|| panic!("{test}: {stored:#?}"))
    };
    assert_eq!(content(of("test_brotli")), "brotli ok");
    assert!(of("test_brotli")["response"]["headers"]
        .get("content-encoding")
        .is_none());
    assert_eq!(content(of("test_broken")), "kept ok");
    let binary = of("test_binary_header");
    assert_eq!(content(binary), "binary ok");
    assert_eq!(binary["response"]["headers"]["x-amz-request-id"], "req-123");
    assert!(binary["response"]["headers"].get("x-amz-id-2").is_none());
}

#[test]
fn a_tape_from_a_host_no_route_serves_is_refused_and_named() {
    // Issue 35 item 10: filed under the default route, a stranger's answers would replay for
    // the real vendor's requests.
    let dir = Workdir::new();
    let mut interactions = Vec::new();
    for host in [
        "evil.example",
        "api.openai.com.evil.example",
        "169.254.169.254",
    ] {
        interactions.push(interaction(host, "stolen").replace(
            "https://api.openai.com/v1/chat/completions",
            &format!("https://{host}/v1/chat/completions"),
        ));
    }
    interactions.push(interaction("real", "fine"));
    dir.write("t/strangers.yaml", &tape(&interactions));
    let out = dir.run(&["import", "t", "--store", &dir.store("c")]);
    let text = both(&out);
    assert_eq!(code(&out), 2, "{text}");
    for host in [
        "evil.example",
        "api.openai.com.evil.example",
        "169.254.169.254",
    ] {
        assert!(
            text.contains(&format!("on a host no route serves (`{host}`)")),
            "{host}: {text}"
        );
    }
    let stored = cassettes(&dir.join("c"));
    assert_eq!(stored.len(), 1, "only the vendor's own interaction: {text}");
    assert_eq!(content(&stored[0]), "fine");
}
