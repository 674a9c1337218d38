//! One line per difference, for people: keying's own rendering, except that two strings too
//! long to show whole are shown as a word diff of the regions that changed, with a few words
//! of context on each side (`…the quarterly [-revenue-]{+income+} figures…`), so a changed
//! word late in a 3,000-character prompt is visible instead of two identical beginnings.
//!
//! The same line is also given as [`Piece`]s (unchanged, removed and inserted text), for
//! renderers that mark changes their own way (the HTML review) rather than with `[-…-]{+…+}`.
//! A miss lists the first few lines ([`difference_lines`]), a review the same with pieces
//! ([`crate::RequestLine::of_differences`]).

use cassette_keying::{shorten, to_canonical_string, Change, Difference};
use serde_json::Value;
use similar::{Algorithm, ChangeTag, TextDiff};
use std::time::Duration;

/// How many differences a miss or a review lists before counting the rest.
pub const SHOWN_DIFFERENCES: usize = 8;

/// Words of unchanged text shown before and after each changed region.
const CONTEXT_WORDS: usize = 4;

/// Changed regions shown per string; the rest are counted.
const SHOWN_REGIONS: usize = 3;

/// The longest removed or inserted run shown whole; longer ones keep their ends.
const MAX_RUN: usize = 100;

/// How long the word diff may search before settling for a longer (still correct) edit script:
/// a prompt may be a megabyte.
const DIFF_DEADLINE: Duration = Duration::from_millis(200);

/// A part of a difference line: text both sides share (or that only describes), text only the
/// recorded (old) side has, or text only the new side has. Already shortened for display.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Piece {
    /// Shared or descriptive text.
    Text(String),
    /// Only in the recorded value.
    Removed(String),
    /// Only in the new value.
    Inserted(String),
}

/// A difference as one line: `body.temperature: 0 -> 0.7`, or for long strings
/// `body.messages[0].content: …the quarterly [-revenue-]{+income+} figures…`.
pub fn difference_line(difference: &Difference) -> String {
    if let Some((old, new)) = word_diffed(difference) {
        return format!("{}: {}", difference.path, word_diff(old, new));
    }
    difference.to_string()
}

/// The first [`SHOWN_DIFFERENCES`] differences, one [`difference_line`] each, then how many
/// more there are: what a miss's explanation lists.
pub fn difference_lines(differences: &[Difference]) -> Vec<String> {
    let mut shown: Vec<String> = differences
        .iter()
        .take(SHOWN_DIFFERENCES)
        .map(difference_line)
        .collect();
    if differences.len() > SHOWN_DIFFERENCES {
        shown.push(format!(
            "and {} more differences",
            differences.len() - SHOWN_DIFFERENCES
        ));
    }
    shown
}

/// The part after `path: ` of [`difference_line`] as pieces, so that joining them with
/// `[-…-]` around removed and `{+…+}` around inserted text gives that line back for a word
/// diff, and the old and new values of any other difference are marked too
/// (`0 -> 0.7` as removed `0`, text ` -> `, inserted `0.7`).
pub fn difference_pieces(difference: &Difference) -> Vec<Piece> {
    if let Some((old, new)) = word_diffed(difference) {
        return word_pieces(old, new);
    }
    if difference.path == "system_sha256" {
        return vec![Piece::Text("changed".to_owned())];
    }
    match &difference.change {
        Change::Changed { old, new } => vec![
            Piece::Removed(shorten(old)),
            Piece::Text(" -> ".to_owned()),
            Piece::Inserted(shorten(new)),
        ],
        Change::Added { new } => vec![
            Piece::Text("added ".to_owned()),
            Piece::Inserted(shorten(new)),
        ],
        Change::Removed { old } => vec![
            Piece::Text("removed (was ".to_owned()),
            Piece::Removed(shorten(old)),
            Piece::Text(")".to_owned()),
        ],
        // A kind of change keying adds later: its own rendering, unmarked.
        _ => vec![Piece::Text(
            difference
                .to_string()
                .split_once(": ")
                .map_or_else(String::new, |(_, rest)| rest.to_owned()),
        )],
    }
}

