//! Gemini `streamGenerateContent` streams: each event (or, without `alt=sse`, each element of
//! one JSON array) is a whole `GenerateContentResponse` holding the next piece of each
//! candidate's parts; the last one carries the `finishReason` and the final `usageMetadata`.
//!
//! There is no terminal event and no part index: consecutive text parts of one candidate are
//! one part cut in pieces (their texts concatenate, as do thoughts, separately from answer
//! text), every other part (a function call, inline data, code) arrives whole. A stream is
//! complete when a candidate has its `finishReason`, or when the prompt was blocked.

use super::{error_message, fragments, malformed, parse_json, synthesis_error, write_sse};
use super::{Out, StreamError, StreamFormat};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

const SSE: StreamFormat = StreamFormat::GeminiSse;

/// Part members that a text piece may carry besides its text: a piece with only these
/// continues the text part before it.
const TEXT_PART_MEMBERS: &[&str] = &["text", "thought", "thoughtSignature"];

/// Top-level members every synthesized chunk repeats, as the API sends them.
const EVERY_CHUNK: &[&str] = &["modelVersion", "responseId", "createTime"];

#[derive(Debug, Default)]
pub(crate) struct Assembly {
    /// Top-level members other than `candidates`, the last value of each.
    top: Map<String, Value>,
    candidates: BTreeMap<u64, Candidate>,
    chunks: u64,
}

#[derive(Debug, Default)]
struct Candidate {
    /// Members other than `content`, the last value of each (`finishReason`, ratings, ...).
    members: Map<String, Value>,
    /// `content` members other than `parts` (`role`).
    content: Map<String, Value>,
    parts: Vec<Value>,
    has_content: bool,
}

impl Assembly {
    /// One SSE event.
    pub(super) fn event(&mut self, event: &super::framing::SseEvent) -> Result<(), StreamError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let at = || event.at();
        let payload = parse_json(SSE.name(), &at, data)?;
        self.chunk(payload, SSE, &at)
    }

    /// A whole JSON array stream (`streamGenerateContent` without `alt=sse`).
    pub(super) fn array(&mut self, body: &[u8]) -> Result<(), StreamError> {
        let format = StreamFormat::GeminiJson;
        let at = || "the response body".to_owned();
        let text = std::str::from_utf8(body)
            .map_err(|_| malformed(format.name(), at(), "the body is not UTF-8"))?;
        if text.trim().is_empty() {
            return Ok(());
        }
        let parsed = serde_json::from_str(text).map_err(|e| {
            if e.is_eof() {
                StreamError::Incomplete {
                    format: format.name(),
                    missing: "the end of the JSON array".into(),
                }
            } else {
                malformed(format.name(), at(), format!("the body is not JSON ({e})"))
            }
        })?;
        let chunks = match parsed {
            Value::Array(chunks) => chunks,
            // An error answer, sent as one object instead of the array.
            object @ Value::Object(_) => vec![object],
            _ => {
                return Err(malformed(
                    format.name(),
                    at(),
                    "the body is not a JSON array",
                ))
            }
        };
        for (i, chunk) in chunks.into_iter().enumerate() {
            self.chunk(chunk, format, &|| format!("array element {i}"))?;
        }
        Ok(())
    }

    fn chunk(
        &mut self,
        payload: Value,
        format: StreamFormat,
        at: &dyn Fn() -> String,
    ) -> Result<(), StreamError> {
        let Value::Object(payload) = payload else {
            return Err(malformed(
                format.name(),
                at(),
                "the chunk is not a JSON object",
            ));
        };
        if let Some(error) = payload.get("error").filter(|e| !e.is_null()) {
            return Err(StreamError::Upstream {
                format: format.name(),
                at: at(),
                message: error_message(error),
            });
        }
        self.chunks += 1;
        for (name, value) in payload {
            match (name.as_str(), value) {
                ("candidates", Value::Array(candidates)) => {
                    for (position, candidate) in candidates.into_iter().enumerate() {
                        self.candidate(position as u64, candidate, format, at)?;
                    }
                }
                ("candidates", _) => {
                    return Err(malformed(
                        format.name(),
                        at(),
                        "`candidates` is not an array",
                    ))
                }
                (_, Value::Null) => {}
                (_, value) => {
                    self.top.insert(name, value);
                }
            }
        }
        Ok(())
    }

    fn candidate(
        &mut self,
        position: u64,
        candidate: Value,
        format: StreamFormat,
        at: &dyn Fn() -> String,
    ) -> Result<(), StreamError> {
        let Value::Object(candidate) = candidate else {
            return Err(malformed(
                format.name(),
                at(),
                "a candidate is not an object",
            ));
        };
        let index = candidate
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position);
        let assembled = self.candidates.entry(index).or_default();
        for (name, value) in candidate {
            match (name.as_str(), value) {
                ("content", Value::Object(content)) => {
                    assembled.has_content = true;
                    for (name, value) in content {
                        match (name.as_str(), value) {
                            ("parts", Value::Array(parts)) => {
                                for part in parts {
                                    push_part(&mut assembled.parts, part);
                                }
                            }
                            (_, Value::Null) => {}
                            (_, value) => {
                                assembled.content.insert(name, value);
                            }
                        }
                    }
                }
                (_, Value::Null) => {}
                (_, value) => {
                    assembled.members.insert(name, value);
                }
            }
        }
        Ok(())
    }

    pub(super) fn finish(self, format: StreamFormat) -> Result<Value, StreamError> {
        if self.chunks == 0 {
            return Err(StreamError::Incomplete {
                format: format.name(),
                missing: "any chunk".into(),
            });
        }
        let finished = self
            .candidates
            .values()
            .any(|c| c.members.contains_key("finishReason"));
        let blocked = self.top.get("promptFeedback").is_some_and(|feedback| {
            feedback
                .get("blockReason")
                .is_some_and(|reason| !reason.is_null())
        });
        if !finished && !blocked {
            return Err(StreamError::Incomplete {
                format: format.name(),
                missing: "a candidate's `finishReason`".into(),
            });
        }
        let mut response = Map::new();
        if !self.candidates.is_empty() {
            let candidates = self.candidates.into_values().map(Candidate::into_value);
            response.insert("candidates".into(), Value::Array(candidates.collect()));
        }
        response.extend(self.top);
        Ok(Value::Object(response))
    }
}

