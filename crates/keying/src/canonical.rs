//! The canonical form of bodies, queries and headers (key contract steps 2 to 5).
//!
//! `canonical_body` and `system_text` state the body rules on a `serde_json::Value`, plainly;
//! keying itself runs the single-pass equivalent in `doc.rs`, and the property tests hold the
//! two to the same canonical bytes.

use crate::{is_query_credential, KeyConfig, Profile, SEMANTIC_HEADERS};
use serde_json::{Map, Value};

/// Top-level body members that vary between identical questions (transport, tracing, billing)
/// and are dropped from the key for every LLM profile. Part of key v1.
pub const DEFAULT_VOLATILE: &[&str] = &[
    "stream",
    "stream_options",
    "user",
    "metadata",
    "request_id",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "service_tier",
    "store",
];

/// Volatile members specific to the Ollama profiles. Part of key v1.
pub const OLLAMA_VOLATILE: &[&str] = &["keep_alive"];

/// Top-level members whose strings (at any depth) lose trailing whitespace per line.
pub(crate) const PROMPT_MEMBERS: &[&str] =
    &["messages", "system", "input", "instructions", "prompt"];

/// Gemini's members holding the system instruction: the API reads both spellings of a field
/// (proto JSON), and its own REST examples use the second.
pub(crate) const GEMINI_SYSTEM: &[&str] = &["systemInstruction", "system_instruction"];

/// Gemini's generation settings. Only `generationConfig` gets defaults merged: the snake_case
/// spelling is keyed as written (see docs/keying.md).
pub(crate) const GEMINI_GENERATION_CONFIG: &str = "generationConfig";
const GEMINI_GENERATION_CONFIG_SNAKE: &str = "generation_config";

/// The query parameter that chooses how Gemini frames its answer, not what it answers (`$alt`
/// is the same system parameter), and the framings a recorder re-synthesizes from one final
/// response: the event stream and JSON. Any other framing (`alt=proto`) stays in the key.
const GEMINI_FRAMING: &[&str] = &["alt", "$alt"];
const GEMINI_JSON_FRAMINGS: &[&str] = &["sse", "json"];

/// Defaults Google documents for `GenerationConfig` members, merged into `generationConfig`
/// when absent (docs/keying.md cites each). Sampling settings (`temperature`, `topP`, `topK`,
/// `maxOutputTokens`) vary by model and are never merged.
pub(crate) const GEMINI_GENERATION_DEFAULTS: &[(&str, DefaultValue)] = &[
    ("candidateCount", DefaultValue::Int(1)),
    ("responseLogprobs", DefaultValue::Bool(false)),
    ("responseMimeType", DefaultValue::Str("text/plain")),
];

/// Whether a Gemini body gets a `generationConfig` of defaults because it has none at all.
pub(crate) fn gemini_inserts_generation_config(has_member: impl Fn(&str) -> bool) -> bool {
    !has_member(GEMINI_GENERATION_CONFIG) && !has_member(GEMINI_GENERATION_CONFIG_SNAKE)
}

/// Provider defaults merged into a body when the member is absent, so that spelling a default
/// out and leaving it implicit ask the same question.
pub(crate) fn implicit_defaults(profile: Profile) -> &'static [(&'static str, DefaultValue)] {
    use DefaultValue::*;
    match profile {
        Profile::OpenaiChat => &[
            ("temperature", Int(1)),
            ("top_p", Int(1)),
            ("n", Int(1)),
            ("presence_penalty", Int(0)),
            ("frequency_penalty", Int(0)),
            ("logprobs", Bool(false)),
            ("parallel_tool_calls", Bool(true)),
        ],
        Profile::OpenaiResponses => &[
            ("temperature", Int(1)),
            ("top_p", Int(1)),
            ("parallel_tool_calls", Bool(true)),
            ("truncation", Str("disabled")),
            ("background", Bool(false)),
        ],
        Profile::OpenaiCompletions => &[
            ("temperature", Int(1)),
            ("top_p", Int(1)),
            ("n", Int(1)),
            ("presence_penalty", Int(0)),
            ("frequency_penalty", Int(0)),
            ("echo", Bool(false)),
            ("best_of", Int(1)),
        ],
        Profile::AnthropicMessages => &[("temperature", Int(1))],
        _ => &[],
    }
}

