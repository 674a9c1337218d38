//! A `sled://` store on a full disk (issue 25 item 16): sled 0.34 cannot open a database
//! without writing, so reading commands and replay read a snapshot copy instead of failing,
//! the database itself is left byte for byte as it was, and writing commands still fail with
//! the disk's own error. The full disk is a 4 MiB tmpfs, mounted for the test (it needs root,
//! which CI has; elsewhere the test says why it cannot run, and fails under CI).

mod common;

use common::cli_env::{both, code, json_lines, Workdir};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted for the test; unmounted when dropped.
struct Tmpfs {
    at: PathBuf,
}

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs { at: at.to_owned() })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.at).status();
    }
}

/// Every file under `dir` with its length and a hash of its bytes, sorted by path.
fn contents(dir: &Path) -> Vec<(PathBuf, usize, u64)> {
    use std::hash::{Hash, Hasher};
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                bytes.hash(&mut hasher);
                out.push((path.clone(), bytes.len(), hasher.finish()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_sled_store_on_a_full_disk_stays_readable() {
    let dir = Workdir::new();
    let Some(disk) = Tmpfs::mount(&dir.join("disk"), "4m") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "cannot mount a tmpfs: this test needs root (CI runs as root)"
        );
        eprintln!("skipped: cannot mount a tmpfs here (not root)");
        return;
    };
    let db = disk.at.join("tapes");
    let store = format!("sled://{}", db.display());
    let suite = common::workspace_root().join("examples/suite");
    let cassettes = format!("file://{}", suite.join("cassettes").display());
    let out = dir.run(&["copy", &cassettes, &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    // Fill the disk.
    let mut filler = std::fs::File::create(disk.at.join("filler")).unwrap();
    let block = vec![0u8; 64 << 10];
    while std::io::Write::write_all(&mut filler, &block).is_ok() {}
    drop(filler);
    let before = contents(&db);

    let out = dir.run(&["ls", "--json", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let listed = json_lines(&out);
    assert_eq!(listed.len(), 12, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("reading a snapshot copy"),
        "{}",
        both(&out)
    );
    let key = listed[0]["key"].as_str().unwrap().to_owned();
    let out = dir.run(&["show", &key[..12], "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    // Replay reads it too.
    let out = dir.run(&[
        "run",
        &suite.join("suite.jsonl").display().to_string(),
        "--store",
        &store,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        json_lines(&out).iter().all(|l| l["hit"] == true),
        "{}",
        both(&out)
    );
    // And it can be copied off the full disk.
    let out = dir.run(&["copy", &store, &dir.store("rescued")]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(common::stderr(&out).contains("copied 12"), "{}", both(&out));

    assert_eq!(contents(&db), before, "the database was written");

    // A command that writes is not handed a copy: it fails with the disk's error.
    dir.write("used.log", &format!("{key}\n"));
    let out = dir.run(&[
        "gc",
        "--unused",
        "--usage-log",
        "used.log",
        "--store",
        &store,
    ]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("No space left"),
        "{}",
        both(&out)
    );
    // What sled wrote before it failed leaves the database readable.
    let out = dir.run(&["ls", "--json", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(json_lines(&out).len(), 12, "{}", both(&out));

    let leftovers: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("cassette-sled-snapshot-")
        })
        .collect();
    assert!(
        leftovers.is_empty(),
        "snapshot copies left behind: {leftovers:?}"
    );
}
