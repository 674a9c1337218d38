//! Markdown summaries for pull requests and the GitHub step summary: counts, the misses with
//! their explanation, the answers that changed. Short on purpose (the first `LISTED` items of
//! each kind; the HTML review has everything).
//!
//! Text from cassettes and runs goes through [`text`], which keeps it one inline run of plain
//! text: the punctuation that starts an inline construct is backslash-escaped (`\`, `` ` ``,
//! `*`, `_`, `[`, `]`, `|`, `~`, `!`, `$`: no emphasis, link, image, code span, strike, math or
//! table cell boundary can start), `<`, `>` and `&` become entities (no HTML, no autolink), line
//! breaks become spaces (a table row stays one row; line-start constructs cannot begin), and
//! a zero-width space after `@`, `#`, the `:` of `://` and before the `.` of `www.` keeps
//! GitHub from turning text into mentions, issue references or links.
//!
//! Where a summary tells its reader what to do (record the misses, open the whole review), the
//! embedder names how, in its own terms (a command, a variable): the words come in as
//! arguments, shown as code.

use crate::diff::{DiffReview, OldTape, PairedBy, Pairing, Recording, Reviewed};
use crate::html::RunReview;
use crate::verdict::{gist, Drift};
use std::fmt::Write as _;

/// Items of each kind listed before the rest are only counted.
const LISTED: usize = 20;

/// The longest text put in one table cell.
const CELL: usize = 160;

/// `text` as inline Markdown that shows exactly that text.
pub fn text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' | '\t' => out.push(' '),
            '@' | '#' => {
                out.push('\\');
                out.push(c);
                out.push('\u{200b}');
            }
            ':' if chars.peek() == Some(&'/') => {
                out.push_str("\\:\u{200b}");
            }
            // `www.` starts an autolink on GitHub.
            '.' if out.ends_with("www") || out.ends_with("WWW") => {
                out.push_str("\u{200b}.");
            }
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '!' | '$' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// A table cell: `text`, cut to [`CELL`] characters.
fn cell(value: &str) -> String {
    let cut: String = value.chars().take(CELL).collect();
    let more = if value.chars().count() > CELL {
        "…"
    } else {
        ""
    };
    format!("{}{more}", text(&cut))
}

/// A key as a code span (hex only, so nothing to escape), shortened.
fn key(key: &str) -> String {
    format!("`{}`", key.get(..12).unwrap_or(key))
}

/// The summary of `cassette diff`; `whole` is how to get the whole review (a command line),
/// named when the summary lists only the first items; `stale` is how to delete the replaced
/// recordings the new set still holds, named when there are any.
pub fn diff_summary(review: &DiffReview, whole: &str, stale: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### cassette diff: {} → {}\n",
        text(&review.a),
        text(&review.b)
    );
    let _ = writeln!(out, "| verdict | cassettes |\n|---|---:|");
    for drift in Drift::BY_SEVERITY {
        let _ = writeln!(out, "| {} | {} |", drift.as_str(), review.count(drift));
    }
    let _ = writeln!(
        out,
        "\n{} cassettes in A, {} in B; {} re-recorded under a new key.",
        review.sizes.0,
        review.sizes.1,
        review.pairs()
    );
    let replaced = review.replaced().len();
    if replaced > 0 {
        let _ = writeln!(
            out,
            "\n{replaced} of the recordings they replace are still in B (stale unless something \
             else replays them; delete them with `{stale}`)."
        );
    }
    let differing: Vec<&Reviewed> = review
        .items
        .iter()
        .filter(|i| i.drift() != Drift::Same)
        .collect();
    if differing.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\n| verdict | key | request | what changed | old answer | new answer |\n|---|---|---|---|---|---|"
    );
    for item in differing.iter().take(LISTED) {
        let keys = match (&item.pairing, &item.old, &item.new) {
            (Pairing::Rerecorded { .. }, Some(old), Some(new)) => {
                format!("{} → {}", key(old.key.as_str()), key(new.key.as_str()))
            }
            _ => key(item.key().as_str()),
        };
        let request = item
            .new
            .as_ref()
            .or(item.old.as_ref())
            .map(|r| r.describe())
            .unwrap_or_default();
        let mut what = item.judged.reasons.join(", ");
        if let Pairing::Rerecorded { by, old, .. } = item.pairing {
            if by == PairedBy::SameTest {
                what = format!("{what}; re-recorded by the same test");
            }
            if old == OldTape::StillInB {
                what = format!("{what}; the old recording is still in B");
            }
        }
        if let Some(line) = item.request.first() {
            what = format!("{what}; request: {}", line.text);
        }
        let gist = |r: Option<&Recording>| match r.map(|r| &r.facts) {
            Some(Ok(facts)) => cell(&gist(facts)),
            Some(Err(why)) => cell(&format!("(unreadable: {why})")),
            None => "—".to_owned(),
        };
        let _ = writeln!(
            out,
            "| {} | {keys} | {} | {} | {} | {} |",
            item.drift().as_str(),
            cell(&request),
            cell(&what),
            gist(item.old.as_ref()),
            gist(item.new.as_ref())
        );
    }
    if differing.len() > LISTED {
        let _ = writeln!(
            out,
            "\n… and {} more (see the HTML review: `{whole}`).",
            differing.len() - LISTED
        );
    }
    out
}

