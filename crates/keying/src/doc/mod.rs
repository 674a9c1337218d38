//! The fast canonical body: a JSON body parsed once into a compact tree that borrows from the
//! request, with step 2 of the key contract applied on the way, then written as RFC 8785
//! straight into a sink.
//!
//! Two parsers build the tree. [`scan`] reads the common shape of a request in one pass: each
//! string is scanned once, sixteen bytes at a time, and copied at most once, already escaped
//! the RFC 8785 way and stripped. It gives up on anything it is not certain `serde_json` reads the
//! same way (deep nesting, unpaired surrogates, any syntax error), and [`visitor`], which is
//! `serde_json`'s own parser, then decides. So a body is JSON exactly when
//! `serde_json::from_str::<Value>` says so, as the contract requires.
//!
//! `canonical_body` and `system_text` in `canonical.rs` remain the plain `Value` statement of
//! the same rules; the property tests hold both parsers to the bytes they give.

mod scan;
mod visitor;

use crate::canonical::{
    gemini_inserts_generation_config, implicit_defaults, DefaultValue, GEMINI_GENERATION_CONFIG,
    GEMINI_GENERATION_DEFAULTS, GEMINI_SYSTEM, PROMPT_MEMBERS,
};
use crate::jcs::{self, Sink};
use crate::{KeyConfig, Profile, Streaming};
use std::borrow::Cow;

/// A parsed JSON body.
pub(crate) struct Doc<'a> {
    /// Every value in document order; a container is followed by its contents, an object's
    /// contents alternating member name and member value.
    nodes: Vec<Node<'a>>,
    /// The text of every string that had escapes: member names decoded, string values
    /// already in canonical (escaped) form.
    texts: String,
}

#[derive(Debug, Clone, Copy)]
enum Node<'a> {
    Null,
    Bool(bool),
    Number(f64),
    Text(Text<'a>),
    /// `end` is the index of the first node after the array's contents.
    Array {
        end: usize,
    },
    /// `end` is the index of the first node after the object's contents.
    Object {
        end: usize,
    },
}

// `Doc::with_capacity` counts on this.
const _: () = assert!(std::mem::size_of::<Node>() <= 32);

#[derive(Debug, Clone, Copy)]
enum Text<'a> {
    /// A slice of the body: a JSON string with its quotes and without escape sequences, and
    /// so (JSON allows no raw control character in a string) without anything RFC 8785
    /// escapes. It is its own canonical form, written in one piece.
    Quoted(&'a str),
    /// A member name with escapes, decoded (no quotes), in `texts[start..end]`. Names are kept
    /// decoded because members sort by their decoded text.
    Name { start: usize, end: usize },
    /// A string value in canonical form with its quotes (escaped, and stripped in a prompt
    /// member) in `texts[start..end]`: writing it is one copy, the one escaping pass having
    /// run while parsing.
    Canonical { start: usize, end: usize },
}

/// The value of a top-level member of a canonical LLM body.
#[derive(Clone, Copy)]
enum MemberValue {
    Node(usize),
    Default(&'static DefaultValue),
    /// An object written without its null members and with these defaults merged where
    /// absent (Gemini's `generationConfig`); `None` when the body has no such object at all.
    Merged(Option<usize>, &'static [(&'static str, DefaultValue)]),
}

/// A body ready to write: the document and, for an LLM object body, its top-level members
/// after step 2 (repeats resolved, nulls and volatile members dropped, defaults merged), in
/// RFC 8785 order.
pub(crate) struct CanonicalBody<'d, 'a> {
    doc: &'d Doc<'a>,
    top: Option<Vec<(&'d str, MemberValue)>>,
}

impl<'a> Doc<'a> {
    /// Parses `text`, or `None` when `serde_json` rejects it (the body is then raw).
    pub(crate) fn parse(text: &'a str, profile: Profile) -> Option<Doc<'a>> {
        let context = Context::body(profile);
        scan::parse(text, context).or_else(|| {
            let mut doc = Doc::new();
            visitor::parse(text, context, &mut doc)?;
            Some(doc)
        })
    }

    fn new() -> Doc<'a> {
        Doc {
            nodes: Vec::new(),
            texts: String::new(),
        }
    }

