//! The fast parser: reads a JSON body straight into a [`Doc`] in one pass, or gives up.
//!
//! It accepts only text it is certain `serde_json` accepts and reads the same way: the JSON
//! grammar, strictly, with nesting kept well inside `serde_json`'s limit and every number that
//! is not a small integer converted by `serde_json` itself. Anything else (an error, an
//! unpaired surrogate, deep nesting, a number `serde_json` rejects) returns `None`, and the
//! caller asks `serde_json`. Giving up costs time, never a different key.

use super::{Context, Doc, Node, Text};
use crate::{jcs, special};

/// Deeper bodies go to `serde_json`, which alone knows exactly where its limit is.
pub(super) const MAX_DEPTH: usize = 100;

/// Parses `text` as a body in `context`, or `None` to let `serde_json` decide.
pub(super) fn parse(text: &str, context: Context) -> Option<Doc<'_>> {
    let mut scanner = Scanner {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        doc: Doc::with_capacity(text.len()),
    };
    scanner.value(context, 0)?;
    scanner.skip_whitespace();
    (scanner.pos == scanner.bytes.len()).then_some(scanner.doc)
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    doc: Doc<'a>,
}

impl<'a> Scanner<'a> {
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn value(&mut self, context: Context, depth: usize) -> Option<()> {
        self.skip_whitespace();
        let node = match *self.bytes.get(self.pos)? {
            b'{' => return self.object(context, depth + 1),
            b'[' => return self.array(context, depth + 1),
            b'"' => {
                self.pos += 1;
                Node::Text(self.string(context)?)
            }
            b't' => self.literal("true", Node::Bool(true))?,
            b'f' => self.literal("false", Node::Bool(false))?,
            b'n' => self.literal("null", Node::Null)?,
            _ => Node::Number(self.number()?),
        };
        self.doc.nodes.push(node);
        Some(())
    }

    fn literal(&mut self, word: &str, node: Node<'a>) -> Option<Node<'a>> {
        self.bytes[self.pos..]
            .starts_with(word.as_bytes())
            .then(|| {
                self.pos += word.len();
                node
            })
    }

    /// Consumes `byte` after optional whitespace.
    fn expect(&mut self, byte: u8) -> Option<()> {
        self.skip_whitespace();
        (self.bytes.get(self.pos) == Some(&byte)).then(|| self.pos += 1)
    }

    /// After an element: `true` when another follows (a comma was consumed), `false` at the
    /// closing `close`.
    fn more(&mut self, close: u8) -> Option<bool> {
        self.skip_whitespace();
        match *self.bytes.get(self.pos)? {
            b',' => {
                self.pos += 1;
                Some(true)
            }
            b if b == close => {
                self.pos += 1;
                Some(false)
            }
            _ => None,
        }
    }

    fn array(&mut self, context: Context, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.pos += 1;
        let at = self.doc.nodes.len();
        self.doc.nodes.push(Node::Array { end: 0 });
        let context = context.element();
        self.skip_whitespace();
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
        } else {
            loop {
                self.value(context, depth)?;
                if !self.more(b']')? {
                    break;
                }
            }
        }
        self.doc.nodes[at] = Node::Array {
            end: self.doc.nodes.len(),
        };
        Some(())
    }

    fn object(&mut self, context: Context, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.pos += 1;
        let at = self.doc.nodes.len();
        self.doc.nodes.push(Node::Object { end: 0 });
        self.skip_whitespace();
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
        } else {
            loop {
                self.expect(b'"')?;
                let name_at = self.doc.nodes.len();
                let name = self.string(Context::Name)?;
                self.doc.nodes.push(Node::Text(name));
                self.expect(b':')?;
                let child = if context.reads_names() {
                    context.member(self.doc.name(name_at))
                } else {
                    context.member("")
                };
                self.value(child, depth)?;
                if !self.more(b'}')? {
                    break;
                }
            }
        }
        self.doc.nodes[at] = Node::Object {
            end: self.doc.nodes.len(),
        };
        Some(())
    }

    /// A number, by the JSON grammar. Integers of up to 15 digits are exact as doubles and
    /// converted here; every other number is converted by `serde_json` itself, so its range
    /// checks and rounding are the contract's.
    fn number(&mut self) -> Option<f64> {
        let start = self.pos;
        let negative = self.bytes[start] == b'-';
        if negative {
            self.pos += 1;
        }
        let digits_start = self.pos;
        match self.bytes.get(self.pos)? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => self.skip_digits(),
            _ => return None,
        }
        let digits = self.pos - digits_start;
        let mut integer = true;
        if self.bytes.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            self.digits()?;
            integer = false;
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.pos) {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.pos) {
                self.pos += 1;
            }
            self.digits()?;
            integer = false;
        }
        if integer && digits <= 15 {
            let magnitude = self.bytes[digits_start..self.pos]
                .iter()
                .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
            let magnitude = magnitude as f64;
            return Some(if negative { -magnitude } else { magnitude });
        }
        serde_json::from_str::<f64>(&self.text[start..self.pos]).ok()
    }

    fn skip_digits(&mut self) {
        while let Some(b'0'..=b'9') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    /// At least one digit.
    fn digits(&mut self) -> Option<()> {
        let start = self.pos;
        self.skip_digits();
        (self.pos > start).then_some(())
    }

    /// The string whose opening quote was just consumed.
    fn string(&mut self, context: Context) -> Option<Text<'a>> {
        let start = self.pos;
        let end = special::next_special(self.bytes, start);
        match *self.bytes.get(end)? {
            b'"' => {}
            b'\\' => return self.escaped_string(start, end, context),
            // A raw control character, which JSON forbids in a string: `serde_json` rejects it.
            _ => return None,
        }
        self.pos = end + 1;
        // Without escapes a string holds no line break, tab or CR: only spaces can trail.
        let spaces = match context {
            Context::Prompt => trailing_spaces(&self.text[start..end]),
            _ => 0,
        };
        if spaces == 0 {
            return Some(Text::Quoted(&self.text[start - 1..end + 1]));
        }
        let texts = &mut self.doc.texts;
        let from = texts.len();
        texts.push('"');
        texts.push_str(&self.text[start..end - spaces]);
        texts.push('"');
        Some(Text::Canonical {
            start: from,
            end: texts.len(),
        })
    }

    /// A string with escapes, from `start`; the first escape is at `backslash`. A member name
    /// is decoded; a value is written in canonical form with its quotes, stripped in a prompt
    /// member, as it is read. Leaves `pos` after the closing quote.
    fn escaped_string(
        &mut self,
        start: usize,
        backslash: usize,
        context: Context,
    ) -> Option<Text<'a>> {
        let out_start = self.doc.texts.len();
        let quoted = context != Context::Name;
        let mut out = Output {
            texts: &mut self.doc.texts,
            context,
            whitespace_from: None,
        };
        if quoted {
            out.texts.push('"');
        }
        let mut run_start = start;
        let mut i = backslash;
        loop {
            match *self.bytes.get(i)? {
                b'"' => {
                    out.run(&self.text[run_start..i]);
                    break;
                }
                b'\\' => {}
                _ => return None,
            }
            let (c, length) = decode_escape(&self.bytes[i..])?;
            if length == 2 && c != '/' {
                out.run_and_canonical_escape(&self.text[run_start..i + 2], c);
            } else {
                out.run(&self.text[run_start..i]);
                out.char(c);
            }
            i += length;
            run_start = i;
            i = special::next_special(self.bytes, i);
        }
        out.end_line();
        if quoted {
            out.texts.push('"');
        }
        self.pos = i + 1;
        let end = self.doc.texts.len();
        Some(if quoted {
            Text::Canonical {
                start: out_start,
                end,
            }
        } else {
            Text::Name {
                start: out_start,
                end,
            }
        })
    }
}