/// The two strings of a difference shown as a word diff: changed strings too long for
/// keying's display (the system prompt's hash is never one).
fn word_diffed(difference: &Difference) -> Option<(&str, &str)> {
    match &difference.change {
        Change::Changed {
            old: Value::String(old),
            new: Value::String(new),
        } if difference.path != "system_sha256" && !(fits(old) && fits(new)) => {
            Some((old.as_str(), new.as_str()))
        }
        _ => None,
    }
}

/// Whether keying's display shows this string whole.
fn fits(text: &str) -> bool {
    let value = Value::String(text.to_owned());
    shorten(&value) == to_canonical_string(&value)
}

/// A run of the word diff: unchanged text, or a change (what was removed, what was inserted).
#[derive(Debug)]
enum Run {
    Same(String),
    Changed { removed: String, inserted: String },
}

/// The changed regions of `old` -> `new` with context, on one line.
pub fn word_diff(old: &str, new: &str) -> String {
    let mut out = String::new();
    for piece in word_pieces(old, new) {
        match piece {
            Piece::Text(text) => out.push_str(&text),
            Piece::Removed(text) => out.push_str(&format!("[-{text}-]")),
            Piece::Inserted(text) => out.push_str(&format!("{{+{text}+}}")),
        }
    }
    out
}

/// The word diff as pieces: context, removed and inserted runs, and a count of the changes
/// left out.
fn word_pieces(old: &str, new: &str) -> Vec<Piece> {
    let runs = runs(old, new);
    let changes = runs
        .iter()
        .filter(|r| matches!(r, Run::Changed { .. }))
        .count();
    if changes == 0 {
        return vec![Piece::Text("(no visible difference)".to_owned())];
    }
    let mut out = Vec::new();
    let mut shown = 0;
    for (i, run) in runs.iter().enumerate() {
        match run {
            Run::Changed { removed, inserted } => {
                if shown == SHOWN_REGIONS {
                    break;
                }
                shown += 1;
                if !removed.is_empty() {
                    out.push(Piece::Removed(visible(removed)));
                }
                if !inserted.is_empty() {
                    out.push(Piece::Inserted(visible(inserted)));
                }
            }
            Run::Same(text) => {
                let first = i == 0;
                let last = i + 1 == runs.len() || shown == SHOWN_REGIONS;
                out.push(Piece::Text(context(text, first, last)));
            }
        }
    }
    if changes > SHOWN_REGIONS {
        out.push(Piece::Text(format!(
            " (and {} more changes)",
            changes - SHOWN_REGIONS
        )));
    }
    out
}

/// The word diff as runs of unchanged and changed text. Unchanged whitespace between two
/// changes joins them (`[-big red-]{+small blue+}` rather than `[-big-]{+small+} [-red-]{+blue+}`).
fn runs(old: &str, new: &str) -> Vec<Run> {
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Patience)
        .timeout(DIFF_DEADLINE)
        .diff_words(old, new);
    let mut runs: Vec<Run> = Vec::new();
    for change in diff.iter_all_changes() {
        let value = change.value();
        match (change.tag(), runs.last_mut()) {
            (ChangeTag::Equal, Some(Run::Same(text))) => text.push_str(value),
            (ChangeTag::Equal, _) => runs.push(Run::Same(value.to_owned())),
            (tag, Some(Run::Changed { removed, inserted })) => match tag {
                ChangeTag::Delete => removed.push_str(value),
                _ => inserted.push_str(value),
            },
            (tag, _) => {
                let (removed, inserted) = match tag {
                    ChangeTag::Delete => (value.to_owned(), String::new()),
                    _ => (String::new(), value.to_owned()),
                };
                // Whitespace alone between two changes belongs to both sides of one change.
                let joined = match runs.as_slice() {
                    [.., Run::Changed { .. }, Run::Same(gap)] if gap.trim().is_empty() => {
                        Some(gap.clone())
                    }
                    _ => None,
                };
                match joined {
                    Some(gap) => {
                        runs.pop();
                        if let Some(Run::Changed {
                            removed: r,
                            inserted: i,
                        }) = runs.last_mut()
                        {
                            r.push_str(&gap);
                            r.push_str(&removed);
                            i.push_str(&gap);
                            i.push_str(&inserted);
                        }
                    }
                    None => runs.push(Run::Changed { removed, inserted }),
                }
            }
        }
    }
    runs
}

