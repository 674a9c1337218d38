//! `cassette diff A B`: two stores (or folders), for example before and after a re-record: keys
//! only in A, only in B, and for shared keys what drifted that the key cannot see: the answer
//! text (a line diff), the model that answered (an alias moved), the finish reason and the
//! token usage. `--summary` groups a large re-record instead of listing every cassette.

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
#[command(
    after_help = "Exit status: 0 same keys and answers, 1 differences (keys, answer text, \
answering model, finish reason or usage), 2 error.\n\nExample:\n  \
cassette diff file://cassettes file://cassettes.new --summary"
)]
pub(crate) struct DiffArgs {
    /// The first store (URL or folder).
    a: StoreSpec,
    /// The second store (URL or folder).
    b: StoreSpec,

    /// Print counts grouped by what changed (text only, model alias, finish reason, usage)
    /// instead of every cassette.
    #[arg(long)]
    summary: bool,
}

/// How much `cassette diff` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detail {
    /// Every cassette that differs, with its changes.
    Each,
    /// Counts by kind of change.
    Summary,
}

/// What drifted in one shared key.
#[derive(Debug, Default, PartialEq)]
struct Drift {
    /// The requested model, for grouping model changes by alias.
    requested: Option<String>,
    /// The model that answered, before and after.
    model: Option<(String, String)>,
    /// The finish reason, before and after.
    finish: Option<(String, String)>,
    /// The usage, before and after, as JSON.
    usage: Option<(String, String)>,
    /// The answer's text (with tool calls), before and after.
    text: Option<(String, String)>,
}

impl Drift {
    fn is_empty(&self) -> bool {
        self.model.is_none() && self.finish.is_none() && self.usage.is_none() && self.text.is_none()
    }

    /// The group a summary counts it in: a model change first, then a finish reason change,
    /// then the text, then the usage alone.
    fn group(&self) -> String {
        if let Some((_, new)) = &self.model {
            let alias = self.requested.as_deref().unwrap_or("(none requested)");
            return format!("model alias {alias} -> {new}");
        }
        if let Some((old, new)) = &self.finish {
            return format!("finish reason {old} -> {new}");
        }
        if self.text.is_some() {
            return "text only".to_owned();
        }
        "usage only".to_owned()
    }
}

/// Runs `cassette diff`.
pub(crate) fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let detail = if args.summary {
        Detail::Summary
    } else {
        Detail::Each
    };
    let a = args.a.open_for_reading()?;
    let b = args.b.open_for_reading()?;
    let rt = runtime()?;
    let read = |loaded: Vec<super::Loaded>| -> BTreeMap<Key, Result<Cassette, String>> {
        loaded.into_iter().map(|(k, _, c)| (k, c)).collect()
    };
    let left = read(rt.block_on(load_all(&a))?);
    let right = read(rt.block_on(load_all(&b))?);

    let only_a: Vec<&Key> = left.keys().filter(|k| !right.contains_key(*k)).collect();
    let only_b: Vec<&Key> = right.keys().filter(|k| !left.contains_key(*k)).collect();
    if detail == Detail::Each {
        for key in &only_a {
            println!("only in A: {key}{}", describe(&left[*key]));
        }
        for key in &only_b {
            println!("only in B: {key}{}", describe(&right[*key]));
        }
    }
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    let mut changed = 0usize;
    for (key, l) in &left {
        let Some(r) = right.get(key) else { continue };
        let drift = drift(l, r);
        if drift.is_empty() {
            continue;
        }
        changed += 1;
        match detail {
            Detail::Each => print_drift(key, l, &drift),
            Detail::Summary => *groups.entry(drift.group()).or_default() += 1,
        }
    }
    if detail == Detail::Summary {
        let mut groups: Vec<(String, usize)> = groups.into_iter().collect();
        // Largest group first; ties in name order.
        groups.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
        let parts: Vec<String> = groups.iter().map(|(g, n)| format!("{n} {g}")).collect();
        println!(
            "{changed} changed{}{}",
            if parts.is_empty() { "" } else { ": " },
            parts.join(", ")
        );
        println!("{} only in A, {} only in B", only_a.len(), only_b.len());
    }
    let shared = left.keys().filter(|k| right.contains_key(*k)).count();
    eprintln!(
        "A {}: {} cassettes, B {}: {} cassettes; {} only in A, {} only in B, {changed} of {shared} shared cassettes changed",
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

/// What differs between two recordings of one key.
fn drift(l: &Result<Cassette, String>, r: &Result<Cassette, String>) -> Drift {
    let (l, r) = match (l, r) {
        (Ok(l), Ok(r)) => (l, r),
        (l, r) => {
            let text = |c: &Result<Cassette, String>| {
                c.as_ref()
                    .map_or_else(|e| format!("(unreadable: {e})"), answer_text)
            };
            let (a, b) = (text(l), text(r));
            return Drift {
                text: (a != b).then_some((a, b)),
                ..Drift::default()
            };
        }
    };
    let pair = |a: Option<String>, b: Option<String>| {
        let none = || "(none)".to_owned();
        (a != b).then(|| (a.unwrap_or_else(none), b.unwrap_or_else(none)))
    };
    let usage = |c: &Cassette| c.meta.usage.as_ref().map(ToString::to_string);
    let (l_text, r_text) = (answer_text(l), answer_text(r));
    Drift {
        requested: r.requested_model().map(str::to_owned),
        model: pair(l.meta.response_model.clone(), r.meta.response_model.clone()),
        finish: pair(l.meta.finish_reason.clone(), r.meta.finish_reason.clone()),
        usage: pair(usage(l), usage(r)),
        text: (l_text != r_text).then_some((l_text, r_text)),
    }
}

fn print_drift(key: &Key, cassette: &Result<Cassette, String>, drift: &Drift) {
    println!("changed: {key}{}", describe(cassette));
    for (name, change) in [
        ("model", &drift.model),
        ("finish", &drift.finish),
        ("usage", &drift.usage),
    ] {
        if let Some((old, new)) = change {
            println!("    {name}: {old} -> {new}");
        }
    }
    if let Some((old, new)) = &drift.text {
        for line in line_diff(old, new) {
            println!("    {line}");
        }
    }
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
