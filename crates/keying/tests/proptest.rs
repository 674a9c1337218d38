//! Property: re-serializing a JSON body with its members reordered, arbitrary JSON whitespace
//! between tokens and characters spelled as `\u` escapes never changes its key, for an LLM
//! profile and for `http`.

use cassette_keying::{KeyConfig, Request};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// Any JSON value, kept shallow: serde_json refuses nesting deeper than 128 levels (such bodies
/// are keyed raw, by design), and shallow values already exercise every token kind.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinities", |f| f.is_finite())
            .prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        json_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(json_string(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Strings with the characters that need care: quotes, backslashes, controls, whitespace at
/// line ends, non-ASCII and astral characters.
fn json_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{0,8}",
        "[ -~\t\r\n\"\\\\\u{0}-\u{1f}é€😀\u{e000}]{0,16}",
        any::<String>(),
    ]
}

/// A top-level object shaped like an LLM request, with random extra members (which may
/// collide with volatile names or defaults; both serializations see the same value).
fn llm_body() -> impl Strategy<Value = Value> {
    (
        json_string(),
        prop::collection::vec((json_string(), json_string()), 0..4),
        prop::collection::btree_map("[a-z_]{1,12}", json_value(), 0..6),
    )
        .prop_map(|(model, turns, extra)| {
            let mut body: Map<String, Value> = extra.into_iter().collect();
            body.insert("model".into(), Value::String(model));
            let messages = turns
                .into_iter()
                .map(|(role, content)| {
                    let mut m = Map::new();
                    m.insert("role".into(), Value::String(role));
                    m.insert("content".into(), Value::String(content));
                    Value::Object(m)
                })
                .collect();
            body.insert("messages".into(), Value::Array(messages));
            Value::Object(body)
        })
}

/// Writes `value` as JSON text, taking every free choice (member order, whitespace, escapes)
/// from `choices`, a small deterministic generator seeded by proptest.
struct Scrambler {
    state: u64,
}

impl Scrambler {
    fn next(&mut self) -> u64 {
        // splitmix64: deterministic, so a failing case replays from its seed.
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn whitespace(&mut self, out: &mut String) {
        const WS: [char; 4] = [' ', '\t', '\n', '\r'];
        let n = self.next() % 4;
        for _ in 0..n {
            out.push(WS[(self.next() % 4) as usize]);
        }
    }

    fn write(&mut self, value: &Value, out: &mut String) {
        self.whitespace(out);
        match value {
            Value::Array(items) => {
                out.push('[');
                self.whitespace(out);
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.write(item, out);
                }
                out.push(']');
            }
            Value::Object(map) => {
                let mut members: Vec<(&String, &Value)> = map.iter().collect();
                // Fisher-Yates with the generator: a uniformly random member order.
                for i in (1..members.len()).rev() {
                    let j = (self.next() % (i as u64 + 1)) as usize;
                    members.swap(i, j);
                }
                out.push('{');
                self.whitespace(out);
                for (i, (name, item)) in members.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                        self.whitespace(out);
                    }
                    self.write_string(name, out);
                    self.whitespace(out);
                    out.push(':');
                    self.write(item, out);
                }
                out.push('}');
            }
            Value::String(s) => self.write_string(s, out),
            other => out.push_str(&other.to_string()),
        }
        self.whitespace(out);
    }

    fn write_string(&mut self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            let must_escape = c == '"' || c == '\\' || (c as u32) < 0x20;
            if must_escape || self.next().is_multiple_of(8) {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            } else {
                out.push(c);
            }
        }
        out.push('"');
    }
}

fn key(path: &str, body: &[u8]) -> String {
    Request::new("POST", path)
        .body(body)
        .key(&KeyConfig::default())
        .key
        .as_str()
        .to_owned()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn llm_bodies_keep_their_key_when_rewritten(body in llm_body(), seed in any::<u64>()) {
        let compact = serde_json::to_string(&body).expect("values serialize");
        let mut scrambled = String::new();
        Scrambler { state: seed }.write(&body, &mut scrambled);
        let reparsed = serde_json::from_str::<Value>(&scrambled).ok();
        prop_assert_eq!(
            reparsed.as_ref(),
            Some(&body),
            "the scrambler must write the same JSON value: {}",
            scrambled
        );
        prop_assert_eq!(
            key("/v1/chat/completions", compact.as_bytes()),
            key("/v1/chat/completions", scrambled.as_bytes())
        );
    }

    #[test]
    fn http_bodies_keep_their_key_when_rewritten(body in json_value(), seed in any::<u64>()) {
        let compact = serde_json::to_string(&body).expect("values serialize");
        let mut scrambled = String::new();
        Scrambler { state: seed }.write(&body, &mut scrambled);
        prop_assert_eq!(
            key("/v1/files", compact.as_bytes()),
            key("/v1/files", scrambled.as_bytes())
        );
    }
}