/// The summary of `cassette run`; `record` is how to record what missed (a setting, a
/// command line).
pub fn run_summary(review: &RunReview, record: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### cassette run: {}\n", text(&review.suite));
    let _ = writeln!(
        out,
        "{} passed, {} failed, {} missed{} — {}, {:.2}s, {} requests replayed, {} recorded.",
        review.count("pass"),
        review.count("fail"),
        review.count("miss"),
        if review.unrun > 0 {
            format!(", {} not run", review.unrun)
        } else {
            String::new()
        },
        text(&review.setting),
        review.seconds,
        review.hits,
        review.recorded
    );
    let misses: Vec<_> = review
        .cases
        .iter()
        .filter(|c| c.verdict == "miss")
        .collect();
    if !misses.is_empty() {
        let _ = writeln!(
            out,
            "\n**Replay misses** (record them with `{record}`):\n\n| case | key | request | why |\n|---|---|---|---|"
        );
        for case in misses.iter().take(LISTED) {
            let miss = case.miss.as_ref();
            let why = miss.map(|m| m.lines.join("; ")).unwrap_or_default();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                cell(&case.id),
                key(&case.key),
                cell(&miss.map(|m| m.request.clone()).unwrap_or_default()),
                cell(&why)
            );
        }
        if misses.len() > LISTED {
            let _ = writeln!(out, "\n… and {} more misses.", misses.len() - LISTED);
        }
    }
    let failures: Vec<_> = review
        .cases
        .iter()
        .filter(|c| c.verdict == "fail")
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(
            out,
            "\n**Failed cases**:\n\n| case | graders | why | answer |\n|---|---|---|---|"
        );
        for case in failures.iter().take(LISTED) {
            let answer = case
                .answer
                .as_ref()
                .map(|a| a.text.trim().to_owned())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                cell(&case.id),
                cell(&case.graders.join(", ")),
                cell(case.reason.as_deref().unwrap_or("")),
                cell(&answer)
            );
        }
        if failures.len() > LISTED {
            let _ = writeln!(out, "\n… and {} more failures.", failures.len() - LISTED);
        }
    }
    out
}

/// One request of `cassette exec` for its summary: key, request and why it missed.
pub struct ExecMiss<'a> {
    /// The key that missed.
    pub key: &'a str,
    /// The request in a few words.
    pub request: &'a str,
    /// The explanation's summary.
    pub why: &'a str,
}

