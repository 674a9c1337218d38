//! A JSON answer written in the member order of the text it was read from: `serde_json::Value`
//! sorts members (its `preserve_order` feature stays off, as turning it on would change it for
//! every crate of the build), so a redacted answer takes its order from the upstream's text.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// The shape of a JSON text: only the member names and their order, nothing of the values.
enum Shape {
    Leaf,
    List(Vec<Shape>),
    Map(Vec<(String, Shape)>),
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Shape, D::Error> {
        deserializer.deserialize_any(ShapeVisitor)
    }
}

struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Shape;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
        Ok(Shape::Leaf)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
        Ok(Shape::Leaf)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
        Ok(Shape::Leaf)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
        Ok(Shape::Leaf)
    }

    fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
        Ok(Shape::Leaf)
    }

    fn visit_unit<E>(self) -> Result<Shape, E> {
        Ok(Shape::Leaf)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Shape::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
        let mut members = Vec::new();
        while let Some((name, shape)) = map.next_entry::<String, Shape>()? {
            members.push((name, shape));
        }
        Ok(Shape::Map(members))
    }
}

/// `value` as compact JSON, its members in the order `original` (the text it was read from,
/// before redaction) has them; members `original` lacks come after, sorted. `None` when
/// `original` is not JSON.
pub(crate) fn in_order_of(original: &str, value: &Value) -> Option<String> {
    let shape: Shape = serde_json::from_str(original).ok()?;
    let mut out = String::with_capacity(original.len());
    write(value, Some(&shape), &mut out);
    Some(out)
}

fn write(value: &Value, shape: Option<&Shape>, out: &mut String) {
    match value {
        Value::Object(members) => {
            let guide: &[(String, Shape)] = match shape {
                Some(Shape::Map(guide)) => guide,
                _ => &[],
            };
            out.push('{');
            let mut first = true;
            let mut written = std::collections::HashSet::new();
            let ordered = guide
                .iter()
                .filter_map(|(name, shape)| Some((name, members.get(name)?, Some(shape))));
            let rest = members.iter().map(|(name, value)| (name, value, None));
            for (name, value, shape) in ordered.chain(rest) {
                if !written.insert(name.as_str()) {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                out.push_str(&Value::from(name.as_str()).to_string());
                out.push(':');
                write(value, shape, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            let guide: &[Shape] = match shape {
                Some(Shape::List(guide)) => guide,
                _ => &[],
            };
            out.push('[');
            for (at, item) in items.iter().enumerate() {
                if at > 0 {
                    out.push(',');
                }
                write(item, guide.get(at), out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_follow_the_original_order_and_new_ones_come_last() {
        let original =
            r#"{"id": "c-1", "object": "x", "choices": [{"text": "sk", "index": 0}], "b": 1}"#;
        let mut value: Value = serde_json::from_str(original).unwrap();
        value["choices"][0]["text"] = "[REDACTED]".into();
        value["a"] = 2.into();
        assert_eq!(
            in_order_of(original, &value).unwrap(),
            r#"{"id":"c-1","object":"x","choices":[{"text":"[REDACTED]","index":0}],"b":1,"a":2}"#
        );
        assert_eq!(in_order_of("not json", &value), None);
    }
}
