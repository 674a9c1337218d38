//! The grader registry: graders are looked up by name and configured from a case's `expect`
//! object, never loaded as code. Every grader here is deterministic; the one that is not
//! (`judge`) lives in [`super::judge`] and is only described here.

use super::judge::JudgeSpec;
use crate::answer::Answer;
use anyhow::{anyhow, bail, Context};
use regex::Regex;
use serde_json::{Map, Value};
use std::fmt;

/// What a case checks once its answer is in.
pub(crate) enum Check {
    /// A deterministic grader: same answer, same verdict.
    Local(Box<dyn Grade>),
    /// LLM-as-judge: a further request through the recorder.
    Judge(JudgeSpec),
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Local(_) => f.write_str("Local(..)"),
            Check::Judge(spec) => f.debug_tuple("Judge").field(spec).finish(),
        }
    }
}

/// A deterministic grader.
pub(crate) trait Grade: Send + Sync {
    /// `Ok(())` when the answer passes, else the reason it failed.
    fn grade(&self, answer: &Answer) -> Result<(), String>;
}

type Builder = fn(&Fields) -> anyhow::Result<Check>;

/// Grader names and their builders, in the order `--help` and error messages list them.
const REGISTRY: &[(&str, Builder)] = &[
    ("contains", contains),
    ("not_contains", not_contains),
    ("regex", regex),
    ("equals", equals),
    ("json_shape", json_shape),
    ("json_schema", json_schema),
    ("refusal", refusal),
    ("tool_called", tool_called),
    ("judge", judge),
];

/// The registered grader names.
pub(crate) fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|(name, _)| *name).collect()
}

/// Builds the grader `name` from a case's `expect` object, validating every field now so a
/// bad suite fails before any request is sent.
pub(crate) fn build(name: &str, expect: &Map<String, Value>) -> anyhow::Result<Check> {
    let (_, builder) = REGISTRY
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| anyhow!("unknown grader {name:?} (known: {})", names().join(", ")))?;
    let fields = Fields { expect };
    builder(&fields).with_context(|| format!("grader {name:?}"))
}

/// Typed access to `expect`, with errors that name the field.
struct Fields<'a> {
    expect: &'a Map<String, Value>,
}

impl Fields<'_> {
    fn only(&self, allowed: &[&str]) -> anyhow::Result<()> {
        if let Some(unknown) = self.expect.keys().find(|k| !allowed.contains(&k.as_str())) {
            bail!(
                "unknown field expect.{unknown} (this grader takes: {})",
                allowed.join(", ")
            );
        }
        Ok(())
    }

    fn string(&self, name: &str) -> anyhow::Result<String> {
        self.optional_string(name)?
            .ok_or_else(|| anyhow!("missing field expect.{name}"))
    }

    fn optional_string(&self, name: &str) -> anyhow::Result<Option<String>> {
        match self.expect.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => bail!("expect.{name} must be a string, found {other}"),
        }
    }

    fn optional_count(&self, name: &str, max: u64) -> anyhow::Result<Option<u64>> {
        match self.expect.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n <= max => Ok(Some(n)),
                _ => bail!("expect.{name} must be a whole number from 0 to {max}, found {v}"),
            },
        }
    }
}

struct Contains {
    needle: String,
    negate: bool,
}

impl Grade for Contains {
    fn grade(&self, answer: &Answer) -> Result<(), String> {
        let found = answer.text.to_lowercase().contains(&self.needle);
        match (found, self.negate) {
            (true, false) | (false, true) => Ok(()),
            (false, false) => Err(format!("text does not contain {:?}", self.needle)),
            (true, true) => Err(format!("text contains {:?}", self.needle)),
        }
    }
}

fn contains(f: &Fields) -> anyhow::Result<Check> {
    contains_like(f, false)
}

fn not_contains(f: &Fields) -> anyhow::Result<Check> {
    contains_like(f, true)
}

fn contains_like(f: &Fields, negate: bool) -> anyhow::Result<Check> {
    f.only(&["needle"])?;
    let needle = f.string("needle")?.to_lowercase();
    if needle.is_empty() {
        bail!("expect.needle must not be empty");
    }
    Ok(Check::Local(Box::new(Contains { needle, negate })))
}

