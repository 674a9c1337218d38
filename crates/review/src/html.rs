//! The HTML review files: the review of `cassette diff` (each pair side by side: request
//! difference, answer difference, tool calls, usage, model) and that of `cassette run` (each
//! case with its verdict, graders, answer and, for a miss, the explanation).
//!
//! One self-contained file that a browser can open from a CI artifact without trusting it:
//!
//! - no script at all, and nothing loaded from anywhere (no font, image, style sheet or link
//!   out): the page's Content-Security-Policy (`default-src 'none'`, the one inline style sheet
//!   allowed by its hash) forbids both even if something slipped in;
//! - every text taken from a cassette or a run is escaped by maud, which escapes whatever is
//!   spliced into the markup (`(expr)`) and leaves raw only what is written as `PreEscaped`,
//!   used here for the constant style sheet alone; none of it is placed in an attribute but
//!   classes and ids the program makes (verdicts, hex keys, numbers);
//! - the filters (changed only, failures only) are radio buttons and CSS `:checked` rules, and
//!   each item a `<details>`, so it works with scripts off;
//! - long answers are cut (`MAX_TEXT` characters each), so a huge recording cannot make the
//!   page unreadable.
//!
//! What reaches these pages was redacted before (see [`crate::redact`], and the run's
//! recorder).

use crate::diff::{DiffReview, OldTape, PairedBy, Pairing, Recording, Reviewed};
use crate::render::Piece;
use crate::verdict::{answer_text, Drift, Facts};
use base64::Engine as _;
use cassette_wire::ToolCall;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use sha2::{Digest, Sha256};
use similar::{Algorithm, ChangeTag, TextDiff};
use std::time::Duration;

/// The longest answer text shown whole; the rest is cut (and said so).
const MAX_TEXT: usize = 20_000;

/// Items opened when the page loads, when there are not more things to look at than this.
const OPENED: usize = 50;

/// How long the answer diff may search before settling for a longer (still correct) one.
const DIFF_DEADLINE: Duration = Duration::from_millis(200);

/// The only style sheet: inline, allowed by its hash (a file of its own, so that its custom
/// properties are not taken for flags by the check that libraries name none).
const STYLE: &str = include_str!("review.css");

/// The page around `content`: the security policy first, then the style sheet.
fn page(title: &str, content: Markup) -> String {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE.as_bytes()));
    let policy = format!(
        "default-src 'none'; style-src 'sha256-{hash}'; img-src 'none'; font-src 'none'; \
         connect-src 'none'; media-src 'none'; object-src 'none'; frame-src 'none'; \
         base-uri 'none'; form-action 'none'"
    );
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(policy);
                meta name="referrer" content="no-referrer";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body { (content) }
        }
    }
    .into_string()
}

/// A radio button and its label, for a filter made of CSS `:checked` rules.
fn filter(id: &str, label: &str, checked: bool) -> Markup {
    html! {
        input.filter type="radio" name="show" id=(id) checked[checked];
        label for=(id) { (label) }
    }
}

/// The review of `cassette diff`.
pub fn diff_page(review: &DiffReview) -> String {
    let differing = review
        .items
        .iter()
        .filter(|i| i.drift() != Drift::Same)
        .count();
    let changed = review
        .items
        .iter()
        .filter(|i| i.drift() >= Drift::Added)
        .count();
    let open = differing <= OPENED;
    let content = html! {
        header {
            h1 { "cassette diff" }
            p.meta { "A (old): " code { (review.a) } " — " (review.sizes.0) " cassettes" br;
                     "B (new): " code { (review.b) } " — " (review.sizes.1) " cassettes" }
            ul.counts {
                @for drift in Drift::BY_SEVERITY {
                    li class={ "v-" (drift.as_str()) } {
                        span.badge { (drift.as_str()) } (review.count(drift))
                    }
                }
                li { (review.pairs()) " re-recorded under a new key" }
                @let replaced = review.replaced().len();
                @if replaced > 0 {
                    li { (replaced) " replaced recordings still in B" }
                }
            }
        }
        (filter("show-all", &format!("All ({})", review.items.len()), true))
        (filter("show-differences", &format!("Differences ({differing})"), false))
        (filter("show-changed", &format!("Changed, added, removed ({changed})"), false))
        main {
            @if review.items.is_empty() {
                p.empty { "Both sets are empty." }
            }
            @for item in &review.items {
                (diff_item(item, open && item.drift() != Drift::Same))
            }
        }
    };
    page(
        &format!("cassette diff: {} -> {}", review.a, review.b),
        content,
    )
}

