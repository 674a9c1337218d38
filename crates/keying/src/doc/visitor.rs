//! The parser of record: `serde_json`'s own, driving a visitor that builds a [`Doc`]. Used
//! for every body the fast scanner gives up on, so whether a body is JSON at all is always
//! decided by `serde_json`, as the key contract says.

use super::{Context, Doc, Node, Text};
use crate::jcs::{self, Lines};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// Parses `text` into `doc` with `serde_json`; `None` when it rejects the text.
pub(super) fn parse<'a>(text: &'a str, context: Context, doc: &mut Doc<'a>) -> Option<()> {
    let mut de = serde_json::Deserializer::from_str(text);
    NodeSeed { doc, context }.deserialize(&mut de).ok()?;
    de.end().ok()
}

struct NodeSeed<'d, 'a> {
    doc: &'d mut Doc<'a>,
    context: Context,
}

impl<'a> NodeSeed<'_, 'a> {
    fn push(self, node: Node<'a>) {
        self.doc.nodes.push(node);
    }

    /// Keeps a string (copied: this is the slow path, and `serde_json` has already decoded
    /// the string's escapes, if any).
    fn text(self, s: &str) {
        let texts = &mut self.doc.texts;
        let start = texts.len();
        let text = match self.context {
            Context::Name => {
                texts.push_str(s);
                Text::Name {
                    start,
                    end: texts.len(),
                }
            }
            context => {
                let lines = if context == Context::Prompt {
                    Lines::StripTrailingWhitespace
                } else {
                    Lines::Keep
                };
                texts.push('"');
                jcs::write_escaped(texts, s, lines);
                texts.push('"');
                Text::Canonical {
                    start,
                    end: texts.len(),
                }
            }
        };
        self.push(Node::Text(text));
    }
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.push(Node::Null);
        Ok(())
    }

    fn visit_bool<E>(self, b: bool) -> Result<(), E> {
        self.push(Node::Bool(b));
        Ok(())
    }

    // As `serde_json::Number::as_f64` converts: RFC 8785 numbers are doubles.
    fn visit_i64<E>(self, n: i64) -> Result<(), E> {
        self.push(Node::Number(n as f64));
        Ok(())
    }

    fn visit_u64<E>(self, n: u64) -> Result<(), E> {
        self.push(Node::Number(n as f64));
        Ok(())
    }

    fn visit_f64<E>(self, n: f64) -> Result<(), E> {
        self.push(Node::Number(n));
        Ok(())
    }

    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        self.text(s);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let at = self.doc.nodes.len();
        self.doc.nodes.push(Node::Array { end: 0 });
        let context = self.context.element();
        while seq
            .next_element_seed(NodeSeed {
                doc: &mut *self.doc,
                context,
            })?
            .is_some()
        {}
        let end = self.doc.nodes.len();
        self.doc.nodes[at] = Node::Array { end };
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let at = self.doc.nodes.len();
        self.doc.nodes.push(Node::Object { end: 0 });
        loop {
            let name_at = self.doc.nodes.len();
            let seed = NodeSeed {
                doc: &mut *self.doc,
                context: Context::Name,
            };
            if map.next_key_seed(seed)?.is_none() {
                break;
            }
            let context = self.context.member(self.doc.name(name_at));
            map.next_value_seed(NodeSeed {
                doc: &mut *self.doc,
                context,
            })?;
        }
        let end = self.doc.nodes.len();
        self.doc.nodes[at] = Node::Object { end };
        Ok(())
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<(), E> {
        self.visit_str(&s)
    }
}
