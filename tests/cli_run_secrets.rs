//! What `cassette run` writes besides the cassettes (issue 25 item 1): result lines, the last
//! run, a saved run and the JUnit report go through the recorder's own redaction, so a key the
//! model said back or an upstream that echoes the route's own key is as absent there as it is
//! from the cassette; and `cassette verify` audits the saved runs too.

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
