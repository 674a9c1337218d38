//! Structured differences between two key materials: why a request missed its nearest tape.

use serde_json::Value;
use std::fmt;

/// One component that differs between two materials.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// Where: a top-level component (`system_sha256`, `headers.anthropic-version`) or a JSON
    /// path inside the body (`body.messages[1].content`).
    pub path: String,
    /// What changed, with the whole values: a program rendering the difference (a word diff of
    /// two long strings, say) has everything it needs; `Display` shortens them.
    pub change: Change,
}

/// The kind of a difference, with the values as they are in the materials.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Change {
    /// Present in both with different values.
    Changed {
        /// The recorded value.
        old: Value,
        /// The requested value.
        new: Value,
    },
    /// Present only in the new request.
    Added {
        /// The requested value.
        new: Value,
    },
    /// Present only in the recorded request.
    Removed {
        /// The recorded value.
        old: Value,
    },
}

/// One line, values in canonical form and cut to [`MAX_SHOWN`] characters with `…`:
/// `body.temperature: 0 -> 0.7`, `body.seed: added 1`, `body.top_k: removed (was 5)`.
impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path == "system_sha256" {
            return write!(f, "system_sha256 changed");
        }
        match &self.change {
            Change::Changed { old, new } => {
                write!(f, "{}: {} -> {}", self.path, shorten(old), shorten(new))
            }
            Change::Added { new } => write!(f, "{}: added {}", self.path, shorten(new)),
            Change::Removed { old } => write!(f, "{}: removed (was {})", self.path, shorten(old)),
        }
    }
}

