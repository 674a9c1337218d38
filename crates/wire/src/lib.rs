//! The wire formats of LLM provider streams: assembling recorded streams into final responses
//! and re-synthesizing real provider streams from them on replay.
//!
//! A cassette stores the *meaning* of a streamed answer (the provider's non-streaming JSON
//! shape: text, tool calls with their arguments, finish reason, usage), never the transport's
//! chunk boundaries. [`Assembler`] turns the bytes of a live stream into that final response;
//! [`synthesize`] turns a final response (recorded from a stream or from the non-streaming
//! API) back into a stream in the provider's own event format, cut into small pieces so client
//! parsers really run over partial chunks. Because `stream` is not part of the key, one
//! recording serves both kinds of request.
//!
//! One file per provider stream format (`openai_chat`, `openai_responses`, `anthropic`,
//! `gemini`, `ollama`, `generic`), the framing they share (`framing`: SSE and NDJSON lines) and
//! the answer summary (`summary`: model, finish reason, usage, tool calls of a final response).
//! Adding a provider's stream format is a change inside this crate only: a file, and its entry
//! in [`StreamFormat`].
//!
//! # Architecture invariant
//!
//! This crate is pure: no IO, no async runtime, no clock, no environment, no global state. It
//! depends on nothing but `cassette-keying` (for [`Profile`]) and data crates, so the compiler
//! keeps it so; the recorder drives it with bytes it read itself.

#![deny(missing_docs)]

mod anthropic;
pub mod framing;
mod gemini;
mod generic;
mod ollama;
mod openai_chat;
mod openai_responses;
mod summary;

pub use summary::{response_summary, ResponseSummary, ToolCall};

use bytes::Bytes;
use cassette_keying::Profile;
use framing::{Line, LineSplitter, SseEvent, SseParser};
use serde_json::{Map, Value};
use std::fmt;

/// The wire format of a streamed response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamFormat {
    /// OpenAI (and compatible) `/chat/completions`: `data: {chat.completion.chunk}` lines ending
    /// with `data: [DONE]`.
    OpenaiChat,
    /// OpenAI `/responses`: named `response.*` events with sequence numbers.
    OpenaiResponses,
    /// OpenAI legacy `/completions`: `data: {text_completion}` lines ending with `data: [DONE]`.
    OpenaiCompletions,
    /// Anthropic `/messages`: `message_start` ... `message_stop` with `event:` lines.
    AnthropicMessages,
    /// Ollama `/api/chat` and `/api/generate`: one JSON object per line, the last `done: true`.
    OllamaNdjson,
    /// Gemini `:streamGenerateContent?alt=sse`: `data: {GenerateContentResponse}` events, the
    /// last with the `finishReason`.
    GeminiSse,
    /// Gemini `:streamGenerateContent` without `alt=sse`: one JSON array of
    /// `GenerateContentResponse` chunks, as `application/json`.
    GeminiJson,
    /// Any other server-sent event stream, stored event by event and replayed as is.
    GenericSse,
    /// Any other newline-delimited JSON stream, stored line by line and replayed as is.
    GenericNdjson,
}

impl StreamFormat {
    /// Every format, for exhaustive tests and tables.
    pub const ALL: [StreamFormat; 9] = [
        StreamFormat::OpenaiChat,
        StreamFormat::OpenaiResponses,
        StreamFormat::OpenaiCompletions,
        StreamFormat::AnthropicMessages,
        StreamFormat::OllamaNdjson,
        StreamFormat::GeminiSse,
        StreamFormat::GeminiJson,
        StreamFormat::GenericSse,
        StreamFormat::GenericNdjson,
    ];

