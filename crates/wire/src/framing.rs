//! Incremental framing: raw byte chunks to lines, lines to server-sent events.
//!
//! Chunks arrive cut anywhere, including inside a line, between `\r` and `\n`, or inside a
//! multi-byte UTF-8 character, so bytes are buffered until a whole line is known and only
//! then decoded.

use super::StreamError;

/// One complete line, without its terminator.
#[derive(Debug)]
pub struct Line {
    /// 1-based line number in the stream.
    pub no: u64,
    /// The line's text.
    pub text: String,
}

/// Splits a byte stream into lines ended by `\n`, `\r\n` or `\r` (the SSE rules, which also
/// cover NDJSON).
#[derive(Debug)]
pub struct LineSplitter {
    format: &'static str,
    buf: Vec<u8>,
    line_no: u64,
    // A `\r` ended the previous line; a `\n` right after it belongs to the same terminator,
    // even when it arrives in the next chunk.
    skip_lf: bool,
}

impl LineSplitter {
    /// A splitter for a stream of `format` (named in its errors).
    pub fn new(format: &'static str) -> Self {
        LineSplitter {
            format,
            buf: Vec::new(),
            line_no: 0,
            skip_lf: false,
        }
    }

    /// Splits `chunk` (cut anywhere) into the lines it completes, appended to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Line>) -> Result<(), StreamError> {
        // A recorded stream of 1 MiB is split here while it is relayed: whole runs of a line
        // are copied at once rather than byte by byte.
        while let Some(&first) = chunk.first() {
            if std::mem::take(&mut self.skip_lf) && first == b'\n' {
                chunk = &chunk[1..];
                continue;
            }
            let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.buf.extend_from_slice(chunk);
                break;
            };
            self.buf.extend_from_slice(&chunk[..end]);
            out.push(self.take_line()?);
            self.skip_lf = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
        }
        Ok(())
    }

    /// Whether bytes after the last line terminator are waiting for theirs.
    pub fn has_partial_line(&self) -> bool {
        !self.buf.is_empty()
    }

    /// The bytes after the last line terminator, if any.
    pub fn partial_line(&self) -> Option<&[u8]> {
        (!self.buf.is_empty()).then_some(self.buf.as_slice())
    }

    /// How many lines have been split off so far.
    pub fn lines_seen(&self) -> u64 {
        self.line_no
    }

    /// The unterminated last line, if any.
    pub fn finish(&mut self) -> Result<Option<Line>, StreamError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        self.take_line().map(Some)
    }

    fn take_line(&mut self) -> Result<Line, StreamError> {
        self.line_no += 1;
        let bytes = std::mem::take(&mut self.buf);
        let text = String::from_utf8(bytes).map_err(|_| StreamError::InvalidUtf8 {
            format: self.format,
            line: self.line_no,
        })?;
        Ok(Line {
            no: self.line_no,
            text,
        })
    }
}

/// One dispatched server-sent event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    /// The `event:` field, if the event had one.
    pub name: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field, if the event had one.
    pub id: Option<String>,
    /// The `retry:` field, if the event had a valid one.
    pub retry: Option<u64>,
    /// 1-based position of the event in the stream.
    pub index: u64,
    /// The line that ended the event.
    pub line: u64,
}

impl SseEvent {
    /// Where the event is, for error messages.
    pub fn at(&self) -> String {
        match &self.name {
            Some(name) => format!(
                "event {} (`{name}`) ending at line {}",
                self.index, self.line
            ),
            None => format!("event {} ending at line {}", self.index, self.line),
        }
    }
}

/// The event-stream interpretation of lines (WHATWG HTML, "Interpreting an event stream").
#[derive(Debug, Default)]
pub struct SseParser {
    name: Option<String>,
    data: Option<String>,
    id: Option<String>,
    retry: Option<u64>,
    count: u64,
    seen_line: bool,
}

