//! `cassette index` beside what is not its own (issue 25 item 18): a garbage file, a symlink
//! and a folder in a store's index folder are named in a warning and kept as they are; only
//! the segments cassette wrote are folded in and deleted, and a symlink is never followed.

mod common;

use common::cli_env::{both, code, Workdir};
use common::fake_llm::FakeLlm;

fn case(id: &str, prompt: &str) -> String {
    format!(
        r#"{{"id":"{id}","prompt":"{prompt}","params":{{"model":"m","temperature":0}},"grader":"contains","expect":{{"needle":"said"}}}}"#
    )
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[cfg(unix)]
#[test]
fn index_keeps_and_names_segments_that_are_not_ours() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    let store = dir.store("tapes");
    for (id, prompt) in [("a", "Repeat a"), ("b", "Repeat b")] {
        dir.write("suite.jsonl", &case(id, prompt));
        let out = dir.run(&[
            "run",
            "suite.jsonl",
            "--mode",
            "record",
            "--store",
            &store,
            "--upstream",
            &fake.url,
        ]);
        assert_eq!(code(&out), 0, "{}", both(&out));
    }
    let index = dir.join("tapes/_index");
    let ours = names(&index);
    assert_eq!(ours.len(), 2, "{ours:?}");
    // Garbage under a segment's name, a symlink to a real segment outside the store (were it
    // followed, it would be folded in and deleted), and a folder.
    std::fs::write(index.join("w-garbage"), b"\x00\xffnot a segment\n").unwrap();
    let outside = dir.join("outside-segment");
    std::fs::copy(index.join(&ours[0]), &outside).unwrap();
    let before = std::fs::read(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, index.join("w-linked")).unwrap();
    std::fs::create_dir(index.join("w-folder")).unwrap();

    let out = dir.run(&["index", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let err = common::stderr(&out);
    assert!(err.contains("indexed 2 cassettes"), "{err}");
    assert!(err.contains("2 segments folded in"), "{err}");
    assert!(err.contains("kept segment w-garbage"), "{err}");
    for kept in ["w-linked", "w-folder"] {
        assert!(
            err.contains(&format!("kept {}", index.join(kept).display())),
            "{kept}: {err}"
        );
    }
    let after = names(&index);
    for kept in ["w-garbage", "w-linked", "w-folder"] {
        assert!(
            after.contains(&kept.to_owned()),
            "{kept} deleted: {after:?}"
        );
    }
    assert!(
        !after.contains(&ours[0]) && !after.contains(&ours[1]),
        "{after:?}"
    );
    assert_eq!(
        after.iter().filter(|n| n.starts_with("base-")).count(),
        1,
        "{after:?}"
    );
    assert!(std::fs::symlink_metadata(index.join("w-linked"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&outside).unwrap(), before);

    // A miss still finds the nearest recording through the index.
    fake.stop();
    dir.write("suite.jsonl", &case("c", "Repeat a, please"));
    let out = dir.run(&["run", "suite.jsonl", "--store", &store]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(common::stderr(&out).contains("nearest"), "{}", both(&out));
}
