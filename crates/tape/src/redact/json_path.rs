//! User JSON paths (`$.messages[*].content`, `$..email`) in redaction: parsed by the keying
//! crate's pure [`JsonPath`] (one syntax for `[keying] ignore` and `[redact] paths`), every value
//! they select replaced with [`REDACTED`].

use super::REDACTED;
use cassette_keying::JsonPath;
use serde_json::Value;

/// Replaces every value `path` selects under `value`; returns whether anything matched.
pub(super) fn redact_path(value: &mut Value, path: &JsonPath) -> bool {
    let replaced = path.for_each_mut(value, &mut |selected| {
        *selected = Value::String(REDACTED.to_owned());
    });
    replaced > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::{RedactionRules, Redactor};
    use crate::Error;
    use serde_json::json;

    fn with_paths(paths: &[&str]) -> Redactor {
        let rules = RedactionRules {
            json_paths: paths.iter().map(|p| p.to_string()).collect(),
            patterns: vec![],
        };
        match Redactor::new(&rules) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn user_json_paths() {
        let body = json!({
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "hi"}]}
            ],
            "metadata": {"email": "ada@example.com", "plan": "pro", "a.b": 1},
            "nested": [{"deep": {"email": "bob@example.com"}}]
        });
        let cases: Vec<(&str, Value)> = vec![
            (
                "$.messages[*].content",
                json!([
                    {"role": "system", "content": REDACTED},
                    {"role": "user", "content": REDACTED}
                ]),
            ),
            (
                "$.messages[1].content[0].text",
                json!([
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": [{"type": "text", "text": REDACTED}]}
                ]),
            ),
        ];
        for (path, messages) in cases {
            let mut v = body.clone();
            with_paths(&[path]).json(&mut v);
            assert_eq!(v["messages"], messages, "{path}");
            assert_eq!(v["metadata"], body["metadata"], "{path}");
        }

        let mut v = body.clone();
        with_paths(&["$..email"]).json(&mut v);
        assert_eq!(v["metadata"]["email"], REDACTED);
        assert_eq!(v["nested"][0]["deep"]["email"], REDACTED);
        assert_eq!(v["metadata"]["plan"], "pro");

        let mut v = body.clone();
        with_paths(&[
            "$.metadata.email",
            "$['metadata']['a.b']",
            "$.nope.x",
            "$.messages[9]",
        ])
        .json(&mut v);
        assert_eq!(
            v["metadata"],
            json!({"email": REDACTED, "plan": "pro", "a.b": REDACTED})
        );
        assert_eq!(v["messages"], body["messages"]);

        let mut v = body.clone();
        with_paths(&["$.metadata.*"]).json(&mut v);
        assert_eq!(
            v["metadata"],
            json!({"email": REDACTED, "plan": REDACTED, "a.b": REDACTED})
        );

        let mut v = body.clone();
        with_paths(&["$"]).json(&mut v);
        assert_eq!(v, json!(REDACTED));
    }

    #[test]
    fn invalid_json_paths_are_named() {
        for path in ["messages", "$.", "$[", "$[abc]", "$..*", "$..", "$x"] {
            let rules = RedactionRules {
                json_paths: vec![path.to_owned()],
                patterns: vec![],
            };
            match Redactor::new(&rules) {
                Err(e @ Error::InvalidJsonPath { .. }) => {
                    assert!(e.to_string().contains(&format!("`{path}`")), "{e}")
                }
                other => panic!("{path}: {other:?}"),
            }
        }
    }
}
