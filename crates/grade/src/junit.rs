//! JUnit XML for CI dashboards: one `<testcase>` per case, `<failure>` for a failed verdict and
//! `<error>` for the replay miss that stopped the run.

use crate::result::CaseResult;
use cassette_tape::redact::Redactor;
use std::fmt::Write as _;

/// A case's result as JUnit reports it.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Passed.
    Passed,
    /// Failed, with the reason.
    Failed(String),
    /// Could not be graded (a replay miss), with the message.
    Error(String),
}

/// One `<testcase>`.
#[derive(Debug, Clone)]
pub struct TestCase {
    /// The case id.
    pub id: String,
    /// Seconds the case took.
    pub seconds: f64,
    /// Its result.
    pub outcome: Outcome,
}

impl TestCase {
    /// A case that reached a verdict: passed, or failed with its reason.
    pub fn graded(result: &CaseResult, seconds: f64) -> TestCase {
        TestCase {
            id: result.id.clone(),
            seconds,
            outcome: match &result.reason {
                None => Outcome::Passed,
                Some(reason) => Outcome::Failed(reason.clone()),
            },
        }
    }
}

impl TestCase {
    /// Redacts its id and its message with `redactor` (the recorder's, as the cassettes are),
    /// as the report is written.
    pub fn redact(&mut self, redactor: &Redactor) {
        self.id = redactor.text(&self.id);
        match &mut self.outcome {
            Outcome::Passed => {}
            Outcome::Failed(message) | Outcome::Error(message) => {
                *message = redactor.text(message);
            }
        }
    }
}

/// Renders a JUnit document for the suite `name`.
pub fn render(name: &str, cases: &[TestCase], seconds: f64) -> String {
    let failures = cases
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Failed(_)))
        .count();
    let errors = cases
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Error(_)))
        .count();
    let name = escape(name);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"cassette run\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{seconds:.3}\">",
        cases.len()
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{seconds:.3}\">",
        cases.len()
    );
    for case in cases {
        let id = escape(&case.id);
        let head = format!(
            "    <testcase classname=\"{name}\" name=\"{id}\" time=\"{:.3}\"",
            case.seconds
        );
        match &case.outcome {
            Outcome::Passed => {
                let _ = writeln!(out, "{head}/>");
            }
            Outcome::Failed(reason) => {
                let _ = writeln!(
                    out,
                    "{head}>\n      <failure message=\"{}\" type=\"verdict\">{}</failure>\n    </testcase>",
                    escape(reason),
                    escape(reason)
                );
            }
            Outcome::Error(message) => {
                let _ = writeln!(
                    out,
                    "{head}>\n      <error message=\"{}\" type=\"cassette_miss\">{}</error>\n    </testcase>",
                    escape(message),
                    escape(message)
                );
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Escapes text for an XML attribute or element, dropping characters XML 1.0 cannot hold.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_errors_are_counted_and_escaped() {
        let xml = render(
            "suite<1>",
            &[
                TestCase {
                    id: "a&b".into(),
                    seconds: 0.01,
                    outcome: Outcome::Passed,
                },
                TestCase {
                    id: "c".into(),
                    seconds: 0.0,
                    outcome: Outcome::Failed("text does not contain \"x\"\u{1}".into()),
                },
                TestCase {
                    id: "d".into(),
                    seconds: 0.0,
                    outcome: Outcome::Error("miss".into()),
                },
            ],
            0.5,
        );
        assert!(xml.contains("tests=\"3\" failures=\"1\" errors=\"1\""));
        assert!(xml.contains("name=\"suite&lt;1&gt;\""));
        assert!(xml.contains("name=\"a&amp;b\""));
        assert!(xml.contains("message=\"text does not contain &quot;x&quot;\""));
        assert!(xml.contains("<error message=\"miss\""));
    }
}
