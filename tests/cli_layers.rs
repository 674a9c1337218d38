//! The binary's layers: `main.rs` parses flags, dispatches to `commands::*` and maps results to
//! exit codes; each module of `crates/cli/src/commands/` is one subcommand, built on the
//! libraries and on `crates/cli/src/shared/`, never on another command; `shared/` imports no
//! command; and nothing imports an item of `main.rs` (every `crate::` path goes through a module
//! `main.rs` declares). What two commands both need moves to `shared/`, or into a library crate
//! when it is domain logic with no IO.
//!
//! The check reads every `crate::`, `super::` and `self::` path of the sources (in `use` trees,
//! braces expanded, and inline), resolves it against the file's own module, and names each path
//! that crosses a layer; comments are left out. `a_crossing_import_is_found` runs it on small
//! trees held in memory, so it is known to fail on what it forbids.

use regex::Regex;
use std::path::Path;

/// The sources of the binary.
const SOURCES: &str = "crates/cli/src";

/// One source file: its path under `SOURCES` (`commands/run/mod.rs`) and its text.
struct Source {
    path: String,
    text: String,
}

/// The module a file under `SOURCES` is: `commands/run/mod.rs` is `commands::run`, `main.rs` the
/// crate root.
fn module_of(path: &str) -> Vec<String> {
    let path = path.strip_suffix(".rs").unwrap_or(path);
    let mut parts: Vec<String> = path.split('/').map(str::to_owned).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "main")) {
        parts.pop();
    }
    parts
}

/// A line without its comment (doc links name no dependency).
fn code_of(line: &str) -> &str {
    line.split("//").next().unwrap_or_default()
}

/// Every path a `use` tree names (`a::{b, c::{self, D as E}}` is `a::b`, `a::c`, `a::c::D`);
/// globs name their module.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    // One space between words (`D as E`), none around punctuation.
    let words = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let tight = Regex::new(r" ?([{},:]) ?").expect("valid regex");
    let tree = tight.replace_all(&words, "$1");
    let mut out = Vec::new();
    expand_into(&tree, &[], &mut out);
    out
}

