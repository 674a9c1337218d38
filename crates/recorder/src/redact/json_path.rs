//! User JSON paths (`$.messages[*].content`, `$..email`): parsing them and replacing the values
//! they select.

use super::REDACTED;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Segment {
    Child(String),
    Index(usize),
    Wildcard,
    Descendant(String),
}

pub(super) fn parse_path(path: &str) -> Result<Vec<Segment>, String> {
    let mut rest = path.trim().strip_prefix('$').ok_or("must start with `$`")?;
    let mut segments = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("..") {
            let (name, tail) = take_name(after);
            if name.is_empty() {
                return Err("`..` must be followed by a member name".into());
            }
            if name == "*" {
                return Err("`..*` is not supported; name the member: `..name`".into());
            }
            segments.push(Segment::Descendant(name.to_owned()));
            rest = tail;
        } else if let Some(after) = rest.strip_prefix('.') {
            let (name, tail) = take_name(after);
            match name {
                "" => return Err("`.` must be followed by a member name or `*`".into()),
                "*" => segments.push(Segment::Wildcard),
                _ => segments.push(Segment::Child(name.to_owned())),
            }
            rest = tail;
        } else if let Some(after) = rest.strip_prefix('[') {
            let close = after.find(']').ok_or("unclosed `[`")?;
            let inner = after[..close].trim();
            rest = &after[close + 1..];
            if inner == "*" {
                segments.push(Segment::Wildcard);
            } else if let Some(quoted) = unquote(inner) {
                segments.push(Segment::Child(quoted.to_owned()));
            } else if let Ok(i) = inner.parse::<usize>() {
                segments.push(Segment::Index(i));
            } else {
                return Err(format!(
                    "`[{inner}]` is not an index, `*` or a quoted member name"
                ));
            }
        } else {
            return Err(format!(
                "unexpected `{}`; expected `.name`, `..name` or `[...]`",
                rest.chars().next().unwrap_or(' ')
            ));
        }
    }
    Ok(segments)
}

fn take_name(s: &str) -> (&str, &str) {
    let end = s.find(['.', '[']).unwrap_or(s.len());
    s.split_at(end)
}

fn unquote(s: &str) -> Option<&str> {
    ["'", "\""].iter().find_map(|q| {
        s.strip_prefix(q)
            .and_then(|r| r.strip_suffix(q))
            .filter(|_| s.len() >= 2)
    })
}

/// Replaces every value `segments` selects under `value`; returns whether anything matched.
pub(super) fn apply_path(value: &mut Value, segments: &[Segment]) -> bool {
    let Some((first, rest)) = segments.split_first() else {
        *value = Value::String(REDACTED.to_owned());
        return true;
    };
    match first {
        Segment::Child(name) => match value {
            Value::Object(map) => map.get_mut(name).is_some_and(|c| apply_path(c, rest)),
            _ => false,
        },
        Segment::Index(i) => match value {
            Value::Array(items) => items.get_mut(*i).is_some_and(|c| apply_path(c, rest)),
            _ => false,
        },
        Segment::Wildcard => match value {
            Value::Object(map) => map
                .values_mut()
                .fold(false, |hit, c| apply_path(c, rest) | hit),
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |hit, c| apply_path(c, rest) | hit),
            _ => false,
        },
        Segment::Descendant(name) => {
            let mut hit = false;
            match value {
                Value::Object(map) => {
                    for (key, child) in map.iter_mut() {
                        if key == name {
                            hit |= apply_path(child, rest);
                        }
                        hit |= apply_path(child, segments);
                    }
                }
                Value::Array(items) => {
                    for child in items {
                        hit |= apply_path(child, segments);
                    }
                }
                _ => {}
            }
            hit
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::{RedactError, RedactionRules, Redactor};
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
                Err(e @ RedactError::InvalidJsonPath { .. }) => {
                    assert!(e.to_string().contains(&format!("`{path}`")), "{e}")
                }
                other => panic!("{path}: {other:?}"),
            }
        }
    }
}