fn diff_item(item: &Reviewed, open: bool) -> Markup {
    let drift = item.drift().as_str();
    let key = item.key().as_str();
    let described = item
        .new
        .as_ref()
        .or(item.old.as_ref())
        .map(Recording::describe)
        .unwrap_or_default();
    html! {
        details class={ "item v-" (drift) } id={ "k-" (key) } open[open] {
            summary {
                span.badge { (drift) }
                code { (item.key().short()) } " " (described)
                @match item.pairing {
                    Pairing::Rerecorded { distance, by, old } => {
                        span.why { " — re-recorded from " code { (item.old.as_ref().map_or("", |r| r.key.short())) }
                                   " (" (match by { PairedBy::SameTest => "same test, ", PairedBy::Nearest => "" })
                                   "request distance " (format!("{distance:.2}")) ")"
                                   @if old == OldTape::StillInB { ", which is still in B" } }
                    }
                    _ => {}
                }
                @if !item.judged.reasons.is_empty() {
                    span.why { " — " (item.judged.reasons.join(", ")) }
                }
                @if !item.judged.notes.is_empty() {
                    span.why { " (" (item.judged.notes.join(", ")) " differs)" }
                }
            }
            div.body {
                @if !item.request.is_empty() {
                    h3 { "Request difference" }
                    ul.request {
                        @for line in &item.request {
                            li {
                                @if !line.path.is_empty() { code { (line.path) } ": " }
                                (pieces(&line.pieces))
                            }
                        }
                    }
                }
                (sides(item))
            }
        }
    }
}

fn pieces(pieces: &[Piece]) -> Markup {
    html! {
        @for piece in pieces {
            @match piece {
                Piece::Removed(text) => { del.r-del { (text) } }
                Piece::Inserted(text) => { ins.r-ins { (text) } }
                Piece::Text(text) => { (text) }
            }
        }
    }
}

/// The two recordings side by side; the answers as a line diff when both are there.
fn sides(item: &Reviewed) -> Markup {
    let texts = match (&item.old, &item.new) {
        (Some(old), Some(new)) => match (&old.facts, &new.facts) {
            (Ok(a), Ok(b)) => Some(answer_diff(&answer_text(a), &answer_text(b))),
            _ => None,
        },
        _ => None,
    };
    let (old_text, new_text) = match texts {
        Some((a, b)) => (Some(a), Some(b)),
        None => (None, None),
    };
    html! {
        div.pair {
            (side("A (old)", item.old.as_ref(), old_text))
            (side("B (new)", item.new.as_ref(), new_text))
        }
    }
}

fn side(title: &str, recording: Option<&Recording>, diffed: Option<Markup>) -> Markup {
    html! {
        section {
            h3 { (title) }
            @match recording {
                None => { p.empty { "No recording." } }
                Some(r) => {
                    table.facts {
                        tr { th { "key" } td { code { (r.key.as_str()) } } }
                        tr { th { "request" } td { (r.request) } }
                        tr { th { "route" } td { (r.route) } }
                        tr { th { "recorded" } td { (r.recorded_at) } }
                        @match &r.facts {
                            Err(why) => { tr { th { "unreadable" } td { (why) } } }
                            Ok(facts) => { (fact_rows(r, facts)) }
                        }
                    }
                    @if let Ok(facts) = &r.facts {
                        (tool_calls(&facts.tool_calls))
                        h3 { "Answer" }
                        @match diffed {
                            Some(markup) => { (markup) }
                            None => { (text_block(&answer_text(facts))) }
                        }
                    }
                }
            }
        }
    }
}

fn fact_rows(r: &Recording, facts: &Facts) -> Markup {
    let none = "(none)";
    html! {
        tr { th { "status" } td { (facts.status) } }
        tr { th { "model" } td {
            (r.requested_model.as_deref().unwrap_or(none))
            @if let Some(model) = &facts.model {
                @if Some(model.as_str()) != r.requested_model.as_deref() { " (answered by " (model) ")" }
            }
        } }
        tr { th { "finish" } td { (facts.finish.as_deref().unwrap_or(none)) } }
        tr { th { "usage" } td { code { (facts.usage.as_ref().map_or_else(|| none.to_owned(), ToString::to_string)) } } }
    }
}

fn tool_calls(calls: &[ToolCall]) -> Markup {
    html! {
        @if !calls.is_empty() {
            h3 { "Tool calls" }
            table.facts {
                @for call in calls {
                    tr { th { code { (call.name) } } td { code { (cut(&call.arguments.to_string()).0) } } }
                }
            }
        }
    }
}

