//! Golden tests for the `gemini.generate` profile (docs/keying.md, "Profile
//! `gemini.generate`"): a pinned vector, then one test per rule that must leave the key alone
//! and one per input that must change it.
//!
//! A failure here means the key contract changed: either a bug, or a deliberate change that
//! bumps `KEY_VERSION` together with these expectations.

use cassette_keying::{sha256_hex, JsonPath, KeyConfig, Keyed, Request};
use serde_json::{json, Value};

const GENERATE: &str = "/v1beta/models/gemini-2.5-flash:generateContent";
const STREAM: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent";

const VECTOR_BODY: &str = r#"{"contents":[{"role":"user","parts":[{"text":"Where is my refund?  \n"}]}],"systemInstruction":{"parts":[{"text":"You are terse.\t"}]},"generationConfig":{"temperature":0.2}}"#;
const VECTOR_CANONICAL: &str = r#"{"body":{"contents":[{"parts":[{"text":"Where is my refund?\n"}],"role":"user"}],"generationConfig":{"candidateCount":1,"responseLogprobs":false,"responseMimeType":"text/plain","temperature":0.2},"systemInstruction":{"parts":[{"text":"You are terse."}]}},"body_sha256":null,"headers":{},"method":"POST","path":"/v1beta/models/gemini-2.5-flash:generateContent","profile":"gemini.generate","query":[],"system_sha256":"97dd3b604bbdd384a65068c64b6e130c0a1b28c206cc82982b9703774702f24b","target":"gemini","v":1}"#;
const VECTOR_KEY: &str = "2ba19b7b676c58727eae772daa22fa2824ba1b876333322411939a1eed63720d";

fn keyed(request: &Request<'_>) -> Keyed {
    request.key(&KeyConfig::default())
}

/// The vector request: its body, with the client's key in the header as google-genai sends it.
fn vector() -> Request<'static> {
    Request::new("POST", GENERATE)
        .target("gemini")
        .header("x-goog-api-key", "AIzaSy-secret-0123456789")
        .header("content-type", "application/json")
        .body(VECTOR_BODY.as_bytes())
}

fn key_of(path: &str, body: &Value) -> String {
    let body = body.to_string();
    keyed(
        &Request::new("POST", path)
            .target("gemini")
            .body(body.as_bytes()),
    )
    .key
    .as_str()
    .to_owned()
}