    /// A document for a body of `length` bytes, sized so that it rarely grows (growing copies
    /// it): the texts are at most the body, and requests average well over 32 bytes a value.
    /// Either reservation is at most the body's size.
    fn with_capacity(length: usize) -> Doc<'a> {
        Doc {
            nodes: Vec::with_capacity(length / 32),
            texts: String::with_capacity(length),
        }
    }

    /// The text of the string at `at`, decoded.
    fn as_str(&self, at: usize) -> Option<Cow<'_, str>> {
        match self.nodes[at] {
            Node::Text(Text::Quoted(s)) => Some(Cow::Borrowed(unquote(s))),
            Node::Text(Text::Name { start, end }) => Some(Cow::Borrowed(&self.texts[start..end])),
            Node::Text(Text::Canonical { start, end }) => {
                Some(Cow::Owned(jcs::unescape(unquote(&self.texts[start..end]))))
            }
            _ => None,
        }
    }

    /// The member name at `at`.
    fn name(&self, at: usize) -> &str {
        match self.nodes[at] {
            Node::Text(Text::Quoted(s)) => unquote(s),
            Node::Text(Text::Name { start, end }) => &self.texts[start..end],
            // Names are parsed with `Context::Name`, so they are never anything else.
            _ => "",
        }
    }

    /// The index after the value at `at` and its contents.
    fn skip(&self, at: usize) -> usize {
        match self.nodes[at] {
            Node::Array { end } | Node::Object { end } => end,
            _ => at + 1,
        }
    }

    /// The (name, value) node indexes of the object at `at`, in document order.
    fn members(&self, at: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let end = match self.nodes[at] {
            Node::Object { end } => end,
            _ => at + 1,
        };
        let mut next = at + 1;
        std::iter::from_fn(move || {
            (next < end).then(|| {
                let member = (next, next + 1);
                next = self.skip(next + 1);
                member
            })
        })
    }

    /// The elements of the array at `at`.
    fn elements(&self, at: usize) -> impl Iterator<Item = usize> + '_ {
        let end = match self.nodes[at] {
            Node::Array { end } => end,
            _ => at + 1,
        };
        let mut next = at + 1;
        std::iter::from_fn(move || {
            (next < end).then(|| {
                let element = next;
                next = self.skip(next);
                element
            })
        })
    }

    /// The value of member `name` of the node at `at`, when it is an object that has one. A
    /// repeated name gives the last, as `serde_json` keeps it.
    fn get(&self, at: usize, name: &str) -> Option<usize> {
        if !matches!(self.nodes[at], Node::Object { .. }) {
            return None;
        }
        let mut found = None;
        for (n, value) in self.members(at) {
            if self.name(n) == name {
                found = Some(value);
            }
        }
        found
    }

    /// Whether the node at `at` is the string `text`.
    fn is_text(&self, at: usize, text: &str) -> bool {
        match self.nodes[at] {
            Node::Text(Text::Quoted(quoted)) => unquote(quoted) == text,
            Node::Text(Text::Canonical { .. }) => self.as_str(at).is_some_and(|s| s == text),
            _ => false,
        }
    }

    /// The members of the object at `at` in RFC 8785 order, a repeated name resolved to its
    /// last value, appended to `out`.
    fn sorted_members<'d>(&'d self, at: usize, out: &mut Vec<(&'d str, usize)>) {
        let start = out.len();
        out.extend(
            self.members(at)
                .map(|(name, value)| (self.name(name), value)),
        );
        // Stable, so repeats stay in document order and the last of each run is the one kept.
        out[start..].sort_by(|a, b| jcs::compare_names(a.0, b.0));
        let mut keep = start;
        for i in start..out.len() {
            if i + 1 < out.len() && out[i + 1].0 == out[i].0 {
                continue;
            }
            out[keep] = out[i];
            keep += 1;
        }
        out.truncate(keep);
    }

    /// Writes the name of the member whose value is at `value` (names come right before).
    fn write_name<S: Sink>(&self, out: &mut S, name: &str, value: usize) {
        match self.nodes[value - 1] {
            Node::Text(Text::Quoted(quoted)) => out.put(quoted),
            _ => jcs::write_string(out, name),
        }
    }

    /// What the body asks about streaming. The member is read as `serde_json::Value::get`
    /// would, so a body that is JSON but not an object has no `stream` member.
    pub(crate) fn streaming(&self, profile: Profile) -> Streaming {
        let wanted = match self.get(0, "stream").map(|at| self.nodes[at]) {
            Some(Node::Bool(b)) => b,
            Some(_) => false,
            None => profile.streams_by_default(),
        };
        let include_usage = self
            .get(0, "stream_options")
            .and_then(|at| self.get(at, "include_usage"))
            .is_some_and(|at| matches!(self.nodes[at], Node::Bool(true)));
        Streaming {
            wanted,
            include_usage,
        }
    }

    /// Applies the rest of step 2 (the whitespace rule ran while parsing).
    pub(crate) fn canonical<'d>(
        &'d self,
        profile: Profile,
        config: &KeyConfig,
    ) -> CanonicalBody<'d, 'a> {
        let top = (profile.is_llm() && matches!(self.nodes[0], Node::Object { .. })).then(|| {
            let mut sorted = Vec::new();
            self.sorted_members(0, &mut sorted);
            let mut top: Vec<(&str, MemberValue)> = sorted
                .into_iter()
                .filter(|(name, value)| {
                    !matches!(self.nodes[*value], Node::Null) && !config.is_volatile(profile, name)
                })
                .map(|(name, value)| (name, MemberValue::Node(value)))
                .collect();
            let mut merged = false;
            for (name, default) in implicit_defaults(profile) {
                if !top.iter().any(|(n, _)| n == name) {
                    top.push((*name, MemberValue::Default(default)));
                    merged = true;
                }
            }
            if profile == Profile::GeminiGenerate {
                merged |= self.merge_generation_config(&mut top);
            }
            if merged {
                top.sort_by(|a, b| jcs::compare_names(a.0, b.0));
            }
            top
        });
        CanonicalBody { doc: self, top }
    }
}