/// `text`, cut to [`MAX_TEXT`] characters, and how many were left out.
fn cut(text: &str) -> (String, usize) {
    match text.char_indices().nth(MAX_TEXT) {
        Some((at, _)) => (text[..at].to_owned(), text[at..].chars().count()),
        None => (text.to_owned(), 0),
    }
}

fn text_block(text: &str) -> Markup {
    let (shown, left_out) = cut(text);
    html! {
        @if shown.is_empty() { p.empty { "(no text)" } }
        @else { pre { (shown) } }
        @if left_out > 0 { p.cut { "… " (left_out) " more characters not shown" } }
    }
}

/// The two answers as two marked texts: lines only the old one has (and within them the
/// changed words), and lines only the new one has.
fn answer_diff(old: &str, new: &str) -> (Markup, Markup) {
    let (old_shown, old_cut) = cut(old);
    let (new_shown, new_cut) = cut(new);
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Patience)
        .timeout(DIFF_DEADLINE)
        .diff_lines(old_shown.as_str(), new_shown.as_str());
    let mut left: Vec<Markup> = Vec::new();
    let mut right: Vec<Markup> = Vec::new();
    for op in diff.ops() {
        for change in diff.iter_inline_changes(op) {
            let mut parts: Vec<(bool, String)> = change
                .iter_strings_lossy()
                .map(|(emphasized, text)| (emphasized, text.into_owned()))
                .collect();
            if change.tag() != ChangeTag::Equal {
                // A marked line is a block of its own: its newline would add an empty line.
                if let Some((_, last)) = parts.last_mut() {
                    if last.ends_with('\n') {
                        last.pop();
                    }
                }
            }
            let line = |class: &str| {
                html! {
                    span class=(class) {
                        @for (emphasized, text) in &parts {
                            @if *emphasized { mark { (text) } } @else { (text) }
                        }
                    }
                }
            };
            match change.tag() {
                ChangeTag::Equal => {
                    let text: String = parts.iter().map(|(_, t)| t.as_str()).collect();
                    left.push(html! { (text) });
                    right.push(html! { (text) });
                }
                ChangeTag::Delete => left.push(line("del")),
                ChangeTag::Insert => right.push(line("ins")),
            }
        }
    }
    let block = |lines: Vec<Markup>, left_out: usize, empty: bool| {
        html! {
            @if empty { p.empty { "(no text)" } }
            @else { pre { @for line in &lines { (line) } } }
            @if left_out > 0 { p.cut { "… " (left_out) " more characters not shown" } }
        }
    };
    (
        block(left, old_cut, old_shown.is_empty()),
        block(right, new_cut, new_shown.is_empty()),
    )
}

/// One case of a run, as the run page shows it.
#[derive(Debug, Clone)]
pub struct RunCase {
    /// The case id.
    pub id: String,
    /// `pass`, `fail` or `miss`.
    pub verdict: &'static str,
    /// The graders' names.
    pub graders: Vec<String>,
    /// The case request's key, or the key that missed.
    pub key: String,
    /// Whether every request of the case was replayed.
    pub hit: bool,
    /// Why the verdict failed.
    pub reason: Option<String>,
    /// Scores, judge tally and the like, one line each.
    pub details: Vec<String>,
    /// The answer, when there is one (its text, tool calls, finish reason and model).
    pub answer: Option<Facts>,
    /// For a miss: the request, and the explanation's lines.
    pub miss: Option<MissView>,
}

/// A miss as the run page explains it.
#[derive(Debug, Clone)]
pub struct MissView {
    /// `POST /v1/chat/completions (target default, model m)`.
    pub request: String,
    /// The nearest recording's key and when it was recorded.
    pub nearest: Option<(String, String)>,
    /// What differs from it, or why there is none.
    pub lines: Vec<String>,
}

/// What `cassette run` did, for its page.
#[derive(Debug, Clone)]
pub struct RunReview {
    /// The suite file.
    pub suite: String,
    /// Mode and store, in a few words.
    pub setting: String,
    /// How long it took.
    pub seconds: f64,
    /// Requests replayed.
    pub hits: u64,
    /// Requests recorded.
    pub recorded: u64,
    /// Cases not run (the run stopped at its first miss).
    pub unrun: usize,
    /// The cases, most severe first (miss, fail, pass), then in suite order.
    pub cases: Vec<RunCase>,
}