/// A small Gemini body every test starts from.
fn base() -> Value {
    json!({
        "contents": [
            {"role": "user", "parts": [{"text": "What is the weather in Paris?"}]},
            {"role": "model", "parts": [{"functionCall": {"id": "pyd_ai_0a1b", "name": "get_weather", "args": {"city": "Paris "}}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": "pyd_ai_0a1b", "name": "get_weather", "response": {"forecast": "sunny "}}}]}
        ],
        "systemInstruction": {"role": "user", "parts": [{"text": "Be brief."}]},
        "tools": [{"functionDeclarations": [{"name": "get_weather", "parameters": {"type": "OBJECT"}}]}],
        "generationConfig": {"temperature": 0.5}
    })
}

/// `base()` with the value at a JSON pointer replaced (or inserted into an existing object).
fn with(pointer: &str, value: Value) -> Value {
    let mut body = base();
    let (parent, name) = pointer.rsplit_once('/').expect("a pointer with a parent");
    let parent = body.pointer_mut(parent).expect("the parent exists");
    match parent {
        Value::Object(object) => {
            object.insert(name.to_owned(), value);
        }
        Value::Array(array) => {
            let index: usize = name.parse().expect("an array index");
            array[index] = value;
        }
        _ => panic!("{pointer} has no container"),
    }
    body
}

/// `base()` without the member at a JSON pointer.
fn without(pointer: &str) -> Value {
    let mut body = base();
    let (parent, name) = pointer.rsplit_once('/').expect("a pointer with a parent");
    if let Some(Value::Object(object)) = body.pointer_mut(parent) {
        object.remove(name);
    }
    body
}

#[test]
fn the_vector_pins_canonical_bytes_and_key() {
    let k = keyed(&vector());
    assert_eq!(k.profile.as_str(), "gemini.generate");
    assert_eq!(k.canonical, VECTOR_CANONICAL);
    assert_eq!(k.key.as_str(), VECTOR_KEY);
    assert_eq!(k.key.as_str(), sha256_hex(k.canonical.as_bytes()));
    assert_eq!(
        k.system_sha256.as_deref(),
        Some(sha256_hex(b"You are terse.").as_str())
    );
}

// ---------------------------------------------------------------------------------------------
// Rules that must NOT change the key.
// ---------------------------------------------------------------------------------------------

#[test]
fn streaming_and_plain_requests_share_a_key() {
    let plain = keyed(&vector());
    let mut stream = vector();
    stream.path = STREAM;
    stream.query = "alt=sse";
    let stream = keyed(&stream);
    assert_eq!(plain.key, stream.key);
    assert!(!plain.streaming.wanted);
    assert!(stream.streaming.wanted);
    // The JSON-array stream (no `alt`) and an explicit `alt=json` ask the same question.
    for (path, query) in [(STREAM, ""), (GENERATE, "alt=json"), (STREAM, "%24alt=sse")] {
        let mut other = vector();
        other.path = path;
        other.query = query;
        assert_eq!(plain.key, keyed(&other).key, "{path}?{query}");
    }
    // A trailing slash and doubled slashes are the path's usual spellings.
    let mut slashed = vector();
    slashed.path = "//v1beta/models//gemini-2.5-flash:streamGenerateContent/";
    assert_eq!(plain.key, keyed(&slashed).key);
}

#[test]
fn the_body_never_asks_for_a_stream() {
    for body in [json!({"stream": true}), json!({"stream": false}), json!({})] {
        let text = body.to_string();
        let plain = keyed(&Request::new("POST", GENERATE).body(text.as_bytes()));
        assert!(!plain.streaming.wanted, "{body}");
        let stream = keyed(&Request::new("POST", STREAM).body(text.as_bytes()));
        assert!(stream.streaming.wanted, "{body}");
        assert!(!stream.streaming.include_usage);
    }
}

#[test]
fn credentials_never_enter_the_key() {
    let base = keyed(&vector()).key;
    let mut without_header = vector();
    without_header.headers.clear();
    assert_eq!(base, keyed(&without_header).key);
    for query in ["key=AIzaSy-other", "KEY=x", "alt=sse&key=AIzaSy-other"] {
        let mut r = vector();
        r.query = query;
        r.headers.push(("x-goog-api-key", "AIzaSy-third"));
        assert_eq!(base, keyed(&r).key, "{query}");
    }
}

#[test]
fn trailing_whitespace_in_part_text_does_not_matter() {
    let clean = "Line one\nLine two";
    let noisy = "Line one \t\r\nLine two  ";
    for pointer in [
        "/contents/0/parts/0/text",
        "/systemInstruction/parts/0/text",
    ] {
        assert_eq!(
            key_of(GENERATE, &with(pointer, json!(clean))),
            key_of(GENERATE, &with(pointer, json!(noisy))),
            "{pointer}"
        );
    }
    let snake = |text: &str| {
        let mut body = without("/systemInstruction");
        body["system_instruction"] = json!({"parts": [{"text": text}]});
        key_of(GENERATE, &body)
    };
    assert_eq!(snake(clean), snake(noisy), "system_instruction");
}

#[test]
fn documented_generation_defaults_present_or_absent_give_one_key() {
    let base = key_of(GENERATE, &base());
    for (name, value) in [
        ("candidateCount", json!(1)),
        ("responseMimeType", json!("text/plain")),
        ("responseLogprobs", json!(false)),
        ("candidateCount", Value::Null),
        ("maxOutputTokens", Value::Null),
    ] {
        let pointer = format!("/generationConfig/{name}");
        assert_eq!(
            base,
            key_of(GENERATE, &with(&pointer, value.clone())),
            "{name}={value}"
        );
    }
    // No generationConfig at all, an empty one and a null one are the defaults too.
    let bare = key_of(GENERATE, &without("/generationConfig"));
    for config in [json!({}), Value::Null, json!({"candidateCount": 1.0})] {
        assert_eq!(
            bare,
            key_of(GENERATE, &with("/generationConfig", config.clone())),
            "{config}"
        );
    }
}

#[test]
fn member_order_and_number_spelling_do_not_matter() {
    let a = r#"{"contents":[{"role":"user","parts":[{"text":"Hi"}]}],"generationConfig":{"temperature":1,"topK":40}}"#;
    let b = r#"{"generationConfig":{"topK":4e1,"temperature":1.0},"contents":[{"parts":[{"text":"Hi"}],"role":"user"}]}"#;
    let key = |body: &str| keyed(&Request::new("POST", GENERATE).body(body.as_bytes())).key;
    assert_eq!(key(a), key(b));
}

#[test]
fn ignored_client_ids_do_not_matter() {
    let config = KeyConfig {
        ignore: [
            "$.contents[*].parts[*].functionCall.id",
            "$.contents[*].parts[*].functionResponse.id",
        ]
        .iter()
        .map(|path| JsonPath::parse(path).expect("a valid path"))
        .collect(),
        ..KeyConfig::default()
    };
    let key = |body: &Value| {
        let text = body.to_string();
        Request::new("POST", GENERATE)
            .body(text.as_bytes())
            .key(&config)
            .key
    };
    let renamed = with(
        "/contents/1/parts/0",
        json!({"functionCall": {"id": "pyd_ai_ffff", "name": "get_weather", "args": {"city": "Paris "}}}),
    );
    let mut renamed_both = renamed.clone();
    renamed_both["contents"][2]["parts"][0]["functionResponse"]["id"] = json!("pyd_ai_ffff");
    assert_eq!(key(&base()), key(&renamed_both));
    // Without the setting, the id is content like any other.
    assert_ne!(key_of(GENERATE, &base()), key_of(GENERATE, &renamed_both));
}

// ---------------------------------------------------------------------------------------------
// Inputs that MUST change the key.
// ---------------------------------------------------------------------------------------------

#[test]
fn each_input_changes_the_key() {
    let base = key_of(GENERATE, &base());
    let changes = [
        (
            "/contents/0/parts/0/text",
            json!("What is the weather in Rome?"),
        ),
        (
            "/contents/0/parts/0/text",
            json!(" What is the weather in Paris?"),
        ),
        (
            "/contents/0/parts/0/text",
            json!("what is the weather in Paris?"),
        ),
        ("/contents/0/role", json!("model")),
        ("/contents/1/parts/0/functionCall/args/city", json!("Paris")),
        (
            "/contents/2/parts/0/functionResponse/response/forecast",
            json!("sunny"),
        ),
        ("/contents/1/parts/0/functionCall/id", json!("pyd_ai_ffff")),
        ("/systemInstruction/parts/0/text", json!("Be verbose.")),
        (
            "/tools/0/functionDeclarations/0/name",
            json!("get_forecast"),
        ),
        ("/generationConfig/temperature", json!(0.7)),
        ("/generationConfig/candidateCount", json!(2)),
        (
            "/generationConfig/responseMimeType",
            json!("application/json"),
        ),
        ("/generationConfig/responseLogprobs", json!(true)),
        ("/generationConfig/topP", json!(1)),
        (
            "/safetySettings",
            json!([{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]),
        ),
        (
            "/toolConfig",
            json!({"functionCallingConfig": {"mode": "ANY"}}),
        ),
        ("/cachedContent", json!("cachedContents/abc")),
    ];
    for (pointer, value) in changes {
        assert_ne!(
            base,
            key_of(GENERATE, &with(pointer, value.clone())),
            "{pointer}={value}"
        );
    }
    let mut fewer = without("/toolConfig");
    if let Some(contents) = fewer["contents"].as_array_mut() {
        contents.pop();
    }
    assert_ne!(base, key_of(GENERATE, &fewer), "a turn less");
}

#[test]
fn the_system_instruction_is_the_system_text() {
    let k = |body: &Value| {
        let text = body.to_string();
        keyed(&Request::new("POST", GENERATE).body(text.as_bytes()))
    };
    let base = k(&base());
    assert_eq!(
        base.system_sha256.as_deref(),
        Some(sha256_hex(b"Be brief.").as_str())
    );
    let changed = k(&with(
        "/systemInstruction/parts/0/text",
        json!("Be verbose."),
    ));
    assert_ne!(base.key, changed.key);
    assert_ne!(base.system_sha256, changed.system_sha256);
    // Parts concatenate; the snake_case spelling counts; none, or not an object, is no text.
    let parts = k(&with(
        "/systemInstruction/parts",
        json!([{"text": "Be"}, {"inlineData": {}}, {"text": " brief."}]),
    ));
    assert_eq!(parts.system_sha256, base.system_sha256);
    let mut snake = without("/systemInstruction");
    snake["system_instruction"] = json!({"parts": [{"text": "Be brief."}]});
    let snake = k(&snake);
    assert_eq!(snake.system_sha256, base.system_sha256);
    assert_ne!(snake.key, base.key, "the spelling is part of the body");
    assert_eq!(k(&without("/systemInstruction")).system_sha256, None);
    assert_eq!(
        k(&with("/systemInstruction", json!("Be brief."))).system_sha256,
        None
    );
    assert_eq!(
        k(&with("/systemInstruction", json!({})))
            .system_sha256
            .as_deref(),
        Some(sha256_hex(b"").as_str())
    );
}

#[test]
fn only_part_text_loses_trailing_whitespace() {
    let base = key_of(GENERATE, &base());
    // Strings elsewhere keep it: function arguments, results, tool schemas, the model name.
    for (pointer, value) in [
        (
            "/contents/1/parts/0/functionCall/args/city",
            json!("Paris  "),
        ),
        (
            "/contents/2/parts/0/functionResponse/response/forecast",
            json!("sunny  "),
        ),
        ("/contents/0/role", json!("user ")),
        (
            "/tools/0/functionDeclarations/0/name",
            json!("get_weather "),
        ),
    ] {
        assert_ne!(
            base,
            key_of(GENERATE, &with(pointer, value.clone())),
            "{pointer}={value:?}"
        );
    }
    // Top-level members that are prompts for other providers are plain members here.
    let a = with("/messages", json!([{"role": "user", "content": "Hi"}]));
    let b = with("/messages", json!([{"role": "user", "content": "Hi "}]));
    assert_ne!(key_of(GENERATE, &a), key_of(GENERATE, &b));
}

#[test]
fn the_model_in_the_path_and_other_query_parameters_change_the_key() {
    let base = keyed(&vector()).key;
    let mut other_model = vector();
    other_model.path = "/v1beta/models/gemini-2.5-pro:generateContent";
    assert_ne!(base, keyed(&other_model).key);
    let mut other_version = vector();
    other_version.path = "/v1/models/gemini-2.5-flash:generateContent";
    assert_ne!(base, keyed(&other_version).key);
    let mut fields = vector();
    fields.query = "fields=candidates";
    assert_ne!(base, keyed(&fields).key);
    // Only the framings replayed from one JSON final response leave the key: a protobuf
    // answer is another answer.
    let mut proto = vector();
    proto.query = "alt=proto";
    assert_ne!(base, keyed(&proto).key);
    let mut upper = vector();
    upper.query = "alt=SSE";
    assert_ne!(base, keyed(&upper).key);
    let mut target = vector();
    target.target = "vertex";
    assert_ne!(base, keyed(&target).key);
}

#[test]
fn other_gemini_methods_stay_http() {
    for path in [
        "/v1beta/models/gemini-2.5-flash:countTokens",
        "/v1beta/models/gemini-2.5-flash:embedContent",
        "/v1beta/models/gemini-2.5-flash",
    ] {
        let r = Request::new("POST", path).query("alt=sse");
        let k = keyed(&r);
        assert_eq!(k.profile.as_str(), "http", "{path}");
        assert_eq!(
            k.material["query"],
            json!([["alt", "sse"]]),
            "{path}: alt counts on http"
        );
    }
}