    /// The format of a streamed response, given the request's keying profile and the response
    /// `content-type`; `None` when the response is not a stream.
    ///
    /// An event stream (`text/event-stream`) from an OpenAI or Anthropic endpoint gets that
    /// provider's format, and a newline-delimited JSON stream (`application/x-ndjson` and
    /// aliases) from Ollama gets [`StreamFormat::OllamaNdjson`]; Ollama only ever streams
    /// NDJSON, so an Ollama endpoint maps to it for either content type. Everything else that
    /// streams is generic and replayed verbatim.
    pub fn detect(profile: Profile, content_type: &str) -> Option<StreamFormat> {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let sse = essence == "text/event-stream";
        let ndjson = matches!(
            essence.as_str(),
            "application/x-ndjson"
                | "application/ndjson"
                | "application/jsonl"
                | "application/x-jsonlines"
                | "application/jsonlines"
                | "application/json-seq"
        );
        if !sse && !ndjson {
            return None;
        }
        let specific = match profile {
            Profile::OpenaiChat if sse => Some(StreamFormat::OpenaiChat),
            Profile::OpenaiResponses if sse => Some(StreamFormat::OpenaiResponses),
            Profile::OpenaiCompletions if sse => Some(StreamFormat::OpenaiCompletions),
            Profile::AnthropicMessages if sse => Some(StreamFormat::AnthropicMessages),
            Profile::GeminiGenerate if sse => Some(StreamFormat::GeminiSse),
            Profile::OllamaChat | Profile::OllamaGenerate => Some(StreamFormat::OllamaNdjson),
            _ => None,
        };
        Some(specific.unwrap_or(if sse {
            StreamFormat::GenericSse
        } else {
            StreamFormat::GenericNdjson
        }))
    }

    /// The format of a streamed response to a request that asked for a stream
    /// (`wants_stream`): [`StreamFormat::detect`], and also Gemini's JSON-array stream, which
    /// is `application/json` like a plain answer and only known by the request.
    pub fn detect_for_request(
        profile: Profile,
        wants_stream: bool,
        content_type: &str,
    ) -> Option<StreamFormat> {
        StreamFormat::detect(profile, content_type).or_else(|| {
            let json = content_type
                .split(';')
                .next()
                .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"));
            (profile == Profile::GeminiGenerate && wants_stream && json)
                .then_some(StreamFormat::GeminiJson)
        })
    }

    /// The format to synthesize for a profile when the recording was not a stream (a
    /// non-streaming recording replayed to a streaming request); `None` for profiles that
    /// never stream (embeddings, generic HTTP). For Gemini it is the event stream; see
    /// [`StreamFormat::for_request`] for the JSON array.
    pub fn for_profile(profile: Profile) -> Option<StreamFormat> {
        match profile {
            Profile::OpenaiChat => Some(StreamFormat::OpenaiChat),
            Profile::OpenaiResponses => Some(StreamFormat::OpenaiResponses),
            Profile::OpenaiCompletions => Some(StreamFormat::OpenaiCompletions),
            Profile::AnthropicMessages => Some(StreamFormat::AnthropicMessages),
            Profile::OllamaChat | Profile::OllamaGenerate => Some(StreamFormat::OllamaNdjson),
            Profile::GeminiGenerate => Some(StreamFormat::GeminiSse),
            _ => None,
        }
    }

