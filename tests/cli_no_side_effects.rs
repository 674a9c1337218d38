//! Commands that must leave nothing behind and run nothing they were not asked to: a
//! pass-through recorder (mode `off`, `probe`) creates no cassette folder, and `exec` refuses a
//! flag it does not know instead of running it as the command.

mod common;

use common::cli_env::{both, code, Workdir};
use common::fake_llm::FakeLlm;

const REQUEST: &str = r#"{"path":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"What is the capital of France?"}]}}"#;

#[test]
fn mode_off_creates_no_cassette_folder() {
    let dir = Workdir::new();
    let fake = FakeLlm::start();
    dir.write(
        "suite.jsonl",
        r#"{"id":"capital","prompt":"What is the capital of France?","params":{"model":"m"},"grader":"contains","expect":{"needle":"paris"}}"#,
    );
    // The default store (cassettes/ here) and a named one: neither appears.
    let out = dir.run(&[
        "run",
        "suite.jsonl",
        "--mode",
        "off",
        "--upstream",
        &fake.url,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let named = dir.store("named");
    let out = dir.run(&[
        "run",
        "suite.jsonl",
        "--mode",
        "off",
        "--store",
        &named,
        "--upstream",
        &fake.url,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(fake.requests(), 2, "mode off asks the upstream every time");
    assert!(!dir.join("cassettes").exists(), "{}", both(&out));
    assert!(!dir.join("named").exists(), "{}", both(&out));
}

#[test]
fn probe_creates_no_cassette_folder() {
    let dir = Workdir::new();
    let fake = FakeLlm::start();
    dir.write("request.json", REQUEST);
    let out = dir.run(&["probe", "request.json", "--n", "2", "--upstream", &fake.url]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(fake.requests(), 2);
    assert!(!dir.join("cassettes").exists(), "{}", both(&out));
}

#[test]
fn exec_refuses_an_unknown_flag_instead_of_running_it() {
    let dir = Workdir::new();
    let out = dir.run(&["exec", "--strict", "--", "sh", "-c", "touch ran"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains("unexpected argument '--strict'"),
        "{}",
        both(&out)
    );
    assert!(!dir.join("ran").exists(), "nothing runs: {}", both(&out));
    // The command's own flags still reach it, with or without `--`.
    let out = dir.run(&["exec", "--", "sh", "-c", "touch ran1", "--strict"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(dir.join("ran1").exists(), "{}", both(&out));
    let out = dir.run(&["exec", "sh", "-c", "touch ran2; exit 3", "--strict"]);
    assert_eq!(code(&out), 3, "{}", both(&out));
    assert!(dir.join("ran2").exists(), "{}", both(&out));
}
