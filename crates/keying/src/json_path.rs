//! JSON paths (`$.messages[*].content`, `$..email`): a small, pure subset of JSONPath, parsed
//! once and applied to `serde_json` values. Keying leaves the values a path selects out of the
//! key (`KeyConfig::ignore`); redaction replaces them before a body is stored.
//!
//! Supported syntax: `$` (the root), `.name`, `['name']` or `["name"]`, `[N]`, `[*]`, `.*` and
//! `..name` (every member called `name`, at any depth). Filters, slices, unions and `..*` are
//! not: a path either names a member or fails to parse, so no rule silently selects nothing.

use serde_json::Value;
use std::fmt;
use std::str::FromStr;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Segment {
    /// `.name` or `['name']`.
    Child(String),
    /// `[N]`.
    Index(usize),
    /// `[*]` or `.*`: every member of an object, every element of an array.
    Wildcard,
    /// `..name`: every member called `name` at any depth below.
    Descendant(String),
}

/// A parsed JSON path. Two spellings of one path (`$.a[*]` and `$['a'].*`) are equal and
/// display alike, in the canonical form [`JsonPath`]'s `Display` writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JsonPath {
    segments: Vec<Segment>,
}

/// A path that does not parse: the path as given and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPathError {
    /// The path as given.
    pub path: String,
    /// What is wrong, and what is expected instead.
    pub reason: String,
}

impl fmt::Display for JsonPathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a supported JSON path: {}",
            self.path, self.reason
        )
    }
}

impl std::error::Error for JsonPathError {}

impl FromStr for JsonPath {
    type Err = JsonPathError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        JsonPath::parse(text)
    }
}

impl JsonPath {
    /// Parses a path (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Result<JsonPath, JsonPathError> {
        parse_segments(text.trim())
            .map(|segments| JsonPath { segments })
            .map_err(|reason| JsonPathError {
                path: text.to_owned(),
                reason,
            })
    }

    /// Whether the path is `$` alone: the whole document.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// Whether removing what the path selects could take the question out of a body: the
    /// whole body, a member named in `question` (or every top-level member), elements of one,
    /// or, inside one, the members named in `text` that carry the prompt's words
    /// (`$.messages[*].content`). Paths that stop at something else inside a question
    /// (`$.messages[*].tool_calls[*].id`) leave it in.
    pub fn may_remove_question(&self, question: &[&str], text: &[&str]) -> bool {
        #[derive(Clone, Copy, PartialEq)]
        enum At {
            Root,
            Question,
            Other,
        }
        let mut at = At::Root;
        for segment in &self.segments {
            at = match (at, segment) {
                // A descendant matches at any depth, the top level included.
                (_, Segment::Descendant(name))
                    if question.contains(&name.as_str()) || text.contains(&name.as_str()) =>
                {
                    At::Question
                }
                (_, Segment::Descendant(_)) => At::Other,
                (At::Root, Segment::Child(name)) if question.contains(&name.as_str()) => {
                    At::Question
                }
                (At::Root, Segment::Wildcard) => At::Question,
                (At::Question, Segment::Index(_) | Segment::Wildcard) => At::Question,
                (At::Question, Segment::Child(name)) if text.contains(&name.as_str()) => {
                    At::Question
                }
                _ => At::Other,
            };
        }
        at != At::Other
    }

    /// Calls `f` on every value the path selects under `value`; returns how many there were.
    pub fn for_each_mut(&self, value: &mut Value, f: &mut dyn FnMut(&mut Value)) -> usize {
        visit(value, &self.segments, f)
    }

    /// Removes every value the path selects under `value` from its object or array; returns
    /// how many were removed. The root itself (`$`) cannot be removed: nothing happens.
    pub fn remove(&self, value: &mut Value) -> usize {
        match self.segments.split_last() {
            None => 0,
            Some((last, parents)) => {
                let mut removed = 0;
                visit(value, parents, &mut |parent| {
                    removed += remove_child(parent, last);
                });
                removed
            }
        }
    }
}

impl fmt::Display for JsonPath {
    /// The canonical spelling: `.name` for plain names, `['name']` otherwise, `[N]`, `[*]`,
    /// `..name`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("$")?;
        for segment in &self.segments {
            match segment {
                Segment::Child(name) if is_plain(name) => write!(f, ".{name}")?,
                Segment::Child(name) => write!(f, "['{name}']")?,
                Segment::Index(i) => write!(f, "[{i}]")?,
                Segment::Wildcard => f.write_str("[*]")?,
                Segment::Descendant(name) => write!(f, "..{name}")?,
            }
        }
        Ok(())
    }
}

/// Whether a member name can be written after a `.` and read back as the same name.
fn is_plain(name: &str) -> bool {
    !name.is_empty()
        && name != "*"
        && !name.contains(['.', '[', ']', '\'', '"'])
        && !name.starts_with(char::is_whitespace)
        && !name.ends_with(char::is_whitespace)
}

