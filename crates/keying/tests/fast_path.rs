//! Properties of the single-pass keying: `hit_key` gives the key `key` gives, and both give the
//! canonical bytes of the plain statement of the rules (`serde_json::from_str`, then
//! `canonical_body`, `system_text` and `to_canonical_string` on the `Value`), for bodies
//! written with every JSON spelling freedom (escapes of either case, surrogate pairs, `\/`,
//! whitespace, repeated member names) and for broken bodies, which must stay raw exactly when
//! `serde_json` rejects them.

use cassette_keying::{
    canonical_body, normalize_path, sha256_hex, system_text, to_canonical_string, BodyKind,
    JsonPath, KeyConfig, Profile, Request, Streaming, KEY_VERSION,
};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

const PATHS: &[&str] = &[
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/messages",
    "/api/chat",
    "/api/generate",
    "/api/embed",
    "/v1beta/models/gemini-2.5-flash:generateContent",
    "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    "/v1/files",
];

/// Member names the rules look at, so that random bodies exercise them.
const NAMES: &[&str] = &[
    "model",
    "messages",
    "system",
    "input",
    "instructions",
    "prompt",
    "role",
    "content",
    "text",
    "type",
    "stream",
    "stream_options",
    "include_usage",
    "user",
    "temperature",
    "top_p",
    "keep_alive",
    "seed",
    "contents",
    "parts",
    "systemInstruction",
    "system_instruction",
    "generationConfig",
    "generation_config",
    "candidateCount",
    "responseMimeType",
];

fn configs() -> impl Strategy<Value = KeyConfig> {
    prop_oneof![
        Just(KeyConfig::default()),
        Just(KeyConfig {
            extra_volatile: vec!["seed".into(), "messages".into(), "temperature".into()],
            ..KeyConfig::default()
        }),
        Just(KeyConfig {
            keep_volatile: vec!["stream".into(), "user".into()],
            ..KeyConfig::default()
        }),
        // Ignored paths take the `Value` route; the key must not tell.
        Just(KeyConfig {
            ignore: [
                "$.messages[*].content",
                "$..text",
                "$.system",
                "$.generationConfig.candidateCount"
            ]
            .iter()
            .filter_map(|path| JsonPath::parse(path).ok())
            .collect(),
            ..KeyConfig::default()
        }),
    ]
}

/// Strings with what the rules and the escaper care about: whitespace at line ends, CRs,
/// tabs, quotes, backslashes, controls, slashes, non-ASCII and astral characters.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::sample::select(NAMES).prop_map(str::to_owned),
        2 => prop::sample::select(&["system", "developer", "user", "assistant"][..])
            .prop_map(str::to_owned),
        4 => "[ -~\t\r\n\"\\\\/\u{0}-\u{1f}\u{7f}é€\u{e000}\u{ffff}😀]{0,24}",
        1 => any::<String>(),
        // Long prose with whitespace at line ends, longer than the hasher's buffering.
        1 => "([a-zé \"]{0,90}[ \t\r]{0,3}\n){2,12}",
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        text().prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![prop::sample::select(NAMES).prop_map(str::to_owned), text()],
                    inner
                ),
                0..5
            )
            .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// A message or content part shaped the way the system text rules read them.
fn message() -> impl Strategy<Value = Value> {
    let part = prop_oneof![
        text().prop_map(|t| json!({"type": "text", "text": t})),
        Just(json!({"type": "image_url", "image_url": {"url": "https://x/y.png"}})),
        leaf(),
    ];
    let content = prop_oneof![
        text().prop_map(Value::String),
        prop::collection::vec(part, 0..3).prop_map(Value::Array),
        leaf(),
    ];
    (
        prop::sample::select(&["system", "developer", "user", "assistant", "tool"][..]),
        content,
    )
        .prop_map(|(role, content)| json!({"role": role, "content": content}))
}