impl<'a> Doc<'a> {
    /// Gemini's `generationConfig` among the top-level members: an object becomes
    /// [`MemberValue::Merged`], and a body without one (in either spelling) gets one of
    /// defaults. Whether a member was added.
    fn merge_generation_config<'d>(&'d self, top: &mut Vec<(&'d str, MemberValue)>) -> bool {
        let config = top
            .iter_mut()
            .find(|(name, _)| *name == GEMINI_GENERATION_CONFIG);
        if let Some((_, value)) = config {
            if let MemberValue::Node(at) = *value {
                if matches!(self.nodes[at], Node::Object { .. }) {
                    *value = MemberValue::Merged(Some(at), GEMINI_GENERATION_DEFAULTS);
                }
            }
            return false;
        }
        if !gemini_inserts_generation_config(|name| top.iter().any(|(n, _)| *n == name)) {
            return false;
        }
        top.push((
            GEMINI_GENERATION_CONFIG,
            MemberValue::Merged(None, GEMINI_GENERATION_DEFAULTS),
        ));
        true
    }

    /// The members of a [`MemberValue::Merged`] object in RFC 8785 order.
    fn merged_members(
        &self,
        at: Option<usize>,
        defaults: &'static [(&'static str, DefaultValue)],
    ) -> Vec<(&str, MemberValue)> {
        let mut sorted = Vec::new();
        if let Some(at) = at {
            self.sorted_members(at, &mut sorted);
        }
        let mut members: Vec<(&str, MemberValue)> = sorted
            .into_iter()
            .filter(|(_, value)| !matches!(self.nodes[*value], Node::Null))
            .map(|(name, value)| (name, MemberValue::Node(value)))
            .collect();
        for (name, default) in defaults {
            if !members.iter().any(|(n, _)| n == name) {
                members.push((*name, MemberValue::Default(default)));
            }
        }
        members.sort_by(|a, b| jcs::compare_names(a.0, b.0));
        members
    }
}

impl CanonicalBody<'_, '_> {
    /// Writes the canonical body as RFC 8785.
    pub(crate) fn write<S: Sink>(&self, out: &mut S) {
        let mut writer = Writer {
            doc: self.doc,
            out,
            members: Vec::new(),
        };
        match &self.top {
            Some(top) => writer.members(top),
            None => writer.value(0),
        }
    }