/// Unchanged text as context: a few words after the previous change and before the next one,
/// `…` where text is left out.
fn context(text: &str, first: bool, last: bool) -> String {
    let pieces: Vec<&str> = text.split_inclusive(char::is_whitespace).collect();
    let count = pieces.iter().filter(|w| !w.trim().is_empty()).count();
    let head = || visible(head_words(&pieces, CONTEXT_WORDS).trim_end());
    let tail = || visible(tail_words(&pieces, CONTEXT_WORDS).trim_start());
    match (first, last) {
        (true, true) => visible(text),
        // Before the first change: only its last words.
        (true, false) if count > CONTEXT_WORDS => format!("…{}", tail()),
        // After the last change: only its first words.
        (false, true) if count > CONTEXT_WORDS => format!("{}…", head()),
        // Between two changes: whole when short, else both ends.
        (false, false) if count > 2 * CONTEXT_WORDS => format!("{}… …{}", head(), tail()),
        _ => visible(text),
    }
}

/// The pieces up to and including the `n`th word.
fn head_words(pieces: &[&str], n: usize) -> String {
    let mut words = 0;
    let mut out = String::new();
    for piece in pieces {
        out.push_str(piece);
        words += usize::from(!piece.trim().is_empty());
        if words == n {
            break;
        }
    }
    out
}

/// The pieces from the `n`th-last word on.
fn tail_words(pieces: &[&str], n: usize) -> String {
    let mut words = 0;
    let mut start = pieces.len();
    while start > 0 && words < n {
        start -= 1;
        words += usize::from(!pieces[start].trim().is_empty());
    }
    pieces[start..].concat()
}

