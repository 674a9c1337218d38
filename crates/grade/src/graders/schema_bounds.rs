//! Bounds on a `json_schema` grader's schema, checked before the validator is built: a suite
//! line must not be able to exhaust the machine. `$ref`s that lead back to where they started
//! without reaching a property or item (`a -> b -> a`) make the validator loop (it exhausted
//! 23 GB on one line, issue 25), and in-place references fanning out (`allOf` of two `$ref`s,
//! twenty levels deep) make each value cost millions of steps; both are refused with the
//! reason, as are schemas too large or too deeply nested.
//!
//! The check walks the schema once, resolving its references inside the document (`#`,
//! `#/json/pointer`, `#anchor`); references elsewhere are refused, since the validator reads
//! no file or URL anyway. The cost of a schema is how many subschemas evaluating it at one
//! value of the answer visits, counting each visit: a recursion through `properties` or
//! `items` (a tree schema) is charged at the next level of the answer, which is itself bounded.

use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// The largest schema, serialized.
pub(super) const MAX_BYTES: usize = 256 << 10;
/// The deepest nesting of a schema document.
pub(super) const MAX_DEPTH: usize = 64;
/// The most subschema visits evaluating one value may take.
pub(super) const MAX_STEPS: u64 = 100_000;
/// The longest chain of references followed while counting.
const MAX_CHAIN: usize = 512;

/// Keywords whose subschemas apply to the same value.
const IN_PLACE: &[&str] = &["allOf", "anyOf", "oneOf", "not", "if", "then", "else"];
/// Keywords whose values are maps of subschemas applying to the same value.
const IN_PLACE_MAPS: &[&str] = &["dependentSchemas", "dependencies"];
/// Keywords whose subschemas apply to a member or element of the value.
const DESCENDING: &[&str] = &[
    "items",
    "additionalItems",
    "prefixItems",
    "contains",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
];
/// Keywords whose values are maps of subschemas applying to members of the value.
const DESCENDING_MAPS: &[&str] = &["properties", "patternProperties"];
/// Reference keywords.
const REFS: &[&str] = &["$ref", "$dynamicRef", "$recursiveRef"];

/// Refuses a schema that is too large, too deep, refers outside itself, or could make the
/// validator loop or take more than [`MAX_STEPS`] per value; the reason says which.
pub(super) fn check(schema: &Value) -> Result<(), String> {
    let bytes = serde_json::to_vec(schema).map_or(usize::MAX, |b| b.len());
    if bytes > MAX_BYTES {
        return Err(format!(
            "the schema is {bytes} bytes; a grader's schema is at most {MAX_BYTES}"
        ));
    }
    let depth = depth(schema);
    if depth > MAX_DEPTH {
        return Err(format!(
            "the schema nests {depth} levels deep; at most {MAX_DEPTH}"
        ));
    }
    let anchors = anchors(schema);
    let mut walk = Walk {
        root: schema,
        anchors,
        memo: HashMap::new(),
        active: HashSet::new(),
    };
    let steps = walk.cost("", schema, &mut Vec::new())?;
    debug_assert!(steps <= MAX_STEPS);
    Ok(())
}

/// The nesting depth of a JSON value, without recursion.
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1)];
    while let Some((value, level)) = stack.pop() {
        deepest = deepest.max(level);
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, level + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, level + 1))),
            _ => {}
        }
    }
    deepest
}

/// `$anchor` and `$dynamicAnchor` names and the pointers of the schemas that declare them.
fn anchors(schema: &Value) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut stack = vec![(schema, String::new())];
    while let Some((value, pointer)) = stack.pop() {
        match value {
            Value::Object(map) => {
                for keyword in ["$anchor", "$dynamicAnchor"] {
                    if let Some(Value::String(name)) = map.get(keyword) {
                        out.entry(name.clone()).or_insert_with(|| pointer.clone());
                    }
                }
                for (name, child) in map {
                    stack.push((child, format!("{pointer}/{}", escape(name))));
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    stack.push((child, format!("{pointer}/{i}")));
                }
            }
            _ => {}
        }
    }
    out
}

/// A member name as a JSON pointer token.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// A pointer as a reader sees it: `#` for the root.
fn shown(pointer: &str) -> String {
    format!("#{pointer}")
}

struct Walk<'a> {
    root: &'a Value,
    anchors: HashMap<String, String>,
    /// Costs of the subschemas counted so far, by pointer.
    memo: HashMap<String, u64>,
    /// Subschemas being counted, anywhere up the walk.
    active: HashSet<String>,
}

