//! RFC 8785 (JSON Canonicalization Scheme) serialization: the exact bytes a key hashes.
//!
//! Written here rather than borrowed from `serde_json` because the differences matter to a
//! key: member names sort by UTF-16 code units (not UTF-8 bytes), and every number is printed
//! in ECMAScript form (`1.0` and `1` are one number, `1e21` is `1e+21`).
//!
//! The writer puts its bytes into a [`Sink`], so the same code builds the canonical string an
//! explanation shows and feeds SHA-256 directly on the hot path, without the string.

use crate::special;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::cmp::Ordering;

/// Where canonical text goes.
pub(crate) trait Sink {
    /// Appends `text`.
    fn put(&mut self, text: &str);

    /// Appends one ASCII character (punctuation). A call of its own because there are many and
    /// a one-byte copy should not cost a `memcpy` call.
    fn put_ascii(&mut self, c: u8);

    /// How many bytes were put so far.
    fn written(&self) -> usize;
}

impl Sink for String {
    fn put(&mut self, text: &str) {
        self.push_str(text);
    }

    fn put_ascii(&mut self, c: u8) {
        self.push(char::from(c));
    }

    fn written(&self) -> usize {
        self.len()
    }
}

/// Hashes canonical bytes as they are written. Pieces are gathered in a buffer first, because
/// the writer produces many tiny ones (quotes, commas) and each `update` call has a fixed cost.
pub(crate) struct HashSink {
    hasher: Sha256,
    buffer: Vec<u8>,
    hashed: usize,
}

/// Big enough to amortize `update` calls, small enough to stay in the L1 cache.
const HASH_BUFFER: usize = 8 * 1024;

impl HashSink {
    pub(crate) fn new() -> Self {
        HashSink {
            hasher: Sha256::new(),
            buffer: Vec::with_capacity(HASH_BUFFER),
            hashed: 0,
        }
    }

    /// The SHA-256 of everything written.
    pub(crate) fn finish(mut self) -> [u8; 32] {
        self.hasher.update(&self.buffer);
        self.hasher.finalize().into()
    }
}

impl Sink for HashSink {
    #[inline]
    fn put(&mut self, text: &str) {
        let bytes = text.as_bytes();
        if self.buffer.len() + bytes.len() <= HASH_BUFFER {
            self.buffer.extend_from_slice(bytes);
        } else {
            self.flush_and_put(bytes);
        }
    }

    #[inline]
    fn put_ascii(&mut self, c: u8) {
        debug_assert!(c.is_ascii());
        if self.buffer.len() == HASH_BUFFER {
            self.flush_and_put(&[]);
        }
        self.buffer.push(c);
    }

    fn written(&self) -> usize {
        self.hashed + self.buffer.len()
    }
}

impl HashSink {
    #[cold]
    fn flush_and_put(&mut self, bytes: &[u8]) {
        self.hasher.update(&self.buffer);
        self.hashed += self.buffer.len();
        self.buffer.clear();
        // A piece as long as the buffer is hashed where it lies rather than copied first.
        if bytes.len() >= HASH_BUFFER {
            self.hasher.update(bytes);
            self.hashed += bytes.len();
        } else {
            self.buffer.extend_from_slice(bytes);
        }
    }
}

/// Serializes `value` as RFC 8785 canonical JSON.
pub fn to_canonical_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

pub(crate) fn write_value<S: Sink>(out: &mut S, value: &Value) {
    match value {
        Value::Null => out.put("null"),
        Value::Bool(b) => write_bool(out, *b),
        // JSON numbers are IEEE-754 doubles in RFC 8785; integers beyond 2^53 lose precision
        // there exactly as they would in any JavaScript client.
        Value::Number(n) => write_number(out, n.as_f64().unwrap_or(0.0)),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.put_ascii(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.put_ascii(b',');
                }
                write_value(out, item);
            }
            out.put_ascii(b']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|a, b| compare_names(a.0, b.0));
            out.put_ascii(b'{');
            for (i, (name, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.put_ascii(b',');
                }
                write_string(out, name);
                out.put_ascii(b':');
                write_value(out, item);
            }
            out.put_ascii(b'}');
        }
    }
}