/// Text on one line: newlines and tabs escaped, whitespace-only runs quoted so they can be
/// seen, and very long runs cut in the middle.
fn visible(text: &str) -> String {
    if !text.is_empty() && text.trim().is_empty() {
        return format!("{text:?}");
    }
    let chars: Vec<char> = text.chars().collect();
    let cut: String = if chars.len() > MAX_RUN {
        let half = MAX_RUN / 2;
        let head: String = chars[..half].iter().collect();
        let tail: String = chars[chars.len() - half..].iter().collect();
        format!("{head}…{tail}")
    } else {
        text.to_owned()
    };
    cut.replace('\n', "\\n")
        .replace('\r', "\\r")
        .replace('\t', "\\t")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn long_prompt(word: &str) -> String {
        let filler =
            "Please read the following report carefully and keep every number exact. ".repeat(45);
        format!("{filler}Then summarise the quarterly {word} figures for the board in three bullet points.")
    }

    #[test]
    fn a_word_changed_late_in_a_long_prompt_is_shown_with_context() {
        let old = long_prompt("revenue");
        let new = long_prompt("income");
        assert!(old.len() > 3000);
        let line = difference_line(&Difference {
            path: "body.messages[0].content".into(),
            change: Change::Changed {
                old: json!(old),
                new: json!(new),
            },
        });
        assert_eq!(
            line,
            "body.messages[0].content: …Then summarise the quarterly [-revenue-]{+income+} figures for the board…"
        );
    }

    #[test]
    fn short_values_keep_keyings_rendering() {
        let line = difference_line(&Difference {
            path: "body.temperature".into(),
            change: Change::Changed {
                old: json!(0),
                new: json!(0.7),
            },
        });
        assert_eq!(line, "body.temperature: 0 -> 0.7");
        let line = difference_line(&Difference {
            path: "body.x".into(),
            change: Change::Changed {
                old: json!("Where is my refund?"),
                new: json!("Where's my refund?"),
            },
        });
        assert_eq!(
            line,
            "body.x: \"Where is my refund?\" -> \"Where's my refund?\""
        );
    }

    #[test]
    fn several_regions_adjacent_words_and_whitespace() {
        let base = "one two three four five six seven eight nine ten eleven twelve thirteen";
        assert_eq!(
            word_diff(base, &base.replace("two", "2").replace("twelve", "12")),
            "one [-two-]{+2+} three four five six… …eight nine ten eleven [-twelve-]{+12+} thirteen"
        );
        assert_eq!(
            word_diff("the big red dog", "the small blue dog"),
            "the [-big red-]{+small blue+} dog"
        );
        assert_eq!(word_diff("a b", "a  b"), "a[-\" \"-]{+\"  \"+}b");
        assert_eq!(word_diff("line\none", "line\ntwo"), "line\\n[-one-]{+two+}");
        assert_eq!(word_diff("x", "x"), "(no visible difference)");
        assert_eq!(word_diff("", "added"), "{+added+}");
    }

    #[test]
    fn pieces_mark_what_the_line_marks() {
        let old = long_prompt("revenue");
        let new = long_prompt("income");
        let long = Difference {
            path: "body.messages[0].content".into(),
            change: Change::Changed {
                old: json!(old),
                new: json!(new),
            },
        };
        let pieces = difference_pieces(&long);
        assert!(
            pieces.contains(&Piece::Removed("revenue".into())),
            "{pieces:?}"
        );
        assert!(
            pieces.contains(&Piece::Inserted("income".into())),
            "{pieces:?}"
        );
        assert_eq!(
            format!("body.messages[0].content: {}", word_diff(&old, &new)),
            difference_line(&long)
        );
        let short = Difference {
            path: "body.temperature".into(),
            change: Change::Changed {
                old: json!(0),
                new: json!(0.7),
            },
        };
        assert_eq!(
            difference_pieces(&short),
            [
                Piece::Removed("0".into()),
                Piece::Text(" -> ".into()),
                Piece::Inserted("0.7".into())
            ]
        );
        let added = Difference {
            path: "body.seed".into(),
            change: Change::Added { new: json!(1) },
        };
        assert_eq!(
            difference_pieces(&added),
            [Piece::Text("added ".into()), Piece::Inserted("1".into())]
        );
    }

    #[test]
    fn a_miss_lists_the_first_differences_and_counts_the_rest() {
        let differences: Vec<Difference> = (0..SHOWN_DIFFERENCES + 3)
            .map(|i| Difference {
                path: format!("body.x{i}"),
                change: Change::Added { new: json!(i) },
            })
            .collect();
        let lines = difference_lines(&differences);
        assert_eq!(lines.len(), SHOWN_DIFFERENCES + 1);
        assert_eq!(lines[0], difference_line(&differences[0]));
        assert_eq!(lines[SHOWN_DIFFERENCES], "and 3 more differences");
        assert_eq!(difference_lines(&differences[..2]).len(), 2);
    }

    #[test]
    fn many_changes_are_counted_and_long_runs_cut() {
        let old: Vec<String> = (0..20)
            .map(|i| format!("w{i} same same same same same"))
            .collect();
        let new: Vec<String> = (0..20)
            .map(|i| format!("v{i} same same same same same"))
            .collect();
        let line = word_diff(&old.join(" "), &new.join(" "));
        assert!(line.ends_with("(and 17 more changes)"), "{line}");
        let line = word_diff(&"a".repeat(1000), &"b".repeat(1000));
        assert!(line.len() < 250, "{line}");
        assert!(line.contains('…'), "{line}");
    }
}