fn expand_into(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    for part in split_top_level(tree) {
        if let Some(open) = part.find('{') {
            let head = part[..open].trim_end_matches("::");
            let inner = &part[open + 1..part.len().saturating_sub(1)];
            let mut next = prefix.to_vec();
            next.extend(
                head.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            );
            expand_into(inner, &next, out);
            continue;
        }
        let part = part.split(" as ").next().unwrap_or(part);
        let mut path = prefix.to_vec();
        for segment in part.split("::") {
            match segment {
                "" | "*" => {}
                "self" if !path.is_empty() => {}
                other => path.push(other.to_owned()),
            }
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
}

/// The comma-separated parts of a `use` group, braces kept whole.
fn split_top_level(tree: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tree[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// `path` made absolute from inside `module`; `None` when it does not start at `crate`,
/// `super` or `self` (another crate, or a name in scope).
fn resolve(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = match path.first()?.as_str() {
        "crate" => Vec::new(),
        "self" | "super" => module.to_vec(),
        _ => return None,
    };
    let mut rest = &path[1..];
    if path[0] == "super" {
        base.pop()?;
        while rest.first().is_some_and(|s| s == "super") {
            base.pop()?;
            rest = &rest[1..];
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The `crate::`, `super::` and `self::` paths of one module's code, with their line numbers.
fn paths_of(code: &str, first_line: usize) -> Vec<(usize, Vec<String>)> {
    let uses = Regex::new(r"\buse\s+([^;]+);").expect("valid regex");
    let inline =
        Regex::new(r"\b(crate|super|self)(::[A-Za-z_][A-Za-z0-9_]*)+").expect("valid regex");
    let line_at = |offset: usize| first_line + code[..offset].matches('\n').count();
    let mut found = Vec::new();
    for m in uses.captures_iter(code) {
        let whole = m.get(0).expect("a match");
        for path in expand_use(&m[1]) {
            found.push((line_at(whole.start()), path));
        }
    }
    for m in inline.find_iter(code) {
        let path = m.as_str().split("::").map(str::to_owned).collect();
        found.push((line_at(m.start()), path));
    }
    found
}

/// Each import that crosses a layer, as `file:line: what`.
fn crossings(sources: &[Source]) -> Vec<String> {
    let main = sources
        .iter()
        .find(|s| s.path == "main.rs")
        .expect("main.rs among the sources");
    let declared = Regex::new(r"(?m)^\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;")
        .expect("valid regex");
    let root_modules: Vec<String> = declared
        .captures_iter(&main.text)
        .map(|c| c[1].to_owned())
        .collect();
    let mut found = Vec::new();
    for source in sources.iter().filter(|s| s.path != "main.rs") {
        let module = module_of(&source.path);
        let code: String = source
            .text
            .lines()
            .map(code_of)
            .collect::<Vec<_>>()
            .join("\n");
        // A file's unit tests are one `mod tests` at its end: their `super` is the file.
        let (body, tests) = match code.find("#[cfg(test)]\nmod tests {") {
            Some(at) => (&code[..at], Some(&code[at..])),
            None => (code.as_str(), None),
        };
        let mut paths = paths_of(body, 1);
        if let Some(tests) = tests {
            let mut inner = module.clone();
            inner.push("tests".to_owned());
            let first = 1 + body.matches('\n').count();
            for (line, path) in paths_of(tests, first) {
                // Re-rooted so that `resolve` sees the test module's own `super`.
                if let Some(absolute) = resolve(&inner, &path) {
                    paths.push((line, [vec!["crate".to_owned()], absolute].concat()));
                }
            }
        }
        for (line, path) in paths {
            let Some(absolute) = resolve(&module, &path) else {
                continue;
            };
            if let Some(why) = crossing(&module, &absolute, &root_modules) {
                found.push(format!(
                    "crates/cli/src/{}:{line}: `{}` {why}",
                    source.path,
                    path.join("::")
                ));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Why an import of `target` from inside `module` crosses a layer, if it does.
fn crossing(module: &[String], target: &[String], root_modules: &[String]) -> Option<String> {
    let first = target.first()?;
    if !root_modules.contains(first) {
        return Some(format!(
            "names `{first}` at the crate root: an item of main.rs (move it to shared/)"
        ));
    }
    let is_command = |m: &[String]| m.first().is_some_and(|f| f == "commands");
    match module.first().map(String::as_str) {
        Some("commands") if module.len() >= 2 && is_command(target) => {
            let own = &module[1];
            match target.get(1) {
                Some(other) if other == own => None,
                Some(other) => Some(format!(
                    "imports the command `{other}` from the command `{own}` (move what both need to shared/)"
                )),
                None => Some(format!("imports `commands` from the command `{own}`")),
            }
        }
        Some("shared") if is_command(target) => {
            Some("imports a command from shared/ (shared/ builds on no command)".to_owned())
        }
        _ => None,
    }
}

fn read_sources(dir: &Path, root: &Path, out: &mut Vec<Source>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            read_sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let rel = path.strip_prefix(root).expect("under the sources");
            let rel = rel.to_string_lossy().replace('\\', "/");
            out.push(Source { path: rel, text });
        }
    }
}

#[test]
fn no_command_imports_another_and_nothing_imports_main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(SOURCES);
    let mut sources = Vec::new();
    read_sources(&root, &root, &mut sources);
    let commands = sources
        .iter()
        .filter(|s| s.path.starts_with("commands/"))
        .count();
    let shared = sources
        .iter()
        .filter(|s| s.path.starts_with("shared/"))
        .count();
    assert!(
        commands > 15 && shared > 15,
        "found only {commands} command and {shared} shared files"
    );
    let found = crossings(&sources);
    assert!(
        found.is_empty(),
        "the CLI's layers are crossed (ARCHITECTURE.md, \"Where things are\"):\n{}",
        found.join("\n")
    );
}

fn tree(files: &[(&str, &str)]) -> Vec<Source> {
    files
        .iter()
        .map(|(path, text)| Source {
            path: (*path).to_owned(),
            text: (*text).to_owned(),
        })
        .collect()
}

const MAIN: &str = "mod commands;\nmod shared;\nuse shared::runtime::EXIT;\n\
                    pub(crate) const LIMIT: u8 = 2;\nfn main() {}\n";

#[test]
fn a_layered_tree_passes() {
    let sources = tree(&[
        ("main.rs", MAIN),
        (
            "commands/mod.rs",
            "pub(crate) mod grade;\npub(crate) mod run;\n",
        ),
        (
            "commands/grade.rs",
            "//! Uses [`crate::commands::run`] in a comment only.\n\
             use crate::shared::{call::{self, Stop}, runtime::EXIT as E};\n\
             fn f() { crate::shared::runtime::flush(); }\n\
             #[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::grade::f;\n}\n",
        ),
        ("commands/run/mod.rs", "mod case;\nuse self::case::Done;\n"),
        (
            "commands/run/case.rs",
            "use super::Done;\nuse super::super::run::x;\nuse crate::shared::call::Stop;\n",
        ),
        (
            "shared/mod.rs",
            "pub(crate) mod call;\npub(crate) mod runtime;\n",
        ),
        ("shared/call.rs", "use super::runtime::EXIT;\n"),
        ("shared/runtime.rs", "pub(crate) const EXIT: u8 = 2;\n"),
    ]);
    assert_eq!(crossings(&sources), Vec::<String>::new());
}

#[test]
fn a_crossing_import_is_found() {
    let sources = tree(&[
        ("main.rs", MAIN),
        (
            "commands/mod.rs",
            "pub(crate) mod grade;\npub(crate) mod run;\n",
        ),
        (
            "commands/grade.rs",
            "use crate::commands::run::judge::{self, Through};\n\
             use super::{proxy, run};\n\
             fn f() { crate::commands::proxy::summary(); }\n\
             #[cfg(test)]\nmod tests {\n    use super::super::run::x;\n}\n",
        ),
        (
            "commands/run/case.rs",
            "use super::super::proxy::init;\nuse crate::{LIMIT, shared::call};\n",
        ),
        ("shared/call.rs", "use crate::commands::run::Stop;\n"),
        ("shared/runtime.rs", "fn exit() -> u8 { crate::EXIT }\n"),
    ]);
    let found = crossings(&sources);
    let expected = [
        "commands/grade.rs:1: `crate::commands::run::judge` imports the command `run`",
        "commands/grade.rs:1: `crate::commands::run::judge::Through` imports the command `run`",
        "commands/grade.rs:2: `super::proxy` imports the command `proxy`",
        "commands/grade.rs:2: `super::run` imports the command `run`",
        "commands/grade.rs:3: `crate::commands::proxy::summary` imports the command `proxy`",
        "commands/grade.rs:6: `crate::commands::run::x` imports the command `run`",
        "commands/run/case.rs:1: `super::super::proxy::init` imports the command `proxy`",
        "commands/run/case.rs:2: `crate::LIMIT` names `LIMIT` at the crate root",
        "shared/call.rs:1: `crate::commands::run::Stop` imports a command from shared/",
        "shared/runtime.rs:1: `crate::EXIT` names `EXIT` at the crate root",
    ];
    for want in expected {
        assert!(
            found
                .iter()
                .any(|f| f.starts_with(&format!("crates/cli/src/{want}"))),
            "not found: {want}\nfound:\n{}",
            found.join("\n")
        );
    }
    assert_eq!(found.len(), expected.len(), "{}", found.join("\n"));
}