/// Where an escaped string's text goes, and the state of the whitespace rule.
struct Output<'t> {
    texts: &'t mut String,
    context: Context,
    /// Where the whitespace at the end of the current line starts in `texts`, if it ends in
    /// whitespace: a line break or the string's end cuts there.
    whitespace_from: Option<usize>,
}

impl Output<'_> {
    /// Ordinary text: no `"`, `\` or control character, so canonical as it is.
    fn run(&mut self, run: &str) {
        let before = self.texts.len();
        self.texts.push_str(run);
        if self.context == Context::Prompt && !run.is_empty() {
            let kept = run.len() - trailing_spaces(run);
            self.whitespace_from = match kept {
                0 => self.whitespace_from.or(Some(before)),
                kept if kept < run.len() => Some(before + kept),
                _ => None,
            };
        }
    }

    /// Ordinary text and the escape sequence after it, as they stand in the body, the escape
    /// being one RFC 8785 writes the same way (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`) for
    /// the character `c`. Copied in one piece unless the whitespace rule may cut between them.
    fn run_and_canonical_escape(&mut self, raw: &str, c: char) {
        let run = &raw[..raw.len() - 2];
        let whole = match self.context {
            Context::Name => false,
            Context::Prompt => match c {
                '\t' | '\r' => false,
                // A line that ends in something other than a space has nothing to cut.
                '\n' => run.as_bytes().last().is_some_and(|&b| b != b' '),
                _ => true,
            },
            _ => true,
        };
        if whole {
            self.texts.push_str(raw);
            self.whitespace_from = None;
        } else {
            self.run(run);
            self.char(c);
        }
    }

    /// One decoded character.
    fn char(&mut self, c: char) {
        if self.context == Context::Name {
            self.texts.push(c);
            return;
        }
        if self.context == Context::Prompt {
            match c {
                ' ' | '\t' | '\r' => {
                    self.whitespace_from = self.whitespace_from.or(Some(self.texts.len()))
                }
                '\n' => self.end_line(),
                _ => self.whitespace_from = None,
            }
        }
        match c {
            '"' | '\\' | '\0'..='\u{1f}' => jcs::write_escape(self.texts, c as u8),
            c => self.texts.push(c),
        }
    }

    /// A line ends: in a prompt member, its trailing whitespace goes.
    fn end_line(&mut self) {
        if let Some(at) = self.whitespace_from.take() {
            self.texts.truncate(at);
        }
    }
}

/// The number of spaces `text` ends with.
fn trailing_spaces(text: &str) -> usize {
    text.bytes().rev().take_while(|&b| b == b' ').count()
}

/// The character of the escape sequence at the start of `bytes` (which starts with `\`) and the
/// sequence's length, or `None` where `serde_json` would reject it.
fn decode_escape(bytes: &[u8]) -> Option<(char, usize)> {
    let c = match *bytes.get(1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let unit = hex4(bytes.get(2..6)?)?;
            return match unit {
                0xD800..=0xDBFF => {
                    // A leading surrogate must be followed by an escaped trailing one.
                    if bytes.get(6..8)? != b"\\u" {
                        return None;
                    }
                    let low = hex4(bytes.get(8..12)?)?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return None;
                    }
                    let code =
                        0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                    Some((char::from_u32(code)?, 12))
                }
                0xDC00..=0xDFFF => None,
                unit => Some((char::from_u32(u32::from(unit))?, 6)),
            };
        }
        _ => return None,
    };
    Some((c, 2))
}

fn hex4(digits: &[u8]) -> Option<u16> {
    digits.iter().try_fold(0u16, |n, d| {
        let d = (*d as char).to_digit(16)?;
        Some(n << 4 | d as u16)
    })
}