    /// The format a streaming request with this raw query expects: Gemini frames its stream
    /// as events only with `alt=sse` (a JSON array otherwise); every other profile as
    /// [`StreamFormat::for_profile`].
    pub fn for_request(profile: Profile, query: &str) -> Option<StreamFormat> {
        if profile != Profile::GeminiGenerate {
            return StreamFormat::for_profile(profile);
        }
        let sse = query.split('&').any(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            matches!(cassette_keying::form_decode(name).as_str(), "alt" | "$alt")
                && cassette_keying::form_decode(value) == "sse"
        });
        Some(if sse {
            StreamFormat::GeminiSse
        } else {
            StreamFormat::GeminiJson
        })
    }

    /// The stable name stored in cassettes.
    pub fn name(self) -> &'static str {
        match self {
            StreamFormat::OpenaiChat => "openai.chat",
            StreamFormat::OpenaiResponses => "openai.responses",
            StreamFormat::OpenaiCompletions => "openai.completions",
            StreamFormat::AnthropicMessages => "anthropic.messages",
            StreamFormat::OllamaNdjson => "ollama.ndjson",
            StreamFormat::GeminiSse => "gemini.sse",
            StreamFormat::GeminiJson => "gemini.json",
            StreamFormat::GenericSse => "sse",
            StreamFormat::GenericNdjson => "ndjson",
        }
    }

    /// The format with this stored name.
    pub fn from_name(name: &str) -> Option<StreamFormat> {
        StreamFormat::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The `content-type` of a synthesized stream.
    pub fn content_type(self) -> &'static str {
        match self {
            StreamFormat::GeminiJson => "application/json",
            _ if self.is_sse() => "text/event-stream",
            _ => "application/x-ndjson",
        }
    }

    /// The generic format with the same framing (server-sent events or newline-delimited
    /// JSON), which keeps the events themselves.
    pub fn framing(self) -> StreamFormat {
        if self.is_sse() {
            StreamFormat::GenericSse
        } else {
            StreamFormat::GenericNdjson
        }
    }

    /// An event of this stream's framing that carries an error, for a stream cassette ends
    /// early (an answer over a limit): `event: error` with the Anthropic and OpenAI error
    /// shape, which their SDKs raise, or for newline-delimited JSON an `{"error": ...}` line,
    /// which Ollama's clients raise. `None` for Gemini's JSON array, which has no events.
    pub fn error_event(self, kind: &str, message: &str) -> Option<Bytes> {
        match self {
            StreamFormat::GeminiJson => None,
            _ if self.is_sse() => {
                let data = serde_json::json!({
                    "type": "error",
                    "error": {"type": kind, "message": message},
                });
                Some(Bytes::from(format!("event: error\ndata: {data}\n\n")))
            }
            _ => {
                let line = serde_json::json!({ "error": message });
                Some(Bytes::from(format!("{line}\n")))
            }
        }
    }

    /// Where to cut `piece` so that the stream ends after a whole event, given the last bytes
    /// already sent (`sent_tail`, up to four) and `room`, how much of `piece` may be sent: the
    /// last event boundary (a blank line for server-sent events, a newline for NDJSON) within
    /// `room`; when there is none and the stream is inside an event, the first boundary after
    /// it, which finishes that event; 0 when what was sent ends at a boundary already. `None`
    /// when no boundary ends the event under way (Gemini's JSON array has none at all).
    pub fn cut_point(self, sent_tail: &[u8], piece: &[u8], room: usize) -> Option<usize> {
        if self == StreamFormat::GeminiJson {
            return None;
        }
        let joined: Vec<u8> = sent_tail.iter().chain(piece).copied().collect();
        // Boundary ends, as lengths of `piece` (the tail's own count as 0 when they end it).
        let mut ends: Vec<usize> = self
            .event_ends(&joined)
            .into_iter()
            .filter(|&end| end >= sent_tail.len())
            .map(|end| end - sent_tail.len())
            .collect();
        if sent_tail.is_empty() {
            ends.push(0);
        }
        ends.sort_unstable();
        let within = ends.iter().rev().find(|&&end| end <= room).copied();
        within.or_else(|| ends.first().copied())
    }

    /// Where events end in `bytes` (just after each blank line for server-sent events, each
    /// newline for NDJSON), ascending: what a reader of the stream may take one event at a
    /// time. Empty for Gemini's JSON array, which has no events.
    pub fn event_ends(self, bytes: &[u8]) -> Vec<usize> {
        if self == StreamFormat::GeminiJson {
            return Vec::new();
        }
        let boundaries: &[&[u8]] = if self.is_sse() {
            &[b"\n\n", b"\r\n\r\n", b"\r\r"]
        } else {
            &[b"\n"]
        };
        let mut ends: Vec<usize> = boundaries
            .iter()
            .flat_map(|b| {
                bytes
                    .windows(b.len())
                    .enumerate()
                    .filter(move |(_, w)| w == b)
                    .map(move |(at, _)| at + b.len())
            })
            .collect();
        ends.sort_unstable();
        ends.dedup();
        ends
    }

    fn is_sse(self) -> bool {
        !matches!(
            self,
            StreamFormat::OllamaNdjson | StreamFormat::GenericNdjson | StreamFormat::GeminiJson
        )
    }
}

impl fmt::Display for StreamFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a request body asks for a streamed answer: `"stream": true`, or for Ollama chat and
/// generate, no `stream` member at all (Ollama streams by default). A Gemini request asks with
/// its path, not its body: keying reports it (`cassette_keying::Streaming`).
pub fn wants_stream(profile: Profile, body: &Value) -> bool {
    match body.get("stream") {
        Some(Value::Bool(stream)) => *stream,
        None => matches!(profile, Profile::OllamaChat | Profile::OllamaGenerate),
        Some(_) => false,
    }
}

