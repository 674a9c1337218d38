//! Inputs built to exhaust the machine, through the built binary (issue 25): a suite line whose
//! `json_schema` grader loops, and a deeply nested YAML tape given to `cassette import`. Each
//! is refused quickly with a clear error naming the case or file; the commands run under a
//! memory limit, so a regression fails the test instead of taking the machine down.

mod common;

use common::cli_env::{both, code, output_within, Workdir};
use common::fake_llm::FakeLlm;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};
use std::time::Duration;

/// Address space allowed to the command: far above what cassette needs, far below the machine.
const MEMORY_LIMIT: u64 = 3 << 30;

/// Runs `cmd` with [`MEMORY_LIMIT`] and a deadline; the output and how long it took.
fn bounded(mut cmd: Command, deadline: Duration) -> (Output, Duration) {
    // SAFETY: setrlimit(2) is async-signal-safe and touches only the child, between fork and
    // exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: MEMORY_LIMIT,
                rlim_max: MEMORY_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    output_within(cmd, deadline)
}

/// Item 6: `$ref`s pointing at each other (`a -> b -> a`) and references fanning out are
/// refused when the suite is read, naming the case, before any request is sent.
#[test]
fn a_json_schema_grader_that_could_not_finish_is_refused_naming_the_case() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    let looping =
        r##"{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}"##;
    let mut levels = String::new();
    for i in 0..40 {
        levels.push_str(&format!(
            r##""l{i}":{{"anyOf":[{{"$ref":"#/$defs/l{n}"}},{{"$ref":"#/$defs/l{n}"}},{{"$ref":"#/$defs/l{n}"}}]}},"##,
            n = i + 1
        ));
    }
    let fanning =
        format!(r##"{{"$ref":"#/$defs/l0","$defs":{{{levels}"l40":{{"type":"object"}}}}}}"##);
    for (schema, needle) in [
        (looping.to_owned(), "#/$defs/a -> #/$defs/b -> #/$defs/a"),
        (fanning, "steps for one value"),
    ] {
        let suite = format!(
            "{}\n{}",
            r#"{"id":"fine","prompt":"Give me json","params":{"model":"m"},"grader":"json_shape","expect":{"keys":["name"]}}"#,
            format_args!(
                r#"{{"id":"profile","prompt":"Give me a json profile","params":{{"model":"m"}},"grader":"json_schema","expect":{{"schema":{schema}}}}}"#
            )
        );
        dir.write("suite.jsonl", &suite);
        let mut cmd = dir.cassette();
        cmd.args([
            "run",
            "suite.jsonl",
            "--mode",
            "auto",
            "--store",
            "file://tapes",
            "--upstream",
            &fake.url,
        ]);
        let (out, took) = bounded(cmd, Duration::from_secs(60));
        assert_eq!(code(&out), 2, "{}", both(&out));
        let err = common::stderr(&out);
        assert!(err.contains("suite.jsonl:2"), "{err}");
        assert!(err.contains("\"profile\""), "{err}");
        assert!(err.contains("json_schema"), "{err}");
        assert!(err.contains(needle), "{err}");
        assert!(took < Duration::from_secs(10), "took {took:?}");
    }
    assert_eq!(fake.requests(), 0, "refused before any request");
}

/// Item 13: a deeply nested YAML tape (400 KB of flow collections, and block nesting) is
/// refused in linear time with an error naming the file and the depth; the parser, which takes
/// quadratic time in flow nesting, never sees it.
#[test]
fn import_refuses_deeply_nested_yaml_quickly_naming_the_file() {
    let dir = Workdir::new();
    let n = 200_000;
    let flow = format!(
        "interactions:\n- request:\n    body: {}{}\n",
        "[".repeat(n),
        "]".repeat(n)
    );
    let maps = format!(
        "interactions: {}1{}\n",
        "{a: ".repeat(n / 4),
        "}".repeat(n / 4)
    );
    let mut block = String::from("interactions:\n");
    for level in 0..600 {
        block.push_str(&" ".repeat(level));
        block.push_str("- \n");
    }
    for (name, text, needle) in [
        ("flow.yaml", flow, "more than 64 levels deep at line 3"),
        ("maps.yaml", maps, "more than 64 levels deep at line 1"),
        ("block.yml", block, "too deeply"),
    ] {
        dir.write(name, &text);
        let mut cmd = dir.cassette();
        cmd.args(["import", name, "--store", "file://tapes"]);
        let (out, took) = bounded(cmd, Duration::from_secs(30));
        assert_eq!(code(&out), 2, "{name}: {}", both(&out));
        let err = common::stderr(&out);
        assert!(
            err.contains(&format!("cannot import {name}")) || err.contains(name),
            "{err}"
        );
        assert!(err.contains("not a vcrpy cassette"), "{name}: {err}");
        assert!(err.contains(needle), "{name}: {err}");
        assert!(took < Duration::from_secs(5), "{name} took {took:?}");
    }
}