struct Matches(Regex);

impl Grade for Matches {
    fn grade(&self, answer: &Answer) -> Result<(), String> {
        if self.0.is_match(&answer.text) {
            Ok(())
        } else {
            Err(format!("text does not match /{}/", self.0.as_str()))
        }
    }
}

fn regex(f: &Fields) -> anyhow::Result<Check> {
    f.only(&["pattern"])?;
    let pattern = f.string("pattern")?;
    let regex = Regex::new(&pattern).with_context(|| format!("expect.pattern {pattern:?}"))?;
    Ok(Check::Local(Box::new(Matches(regex))))
}

struct Equals(String);

impl Grade for Equals {
    fn grade(&self, answer: &Answer) -> Result<(), String> {
        if answer.text.trim() == self.0 {
            Ok(())
        } else {
            Err(format!(
                "text {:?} is not {:?}",
                shorten(answer.text.trim()),
                self.0
            ))
        }
    }
}

fn equals(f: &Fields) -> anyhow::Result<Check> {
    f.only(&["value"])?;
    Ok(Check::Local(Box::new(Equals(
        f.string("value")?.trim().to_owned(),
    ))))
}

/// The JSON an answer holds: the whole text, or the inside of one fenced code block, because
/// models wrap JSON in ```json fences even when asked not to.
fn answer_json(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if let Ok(value) = serde_json::from_str(trimmed) {
        return Ok(value);
    }
    let fenced = trimmed
        .strip_prefix("```")
        .and_then(|rest| rest.strip_suffix("```"))
        .map(|inner| inner.trim_start_matches("json").trim());
    match fenced.map(serde_json::from_str::<Value>) {
        Some(Ok(value)) => Ok(value),
        _ => Err(format!("text is not JSON: {:?}", shorten(trimmed))),
    }
}

struct Shape(Vec<String>);

impl Grade for Shape {
    fn grade(&self, answer: &Answer) -> Result<(), String> {
        let value = answer_json(&answer.text)?;
        let Value::Object(object) = value else {
            return Err("the JSON is not an object".to_owned());
        };
        let missing: Vec<&str> = self
            .0
            .iter()
            .filter(|k| !object.contains_key(*k))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("the JSON object lacks {}", missing.join(", ")))
        }
    }
}