/// Whether an OpenAI request asks for the usage chunk (`stream_options.include_usage`).
pub fn include_usage(body: &Value) -> bool {
    body.pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Why a stream could not be assembled or synthesized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// A line of the stream is not UTF-8.
    #[error("{format} stream, line {line}: not valid UTF-8")]
    InvalidUtf8 {
        /// The stream format's name.
        format: &'static str,
        /// The 1-based line number.
        line: u64,
    },
    /// An event or line does not have the provider's shape.
    #[error("{format} stream, {at}: {message}")]
    Malformed {
        /// The stream format's name.
        format: &'static str,
        /// Which event or line, with its line number.
        at: String,
        /// What was wrong.
        message: String,
    },
    /// The upstream reported an error inside the stream.
    #[error("{format} stream, {at}: the upstream sent an error: {message}")]
    Upstream {
        /// The stream format's name.
        format: &'static str,
        /// Which event or line, with its line number.
        at: String,
        /// The upstream's error, as sent.
        message: String,
    },
    /// The stream ended before its terminal event: it was cut off.
    #[error("{format} stream ended before {missing}; it was probably cut off")]
    Incomplete {
        /// The stream format's name.
        format: &'static str,
        /// What never arrived.
        missing: String,
    },
    /// A final response cannot be turned into a stream of this format.
    #[error("cannot synthesize a {format} stream: {message}")]
    Synthesis {
        /// The stream format's name.
        format: &'static str,
        /// What was wrong with the final response.
        message: String,
    },
}

/// Assembles a live stream into the provider's non-streaming final response.
///
/// Feed it the raw byte chunks exactly as they arrive, cut anywhere; it keeps only the
/// assembled state (not the chunks), so memory follows the size of the answer.
#[derive(Debug)]
pub struct Assembler {
    format: StreamFormat,
    lines: LineSplitter,
    sse: SseParser,
    state: State,
    error: Option<StreamError>,
    scratch: Vec<Line>,
}

#[derive(Debug)]
enum State {
    Chat(openai_chat::Assembly),
    Responses(openai_responses::Assembly),
    Anthropic(anthropic::Assembly),
    Ollama(ollama::Assembly),
    GeminiSse(gemini::Assembly),
    /// The JSON array is only parsed whole: its body is kept until the stream ends.
    GeminiJson(Vec<u8>),
    GenericSse(generic::SseAssembly),
    GenericNdjson(generic::NdjsonAssembly),
}

impl Assembler {
    /// An assembler for a stream of this format.
    pub fn new(format: StreamFormat) -> Self {
        let state = match format {
            StreamFormat::OpenaiChat => State::Chat(openai_chat::Assembly::new(false)),
            StreamFormat::OpenaiCompletions => State::Chat(openai_chat::Assembly::new(true)),
            StreamFormat::OpenaiResponses => State::Responses(Default::default()),
            StreamFormat::AnthropicMessages => State::Anthropic(Default::default()),
            StreamFormat::OllamaNdjson => State::Ollama(Default::default()),
            StreamFormat::GeminiSse => State::GeminiSse(Default::default()),
            StreamFormat::GeminiJson => State::GeminiJson(Vec::new()),
            StreamFormat::GenericSse => State::GenericSse(Default::default()),
            StreamFormat::GenericNdjson => State::GenericNdjson(Default::default()),
        };
        Assembler {
            format,
            lines: LineSplitter::new(format.name()),
            sse: SseParser::default(),
            state,
            error: None,
            scratch: Vec::new(),
        }
    }

    /// The format being assembled.
    pub fn format(&self) -> StreamFormat {
        self.format
    }