impl SseParser {
    /// Reads one line; returns the event a blank line dispatches.
    pub fn line(&mut self, line: &Line) -> Option<SseEvent> {
        let mut text = line.text.as_str();
        if !self.seen_line {
            self.seen_line = true;
            text = text.strip_prefix('\u{feff}').unwrap_or(text);
        }
        if text.is_empty() {
            return self.dispatch(line.no);
        }
        if text.starts_with(':') {
            return None;
        }
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text, ""),
        };
        match field {
            "event" => self.name = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            "id" => self.id = Some(value.to_owned()),
            "retry" => {
                if let Ok(ms) = value.parse() {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
        None
    }

    /// Whether an event has fields but was not dispatched yet (its blank line is missing).
    pub fn is_open(&self) -> bool {
        self.name.is_some() || self.data.is_some() || self.id.is_some() || self.retry.is_some()
    }

    /// Dispatches an event left open when the stream ended without its blank line: providers
    /// always send one, so a missing one means a cut stream, but the event itself is whole.
    pub fn finish(&mut self, last_line: u64) -> Option<SseEvent> {
        self.dispatch(last_line)
    }

    fn dispatch(&mut self, line: u64) -> Option<SseEvent> {
        let name = self.name.take();
        let id = self.id.take();
        let retry = self.retry.take();
        let data = self.data.take()?;
        self.count += 1;
        Some(SseEvent {
            name,
            data,
            id,
            retry,
            index: self.count,
            line,
        })
    }
}

/// The members of a JSON object built with `json!` (anything else gives no members), for
/// writing synthesized events member by member.
pub(crate) fn members(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunks: &[&[u8]]) -> Vec<String> {
        let mut splitter = LineSplitter::new("test");
        let mut out = Vec::new();
        for chunk in chunks {
            splitter.push(chunk, &mut out).unwrap();
        }
        out.extend(splitter.finish().unwrap());
        out.into_iter().map(|l| l.text).collect()
    }

    #[test]
    fn all_terminators_and_split_crlf() {
        assert_eq!(
            lines(&[b"a\r", b"\nb\rc\n", b"\r\nd"]),
            ["a", "b", "c", "", "d"]
        );
    }

    #[test]
    fn every_cut_of_a_stream_gives_the_same_lines() {
        let text: &[u8] = b"data: a\r\n\r\ndata: b\rdata: \xc3\xa9\n\n\r\rlast";
        let whole = lines(&[text]);
        assert_eq!(
            whole,
            ["data: a", "", "data: b", "data: é", "", "", "", "last"]
        );
        for cut in 0..=text.len() {
            for second in cut..=text.len() {
                let (a, rest) = text.split_at(cut);
                let (b, c) = rest.split_at(second - cut);
                assert_eq!(lines(&[a, b, c]), whole, "cut at {cut} and {second}");
            }
        }
    }

    #[test]
    fn utf8_cut_inside_a_character_is_joined() {
        let text = "é€\n".as_bytes();
        let chunks: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(lines(&chunks), ["é€"]);
    }

    #[test]
    fn invalid_utf8_names_the_line() {
        let mut splitter = LineSplitter::new("test");
        let mut out = Vec::new();
        let err = splitter.push(b"ok\n\xff\xfe\n", &mut out).unwrap_err();
        assert_eq!(
            err,
            StreamError::InvalidUtf8 {
                format: "test",
                line: 2
            }
        );
    }

    #[test]
    fn sse_fields_comments_and_multiline_data() {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        let input = "\u{feff}: comment\nevent: x\nid: 7\nretry: 10\ndata: a\ndata:b\n\ndata\n\nevent: lonely\n\n";
        for (i, text) in input.split('\n').enumerate() {
            let line = Line {
                no: i as u64 + 1,
                text: text.to_owned(),
            };
            events.extend(parser.line(&line));
        }
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].name.as_deref(), Some("x"));
        assert_eq!(events[0].data, "a\nb");
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert_eq!(events[0].retry, Some(10));
        assert_eq!(events[1].name, None);
        assert_eq!(events[1].data, "");
        assert_eq!(events[1].index, 2);
    }
}
