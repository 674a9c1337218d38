//! Drift verdicts: what a re-record did to one recorded answer. The answer is read as
//! `cassette-wire`'s `response_summary` reads it (text, tool calls, finish reason, answering
//! model, whatever the provider), so every provider is judged by the same rules:
//!
//! - `same`: the same answer (usage alone may differ);
//! - `reworded`: only the answer's text differs (a structured answer keeps its JSON shape);
//! - `changed`: what a program acting on the answer sees differs: the tool calls or their
//!   arguments, the JSON shape of a structured answer, the finish reason (a truncation), the
//!   answering model, the HTTP status;
//! - `added` / `removed`: a recording only the new (old) set has, paired with none.

use cassette_keying::Profile;
use cassette_tape::Cassette;
use cassette_wire::{ResponseSummary, ToolCall};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One verdict, ordered from least to most severe (so `>=` reads "at least as bad as").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Drift {
    /// The same answer.
    Same,
    /// Only the answer's text differs.
    Reworded,
    /// Only the new set has it.
    Added,
    /// Only the old set has it.
    Removed,
    /// Tool calls, JSON shape, finish reason, model or status differ.
    Changed,
}

impl Drift {
    /// Every verdict, most severe first: the order reports list them in.
    pub const BY_SEVERITY: [Drift; 5] = [
        Drift::Changed,
        Drift::Removed,
        Drift::Added,
        Drift::Reworded,
        Drift::Same,
    ];

    /// The verdict as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Drift::Same => "same",
            Drift::Reworded => "reworded",
            Drift::Added => "added",
            Drift::Removed => "removed",
            Drift::Changed => "changed",
        }
    }
}

/// What a recorded answer says, as a review shows and judges it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The HTTP status.
    pub status: u16,
    /// The answer's text, text parts concatenated in order.
    pub text: String,
    /// The answer's tool calls in order, `{name, arguments}` whatever the provider.
    pub tool_calls: Vec<ToolCall>,
    /// The answering model (the answer's, else the review metadata's).
    pub model: Option<String>,
    /// The finish reason (the answer's, else the review metadata's).
    pub finish: Option<String>,
    /// Token usage as the provider reports it (the answer's, else the review metadata's).
    pub usage: Option<Value>,
}

impl Facts {
    /// The facts of a cassette whose answer was read as `answer` (by the embedder, which may
    /// guess the API of a route whose path names none): its text and tool calls, and the
    /// model, finish reason and usage it names, else the cassette's review metadata's.
    pub fn of(cassette: &Cassette, answer: ResponseSummary) -> Facts {
        Facts {
            status: cassette.response.status,
            text: answer.text,
            tool_calls: answer.tool_calls,
            model: answer
                .model
                .or_else(|| cassette.meta.response_model.clone()),
            finish: answer
                .finish_reason
                .or_else(|| cassette.meta.finish_reason.clone()),
            usage: answer
                .usage
                .or_else(|| usage_of(cassette))
                .or_else(|| cassette.meta.usage.clone()),
        }
    }
}

/// Usage read from the answer itself (the review metadata was derived from it when the
/// cassette was sealed).
fn usage_of(cassette: &Cassette) -> Option<Value> {
    let profile = Profile::from_path(&cassette.request.path);
    let body = cassette.response.body.as_json()?;
    cassette_wire::response_summary(profile, body).usage
}

/// A verdict and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// The verdict.
    pub drift: Drift,
    /// What differs, one short phrase each (`finish reason stop -> length`), most telling
    /// first; empty for `same`.
    pub reasons: Vec<String>,
    /// What differs that does not change the verdict (`usage`).
    pub notes: Vec<String>,
}

/// Judges two readings of one recording (before and after): the parsed facts, or why a
/// cassette could not be read (an unreadable side is a change).
pub fn judge(old: Result<&Facts, &str>, new: Result<&Facts, &str>) -> Judged {
    let (old, new) = match (old, new) {
        (Ok(old), Ok(new)) => (old, new),
        (old, new) => {
            let mut reasons = Vec::new();
            for (side, read) in [("old", old), ("new", new)] {
                if let Err(why) = read {
                    reasons.push(format!("the {side} cassette is unreadable: {why}"));
                }
            }
            return Judged {
                drift: Drift::Changed,
                reasons,
                notes: Vec::new(),
            };
        }
    };
    let mut changed = Vec::new();
    let pair = |what: &str, a: &Option<String>, b: &Option<String>| {
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".to_owned());
        (a != b).then(|| format!("{what} {} -> {}", shown(a), shown(b)))
    };
    if old.status != new.status {
        changed.push(format!("status {} -> {}", old.status, new.status));
    }
    changed.extend(pair("finish reason", &old.finish, &new.finish));
    changed.extend(pair("model", &old.model, &new.model));
    if let Some(tools) = tool_change(&old.tool_calls, &new.tool_calls) {
        changed.push(tools);
    }
    let text_differs = old.text != new.text;
    if text_differs {
        if let Some(shape) = shape_change(&old.text, &new.text) {
            changed.push(shape);
        }
    }
    let mut notes = Vec::new();
    if old.usage != new.usage {
        notes.push("usage".to_owned());
    }
    if !changed.is_empty() {
        if text_differs {
            changed.push("text".to_owned());
        }
        return Judged {
            drift: Drift::Changed,
            reasons: changed,
            notes,
        };
    }
    if text_differs {
        return Judged {
            drift: Drift::Reworded,
            reasons: vec!["text".to_owned()],
            notes,
        };
    }
    Judged {
        drift: Drift::Same,
        reasons: Vec::new(),
        notes,
    }
}