impl<'a> Walk<'a> {
    /// How many subschema visits evaluating `schema` (at `pointer`) at one value takes.
    /// `in_place` is the chain of subschemas reached at this same value, to tell a loop.
    fn cost(
        &mut self,
        pointer: &str,
        schema: &'a Value,
        in_place: &mut Vec<String>,
    ) -> Result<u64, String> {
        let Value::Object(map) = schema else {
            return Ok(1);
        };
        if let Some(cost) = self.memo.get(pointer) {
            return Ok(*cost);
        }
        if in_place.len() > MAX_CHAIN {
            return Err(format!(
                "its references chain more than {MAX_CHAIN} subschemas deep at {}",
                shown(pointer)
            ));
        }
        in_place.push(pointer.to_owned());
        self.active.insert(pointer.to_owned());
        let mut total: u64 = 1;
        let add = |total: &mut u64, cost: u64| -> Result<(), String> {
            *total = total.saturating_add(cost);
            if *total > MAX_STEPS {
                return Err(format!(
                    "evaluating it could take more than {MAX_STEPS} steps for one value (its \
                     references fan out: {} and what it refers to are visited that many \
                     times); simplify it",
                    shown(pointer)
                ));
            }
            Ok(())
        };
        for (keyword, value) in map {
            let at = format!("{pointer}/{}", escape(keyword));
            if REFS.contains(&keyword.as_str()) {
                let Value::String(reference) = value else {
                    continue;
                };
                let Some((target_pointer, target)) = self.resolve(reference, keyword)? else {
                    // A meta-schema the validator knows: a bounded, known cost.
                    add(&mut total, 1)?;
                    continue;
                };
                if let Some(start) = in_place.iter().position(|p| *p == target_pointer) {
                    let mut chain: Vec<String> =
                        in_place[start..].iter().map(|p| shown(p)).collect();
                    chain.push(shown(&target_pointer));
                    return Err(format!(
                        "its references loop without reaching a property or item: {} (the \
                         validator would never finish)",
                        chain.join(" -> ")
                    ));
                }
                let cost = if self.active.contains(&target_pointer) {
                    // A recursion through an earlier property or item: charged at the next
                    // level of the answer.
                    1
                } else {
                    self.cost(&target_pointer, target, in_place)?
                };
                add(&mut total, cost)?;
            } else if IN_PLACE.contains(&keyword.as_str()) {
                for (child_at, child) in children(&at, value) {
                    let cost = self.cost(&child_at, child, in_place)?;
                    add(&mut total, cost)?;
                }
            } else if IN_PLACE_MAPS.contains(&keyword.as_str()) {
                for (child_at, child) in members(&at, value) {
                    let cost = self.cost(&child_at, child, in_place)?;
                    add(&mut total, cost)?;
                }
            } else if DESCENDING.contains(&keyword.as_str())
                || DESCENDING_MAPS.contains(&keyword.as_str())
            {
                let subschemas = if DESCENDING_MAPS.contains(&keyword.as_str()) {
                    members(&at, value)
                } else {
                    children(&at, value)
                };
                for (child_at, child) in subschemas {
                    // Another value of the answer: a fresh chain.
                    let cost = self.cost(&child_at, child, &mut Vec::new())?;
                    add(&mut total, cost)?;
                }
            }
        }
        in_place.pop();
        self.active.remove(pointer);
        self.memo.insert(pointer.to_owned(), total);
        Ok(total)
    }

    /// The subschema a reference names: `None` for a JSON Schema meta-schema (which the
    /// validator has built in), an error for anything outside the document.
    fn resolve(
        &self,
        reference: &str,
        keyword: &str,
    ) -> Result<Option<(String, &'a Value)>, String> {
        if reference.starts_with("https://json-schema.org/")
            || reference.starts_with("http://json-schema.org/")
        {
            return Ok(None);
        }
        let outside = || {
            format!(
                "{keyword} {reference:?} points outside the schema; a grader's schema refers \
                 only inside itself (#, #/$defs/NAME or #ANCHOR)"
            )
        };
        let fragment = reference.strip_prefix('#').ok_or_else(outside)?;
        let pointer = if fragment.is_empty() || fragment.starts_with('/') {
            percent_decode(fragment)
        } else {
            self.anchors
                .get(fragment)
                .cloned()
                .ok_or_else(|| format!("{keyword} {reference:?} names no $anchor of the schema"))?
        };
        let target = self
            .root
            .pointer(&pointer)
            .ok_or_else(|| format!("{keyword} {reference:?} points at nothing in the schema"))?;
        Ok(Some((pointer, target)))
    }
}