    /// The pieces of the system text (key contract step 3), to be hashed in order, or `None`
    /// when the body has none. Mirrors `canonical::system_text`.
    pub(crate) fn system_text(&self, profile: Profile) -> Option<Vec<Cow<'_, str>>> {
        let member = |name: &str| {
            self.top
                .as_ref()?
                .iter()
                .find_map(|(n, value)| match value {
                    MemberValue::Node(at) if *n == name => Some(*at),
                    _ => None,
                })
        };
        let doc = self.doc;
        let mut pieces = Vec::new();
        match profile {
            Profile::OpenaiChat | Profile::OllamaChat => doc
                .system_messages(member("messages")?, &mut pieces)
                .then_some(pieces),
            Profile::OpenaiResponses => {
                let instructions = member("instructions").and_then(|at| doc.as_str(at));
                let has_instructions = instructions.is_some();
                pieces.extend(instructions);
                let mut messages = Vec::new();
                let found =
                    member("input").is_some_and(|at| doc.system_messages(at, &mut messages));
                if found {
                    if has_instructions {
                        pieces.push(Cow::Borrowed("\n"));
                    }
                    pieces.append(&mut messages);
                }
                (has_instructions || found).then_some(pieces)
            }
            Profile::AnthropicMessages => {
                let at = member("system")?;
                match doc.nodes[at] {
                    Node::Text(_) => pieces.extend(doc.as_str(at)),
                    Node::Array { .. } => {
                        let texts = doc
                            .elements(at)
                            .filter_map(|block| doc.get(block, "text"))
                            .filter_map(|text| doc.as_str(text));
                        for (i, text) in texts.enumerate() {
                            if i > 0 {
                                pieces.push(Cow::Borrowed("\n"));
                            }
                            pieces.push(text);
                        }
                    }
                    _ => return None,
                }
                Some(pieces)
            }
            Profile::OllamaGenerate => {
                pieces.push(doc.as_str(member("system")?)?);
                Some(pieces)
            }
            Profile::GeminiGenerate => {
                let at = GEMINI_SYSTEM.iter().find_map(|name| {
                    self.top
                        .as_ref()?
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, value)| *value)
                })?;
                let MemberValue::Node(at) = at else {
                    return None;
                };
                if !matches!(doc.nodes[at], Node::Object { .. }) {
                    return None;
                }
                let parts = doc
                    .get(at, "parts")
                    .filter(|parts| matches!(doc.nodes[*parts], Node::Array { .. }));
                if let Some(parts) = parts {
                    pieces.extend(
                        doc.elements(parts)
                            .filter_map(|part| doc.get(part, "text"))
                            .filter_map(|text| doc.as_str(text)),
                    );
                }
                Some(pieces)
            }
            _ => None,
        }
    }
}

impl Doc<'_> {
    /// Appends the texts of the `system`/`developer` messages of the array at `at`, joined
    /// with `\n`; whether there was at least one.
    fn system_messages<'d>(&'d self, at: usize, pieces: &mut Vec<Cow<'d, str>>) -> bool {
        if !matches!(self.nodes[at], Node::Array { .. }) {
            return false;
        }
        let mut found = false;
        for message in self.elements(at) {
            let Some(role) = self.get(message, "role") else {
                continue;
            };
            if !(self.is_text(role, "system") || self.is_text(role, "developer")) {
                continue;
            }
            if found {
                pieces.push(Cow::Borrowed("\n"));
            }
            found = true;
            let Some(content) = self.get(message, "content") else {
                continue;
            };
            match self.nodes[content] {
                Node::Text(_) => pieces.extend(self.as_str(content)),
                Node::Array { .. } => pieces.extend(
                    self.elements(content)
                        .filter_map(|part| self.get(part, "text"))
                        .filter_map(|text| self.as_str(text)),
                ),
                _ => {}
            }
        }
        found
    }
}

/// The text of a JSON string that has its quotes (one byte each).
fn unquote(quoted: &str) -> &str {
    quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or("")
}

