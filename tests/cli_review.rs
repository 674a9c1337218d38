//! End-to-end tests of the review of a re-record: `cassette diff` pairing a prompt edit's new
//! keys with the old ones and giving drift verdicts, git revisions as one side, the HTML and
//! Markdown reviews of `diff` and `run` (escaped, redacted, self-contained), the GitHub step
//! summary, and `cassette exec --report/--junit` read back by `diff-runs`. The HTML files are
//! also opened in a real browser by tests/browser (scripts/test.sh).

mod common;

use common::cli_env::{both, code, json_lines, Workdir};
use common::fake_llm::FakeLlm;
use common::git;
use serde_json::{json, Value};
use std::path::Path;

/// A prompt-shorthand case graded by `contains`.
fn case(id: &str, system: &str, prompt: &str, needle: &str) -> String {
    json!({"id": id, "prompt": prompt,
           "params": {"model": "m", "temperature": 0, "system": system},
           "grader": "contains", "expect": {"needle": needle}})
    .to_string()
}

/// A case asking for a tool call.
fn weather(id: &str, system: &str, city: &str) -> String {
    json!({"id": id, "request": {"path": "/v1/chat/completions", "body": {
        "model": "m", "temperature": 0,
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
        "messages": [{"role": "system", "content": system},
                     {"role": "user", "content": format!("What is the weather in {city}?")}]}},
        "grader": "tool_called", "expect": {"name": "get_weather"}})
    .to_string()
}

/// A case posted to another path (another profile: it pairs with nothing on the chat path).
fn elsewhere(id: &str, path: &str, prompt: &str) -> String {
    json!({"id": id, "request": {"path": path, "body": {"model": "m",
        "messages": [{"role": "user", "content": prompt}]}},
        "grader": "contains", "expect": {"needle": "said"}})
    .to_string()
}

/// Records `cases` into `store` through `fake`; the result lines, by case id.
fn record(dir: &Workdir, fake: &FakeLlm, cases: &[String], store: &str) -> Vec<Value> {
    let name = format!("suite-{}-{}.jsonl", fake.requests(), cases.len());
    dir.write(&name, &cases.join("\n"));
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

fn key_of<'a>(lines: &'a [Value], id: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l["id"] == id)
        .and_then(|l| l["key"].as_str())
        .unwrap_or_else(|| panic!("no case {id} in {lines:?}"))
}

/// A re-record after a prompt edit: every key moved. Old and new cassettes are paired by their
/// nearest request, each with its own counterpart, and judged.
#[test]
fn a_prompt_edit_is_paired_and_judged() {
    let dir = Workdir::new();
    let (before, after) = ("Be brief.", "Be brief and kind.");
    let old = record(
        &dir,
        &FakeLlm::start(),
        &[
            case("greet", before, "Say hello to Ada", "said"),
            case("capital", before, "What is the capital of France?", "Paris"),
            case("data", before, "Give json for Ada", "Ada"),
            weather("weather", before, "Rome"),
            elsewhere("gone", "/v1/responses", "an old question"),
        ],
        &dir.store("a"),
    );
    let new = record(
        &dir,
        &FakeLlm::start_variant(" Indeed."),
        &[
            case("greet", after, "Say hello to Ada", "said"),
            case("capital", after, "What is the capital of France?", "Paris"),
            case("data", after, "Give json for Ada", "Ada"),
            weather("weather", after, "Paris"),
            elsewhere("fresh", "/v1/completions", "a new question"),
        ],
        &dir.store("b"),
    );
    for id in ["greet", "capital", "data", "weather"] {
        assert_ne!(
            key_of(&old, id),
            key_of(&new, id),
            "the edit moved {id}'s key"
        );
    }
    let out = dir.run(&["diff", &dir.store("a"), &dir.store("b")]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let report = common::stdout(&out);
    let heading = |verdict: &str, id: &str| {
        format!(
            "{verdict}: {} (POST /v1/chat/completions, m) re-recorded as {} (request distance",
            key_of(&old, id),
            key_of(&new, id)
        )
    };
    for (verdict, id) in [
        ("reworded", "greet"),
        ("reworded", "capital"),
        ("same", "data"),
        ("changed", "weather"),
    ] {
        assert!(
            report.contains(&heading(verdict, id)),
            "{verdict} {id}:\n{report}"
        );
    }
    // The request difference is the miss explanation's, the system prompt as text.
    assert!(
        report.contains(
            r#"    request: body.messages[0].content: "Be brief." -> "Be brief and kind.""#
        ),
        "{report}"
    );
    assert!(
        report.contains("tool call arguments (get_weather)"),
        "{report}"
    );
    assert!(
        report.contains("- You said: Say hello to Ada\n"),
        "{report}"
    );
    assert!(
        report.contains("+ You said: Say hello to Ada Indeed.\n"),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "removed: {} (POST /v1/responses, m): only in A",
            key_of(&old, "gone")
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "added: {} (POST /v1/completions, m): only in B",
            key_of(&new, "fresh")
        )),
        "{report}"
    );
    // Most severe first.
    let at = |needle: &str| {
        report
            .find(needle)
            .unwrap_or_else(|| panic!("{needle}\n{report}"))
    };
    assert!(at("changed: ") < at("removed: "));
    assert!(at("removed: ") < at("added: "));
    assert!(at("added: ") < at("reworded: "));

    let out = dir.run(&["diff", &dir.store("a"), &dir.store("b"), "--summary"]);
    let summary = common::stdout(&out);
    assert_eq!(
        summary.lines().next(),
        Some("1 changed, 1 removed, 1 added, 2 reworded, 1 same"),
        "{summary}"
    );
    assert!(
        summary.contains("  re-recorded under a new key: 4"),
        "{summary}"
    );
    for (fail_on, expected) in [("changed", 1), ("reworded", 1)] {
        let out = dir.run(&[
            "diff",
            &dir.store("a"),
            &dir.store("b"),
            "--fail-on",
            fail_on,
        ]);
        assert_eq!(code(&out), expected, "{fail_on}: {}", both(&out));
    }
    // Pairing off: every moved key is removed or added.
    let out = dir.run(&[
        "diff",
        &dir.store("a"),
        &dir.store("b"),
        "--summary",
        "--pair-within",
        "0",
    ]);
    assert_eq!(
        common::stdout(&out).lines().next(),
        Some("0 changed, 5 removed, 5 added, 0 reworded, 0 same"),
        "{}",
        both(&out)
    );
}