fn parse_segments(text: &str) -> Result<Vec<Segment>, String> {
    let mut rest = text.strip_prefix('$').ok_or("it must start with `$`")?;
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

/// Calls `f` on every value `segments` selects under `value`; returns how many.
fn visit(value: &mut Value, segments: &[Segment], f: &mut dyn FnMut(&mut Value)) -> usize {
    let Some((first, rest)) = segments.split_first() else {
        f(value);
        return 1;
    };
    match (first, value) {
        (Segment::Child(name), Value::Object(map)) => {
            map.get_mut(name).map_or(0, |child| visit(child, rest, f))
        }
        (Segment::Index(i), Value::Array(items)) => {
            items.get_mut(*i).map_or(0, |child| visit(child, rest, f))
        }
        (Segment::Wildcard, Value::Object(map)) => {
            map.values_mut().map(|child| visit(child, rest, f)).sum()
        }
        (Segment::Wildcard, Value::Array(items)) => {
            items.iter_mut().map(|child| visit(child, rest, f)).sum()
        }
        (Segment::Descendant(name), Value::Object(map)) => {
            let mut n = 0;
            for (key, child) in map.iter_mut() {
                if key == name {
                    n += visit(child, rest, f);
                }
                n += visit(child, segments, f);
            }
            n
        }
        (Segment::Descendant(_), Value::Array(items)) => items
            .iter_mut()
            .map(|child| visit(child, segments, f))
            .sum(),
        _ => 0,
    }
}

/// Removes what `last` selects directly under `parent`; returns how many values went.
fn remove_child(parent: &mut Value, last: &Segment) -> usize {
    match (last, parent) {
        (Segment::Child(name), Value::Object(map)) => usize::from(map.remove(name).is_some()),
        (Segment::Index(i), Value::Array(items)) if *i < items.len() => {
            items.remove(*i);
            1
        }
        (Segment::Wildcard, Value::Object(map)) => {
            let n = map.len();
            map.clear();
            n
        }
        (Segment::Wildcard, Value::Array(items)) => {
            let n = items.len();
            items.clear();
            n
        }
        (Segment::Descendant(name), value) => remove_descendants(value, name),
        _ => 0,
    }
}

/// Removes every member called `name` at any depth under `value`.
fn remove_descendants(value: &mut Value, name: &str) -> usize {
    match value {
        Value::Object(map) => {
            let mut n = usize::from(map.remove(name).is_some());
            for child in map.values_mut() {
                n += remove_descendants(child, name);
            }
            n
        }
        Value::Array(items) => items
            .iter_mut()
            .map(|child| remove_descendants(child, name))
            .sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(text: &str) -> JsonPath {
        JsonPath::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn spellings_of_one_path_are_equal_and_display_canonically() {
        assert_eq!(path("$.a[*].b"), path(" $['a'].*[\"b\"] "));
        assert_eq!(path("$.a[*].b").to_string(), "$.a[*].b");
        assert_eq!(path("$['x.y'][0]..id").to_string(), "$['x.y'][0]..id");
        assert_eq!(path("$").to_string(), "$");
        assert!(path("$").is_root());
    }

    #[test]
    fn bad_paths_say_what_is_wrong() {
        for (text, needle) in [
            ("a.b", "must start with `$`"),
            ("$.", "member name or `*`"),
            ("$..", "member name"),
            ("$..*", "`..*`"),
            ("$[1", "unclosed"),
            ("$[?(@.a)]", "not an index"),
            ("$a", "unexpected `a`"),
        ] {
            let err = JsonPath::parse(text).unwrap_err();
            assert_eq!(err.path, text);
            assert!(err.to_string().contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn selected_values_are_visited() {
        let mut doc = json!({"a": [{"id": 1}, {"id": 2, "x": {"id": 3}}], "id": 4});
        let mut seen = Vec::new();
        let n = path("$..id").for_each_mut(&mut doc, &mut |v| seen.push(v.clone()));
        assert_eq!(n, 4);
        seen.sort_by_key(|v| v.as_i64());
        assert_eq!(seen, [json!(1), json!(2), json!(3), json!(4)]);
        assert_eq!(path("$.missing.id").for_each_mut(&mut doc, &mut |_| {}), 0);
    }

    #[test]
    fn paths_that_could_remove_the_question_are_told_apart() {
        let question = ["model", "messages", "contents"];
        let text = ["content", "text", "parts"];
        for bad in [
            "$",
            "$.*",
            "$[*]",
            "$.messages",
            "$['model']",
            "$..messages",
            "$..model",
            "$.messages[*]",
            "$.messages[0]",
            "$.messages[*].content",
            "$.messages[*].content[*].text",
            "$.contents[*].parts",
            "$.contents[*].parts[*].text",
            "$..content",
            "$..text",
            "$.metadata..messages",
        ] {
            assert!(path(bad).may_remove_question(&question, &text), "{bad}");
        }
        for good in [
            "$.messages[*].tool_calls[*].id",
            "$.contents[*].parts[*].functionCall.id",
            "$..call_id",
            "$.seed",
            "$.*.id",
            "$.metadata.content",
            "$.messages[*].name",
        ] {
            assert!(!path(good).may_remove_question(&question, &text), "{good}");
        }
    }

    #[test]
    fn removal_takes_members_and_elements_out() {
        let mut doc = json!({
            "contents": [
                {"parts": [{"functionCall": {"id": "pyd_ai_1", "name": "f"}}, {"text": "hi"}]},
                {"parts": [{"functionCall": {"id": "pyd_ai_2", "name": "g"}}]}
            ],
            "list": [1, 2, 3]
        });
        let removed = path("$.contents[*].parts[*].functionCall.id").remove(&mut doc);
        assert_eq!(removed, 2);
        assert_eq!(
            doc["contents"][0]["parts"][0]["functionCall"],
            json!({"name": "f"})
        );
        assert_eq!(path("$.list[1]").remove(&mut doc), 1);
        assert_eq!(doc["list"], json!([1, 3]));
        assert_eq!(path("$.list[7]").remove(&mut doc), 0);
        assert_eq!(path("$.list[*]").remove(&mut doc), 2);
        assert_eq!(doc["list"], json!([]));
        assert_eq!(path("$..name").remove(&mut doc), 2);
        assert_eq!(doc["contents"][1]["parts"][0]["functionCall"], json!({}));
        let before = doc.clone();
        assert_eq!(path("$").remove(&mut doc), 0);
        assert_eq!(doc, before);
    }
}
