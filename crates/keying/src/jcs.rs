//! RFC 8785 (JSON Canonicalization Scheme) serialization: the exact bytes a key hashes.
//!
//! Written here rather than borrowed from `serde_json` because the differences matter to a
//! key: member names sort by UTF-16 code units (not UTF-8 bytes), and every number is printed
//! in ECMAScript form (`1.0` and `1` are one number, `1e21` is `1e+21`).

use serde_json::Value;
use std::fmt::Write;

/// Serializes `value` as RFC 8785 canonical JSON.
pub fn to_canonical_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push('{');
            for (i, (name, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, name);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

fn write_number(out: &mut String, n: &serde_json::Number) {
    // JSON numbers are IEEE-754 doubles in RFC 8785; integers beyond 2^53 lose precision there
    // exactly as they would in any JavaScript client.
    let f = n.as_f64().unwrap_or(0.0);
    let mut buffer = ryu_js::Buffer::new();
    out.push_str(buffer.format(f));
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_take_ecmascript_form() {
        let cases = [
            ("1.0", "1"),
            ("-0.0", "0"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("0.7", "0.7"),
            ("333333333.33333329", "333333333.3333333"),
            ("9007199254740993", "9007199254740992"),
        ];
        for (input, expected) in cases {
            let v: Value = serde_json::from_str(input).unwrap();
            assert_eq!(to_canonical_string(&v), expected, "{input}");
        }
    }

    #[test]
    fn members_sort_by_utf16_code_units() {
        // U+E000 sorts before U+1F600 in UTF-8 byte order, but after it in UTF-16.
        let v = json!({"\u{1F600}": 1, "\u{E000}": 2, "b": 3, "a": 4});
        assert_eq!(
            to_canonical_string(&v),
            "{\"a\":4,\"b\":3,\"\u{1F600}\":1,\"\u{E000}\":2}"
        );
    }

    #[test]
    fn strings_escape_only_what_rfc8785_escapes() {
        let v = json!("a\"b\\c\n\u{1}\u{7f}é/");
        assert_eq!(to_canonical_string(&v), "\"a\\\"b\\\\c\\n\\u0001\u{7f}é/\"");
    }
}
