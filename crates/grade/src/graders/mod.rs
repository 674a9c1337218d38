//! The grader registry: graders are looked up by name and configured from a case's `expect`
//! object, never loaded as code. The deterministic graders are in `deterministic.rs`; the ones
//! that are not (`judge`, and `contains_intent`, `not_contains_intent`, `tone` and `grounded`,
//! which are the judge with a fixed criterion) ask a model (see [`crate::judge`]) and are built
//! in `judge.rs`. `cassette run` and `cassette grade` build graders only through here.
//!
//! A case names one grader (`"grader": "contains", "expect": {...}`) or several, each with its
//! own fields (`"grader": [{"grader": "contains", "expect": {...}}, "refusal"]`); all must pass,
//! and the one answer is graded by each. Some graders give a score next to their verdict
//! (`similarity`, `judge`), which `cassette canary` reads.

mod deterministic;
mod fields;
mod judge;
mod schema_bounds;

pub use deterministic::{Grade, Score};
pub use judge::{JudgeSpec, MAX_VOTES};

use crate::error::{bail, Error, Result};
use fields::Fields;
use serde_json::{Map, Value};
use std::fmt;

/// What a case checks once its answer is in.
pub enum Check {
    /// A deterministic grader: same answer, same verdict.
    Local(Box<dyn Grade>),
    /// LLM-as-judge: further requests, through [`crate::judge::Ask`].
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

/// One grader of a case, under the name the suite gave.
#[derive(Debug)]
pub struct Grader {
    /// The registered name.
    pub name: &'static str,
    /// What it checks.
    pub check: Check,
}

type Builder = fn(&Fields) -> Result<Check>;

/// Grader names and their builders, in the order help texts and error messages list them.
const REGISTRY: &[(&str, Builder)] = &[
    ("contains", |f| deterministic::contains(f).map(Check::Local)),
    ("not_contains", |f| {
        deterministic::not_contains(f).map(Check::Local)
    }),
    ("regex", |f| deterministic::regex(f).map(Check::Local)),
    ("equals", |f| deterministic::equals(f).map(Check::Local)),
    ("json_shape", |f| {
        deterministic::json_shape(f).map(Check::Local)
    }),
    ("json_schema", |f| {
        deterministic::json_schema(f).map(Check::Local)
    }),
    ("refusal", |f| deterministic::refusal(f).map(Check::Local)),
    ("tool_called", |f| {
        deterministic::tool_called(f).map(Check::Local)
    }),
    ("similarity", |f| {
        deterministic::similarity(f).map(Check::Local)
    }),
    ("length", |f| deterministic::length(f).map(Check::Local)),
    ("judge", |f| judge::spec(f).map(Check::Judge)),
    ("contains_intent", |f| {
        judge::intent(f, judge::Intent::Present).map(Check::Judge)
    }),
    ("not_contains_intent", |f| {
        judge::intent(f, judge::Intent::Absent).map(Check::Judge)
    }),
    ("tone", |f| judge::tone(f).map(Check::Judge)),
    ("grounded", |f| judge::grounded(f).map(Check::Judge)),
];

/// The registered grader names.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|(name, _)| *name).collect()
}

/// Builds the grader `name` from a case's `expect` object, validating every field now so a
/// bad suite fails before any request is sent.
fn build_named(name: &str, expect: &Map<String, Value>) -> Result<Grader> {
    let (name, builder) = REGISTRY.iter().find(|(n, _)| *n == name).ok_or_else(|| {
        Error::grader(format!(
            "unknown grader {name:?} (known: {})",
            names().join(", ")
        ))
    })?;
    let fields = Fields::new(expect);
    let check = builder(&fields).map_err(|e| e.within(format!("grader {name:?}")))?;
    Ok(Grader { name, check })
}

