//! The grader registry: graders are looked up by name and configured from a case's `expect`
//! object, never loaded as code. The deterministic graders are in [`deterministic`]; the one
//! that is not, `judge`, asks a model through the recorder and is in [`judge`].

mod deterministic;
mod fields;
pub(crate) mod judge;

pub(crate) use deterministic::Grade;
use fields::Fields;
use judge::JudgeSpec;

use anyhow::{anyhow, Context};
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

type Builder = fn(&Fields) -> anyhow::Result<Check>;

/// Grader names and their builders, in the order `--help` and error messages list them.
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
    ("judge", |f| judge::spec(f).map(Check::Judge)),
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
    let fields = Fields::new(expect);
    builder(&fields).with_context(|| format!("grader {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::{Answer, ToolCall};
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