impl Candidate {
    fn into_value(self) -> Value {
        let mut candidate = Map::new();
        if self.has_content {
            let mut content = Map::new();
            content.insert("parts".into(), Value::Array(self.parts));
            content.extend(self.content);
            candidate.insert("content".into(), Value::Object(content));
        }
        candidate.extend(self.members);
        Value::Object(candidate)
    }
}

/// Whether a part is a piece of text (or of a thought) and nothing else.
fn text_piece(part: &Value) -> Option<&Map<String, Value>> {
    let part = part.as_object()?;
    let only_text = part.get("text").is_some_and(Value::is_string)
        && part.keys().all(|k| TEXT_PART_MEMBERS.contains(&k.as_str()));
    only_text.then_some(part)
}

fn is_thought(part: &Map<String, Value>) -> bool {
    part.get("thought")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Appends a streamed part: a text piece continues the text part before it when both are
/// answer text or both are thought; anything else is a part of its own.
fn push_part(parts: &mut Vec<Value>, part: Value) {
    let continues = match (parts.last().and_then(text_piece), text_piece(&part)) {
        (Some(last), Some(piece)) => is_thought(last) == is_thought(piece),
        _ => false,
    };
    if !continues {
        parts.push(part);
        return;
    }
    let (Some(Value::Object(last)), Value::Object(piece)) = (parts.last_mut(), part) else {
        return;
    };
    for (name, value) in piece {
        match (name.as_str(), last.get_mut(&name), value) {
            ("text", Some(Value::String(text)), Value::String(more)) => text.push_str(&more),
            (_, _, value) => {
                last.insert(name, value);
            }
        }
    }
}

/// The chunks a Gemini stream of this final response would have held, in order, each handed
/// to `emit` as it is made (the last one held back until the end, to carry the response's
/// closing members), so a long answer is never held as a list of chunks.
fn each_chunk(
    final_response: &Value,
    format: StreamFormat,
    emit: &mut dyn FnMut(Value),
) -> Result<(), StreamError> {
    let Some(response) = final_response.as_object() else {
        return Err(synthesis_error(
            format,
            "the final response is not a JSON object",
        ));
    };
    let mut every = Map::new();
    let mut last_only = Map::new();
    for (name, value) in response {
        if name == "candidates" {
            continue;
        }
        if EVERY_CHUNK.contains(&name.as_str()) {
            every.insert(name.clone(), value.clone());
        } else {
            last_only.insert(name.clone(), value.clone());
        }
    }
    let candidates = match response.get("candidates") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(candidates)) => candidates.as_slice(),
        Some(_) => return Err(synthesis_error(format, "`candidates` is not an array")),
    };
    let mut held: Option<Map<String, Value>> = None;
    for candidate in candidates {
        let Some(candidate) = candidate.as_object() else {
            return Err(synthesis_error(format, "a candidate is not an object"));
        };
        candidate_pieces(candidate, format, &mut |piece| {
            let mut chunk = Map::new();
            chunk.insert("candidates".into(), Value::Array(vec![piece]));
            chunk.extend(every.clone());
            if let Some(previous) = held.replace(chunk) {
                emit(Value::Object(previous));
            }
        })?;
    }
    let mut last = held.unwrap_or(every);
    last.extend(last_only);
    emit(Value::Object(last));
    Ok(())
}

