//! `cassette diff A B`: two sets of cassettes, for example before and after a re-record, each a
//! store, a folder, or a file store as a git revision holds it (`git:HEAD~1:cassettes`).
//!
//! Keys in both are compared answer to answer; a key only A has is paired with the key only B
//! has whose request a replay miss would name as its nearest recording (same route, path and
//! profile, within `--pair-within`), so a prompt edit shows as the old request and answer next
//! to the new ones instead of one cassette removed and one added. Each item gets a drift
//! verdict (`cassette_review::verdict`): same, reworded, changed, added or removed. The text report goes
//! to stdout, `--html` and `--markdown` write review files, and under GitHub Actions a short
//! summary is appended to the step summary.

use crate::shared::cassettes::load_all;
use crate::shared::git::{GitRevision, PREFIX as GIT_PREFIX};
use crate::shared::review::output::{append_step_summary, write_atomic};
use crate::shared::review::redact::output_redactor;
use crate::shared::review::{FailOn, STALE, WHOLE_DIFF};
use crate::shared::runtime::runtime;
use crate::shared::settings::{KeyingArgs, SettingsFile, StoreSpec};
use anyhow::Context;
use cassette_keying::KeyConfig;
use cassette_recorder::miss::replaced;
use cassette_recorder::Cassette;
use cassette_review::redact::reseal;
use cassette_review::verdict::{answer_text, judge};
use cassette_review::{
    html, markdown, DiffReview, Drift, Judged, OldTape, PairedBy, Pairing, Recording, RequestLine,
    Reviewed,
};
use cassette_store::{DynStore, Key};
use cassette_tape::redact::Redactor;
use similar::{Algorithm, ChangeTag, TextDiff};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

/// The distance within which a key only A has is paired with one only B has, when
/// `--pair-within` is not given: a rewritten system prompt (about 2: its text changed, and its
/// hash, which the key holds too) or an edited prompt plus a small change elsewhere.
const DEFAULT_PAIR_WITHIN: f64 = 2.5;

/// Arguments of `cassette diff`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "A and B are stores (URLs or folders) or git:REV:PATH, a file store as a git \
revision of the repository of the current folder holds it (read without checking out).\n\n\
Verdicts: same, reworded (only the answer's text), changed (tool calls or their arguments, the \
JSON shape of a structured answer, the finish reason, the answering model, the status), added, \
removed.\n\
Exit status: without --fail-on, 0 same keys and answers, 1 any difference (keys, answers, \
usage); with --fail-on, 1 when a verdict is at least that severe; 2 error.\n\nExamples:\n  \
cassette diff git:HEAD:cassettes cassettes --summary\n  \
cassette diff file://cassettes file://cassettes.new --html review.html --fail-on changed"
)]
pub(crate) struct DiffArgs {
    /// The old set: a store URL, a folder, or git:REV:PATH.
    a: Source,
    /// The new set: a store URL, a folder, or git:REV:PATH.
    b: Source,

    /// Print counts by verdict and by what changed instead of every cassette.
    #[arg(long)]
    summary: bool,

    /// Exit 1 when a verdict is at least this severe: `reworded` (anything but the same
    /// answer) or `changed` (changed, added or removed; reworded answers pass).
    #[arg(long, value_enum, value_name = "VERDICT")]
    fail_on: Option<FailOn>,

    /// Pair a key only A has with the nearest key only B has when their requests are at most
    /// this far apart (each difference counts 1, a changed string the share of it that
    /// changed; a changed system prompt counts twice, its text and its hash); 0 pairs only
    /// requests keyed alike [default: 2.5].
    #[arg(long, value_name = "DISTANCE", value_parser = parse_within)]
    pair_within: Option<f64>,

    /// Also write a self-contained HTML review (no scripts, nothing loaded from elsewhere).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,

    /// Also write a Markdown summary, for a pull request comment.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,

    /// How requests were keyed, for pairing them.
    #[command(flatten)]
    keying: KeyingArgs,
}

/// One side of a diff: a store, or a git revision of a file store.
#[derive(Debug, Clone)]
enum Source {
    Store(StoreSpec),
    Git(GitRevision),
}