    /// Feeds the next chunk of the stream. After the first error, further chunks are ignored
    /// and [`Assembler::finish`] returns that error.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if let State::GeminiJson(body) = &mut self.state {
            body.extend_from_slice(chunk);
            return;
        }
        let mut lines = std::mem::take(&mut self.scratch);
        let result = self
            .lines
            .push(chunk, &mut lines)
            .and_then(|()| lines.drain(..).try_for_each(|line| self.line(&line)));
        lines.clear();
        self.scratch = lines;
        if let Err(err) = result {
            self.error = Some(err);
        }
    }

    /// The first error met so far, if any: lets a caller give up on storing early.
    pub fn error(&self) -> Option<&StreamError> {
        self.error.as_ref()
    }

    /// The final response in the provider's non-streaming JSON shape (for the generic formats,
    /// `{"events": [...]}` with every event verbatim).
    pub fn finish(mut self) -> Result<Value, StreamError> {
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        // The tail (an unterminated line, an event without its blank line) is what a cut
        // stream leaves behind: half a JSON object, half a character. Its own parse error
        // would hide the real problem, so it only counts if it completes the stream; the
        // state's check below reports a stream that never reached its end. An error the
        // upstream sent is kept.
        if let Some(missing) = self.generic_cut_off() {
            return Err(StreamError::Incomplete {
                format: self.format.name(),
                missing: missing.to_owned(),
            });
        }
        if let Err(err @ StreamError::Upstream { .. }) = self.tail() {
            return Err(err);
        }
        match self.state {
            State::Chat(a) => a.finish(),
            State::Responses(a) => a.finish(),
            State::Anthropic(a) => a.finish(),
            State::Ollama(a) => a.finish(),
            State::GeminiSse(a) => a.finish(StreamFormat::GeminiSse),
            State::GeminiJson(body) => {
                let mut assembly = gemini::Assembly::default();
                assembly.array(&body)?;
                assembly.finish(StreamFormat::GeminiJson)
            }
            State::GenericSse(a) => Ok(a.finish()),
            State::GenericNdjson(a) => Ok(a.finish()),
        }
    }

    /// A generic stream has no terminal event to wait for, so the only sign that it was cut
    /// off is that it stopped inside an event: an SSE event without its closing blank line, or
    /// an NDJSON line that is neither ended nor whole JSON. What it names is what is missing.
    fn generic_cut_off(&self) -> Option<&'static str> {
        match self.format {
            StreamFormat::GenericSse if self.lines.has_partial_line() || self.sse.is_open() => {
                Some("the end of its last event")
            }
            StreamFormat::GenericNdjson => {
                let partial = self.lines.partial_line()?;
                let whole = serde_json::from_slice::<serde::de::IgnoredAny>(partial).is_ok();
                (!whole).then_some("the end of its last line")
            }
            _ => None,
        }
    }

    fn tail(&mut self) -> Result<(), StreamError> {
        if let Some(line) = self.lines.finish()? {
            self.line(&line)?;
        }
        if self.format.is_sse() {
            if let Some(event) = self.sse.finish(self.lines.lines_seen()) {
                self.event(&event)?;
            }
        }
        Ok(())
    }

    fn line(&mut self, line: &Line) -> Result<(), StreamError> {
        if self.format.is_sse() {
            match self.sse.line(line) {
                Some(event) => self.event(&event),
                None => Ok(()),
            }
        } else {
            match &mut self.state {
                State::Ollama(a) => a.line(line),
                State::GenericNdjson(a) => {
                    a.line(line);
                    Ok(())
                }
                _ => Ok(()),
            }
        }
    }

    fn event(&mut self, event: &SseEvent) -> Result<(), StreamError> {
        match &mut self.state {
            State::Chat(a) => a.event(event),
            State::Responses(a) => a.event(event),
            State::Anthropic(a) => a.event(event),
            State::GeminiSse(a) => a.event(event),
            State::GenericSse(a) => {
                a.event(event);
                Ok(())
            }
            State::Ollama(_) | State::GenericNdjson(_) | State::GeminiJson(_) => Ok(()),
        }
    }
}

/// How to synthesize a stream on replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthesisOptions {
    /// Size in bytes of each piece of the body (the last may be shorter). Pieces are cut
    /// anywhere, even inside a multi-byte character, like a real network would; 0 sends the
    /// whole body as one piece.
    pub chunk_size: usize,
    /// Whether to send OpenAI's usage chunk (the request had `stream_options.include_usage`).
    pub include_usage: bool,
}

impl Default for SynthesisOptions {
    fn default() -> Self {
        SynthesisOptions {
            chunk_size: 64,
            include_usage: false,
        }
    }
}

/// Re-synthesizes a stream body in the provider's own event format from a final response
/// (the non-streaming shape, as returned by [`Assembler::finish`] or by the real
/// non-streaming API), cut into `chunk_size`-byte pieces.
///
/// The whole body is held at once: a long answer becomes a body about fifteen times its size.
/// [`synthesize_into`] hands it on in blocks instead.
pub fn synthesize(
    format: StreamFormat,
    final_response: &Value,
    options: &SynthesisOptions,
) -> Result<Vec<Bytes>, StreamError> {
    let mut out = Out::whole();
    write_stream(format, final_response, options, &mut out)?;
    Ok(cut(Bytes::from(out.buf), options.chunk_size))
}