/// A Gemini `Content` shaped the way the rules read it, or something else in its place.
fn gemini_content() -> impl Strategy<Value = Value> {
    let part = prop_oneof![
        text().prop_map(|t| json!({"text": t})),
        value().prop_map(|v| json!({"text": v})),
        Just(json!({"functionCall": {"id": "pyd_ai_1 ", "name": "f", "args": {"a": "b "}}})),
        leaf(),
    ];
    let parts = prop_oneof![
        4 => prop::collection::vec(part, 0..3).prop_map(Value::Array),
        1 => value(),
    ];
    prop_oneof![
        4 => (prop::sample::select(&["user", "model"][..]), parts)
            .prop_map(|(role, parts)| json!({"role": role, "parts": parts})),
        1 => leaf(),
    ]
}

/// Gemini's generation settings: documented defaults spelled out or not, nulls, other values.
fn generation_config() -> impl Strategy<Value = Value> {
    let member = prop_oneof![
        Just(("candidateCount", json!(1))),
        Just(("candidateCount", json!(2))),
        Just(("candidateCount", Value::Null)),
        Just(("responseMimeType", json!("text/plain"))),
        Just(("responseLogprobs", json!(false))),
        Just(("temperature", json!(0.2))),
        Just(("maxOutputTokens", Value::Null)),
    ];
    prop_oneof![
        4 => prop::collection::vec(member, 0..4)
            .prop_map(|members| Value::Object(members.into_iter().map(|(n, v)| (n.to_owned(), v)).collect())),
        1 => leaf(),
    ]
}

/// A request body with the members the rules read, plus random others.
fn llm_body() -> impl Strategy<Value = Value> {
    (openai_body(), gemini_members()).prop_map(|(mut body, gemini)| {
        if let Some(object) = body.as_object_mut() {
            object.extend(gemini);
        }
        body
    })
}

/// The members the Gemini rules read, each present or not.
fn gemini_members() -> impl Strategy<Value = Map<String, Value>> {
    (
        prop::option::of(prop::collection::vec(gemini_content(), 0..4).prop_map(Value::Array)),
        prop::option::of(gemini_content()),
        prop::option::of(prop::sample::select(
            &["systemInstruction", "system_instruction"][..],
        )),
        prop::option::of(generation_config()),
        prop::option::of(prop::sample::select(
            &["generationConfig", "generation_config"][..],
        )),
    )
        .prop_map(|(contents, system, system_name, config, config_name)| {
            let mut members = Map::new();
            if let Some(contents) = contents {
                members.insert("contents".into(), contents);
            }
            if let (Some(system), Some(name)) = (system, system_name) {
                members.insert(name.into(), system);
            }
            if let (Some(config), Some(name)) = (config, config_name) {
                members.insert(name.into(), config);
            }
            members
        })
}

/// A request body with the members the OpenAI, Anthropic and Ollama rules read.
fn openai_body() -> impl Strategy<Value = Value> {
    let messages = || prop::collection::vec(message(), 0..4).prop_map(Value::Array);
    let system = prop_oneof![
        text().prop_map(Value::String),
        prop::collection::vec(
            text().prop_map(|t| json!({"type": "text", "text": t})),
            0..3
        )
        .prop_map(Value::Array),
        leaf(),
    ];
    let stream = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
        Just(json!("yes"))
    ];
    let stream_options = prop_oneof![
        any::<bool>().prop_map(|b| json!({"include_usage": b})),
        leaf()
    ];
    (
        prop::option::of(messages()),
        prop::option::of(system),
        prop::option::of(text()),
        prop::option::of(prop_oneof![messages(), text().prop_map(Value::String)]),
        prop::option::of(stream),
        prop::option::of(stream_options),
        prop::collection::vec((prop::sample::select(NAMES), value()), 0..4),
    )
        .prop_map(
            |(messages, system, instructions, input, stream, options, extra)| {
                let mut body: Map<String, Value> = extra
                    .into_iter()
                    .map(|(name, value)| (name.to_owned(), value))
                    .collect();
                let named = [
                    ("messages", messages),
                    ("system", system),
                    ("instructions", instructions.map(Value::String)),
                    ("input", input),
                    ("stream", stream),
                    ("stream_options", options),
                ];
                for (name, value) in named {
                    if let Some(value) = value {
                        body.insert(name.to_owned(), value);
                    }
                }
                Value::Object(body)
            },
        )
}