/// How the tool calls differ (names, then arguments), ignoring call ids, which every
/// recording draws anew.
fn tool_change(old: &[ToolCall], new: &[ToolCall]) -> Option<String> {
    let calls = |calls: &[ToolCall]| -> Vec<(String, Value)> {
        calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect()
    };
    let (a, b) = (calls(old), calls(new));
    if a == b {
        return None;
    }
    let names = |calls: &[(String, Value)]| -> Vec<String> {
        calls.iter().map(|(name, _)| name.clone()).collect()
    };
    let (na, nb) = (names(&a), names(&b));
    Some(if na == nb {
        format!("tool call arguments ({})", na.join(", "))
    } else {
        let list = |n: &[String]| {
            if n.is_empty() {
                "none".to_owned()
            } else {
                n.join(", ")
            }
        };
        format!("tool calls {} -> {}", list(&na), list(&nb))
    })
}

/// The JSON shape of a structured answer: member names and value types, arrays by the
/// shapes of their items. `None` for text that is not a JSON object or array.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Shape {
    Null,
    Bool,
    Number,
    String,
    Array(BTreeSet<Shape>),
    Object(BTreeMap<String, Shape>),
}

impl Shape {
    fn of(value: &Value) -> Shape {
        match value {
            Value::Null => Shape::Null,
            Value::Bool(_) => Shape::Bool,
            Value::Number(_) => Shape::Number,
            Value::String(_) => Shape::String,
            Value::Array(items) => Shape::Array(items.iter().map(Shape::of).collect()),
            Value::Object(members) => Shape::Object(
                members
                    .iter()
                    .map(|(name, v)| (name.clone(), Shape::of(v)))
                    .collect(),
            ),
        }
    }

    /// The shape of an answer's text, when it is a JSON object or array (a fenced ```json
    /// block counts: models wrap structured answers so).
    fn of_text(text: &str) -> Option<Shape> {
        let trimmed = text.trim();
        let inner = trimmed
            .strip_prefix("```json")
            .or_else(|| trimmed.strip_prefix("```"))
            .and_then(|rest| rest.strip_suffix("```"))
            .unwrap_or(trimmed);
        match serde_json::from_str::<Value>(inner.trim()) {
            Ok(value @ (Value::Object(_) | Value::Array(_))) => Some(Shape::of(&value)),
            _ => None,
        }
    }
}

impl Shape {
    /// Whether two shapes agree: the same member names with agreeing values, the same types;
    /// an empty array agrees with any array (it has no items to disagree).
    fn agrees(&self, other: &Shape) -> bool {
        match (self, other) {
            (Shape::Array(a), Shape::Array(b)) => a.is_empty() || b.is_empty() || a == b,
            (Shape::Object(a), Shape::Object(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|((na, sa), (nb, sb))| na == nb && sa.agrees(sb))
            }
            (a, b) => a == b,
        }
    }
}

/// How the JSON shape of a structured answer changed, when one of the two texts is one.
fn shape_change(old: &str, new: &str) -> Option<String> {
    match (Shape::of_text(old), Shape::of_text(new)) {
        (None, None) => None,
        (Some(a), Some(b)) if a.agrees(&b) => None,
        (Some(_), Some(_)) => Some("JSON shape of the answer".to_owned()),
        (Some(_), None) => Some("the answer is no longer JSON".to_owned()),
        (None, Some(_)) => Some("the answer became JSON".to_owned()),
    }
}

/// The answer's text with its tool calls, one `[tool call] name(arguments)` line each, for a
/// line diff in which a changed call shows up.
pub fn answer_text(facts: &Facts) -> String {
    let mut text = facts.text.clone();
    for call in &facts.tool_calls {
        text.push_str(&format!("\n[tool call] {}({})", call.name, call.arguments));
    }
    text
}