/// The `[keying] ignore` paths (`$.messages[*].tool_calls[*].id`), each once, of the body
/// members whose two values in `differences` (between the materials `old` and `new`) look made
/// afresh by the client on every run: strings of one length that share a prefix (`call_`,
/// `pyd_ai_`) and end in a random-looking token (hex, a UUID, letters and digits mixed), and
/// neither of which is found anywhere in the other material (an id the model gave, moved to
/// another place by a list that shifted, is no fresh one). A request holding such a value is
/// never sent twice, so its recording can only be found again once the key leaves the member
/// out. A member whose path has no plain JSONPath spelling is left out.
pub fn made_afresh(old: &Value, new: &Value, differences: &[Difference]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for difference in differences {
        let Change::Changed {
            old: Value::String(was),
            new: Value::String(now),
        } = &difference.change
        else {
            continue;
        };
        if holds(new, was) || holds(old, now) {
            continue;
        }
        if let Some(path) = difference.afresh_path() {
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// Whether `value` holds the string `text` anywhere.
fn holds(value: &Value, text: &str) -> bool {
    match value {
        Value::String(s) => s == text,
        Value::Array(items) => items.iter().any(|v| holds(v, text)),
        Value::Object(members) => members.values().any(|v| holds(v, text)),
        _ => false,
    }
}

impl Difference {
    /// The ignore path of a changed string member whose two values look made afresh (see
    /// [`made_afresh`], which also checks they are not found elsewhere).
    fn afresh_path(&self) -> Option<String> {
        let Change::Changed {
            old: Value::String(old),
            new: Value::String(new),
        } = &self.change
        else {
            return None;
        };
        if old == new || old.len() != new.len() || !old.is_ascii() || !new.is_ascii() {
            return None;
        }
        let shared = old
            .bytes()
            .zip(new.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let (old_rest, new_rest) = (&old[shared..], &new[shared..]);
        if old_rest.len() < 8 || !random_looking(old_rest) || !random_looking(new_rest) {
            return None;
        }
        ignore_path(&self.path)
    }
}

/// Whether `token` looks random: only letters, digits, `-` and `_`, with digits and letters
/// both (`ec239e630d2f`, `4f1c-9a`), never a word.
fn random_looking(token: &str) -> bool {
    token
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        && token.bytes().any(|c| c.is_ascii_digit())
        && token.bytes().any(|c| c.is_ascii_alphabetic())
}

/// A body difference's path (`body.contents[1].parts[0].id`) as the `[keying] ignore` path
/// of the same member in every element (`$.contents[*].parts[*].id`); `None` outside the body
/// or where a member's name is not plain (a name holding `.` would be read as two).
fn ignore_path(path: &str) -> Option<String> {
    let rest = path.strip_prefix("body.")?;
    let mut out = String::from("$");
    for segment in rest.split('.') {
        let (name, mut indexes) = segment.split_at(segment.find('[').unwrap_or(segment.len()));
        if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
            return None;
        }
        out.push('.');
        out.push_str(name);
        while let Some(index) = indexes.strip_prefix('[') {
            let (digits, after) = index.split_once(']')?;
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            out.push_str("[*]");
            indexes = after;
        }
        if !indexes.is_empty() {
            return None;
        }
    }
    crate::JsonPath::parse(&out).ok().map(|p| p.to_string())
}

/// The longest value `Display` shows; longer ones are cut with `…`.
pub const MAX_SHOWN: usize = 80;

/// The differences between a recorded material (`old`) and a requested one (`new`), in a
/// stable order: members by name, depth first, additions after the members both share.
/// An empty list means the two materials give the same key.
pub fn diff(old: &Value, new: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    walk(old, new, String::new(), &mut out);
    out
}

fn walk(old: &Value, new: &Value, path: String, out: &mut Vec<Difference>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            // Sorted here rather than relying on the map's iteration order, which becomes
            // insertion order if any crate in the build enables serde_json's `preserve_order`.
            let mut old_names: Vec<&String> = a.keys().collect();
            old_names.sort();
            let mut new_names: Vec<&String> = b.keys().filter(|n| !a.contains_key(*n)).collect();
            new_names.sort();
            for name in old_names {
                let old_value = &a[name];
                let child = join_member(&path, name);
                match b.get(name) {
                    Some(new_value) => walk(old_value, new_value, child, out),
                    None => out.push(Difference {
                        path: child,
                        change: Change::Removed {
                            old: old_value.clone(),
                        },
                    }),
                }
            }
            for name in new_names {
                out.push(Difference {
                    path: join_member(&path, name),
                    change: Change::Added {
                        new: b[name].clone(),
                    },
                });
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                let child = format!("{path}[{i}]");
                match (a.get(i), b.get(i)) {
                    (Some(x), Some(y)) => walk(x, y, child, out),
                    (Some(x), None) => out.push(Difference {
                        path: child,
                        change: Change::Removed { old: x.clone() },
                    }),
                    (None, Some(y)) => out.push(Difference {
                        path: child,
                        change: Change::Added { new: y.clone() },
                    }),
                    (None, None) => {}
                }
            }
        }
        (a, b) if same_value(a, b) => {}
        (a, b) => out.push(Difference {
            path,
            change: Change::Changed {
                old: a.clone(),
                new: b.clone(),
            },
        }),
    }
}

/// Equality as the key sees it: numbers compare as doubles, so `1` and `1.0` are equal.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn join_member(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// A value in canonical form, cut to [`MAX_SHOWN`] characters with `…`.
pub fn shorten(value: &Value) -> String {
    // The canonical form shows values as the key sees them: `0.0` is `0`.
    let text = crate::to_canonical_string(value);
    if text.chars().count() <= MAX_SHOWN {
        return text;
    }
    let cut: String = text.chars().take(MAX_SHOWN - 1).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_value_made_afresh_names_its_ignore_path() {
        use serde_json::json;
        let changed = |path: &str, old: &str, new: &str| Difference {
            path: path.into(),
            change: Change::Changed {
                old: json!(old),
                new: json!(new),
            },
        };
        let id = changed(
            "body.contents[1].parts[0].function_call.id",
            "call_ec239e630d2f4ef6b1b7e1e9e4eccd58",
            "call_4274a5ec758943acbb1b30e626e326d0",
        );
        assert_eq!(
            id.afresh_path().as_deref(),
            Some("$.contents[*].parts[*].function_call.id")
        );
        let uuid = changed(
            "body.messages[2].tool_call_id",
            "pyd_ai_2f1c9a7e-3b4d-4e5f-8a9b-0c1d2e3f4a5b",
            "pyd_ai_9e8d7c6b-5a4f-4e3d-9c2b-1a0f9e8d7c6b",
        );
        assert_eq!(
            uuid.afresh_path().as_deref(),
            Some("$.messages[*].tool_call_id")
        );
        // Words, a short change, numbers, other lengths, headers: not ids.
        for (path, old, new) in [
            ("body.messages[0].content", "Name a city.", "Name a town."),
            ("body.model", "gpt-4o-mini-2024", "gpt-4o-mini-2025"),
            ("body.messages[0].content", "0.32", "0.33"),
            ("body.user", "abc123def456", "abc123def4567"),
            (
                "headers.x-request-id",
                "req_0123456789ab",
                "req_ba9876543210",
            ),
            ("body.a.b-c", "id_0123456789ab", "id_ba9876543210"),
        ] {
            assert_eq!(changed(path, old, new).afresh_path(), None, "{path}: {old}");
        }
    }

    #[test]
    fn an_id_that_moved_is_not_made_afresh() {
        use serde_json::json;
        // A list shifted by one (a text block dropped before two tool uses): position by
        // position the model's ids differ, but each is still there.
        let old = json!({"body": {"content": [
            {"type": "text", "text": " "},
            {"type": "tool_use", "id": "toolu_01LtHJ8x2kq9ZpVw3mN4bR7y"},
            {"type": "tool_use", "id": "toolu_01N8a4Qe5tY6uI7oP8aS9dF0"}]}});
        let new = json!({"body": {"content": [
            {"type": "tool_use", "id": "toolu_01LtHJ8x2kq9ZpVw3mN4bR7y"},
            {"type": "tool_use", "id": "toolu_01N8a4Qe5tY6uI7oP8aS9dF0"}]}});
        assert_eq!(
            made_afresh(&old, &new, &diff(&old, &new)),
            Vec::<String>::new()
        );
        let fresh = json!({"body": {"content": [
            {"type": "text", "text": " "},
            {"type": "tool_use", "id": "toolu_01LtHJ8x2kq9ZpVw3mN4bR7y"},
            {"type": "tool_use", "id": "toolu_01Zz9y8X7w6V5u4T3s2R1q0P"}]}});
        assert_eq!(
            made_afresh(&old, &fresh, &diff(&old, &fresh)),
            ["$.content[*].id"]
        );
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn reports_paths_and_values() {
        let old = json!({"body": {"temperature": 0, "messages": [{"content": "Where is my refund?"}]}, "system_sha256": "aa"});
        let new = json!({"body": {"temperature": 0.7, "messages": [{"content": "Where's my refund?"}], "seed": 1}, "system_sha256": "bb"});
        let shown: Vec<String> = diff(&old, &new).iter().map(|d| d.to_string()).collect();
        assert_eq!(
            shown,
            [
                "body.messages[0].content: \"Where is my refund?\" -> \"Where's my refund?\"",
                "body.temperature: 0 -> 0.7",
                "body.seed: added 1",
                "system_sha256 changed",
            ]
        );
    }

    #[test]
    fn values_are_shown_in_canonical_form() {
        let d = diff(&json!({"t": 0.0}), &json!({"t": 0.7}));
        assert_eq!(d[0].to_string(), "t: 0 -> 0.7");
    }

    #[test]
    fn equal_numbers_in_other_spellings_do_not_differ() {
        assert!(diff(&json!({"t": 1}), &json!({"t": 1.0})).is_empty());
    }

    #[test]
    fn long_values_are_kept_whole_and_shortened_for_display() {
        let long = "a".repeat(500);
        let d = diff(&json!(long), &json!("b"));
        let Change::Changed { old, .. } = &d[0].change else {
            panic!("expected a change, got {:?}", d[0].change)
        };
        assert_eq!(old, &json!(long), "the difference keeps the whole value");
        let shown = shorten(old);
        assert_eq!(shown.chars().count(), MAX_SHOWN);
        assert!(shown.ends_with('…'));
        assert!(d[0].to_string().contains(&shown));
    }
}