/// Writes nodes as RFC 8785, with one member list reused by every object.
struct Writer<'d, 'a, S> {
    doc: &'d Doc<'a>,
    out: &'d mut S,
    members: Vec<(&'d str, usize)>,
}

impl<S: Sink> Writer<'_, '_, S> {
    /// Writes an object of canonical members, already in RFC 8785 order.
    fn members(&mut self, members: &[(&str, MemberValue)]) {
        self.out.put_ascii(b'{');
        for (i, (name, value)) in members.iter().enumerate() {
            if i > 0 {
                self.out.put_ascii(b',');
            }
            match *value {
                MemberValue::Node(at) | MemberValue::Merged(Some(at), _) => {
                    self.doc.write_name(self.out, name, at)
                }
                // The defaults' names are ASCII letters and underscores.
                MemberValue::Default(_) | MemberValue::Merged(None, _) => {
                    jcs::write_canonical_string(self.out, name)
                }
            }
            self.out.put_ascii(b':');
            match *value {
                MemberValue::Node(at) => self.value(at),
                MemberValue::Default(DefaultValue::Int(n)) => {
                    jcs::write_number(self.out, *n as f64)
                }
                MemberValue::Default(DefaultValue::Bool(b)) => jcs::write_bool(self.out, *b),
                MemberValue::Default(DefaultValue::Str(s)) => jcs::write_string(self.out, s),
                MemberValue::Merged(at, defaults) => {
                    let merged = self.doc.merged_members(at, defaults);
                    self.members(&merged);
                }
            }
        }
        self.out.put_ascii(b'}');
    }

    fn value(&mut self, at: usize) {
        match self.doc.nodes[at] {
            Node::Null => self.out.put("null"),
            Node::Bool(b) => jcs::write_bool(self.out, b),
            Node::Number(n) => jcs::write_number(self.out, n),
            Node::Text(Text::Quoted(quoted)) => self.out.put(quoted),
            Node::Text(Text::Canonical { start, end }) => self.out.put(&self.doc.texts[start..end]),
            Node::Text(Text::Name { start, end }) => {
                jcs::write_string(self.out, &self.doc.texts[start..end])
            }
            Node::Array { .. } => {
                self.out.put_ascii(b'[');
                for (i, element) in self.doc.elements(at).enumerate() {
                    if i > 0 {
                        self.out.put_ascii(b',');
                    }
                    self.value(element);
                }
                self.out.put_ascii(b']');
            }
            Node::Object { .. } => {
                // Nested objects append after this one's members and truncate back.
                let start = self.members.len();
                self.doc.sorted_members(at, &mut self.members);
                self.out.put_ascii(b'{');
                for i in start..self.members.len() {
                    if i > start {
                        self.out.put_ascii(b',');
                    }
                    let (name, value) = self.members[i];
                    self.doc.write_name(self.out, name, value);
                    self.out.put_ascii(b':');
                    self.value(value);
                }
                self.out.put_ascii(b'}');
                self.members.truncate(start);
            }
        }
    }
}

/// Where a value sits, which decides whether its strings lose trailing whitespace.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    /// The whole body of an LLM request: if an object, its prompt members are stripped.
    LlmBody,
    /// The whole body of a Gemini request: only `contents[*].parts[*].text` and the system
    /// instruction's `parts[*].text` are prompt text.
    GeminiBody,
    /// Gemini's `contents`: an array of `Content`.
    GeminiContents,
    /// A Gemini `Content` (an element of `contents`, or the system instruction).
    GeminiContent,
    /// A `Content`'s `parts`.
    GeminiParts,
    /// One of those parts.
    GeminiPart,
    /// Inside a prompt member of an LLM body.
    Prompt,
    /// Anywhere else.
    Plain,
    /// A member name.
    Name,
}

impl Context {
    /// The context of a body of `profile`.
    fn body(profile: Profile) -> Context {
        match profile {
            Profile::GeminiGenerate => Context::GeminiBody,
            _ if profile.is_llm() => Context::LlmBody,
            _ => Context::Plain,
        }
    }

    /// Whether the context of a member's value depends on the member's name.
    fn reads_names(self) -> bool {
        matches!(
            self,
            Context::LlmBody | Context::GeminiBody | Context::GeminiContent | Context::GeminiPart
        )
    }