pub(crate) enum DefaultValue {
    Int(i64),
    Bool(bool),
    Str(&'static str),
}

impl DefaultValue {
    fn to_value(&self) -> Value {
        match self {
            DefaultValue::Int(i) => Value::from(*i),
            DefaultValue::Bool(b) => Value::Bool(*b),
            DefaultValue::Str(s) => Value::from(*s),
        }
    }
}

/// Applies key contract step 2 to a parsed JSON body: for LLM profiles, drop nulls and
/// volatile members, merge implicit defaults and strip trailing whitespace from prompt text.
/// Bodies of the `http` profile, and bodies that are not objects, are returned unchanged.
pub fn canonical_body(profile: Profile, body: Value, config: &KeyConfig) -> Value {
    let Value::Object(map) = body else {
        return body;
    };
    if !profile.is_llm() {
        return Value::Object(map);
    }
    let mut out = Map::new();
    for (name, value) in map {
        if value.is_null() || config.is_volatile(profile, &name) {
            continue;
        }
        let value = if profile == Profile::GeminiGenerate {
            gemini_member(&name, value)
        } else if PROMPT_MEMBERS.contains(&name.as_str()) {
            strip_trailing_whitespace(value)
        } else {
            value
        };
        out.insert(name, value);
    }
    for (name, default) in implicit_defaults(profile) {
        if !out.contains_key(*name) {
            out.insert((*name).to_owned(), default.to_value());
        }
    }
    if profile == Profile::GeminiGenerate
        && gemini_inserts_generation_config(|n| out.contains_key(n))
    {
        let config = merge_generation_defaults(Map::new());
        out.insert(GEMINI_GENERATION_CONFIG.to_owned(), config);
    }
    Value::Object(out)
}

/// A top-level member of a Gemini body after step 2: prompt text stripped in `contents` and the
/// system instruction, defaults merged into `generationConfig`.
fn gemini_member(name: &str, value: Value) -> Value {
    match name {
        "contents" => match value {
            Value::Array(contents) => {
                Value::Array(contents.into_iter().map(gemini_content).collect())
            }
            other => other,
        },
        _ if GEMINI_SYSTEM.contains(&name) => gemini_content(value),
        GEMINI_GENERATION_CONFIG => match value {
            Value::Object(config) => merge_generation_defaults(config),
            other => other,
        },
        _ => value,
    }
}

/// A Gemini `Content`: the `text` of each of its `parts` loses trailing whitespace per line.
fn gemini_content(content: Value) -> Value {
    let Value::Object(mut content) = content else {
        return content;
    };
    if let Some(Value::Array(parts)) = content.get_mut("parts") {
        for part in parts {
            if let Some(text) = part.as_object_mut().and_then(|p| p.get_mut("text")) {
                *text = strip_trailing_whitespace(text.take());
            }
        }
    }
    Value::Object(content)
}

/// `generationConfig` without its null members, with Google's documented defaults merged.
fn merge_generation_defaults(mut config: Map<String, Value>) -> Value {
    config.retain(|_, value| !value.is_null());
    for (name, default) in GEMINI_GENERATION_DEFAULTS {
        if !config.contains_key(*name) {
            config.insert((*name).to_owned(), default.to_value());
        }
    }
    Value::Object(config)
}

fn strip_trailing_whitespace(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(strip_lines(&s)),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(strip_trailing_whitespace).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, strip_trailing_whitespace(v)))
                .collect(),
        ),
        other => other,
    }
}

fn strip_lines(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, line) in s.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(line.trim_end_matches([' ', '\t', '\r']));
    }
    out
}