/// Size of the blocks [`synthesize_into`] hands on.
pub const BLOCK_SIZE: usize = 64 * 1024;

/// Re-synthesizes a stream like [`synthesize`], handing the body to `sink` in blocks of about
/// [`BLOCK_SIZE`] bytes as they are written (not cut into `chunk_size` pieces: [`cut_block`]
/// does that), so memory stays near the size of the final response however long the stream.
/// `sink` returns `false` when nobody wants the rest any more; synthesis then stops writing.
/// An error can come after blocks were handed on (a later part of the response is malformed).
pub fn synthesize_into(
    format: StreamFormat,
    final_response: &Value,
    options: &SynthesisOptions,
    sink: &mut dyn FnMut(Bytes) -> bool,
) -> Result<(), StreamError> {
    let mut out = Out {
        buf: Vec::with_capacity(BLOCK_SIZE + 1024),
        sink: Some(sink),
        closed: false,
    };
    write_stream(format, final_response, options, &mut out)?;
    out.flush();
    Ok(())
}

/// A block of a synthesized body cut into `chunk_size`-byte pieces (0: the block whole).
pub fn cut_block(block: Bytes, chunk_size: usize) -> Vec<Bytes> {
    cut(block, chunk_size)
}

fn write_stream(
    format: StreamFormat,
    final_response: &Value,
    options: &SynthesisOptions,
    out: &mut Out<'_>,
) -> Result<(), StreamError> {
    match format {
        StreamFormat::OpenaiChat => {
            openai_chat::synthesize(final_response, false, options.include_usage, out)
        }
        StreamFormat::OpenaiCompletions => {
            openai_chat::synthesize(final_response, true, options.include_usage, out)
        }
        StreamFormat::OpenaiResponses => openai_responses::synthesize(final_response, out),
        StreamFormat::AnthropicMessages => anthropic::synthesize(final_response, out),
        StreamFormat::OllamaNdjson => ollama::synthesize(final_response, out),
        StreamFormat::GeminiSse => gemini::synthesize_sse(final_response, out),
        StreamFormat::GeminiJson => gemini::synthesize_json(final_response, out),
        StreamFormat::GenericSse => generic::synthesize_sse(final_response, out),
        StreamFormat::GenericNdjson => generic::synthesize_ndjson(final_response, out),
    }
}

/// Where a synthesized body goes: kept whole, or handed to a sink block by block.
pub(crate) struct Out<'a> {
    buf: Vec<u8>,
    sink: Option<&'a mut dyn FnMut(Bytes) -> bool>,
    /// The sink wants no more: writes are dropped, and writers may stop early.
    closed: bool,
}

impl Out<'_> {
    fn whole() -> Self {
        Out {
            buf: Vec::new(),
            sink: None,
            closed: false,
        }
    }

    /// Whether nothing written from now on will be read: a writer can skip building events.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) {
        if self.closed {
            return;
        }
        self.buf.extend_from_slice(bytes);
        if self.sink.is_some() && self.buf.len() >= BLOCK_SIZE {
            self.flush();
        }
    }

    fn flush(&mut self) {
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        if self.buf.is_empty() || self.closed {
            return;
        }
        let block = Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(BLOCK_SIZE + 1024),
        ));
        if !sink(block) {
            self.closed = true;
            self.buf = Vec::new();
        }
    }
}

fn cut(body: Bytes, chunk_size: usize) -> Vec<Bytes> {
    if chunk_size == 0 || body.len() <= chunk_size {
        return if body.is_empty() {
            Vec::new()
        } else {
            vec![body]
        };
    }
    (0..body.len())
        .step_by(chunk_size)
        .map(|start| body.slice(start..(start + chunk_size).min(body.len())))
        .collect()
}