    /// The context of the value of member `name` of an object in this context (`name` is only
    /// looked at when [`Context::reads_names`]).
    fn member(self, name: &str) -> Context {
        match self {
            Context::LlmBody if PROMPT_MEMBERS.contains(&name) => Context::Prompt,
            Context::GeminiBody if name == "contents" => Context::GeminiContents,
            Context::GeminiBody if GEMINI_SYSTEM.contains(&name) => Context::GeminiContent,
            Context::GeminiContent if name == "parts" => Context::GeminiParts,
            Context::GeminiPart if name == "text" => Context::Prompt,
            Context::Prompt => Context::Prompt,
            _ => Context::Plain,
        }
    }

    /// The context of an element of an array in this context.
    fn element(self) -> Context {
        match self {
            Context::GeminiContents => Context::GeminiContent,
            Context::GeminiParts => Context::GeminiPart,
            Context::Prompt => Context::Prompt,
            _ => Context::Plain,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn canonical(doc: &Doc<'_>, profile: Profile) -> String {
        let mut out = String::new();
        doc.canonical(profile, &KeyConfig::default())
            .write(&mut out);
        out
    }

    /// `s` as a JSON string with every character escaped as `\uXXXX`.
    fn all_escaped(s: &str) -> String {
        let units: String = s.encode_utf16().map(|u| format!("\\u{u:04x}")).collect();
        format!("\"{units}\"")
    }

    proptest! {
        /// Both parsers give the same canonical body, whichever way the strings are escaped.
        #[test]
        fn the_parsers_agree(
            texts in prop::collection::vec("[ -~\t\r\n\"\\\\/\u{0}-\u{1f}é\u{e000}😀]{0,40}", 1..4),
            escape_all in any::<bool>(),
        ) {
            let string = |s: &String| if escape_all { all_escaped(s) } else { serde_json::to_string(s).unwrap() };
            let strings: Vec<String> = texts.iter().map(string).collect();
            // Each string as a prompt (stripped), as a member name and as an ordinary value.
            let all = strings.join(",\n");
            let body = format!(
                r#"{{"messages":[{{"content":{0}}}],"system":[{all}],{1}:[{all}],"other":{0}}}"#,
                strings[0],
                strings[strings.len() - 1],
            );
            for profile in [Profile::OpenaiChat, Profile::Http] {
                let context = Context::body(profile);
                let fast = scan::parse(&body, context);
                let mut slow = Doc::new();
                prop_assert!(visitor::parse(&body, context, &mut slow).is_some(), "{}", body);
                let fast = fast.ok_or_else(|| TestCaseError::fail(format!("scan gave up on {body}")))?;
                prop_assert_eq!(canonical(&fast, profile), canonical(&slow, profile), "{}", body);
            }
        }
    }

    /// The fast parser must take what clients send, or every request pays for the fallback.
    #[test]
    fn the_fast_parser_takes_ordinary_bodies() {
        let bodies = [
            r#"{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse.  \nAnswer briefly.\t"},{"role":"user","content":"Where is my refund?"}],"stream":true,"user":"u-42"}"#,
            "{\n  \"model\": \"m\",\n  \"temperature\": 0.7,\n  \"max_tokens\": 256,\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"Caf\\u00e9 \\ud83d\\ude00 \\/ \\\"q\\\"\"}\n  ]\n}\n",
            r#"{"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}],"tool_choice":null,"n":1,"stop":["x "],"logit_bias":{"50256":-100},"seed":-3,"top_p":1e-3}"#,
            "[1, 2.5, -0, true, false, null, \"\", {}, []]",
            "\"just a string\"",
        ];
        for body in bodies {
            for context in [Context::LlmBody, Context::Plain] {
                assert!(scan::parse(body, context).is_some(), "{body}");
            }
        }
    }

    #[test]
    fn the_fast_parser_hands_over_what_it_is_unsure_of() {
        let deep = format!(
            "{}{}",
            "[".repeat(scan::MAX_DEPTH + 1),
            "]".repeat(scan::MAX_DEPTH + 1)
        );
        for body in ["\"\\ud800\"", "[1,]", "01", "1e400", "\"\u{1}\"", &deep] {
            assert!(scan::parse(body, Context::Plain).is_none(), "{body}");
        }
    }
}
