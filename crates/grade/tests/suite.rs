//! Suites parsed from text: every bad line reported with its number and what to change, an
//! empty suite told apart from a bad one, and the two ways a case gives its request.

use cassette_grade::suite::{parse, CHAT_PATH};
use cassette_grade::{BadLine, Error};
use serde_json::Value;

fn bad_lines(text: &str) -> Vec<BadLine> {
    match parse(text) {
        Err(Error::Suite { lines }) => lines,
        other => panic!("not a suite with bad lines: {other:?}"),
    }
}

#[test]
fn every_bad_line_is_reported_with_its_number_and_what_to_change() {
    let suite = [
        "# a suite with one good case",
        r#"{"id":"ok","prompt":"Hi","params":{"model":"m"},"grader":"contains","expect":{"needle":"hi"}}"#,
        "",
        r#"[1, 2]"#,
        r#"{"id":"both","prompt":"Hi","request":{"path":"/x"},"grader":"refusal"}"#,
        r#"{"id":"req","request":{"path":"/x","header":{}},"grader":"refusal"}"#,
        r#"{"id":"params","request":{"path":"/x"},"params":{},"grader":"refusal"}"#,
        r#"{"id":"sys","prompt":"Hi","params":{"model":"m","system":3},"grader":"refusal"}"#,
        r#"{"id":"msgs","prompt":"Hi","params":{"model":"m","messages":[]},"grader":"refusal"}"#,
        r#"{"id":"","prompt":"Hi","params":{"model":"m"},"grader":"refusal"}"#,
        r#"{"id":"list","prompt":"Hi","params":{"model":"m"},"grader":["refusal",{"grader":"contains","expect":{"needle":""}}]}"#,
        r#"{"id":"ok","prompt":"Again","params":{"model":"m"},"grader":"refusal"}"#,
        "// the end",
    ]
    .join("\n");
    let lines = bad_lines(&suite);
    let got: Vec<(usize, &str)> = lines.iter().map(|b| (b.line, b.reason.as_str())).collect();
    let want = [
        (4, "a case is a JSON object"),
        (
            5,
            "case \"both\": give either \"prompt\" or \"request\", not both",
        ),
        (6, "case \"req\": in \"request\": unknown member \"header\""),
        (7, "case \"params\": \"params\" goes with \"prompt\""),
        (8, "case \"sys\": params.system must be a string, found 3"),
        (
            9,
            "case \"msgs\": params.messages conflicts with \"prompt\"",
        ),
        (10, "\"id\" must be a non-empty string, found \"\""),
        (
            11,
            "case \"list\": grader[1]: grader \"contains\": expect.needle must not be empty",
        ),
        (12, "duplicate id \"ok\" (first on line 2)"),
    ];
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for ((line, reason), (want_line, want_reason)) in got.iter().zip(want) {
        assert_eq!(*line, want_line, "{reason}");
        assert!(reason.starts_with(want_reason), "line {line}: {reason}");
    }
    let shown = parse(&suite).unwrap_err().to_string();
    assert!(
        shown.starts_with("the suite has 9 bad line(s):\n  line 4: a case"),
        "{shown}"
    );
}

#[test]
fn a_suite_without_cases_is_empty_not_bad() {
    for text in ["", "\n\n", "# only a comment\n// and another\n   \n"] {
        assert_eq!(parse(text).unwrap_err(), Error::EmptySuite, "{text:?}");
    }
    assert_eq!(Error::EmptySuite.to_string(), "the suite has no cases");
    // A suite whose only lines are bad has bad lines, which is what to fix first.
    let lines = bad_lines("{\"id\":\n");
    assert_eq!(lines[0].line, 1);
    assert!(
        lines[0].reason.starts_with("invalid JSON: "),
        "{:?}",
        lines[0]
    );
}

#[test]
fn a_case_asks_by_the_prompt_shorthand_or_a_full_request() {
    let cases = parse(concat!(
        r#"{"id":7,"prompt":"Hi","params":{"model":"m","system":"Be brief","temperature":0},"grader":"contains","expect":{"needle":"hi"}}"#,
        "\n",
        r#"{"id":"b","request":{"target":"anthropic","path":"/v1/messages?beta=true","headers":{"anthropic-version":"2023-06-01"},"body":{"model":"c"}},"grader":["refusal","length"]}"#,
    ));
    let Err(Error::Suite { lines }) = cases else {
        panic!("length without bounds is refused");
    };
    assert_eq!(lines[0].line, 2);
    assert!(
        lines[0]
            .reason
            .contains("grader[1]: grader \"length\": missing field"),
        "{lines:?}"
    );

    let cases = parse(concat!(
        r#"{"id":7,"prompt":"Hi","params":{"model":"m","system":"Be brief","temperature":0},"grader":"contains","expect":{"needle":"hi"}}"#,
        "\n",
        r#"{"id":"b","request":{"target":"anthropic","path":"/v1/messages?beta=true","headers":{"anthropic-version":"2023-06-01"},"body":{"model":"c"}},"grader":["refusal"]}"#,
    ))
    .unwrap();
    assert_eq!((cases[0].id.as_str(), cases[0].line), ("7", 1));
    let request = &cases[0].request;
    assert_eq!(
        (request.path.as_str(), request.target.as_str()),
        (CHAT_PATH, "default")
    );
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"model": "m", "temperature": 0, "messages": [
            {"role": "system", "content": "Be brief"},
            {"role": "user", "content": "Hi"},
        ]})
    );
    let request = &cases[1].request;
    assert_eq!(
        (
            request.target.as_str(),
            request.path.as_str(),
            request.query.as_str()
        ),
        ("anthropic", "/v1/messages", "beta=true")
    );
    assert_eq!(
        request.headers,
        [("anthropic-version".to_owned(), "2023-06-01".to_owned())]
    );
    assert_eq!(cases[1].graders[0].name, "refusal");
}