/// The summary of `cassette exec`: the counts line, then the distinct misses, and `record`,
/// how to record them.
pub fn exec_summary(counts: &str, misses: &[ExecMiss<'_>], distinct: u64, record: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### cassette exec\n\n{}", text(counts));
    if !misses.is_empty() {
        let _ = writeln!(
            out,
            "\n**Replay misses** (record them with `{record}`):\n\n| key | request | why |\n|---|---|---|"
        );
        for miss in misses.iter().take(LISTED) {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                key(miss.key),
                cell(miss.request),
                cell(miss.why)
            );
        }
        let shown = misses.len().min(LISTED) as u64;
        if distinct > shown {
            let _ = writeln!(out, "\n… and {} more missed keys.", distinct - shown);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::RequestLine;
    use crate::verdict::{Facts, Judged};
    use cassette_keying::Key;

    fn recording(n: u8, text: &str) -> Recording {
        Recording {
            key: Key::parse(&format!("{n:02x}").repeat(32)).unwrap(),
            request: "POST /v1/chat/completions".into(),
            route: "default".into(),
            requested_model: Some("gpt-4o-mini".into()),
            recorded_at: "2026-01-01T00:00:00Z".into(),
            facts: Ok(Facts {
                status: 200,
                text: text.into(),
                tool_calls: Vec::new(),
                model: Some("gpt-4o-mini-2024-07-18".into()),
                finish: Some("stop".into()),
                usage: None,
            }),
        }
    }

    fn item(
        drift: Drift,
        reasons: &[&str],
        pairing: Pairing,
        old: Option<Recording>,
        new: Option<Recording>,
    ) -> Reviewed {
        Reviewed {
            judged: Judged {
                drift,
                reasons: reasons.iter().map(|r| (*r).to_owned()).collect(),
                notes: Vec::new(),
            },
            pairing,
            old,
            new,
            request: Vec::new(),
        }
    }

    #[test]
    fn the_diff_summary_is_a_short_table_that_tape_text_cannot_break() {
        let hostile = "| </td><img src=x onerror=alert(1)> **bold** [link](https://evil.example) @octocat\nnext line";
        let mut paired = item(
            Drift::Reworded,
            &["text"],
            Pairing::Rerecorded {
                distance: 0.97,
                by: PairedBy::Nearest,
                old: OldTape::Gone,
            },
            Some(recording(1, "The capital of France is Paris.")),
            Some(recording(2, "Paris is the capital of France.")),
        );
        paired.request.push(RequestLine {
            path: "system".into(),
            pieces: Vec::new(),
            text: "system: \"Be brief.\" -> \"Be brief | kind.\"".into(),
        });
        let review = DiffReview::new(
            "git:HEAD~1:cassettes (commit 0123456789ab)".into(),
            "file://cassettes".into(),
            (3, 3),
            vec![
                item(
                    Drift::Same,
                    &[],
                    Pairing::SameKey,
                    Some(recording(3, "same")),
                    Some(recording(3, "same")),
                ),
                paired,
                item(
                    Drift::Changed,
                    &["finish reason stop -> length", "text"],
                    Pairing::SameKey,
                    Some(recording(4, "A full answer.")),
                    Some(recording(4, hostile)),
                ),
                item(
                    Drift::Removed,
                    &["only in A"],
                    Pairing::Alone,
                    Some(recording(5, "gone")),
                    None,
                ),
            ],
        );
        let summary = diff_summary(&review, "cassette diff --html", "cassette gc");
        for row in summary
            .lines()
            .filter(|l| l.starts_with("| ") && l.contains('`'))
        {
            assert_eq!(row.replace("\\|", "").matches('|').count(), 7, "{row}");
        }
        insta::assert_snapshot!(summary);
    }

    /// A re-record whose old recording is still in the new set is one re-recorded pair, not a
    /// shared key plus an added one: both answers in one row, and the stale one named.
    #[test]
    fn a_replaced_recording_still_in_b_is_paired_not_shared() {
        let review = DiffReview::new(
            "git:HEAD:cassettes".into(),
            "file://cassettes".into(),
            (2, 3),
            vec![
                item(
                    Drift::Same,
                    &[],
                    Pairing::SameKey,
                    Some(recording(3, "same")),
                    Some(recording(3, "same")),
                ),
                item(
                    Drift::Reworded,
                    &["text"],
                    Pairing::Rerecorded {
                        distance: 1.0,
                        by: PairedBy::SameTest,
                        old: OldTape::StillInB,
                    },
                    Some(recording(1, "The old answer.")),
                    Some(recording(2, "The new answer.")),
                ),
            ],
        );
        assert_eq!((review.shared(), review.pairs()), (1, 1));
        assert_eq!(review.replaced(), [&recording(1, "").key]);
        let summary = diff_summary(&review, "cassette diff --html", "the collector");
        assert!(
            summary.contains(
                "1 of the recordings they replace are still in B (stale unless something else \
                 replays them; delete them with `the collector`)."
            ),
            "{summary}"
        );
        let row = summary
            .lines()
            .find(|l| l.starts_with("| reworded | `"))
            .unwrap_or_else(|| panic!("{summary}"));
        for part in [
            "`010101010101` → `020202020202`",
            "re-recorded by the same test; the old recording is still in B",
            "| The old answer. | The new answer. |",
        ] {
            assert!(row.contains(part), "{part}\n{row}");
        }
    }

    #[test]
    fn text_stays_plain_text() {
        assert_eq!(text("a | b"), "a \\| b");
        assert_eq!(
            text("<img src=x onerror=alert(1)>"),
            "&lt;img src=x onerror=alert(1)&gt;"
        );
        assert_eq!(
            text("**bold** [x](javascript:alert(1))"),
            "\\*\\*bold\\*\\* \\[x\\](javascript:alert(1))"
        );
        assert_eq!(
            text("~~gone~~ $x$ ![i]"),
            "\\~\\~gone\\~\\~ \\$x\\$ \\!\\[i\\]"
        );
        assert_eq!(text("line\nbreak"), "line break");
        assert_eq!(text("`code`"), "\\`code\\`");
        assert_eq!(text("@octocat #12"), "\\@\u{200b}octocat \\#\u{200b}12");
        assert_eq!(
            text("https://evil.example www.x.y"),
            "https\\:\u{200b}//evil.example www\u{200b}.x.y"
        );
        assert_eq!(text("naïve 日本"), "naïve 日本");
    }
}