/// Writes a value as JSON text, taking every free choice from a deterministic generator:
/// whitespace, `\u` escapes in either case, surrogate pairs, short escapes, `\/`, and a
/// repeated member name first (the last one wins, so the value is unchanged).
struct Writer {
    state: u64,
}

impl Writer {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.next().is_multiple_of(one_in)
    }

    fn whitespace(&mut self, out: &mut String) {
        while self.chance(3) {
            out.push([' ', '\t', '\n', '\r'][(self.next() % 4) as usize]);
        }
    }

    fn value(&mut self, value: &Value, out: &mut String) {
        self.whitespace(out);
        match value {
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.value(item, out);
                }
                self.whitespace(out);
                out.push(']');
            }
            Value::Object(map) => {
                out.push('{');
                let mut first = true;
                for (name, item) in map {
                    if self.chance(6) {
                        // An earlier spelling of the same member, overridden by the real one.
                        self.member(name, &Value::from(self.state % 7), &mut first, out);
                    }
                    self.member(name, item, &mut first, out);
                }
                self.whitespace(out);
                out.push('}');
            }
            Value::String(s) => self.string(s, out),
            other => out.push_str(&other.to_string()),
        }
        self.whitespace(out);
    }

    fn member(&mut self, name: &str, value: &Value, first: &mut bool, out: &mut String) {
        if !*first {
            out.push(',');
        }
        *first = false;
        self.whitespace(out);
        self.string(name, out);
        self.whitespace(out);
        out.push(':');
        self.value(value, out);
    }

    fn string(&mut self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            let short = match c {
                '"' => Some("\\\""),
                '\\' => Some("\\\\"),
                '/' => Some("\\/"),
                '\u{8}' => Some("\\b"),
                '\u{c}' => Some("\\f"),
                '\n' => Some("\\n"),
                '\r' => Some("\\r"),
                '\t' => Some("\\t"),
                _ => None,
            };
            let must = c == '"' || c == '\\' || (c as u32) < 0x20;
            match short {
                Some(escape) if must || self.chance(2) => out.push_str(escape),
                _ if must || self.chance(6) => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        if self.chance(2) {
                            out.push_str(&format!("\\u{unit:04X}"));
                        } else {
                            out.push_str(&format!("\\u{unit:04x}"));
                        }
                    }
                }
                _ => out.push(c),
            }
        }
        out.push('"');
    }
}

fn write(value: &Value, seed: u64) -> String {
    let mut out = String::new();
    Writer { state: seed }.value(value, &mut out);
    out
}

/// Damages `text` at a few places with bytes that matter to JSON, so that both parsers see
/// broken bodies: cut strings, raw controls, lone surrogates, bad numbers, stray commas.
fn mutate(text: &str, edits: &[(usize, usize, u8)]) -> Vec<u8> {
    const INSERTS: &[&[u8]] = &[
        b"\"",
        b"\\",
        b"{",
        b"}",
        b"[",
        b"]",
        b",",
        b":",
        b"\n",
        b"\x01",
        b"\\u",
        b"\\ud800",
        b"\\udc00",
        b"\\ud83d\\u0041",
        b"\\x",
        b"0",
        b"-",
        b"01",
        b"1e999",
        b"1.",
        b".5",
        b"e5",
        b"tru",
        b"nul",
        b" ",
        b"\xef\xbb\xbf",
        b"\xff",
        b"\\u00zz",
        b"9007199254740993",
    ];
    let mut bytes = text.as_bytes().to_vec();
    for &(at, cut, insert) in edits {
        let at = at % (bytes.len() + 1);
        let cut = (cut % 3).min(bytes.len() - at);
        let insert = INSERTS[insert as usize % INSERTS.len()];
        bytes.splice(at..at + cut, insert.iter().copied());
    }
    bytes
}