/// One candidate as the pieces of it that successive chunks carry: its text parts cut in
/// word-sized fragments, other parts whole, its other members (`finishReason`, ...) on the last.
fn candidate_pieces(
    candidate: &Map<String, Value>,
    format: StreamFormat,
    emit: &mut dyn FnMut(Value),
) -> Result<(), StreamError> {
    let members: Map<String, Value> = candidate
        .iter()
        .filter(|(name, _)| name.as_str() != "content")
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let content = match candidate.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::Object(content)) => Some(content),
        Some(_) => {
            return Err(synthesis_error(
                format,
                "a candidate's `content` is not an object",
            ))
        }
    };
    let index = members.get("index").cloned();
    let mut held: Option<Map<String, Value>> = None;
    if let Some(content) = content {
        let rest: Map<String, Value> = content
            .iter()
            .filter(|(name, _)| name.as_str() != "parts")
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        let parts = match content.get("parts") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(parts)) => parts.as_slice(),
            Some(_) => {
                return Err(synthesis_error(
                    format,
                    "a candidate's `parts` is not an array",
                ))
            }
        };
        let piece = |part: Value| {
            let mut content = rest.clone();
            content.insert("parts".into(), Value::Array(vec![part]));
            let mut piece = Map::new();
            piece.insert("content".into(), Value::Object(content));
            if let Some(index) = &index {
                piece.insert("index".into(), index.clone());
            }
            piece
        };
        for part in parts {
            split_part(part, &mut |part| {
                if let Some(previous) = held.replace(piece(part)) {
                    emit(Value::Object(previous));
                }
            });
        }
        if held.is_none() {
            let mut content = rest;
            content.insert("parts".into(), json!([]));
            held = Some(Map::from_iter([(
                "content".to_owned(),
                Value::Object(content),
            )]));
        }
    }
    match held {
        Some(mut last) => {
            last.extend(members);
            emit(Value::Object(last));
        }
        None => emit(Value::Object(members)),
    }
    Ok(())
}

/// A text part as the text pieces a stream sends (its other members on the last piece); any
/// other part as itself.
fn split_part(part: &Value, emit: &mut dyn FnMut(Value)) {
    let Some(piece) = text_piece(part) else {
        return emit(part.clone());
    };
    let text = piece.get("text").and_then(Value::as_str).unwrap_or("");
    let mut texts = fragments(text).peekable();
    let Some(mut current) = texts.next() else {
        return emit(part.clone());
    };
    if texts.peek().is_none() {
        return emit(part.clone());
    }
    let with_text = |members: &mut dyn Iterator<Item = (&String, &Value)>, text: &str| {
        let mut out: Map<String, Value> = members
            .filter(|(name, _)| name.as_str() != "text")
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        out.insert("text".into(), json!(text));
        Value::Object(out)
    };
    for next in texts {
        let mut thought = piece.iter().filter(|(name, _)| name.as_str() == "thought");
        emit(with_text(&mut thought, current));
        current = next;
    }
    emit(with_text(&mut piece.iter(), current));
}

/// A Gemini final response as the SSE stream `streamGenerateContent?alt=sse` sends.
pub(crate) fn synthesize_sse(final_response: &Value, out: &mut Out<'_>) -> Result<(), StreamError> {
    each_chunk(final_response, SSE, &mut |chunk| {
        write_sse(out, None, &chunk.to_string());
    })
}