/// The subschemas of a keyword whose value is a schema or a list of them.
fn children<'v>(at: &str, value: &'v Value) -> Vec<(String, &'v Value)> {
    match value {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("{at}/{i}"), v))
            .collect(),
        other => vec![(at.to_owned(), other)],
    }
}

/// The subschemas of a keyword whose value is a map of them.
fn members<'v>(at: &str, value: &'v Value) -> Vec<(String, &'v Value)> {
    match value {
        Value::Object(map) => map
            .iter()
            .map(|(name, v)| (format!("{at}/{}", escape(name)), v))
            .collect(),
        _ => Vec::new(),
    }
}

/// `%XX` escapes of a URI fragment decoded (a pointer in a `$ref` is written as a URI).
fn percent_decode(text: &str) -> String {
    let hex = |b: u8| char::from(b).to_digit(16);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(schema: Value) -> String {
        check(&schema).expect_err(&schema.to_string())
    }

    #[test]
    fn references_that_loop_in_place_are_refused_naming_the_loop() {
        let err = refused(json!({
            "$ref": "#/$defs/a",
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}
        }));
        assert!(err.contains("loop"), "{err}");
        assert!(err.contains("#/$defs/a -> #/$defs/b -> #/$defs/a"), "{err}");
        for schema in [
            json!({"$ref": "#"}),
            json!({"allOf": [{"$ref": "#"}]}),
            json!({"$defs": {"x": {"$anchor": "x", "anyOf": [{"$ref": "#x"}]}}, "$ref": "#x"}),
            json!({"properties": {"a": {"$ref": "#/$defs/n"}}, "$defs": {"n": {"not": {"$ref": "#/$defs/n"}}}}),
        ] {
            assert!(refused(schema.clone()).contains("loop"), "{schema}");
        }
    }

    #[test]
    fn recursion_through_properties_and_items_is_a_tree_not_a_loop() {
        let tree = json!({
            "$defs": {"node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
                }
            }},
            "$ref": "#/$defs/node"
        });
        assert_eq!(check(&tree), Ok(()));
        assert_eq!(
            check(&json!({"type": "object", "additionalProperties": {"$ref": "#"}})),
            Ok(())
        );
    }

    #[test]
    fn fan_out_beyond_the_budget_is_refused() {
        // Each level asks the next one twice at the same value: 2^30 visits.
        let mut defs = serde_json::Map::new();
        for i in 0..30 {
            defs.insert(
                format!("l{i}"),
                json!({"allOf": [{"$ref": format!("#/$defs/l{}", i + 1)}, {"$ref": format!("#/$defs/l{}", i + 1)}]}),
            );
        }
        defs.insert("l30".into(), json!({"type": "object"}));
        let err = refused(json!({"$defs": defs, "$ref": "#/$defs/l0"}));
        assert!(err.contains(&MAX_STEPS.to_string()), "{err}");
        // Ten levels are 2^10 visits: fine.
        let mut defs = serde_json::Map::new();
        for i in 0..10 {
            defs.insert(
                format!("l{i}"),
                json!({"allOf": [{"$ref": format!("#/$defs/l{}", i + 1)}, {"$ref": format!("#/$defs/l{}", i + 1)}]}),
            );
        }
        defs.insert("l10".into(), json!({"type": "object"}));
        assert_eq!(check(&json!({"$defs": defs, "$ref": "#/$defs/l0"})), Ok(()));
    }

    #[test]
    fn size_depth_and_references_outside_are_refused() {
        let big = json!({"enum": vec!["x".repeat(1000); 300]});
        assert!(refused(big).contains("bytes"));
        let mut deep = json!({"type": "string"});
        for _ in 0..MAX_DEPTH {
            deep = json!({"not": deep});
        }
        assert!(refused(deep).contains("levels deep"));
        for (schema, needle) in [
            (
                json!({"$ref": "https://evil.example/s.json"}),
                "outside the schema",
            ),
            (json!({"$ref": "other.json#/x"}), "outside the schema"),
            (json!({"$ref": "#/$defs/missing"}), "points at nothing"),
            (json!({"$ref": "#nope"}), "no $anchor"),
        ] {
            assert!(refused(schema.clone()).contains(needle), "{schema}");
        }
        // Ordinary schemas pass, with a meta-schema reference and an escaped pointer.
        assert_eq!(
            check(&json!({
                "type": "object",
                "required": ["name", "age"],
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "age": {"type": "integer", "minimum": 0},
                    "a/b": {"$ref": "#/$defs/c~1d"},
                    "meta": {"$ref": "https://json-schema.org/draft/2020-12/schema"}
                },
                "$defs": {"c/d": {"type": "boolean"}}
            })),
            Ok(())
        );
        assert_eq!(check(&json!(true)), Ok(()));
    }
}