/// Splits text into word-sized fragments the way models stream tokens: each fragment ends
/// after a run of whitespace or at about 16 bytes, always on a character boundary. Lazily: a
/// long text is never held as a list of its pieces.
pub(crate) fn fragments(text: &str) -> impl Iterator<Item = &str> {
    const MAX: usize = 16;
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut prev_space = false;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            if i > 0 && ((prev_space && !c.is_whitespace()) || i >= MAX) {
                end = i;
                break;
            }
            prev_space = c.is_whitespace();
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

/// Merges a streamed field into an accumulated object the way delta streams mean it: strings
/// concatenate, arrays extend, `null` never erases, anything else replaces.
pub(crate) fn merge_field(map: &mut Map<String, Value>, key: &str, value: Value) {
    let Some(existing) = map.get_mut(key) else {
        map.insert(key.to_owned(), value);
        return;
    };
    if value.is_null() {
        return;
    }
    match (existing, value) {
        (Value::String(a), Value::String(b)) => a.push_str(&b),
        (Value::Array(a), Value::Array(b)) => a.extend(b),
        (existing, value) => *existing = value,
    }
}

/// Parses an event's or line's JSON payload, naming it on failure.
pub(crate) fn parse_json(
    format: &'static str,
    at: &dyn Fn() -> String,
    text: &str,
) -> Result<Value, StreamError> {
    serde_json::from_str(text).map_err(|e| StreamError::Malformed {
        format,
        at: at(),
        message: format!("data is not JSON ({e})"),
    })
}

pub(crate) fn malformed(
    format: &'static str,
    at: String,
    message: impl Into<String>,
) -> StreamError {
    StreamError::Malformed {
        format,
        at,
        message: message.into(),
    }
}

pub(crate) fn synthesis_error(format: StreamFormat, message: impl Into<String>) -> StreamError {
    StreamError::Synthesis {
        format: format.name(),
        message: message.into(),
    }
}

/// A readable message for an in-stream error payload (`{"error": {"message": ...}}`,
/// `{"error": "..."}`, or anything else).
pub(crate) fn error_message(error: &Value) -> String {
    match error {
        Value::String(s) => s.clone(),
        Value::Object(o) => match o.get("message").and_then(Value::as_str) {
            Some(message) => match o.get("type").and_then(Value::as_str) {
                Some(kind) => format!("{kind}: {message}"),
                None => message.to_owned(),
            },
            None => error.to_string(),
        },
        other => other.to_string(),
    }
}

/// Appends one SSE event (`event:` line when named, then `data:`) to a body.
pub(crate) fn write_sse(out: &mut Out<'_>, name: Option<&str>, data: &str) {
    if out.is_closed() {
        return;
    }
    let mut event = Vec::with_capacity(data.len() + 32);
    if let Some(name) = name {
        event.extend_from_slice(b"event: ");
        event.extend_from_slice(name.as_bytes());
        event.push(b'\n');
    }
    for line in data.split('\n') {
        event.extend_from_slice(b"data: ");
        event.extend_from_slice(line.as_bytes());
        event.push(b'\n');
    }
    event.push(b'\n');
    out.write(&event);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Issue 25, item 5: a stream cut at the answer limit ends after a whole event, with an
    /// error event of its framing.
    #[test]
    fn a_cut_stream_ends_after_a_whole_event() {
        let sse = StreamFormat::OpenaiChat;
        let piece = b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: {\"c\"";
        // The last boundary within the room, else the first after it.
        assert_eq!(sse.cut_point(b"", piece, piece.len()), Some(30));
        assert_eq!(sse.cut_point(b"", piece, 29), Some(15));
        assert_eq!(sse.cut_point(b"", piece, 3), Some(0));
        assert_eq!(sse.cut_point(b"1}\n\n", piece, 3), Some(0));
        // Inside an event: the rest of it goes first, a boundary split across pieces counts.
        assert_eq!(sse.cut_point(b"\"x\"", piece, 3), Some(15));
        assert_eq!(sse.cut_point(b"2}\n", b"\ndata: {", 0), Some(1));
        assert_eq!(sse.cut_point(b"\"x\"", b"no end in sight", 100), None);
        assert_eq!(sse.cut_point(b"a\r\n", b"\r\ndata", 10), Some(2));
        let ndjson = StreamFormat::OllamaNdjson;
        assert_eq!(ndjson.cut_point(b"}", b"{\"a\":1}\n{\"b\"", 100), Some(8));
        assert_eq!(StreamFormat::GeminiJson.cut_point(b"", b"[{}]", 4), None);

        let event = sse.error_event("too_large", "over the limit").unwrap();
        let text = std::str::from_utf8(&event).unwrap();
        let data = text.strip_prefix("event: error\ndata: ").unwrap();
        let data: Value = serde_json::from_str(data.strip_suffix("\n\n").unwrap()).unwrap();
        assert_eq!(
            data,
            json!({"type": "error", "error": {"type": "too_large", "message": "over the limit"}})
        );
        let line = ndjson.error_event("too_large", "over the limit").unwrap();
        assert_eq!(&line[..], b"{\"error\":\"over the limit\"}\n");
        assert_eq!(StreamFormat::GeminiJson.error_event("x", "y"), None);
    }

    #[test]
    fn names_round_trip_and_are_unique() {
        for format in StreamFormat::ALL {
            assert_eq!(StreamFormat::from_name(format.name()), Some(format));
        }
        assert_eq!(StreamFormat::from_name("openai"), None);
    }

    #[test]
    fn detect_by_profile_and_content_type() {
        let sse = "text/event-stream; charset=utf-8";
        assert_eq!(
            StreamFormat::detect(Profile::OpenaiChat, sse),
            Some(StreamFormat::OpenaiChat)
        );
        assert_eq!(
            StreamFormat::detect(Profile::AnthropicMessages, "Text/Event-Stream"),
            Some(StreamFormat::AnthropicMessages)
        );
        assert_eq!(
            StreamFormat::detect(Profile::OllamaGenerate, "application/x-ndjson"),
            Some(StreamFormat::OllamaNdjson)
        );
        assert_eq!(
            StreamFormat::detect(Profile::Http, sse),
            Some(StreamFormat::GenericSse)
        );
        assert_eq!(
            StreamFormat::detect(Profile::OpenaiChat, "application/x-ndjson"),
            Some(StreamFormat::GenericNdjson)
        );
        assert_eq!(
            StreamFormat::detect(Profile::OpenaiChat, "application/json"),
            None
        );
        assert_eq!(StreamFormat::detect(Profile::OllamaChat, ""), None);
    }

    #[test]
    fn wants_stream_follows_provider_defaults() {
        assert!(wants_stream(Profile::OpenaiChat, &json!({"stream": true})));
        assert!(!wants_stream(Profile::OpenaiChat, &json!({})));
        assert!(wants_stream(Profile::OllamaChat, &json!({})));
        assert!(wants_stream(
            Profile::OllamaGenerate,
            &json!({"model": "x"})
        ));
        assert!(!wants_stream(
            Profile::OllamaChat,
            &json!({"stream": false})
        ));
        assert!(!wants_stream(Profile::OllamaEmbed, &json!({})));
        assert!(include_usage(
            &json!({"stream_options": {"include_usage": true}})
        ));
        assert!(!include_usage(&json!({"stream": true})));
    }

    #[test]
    fn fragments_cover_the_text_on_char_boundaries() {
        let text = "Héllo wörld,  this is a looooooooooooooooooong 日本語のテキストです";
        let parts: Vec<&str> = fragments(text).collect();
        assert!(parts.len() > 5);
        assert_eq!(parts.concat(), text);
        assert!(parts.iter().all(|p| !p.is_empty()));
        assert_eq!(fragments("").count(), 0);
    }

    #[test]
    fn cut_sizes() {
        let pieces = cut(Bytes::from_static(b"abcdefg"), 3);
        assert_eq!(pieces, [&b"abc"[..], b"def", b"g"]);
        assert_eq!(cut(Bytes::from_static(b"abc"), 0), [&b"abc"[..]]);
        assert!(cut(Bytes::new(), 4).is_empty());
    }

    #[test]
    fn merge_semantics() {
        let mut map = Map::new();
        merge_field(&mut map, "content", json!(""));
        merge_field(&mut map, "content", json!("Hi"));
        merge_field(&mut map, "content", json!(null));
        merge_field(&mut map, "refusal", json!(null));
        merge_field(&mut map, "list", json!([1]));
        merge_field(&mut map, "list", json!([2]));
        merge_field(&mut map, "n", json!(1));
        merge_field(&mut map, "n", json!(2));
        assert_eq!(
            Value::Object(map),
            json!({"content": "Hi", "refusal": null, "list": [1, 2], "n": 2})
        );
    }
}