/// The same keys re-recorded with reworded answers: `--fail-on changed` lets them pass.
#[test]
fn fail_on_sets_the_exit_status_by_severity() {
    let dir = Workdir::new();
    let cases = [
        case("greet", "Be brief.", "Say hello", "said"),
        case(
            "capital",
            "Be brief.",
            "What is the capital of France?",
            "Paris",
        ),
    ];
    record(&dir, &FakeLlm::start(), &cases, &dir.store("a"));
    record(
        &dir,
        &FakeLlm::start_variant(" Sure."),
        &cases,
        &dir.store("b"),
    );
    let diff = |extra: &[&str]| {
        let mut args = vec!["diff".to_owned(), dir.store("a"), dir.store("b")];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        dir.run(&args)
    };
    assert_eq!(code(&diff(&[])), 1);
    assert_eq!(code(&diff(&["--fail-on", "reworded"])), 1);
    let out = diff(&["--fail-on", "changed"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(
        common::stdout(&diff(&["--summary"])).lines().next(),
        Some("0 changed, 0 removed, 0 added, 2 reworded, 0 same")
    );
    // A truncated answer is a change: the finish reason moved.
    let out = dir.run(&["ls", "--json", "--store", &dir.store("b")]);
    let key = json_lines(&out)[0]["key"].as_str().unwrap().to_owned();
    let path = dir.join("b").join(&key[..2]).join(format!("{key}.json"));
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["response"]["body"]["json"]["choices"][0]["finish_reason"] = "length".into();
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let out = diff(&["--fail-on", "changed"]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    assert!(
        common::stdout(&out).contains("finish reason stop -> length"),
        "{}",
        both(&out)
    );
}

/// `git:REV:PATH` reads a store as a commit holds it, without touching the work tree, and says
/// clearly when there is no repository, no such revision or no such folder.
#[test]
fn a_git_revision_is_one_side() {
    let dir = Workdir::new();
    let cases = [
        case("greet", "Be brief.", "Say hello", "said"),
        case(
            "capital",
            "Be brief.",
            "What is the capital of France?",
            "Paris",
        ),
    ];
    // Outside any repository first.
    let out = dir.run(&["diff", "git:HEAD:cassettes", "cassettes"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("is not in a git repository"),
        "{}",
        both(&out)
    );
    git(dir.path(), &["init", "-q"]);
    record(&dir, &FakeLlm::start(), &cases, "cassettes");
    std::fs::create_dir_all(dir.join("cassettes/.cassette-index")).unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "recorded"]);
    // Re-recorded in the work tree: the answers drifted.
    let store = format!("file://{}", dir.join("cassettes").display());
    let lines = record(&dir, &FakeLlm::start_variant(" Sure."), &cases, &store);
    let _ = lines;
    let status = git(dir.path(), &["status", "--porcelain"]);
    let out = dir.run(&["diff", "git:HEAD:cassettes", "cassettes", "--summary"]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    assert_eq!(
        common::stdout(&out).lines().next(),
        Some("0 changed, 0 removed, 0 added, 2 reworded, 0 same"),
        "{}",
        both(&out)
    );
    assert!(
        common::stderr(&out).contains("git:HEAD:cassettes (commit "),
        "{}",
        both(&out)
    );
    assert_eq!(
        git(dir.path(), &["status", "--porcelain"]),
        status,
        "the work tree is untouched"
    );
    // The same revision on both sides, read from a subfolder with a relative path.
    let out = dir.run_in(
        "sub",
        &["diff", "git:HEAD:../cassettes", "git:HEAD:../cassettes"],
    );
    assert_eq!(code(&out), 0, "{}", both(&out));
    for (spec, message) in [
        ("git:HEAD~5:cassettes", "is not a commit of the repository"),
        ("git:HEAD:nope", "there is no nope in HEAD"),
        (
            "git:HEAD:suite-0-2.jsonl",
            "is a file in HEAD, not a folder of cassettes",
        ),
        ("git:--output=x:cassettes", "is not a git revision"),
    ] {
        let out = dir.run(&["diff", spec, "cassettes"]);
        assert_eq!(code(&out), 2, "{spec}: {}", both(&out));
        assert!(
            common::stderr(&out).contains(message),
            "{spec}: {}",
            both(&out)
        );
    }
    assert!(!dir.join("x").exists(), "nothing reached git as an option");
}

/// Text that would break out of HTML or Markdown, in a prompt and so in the answer.
const HOSTILE: &str = r#"</pre></script><script>alert(1)</script><img src=x onerror=alert(2)> " onmouseover="alert(3)" <a href="javascript:alert(4)">x</a> <style>body{display:none}</style> | cell | @octocat"#;

/// The HTML and Markdown reviews escape hostile tape text, redact secrets again (a rule added
/// after recording, a credential in a hand-edited tape) and load nothing from anywhere.
#[test]
fn reviews_escape_and_redact() {
    let dir = Workdir::new();
    let cases = [
        case("hostile", "Be brief.", HOSTILE, "said"),
        case("person", "Be brief.", "Tell me about Lovelace", "said"),
    ];
    record(&dir, &FakeLlm::start(), &cases, &dir.store("a"));
    let lines = record(
        &dir,
        &FakeLlm::start_variant(" Sure."),
        &cases,
        &dir.store("b"),
    );
    // A credential in a hand-edited tape, and a rule that names a person, both after recording.
    let key = key_of(&lines, "person");
    let path = dir.join("b").join(&key[..2]).join(format!("{key}.json"));
    let secret = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd";
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["response"]["body"]["json"]["choices"][0]["message"]["content"] =
        format!("Lovelace wrote programs. My key is {secret}").into();
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    dir.write("cassette.toml", "[redact]\npatterns = ['Lovelace']\n");
    let summary = dir.join("step-summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let out = dir
        .cassette()
        .args([
            "diff",
            &dir.store("a"),
            &dir.store("b"),
            "--html",
            "review.html",
            "--markdown",
            "review.md",
        ])
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", both(&out));
    let html = std::fs::read_to_string(dir.join("review.html")).unwrap();
    let markdown = std::fs::read_to_string(dir.join("review.md")).unwrap();
    let appended = std::fs::read_to_string(&summary).unwrap();
    assert!(
        appended.starts_with("earlier step\n### cassette diff"),
        "{appended}"
    );
    assert!(appended.ends_with(&format!("{markdown}\n")), "{appended}");
    for (name, text) in [
        ("html", &html),
        ("markdown", &markdown),
        ("stdout", &common::stdout(&out)),
    ] {
        assert!(!text.contains(secret), "{name} holds the key:\n{text}");
        assert!(
            !text.contains("Lovelace"),
            "{name} holds the redacted name:\n{text}"
        );
    }
    assert!(html.contains("[REDACTED]"), "{html}");
    // Self-contained and locked down.
    assert!(html.contains(r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'sha256-"#), "{html}");
    assert_eq!(html.matches("<script").count(), 0, "{html}");
    assert_eq!(html.matches("<img").count(), 0, "{html}");
    assert_eq!(html.matches("<style").count(), 1, "{html}");
    assert!(!html.contains("href=\"javascript"), "{html}");
    for resource in [" src=\"", " href=\"", "@import", "url("] {
        assert!(!html.contains(resource), "{resource} in {html}");
    }
    assert!(
        html.contains("&lt;/script&gt;&lt;script&gt;alert(1)"),
        "{html}"
    );
    // Markdown: one row per item, no cell boundary or HTML from the tape.
    assert!(
        !markdown.contains("<img") && !markdown.contains("</script>"),
        "{markdown}"
    );
    assert!(!markdown.contains("@octocat"), "a mention: {markdown}");
    for row in markdown
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("hostile") || l.contains("Say"))
    {
        let cells = row.replace("\\|", "").matches('|').count();
        assert_eq!(cells, 7, "{row}");
    }
}

/// `cassette run --html/--markdown`: every case with its verdict, grader and answer, and each
/// miss with its explanation; the step summary gets the short version.
#[test]
fn a_run_review_shows_cases_and_misses() {
    let dir = Workdir::new();
    let fake = FakeLlm::start();
    let recorded = [
        case(
            "capital",
            "Be brief.",
            "What is the capital of France?",
            "Paris",
        ),
        case("wrong", "Be brief.", "Say hello", "goodbye"),
    ];
    record_failing(&dir, &fake, &recorded, &dir.store("c"));
    let suite = [
        recorded[0].clone(),
        recorded[1].clone(),
        case(
            "stale",
            "Be brief.",
            "What is the capital of Frence?",
            "Paris",
        ),
        case("hostile", "Be brief.", HOSTILE, "said"),
    ];
    dir.write("suite.jsonl", &suite.join("\n"));
    let summary = dir.join("summary.md");
    let out = dir
        .cassette()
        .args([
            "run",
            "suite.jsonl",
            "--store",
            &dir.store("c"),
            "--html",
            "run.html",
            "--markdown",
            "run.md",
        ])
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", both(&out));
    let html = std::fs::read_to_string(dir.join("run.html")).unwrap();
    for needle in [
        "The capital of France is Paris.",
        "contains",
        "does not contain",
        "Replay miss",
        "capital of Frence?",
    ] {
        assert!(html.contains(needle), "{needle}:\n{html}");
    }
    assert!(
        !html.contains("<script") && !html.contains("<img"),
        "{html}"
    );
    // Misses first, then failures, then passes.
    let at = |needle: &str| html.find(needle).unwrap_or_else(|| panic!("{needle}"));
    assert!(
        at(">stale<") < at(">wrong<") && at(">wrong<") < at(">capital<"),
        "{html}"
    );
    let markdown = std::fs::read_to_string(dir.join("run.md")).unwrap();
    assert!(
        markdown.starts_with("### cassette run: suite.jsonl\n"),
        "{markdown}"
    );
    assert!(
        markdown.contains("1 passed, 1 failed, 2 missed"),
        "{markdown}"
    );
    assert!(markdown.contains("capital of Frence?"), "{markdown}");
    assert_eq!(
        std::fs::read_to_string(&summary).unwrap(),
        format!("{markdown}\n")
    );
    insta::assert_snapshot!(
        "run_summary",
        markdown
            .replace(&dir.path().display().to_string(), "DIR")
            .lines()
            .map(|l| if l.contains(" — mode ") {
                "(timings)"
            } else {
                l
            })
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Records a suite whose verdicts may fail (exit 1 is fine, a miss is not).
fn record_failing(dir: &Workdir, fake: &FakeLlm, cases: &[String], store: &str) {
    dir.write("rec.jsonl", &cases.join("\n"));
    let out = dir.run(&[
        "run",
        "rec.jsonl",
        "--mode",
        "record",
        "--store",
        store,
        "--upstream",
        &fake.url,
    ]);
    assert!(matches!(code(&out), 0 | 1), "{}", both(&out));
}

fn curl_chat(prompt: &str) -> String {
    format!(
        r#"curl -s -o /dev/null -H 'content-type: application/json' -d '{{"model":"m","messages":[{{"role":"user","content":"{prompt}"}}]}}' "$OPENAI_BASE_URL/chat/completions""#
    )
}

/// `cassette exec --report/--junit` keeps every request with its key, route and outcome (a
/// miss with its explanation); `diff-runs` compares two reports.
#[test]
fn exec_reports_every_request() {
    let dir = Workdir::new();
    let fake = FakeLlm::start();
    let script = format!(
        "{} && {}",
        curl_chat("first question"),
        curl_chat("second question")
    );
    let exec = |mode: &str, report: &str| {
        dir.run(&[
            "exec",
            "--mode",
            mode,
            "--store",
            "cassettes",
            "--upstream",
            &fake.url,
            "--report",
            report,
            "--junit",
            &report.replace(".json", ".xml"),
            "--",
            "sh",
            "-c",
            &script,
        ])
    };
    let out = exec("record", "recorded.json");
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = exec("replay", "ok.json");
    assert_eq!(code(&out), 0, "{}", both(&out));
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("ok.json")).unwrap()).unwrap();
    assert_eq!(report["cassette_exec_report"], 1);
    assert_eq!(report["mode"], "replay");
    let requests = report["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2, "{report}");
    for r in requests {
        assert_eq!(
            (r["outcome"].as_str(), r["route"].as_str()),
            (Some("replayed"), Some("default")),
            "{r}"
        );
        assert_eq!(r["path"], "/v1/chat/completions");
        assert_eq!(r["key"].as_str().unwrap().len(), 64);
    }
    let second = requests[1]["key"].as_str().unwrap().to_owned();
    // The second tape goes missing: the next replay misses it, and says why.
    std::fs::remove_file(
        dir.join("cassettes")
            .join(&second[..2])
            .join(format!("{second}.json")),
    )
    .unwrap();
    let out = exec("replay", "missed.json");
    assert_eq!(code(&out), 2, "{}", both(&out));
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("missed.json")).unwrap()).unwrap();
    let missed = &report["requests"][1];
    assert_eq!(missed["outcome"], "missed", "{report}");
    assert_eq!(missed["status"], 409);
    assert_eq!(missed["key"], second.as_str());
    assert!(
        missed["explanation"]["summary"]
            .as_str()
            .unwrap()
            .contains("The nearest recording"),
        "{report}"
    );
    assert!(
        missed["explanation"]["differences"]
            .to_string()
            .contains("[-first-]{+second+}")
            || missed["explanation"]["differences"]
                .to_string()
                .contains("first"),
        "{report}"
    );
    assert_eq!(report["counts"]["misses"], 1);
    let junit = std::fs::read_to_string(dir.join("missed.xml")).unwrap();
    assert!(
        junit.contains("tests=\"2\" failures=\"0\" errors=\"1\""),
        "{junit}"
    );
    assert!(junit.contains("type=\"cassette_miss\""), "{junit}");
    assert!(
        junit.contains(&format!("replay miss, key {second}")),
        "{junit}"
    );
    // diff-runs reads the two reports.
    let out = dir.run(&["diff-runs", "ok.json", "missed.json"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let shown = common::stdout(&out);
    assert!(
        shown.contains(&format!(
            "missed: default POST /v1/chat/completions {} (was pass",
            &second[..16]
        )),
        "{shown}"
    );
    assert!(shown.contains("The nearest recording"), "{shown}");
    // A saved suite run and an exec report are not compared.
    dir.write("run.jsonl", "");
    let out = dir.run(&["diff-runs", "ok.json", "run.jsonl"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("is an exec report"),
        "{}",
        both(&out)
    );
}

/// The step summary of exec names its misses; a summary file that cannot be written is a
/// warning, not a failure.
#[test]
fn exec_appends_a_step_summary() {
    let dir = Workdir::new();
    let summary = dir.join("summary.md");
    let run = |summary: &Path| {
        dir.cassette()
            .args([
                "exec",
                "--store",
                "cassettes",
                "--",
                "sh",
                "-c",
                &curl_chat("never recorded | <b>bold</b>"),
            ])
            .env("GITHUB_STEP_SUMMARY", summary)
            .output()
            .unwrap()
    };
    let out = run(&summary);
    assert_eq!(code(&out), 2, "{}", both(&out));
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(text.starts_with("### cassette exec\n"), "{text}");
    assert!(text.contains("**Replay misses**"), "{text}");
    assert!(
        text.contains("No recording exists at /v1/chat/completions"),
        "{text}"
    );
    let out = run(&dir.join("no/such/folder/summary.md"));
    assert_eq!(code(&out), 2, "still the miss's status: {}", both(&out));
    assert!(
        common::stderr(&out).contains("cannot append to the step summary"),
        "{}",
        both(&out)
    );
}

/// Issue 34, item 9: the exec report carries the run's duration.
#[test]
fn exec_report_carries_the_runs_duration() {
    let dir = Workdir::new();
    let out = dir.run(&[
        "exec",
        "--mode",
        "replay",
        "--store",
        "cassettes",
        "--report",
        "report.json",
        "--",
        "sh",
        "-c",
        "sleep 0.4",
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    let seconds = report["duration_seconds"].as_f64().unwrap_or(-1.0);
    assert!((0.4..60.0).contains(&seconds), "{report}");
}