/// The graders of a case from its `grader` and `expect` members: one name with the case's
/// `expect`, or a list whose items are names (no fields) or `{"grader", "expect"}` objects.
pub fn from_case(grader: Option<&Value>, expect: Option<&Value>) -> Result<Vec<Grader>> {
    let empty = Map::new();
    fn fields<'a>(
        expect: Option<&'a Value>,
        empty: &'a Map<String, Value>,
        at: &str,
    ) -> Result<&'a Map<String, Value>> {
        match expect {
            None | Some(Value::Null) => Ok(empty),
            Some(Value::Object(expect)) => Ok(expect),
            Some(other) => Err(Error::grader(format!(
                "{at} must be an object, found {other}"
            ))),
        }
    }
    match grader {
        Some(Value::String(name)) => build_named(name, fields(expect, &empty, "\"expect\"")?),
        Some(Value::Array(items)) => {
            if expect.is_some_and(|e| !e.is_null()) {
                bail!(grader, "with a list of graders, each takes its own \"expect\": [{{\"grader\": NAME, \"expect\": {{...}}}}, ...]");
            }
            if items.is_empty() {
                bail!(grader, "\"grader\" must name at least one grader");
            }
            return items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let at = format!("grader[{i}]");
                    match item {
                        Value::String(name) => build_named(name, &empty),
                        Value::Object(obj) => {
                            if let Some(unknown) =
                                obj.keys().find(|k| !["grader", "expect"].contains(&k.as_str()))
                            {
                                bail!(grader, "{at}: unknown member {unknown:?} (an item has: grader, expect)");
                            }
                            let Some(Value::String(name)) = obj.get("grader") else {
                                bail!(grader, "{at}: \"grader\" must be a grader name");
                            };
                            build_named(name, fields(obj.get("expect"), &empty, &format!("{at}.expect"))?)
                        }
                        other => bail!(grader, "{at} must be a grader name or {{\"grader\", \"expect\"}}, found {other}"),
                    }
                    .map_err(|e| e.within(&at))
                })
                .collect();
        }
        Some(other) => bail!(grader, "\"grader\" must be a grader name or a list of graders, found {other}"),
        None => bail!(grader, "missing member \"grader\""),
    }
    .map(|grader| vec![grader])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::{Answer, ToolCall};
    use serde_json::json;

    fn grader(name: &str, expect: Value) -> Box<dyn Grade> {
        match build_named(name, expect.as_object().unwrap())
            .unwrap()
            .check
        {
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
    fn similarity_scores_and_length_bounds() {
        let g = grader(
            "similarity",
            json!({"text": "The capital of France is Paris.", "threshold": 0.95}),
        );
        let close = text("Paris is the capital of France.");
        assert!(g.grade(&close).is_ok());
        assert_eq!(
            g.score(&close).map(|s| (s.value, s.threshold)),
            Some((1.0, 0.95))
        );
        let far = text("The capital of France is Lyon.");
        let score = g.score(&far).unwrap();
        assert!(score.value < 0.95, "{score:?}");
        assert!(g.grade(&far).unwrap_err().contains("below 0.95"));
        let g = grader("length", json!({"min_words": 2, "max_chars": 12}));
        assert!(g.grade(&text("two words")).is_ok());
        assert!(g.grade(&text("one")).unwrap_err().contains("fewer than 2"));
        assert!(g
            .grade(&text("far too many words"))
            .unwrap_err()
            .contains("18 characters, more than 12"));
    }

    #[test]
    fn a_case_takes_one_grader_or_a_list() {
        let one = from_case(Some(&json!("contains")), Some(&json!({"needle": "x"}))).unwrap();
        assert_eq!(one.len(), 1);
        let list = json!([{"grader": "contains", "expect": {"needle": "x"}}, "refusal",
                          {"grader": "length", "expect": {"max_words": 3}}]);
        let names: Vec<&str> = from_case(Some(&list), None)
            .unwrap()
            .iter()
            .map(|g| g.name)
            .collect();
        assert_eq!(names, ["contains", "refusal", "length"]);
        for (grader, expect, needle) in [
            (
                json!(["contains"]),
                None,
                "grader[0]: grader \"contains\": missing field expect.needle",
            ),
            (
                json!(["refusal"]),
                Some(json!({"prefix": "no"})),
                "each takes its own",
            ),
            (json!([]), None, "at least one"),
            (
                json!([{"grader": "refusal", "expected": {}}]),
                None,
                "unknown member \"expected\"",
            ),
            (json!([3]), None, "grader[0] must be"),
            (json!(3), None, "a grader name or a list"),
        ] {
            let err = format!(
                "{:#}",
                from_case(Some(&grader), expect.as_ref()).unwrap_err()
            );
            assert!(err.contains(needle), "{grader}: {err}");
        }
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
            (
                "similarity",
                json!({"text": "x", "threshold": 2}),
                "expect.threshold",
            ),
            ("similarity", json!({"threshold": 0.5}), "expect.text"),
            ("length", json!({}), "at least one"),
            (
                "length",
                json!({"min_words": 5, "max_words": 2}),
                "expect.min_words",
            ),
        ] {
            let err = format!(
                "{:#}",
                build_named(name, expect.as_object().unwrap()).unwrap_err()
            );
            assert!(err.contains(needle), "{name}: {err}");
        }
    }
}