impl FromStr for Source {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.trim_start().starts_with(GIT_PREFIX) {
            return text.parse().map(Source::Git);
        }
        text.parse()
            .map(Source::Store)
            .map_err(|e: cassette_store::Error| e.to_string())
    }
}

fn parse_within(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(d) if d.is_finite() && d >= 0.0 => Ok(d),
        _ => Err(format!("{text:?} is not a distance (a number, 0 or more)")),
    }
}

/// How much `cassette diff` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detail {
    /// Every cassette that differs, with its changes.
    Each,
    /// Counts by verdict and by kind of change.
    Summary,
}

/// Runs `cassette diff`.
pub(crate) fn run(args: DiffArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let detail = if args.summary {
        Detail::Summary
    } else {
        Detail::Each
    };
    let redactor = output_redactor(file)?;
    let config = args.keying.config(file)?;
    let within = args.pair_within.unwrap_or(DEFAULT_PAIR_WITHIN);
    let rt = runtime()?;
    let (a_name, a) = open(&args.a, &rt)?;
    let (b_name, b) = open(&args.b, &rt)?;
    let left = read(rt.block_on(load_all(&a))?, &redactor);
    let right = read(rt.block_on(load_all(&b))?, &redactor);
    let review = rt.block_on(review(a_name, b_name, &left, &right, &config, within));

    match detail {
        Detail::Each => print_each(&review),
        Detail::Summary => print_summary(&review),
    }
    let replaced = review.replaced().len();
    let still = match replaced {
        0 => String::new(),
        n => format!(" ({n} of the replaced still in B)"),
    };
    eprintln!(
        "A {}: {} cassettes, B {}: {} cassettes; {} shared, {} re-recorded pairs{still}; {}",
        review.a,
        left.len(),
        review.b,
        right.len(),
        review.shared(),
        review.pairs(),
        review.counts_line()
    );
    if replaced > 0 {
        eprintln!(
            "cassette diff: {replaced} replaced cassettes are still in B, stale unless something \
             else replays them; delete them with {STALE}"
        );
    }
    if let Some(path) = &args.html {
        write_atomic(path, html::diff_page(&review).as_bytes())
            .with_context(|| format!("writing the HTML review {}", path.display()))?;
        eprintln!("cassette diff: wrote {}", path.display());
    }
    let summary = markdown::diff_summary(&review, WHOLE_DIFF, STALE);
    if let Some(path) = &args.markdown {
        write_atomic(path, summary.as_bytes())
            .with_context(|| format!("writing the Markdown summary {}", path.display()))?;
    }
    append_step_summary("diff", &summary);
    let failed = match args.fail_on {
        Some(level) => review.items.iter().any(|i| level.fails(i.drift())),
        None => review.items.iter().any(Reviewed::differs),
    };
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Opens one side, named as the user named it.
fn open(source: &Source, rt: &tokio::runtime::Runtime) -> anyhow::Result<(String, DynStore)> {
    match source {
        Source::Store(spec) => Ok((spec.to_string(), spec.open_for_reading()?)),
        Source::Git(rev) => {
            let loaded = rev.load(rt)?;
            if loaded.skipped > 0 {
                eprintln!(
                    "cassette diff: {rev}: {} files that are not cassettes skipped",
                    loaded.skipped
                );
            }
            Ok((format!("{rev} (commit {})", loaded.commit), loaded.store))
        }
    }
}

/// The cassettes of one side by key, each redacted again as it would be stored today.
fn read(
    loaded: Vec<crate::shared::cassettes::Loaded>,
    redactor: &Redactor,
) -> BTreeMap<Key, Result<Cassette, String>> {
    loaded
        .into_iter()
        .map(|(key, _, cassette)| {
            let cassette = cassette
                .map(|c| reseal(c, redactor))
                .map_err(|why| redactor.text(&why));
            (key, cassette)
        })
        .collect()
}

/// Compares the two sides: re-records paired with what they replace (whether or not B still
/// holds it), the other shared keys, and keys only one side has.
async fn review(
    a: String,
    b: String,
    left: &BTreeMap<Key, Result<Cassette, String>>,
    right: &BTreeMap<Key, Result<Cassette, String>>,
    config: &KeyConfig,
    within: f64,
) -> DiffReview {
    let readable = |side: &BTreeMap<Key, Result<Cassette, String>>| {
        side.values()
            .filter_map(|c| c.as_ref().ok().cloned())
            .collect::<Vec<Cassette>>()
    };
    let only_b: Vec<Cassette> = readable(right)
        .into_iter()
        .filter(|c| !left.contains_key(&c.key))
        .collect();
    // Every old recording is a candidate: a re-record writes its new key beside the old one,
    // which stays in B until it is deleted.
    let old = match only_b.is_empty() {
        true => Vec::new(),
        false => readable(left),
    };
    let kept: HashSet<Key> = left
        .keys()
        .filter(|k| right.contains_key(*k))
        .cloned()
        .collect();
    let replacements = replaced(&old, &kept, &only_b, config, within).await;
    let mut paired_a = HashSet::new();
    let mut paired_b = HashSet::new();
    let mut items = Vec::new();
    for r in &replacements {
        let p = &r.paired;
        paired_a.insert(p.old.clone());
        paired_b.insert(p.new.clone());
        let lines = RequestLine::of_differences(&p.differences);
        let old = match kept.contains(&p.old) {
            true => OldTape::StillInB,
            false => OldTape::Gone,
        };
        items.push(compared(
            &p.old,
            &left[&p.old],
            &p.new,
            &right[&p.new],
            Pairing::Rerecorded {
                distance: p.distance,
                by: r.by,
                old,
            },
            lines,
        ));
    }
    for (key, old) in left {
        if paired_a.contains(key) {
            continue;
        }
        match right.get(key) {
            Some(new) => items.push(compared(key, old, key, new, Pairing::SameKey, Vec::new())),
            None => items.push(alone(
                Drift::Removed,
                Some(Recording::of(key, old, crate::shared::review::facts)),
                None,
            )),
        }
    }
    for (key, new) in right {
        if !left.contains_key(key) && !paired_b.contains(key) {
            items.push(alone(
                Drift::Added,
                None,
                Some(Recording::of(key, new, crate::shared::review::facts)),
            ));
        }
    }
    DiffReview::new(a, b, (left.len(), right.len()), items)
}

fn compared(
    old_key: &Key,
    old: &Result<Cassette, String>,
    new_key: &Key,
    new: &Result<Cassette, String>,
    pairing: Pairing,
    request: Vec<RequestLine>,
) -> Reviewed {
    let (old, new) = (
        Recording::of(old_key, old, crate::shared::review::facts),
        Recording::of(new_key, new, crate::shared::review::facts),
    );
    let judged = judge(
        old.facts.as_ref().map_err(String::as_str),
        new.facts.as_ref().map_err(String::as_str),
    );
    Reviewed {
        judged,
        pairing,
        old: Some(old),
        new: Some(new),
        request,
    }
}

fn alone(drift: Drift, old: Option<Recording>, new: Option<Recording>) -> Reviewed {
    Reviewed {
        judged: Judged {
            drift,
            reasons: vec![match drift {
                Drift::Removed => "only in A".to_owned(),
                _ => "only in B".to_owned(),
            }],
            notes: Vec::new(),
        },
        pairing: Pairing::Alone,
        old,
        new,
        request: Vec::new(),
    }
}

/// Every item that differs, most severe first: a heading line, then what changed.
fn print_each(review: &DiffReview) {
    for item in review.items.iter().filter(|i| i.differs()) {
        println!("{}", heading(item));
        for line in &item.request {
            println!("    request: {}", line.text);
        }
        if let (Some(old), Some(new)) = (&item.old, &item.new) {
            if let (Ok(a), Ok(b)) = (&old.facts, &new.facts) {
                let json = |v: &Option<serde_json::Value>| {
                    v.as_ref()
                        .map_or_else(|| "(none)".to_owned(), ToString::to_string)
                };
                let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".to_owned());
                for (name, x, y) in [
                    ("status", a.status.to_string(), b.status.to_string()),
                    ("model", shown(&a.model), shown(&b.model)),
                    ("finish", shown(&a.finish), shown(&b.finish)),
                    ("usage", json(&a.usage), json(&b.usage)),
                ] {
                    if x != y {
                        println!("    {name}: {x} -> {y}");
                    }
                }
                for line in line_diff(&answer_text(a), &answer_text(b)) {
                    println!("    {line}");
                }
            } else {
                for reason in &item.judged.reasons {
                    println!("    {reason}");
                }
            }
        }
    }
}

/// `changed: KEY (POST /v1/chat/completions, m): finish reason stop -> length`, with the key
/// it was re-recorded as for a pair (and whether B still holds the old one), and `only in A`
/// or `only in B` for a key alone.
fn heading(item: &Reviewed) -> String {
    let verdict = item.drift().as_str();
    let what = match &item.pairing {
        Pairing::SameKey | Pairing::Alone => String::new(),
        Pairing::Rerecorded { distance, by, old } => format!(
            " re-recorded as {} ({}request distance {distance:.2}){}",
            item.new.as_ref().map_or("", |r| r.key.as_str()),
            match by {
                PairedBy::SameTest => "same test, ",
                PairedBy::Nearest => "",
            },
            match old {
                OldTape::StillInB => ", old cassette still in B",
                OldTape::Gone => "",
            }
        ),
    };
    let side = match item.pairing {
        Pairing::Rerecorded { .. } => item.old.as_ref(),
        _ => item.new.as_ref().or(item.old.as_ref()),
    };
    let (key, described) = side.map_or((String::new(), String::new()), |r| {
        (r.key.to_string(), r.describe())
    });
    let reasons = item.judged.reasons.join(", ");
    let reasons = match (reasons.is_empty(), item.judged.notes.is_empty()) {
        (true, true) => String::new(),
        (true, false) => format!(": {} only", item.judged.notes.join(", ")),
        (false, _) => format!(": {reasons}"),
    };
    format!("{verdict}: {key} ({described}){what}{reasons}")
}

/// Counts by verdict, then by what changed within each verdict, largest group first.
fn print_summary(review: &DiffReview) {
    println!("{}", review.counts_line());
    for drift in Drift::BY_SEVERITY {
        let mut groups: BTreeMap<String, usize> = BTreeMap::new();
        for item in review.items.iter().filter(|i| i.drift() == drift) {
            if let Some(group) = group(item) {
                *groups.entry(group).or_default() += 1;
            }
        }
        if groups.is_empty() {
            continue;
        }
        let mut groups: Vec<(String, usize)> = groups.into_iter().collect();
        groups.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
        let parts: Vec<String> = groups.iter().map(|(g, n)| format!("{n} {g}")).collect();
        println!("  {}: {}", drift.as_str(), parts.join(", "));
    }
    if review.pairs() > 0 {
        println!("  re-recorded under a new key: {}", review.pairs());
    }
    let replaced = review.replaced();
    if !replaced.is_empty() {
        println!(
            "  replaced, still in B: {}",
            replaced
                .iter()
                .map(|k| k.short())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

/// The group a summary counts an item in: its first reason (a model change by the alias the
/// request asked for), `usage` for a same answer whose usage changed, none otherwise.
fn group(item: &Reviewed) -> Option<String> {
    let first = match item.judged.reasons.first() {
        Some(first) => first.clone(),
        None if !item.judged.notes.is_empty() => return Some("usage only".to_owned()),
        None => return None,
    };
    if let Some(change) = first.strip_prefix("model ") {
        let alias = item
            .new
            .as_ref()
            .and_then(|r| r.requested_model.clone())
            .unwrap_or_else(|| "(none requested)".to_owned());
        let new = change.rsplit(" -> ").next().unwrap_or(change);
        return Some(format!("model alias {alias} -> {new}"));
    }
    Some(match first.as_str() {
        "text" => "text only".to_owned(),
        _ => first,
    })
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

    #[test]
    fn sources_are_stores_or_git_revisions() {
        assert!(matches!("git:HEAD~1:cassettes".parse(), Ok(Source::Git(_))));
        assert!(matches!("file:///tmp/c".parse(), Ok(Source::Store(_))));
        assert!(matches!("cassettes".parse(), Ok(Source::Store(_))));
        assert!("git:HEAD".parse::<Source>().is_err());
        assert!(parse_within("-1").is_err() && parse_within("NaN").is_err());
        assert_eq!(parse_within("0.5"), Ok(0.5));
    }
}