/// An answer's text, short enough for a table cell.
pub fn gist(facts: &Facts) -> String {
    /// The longest gist, in characters.
    const MAX: usize = 120;
    let text = facts.text.trim();
    if text.is_empty() && !facts.tool_calls.is_empty() {
        let names: Vec<&str> = facts.tool_calls.iter().map(|c| c.name.as_str()).collect();
        return format!("[tool calls: {}]", names.join(", "));
    }
    let text = text.replace(['\n', '\r'], " ");
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts(text: &str) -> Facts {
        Facts {
            status: 200,
            text: text.to_owned(),
            tool_calls: Vec::new(),
            model: Some("m-1".into()),
            finish: Some("stop".into()),
            usage: Some(json!({"total_tokens": 10})),
        }
    }

    fn verdict(a: &Facts, b: &Facts) -> Drift {
        judge(Ok(a), Ok(b)).drift
    }

    #[test]
    fn text_alone_is_reworded_and_usage_alone_is_the_same() {
        let a = facts("Paris is the capital.");
        assert_eq!(verdict(&a, &a), Drift::Same);
        let b = facts("The capital is Paris.");
        assert_eq!(judge(Ok(&a), Ok(&b)).reasons, ["text"]);
        assert_eq!(verdict(&a, &b), Drift::Reworded);
        let mut more_tokens = a.clone();
        more_tokens.usage = Some(json!({"total_tokens": 11}));
        let judged = judge(Ok(&a), Ok(&more_tokens));
        assert_eq!(
            (judged.drift, judged.notes),
            (Drift::Same, vec!["usage".into()])
        );
    }

    #[test]
    fn what_a_program_reads_is_a_change() {
        let a = facts("Paris");
        let mut truncated = facts("Par");
        truncated.finish = Some("length".into());
        let judged = judge(Ok(&a), Ok(&truncated));
        assert_eq!(judged.drift, Drift::Changed);
        assert_eq!(judged.reasons, ["finish reason stop -> length", "text"]);
        let mut other_model = a.clone();
        other_model.model = Some("m-2".into());
        assert_eq!(verdict(&a, &other_model), Drift::Changed);
        let mut error = a.clone();
        error.status = 429;
        assert_eq!(verdict(&a, &error), Drift::Changed);
        let call = |city: &str| ToolCall {
            id: Some(format!("call_{city}")),
            name: "weather".into(),
            arguments: json!({"city": city}),
        };
        let mut paris = a.clone();
        paris.tool_calls = vec![call("Paris")];
        let mut paris_again = paris.clone();
        paris_again.tool_calls[0].id = Some("call_other".into());
        assert_eq!(
            verdict(&paris, &paris_again),
            Drift::Same,
            "ids are drawn anew"
        );
        let mut lyon = a.clone();
        lyon.tool_calls = vec![call("Lyon")];
        let judged = judge(Ok(&paris), Ok(&lyon));
        assert_eq!(judged.drift, Drift::Changed);
        assert_eq!(judged.reasons, ["tool call arguments (weather)"]);
        assert_eq!(
            judge(Ok(&a), Ok(&paris)).reasons,
            ["tool calls none -> weather"]
        );
        assert_eq!(
            judge(Err("bad json"), Ok(&a)).reasons,
            ["the old cassette is unreadable: bad json"]
        );
    }

    #[test]
    fn a_structured_answer_keeps_or_changes_its_shape() {
        let a = facts(r#"{"city": "Paris", "population": 2100000, "tags": ["capital"]}"#);
        let b = facts(r#"{"city": "Lyon", "population": 520000, "tags": ["river", "food"]}"#);
        assert_eq!(verdict(&a, &b), Drift::Reworded);
        let renamed = facts(r#"{"town": "Paris", "population": 2100000, "tags": ["capital"]}"#);
        let judged = judge(Ok(&a), Ok(&renamed));
        assert_eq!(judged.drift, Drift::Changed);
        assert_eq!(judged.reasons, ["JSON shape of the answer", "text"]);
        let retyped = facts(r#"{"city": "Paris", "population": "2.1M", "tags": ["capital"]}"#);
        assert_eq!(verdict(&a, &retyped), Drift::Changed);
        let fenced = facts("```json\n{\"city\": \"Rome\", \"population\": 1, \"tags\": []}\n```");
        assert_eq!(
            verdict(&a, &fenced),
            Drift::Reworded,
            "an empty list agrees"
        );
        let nested = facts(r#"{"city": "Paris", "population": 1, "tags": [{"name": "capital"}]}"#);
        assert_eq!(verdict(&a, &nested), Drift::Changed);
        let prose = facts("Paris, about two million people.");
        assert_eq!(
            judge(Ok(&a), Ok(&prose)).reasons,
            ["the answer is no longer JSON", "text"]
        );
    }
}
