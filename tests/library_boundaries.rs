//! The libraries know nothing of the command line: their messages and docs say what to change
//! in their own terms, and only the CLI names its flags and environment variables. The pure
//! crates (keying, wire, tape, grade, review) depend on no IO crate.

use regex::Regex;
use std::path::{Path, PathBuf};

/// The library source directories this invariant covers.
const LIBRARIES: &[&str] = &[
    "crates/keying/src",
    "crates/wire/src",
    "crates/tape/src",
    "crates/review/src",
    "crates/vcr/src",
    "crates/store/src",
    "crates/recorder/src",
    "crates/grade/src",
];

/// The pure crates: no IO, no async runtime. `scripts/test.sh` also checks their whole
/// dependency trees with `cargo tree`.
const PURE: &[&str] = &[
    "crates/keying",
    "crates/wire",
    "crates/tape",
    "crates/vcr",
    "crates/grade",
    "crates/review",
];

/// Crates that do IO or run async code; none may be a dependency of a pure crate.
const IO_CRATES: &[&str] = &[
    "tokio",
    "reqwest",
    "axum",
    "hyper",
    "hyper-util",
    "futures",
    "object_store",
    "sled",
    "cassette-store",
    "cassette-recorder",
    "tracing",
    "chrono",
];

/// A long flag (`--max-body`) or one of the CLI's variables (`CASSETTE_MODE`, `UPSTREAM_BASE`).
fn cli_knowledge() -> Regex {
    Regex::new(r"(^|[^\w-])--[a-z][a-z0-9-]*|\b(CASSETTE|UPSTREAM)_[A-Z]").expect("valid regex")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of a source file before its unit tests. Tests sit in one `#[cfg(test)]` module at
/// the end of a file; anything else would let test-only text hide library text, so it fails.
fn library_text(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if is_out_of_line_tests(path) {
        return String::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    let test_attr = lines
        .iter()
        .position(|l| l.starts_with("#[cfg(") && l.contains("test"));
    match test_attr {
        None => text,
        Some(i) => {
            let next = lines.get(i + 1).copied().unwrap_or_default();
            let inline = next.starts_with("mod tests {") && lines.last() == Some(&"}");
            // `mod tests;` as the last line: the tests live in `<file>/tests.rs`.
            let out_of_line = next == "mod tests;" && i + 2 == lines.len();
            assert!(
                inline || out_of_line,
                "{}:{}: a test-only item that is not the final `mod tests`",
                path.display(),
                i + 1
            );
            lines[..i].join("\n")
        }
    }
}

/// Whether `path` is the unit tests of its parent module split off into `<module>/tests.rs`
/// (declared by a final `#[cfg(test)] mod tests;` in `<module>.rs`): test text throughout.
fn is_out_of_line_tests(path: &Path) -> bool {
    if path.file_name().is_none_or(|n| n != "tests.rs") {
        return false;
    }
    let Some(dir) = path.parent() else {
        return false;
    };
    let parent = dir.with_extension("rs");
    std::fs::read_to_string(parent).is_ok_and(|text| {
        let lines: Vec<&str> = text.lines().collect();
        lines.len() >= 2
            && lines[lines.len() - 1] == "mod tests;"
            && lines[lines.len() - 2] == "#[cfg(test)]"
    })
}

#[test]
fn libraries_name_no_cli_flag_or_environment_variable() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cli_knowledge = cli_knowledge();
    let mut files = Vec::new();
    for dir in LIBRARIES {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 20, "found only {} library files", files.len());
    let mut found = Vec::new();
    for file in &files {
        for (n, line) in library_text(file).lines().enumerate() {
            if let Some(m) = cli_knowledge.find(line) {
                found.push(format!(
                    "{}:{}: `{}` in {}",
                    file.strip_prefix(root).unwrap_or(file).display(),
                    n + 1,
                    m.as_str().trim(),
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "library code names CLI flags or variables; say what to change in the library's terms \
         and let crates/cli/src/shared/advice.rs add the flag:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_catches_what_it_looks_for() {
    let cli_knowledge = cli_knowledge();
    for leak in [
        "raise --max-body if this is intended",
        "set UPSTREAM_BASE",
        "(CASSETTE_MODE=record)",
        "--route x=URL",
    ] {
        assert!(cli_knowledge.is_match(leak), "{leak}");
    }
    for fine in [
        "-----BEGIN RSA PRIVATE KEY-----",
        "AWS_ENDPOINT_URL",
        "a--b",
        "a comment -- with dashes",
    ] {
        assert!(!cli_knowledge.is_match(fine), "{fine}");
    }
}

#[test]
fn pure_crates_depend_on_no_io_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for krate in PURE {
        let manifest = root.join(krate).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest)
            .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
        let manifest: toml::Table = text
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
        let dependencies = manifest
            .get("dependencies")
            .and_then(toml::Value::as_table)
            .cloned()
            .unwrap_or_default();
        for name in dependencies.keys() {
            assert!(
                !IO_CRATES.contains(&name.as_str()),
                "{krate} is pure, but depends on `{name}`"
            );
        }
        assert!(!dependencies.is_empty(), "{krate}: no dependencies read");
    }
}
