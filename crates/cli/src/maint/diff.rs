//! `cassette diff A B`: two stores (or folders), for example before and after a re-record: keys
//! only in A, only in B, and for shared keys whose answer text changed, a line diff.

use super::{cassette_answer, load_all, runtime};
use crate::settings::StoreSpec;
use cassette_recorder::Cassette;
use cassette_store::Key;
use similar::{Algorithm, ChangeTag, TextDiff};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `cassette diff`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit status: 0 same keys and answers, 1 differences, 2 error.")]
pub(crate) struct DiffArgs {
    /// The first store (URL or folder).
    a: StoreSpec,
    /// The second store (URL or folder).
    b: StoreSpec,
}

/// Runs `cassette diff`.
pub(crate) fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let a = args.a.open_existing()?;
    let b = args.b.open_existing()?;
    let rt = runtime()?;
    let read = |loaded: Vec<super::Loaded>| -> BTreeMap<Key, Result<Cassette, String>> {
        loaded.into_iter().map(|(k, _, c)| (k, c)).collect()
    };
    let left = read(rt.block_on(load_all(&a))?);
    let right = read(rt.block_on(load_all(&b))?);

    let only_a: Vec<&Key> = left.keys().filter(|k| !right.contains_key(*k)).collect();
    let only_b: Vec<&Key> = right.keys().filter(|k| !left.contains_key(*k)).collect();
    for key in &only_a {
        println!("only in A: {key}{}", describe(&left[*key]));
    }
    for key in &only_b {
        println!("only in B: {key}{}", describe(&right[*key]));
    }
    let mut changed = 0usize;
    for (key, l) in &left {
        let Some(r) = right.get(key) else { continue };
        let (l_text, r_text) = match (l, r) {
            (Ok(l), Ok(r)) => (answer_text(l), answer_text(r)),
            (l, r) => (
                l.as_ref()
                    .map_or_else(|e| format!("(unreadable: {e})"), answer_text),
                r.as_ref()
                    .map_or_else(|e| format!("(unreadable: {e})"), answer_text),
            ),
        };
        if l_text != r_text {
            changed += 1;
            println!("changed: {key}{}", describe(l));
            for line in line_diff(&l_text, &r_text) {
                println!("    {line}");
            }
        }
    }
    let shared = left.keys().filter(|k| right.contains_key(*k)).count();
    eprintln!(
        "A {}: {} cassettes, B {}: {} cassettes; {} only in A, {} only in B, {changed} of {shared} shared answers changed",
        a.location(),
        left.len(),
        b.location(),
        right.len(),
        only_a.len(),
        only_b.len()
    );
    Ok(if only_a.is_empty() && only_b.is_empty() && changed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn describe(cassette: &Result<Cassette, String>) -> String {
    match cassette {
        Ok(c) => format!(
            " ({} {}{})",
            c.request.method,
            c.request.path,
            c.requested_model()
                .map(|m| format!(", {m}"))
                .unwrap_or_default()
        ),
        Err(_) => " (unreadable)".to_owned(),
    }
}

/// The answer as text, tool calls included, so a changed tool call shows up as a change.
fn answer_text(cassette: &Cassette) -> String {
    let answer = cassette_answer(cassette);
    let mut text = answer.text;
    for call in answer.tool_calls {
        text.push_str(&format!("\n[tool call] {}({})", call.name, call.arguments));
    }
    text
}

/// How long a diff may search for the shortest edit script before it settles for a longer
/// (still correct) one: answers are short, but a store may hold a huge one.
const DIFF_DEADLINE: Duration = Duration::from_millis(500);

/// The lines a line diff of `a` and `b` does not keep: `- ` from A, `+ ` from B, in order.
pub(crate) fn line_diff(a: &str, b: &str) -> Vec<String> {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .timeout(DIFF_DEADLINE)
        .diff_slices(&a, &b)
        .iter_all_changes()
        .filter_map(|change| match change.tag() {
            ChangeTag::Equal => None,
            ChangeTag::Delete => Some(format!("- {}", change.value())),
            ChangeTag::Insert => Some(format!("+ {}", change.value())),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_diff_shows_only_changed_lines() {
        assert_eq!(
            line_diff("a\nb\nc", "a\nB\nc\nd"),
            ["- b", "+ B", "+ d"].map(String::from)
        );
        assert!(line_diff("same", "same").is_empty());
        // A last line without a newline is the same line as one with it.
        assert!(line_diff("a\nb", "a\nb\n").is_empty());
        assert_eq!(line_diff("", "x"), ["+ x"]);
        assert_eq!(line_diff("x\ny", ""), ["- x", "- y"]);
    }
}