fn json_shape(f: &Fields) -> anyhow::Result<Check> {
    f.only(&["keys"])?;
    let keys = match f.expect.get("keys") {
        Some(Value::Array(keys)) => keys
            .iter()
            .map(|k| {
                k.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| anyhow!("expect.keys must hold strings, found {k}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?,
        Some(other) => bail!("expect.keys must be a list of strings, found {other}"),
        None => bail!("missing field expect.keys"),
    };
    Ok(Check::Local(Box::new(Shape(keys))))
}

struct Schema(jsonschema::Validator);

impl Grade for Schema {
    fn grade(&self, answer: &Answer) -> Result<(), String> {
        let value = answer_json(&answer.text)?;
        let errors: Vec<String> = self
            .0
            .iter_errors(&value)
            .take(3)
            .map(|e| {
                let at = e.instance_path.to_string();
                format!("{}: {e}", if at.is_empty() { "/" } else { &at })
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!("schema violations: {}", errors.join("; ")))
        }
    }
}

fn json_schema(f: &Fields) -> anyhow::Result<Check> {
    f.only(&["schema"])?;
    let schema = f
        .expect
        .get("schema")
        .ok_or_else(|| anyhow!("missing field expect.schema"))?;
    if !schema.is_object() && !schema.is_boolean() {
        bail!("expect.schema must be a JSON Schema object, found {schema}");
    }
    let validator =
        jsonschema::validator_for(schema).map_err(|e| anyhow!("expect.schema is invalid: {e}"))?;
    Ok(Check::Local(Box::new(Schema(validator))))
}

/// Openings that mark a refusal when a case names none.
const REFUSAL_PREFIXES: &[&str] = &[
    "i can't",
    "i cannot",
    "i can not",
    "i won't",
    "i will not",
    "i'm sorry",
    "i am sorry",
    "sorry, i",
    "i'm not able",
    "i am not able",
    "i'm unable",
    "i am unable",
];

struct Refusal(Vec<String>);

impl Grade for Refusal {
    fn grade(&self, answer: &Answer) -> Result<(), String> {
        // Models use typographic apostrophes as often as straight ones.
        let text = answer
            .text
            .trim_start()
            .replace('\u{2019}', "'")
            .to_lowercase();
        if self.0.iter().any(|p| text.starts_with(p.as_str())) {
            Ok(())
        } else {
            Err(format!(
                "text does not start with a refusal ({}): {:?}",
                self.0.join(" | "),
                shorten(answer.text.trim())
            ))
        }
    }
}

fn refusal(f: &Fields) -> anyhow::Result<Check> {
    f.only(&["prefix"])?;
    let prefixes = match f.expect.get("prefix") {
        None | Some(Value::Null) => REFUSAL_PREFIXES.iter().map(|p| (*p).to_owned()).collect(),
        Some(Value::String(p)) => vec![p.clone()],
        Some(Value::Array(ps)) => ps
            .iter()
            .map(|p| {
                p.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| anyhow!("expect.prefix must hold strings, found {p}"))
            })
            .collect::<anyhow::Result<_>>()?,
        Some(other) => bail!("expect.prefix must be a string or a list of strings, found {other}"),
    };
    let prefixes: Vec<String> = prefixes
        .into_iter()
        .map(|p: String| p.replace('\u{2019}', "'").to_lowercase())
        .collect();
    if prefixes.iter().any(String::is_empty) {
        bail!("expect.prefix must not be empty");
    }
    Ok(Check::Local(Box::new(Refusal(prefixes))))
}

struct ToolCalled {
    name: String,
    arguments: Option<Value>,
    times: Option<u64>,
}

impl Grade for ToolCalled {
    fn grade(&self, answer: &Answer) -> Result<(), String> {
        let matching = answer
            .tool_calls
            .iter()
            .filter(|c| c.name == self.name)
            .filter(|c| {
                self.arguments
                    .as_ref()
                    .is_none_or(|a| is_subset(a, &c.arguments))
            })
            .count() as u64;
        let ok = match self.times {
            Some(times) => matching == times,
            None => matching > 0,
        };
        if ok {
            return Ok(());
        }
        let called: Vec<String> = answer
            .tool_calls
            .iter()
            .map(|c| format!("{}({})", c.name, c.arguments))
            .collect();
        let wanted = match &self.arguments {
            Some(a) => format!("{} with arguments including {a}", self.name),
            None => self.name.clone(),
        };
        let times = self
            .times
            .map_or("at least once".to_owned(), |t| format!("{t} times"));
        Err(format!(
            "expected {wanted} called {times}, found {matching} matching call(s) among [{}]",
            called.join(", ")
        ))
    }
}

/// Whether `expected` is contained in `actual`: objects by member, recursively; everything
/// else by equality (numbers by value, so `1` matches `1.0`).
fn is_subset(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| is_subset(v, av))),
        (Value::Number(e), Value::Number(a)) => e.as_f64() == a.as_f64(),
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(x, y)| is_subset(x, y))
        }
        _ => expected == actual,
    }
}

fn tool_called(f: &Fields) -> anyhow::Result<Check> {
    f.only(&["name", "arguments", "times"])?;
    let arguments = match f.expect.get("arguments") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v.clone()),
        Some(other) => bail!("expect.arguments must be an object, found {other}"),
    };
    Ok(Check::Local(Box::new(ToolCalled {
        name: f.string("name")?,
        arguments,
        times: f.optional_count("times", 1000)?,
    })))
}

fn judge(f: &Fields) -> anyhow::Result<Check> {
    f.only(&["criterion", "context", "votes", "model"])?;
    let criterion = f.string("criterion")?;
    if criterion.trim().is_empty() {
        bail!("expect.criterion must not be empty");
    }
    let votes = f
        .optional_count("votes", super::judge::MAX_VOTES)?
        .unwrap_or(1);
    if votes == 0 {
        bail!("expect.votes must be at least 1");
    }
    Ok(Check::Judge(JudgeSpec {
        criterion,
        context: f.optional_string("context")?,
        votes: votes as u32,
        model: f.optional_string("model")?,
    }))
}