/// RFC 8785 member order: by UTF-16 code units. That is UTF-8 byte order, except where the
/// first differing characters are U+E000..=U+FFFF against U+10000 and above (UTF-16 puts the
/// surrogates of the latter first); both of their first bytes are then at least 0xEE, which no
/// other first difference has, so only those names pay for the UTF-16 comparison.
pub(crate) fn compare_names(a: &str, b: &str) -> Ordering {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    match x.iter().zip(y).position(|(p, q)| p != q) {
        None => x.len().cmp(&y.len()),
        Some(k) if x[k] >= 0xEE && y[k] >= 0xEE => a.encode_utf16().cmp(b.encode_utf16()),
        Some(k) => x[k].cmp(&y[k]),
    }
}

pub(crate) fn write_bool<S: Sink>(out: &mut S, b: bool) {
    out.put(if b { "true" } else { "false" });
}

pub(crate) fn write_number<S: Sink>(out: &mut S, f: f64) {
    // Whole numbers of up to 15 digits (counts, token limits, the defaults) are their digits in
    // ECMAScript form, and `-0` is `0`; this spares them the general algorithm.
    if f.trunc() == f && f.abs() < 1e15 {
        let mut digits = [0u8; 16];
        let mut at = digits.len();
        let mut n = f.abs() as u64;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if f < 0.0 {
            at -= 1;
            digits[at] = b'-';
        }
        out.put(std::str::from_utf8(&digits[at..]).unwrap_or("0"));
        return;
    }
    let mut buffer = ryu_js::Buffer::new();
    out.put(buffer.format(f));
}

/// Writes `s` as a JSON string, escaping only what RFC 8785 escapes.
pub(crate) fn write_string<S: Sink>(out: &mut S, s: &str) {
    out.put("\"");
    write_escaped(out, s, Lines::Keep);
    out.put("\"");
}

/// Writes a string that is already in canonical form: text without any character RFC 8785
/// escapes (such as a JSON string of the request that had no escape sequence), or the output
/// of [`write_escaped`].
pub(crate) fn write_canonical_string<S: Sink>(out: &mut S, s: &str) {
    out.put("\"");
    out.put(s);
    out.put("\"");
}

/// What [`write_escaped`] does to the ends of lines.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lines {
    /// Writes every character.
    Keep,
    /// Drops the spaces, tabs and CRs at the end of each line first (key contract step 2.3).
    StripTrailingWhitespace,
}

/// The body of a JSON string (without its quotes): runs of ordinary bytes are copied whole,
/// found sixteen bytes at a time; only `"`, `\` and controls below U+0020 are escaped. Bytes of
/// multi-byte UTF-8 characters are all at least 0x80, so they are ordinary, and every cut
/// falls on a character boundary.
///
/// Stripping happens in the same pass: a line's trailing whitespace can only be told apart at
/// the `\n` (or the end) that follows it, so tabs and CRs, which are escaped, are held back
/// with their run until then; everything else that is escaped ends the run, since no trailing
/// whitespace can precede it.
pub(crate) fn write_escaped<S: Sink>(out: &mut S, s: &str, lines: Lines) {
    let strip = lines == Lines::StripTrailingWhitespace;
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    let mut held_whitespace = false;
    loop {
        i = special::next_special(bytes, i);
        let special = bytes.get(i).copied();
        if strip && matches!(special, Some(b'\t' | b'\r')) {
            held_whitespace = true;
            i += 1;
            continue;
        }
        let mut run = &s[start..i];
        if strip && matches!(special, None | Some(b'\n')) {
            run = run.trim_end_matches([' ', '\t', '\r']);
        }
        if held_whitespace {
            write_escaped(out, run, Lines::Keep);
            held_whitespace = false;
        } else {
            out.put(run);
        }
        let Some(special) = special else {
            return;
        };
        write_escape(out, special);
        i += 1;
        start = i;
    }
}

pub(crate) fn write_escape<S: Sink>(out: &mut S, b: u8) {
    const SHORT: [&str; 0x20] = [
        "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
        "\\b", "\\t", "\\n", "\\u000b", "\\f", "\\r", "\\u000e", "\\u000f", "\\u0010", "\\u0011",
        "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017", "\\u0018", "\\u0019",
        "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
    ];
    let short = match b {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => return out.put(SHORT.get(usize::from(b)).copied().unwrap_or_default()),
    };
    // The frequent two-character escapes, without a copy call.
    out.put_ascii(b'\\');
    out.put_ascii(short);
}