/// The canonical material bytes by the plain statement of the rules (steps 2 and 2b on a
/// `Value`), for a POST to `path` on the default target without query or headers.
fn reference_canonical(path: &str, body: &[u8], config: &KeyConfig) -> String {
    let path = normalize_path(path);
    let profile = Profile::from_path(&path);
    // Gemini's streaming method is keyed as the plain one.
    let path = match path.strip_suffix(":streamGenerateContent") {
        Some(model) if profile == Profile::GeminiGenerate => format!("{model}:generateContent"),
        _ => path,
    };
    let parsed = std::str::from_utf8(body)
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(text).ok());
    let (body_value, body_sha256) = match parsed {
        _ if body.is_empty() => (Value::Null, Value::Null),
        Some(value) => {
            let mut body = canonical_body(profile, value, config);
            for path in &config.ignore {
                path.remove(&mut body);
            }
            (body, Value::Null)
        }
        None => (Value::Null, Value::from(sha256_hex(body))),
    };
    let system = system_text(profile, &body_value)
        .map_or(Value::Null, |text| Value::from(sha256_hex(text.as_bytes())));
    let material = json!({
        "v": KEY_VERSION,
        "target": "default",
        "profile": profile.as_str(),
        "method": "POST",
        "path": path,
        "query": [],
        "headers": {},
        "system_sha256": system,
        "body": body_value,
        "body_sha256": body_sha256,
    });
    to_canonical_string(&material)
}

