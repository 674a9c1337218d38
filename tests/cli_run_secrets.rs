//! What `cassette run` writes besides the cassettes (issue 25 item 1): result lines, the last
//! run, a saved run and the JUnit report go through the recorder's own redaction, so a key the
//! model said back or an upstream that echoes the route's own key is as absent there as it is
//! from the cassette; and `cassette verify` audits the saved runs too. A streamed case is
//! assembled first (issue 34 item 2): graded, logged and saved as its answer's text, never as
//! the raw events, and a secret streamed in pieces is redacted whole.

mod common;

use common::cli_env::{both, code, Workdir};
use common::fake_llm::FakeLlm;

/// A key of OpenAI's shape, said in the prompt (the fake says it back).
const SHAPED: &str = "sk-proj-Zx81mQ2vT7sLk0aB3nY5cD9eF1gH4jK6lM8nP0qR";
/// The route's own key: no known shape, so only the routes' keys rule catches it.
const ROUTE_KEY: &str = "route-own-secret-5f1e9a7c3b2d";

fn case(id: &str, prompt: &str, grader: &str, expect: &str) -> String {
    format!(
        r#"{{"id":"{id}","prompt":"{prompt}","params":{{"model":"m","temperature":0}},"grader":"{grader}","expect":{expect}}}"#
    )
}

fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn run_outputs_are_redacted_like_the_cassettes_and_verify_audits_saved_runs() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    let suite = [
        // Passes: the answer (and so the saved run) holds the shaped key.
        case(
            "said",
            &format!("my key is {SHAPED}"),
            "contains",
            r#"{"needle":"said"}"#,
        ),
        // Fails: the reason quotes the answer, which holds the route's own key.
        case(
            "echo",
            "[echo-auth] what did I send?",
            "equals",
            r#"{"value":"nothing"}"#,
        ),
    ]
    .join("\n");
    dir.write("suite.jsonl", &suite);
    let out = dir
        .cassette()
        .env("OPENAI_API_KEY", ROUTE_KEY)
        .args([
            "run",
            "suite.jsonl",
            "--mode",
            "record",
            "--store",
            "file://tapes",
            "--upstream",
            &fake.url,
            "--save-run",
            "base",
            "--junit",
            "report.xml",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "the echo case fails: {}", both(&out));
    assert_eq!(fake.requests(), 2);
    let printed = both(&out);
    assert!(printed.contains("[REDACTED]"), "{printed}");
    let mut written = vec![
        dir.join(".cassette/runs/last.jsonl"),
        dir.join(".cassette/runs/base.jsonl"),
        dir.join("report.xml"),
    ];
    written.extend(files_under(&dir.join("tapes")));
    for path in &written {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(!text.contains(SHAPED), "{}: {text}", path.display());
        assert!(!text.contains(ROUTE_KEY), "{}: {text}", path.display());
    }
    for secret in [SHAPED, ROUTE_KEY] {
        assert!(!printed.contains(secret), "{printed}");
    }
    let last = std::fs::read_to_string(dir.join(".cassette/runs/last.jsonl")).unwrap();
    assert!(last.contains("my key is [REDACTED]"), "{last}");

    // Replayed, the run grades and saves the same answers as when it was recorded.
    let out = dir.run(&["run", "suite.jsonl", "--store", "file://tapes"]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let replayed = std::fs::read_to_string(dir.join(".cassette/runs/last.jsonl")).unwrap();
    let texts = |log: &str| -> Vec<String> {
        common::cli_env::json_lines_of(log)
            .iter()
            .map(|l| format!("{} {} {}", l["id"], l["verdict"], l["text"]))
            .collect()
    };
    assert_eq!(texts(&replayed), texts(&last));

    // The clean runs verify; a run an older version saved unredacted does not, and the
    // finding names the file and line, never the secret.
    let out = dir.run(&["verify", "--store", "file://tapes"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    dir.write(
        ".cassette/runs/old.jsonl",
        &format!("{{\"id\":\"a\",\"text\":\"fine\"}}\n{{\"id\":\"b\",\"text\":\"my key is {SHAPED}\"}}\n"),
    );
    let out = dir.run(&["verify", "--store", "file://tapes"]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let report = common::stdout(&out);
    assert!(
        report.contains(".cassette/runs/old.jsonl:2: credential-shaped text (openai_api_key)"),
        "{report}"
    );
    assert!(!both(&out).contains(SHAPED), "{}", both(&out));
    // Another runs folder is audited when named.
    std::fs::rename(dir.join(".cassette/runs"), dir.join("elsewhere")).unwrap();
    let out = dir.run(&["verify", "--store", "file://tapes"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = dir.run(&[
        "verify",
        "--store",
        "file://tapes",
        "--runs-dir",
        "elsewhere",
    ]);
    assert_eq!(code(&out), 1, "{}", both(&out));

    // A probe prints live answers (never stored): redacted all the same.
    let out = dir
        .cassette()
        .env("OPENAI_API_KEY", ROUTE_KEY)
        .args([
            "probe",
            "suite.jsonl",
            "--only",
            "said,echo",
            "-n",
            "2",
            "--upstream",
            &fake.url,
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", both(&out));
    let printed = both(&out);
    assert!(printed.contains("my key is [REDACTED]"), "{printed}");
    for secret in [SHAPED, ROUTE_KEY] {
        assert!(!printed.contains(secret), "{printed}");
    }
}

/// A key of Anthropic's shape, said in the prompt: the fake streams it back four characters an
/// event, so no event holds it whole.
const STREAMED: &str = "sk-ant-api03-Q9x2Lm7Vb4Kp1Zt8Rw3Yc6Hn0Js5Fd2Ga9Ue4Oi7_AA";

/// Whether `text` holds a piece of the streamed secret: any four characters of it past its
/// `sk-ant-` prefix (the deltas are four characters long, cut wherever the answer puts them).
fn holds_a_piece(text: &str) -> bool {
    let tail: Vec<char> = STREAMED["sk-ant-".len()..].chars().collect();
    tail.windows(4)
        .map(|w| w.iter().collect::<String>())
        // Only pieces no key hash or id could hold by chance.
        .filter(|w| w.chars().any(|c| c.is_ascii_uppercase()))
        .any(|piece| text.contains(&piece))
}

#[test]
fn streamed_cases_are_assembled_before_they_are_graded_logged_and_saved() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    let prompt = format!("my key is {STREAMED}");
    let openai = |id: &str, grader: &str, needle: &str| {
        format!(
            r#"{{"id":"{id}","prompt":"{prompt}","params":{{"model":"m","temperature":0,"stream":true}},"grader":"{grader}","expect":{{"needle":"{needle}"}}}}"#
        )
    };
    let anthropic = |id: &str, grader: &str, needle: &str| {
        format!(
            r#"{{"id":"{id}","request":{{"target":"anthropic","path":"/v1/messages","headers":{{"anthropic-version":"2023-06-01"}},"body":{{"model":"claude-x","max_tokens":100,"stream":true,"messages":[{{"role":"user","content":"{prompt}"}}]}}}},"grader":"{grader}","expect":{{"needle":"{needle}"}}}}"#
        )
    };
    let suite = [
        // "said: my key" spans three deltas: only the assembled text holds it.
        openai("openai-phrase", "contains", "said: my key"),
        openai("openai-framing", "contains", "data:"),
        openai("openai-json", "contains", "delta"),
        anthropic("anthropic-phrase", "contains", "said: my key"),
        anthropic("anthropic-framing", "contains", "event:"),
        anthropic("anthropic-json", "contains", "text_delta"),
    ]
    .join("\n");
    dir.write("suite.jsonl", &suite);
    let anthropic_route = format!("anthropic={}", fake.url);
    let out = dir.run(&[
        "run",
        "suite.jsonl",
        "--mode",
        "record",
        "--store",
        "file://tapes",
        "--upstream",
        &fake.url,
        "--route",
        &anthropic_route,
        "--save-run",
        "streamed",
        "--junit",
        "report.xml",
    ]);
    assert_eq!(code(&out), 1, "the framing cases fail: {}", both(&out));
    assert!(fake.requests() >= 2, "{}", fake.requests());
    let verdicts = |log: &str| -> Vec<String> {
        common::cli_env::json_lines_of(log)
            .iter()
            .map(|l| {
                format!(
                    "{} {}",
                    l["id"].as_str().unwrap(),
                    l["verdict"].as_str().unwrap()
                )
            })
            .collect()
    };
    let expected = [
        "openai-phrase pass",
        "openai-framing fail",
        "openai-json fail",
        "anthropic-phrase pass",
        "anthropic-framing fail",
        "anthropic-json fail",
    ];
    assert_eq!(verdicts(&common::stdout(&out)), expected, "{}", both(&out));

    let last = std::fs::read_to_string(dir.join(".cassette/runs/last.jsonl")).unwrap();
    let saved = std::fs::read_to_string(dir.join(".cassette/runs/streamed.jsonl")).unwrap();
    assert_eq!(verdicts(&last), expected);
    for log in [&last, &saved] {
        for line in common::cli_env::json_lines_of(log) {
            assert_eq!(
                line["text"], "You said: my key is [REDACTED]",
                "the answer's assembled text, redacted: {line}"
            );
        }
    }
    let mut written = vec![
        dir.join(".cassette/runs/last.jsonl"),
        dir.join(".cassette/runs/streamed.jsonl"),
        dir.join("report.xml"),
    ];
    written.extend(files_under(&dir.join("tapes")));
    for path in &written {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(!text.contains(STREAMED), "{}: {text}", path.display());
        assert!(!holds_a_piece(&text), "{}: {text}", path.display());
    }
    assert!(!holds_a_piece(&both(&out)), "{}", both(&out));

    // Replayed (a stream synthesized from the sealed tape), the run grades and saves alike.
    let out = dir.run(&[
        "run",
        "suite.jsonl",
        "--store",
        "file://tapes",
        "--route",
        &anthropic_route,
    ]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let replayed = std::fs::read_to_string(dir.join(".cassette/runs/last.jsonl")).unwrap();
    let texts = |log: &str| -> Vec<String> {
        common::cli_env::json_lines_of(log)
            .iter()
            .map(|l| format!("{} {} {}", l["id"], l["verdict"], l["text"]))
            .collect()
    };
    assert_eq!(texts(&replayed), texts(&last));
}
