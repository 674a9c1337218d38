//! JUnit reports as CI dashboards read them: the whole document for a run with a pass, a
//! failure and a miss, counted and escaped.

use cassette_grade::junit::{render, Outcome, TestCase};
use cassette_grade::result::CaseResult;

fn result(id: &str, reason: Option<&str>) -> CaseResult {
    let mut result = CaseResult::missed(id.into(), "k".repeat(64), String::new());
    result.summary = None;
    result.reason = reason.map(str::to_owned);
    result
}

#[test]
fn a_run_is_one_document_with_a_testcase_a_case() {
    let cases = [
        TestCase::graded(&result("capital", None), 0.0125),
        TestCase::graded(
            &result(
                "json & <tags>",
                Some("text does not contain \"x\"\nsecond line\u{1}"),
            ),
            0.5,
        ),
        TestCase {
            id: "missed".into(),
            seconds: 0.0,
            outcome: Outcome::Error("cassette miss: key abc".into()),
        },
    ];
    assert_eq!(
        render("suite \"one\"", &cases, 1.25),
        r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="cassette run" tests="3" failures="1" errors="1" time="1.250">
  <testsuite name="suite &quot;one&quot;" tests="3" failures="1" errors="1" time="1.250">
    <testcase classname="suite &quot;one&quot;" name="capital" time="0.013"/>
    <testcase classname="suite &quot;one&quot;" name="json &amp; &lt;tags&gt;" time="0.500">
      <failure message="text does not contain &quot;x&quot;&#10;second line" type="verdict">text does not contain &quot;x&quot;&#10;second line</failure>
    </testcase>
    <testcase classname="suite &quot;one&quot;" name="missed" time="0.000">
      <error message="cassette miss: key abc" type="cassette_miss">cassette miss: key abc</error>
    </testcase>
  </testsuite>
</testsuites>
"#
    );
}

#[test]
fn an_empty_run_is_still_a_document() {
    let xml = render("s", &[], 0.0);
    assert!(xml.contains(r#"<testsuite name="s" tests="0" failures="0" errors="0" time="0.000">"#));
    assert!(xml.ends_with("  </testsuite>\n</testsuites>\n"));
}