impl RunReview {
    /// How many cases got `verdict`.
    pub fn count(&self, verdict: &str) -> usize {
        self.cases.iter().filter(|c| c.verdict == verdict).count()
    }
}

/// The review of `cassette run`.
pub fn run_page(review: &RunReview) -> String {
    let failing = review.cases.iter().filter(|c| c.verdict != "pass").count();
    let open = failing <= OPENED;
    let content = html! {
        header {
            h1 { "cassette run" }
            p.meta { "suite " code { (review.suite) } " — " (review.setting) " — "
                     (format!("{:.2}", review.seconds)) "s — "
                     (review.hits) " requests replayed, " (review.recorded) " recorded" }
            ul.counts {
                @for verdict in ["miss", "fail", "pass"] {
                    li class={ "v-" (verdict) } { span.badge { (verdict) } (review.count(verdict)) }
                }
                @if review.unrun > 0 { li { (review.unrun) " not run (stopped at the first miss)" } }
            }
        }
        (filter("show-all", &format!("All ({})", review.cases.len()), true))
        (filter("show-failures", &format!("Failures and misses ({failing})"), false))
        main {
            @if review.cases.is_empty() { p.empty { "No case ran." } }
            @for (n, case) in review.cases.iter().enumerate() {
                (run_item(n, case, open && case.verdict != "pass"))
            }
        }
    };
    page(&format!("cassette run: {}", review.suite), content)
}

fn run_item(n: usize, case: &RunCase, open: bool) -> Markup {
    html! {
        details class={ "item v-" (case.verdict) } id={ "c-" (n) } open[open] {
            summary {
                span.badge { (case.verdict) }
                strong { (case.id) }
                @if !case.graders.is_empty() { span.why { " — " (case.graders.join(", ")) } }
                @if let Some(reason) = &case.reason { span.why { " — " (reason) } }
            }
            div.body {
                table.facts {
                    tr { th { "key" } td { code { (case.key) } } }
                    tr { th { "replayed" } td { (if case.hit { "yes" } else { "no" }) } }
                    @for line in &case.details { tr { th { "grading" } td { (line) } } }
                    @if let Some(answer) = &case.answer {
                        tr { th { "finish" } td { (answer.finish.as_deref().unwrap_or("(none)")) } }
                        tr { th { "model" } td { (answer.model.as_deref().unwrap_or("(none)")) } }
                    }
                }
                @if let Some(miss) = &case.miss {
                    h3 { "Replay miss" }
                    table.facts {
                        tr { th { "request" } td { (miss.request) } }
                        @if let Some((key, at)) = &miss.nearest {
                            tr { th { "nearest" } td { code { (key) } " (recorded " (at) ")" } }
                        }
                    }
                    ul.request { @for line in &miss.lines { li { (line) } } }
                }
                @if let Some(answer) = &case.answer {
                    (tool_calls(&answer.tool_calls))
                    h3 { "Answer" }
                    (text_block(&answer.text))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_exactly_the_style_sheet() {
        let page = page("t", html! { p { "x" } });
        let hash =
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE.as_bytes()));
        assert!(
            page.contains(&format!("style-src 'sha256-{hash}'")),
            "{page}"
        );
        assert!(page.contains("default-src 'none'"));
        assert!(!page.contains("script"), "{page}");
        // The style element holds the hashed text exactly.
        assert!(page.contains(&format!("<style>{STYLE}</style>")));
    }

    #[test]
    fn cassette_text_is_escaped_everywhere() {
        let hostile = r#"</pre></style><script>alert(1)</script><img src=x onerror=alert(2)>"' javascript:alert(3)"#;
        let (old, new) = answer_diff(hostile, &format!("{hostile}\nmore"));
        let markup = format!("{}{}{}", old.0, new.0, text_block(hostile).0);
        assert!(!markup.contains("<script"), "{markup}");
        assert!(!markup.contains("<img"), "{markup}");
        assert!(!markup.contains("</style>"), "{markup}");
        assert!(markup.contains("&lt;script&gt;"), "{markup}");
        assert!(markup.contains("&quot;"), "{markup}");
    }

    #[test]
    fn long_answers_are_cut_and_said_so() {
        let long = "é".repeat(MAX_TEXT + 10);
        let (shown, left_out) = cut(&long);
        assert_eq!((shown.chars().count(), left_out), (MAX_TEXT, 10));
        assert!(text_block(&long).0.contains("10 more characters not shown"));
    }
}
