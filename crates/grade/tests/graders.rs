//! Every grader graded with data, no proxy and no model: each deterministic grader passes and
//! fails as `data/graders.jsonl` says, every registered grader is either covered there or a
//! judge grader, and bad expectations are refused naming the field.

mod support;

use cassette_grade::answer::{self, Answer};
use cassette_grade::graders::{self, Check};
use cassette_grade::grading::grade;
use cassette_grade::judge::{JudgeApi, JudgeConfig};
use cassette_keying::Profile;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use support::{now, text_answer, Judge};

/// The lines of `data/graders.jsonl` that are cases, with their line numbers.
fn data() -> Vec<(usize, Value)> {
    include_str!("data/graders.jsonl")
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|(i, line)| {
            let case = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("graders.jsonl:{}: {e}", i + 1));
            (i + 1, case)
        })
        .collect()
}

fn answer_of(case: &Value) -> Answer {
    match (case.get("text"), case.get("response")) {
        (Some(Value::String(text)), None) => text_answer(text),
        (None, Some(response)) => answer::from_json(Profile::Http, response),
        _ => panic!("a case has a text or a response: {case}"),
    }
}

#[test]
fn each_deterministic_grader_passes_and_fails_as_its_data_says() {
    let judge = Judge::new([]);
    let mut covered = BTreeSet::new();
    for (line, case) in data() {
        let at = format!("graders.jsonl:{line}");
        let graders = graders::from_case(case.get("grader"), case.get("expect"))
            .unwrap_or_else(|e| panic!("{at}: {e}"));
        let graded = now(grade(
            &judge,
            &JudgeConfig::new(JudgeApi::Openai),
            &graders,
            &answer_of(&case),
        ))
        .unwrap_or_else(|e| panic!("{at}: a deterministic grader asked the judge: {e:?}"));
        match case.get("fail") {
            None => {
                assert_eq!(case["pass"], true, "{at}: a case passes or fails");
                assert!(graded.passed(), "{at}: {:?}", graded.failures(false));
            }
            Some(Value::String(needle)) => {
                let failures = graded.failures(false);
                assert!(!graded.passed(), "{at}: passed");
                assert!(failures[0].contains(needle.as_str()), "{at}: {failures:?}");
            }
            Some(other) => panic!("{at}: \"fail\" is a piece of the reason, found {other}"),
        }
        if let Some(score) = case.get("score") {
            assert_eq!(json!(graded.scores()[0].score), *score, "{at}");
        }
        covered.insert((graders[0].name, graded.passed()));
    }
    assert!(judge.asked().is_empty());
    for name in graders::names() {
        let deterministic = covered.contains(&(name, true)) || covered.contains(&(name, false));
        if deterministic {
            for passed in [true, false] {
                assert!(
                    covered.contains(&(name, passed)),
                    "{name} has no line in graders.jsonl that {}",
                    if passed { "passes" } else { "fails" }
                );
            }
        } else {
            assert!(
                is_judged(name),
                "{name} is deterministic and has no line in graders.jsonl"
            );
        }
    }
}

/// Whether `name` is a judge grader (it builds, with the fields judge graders take, into a
/// judged check).
fn is_judged(name: &str) -> bool {
    let expect = json!({"criterion": "c", "intent": "i", "tone": "t", "context": "x"});
    let expect: serde_json::Map<String, Value> = expect
        .as_object()
        .unwrap()
        .iter()
        .filter(|(field, _)| match name {
            "judge" => *field == "criterion",
            "tone" => *field == "tone",
            "grounded" => *field == "context",
            _ => *field == "intent",
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    matches!(
        graders::from_case(Some(&json!(name)), Some(&Value::Object(expect))),
        Ok(graders) if matches!(graders[0].check, Check::Judge(_))
    )
}

#[test]
fn several_graders_grade_one_answer_and_name_themselves() {
    let graders = graders::from_case(
        Some(&json!([
            {"grader": "contains", "expect": {"needle": "lyon"}},
            "refusal",
            {"grader": "similarity", "expect": {"text": "Paris is the capital", "threshold": 0.5}},
        ])),
        None,
    )
    .unwrap();
    let graded = now(grade(
        &Judge::new([]),
        &JudgeConfig::new(JudgeApi::Openai),
        &graders,
        &text_answer("Paris is the capital"),
    ))
    .unwrap();
    let failures = graded.failures(true);
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures[0].starts_with("contains: text does not contain \"lyon\""));
    assert!(failures[1].starts_with("refusal: text does not start with a refusal"));
    let scores = graded.scores();
    assert_eq!(
        (scores[0].grader.as_str(), scores[0].score),
        ("similarity", 1.0)
    );
    // The similarity passed: it does not stand for a failed verdict.
    assert!(graded.verdict_score().is_none());
    assert!(graded.judge_tally().is_none() && graded.criteria().is_empty());
}

#[test]
fn bad_expectations_are_refused_naming_what_to_change() {
    for (grader, expect, reason) in [
        (
            json!("contains"),
            json!({"needle": "a", "neddle": "b"}),
            "grader \"contains\": unknown field expect.neddle (this grader takes: needle)",
        ),
        (
            json!("regex"),
            json!({"pattern": "("}),
            "grader \"regex\": expect.pattern \"(\": regex parse error",
        ),
        (
            json!("json_schema"),
            json!({"schema": {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}}),
            "grader \"json_schema\": expect.schema is refused: its references loop",
        ),
        (
            json!("json_schema"),
            json!({"schema": {"type": 3}}),
            "grader \"json_schema\": expect.schema is invalid",
        ),
        (
            json!("judge"),
            json!({"criterion": "polite", "votes": 16}),
            "expect.votes must be a whole number from 0 to 15",
        ),
        (
            json!("vibes"),
            json!({}),
            "unknown grader \"vibes\" (known: contains, ",
        ),
        (
            json!([{"grader": "length", "expect": {"min_words": 3, "max_words": 1}}]),
            Value::Null,
            "grader[0]: grader \"length\": expect.min_words (3) is more than expect.max_words (1)",
        ),
    ] {
        let expect = (!expect.is_null()).then_some(&expect);
        let err = graders::from_case(Some(&grader), expect).unwrap_err();
        assert!(
            matches!(err, cassette_grade::Error::Grader { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains(reason), "{grader}: {err}");
    }
}
