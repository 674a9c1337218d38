//! Lossless JSON re-layout: pretty-printing for files and compacting for JSON Lines.
//!
//! Cassettes are re-laid out at the byte level instead of through `serde_json::Value`, which
//! would turn large integers into floats, reorder members without `preserve_order`, and cost a
//! full allocation tree per document. Only whitespace outside strings changes: member order,
//! number spelling and string escapes stay exactly as the recorder wrote them.

use serde::de::IgnoredAny;

/// Checks that `document` is one complete JSON value.
pub(crate) fn validate(document: &[u8]) -> Result<(), String> {
    serde_json::from_slice::<IgnoredAny>(document)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Re-lays out valid JSON exactly as `serde_json::to_vec_pretty` would (two-space indent,
/// `"name": value`, `[]`/`{}` when empty) plus a trailing newline, so that a document the recorder
/// pretty-printed is stored byte for byte and a re-record diffs line by line.
pub(crate) fn pretty(document: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(document.len() + document.len() / 4 + 1);
    relayout(document, true, &mut out);
    out
}

/// [`pretty`], without a copy when `document` is laid out so already (what the recorder
/// writes): a large recording is not held twice more while it is stored.
pub(crate) fn pretty_cow(document: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let mut same = Same {
        expected: document,
        at: 0,
        same: true,
    };
    relayout(document, true, &mut same);
    if same.same && same.at == document.len() {
        std::borrow::Cow::Borrowed(document)
    } else {
        std::borrow::Cow::Owned(pretty(document))
    }
}

/// Re-lays out valid JSON with no whitespace outside strings, so it fits on one line.
pub(crate) fn compact(document: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(document.len() + 1);
    relayout(document, false, &mut out);
    out
}

/// Where a re-layout goes.
trait Sink {
    fn push(&mut self, byte: u8);
    fn spaces(&mut self, n: usize);
}

impl Sink for Vec<u8> {
    fn push(&mut self, byte: u8) {
        Vec::push(self, byte);
    }

    fn spaces(&mut self, n: usize) {
        self.resize(self.len() + n, b' ');
    }
}

/// A sink that only checks whether the re-layout is `expected`, byte for byte.
struct Same<'a> {
    expected: &'a [u8],
    at: usize,
    same: bool,
}

impl Sink for Same<'_> {
    fn push(&mut self, byte: u8) {
        self.same &= self.expected.get(self.at) == Some(&byte);
        self.at += 1;
    }

    fn spaces(&mut self, n: usize) {
        let end = self.at + n;
        self.same &= self
            .expected
            .get(self.at..end)
            .is_some_and(|run| run.iter().all(|&b| b == b' '));
        self.at = end;
    }
}

fn relayout(document: &[u8], pretty: bool, out: &mut dyn Sink) {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    let newline = |out: &mut dyn Sink, depth: usize| {
        if pretty {
            out.push(b'\n');
            out.spaces(2 * depth);
        }
    };
    while i < document.len() {
        let b = document[i];
        i += 1;
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'"' => {
                out.push(b);
                in_string = true;
            }
            b'{' | b'[' => {
                out.push(b);
                let close = if b == b'{' { b'}' } else { b']' };
                let mut j = i;
                while j < document.len() && matches!(document[j], b' ' | b'\t' | b'\n' | b'\r') {
                    j += 1;
                }
                if document.get(j) == Some(&close) {
                    out.push(close);
                    i = j + 1;
                } else {
                    depth += 1;
                    newline(out, depth);
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(out, depth);
                out.push(b);
            }
            b',' => {
                out.push(b);
                newline(out, depth);
            }
            b':' => {
                out.push(b':');
                if pretty {
                    out.push(b' ');
                }
            }
            _ => out.push(b),
        }
    }
    if pretty {
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_serde_json_pretty_and_is_lossless() {
        let src = r#" {"b":[1, 2.50, {}, [], {"x" :"a \" \\ ,:{}[] b"}],"a":{"n":123456789012345678901234567890,"e":1E+3},
            "z": null, "t" : [true,false], "u":"\u00e9"} "#;
        let value: serde_json::Value = serde_json::from_str(src).unwrap();
        let pretty_bytes = pretty(src.as_bytes());
        let reparsed: serde_json::Value = serde_json::from_slice(&pretty_bytes).unwrap();
        assert_eq!(reparsed, value);
        // Lossless: the big integer and the exponent keep their spelling.
        let text = String::from_utf8(pretty_bytes.clone()).unwrap();
        assert!(text.contains("123456789012345678901234567890") && text.contains("1E+3"));
        assert!(text.contains(r#""a \" \\ ,:{}[] b""#));
        // Idempotent, and identical to serde_json for documents serde_json can round-trip.
        assert_eq!(pretty(&pretty_bytes), pretty_bytes);
        let plain = serde_json::json!({"b": [1, {}, [], {"x": "y"}], "a": {"n": 1}, "e": ""});
        let mut expected = serde_json::to_vec_pretty(&plain).unwrap();
        expected.push(b'\n');
        assert_eq!(pretty(&serde_json::to_vec(&plain).unwrap()), expected);
        assert_eq!(compact(&expected), serde_json::to_vec(&plain).unwrap());
        assert!(!compact(src.as_bytes()).contains(&b'\n'));
        // What is laid out already is kept as it is, without a copy; anything else is not.
        assert!(matches!(
            pretty_cow(&expected),
            std::borrow::Cow::Borrowed(_)
        ));
        for other in [
            &expected[..expected.len() - 1],
            src.as_bytes(),
            b"{\"a\":1}\n",
        ] {
            let laid_out = pretty_cow(other);
            assert!(matches!(laid_out, std::borrow::Cow::Owned(_)));
            assert_eq!(&*laid_out, &pretty(other)[..]);
        }
    }

    #[test]
    fn validate_rejects_truncated() {
        assert!(validate(br#"{"a": [1, 2"#).is_err());
        assert!(validate(b"").is_err());
        assert!(validate(br#"{"a": 1} x"#).is_err());
        assert!(validate(b"{\"a\": 1}\n").is_ok());
    }
}
