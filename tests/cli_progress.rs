//! Progress bars: drawn on stderr when it is a terminal (checked under a pseudo-terminal made
//! by util-linux's `script`), and nothing at all under a pipe, so CI logs stay clean.

mod common;

use common::cli_env::{both, code, Workdir};
use common::fake_llm::FakeLlm;
use std::process::Command;

/// `cassette ARGS` in `dir` under a pseudo-terminal: everything it wrote to the terminal.
fn under_terminal(dir: &Workdir, args: &[&str]) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut line = quote(&common::cassette_bin().display().to_string());
    for arg in args {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"]);
    // The clean environment of Workdir::cassette, run through `script`.
    let probe = dir.cassette();
    cmd.current_dir(dir.path());
    for (name, value) in probe.get_envs() {
        match value {
            Some(value) => cmd.env(name, value),
            None => cmd.env_remove(name),
        };
    }
    let out = cmd
        .env("TERM", "xterm")
        .output()
        .expect("running script (util-linux), which makes the pseudo-terminal");
    assert!(
        out.status.code().is_some(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn suite(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                r#"{{"id":"c{i}","prompt":"Repeat {i}","params":{{"model":"m"}},"grader":"contains","expect":{{"needle":"said"}}}}"#
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn progress_is_drawn_on_a_terminal_and_absent_under_a_pipe() {
    let dir = Workdir::new();
    let fake = FakeLlm::start();
    dir.write("suite.jsonl", &suite(40));
    let record = [
        "run",
        "suite.jsonl",
        "--mode",
        "record",
        "--store",
        "c",
        "--upstream",
        &fake.url,
    ];
    let shown = under_terminal(&dir, &record);
    assert!(shown.contains("/40 cases"), "{shown}");
    assert!(shown.contains(" hits · "), "{shown}");
    assert!(shown.contains(" recorded"), "{shown}");
    // The result lines and the summary are still there, after the bar.
    assert!(shown.contains("\"id\":\"c39\""), "{shown}");
    assert!(
        shown.contains("cassette run: 40 cases: 40 passed"),
        "{shown}"
    );

    let replay = ["run", "suite.jsonl", "--store", "c"];
    let out = dir.run(&replay);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let stderr = common::stderr(&out);
    assert!(!stderr.contains("/40 cases"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "escape codes under a pipe: {stderr:?}"
    );
    assert_eq!(stderr.lines().count(), 1, "only the summary line: {stderr}");

    for (args, drawn) in [
        (vec!["verify", "--store", "c"], "cassettes verified"),
        (vec!["copy", "c", "d"], "/40 cassettes"),
        (vec!["index", "--store", "c"], "indexing"),
    ] {
        let shown = under_terminal(&dir, &args);
        assert!(shown.contains(drawn), "{args:?}: {shown}");
        let out = dir.run(&args);
        let stderr = common::stderr(&out);
        assert!(!stderr.contains(drawn), "{args:?}: {stderr}");
        assert!(!stderr.contains('\u{1b}'), "{args:?}: {stderr:?}");
    }
}