/// What the recorder read from a body before keying reported it: `wants_stream` and
/// `include_usage` on a separately parsed `Value`.
fn reference_streaming(path: &str, body: &[u8]) -> Streaming {
    let profile = Profile::from_path(path);
    if profile == Profile::GeminiGenerate {
        return Streaming {
            wanted: path.ends_with(":streamGenerateContent"),
            include_usage: false,
        };
    }
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let wanted = json.as_ref().is_some_and(|b| match b.get("stream") {
        Some(Value::Bool(stream)) => *stream,
        None => matches!(profile, Profile::OllamaChat | Profile::OllamaGenerate),
        Some(_) => false,
    });
    let include_usage = json
        .as_ref()
        .and_then(|b| b.pointer("/stream_options/include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Streaming {
        wanted,
        include_usage,
    }
}

/// What a body is by the plain statement of step 2: JSON when `serde_json` reads it as one
/// value from UTF-8 text.
fn reference_body_kind(body: &[u8]) -> BodyKind {
    let parses = std::str::from_utf8(body)
        .ok()
        .is_some_and(|text| serde_json::from_str::<Value>(text).is_ok());
    match (body.is_empty(), parses) {
        (true, _) => BodyKind::Empty,
        (false, true) => BodyKind::Json,
        (false, false) => BodyKind::Opaque,
    }
}

fn check(path: &str, body: &[u8], config: &KeyConfig) -> Result<(), TestCaseError> {
    let request = Request::new("POST", path).body(body);
    let full = request.key(config);
    let hit = request.hit_key(config);
    let shown = String::from_utf8_lossy(body);
    prop_assert_eq!(&hit.key, &full.key, "hit_key and key differ for {}", shown);
    prop_assert_eq!(hit.profile, full.profile);
    prop_assert_eq!(hit.streaming, full.streaming);
    prop_assert_eq!(hit.body, full.body);
    prop_assert_eq!(
        full.body,
        reference_body_kind(body),
        "body kind of {}",
        shown
    );
    prop_assert_eq!(
        &full.canonical,
        &reference_canonical(path, body, config),
        "canonical bytes differ from the reference for {}",
        shown
    );
    prop_assert_eq!(full.key.as_str(), sha256_hex(full.canonical.as_bytes()));
    prop_assert_eq!(
        to_canonical_string(&full.material),
        full.canonical.clone(),
        "the material is what was hashed"
    );
    prop_assert_eq!(
        full.streaming,
        reference_streaming(path, body),
        "streaming of {}",
        shown
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn llm_shaped_bodies(
        body in llm_body(),
        seed in any::<u64>(),
        path in prop::sample::select(PATHS),
        config in configs(),
    ) {
        check(path, write(&body, seed).as_bytes(), &config)?;
    }

    #[test]
    fn any_json_bodies(
        body in value(),
        seed in any::<u64>(),
        path in prop::sample::select(PATHS),
        config in configs(),
    ) {
        check(path, write(&body, seed).as_bytes(), &config)?;
    }

    #[test]
    fn damaged_bodies(
        body in llm_body(),
        seed in any::<u64>(),
        edits in prop::collection::vec((any::<usize>(), any::<usize>(), any::<u8>()), 1..4),
        path in prop::sample::select(PATHS),
    ) {
        let damaged = mutate(&write(&body, seed), &edits);
        check(path, &damaged, &KeyConfig::default())?;
    }
}

/// Large requests, whose strings the hasher takes without copying, in both key paths.
#[test]
fn large_bodies() {
    let line = "The refund for order 4711 was issued on Tuesday.  \t\n";
    for turns in [1, 10, 300] {
        let messages: Vec<Value> = (0..turns)
            .map(|i| {
                let role = ["user", "assistant"][i % 2];
                json!({"role": role, "content": line.repeat(i % 40 + 1)})
            })
            .collect();
        let body = json!({
            "model": "m",
            "messages": messages,
            "system": "x".repeat(9000),
            "stream": true,
        });
        for path in PATHS {
            check(path, body.to_string().as_bytes(), &KeyConfig::default())
                .unwrap_or_else(|e| panic!("{turns} turns at {path}: {e}"));
        }
    }
}

/// Nesting around `serde_json`'s limit: the fast parser hands deep bodies over, and the key
/// follows `serde_json`'s verdict on either side of the limit.
#[test]
fn deep_nesting_follows_serde_json() {
    for depth in [99, 100, 101, 126, 127, 128, 129] {
        for path in ["/v1/chat/completions", "/v1/files"] {
            let array = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            let object = format!("{}1{}", r#"{"messages":"#.repeat(depth), "}".repeat(depth));
            for body in [array, object] {
                check(path, body.as_bytes(), &KeyConfig::default())
                    .unwrap_or_else(|e| panic!("depth {depth} at {path}: {e}"));
            }
        }
    }
}

/// Numbers at the edges of what a double holds, spelled in every JSON way.
#[test]
fn numbers_follow_serde_json() {
    let numbers = [
        "0",
        "-0",
        "0.0",
        "-0.0",
        "1",
        "-1",
        "1.0",
        "1e0",
        "1E+0",
        "10e-1",
        "999999999999999",
        "-999999999999999",
        "9999999999999999",
        "9007199254740993",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "1e21",
        "1e-7",
        "0.1",
        "1.7976931348623157e308",
        "1.7976931348623159e308",
        "1e309",
        "-1e309",
        "5e-324",
        "2e-324",
        "1e-400",
        "00",
        "01",
        "-",
        "1.",
        ".1",
        "1e",
        "+1",
        "0x10",
        "1_000",
    ];
    for number in numbers {
        for body in [
            number.to_owned(),
            format!(r#"{{"temperature":{number}}}"#),
            format!(r#"[{number}, {number}]"#),
        ] {
            check(
                "/v1/chat/completions",
                body.as_bytes(),
                &KeyConfig::default(),
            )
            .unwrap_or_else(|e| panic!("{body}: {e}"));
        }
    }
}

/// The body kinds a caller refuses on: a declared-JSON body that is not JSON by step 2's reading
/// (damaged, trailing bytes, not UTF-8) is `Opaque`, whichever key path read it.
#[test]
fn body_kinds_follow_step_2() {
    let table: [(&[u8], BodyKind); 8] = [
        (b"", BodyKind::Empty),
        (br#"{"model":"m","messages":[]}"#, BodyKind::Json),
        (b" 1 ", BodyKind::Json),
        (br#"{"model":"m","messages":["#, BodyKind::Opaque),
        (br#"{"a":1} x"#, BodyKind::Opaque),
        (b"{\"a\":\"\xff\"}", BodyKind::Opaque),
        (b"model=m", BodyKind::Opaque),
        (b" ", BodyKind::Opaque),
    ];
    let ignoring = KeyConfig {
        ignore: vec![JsonPath::parse("$.user").unwrap()],
        ..KeyConfig::default()
    };
    for (body, kind) in table {
        for config in [KeyConfig::default(), ignoring.clone()] {
            let request = Request::new("POST", "/v1/chat/completions").body(body);
            let shown = String::from_utf8_lossy(body);
            assert_eq!(request.key(&config).body, kind, "{shown}");
            assert_eq!(request.hit_key(&config).body, kind, "{shown}");
        }
    }
}