/// A Gemini final response as the JSON array `streamGenerateContent` sends without `alt=sse`.
pub(crate) fn synthesize_json(
    final_response: &Value,
    out: &mut Out<'_>,
) -> Result<(), StreamError> {
    out.write(b"[");
    let mut first = true;
    each_chunk(final_response, StreamFormat::GeminiJson, &mut |chunk| {
        if !std::mem::take(&mut first) {
            out.write(b",\r\n");
        }
        out.write(chunk.to_string().as_bytes());
    })?;
    out.write(b"]");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(final_response: &Value, format: StreamFormat) -> Result<Vec<Value>, StreamError> {
        let mut chunks = Vec::new();
        each_chunk(final_response, format, &mut |chunk| chunks.push(chunk))?;
        Ok(chunks)
    }

    fn assemble(chunks: &[Value]) -> Result<Value, StreamError> {
        let mut assembly = Assembly::default();
        for chunk in chunks {
            assembly.chunk(chunk.clone(), SSE, &|| "test".to_owned())?;
        }
        assembly.finish(SSE)
    }

    #[test]
    fn text_pieces_join_thoughts_apart_and_other_parts_whole() {
        let chunk = |parts: Value, extra: Value| {
            let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
            if let (Some(c), Value::Object(extra)) = (candidate.as_object_mut(), extra) {
                c.extend(extra);
            }
            json!({"candidates": [candidate], "modelVersion": "gemini-2.5-flash"})
        };
        let assembled = assemble(&[
            chunk(json!([{"text": "Let me ", "thought": true}]), json!({})),
            chunk(
                json!([{"text": "think.", "thought": true, "thoughtSignature": "c2ln"}]),
                json!({}),
            ),
            chunk(json!([{"text": "The "}]), json!({})),
            chunk(json!([{"text": "answer."}]), json!({})),
            chunk(
                json!([{"functionCall": {"name": "f", "args": {"a": 1}}}]),
                json!({}),
            ),
            chunk(json!([{"text": "Done."}]), json!({"finishReason": "STOP"})),
        ])
        .unwrap();
        assert_eq!(
            assembled["candidates"][0]["content"]["parts"],
            json!([
                {"text": "Let me think.", "thought": true, "thoughtSignature": "c2ln"},
                {"text": "The answer."},
                {"functionCall": {"name": "f", "args": {"a": 1}}},
                {"text": "Done."}
            ])
        );
        assert_eq!(assembled["candidates"][0]["finishReason"], "STOP");
        assert_eq!(assembled["modelVersion"], "gemini-2.5-flash");
    }

    #[test]
    fn a_stream_without_a_finish_reason_was_cut_off() {
        let err = assemble(&[json!({"candidates": [{"content": {"parts": [{"text": "Hi"}]}}]})])
            .unwrap_err();
        assert!(matches!(err, StreamError::Incomplete { .. }), "{err}");
        assert!(assemble(&[]).is_err());
        // A blocked prompt has no candidates and is complete.
        let blocked = assemble(&[json!({"promptFeedback": {"blockReason": "SAFETY"}})]).unwrap();
        assert_eq!(
            blocked,
            json!({"promptFeedback": {"blockReason": "SAFETY"}})
        );
    }

    #[test]
    fn an_error_in_the_stream_is_the_upstream_s() {
        let err = assemble(&[
            json!({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}),
        ])
        .unwrap_err();
        assert!(matches!(err, StreamError::Upstream { .. }), "{err}");
        assert!(err.to_string().contains("overloaded"), "{err}");
    }

    #[test]
    fn synthesized_chunks_assemble_back() {
        let final_response = json!({
            "candidates": [{
                "content": {"role": "model", "parts": [
                    {"text": "Thinking about the weather in Paris", "thought": true},
                    {"text": "It is sunny in Paris today, with a light breeze from the west.", "thoughtSignature": "c2ln"},
                    {"functionCall": {"id": "call-1", "name": "get_weather", "args": {"city": "Paris"}}}
                ]},
                "finishReason": "STOP", "index": 0, "avgLogprobs": -0.25
            }],
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 20, "totalTokenCount": 29},
            "modelVersion": "gemini-2.5-flash", "responseId": "r-1"
        });
        let chunks = chunks(&final_response, SSE).unwrap();
        assert!(chunks.len() > 5, "{chunks:?}");
        for chunk in &chunks {
            assert_eq!(chunk["modelVersion"], "gemini-2.5-flash");
        }
        assert!(chunks[0].get("usageMetadata").is_none());
        assert_eq!(assemble(&chunks).unwrap(), final_response);
        let empty = json!({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "MAX_TOKENS"}]});
        assert_eq!(
            assemble(&self::chunks(&empty, SSE).unwrap()).unwrap(),
            empty
        );
    }
}
