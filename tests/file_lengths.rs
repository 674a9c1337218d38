//! No product file is over 1,000 lines: a file that grows past it holds more than one concern
//! and is split along its seams (as `proxy/server.rs` and `settings/file.rs` were). Tests,
//! benches and examples are not product files. The Python and JavaScript packages we ship
//! (`python/cassette_cli`, `npm/cassette-cli`) are product files too.

use std::path::{Path, PathBuf};

/// The longest a product source file may be, in lines.
const MAX_LINES: usize = 1_000;

/// Every file under `dir` whose extension is one of `extensions`.
fn source_files(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "node_modules") {
                continue;
            }
            source_files(&path, extensions, out);
        } else if path
            .extension()
            .is_some_and(|e| extensions.iter().any(|x| e == *x))
        {
            out.push(path);
        }
    }
}

#[test]
fn no_product_file_is_over_a_thousand_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let crates = std::fs::read_dir(root.join("crates")).expect("the crates folder");
    for krate in crates.flatten() {
        source_files(&krate.path().join("src"), &["rs"], &mut files);
    }
    assert!(files.len() > 50, "found only {} product files", files.len());
    let before = files.len();
    source_files(&root.join("python/cassette_cli"), &["py"], &mut files);
    source_files(
        &root.join("npm/cassette-cli"),
        &["js", "cjs", "mjs"],
        &mut files,
    );
    assert!(
        files.len() > before + 20,
        "found only {} Python and JavaScript product files",
        files.len() - before
    );
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).ok()?.lines().count();
            let shown = path.strip_prefix(root).unwrap_or(path).display();
            (lines > MAX_LINES).then(|| format!("{shown}: {lines} lines"))
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "product files over {MAX_LINES} lines (split them along their seams, and say so in \
         ARCHITECTURE.md):\n{}",
        long.join("\n")
    );
}