/// The system text of a canonical body (key contract step 3), or `None` when it has none.
pub fn system_text(profile: Profile, body: &Value) -> Option<String> {
    let obj = body.as_object()?;
    match profile {
        Profile::OpenaiChat | Profile::OllamaChat => {
            system_messages(obj.get("messages")?).map(|parts| parts.join("\n"))
        }
        Profile::OpenaiResponses => {
            let mut parts = Vec::new();
            if let Some(Value::String(instructions)) = obj.get("instructions") {
                parts.push(instructions.clone());
            }
            if let Some(messages) = obj.get("input").and_then(system_messages) {
                parts.extend(messages);
            }
            (!parts.is_empty()).then(|| parts.join("\n"))
        }
        Profile::AnthropicMessages => match obj.get("system")? {
            Value::String(s) => Some(s.clone()),
            Value::Array(blocks) => Some(
                blocks
                    .iter()
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            _ => None,
        },
        Profile::OllamaGenerate => obj.get("system")?.as_str().map(str::to_owned),
        Profile::GeminiGenerate => {
            let instruction = GEMINI_SYSTEM.iter().find_map(|name| obj.get(*name))?;
            instruction
                .is_object()
                .then(|| gemini_parts_text(instruction))
        }
        _ => None,
    }
}

/// The concatenated `text` strings of a Gemini `Content`'s `parts`.
fn gemini_parts_text(content: &Value) -> String {
    content
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect()
}

/// Texts of the `system`/`developer` messages in a message list, or `None` when there are none.
fn system_messages(messages: &Value) -> Option<Vec<String>> {
    let texts: Vec<String> = messages
        .as_array()?
        .iter()
        .filter(|m| {
            matches!(
                m.get("role").and_then(Value::as_str),
                Some("system" | "developer")
            )
        })
        .map(|m| content_text(m.get("content")))
        .collect();
    (!texts.is_empty()).then_some(texts)
}

/// A message content as text: a string as is, an array as the concatenation of its parts'
/// `text` strings.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// Key contract step 4: the semantic headers as an object, names lowercased, values trimmed,
/// repeats joined with `,` in the order received.
pub(crate) fn semantic_headers(headers: &[(&str, &str)]) -> Value {
    let mut out = Map::new();
    for (name, value) in headers {
        let name = name.trim().to_ascii_lowercase();
        if !SEMANTIC_HEADERS.contains(&name.as_str()) {
            continue;
        }
        let value = value.trim();
        match out.get_mut(&name) {
            Some(Value::String(existing)) => {
                existing.push(',');
                existing.push_str(value);
            }
            _ => {
                out.insert(name, Value::from(value));
            }
        }
    }
    Value::Object(out)
}

/// Key contract step 5: the query as sorted `[name, value]` pairs, form-decoded, credentials
/// (and for Gemini, the framing parameter `alt=sse` or `alt=json`) dropped.
pub(crate) fn canonical_query(profile: Profile, query: &str) -> Value {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|segment| !segment.is_empty())
        .map(|segment| match segment.split_once('=') {
            Some((name, value)) => (form_decode(name), form_decode(value)),
            None => (form_decode(segment), String::new()),
        })
        .filter(|(name, _)| !is_query_credential(name))
        .filter(|(name, value)| {
            profile != Profile::GeminiGenerate
                || !(GEMINI_FRAMING.contains(&name.as_str())
                    && GEMINI_JSON_FRAMINGS.contains(&value.as_str()))
        })
        .collect();
    pairs.sort();
    Value::Array(
        pairs
            .into_iter()
            .map(|(n, v)| Value::Array(vec![Value::String(n), Value::String(v)]))
            .collect(),
    )
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a byte; invalid UTF-8
/// is replaced rather than rejected, because keying never fails. Public so that other code
/// comparing query names (redaction) decodes them exactly as the key does.
pub fn form_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match (hex_digit(bytes[i + 1]), hex_digit(bytes[i + 2])) {
                    (Some(hi), Some(lo)) => {
                        out.push(hi * 16 + lo);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_decoding() {
        assert_eq!(form_decode("a+b%20c%2"), "a b c%2");
        assert_eq!(form_decode("%41%zz%"), "A%zz%");
        assert_eq!(form_decode("caf%C3%A9"), "café");
    }

    #[test]
    fn lines_lose_trailing_whitespace_only() {
        assert_eq!(strip_lines("  a \t\r\n b  \n\n"), "  a\n b\n\n");
    }
}
