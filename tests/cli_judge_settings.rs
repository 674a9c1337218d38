//! End-to-end tests of the judge's settings: `[judge]` in cassette.toml (shown by `cassette
//! config` with its origin, under the flags and variables), used by a recording run's judge
//! votes, and a judge vote that misses in replay compared with the judge's own recordings,
//! never with an application's recording that happens to be nearer.

mod common;

use common::cli_env::{both, code, json_lines, Workdir};
use common::fake_llm::FakeLlm;
use serde_json::{json, Value};

/// A case answered by the app and graded by the judge with `criterion`.
fn judged(criterion: &str) -> String {
    json!({"id": "polite", "prompt": "Say hello nicely", "params": {"model": "m"},
           "grader": "judge", "expect": {"criterion": criterion}})
    .to_string()
}

/// The stored cassettes, as `cassette ls --json` lists them.
fn listed(dir: &Workdir) -> Vec<Value> {
    let out = dir.run(&["ls", "--json"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    json_lines(&out)
}

#[test]
fn the_judge_model_comes_from_the_settings_file_and_a_judge_miss_names_the_judges_tape() {
    let dir = Workdir::new();
    dir.write(
        "cassette.toml",
        "store = \"cassettes\"\n\n[judge]\nmodel = \"judge-m\"\n",
    );

    // Shown with where it came from; a flag or its variable wins over the file.
    let out = dir.run(&["config"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let shown = common::stdout(&out);
    let line = |name: &str| {
        shown
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {shown}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(line("judge.model"), "judge.model judge-m (file)");
    assert_eq!(line("judge.route"), "judge.route default (default)");
    let out = dir
        .cassette()
        .env("CASSETTE_JUDGE_MODEL", "other")
        .args(["config", "--json"])
        .output()
        .unwrap();
    let settings: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = settings["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "judge.model")
        .cloned();
    assert_eq!(
        row,
        Some(
            json!({"name": "judge.model", "value": "other", "origin": "env CASSETTE_JUDGE_MODEL"})
        )
    );
    // An unknown key of the table is refused, naming where.
    dir.write("bad/cassette.toml", "[judge]\nmodle = \"x\"\n");
    let out = dir.run_in("bad", &["config"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("cassette.toml:2:1: unknown field `modle`"),
        "{}",
        both(&out)
    );

    // Recorded: the judge's vote asked the upstream for the file's model.
    let fake = FakeLlm::start();
    dir.write("suite.jsonl", &judged("The reply is polite"));
    let out = dir.run(&[
        "run",
        "suite.jsonl",
        "--mode",
        "record",
        "--upstream",
        &fake.url,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(fake.requests(), 2, "the case and one vote");
    let tapes = listed(&dir);
    let vote = tapes
        .iter()
        .find(|t| t["model"] == "judge-m")
        .unwrap_or_else(|| panic!("no judge vote in {tapes:?}"));
    assert_eq!(
        vote["response_model"], "judge-m-2024-01-01",
        "the upstream was asked for it"
    );
    let vote_key = vote["key"].as_str().unwrap().to_owned();

    // An application of its own that evaluates text the way the judge does: its request is
    // nearer to the judge's next vote than the judge's own recording will be.
    let out = dir.run(&["show", &vote_key, "--json"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let document: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut body = document["request"]["body"]["json"].clone();
    let question = body["messages"][1]["content"].as_str().unwrap().to_owned();
    let edited = "The reply is polite and warm";
    assert!(question.contains("The reply is polite"), "{question}");
    body["messages"][1]["content"] = json!(format!(
        "{}.",
        question.replace("The reply is polite", edited)
    ));
    let evaluator = json!({"id": "evaluator",
        "request": {"path": "/v1/chat/completions", "body": body},
        "grader": "contains", "expect": {"needle": "PASS"}})
    .to_string();
    dir.write("app.jsonl", &evaluator);
    let out = dir.run(&[
        "run",
        "app.jsonl",
        "--mode",
        "record",
        "--upstream",
        &fake.url,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let app_key = json_lines(&out)[0]["key"].as_str().unwrap().to_owned();
    fake.stop();

    // The criterion edited: the case replays, its judge vote misses, and the miss is explained
    // against the judge's own recording.
    dir.write("suite.jsonl", &judged(edited));
    let out = dir.run(&["run", "suite.jsonl"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains(&format!("nearest: {vote_key}")),
        "the judge's own recording is named\n{}",
        both(&out)
    );
    assert!(!err.contains(&app_key), "{}", both(&out));
}