/// A prefix of `text` short enough for a one-line reason.
pub(crate) fn shorten(text: &str) -> String {
    const MAX: usize = 120;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::ToolCall;
    use serde_json::json;

    fn grader(name: &str, expect: Value) -> Box<dyn Grade> {
        match build(name, expect.as_object().unwrap()).unwrap() {
            Check::Local(g) => g,
            Check::Judge(_) => panic!("not a local grader"),
        }
    }

    fn text(t: &str) -> Answer {
        Answer {
            text: t.to_owned(),
            ..Answer::default()
        }
    }

    #[test]
    fn text_graders_pass_and_fail() {
        let g = grader("contains", json!({"needle": "PARIS"}));
        assert!(g.grade(&text("It is Paris.")).is_ok());
        assert!(g.grade(&text("Lyon")).unwrap_err().contains("paris"));
        let g = grader("not_contains", json!({"needle": "sorry"}));
        assert!(g.grade(&text("Sure")).is_ok());
        assert!(g.grade(&text("Sorry!")).is_err());
        let g = grader("regex", json!({"pattern": "^\\d{4}$"}));
        assert!(g.grade(&text("1969")).is_ok());
        assert!(g.grade(&text("in 1969")).is_err());
        let g = grader("equals", json!({"value": "4"}));
        assert!(g.grade(&text(" 4\n")).is_ok());
        assert!(g.grade(&text("four")).is_err());
        let g = grader("refusal", json!({}));
        assert!(g.grade(&text("I\u{2019}m sorry, I can't help")).is_ok());
        assert!(g.grade(&text("Here is how")).is_err());
    }

    #[test]
    fn json_graders_read_fenced_json() {
        let g = grader("json_shape", json!({"keys": ["name", "age"]}));
        assert!(g
            .grade(&text("```json\n{\"name\":\"a\",\"age\":3}\n```"))
            .is_ok());
        assert!(g
            .grade(&text("{\"name\":\"a\"}"))
            .unwrap_err()
            .contains("age"));
        assert!(g.grade(&text("not json")).is_err());
        let g = grader(
            "json_schema",
            json!({"schema": {"type": "object", "required": ["n"],
                              "properties": {"n": {"type": "integer"}}}}),
        );
        assert!(g.grade(&text("{\"n\": 3}")).is_ok());
        assert!(g.grade(&text("{\"n\": \"3\"}")).unwrap_err().contains("/n"));
    }

    #[test]
    fn tool_called_matches_arguments_as_a_subset() {
        let answer = Answer {
            tool_calls: vec![ToolCall {
                id: None,
                name: "get_weather".into(),
                arguments: json!({"city": "Paris", "unit": "c", "days": 1}),
            }],
            ..Answer::default()
        };
        let pass = grader(
            "tool_called",
            json!({"name": "get_weather", "arguments": {"city": "Paris", "days": 1.0}}),
        );
        assert!(pass.grade(&answer).is_ok());
        let wrong_city = grader(
            "tool_called",
            json!({"name": "get_weather", "arguments": {"city": "Rome"}}),
        );
        assert!(wrong_city.grade(&answer).unwrap_err().contains("Rome"));
        let twice = grader("tool_called", json!({"name": "get_weather", "times": 2}));
        assert!(twice.grade(&answer).is_err());
        assert!(grader("tool_called", json!({"name": "other"}))
            .grade(&answer)
            .is_err());
    }

    #[test]
    fn bad_expectations_name_the_field() {
        for (name, expect, needle) in [
            ("contains", json!({}), "expect.needle"),
            (
                "contains",
                json!({"needle": "a", "neddle": "b"}),
                "expect.neddle",
            ),
            ("regex", json!({"pattern": "("}), "expect.pattern"),
            (
                "json_schema",
                json!({"schema": {"type": 3}}),
                "expect.schema",
            ),
            ("judge", json!({"votes": 3}), "expect.criterion"),
            (
                "judge",
                json!({"criterion": "x", "votes": 0}),
                "expect.votes",
            ),
            ("nope", json!({}), "unknown grader"),
        ] {
            let err = format!(
                "{:#}",
                build(name, expect.as_object().unwrap()).unwrap_err()
            );
            assert!(err.contains(needle), "{name}: {err}");
        }
    }
}