/// The text of a string written by [`write_escaped`]: its escapes undone.
pub(crate) fn unescape(escaped: &str) -> String {
    let mut out = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let mut chars = rest[at + 1..].chars();
        let decoded = match chars.next() {
            Some('b') => '\u{8}',
            Some('t') => '\t',
            Some('n') => '\n',
            Some('f') => '\u{c}',
            Some('r') => '\r',
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                u32::from_str_radix(&hex, 16)
                    .ok()
                    .and_then(char::from_u32)
                    .unwrap_or(char::REPLACEMENT_CHARACTER)
            }
            Some(other) => other,
            None => break,
        };
        out.push(decoded);
        rest = chars.as_str();
    }
    out.push_str(rest);
    out
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
    fn whole_numbers_print_as_the_general_algorithm_prints_them() {
        let mut cases: Vec<f64> = vec![0.0, -0.0, 1.0, -1.0, 10.0, 999_999_999_999_999.0];
        cases.extend((0..2000).map(|i| ((i * 7919) as f64).powf(1.7).trunc()));
        cases.extend((0..60).map(|i| -(2f64.powi(i)).min(1e15 - 1.0)));
        for f in cases {
            let mut fast = String::new();
            write_number(&mut fast, f);
            assert_eq!(fast, ryu_js::Buffer::new().format(f), "{f}");
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
    fn name_order_is_utf16_order() {
        let names = [
            "",
            "a",
            "ab",
            "b",
            "\u{7f}",
            "\u{80}",
            "\u{7ff}",
            "\u{800}",
            "\u{d7ff}",
            "\u{e000}",
            "\u{e000}a",
            "\u{ffff}",
            "\u{10000}",
            "\u{1f600}",
            "\u{10ffff}",
            "a\u{e000}",
            "a\u{1f600}",
            "\u{ef}\u{e000}",
            "\u{ef}\u{10000}",
        ];
        for a in names {
            for b in names {
                assert_eq!(
                    compare_names(a, b),
                    a.encode_utf16().cmp(b.encode_utf16()),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }

    #[test]
    fn strings_escape_only_what_rfc8785_escapes() {
        let v = json!("a\"b\\c\n\u{1}\u{7f}é/");
        assert_eq!(to_canonical_string(&v), "\"a\\\"b\\\\c\\n\\u0001\u{7f}é/\"");
    }

    /// Escaping against the byte-at-a-time definition, for every ASCII byte at every position
    /// of a chunk and in the tail after the last whole chunk.
    #[test]
    fn escaping_finds_every_special_byte_at_every_position() {
        for b in 0..=0x7fu8 {
            for len in 1..=19 {
                for at in 0..len {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = b;
                    let text = String::from_utf8(bytes).unwrap();
                    let mut fast = String::new();
                    write_escaped(&mut fast, &text, Lines::Keep);
                    let mut slow = String::new();
                    for c in text.chars() {
                        if special::is_special(c as u8) {
                            write_escape(&mut slow, c as u8);
                        } else {
                            slow.push(c);
                        }
                    }
                    assert_eq!(fast, slow, "byte {b:#x} at {at} of {len}");
                    assert_eq!(unescape(&fast), text);
                }
            }
        }
    }

    #[test]
    fn stripping_while_escaping_drops_only_trailing_whitespace_per_line() {
        let cases = [
            ("  a \t\r\n b  \n\n", r"  a\n b\n\n"),
            ("x\t\ty \t\r", r"x\t\ty"),
            ("\"q\" \t\n\u{1} \n\t", r#"\"q\"\n\u0001\n"#),
            ("\r\r\n", r"\n"),
            ("a\rb \n", r"a\rb\n"),
            ("tail \t", "tail"),
            ("", ""),
        ];
        for (text, expected) in cases {
            let mut out = String::new();
            write_escaped(&mut out, text, Lines::StripTrailingWhitespace);
            assert_eq!(out, expected, "{text:?}");
        }
    }

    #[test]
    fn hashing_in_pieces_equals_hashing_the_whole() {
        let pieces: Vec<String> = (0..3000).map(|i| "x".repeat(i % 700)).collect();
        let mut whole = String::new();
        let mut sink = HashSink::new();
        for piece in &pieces {
            whole.push_str(piece);
            sink.put(piece);
        }
        let long = "y".repeat(3 * HASH_BUFFER);
        sink.put(&long);
        whole.push_str(&long);
        assert_eq!(sink.written(), whole.len());
        assert_eq!(sink.finish(), <[u8; 32]>::from(Sha256::digest(&whole)));
    }
}
