//! Replay misses: what was asked, and how it differs from the nearest recording.
//!
//! Finding the nearest recording runs only on a miss, through an index kept between misses
//! (`index`: segments the store keeps, or a scan of the cassettes no segment covers); a hit
//! never pays for it. The same rule pairs the recordings of a re-record with the ones they
//! replace (`pair`, for `cassette diff`). What differs is rendered by `cassette-review`, one
//! line a difference, long strings as a word diff, as every review renders it.

mod index;
mod log;
mod pair;

pub(crate) use index::NearestIndex;
pub use index::{compact, write_segment, Compacted, IndexRecord, SegmentKind};
pub(crate) use log::MissBook;
pub use log::{MissLog, MissNote};
pub use pair::{pair, replaced, request_differences, Paired, Replacement};

use cassette_keying::{Change, Difference, Key};
use cassette_tape::redact::Redactor;
use serde::Serialize;
use serde_json::Value;
use std::fmt;

/// A request that replay could not answer.
#[derive(Debug, Clone, Serialize)]
pub struct Miss {
    /// The request's key.
    pub key: Key,
    /// Keying profile.
    pub profile: String,
    /// Route name.
    pub target: String,
    /// HTTP method.
    pub method: String,
    /// Request path.
    pub path: String,
    /// The requested model, when the body names one.
    pub model: Option<String>,
    /// Where the recorder looked.
    pub store: String,
    /// Set when a repeat of a recorded request was asked more times than it was recorded
    /// (sequence mode).
    pub repeat: Option<Repeat>,
    /// Why nothing answered.
    pub explanation: Explanation,
}

/// A request asked more times in one session than it was recorded (sequence mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Repeat {
    /// The request's base key (its first occurrence).
    pub base_key: Key,
    /// The occurrence asked for.
    pub asked: u32,
    /// How many occurrences are recorded, the first ones in a row (at least 1).
    pub recorded: u32,
}

impl fmt::Display for Repeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let times = if self.recorded == 1 { "time" } else { "times" };
        write!(
            f,
            "This request was recorded {} {times}, asked a {} time (repeats of a request are \
             answered in sequence, each from its own recording; its first is {}).",
            self.recorded,
            ordinal(self.asked),
            self.base_key.short()
        )
    }
}

impl Repeat {
    /// Why a repeat missed: no nearest recording to compare with (the request itself is
    /// recorded), only how many times it was and which time it was asked.
    pub(crate) fn explanation(&self) -> Explanation {
        Explanation {
            nearest: None,
            summary: self.to_string(),
        }
    }
}

/// `1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`, ...
pub fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The nearest recording and what differs, or why there is none.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The closest recording at the same target and path, when there is one.
    pub nearest: Option<Nearest>,
    /// One readable sentence.
    pub summary: String,
}

/// The recording closest to a missed request.
#[derive(Debug, Clone, Serialize)]
pub struct Nearest {
    /// Its key.
    pub key: Key,
    /// When it was recorded.
    pub recorded_at: String,
    /// What differs, recorded value first: the keying settings or key version it was keyed
    /// under when they are not the current ones (`recorded with volatile [seed]; now []`),
    /// then the components of the request (`body.temperature: 0 -> 0.7`; two long strings as a
    /// word diff of what changed, `…the quarterly [-revenue-]{+income+} figures…`).
    pub differences: Vec<String>,
    /// What to do when the differences look like ids the client makes afresh on every run
    /// (the `[keying] ignore` that leaves them out of the key), else none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Miss {
    /// The request in a few words: `POST /v1/chat/completions (target default, model m)`.
    pub fn request_line(&self) -> String {
        let model = self
            .model
            .as_deref()
            .map(|m| format!(", model {m}"))
            .unwrap_or_default();
        format!(
            "{} {} (target {}{model})",
            self.method, self.path, self.target
        )
    }

    /// The explanation as one line per difference, for CLI output.
    pub fn explanation_lines(&self) -> Vec<String> {
        match &self.explanation.nearest {
            Some(nearest) => nearest.differences.clone(),
            None => vec![self.explanation.summary.clone()],
        }
    }
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cassette miss: no recording for {} {} (target {}",
            self.method, self.path, self.target
        )?;
        if let Some(model) = &self.model {
            write!(f, ", model {model}")?;
        }
        write!(
            f,
            ") with key {} in {}. {} Record it in record or auto mode.",
            self.key, self.store, self.explanation.summary
        )
    }
}

/// Key material as a recording would store it: the request body (`body`, or an MCP request's
/// `params`) by the JSON rules, every other string by the shape and user rules.
pub(crate) fn redacted_material(material: &Value, redactor: &Redactor) -> Value {
    let mut out = material.clone();
    if let Value::Object(members) = &mut out {
        for (name, value) in members.iter_mut() {
            match name.as_str() {
                "body" | "params" => redactor.json(value),
                _ => redact_strings(value, redactor),
            }
        }
    }
    out
}

/// The paths (as differences name them: `params.arguments.token`) of the strings of `before`
/// that redaction changed in `after`: what a request and a recording may differ in unseen.
fn redacted_paths(before: &Value, after: &Value, path: &mut String, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(old), Value::Object(new)) => {
            for (name, child) in old {
                let Some(redacted) = new.get(name) else {
                    continue;
                };
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(name);
                redacted_paths(child, redacted, path, out);
                path.truncate(len);
            }
        }
        (Value::Array(old), Value::Array(new)) => {
            for (i, (child, redacted)) in old.iter().zip(new).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                redacted_paths(child, redacted, path, out);
                path.truncate(len);
            }
        }
        (old, new) if old != new => out.push(path.clone()),
        _ => {}
    }
}

fn redact_strings(value: &mut Value, redactor: &Redactor) {
    match value {
        Value::String(s) => *s = redactor.text(s),
        Value::Array(items) => items.iter_mut().for_each(|v| redact_strings(v, redactor)),
        Value::Object(members) => members
            .values_mut()
            .for_each(|v| redact_strings(v, redactor)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// How far apart two requests are: each difference counts 1, except that a changed string
/// counts only the share of its characters that changed, so a reworded prompt is nearer than
/// a different one.
fn distance(differences: &[Difference]) -> f64 {
    differences
        .iter()
        .map(|d| match &d.change {
            Change::Changed {
                old: Value::String(old),
                new: Value::String(new),
            } => changed_share(old, new),
            _ => 1.0,
        })
        .sum()
}

/// The share of characters outside the common prefix and suffix of two strings.
fn changed_share(old: &str, new: &str) -> f64 {
    let a: Vec<char> = old.chars().collect();
    let b: Vec<char> = new.chars().collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let max_suffix = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    let longest = a.len().max(b.len()).max(1);
    (longest - prefix - suffix) as f64 / longest as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_read_as_english() {
        let shown: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            shown,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd",
                "101st", "111th"
            ]
        );
    }

    #[test]
    fn a_reworded_string_is_nearer_than_a_different_one() {
        let reworded = changed_share("Where is my refund?", "Where's my refund?");
        let different = changed_share("Something else", "Where's my refund?");
        assert!(reworded < 0.3, "{reworded}");
        assert!(different > 0.8, "{different}");
        assert_eq!(changed_share("same", "same"), 0.0);
    }
}
