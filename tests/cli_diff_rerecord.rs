//! End-to-end test of the re-record routine docs/suite.md gives, on a git copy of
//! `examples/triage`: three stale cases re-recorded into the same store (their old tapes stay
//! beside the new ones), then `cassette diff git:HEAD:cassettes cassettes` pairs each new
//! recording with the one it replaces and names the old ones still in the store, which the
//! usage-log collector then deletes.

mod common;

use common::cli_env::{both, code, Workdir};
use common::fake_llm::FakeLlm;
use common::git;
use std::path::Path;

/// Copies the folder `from` into `to`, recursively.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn a_rerecord_beside_its_old_tapes_is_paired_with_them() {
    let dir = Workdir::new();
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/triage"),
        dir.path(),
    );
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "recorded"]);

    // The routine's step 2, against an upstream whose answers changed.
    let fake = FakeLlm::start_variant(" Indeed.");
    let out = dir
        .cassette()
        .env("CASSETTE_MODE", "record")
        .args([
            "run",
            "stale.jsonl",
            "--only",
            "board-summary,capital,greeting",
            "--upstream",
            &fake.url,
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(fake.requests(), 3, "{}", both(&out));

    // Step 3: the review.
    let out = dir.run(&[
        "diff",
        "git:HEAD:cassettes",
        "cassettes",
        "--summary",
        "--markdown",
        "review.md",
    ]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains("5 cassettes, B cassettes: 8 cassettes; 2 shared, 3 re-recorded pairs (3 of the replaced still in B)"),
        "{}",
        both(&out)
    );
    assert!(
        err.contains("cassette gc --unused --usage-log used.log"),
        "{}",
        both(&out)
    );
    let report = common::stdout(&out);
    assert!(
        report.contains("0 removed, 0 added"),
        "nothing is alone: {}",
        both(&out)
    );
    assert!(
        report.contains("re-recorded under a new key: 3"),
        "{}",
        both(&out)
    );
    let markdown = std::fs::read_to_string(dir.join("review.md")).unwrap();
    assert!(
        markdown.contains("3 re-recorded under a new key"),
        "{markdown}"
    );
    assert!(
        markdown.contains("3 of the recordings they replace are still in B"),
        "{markdown}"
    );
    let rows: Vec<&str> = markdown.lines().filter(|l| l.contains("` → `")).collect();
    assert_eq!(rows.len(), 3, "{markdown}");
    for (old, new) in [
        (
            "The capital of France is Paris. |",
            "The capital of France is Paris. Indeed. |",
        ),
        (
            "You said: Say hello to the team. |",
            "You said: Say hello to the team. Indeed. |",
        ),
    ] {
        assert!(
            rows.iter().any(|r| r.contains(old) && r.contains(new)),
            "old and new answers side by side: {old} / {new}\n{markdown}"
        );
    }
    assert!(
        rows.iter()
            .all(|r| r.contains("the old recording is still in B") && !r.contains("| — |")),
        "{markdown}"
    );

    // What the review says to do with the stale ones: replay everything with a usage log, then
    // collect the unused.
    let out = dir.run(&["run", "stale.jsonl", "--usage-log", "used.log"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = dir.run(&["gc", "--unused", "--usage-log", "used.log"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = dir.run(&["diff", "git:HEAD:cassettes", "cassettes", "--summary"]);
    let err = common::stderr(&out);
    assert!(
        err.contains("B cassettes: 5 cassettes; 2 shared, 3 re-recorded pairs; "),
        "{}",
        both(&out)
    );
    assert!(!err.contains("still in B"), "{}", both(&out));
}
