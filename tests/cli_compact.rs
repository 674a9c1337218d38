//! End-to-end tests of removing deleted cassettes' bytes from a `jsonl://` log through the
//! built binary: `gc` compacts the log after deleting, `cassette compact` rewrites it, and
//! writers and readers running beside a compaction lose nothing (issue 34 item 4).

mod common;

use common::cli_env::{both, code, json_lines, Workdir};
use common::fake_llm::FakeLlm;
use std::process::{Child, Stdio};

fn case(id: &str, prompt: &str) -> String {
    format!(
        r#"{{"id":"{id}","prompt":"{prompt}","params":{{"model":"m","temperature":0}},"grader":"contains","expect":{{"needle":"said"}}}}"#
    )
}

fn count(dir: &Workdir, store: &str) -> usize {
    json_lines(&dir.run(&["ls", "--json", "--store", store])).len()
}

fn spawn(dir: &Workdir, args: &[&str]) -> Child {
    let mut command = dir.cassette();
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command.spawn().unwrap()
}

#[test]
fn gc_on_a_jsonl_log_removes_the_deleted_cassettes_bytes() {
    let dir = Workdir::new();
    let log = dir.join("tape.jsonl");
    let store = format!("jsonl://{}", log.display());
    let fake = FakeLlm::start();
    let suite = [
        case("a", "Repeat a"),
        case("b", "Repeat b"),
        case("leak", "Repeat my email is jane.doe@example.com"),
    ];
    dir.write("all.jsonl", &suite.join("\n"));
    let out = dir.run(&[
        "run",
        "all.jsonl",
        "--mode",
        "record",
        "--store",
        &store,
        "--upstream",
        &fake.url,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(String::from_utf8_lossy(&std::fs::read(&log).unwrap()).contains("jane.doe"));

    dir.write("two.jsonl", &suite[..2].join("\n"));
    let out = dir.run(&[
        "run",
        "two.jsonl",
        "--store",
        &store,
        "--usage-log",
        "used.log",
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = dir.run(&[
        "gc",
        "--unused",
        "--usage-log",
        "used.log",
        "--store",
        &store,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("compacted"),
        "gc says it compacted the log: {}",
        both(&out)
    );
    let bytes = std::fs::read(&log).unwrap();
    assert!(
        !String::from_utf8_lossy(&bytes).contains("jane"),
        "the deleted cassette's bytes are still in the log: {}",
        String::from_utf8_lossy(&bytes)
    );
    assert_eq!(count(&dir, &store), 2);
    let out = dir.run(&["run", "two.jsonl", "--store", &store]);
    assert_eq!(
        code(&out),
        0,
        "the kept cassettes still replay: {}",
        both(&out)
    );

    // A log with nothing stale compacts to the same cassettes; another store has nothing to do.
    let out = dir.run(&["compact", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("kept 2 cassettes"),
        "{}",
        both(&out)
    );
    let files = dir.store("files");
    let out = dir.run(&["copy", &store, &files]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = dir.run(&["compact", "--store", &files]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("nothing to compact"),
        "{}",
        both(&out)
    );
    let out = dir.run(&["compact", "--store", "jsonl://missing.jsonl"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(!dir.join("missing.jsonl").exists());
}

#[test]
fn writers_and_readers_beside_a_compaction_lose_nothing() {
    let dir = Workdir::new();
    let log = dir.join("tape.jsonl");
    let store = format!("jsonl://{}", log.display());
    let fake = FakeLlm::start();
    let base: Vec<String> = (0..5)
        .map(|i| case(&format!("base{i}"), &format!("Repeat base {i}")))
        .collect();
    dir.write("base.jsonl", &base.join("\n"));
    let out = dir.run(&[
        "run",
        "base.jsonl",
        "--mode",
        "record",
        "--store",
        &store,
        "--upstream",
        &fake.url,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    // Overwrite them once, so every compaction has stale lines to drop.
    let out = dir.run(&[
        "run",
        "base.jsonl",
        "--mode",
        "record",
        "--store",
        &store,
        "--upstream",
        &fake.url,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));

    let writers = 3;
    let per_writer = 6;
    let mut children = Vec::new();
    for w in 0..writers {
        let cases: Vec<String> = (0..per_writer)
            .map(|i| case(&format!("w{w}c{i}"), &format!("Repeat writer {w} case {i}")))
            .collect();
        let name = format!("w{w}.jsonl");
        dir.write(&name, &cases.join("\n"));
        children.push(spawn(
            &dir,
            &[
                "run",
                &name,
                "--mode",
                "record",
                "--store",
                &store,
                "--upstream",
                &fake.url,
            ],
        ));
    }
    for _ in 0..2 {
        children.push(spawn(&dir, &["run", "base.jsonl", "--store", &store]));
    }
    let mut compactions = 0;
    loop {
        let out = dir.run(&["compact", "--store", &store]);
        assert_eq!(code(&out), 0, "{}", both(&out));
        compactions += 1;
        let running = children.iter_mut().any(|c| c.try_wait().unwrap().is_none());
        if !running {
            break;
        }
    }
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            code(&out),
            0,
            "a writer or reader beside compaction failed: {}",
            both(&out)
        );
    }
    assert!(compactions >= 1);
    assert_eq!(
        count(&dir, &store),
        5 + writers * per_writer,
        "a record was lost"
    );
    for w in 0..writers {
        let out = dir.run(&["run", &format!("w{w}.jsonl"), "--store", &store]);
        assert_eq!(code(&out), 0, "{}", both(&out));
    }
    let out = dir.run(&["compact", "--store", &store]);
    let lines = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(lines, 5 + writers * per_writer, "{}", both(&out));
}
