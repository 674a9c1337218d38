//! Golden tests for key v1: pinned canonical bytes and keys, then one test per rule of
//! `docs/keying.md` that must leave the key alone and one per input that must change it.
//!
//! A failure here means the key contract changed. Either the change is a bug, or it is
//! deliberate and `KEY_VERSION` must be bumped together with these expectations.

use cassette_keying::{
    diff, sha256_hex, Change, KeyConfig, Keyed, Request, DEFAULT_VOLATILE, KEY_VERSION,
    OLLAMA_VOLATILE, QUERY_CREDENTIALS,
};
use serde_json::{json, Value};
use std::collections::HashSet;

const CHAT: &str = "/v1/chat/completions";
const RESPONSES: &str = "/v1/responses";
const COMPLETIONS: &str = "/v1/completions";
const EMBEDDINGS: &str = "/v1/embeddings";
const MESSAGES: &str = "/v1/messages";
const OLLAMA_CHAT: &str = "/api/chat";
const OLLAMA_GENERATE: &str = "/api/generate";
const OLLAMA_EMBED: &str = "/api/embed";
const HTTP: &str = "/v1/models";
const GEMINI: &str = "/v1beta/models/gemini-2.5-flash:generateContent";

/// Every LLM profile's path, with the profile name it must select.
const LLM_PATHS: &[(&str, &str)] = &[
    (CHAT, "openai.chat"),
    (RESPONSES, "openai.responses"),
    (COMPLETIONS, "openai.completions"),
    (EMBEDDINGS, "openai.embeddings"),
    (MESSAGES, "anthropic.messages"),
    (OLLAMA_CHAT, "ollama.chat"),
    (OLLAMA_GENERATE, "ollama.generate"),
    (OLLAMA_EMBED, "ollama.embed"),
    (GEMINI, "gemini.generate"),
];

const VECTOR1_BODY: &str = r#"{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse.  \nAnswer briefly.\t"},{"role":"user","content":"Where is my refund?"}],"stream":true,"user":"u-42"}"#;
const VECTOR1_KEY: &str = "0137a00afad39e5e38a42ac95d5ed2eb013790cc49f8a19be09d30278b70d1db";
const VECTOR2_BODY: &str = r#"{"model":"claude-sonnet-4-5","max_tokens":256,"system":"Be kind.","messages":[{"role":"user","content":"Hi"}]}"#;
const VECTOR2_KEY: &str = "09ad68985024e40a7117473ce85ce3f93d71fbe6f5060a744d3dcbc097b3c415";

fn keyed(request: &Request<'_>) -> Keyed {
    request.key(&KeyConfig::default())
}

/// The key of a POST with a JSON body to `path` on the default target.
fn key_of(path: &str, body: &str) -> String {
    keyed(&Request::new("POST", path).body(body.as_bytes()))
        .key
        .as_str()
        .to_owned()
}

fn key_of_value(path: &str, body: &Value) -> String {
    key_of(path, &body.to_string())
}

fn vector2() -> Request<'static> {
    Request::new("POST", MESSAGES)
        .target("anthropic")
        .header("anthropic-version", "2023-06-01")
        .header("x-api-key", "sk-ant-secret")
        .body(VECTOR2_BODY.as_bytes())
}

fn vector2_key_with(change: impl FnOnce(Request<'static>) -> Request<'static>) -> String {
    keyed(&change(vector2())).key.as_str().to_owned()
}

/// A small body that is valid for every LLM profile's rules (they only look at top-level
/// members by name), used where a test runs once per profile.
fn base_body() -> Value {
    json!({
        "model": "m",
        "messages": [{"role": "user", "content": "Hi"}],
        "prompt": "Hi",
        "input": "Hi"
    })
}

fn with(mut body: Value, name: &str, value: Value) -> Value {
    body.as_object_mut()
        .expect("test bodies are objects")
        .insert(name.to_owned(), value);
    body
}

// ---------------------------------------------------------------------------------------------
// Pinned table: request -> canonical bytes -> key.
// ---------------------------------------------------------------------------------------------

struct Golden {
    name: &'static str,
    request: Request<'static>,
    canonical: &'static str,
    key: &'static str,
}

fn golden_table() -> Vec<Golden> {
    vec![
        Golden {
            name: "issue vector 1: openai.chat",
            request: Request::new("POST", CHAT).body(VECTOR1_BODY.as_bytes()),
            canonical: r#"{"body":{"frequency_penalty":0,"logprobs":false,"messages":[{"content":"You are terse.\nAnswer briefly.","role":"system"},{"content":"Where is my refund?","role":"user"}],"model":"gpt-4o-mini","n":1,"parallel_tool_calls":true,"presence_penalty":0,"temperature":1,"top_p":1},"body_sha256":null,"headers":{},"method":"POST","path":"/v1/chat/completions","profile":"openai.chat","query":[],"system_sha256":"026c1b309c3c50e5707032755482dbcf9e2ec809320fc8439d2d3227bfe89ac1","target":"default","v":1}"#,
            key: VECTOR1_KEY,
        },
        Golden {
            name: "issue vector 1, second spelling",
            request: Request::new("POST", CHAT).body(
                br#"{"messages":[{"content":"You are terse.\nAnswer briefly.","role":"system"},{"role":"user","content":"Where is my refund?"}],"model":"gpt-4o-mini","temperature":1.0,"top_p":1,"n":1}"#,
            ),
            canonical: r#"{"body":{"frequency_penalty":0,"logprobs":false,"messages":[{"content":"You are terse.\nAnswer briefly.","role":"system"},{"content":"Where is my refund?","role":"user"}],"model":"gpt-4o-mini","n":1,"parallel_tool_calls":true,"presence_penalty":0,"temperature":1,"top_p":1},"body_sha256":null,"headers":{},"method":"POST","path":"/v1/chat/completions","profile":"openai.chat","query":[],"system_sha256":"026c1b309c3c50e5707032755482dbcf9e2ec809320fc8439d2d3227bfe89ac1","target":"default","v":1}"#,
            key: VECTOR1_KEY,
        },
        Golden {
            name: "issue vector 2: anthropic.messages",
            request: vector2(),
            canonical: r#"{"body":{"max_tokens":256,"messages":[{"content":"Hi","role":"user"}],"model":"claude-sonnet-4-5","system":"Be kind.","temperature":1},"body_sha256":null,"headers":{"anthropic-version":"2023-06-01"},"method":"POST","path":"/v1/messages","profile":"anthropic.messages","query":[],"system_sha256":"5499befb38dbf3fcc08107141cb2a9e7f42a6aae403361dc3601b8296d7967ea","target":"anthropic","v":1}"#,
            key: VECTOR2_KEY,
        },
        Golden {
            name: "http profile, no body, query sorted and credentials dropped",
            request: Request::new("get", "//v1//models/")
                .target("openai")
                .query("b=2&a=x+y&API_KEY=secret&a=%C3%A9")
                .header("Authorization", "Bearer sk-secret")
                .header("OpenAI-Beta", " assistants=v2 "),
            canonical: r#"{"body":null,"body_sha256":null,"headers":{"openai-beta":"assistants=v2"},"method":"GET","path":"/v1/models","profile":"http","query":[["a","x y"],["a","é"],["b","2"]],"system_sha256":null,"target":"openai","v":1}"#,
            key: "e0a261cf6e31951dee1cc33f2ea191d95409e0e77093dee5975b03d480b944f9",
        },
        Golden {
            name: "http profile, JSON body only canonicalized",
            request: Request::new("POST", "/v1/files/search")
                .body(br#"{ "stream": true, "x": null, "a": 1.0, "s": "t  " }"#),
            canonical: r#"{"body":{"a":1,"s":"t  ","stream":true,"x":null},"body_sha256":null,"headers":{},"method":"POST","path":"/v1/files/search","profile":"http","query":[],"system_sha256":null,"target":"default","v":1}"#,
            key: "75c955aa2c30ec188a098f5d9efaa3d8977f40bfabeea864bd6c289994ed8074",
        },
        Golden {
            name: "raw body: only its SHA-256",
            request: Request::new("POST", CHAT).body(&[0xff, 0x00, b'{']),
            canonical: r#"{"body":null,"body_sha256":"b63c6c748b070064da9afd864dfb43bf94fdfccc16e8e168f420551eeda3416f","headers":{},"method":"POST","path":"/v1/chat/completions","profile":"openai.chat","query":[],"system_sha256":null,"target":"default","v":1}"#,
            key: "14db46af083c10f90d4a99c171ff1c75a06062cba76e02c65b32145d8a063605",
        },
        Golden {
            name: "ollama.generate: keep_alive volatile, system and prompt stripped",
            request: Request::new("POST", OLLAMA_GENERATE).body(
                br#"{"model":"llama3.2","system":"Be brief. \r\n","prompt":"Why is the sky blue?\t","keep_alive":"5m","stream":false,"options":{"temperature":0}}"#,
            ),
            canonical: r#"{"body":{"model":"llama3.2","options":{"temperature":0},"prompt":"Why is the sky blue?","system":"Be brief.\n"},"body_sha256":null,"headers":{},"method":"POST","path":"/api/generate","profile":"ollama.generate","query":[],"system_sha256":"96fb1c7f068c5ce63e2b45fc4aea602d48d5302be6ca033f3e1f0c7148558a49","target":"default","v":1}"#,
            key: "0a6f013c339971f397cddc1fa11df1a94c3d3975c5341d176160b3404b3beead",
        },
        Golden {
            name: "openai.responses: defaults and instructions",
            request: Request::new("POST", RESPONSES)
                .body(br#"{"model":"gpt-4.1","instructions":"Be terse.","input":"Hi","store":true}"#),
            canonical: r#"{"body":{"background":false,"input":"Hi","instructions":"Be terse.","model":"gpt-4.1","parallel_tool_calls":true,"temperature":1,"top_p":1,"truncation":"disabled"},"body_sha256":null,"headers":{},"method":"POST","path":"/v1/responses","profile":"openai.responses","query":[],"system_sha256":"28c7339ead79c720e67160d2f681384ad23a59bf8514c3c2e01d09a4d701441f","target":"default","v":1}"#,
            key: "0ee333299fd174600d1f104ef67b2d2af2ca71831dd9cad8e3695ce662096aa2",
        },
        Golden {
            name: "openai.embeddings: no defaults, input stripped",
            request: Request::new("POST", EMBEDDINGS)
                .body(br#"{"model":"text-embedding-3-small","input":["a ","b"],"user":"u"}"#),
            canonical: r#"{"body":{"input":["a","b"],"model":"text-embedding-3-small"},"body_sha256":null,"headers":{},"method":"POST","path":"/v1/embeddings","profile":"openai.embeddings","query":[],"system_sha256":null,"target":"default","v":1}"#,
            key: "123d690a05fc1737dccab8e220d5e808e8340a678f03883fcf285025c5541cf3",
        },
    ]
}

#[test]
fn golden_table_pins_canonical_bytes_and_keys() {
    // Every case is checked before failing, so one run shows the whole extent of a change.
    let mut mismatches = Vec::new();
    for case in golden_table() {
        let k = keyed(&case.request);
        if k.canonical != case.canonical {
            mismatches.push(format!(
                "{}: canonical\n  got:      {}\n  expected: {}",
                case.name, k.canonical, case.canonical
            ));
        }
        if k.key.as_str() != case.key {
            mismatches.push(format!(
                "{}: key {} (expected {})",
                case.name, k.key, case.key
            ));
        }
        assert_eq!(
            k.key.as_str(),
            sha256_hex(k.canonical.as_bytes()),
            "key of {} is the SHA-256 of its canonical bytes",
            case.name
        );
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn key_version_is_one_and_in_the_material() {
    assert_eq!(KEY_VERSION, 1);
    let k = keyed(&vector2());
    assert_eq!(k.material["v"], json!(1));
}

#[test]
fn display_form_is_the_first_16_hex() {
    let k = keyed(&vector2());
    assert_eq!(k.key.short(), &VECTOR2_KEY[..16]);
    assert_eq!(k.key.to_string(), VECTOR2_KEY);
}

#[test]
fn every_llm_path_selects_its_profile() {
    for (path, profile) in LLM_PATHS {
        let k = keyed(&Request::new("POST", path));
        assert_eq!(k.profile.as_str(), *profile, "{path}");
        assert_eq!(k.material["profile"], json!(profile));
    }
}

// ---------------------------------------------------------------------------------------------
// Rules that must NOT change the key.
// ---------------------------------------------------------------------------------------------

#[test]
fn member_order_does_not_matter() {
    let a = r#"{"model":"gpt-4o-mini","temperature":0.2,"messages":[{"role":"user","content":"Hi","name":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true}}}"#;
    let b = r#"{"response_format":{"json_schema":{"strict":true,"name":"n"},"type":"json_schema"},"messages":[{"name":"x","content":"Hi","role":"user"}],"temperature":0.2,"model":"gpt-4o-mini"}"#;
    assert_eq!(key_of(CHAT, a), key_of(CHAT, b));
    assert_eq!(
        key_of(HTTP, a),
        key_of(HTTP, b),
        "http bodies are canonicalized too"
    );
}

#[test]
fn whitespace_between_tokens_does_not_matter() {
    let pretty = "\r\n{\n\t\"model\" :  \"gpt-4o-mini\" ,\r\n  \"messages\": [ { \"role\":\"user\" ,\"content\" : \"Hi\" } ]\n}\n\n";
    let compact = r#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hi"}]}"#;
    assert_eq!(key_of(CHAT, pretty), key_of(CHAT, compact));
    assert_eq!(key_of(HTTP, pretty), key_of(HTTP, compact));
}

#[test]
fn trailing_whitespace_per_line_does_not_matter_in_prompt_members() {
    let clean = "Line one\nLine two\n\nLine four";
    let noisy = "Line one \t\r\nLine two\t\t\n \r\nLine four   ";
    let cases = [
        (
            CHAT,
            json!({"model": "m", "messages": [{"role": "user", "content": clean}]}),
            json!({"model": "m", "messages": [{"role": "user", "content": noisy}]}),
        ),
        (
            CHAT,
            json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": clean}]}]}),
            json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": noisy}]}]}),
        ),
        (
            MESSAGES,
            json!({"model": "m", "system": clean}),
            json!({"model": "m", "system": noisy}),
        ),
        (
            MESSAGES,
            json!({"model": "m", "system": [{"type": "text", "text": clean}]}),
            json!({"model": "m", "system": [{"type": "text", "text": noisy}]}),
        ),
        (
            RESPONSES,
            json!({"model": "m", "instructions": clean, "input": clean}),
            json!({"model": "m", "instructions": noisy, "input": noisy}),
        ),
        (
            COMPLETIONS,
            json!({"model": "m", "prompt": [clean]}),
            json!({"model": "m", "prompt": [noisy]}),
        ),
        (
            OLLAMA_GENERATE,
            json!({"model": "m", "prompt": clean, "system": clean}),
            json!({"model": "m", "prompt": noisy, "system": noisy}),
        ),
        (
            EMBEDDINGS,
            json!({"model": "m", "input": clean}),
            json!({"model": "m", "input": noisy}),
        ),
    ];
    for (path, a, b) in cases {
        assert_eq!(
            key_of_value(path, &a),
            key_of_value(path, &b),
            "{path}: {b}"
        );
    }
}

#[test]
fn equal_numbers_in_other_spellings_do_not_matter() {
    let spellings = ["1", "1.0", "1e0", "10e-1", "1.000"];
    let keys: HashSet<String> = spellings
        .iter()
        .map(|s| key_of(CHAT, &format!(r#"{{"model":"m","max_tokens":{s}}}"#)))
        .collect();
    assert_eq!(keys.len(), 1, "{spellings:?}");
    assert_eq!(key_of(HTTP, r#"{"x":0.5}"#), key_of(HTTP, r#"{"x":5e-1}"#));
}

/// The implicit defaults of v1, per profile: `{}` and the body that spells a default out are
/// one question.
const DEFAULTS: &[(&str, &str, &str)] = &[
    (CHAT, "temperature", "1"),
    (CHAT, "top_p", "1"),
    (CHAT, "n", "1"),
    (CHAT, "presence_penalty", "0"),
    (CHAT, "frequency_penalty", "0"),
    (CHAT, "logprobs", "false"),
    (CHAT, "parallel_tool_calls", "true"),
    (RESPONSES, "temperature", "1"),
    (RESPONSES, "top_p", "1"),
    (RESPONSES, "parallel_tool_calls", "true"),
    (RESPONSES, "truncation", "\"disabled\""),
    (RESPONSES, "background", "false"),
    (COMPLETIONS, "temperature", "1"),
    (COMPLETIONS, "top_p", "1"),
    (COMPLETIONS, "n", "1"),
    (COMPLETIONS, "presence_penalty", "0"),
    (COMPLETIONS, "frequency_penalty", "0"),
    (COMPLETIONS, "echo", "false"),
    (COMPLETIONS, "best_of", "1"),
    (MESSAGES, "temperature", "1"),
];

#[test]
fn each_default_present_or_absent_gives_one_key() {
    for (path, name, value) in DEFAULTS {
        let absent = key_of_value(path, &base_body());
        let spelled: Value = serde_json::from_str(value).expect("default literal");
        let present = key_of_value(path, &with(base_body(), name, spelled));
        assert_eq!(absent, present, "{path}: {name}={value}");
        let null = key_of_value(path, &with(base_body(), name, Value::Null));
        assert_eq!(
            absent, null,
            "{path}: {name}=null is dropped, then defaulted"
        );
        let other = key_of_value(path, &with(base_body(), name, json!(0.25)));
        assert_ne!(absent, other, "{path}: {name} other than its default");
    }
    assert_eq!(key_of(CHAT, "{}"), key_of(CHAT, r#"{"temperature":1.0}"#));
}

#[test]
fn profiles_without_defaults_merge_none() {
    for path in [
        EMBEDDINGS,
        OLLAMA_CHAT,
        OLLAMA_GENERATE,
        OLLAMA_EMBED,
        GEMINI,
    ] {
        for (_, name, value) in DEFAULTS {
            let spelled: Value = serde_json::from_str(value).expect("default literal");
            assert_ne!(
                key_of_value(path, &base_body()),
                key_of_value(path, &with(base_body(), name, spelled)),
                "{path} has no default for {name}"
            );
        }
    }
}

#[test]
fn each_volatile_field_is_dropped_for_every_llm_profile() {
    assert_eq!(
        DEFAULT_VOLATILE,
        [
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
        ]
    );
    for (path, _) in LLM_PATHS {
        let base = key_of_value(path, &base_body());
        for name in DEFAULT_VOLATILE {
            for value in [json!(true), json!("x"), json!({"a": 1}), json!(42)] {
                let k = key_of_value(path, &with(base_body(), name, value.clone()));
                assert_eq!(base, k, "{path}: {name}={value}");
            }
        }
    }
}

#[test]
fn volatile_fields_stay_in_http_bodies() {
    for name in DEFAULT_VOLATILE.iter().chain(OLLAMA_VOLATILE) {
        assert_ne!(
            key_of_value(HTTP, &base_body()),
            key_of_value(HTTP, &with(base_body(), name, json!(true))),
            "{name}"
        );
    }
}

#[test]
fn keep_alive_is_volatile_for_ollama_only() {
    assert_eq!(OLLAMA_VOLATILE, ["keep_alive"]);
    for (path, profile) in LLM_PATHS {
        let base = key_of_value(path, &base_body());
        let k = key_of_value(path, &with(base_body(), "keep_alive", json!("5m")));
        if profile.starts_with("ollama.") {
            assert_eq!(base, k, "{path}");
        } else {
            assert_ne!(base, k, "{path}: keep_alive must count outside ollama");
        }
    }
}

#[test]
fn null_members_are_dropped_for_llm_profiles() {
    let base = key_of_value(CHAT, &base_body());
    for name in ["tools", "seed", "stop", "response_format"] {
        assert_eq!(
            base,
            key_of_value(CHAT, &with(base_body(), name, Value::Null)),
            "{name}"
        );
    }
    // Only top-level nulls: a null inside a message is content.
    assert_ne!(
        key_of(CHAT, r#"{"messages":[{"role":"user","content":"Hi"}]}"#),
        key_of(
            CHAT,
            r#"{"messages":[{"role":"user","content":"Hi","name":null}]}"#
        )
    );
}

#[test]
fn non_semantic_headers_do_not_matter() {
    let base = vector2_key_with(|r| r);
    let noise = [
        ("authorization", "Bearer sk-live-1234"),
        ("Authorization", "Bearer sk-other"),
        ("x-api-key", "sk-ant-other"),
        ("api-key", "azure-secret"),
        ("user-agent", "Anthropic/Python 0.40.0"),
        ("User-Agent", "curl/8.5.0"),
        ("x-stainless-lang", "python"),
        ("x-stainless-os", "Linux"),
        ("x-stainless-arch", "x64"),
        ("x-stainless-runtime-version", "3.12.1"),
        ("x-stainless-retry-count", "2"),
        ("x-stainless-read-timeout", "600"),
        ("idempotency-key", "stainless-python-retry-1"),
        ("Idempotency-Key", "abc"),
        ("x-request-id", "req_1"),
        ("openai-organization", "org-1"),
        ("openai-project", "proj-1"),
        ("content-type", "application/json"),
        ("content-length", "123"),
        ("accept", "application/json"),
        ("accept-encoding", "gzip"),
        ("host", "api.anthropic.com"),
        ("traceparent", "00-abc-def-01"),
    ];
    for (name, value) in noise {
        assert_eq!(base, vector2_key_with(|r| r.header(name, value)), "{name}");
    }
    // Removing the credential the vector carries changes nothing either.
    let mut without_key = vector2();
    without_key.headers.retain(|(n, _)| *n != "x-api-key");
    assert_eq!(base, keyed(&without_key).key.as_str());
}

#[test]
fn header_name_case_and_value_whitespace_do_not_matter() {
    let base = vector2_key_with(|r| r);
    for (name, value) in [
        ("Anthropic-Version", "2023-06-01"),
        ("ANTHROPIC-VERSION", "2023-06-01"),
        ("anthropic-version", "  2023-06-01\t"),
    ] {
        let mut r = vector2();
        r.headers = vec![(name, value)];
        assert_eq!(base, keyed(&r).key.as_str(), "{name}: {value:?}");
    }
}

#[test]
fn query_order_does_not_matter() {
    let q = |query| keyed(&Request::new("GET", HTTP).query(query)).key;
    assert_eq!(q("a=1&b=2&c=3"), q("c=3&a=1&b=2"));
    assert_eq!(q("a=2&a=1"), q("a=1&a=2"), "repeats sort by value");
    assert_eq!(q("a=x%20y"), q("a=x+y"), "form-decoded");
    assert_eq!(q(""), q("&"), "empty segments are skipped");
    assert_eq!(q("a=1"), q("a=1&"));
}

#[test]
fn credentials_in_the_query_do_not_matter() {
    let base = keyed(&Request::new("GET", HTTP).query("limit=10")).key;
    let mut spellings: Vec<String> = vec![
        "key".into(),
        "api-key".into(),
        "api_key".into(),
        "apikey".into(),
        "access_token".into(),
        "KEY".into(),
        "Api-Key".into(),
        "API_KEY".into(),
        "ApiKey".into(),
        "Access_Token".into(),
        "api%5Fkey".into(),
        // Added within v1 (docs/keying.md, "Amendments"), as issue 10 found them in the wild.
        "api_secret".into(),
        "secret_key".into(),
        "bearer".into(),
        "credential".into(),
        "token".into(),
        "sig".into(),
        "subscription-key".into(),
        "auth".into(),
        "access-token".into(),
        "accessToken".into(),
        "X-Amz-Signature".into(),
        "X-Amz-Credential".into(),
        "X-Goog-Signature".into(),
        "client_secret".into(),
        "password".into(),
        "x%2Dapi%2Dkey".into(),
    ];
    spellings.extend(QUERY_CREDENTIALS.iter().map(|n| n.to_string()));
    spellings.extend(QUERY_CREDENTIALS.iter().map(|n| n.to_uppercase()));
    for cred in &spellings {
        for query in [
            format!("{cred}=secret&limit=10"),
            format!("limit=10&{cred}=other"),
            format!("limit=10&{cred}"),
        ] {
            let k = keyed(&Request::new("GET", HTTP).query(&query)).key;
            assert_eq!(base, k, "{query}");
        }
    }
}

/// A replay that sends a placeholder where the recording sent a real key hits the same tape.
#[test]
fn a_placeholder_credential_keys_like_the_real_one() {
    let real = keyed(&Request::new("GET", HTTP).query("alt=sse&key=AIzaSyRealKey&token=abc"));
    let placeholder =
        keyed(&Request::new("GET", HTTP).query("alt=sse&key=%5BREDACTED%5D&token=placeholder"));
    assert_eq!(real.key, placeholder.key);
    assert_eq!(real.material["query"], json!([["alt", "sse"]]));
}

#[test]
fn names_near_a_credential_change_the_key() {
    let q = |query: &str| keyed(&Request::new("GET", HTTP).query(query)).key;
    let base = q("limit=10");
    for name in [
        "keys",
        "keyword",
        "tokens",
        "max_tokens",
        "page_token",
        "next_token",
        "continuation_token",
        "signature_version",
        "author",
        "secrets_count",
        "passwords",
    ] {
        assert_ne!(q(&format!("limit=10&{name}=1")), base, "{name}");
    }
}

#[test]
fn duplicate_and_trailing_slashes_do_not_matter() {
    let base = key_of(CHAT, VECTOR1_BODY);
    for path in [
        "//v1/chat/completions",
        "/v1//chat///completions",
        "/v1/chat/completions/",
        "//v1//chat/completions//",
    ] {
        assert_eq!(base, key_of(path, VECTOR1_BODY), "{path}");
    }
}

#[test]
fn method_case_does_not_matter() {
    let a = keyed(&Request::new("post", CHAT).body(VECTOR1_BODY.as_bytes())).key;
    assert_eq!(a.as_str(), VECTOR1_KEY);
}

// ---------------------------------------------------------------------------------------------
// Inputs that MUST change the key.
// ---------------------------------------------------------------------------------------------

#[test]
fn each_prompt_word_changes_the_key() {
    let base = key_of(CHAT, VECTOR1_BODY);
    let words = ["Where", "is", "my", "refund?"];
    let mut keys = HashSet::from([base.clone()]);
    for (i, _) in words.iter().enumerate() {
        let mut changed = words;
        changed[i] = "our";
        let body = VECTOR1_BODY.replace("Where is my refund?", &changed.join(" "));
        let k = key_of(CHAT, &body);
        assert!(keys.insert(k), "replacing word {i} must give a new key");
    }
    // Dropping a word, and a change of case, also count.
    assert!(keys.insert(key_of(
        CHAT,
        &VECTOR1_BODY.replace("Where is my refund?", "Where is refund?")
    )));
    assert!(keys.insert(key_of(
        CHAT,
        &VECTOR1_BODY.replace("Where is my refund?", "where is my refund?")
    )));
}

#[test]
fn system_prompt_changes_the_key_and_system_sha256() {
    let base = keyed(&Request::new("POST", CHAT).body(VECTOR1_BODY.as_bytes()));
    let body = VECTOR1_BODY.replace("You are terse.", "You are verbose.");
    let changed = keyed(&Request::new("POST", CHAT).body(body.as_bytes()));
    assert_ne!(base.key, changed.key);
    assert_ne!(base.system_sha256, changed.system_sha256);
    assert_eq!(
        changed.system_sha256.as_deref(),
        Some(sha256_hex(b"You are verbose.\nAnswer briefly.").as_str())
    );

    let v2 = keyed(&vector2());
    let body = VECTOR2_BODY.replace("Be kind.", "Be rude.");
    let mut r = vector2();
    r.body = body.as_bytes();
    let changed = keyed(&r);
    assert_ne!(v2.key, changed.key);
    assert_ne!(v2.system_sha256, changed.system_sha256);
}

#[test]
fn model_changes_the_key() {
    assert_ne!(
        key_of(CHAT, VECTOR1_BODY),
        key_of(CHAT, &VECTOR1_BODY.replace("gpt-4o-mini", "gpt-4o"))
    );
    assert_ne!(
        keyed(&vector2()).key.as_str(),
        vector2_key_with(|mut r| {
            r.body = br#"{"model":"claude-opus-4-1","max_tokens":256,"system":"Be kind.","messages":[{"role":"user","content":"Hi"}]}"#;
            r
        })
    );
}

#[test]
fn each_sampling_parameter_changes_the_key() {
    let params = [
        ("temperature", json!(0.7)),
        ("top_p", json!(0.9)),
        ("top_k", json!(40)),
        ("n", json!(2)),
        ("presence_penalty", json!(0.5)),
        ("frequency_penalty", json!(0.5)),
        ("max_tokens", json!(64)),
        ("max_completion_tokens", json!(64)),
        ("max_output_tokens", json!(64)),
        ("seed", json!(7)),
        ("stop", json!(["\n"])),
        ("logprobs", json!(true)),
        ("top_logprobs", json!(3)),
        ("logit_bias", json!({"50256": -100})),
        ("reasoning_effort", json!("low")),
        ("response_format", json!({"type": "json_object"})),
        ("tool_choice", json!("required")),
        (
            "tools",
            json!([{"type": "function", "function": {"name": "f"}}]),
        ),
        ("parallel_tool_calls", json!(false)),
        ("options", json!({"temperature": 0})),
    ];
    for (path, _) in LLM_PATHS {
        let mut keys = HashSet::from([key_of_value(path, &base_body())]);
        for (name, value) in &params {
            let k = key_of_value(path, &with(base_body(), name, value.clone()));
            assert!(keys.insert(k), "{path}: {name}={value} must give a new key");
        }
    }
}

#[test]
fn semantic_headers_change_the_key() {
    let base = vector2_key_with(|r| r);
    let mut keys = HashSet::from([base]);
    let mut r = vector2();
    r.headers = vec![("anthropic-version", "2024-01-01")];
    assert!(
        keys.insert(keyed(&r).key.as_str().to_owned()),
        "anthropic-version"
    );
    r.headers = vec![];
    assert!(
        keys.insert(keyed(&r).key.as_str().to_owned()),
        "anthropic-version absent"
    );
    for (name, value) in [
        ("anthropic-beta", "prompt-caching-2024-07-31"),
        ("openai-beta", "assistants=v2"),
    ] {
        assert!(
            keys.insert(vector2_key_with(|r| r.header(name, value))),
            "{name}"
        );
    }
    // Repeats join in the order received.
    let a = vector2_key_with(|r| {
        r.header("anthropic-beta", "a")
            .header("anthropic-beta", "b")
    });
    let b = vector2_key_with(|r| {
        r.header("anthropic-beta", "b")
            .header("anthropic-beta", "a")
    });
    let joined = vector2_key_with(|r| r.header("anthropic-beta", "a,b"));
    assert_ne!(a, b);
    assert_eq!(a, joined);
}

#[test]
fn target_method_and_path_change_the_key() {
    let base = keyed(&vector2()).key.as_str().to_owned();
    let mut keys = HashSet::from([base]);
    assert!(
        keys.insert(vector2_key_with(|r| r.target("default"))),
        "target"
    );
    assert!(
        keys.insert(vector2_key_with(|mut r| {
            r.method = "PUT";
            r
        })),
        "method"
    );
    assert!(
        keys.insert(vector2_key_with(|mut r| {
            r.path = "/anthropic/v1/messages";
            r
        })),
        "path with the same profile"
    );
    assert!(
        keys.insert(vector2_key_with(|mut r| {
            r.path = "/v1/messages/count_tokens";
            r
        })),
        "path with another profile"
    );
}

#[test]
fn query_params_change_the_key() {
    let q = |query| {
        keyed(&Request::new("GET", HTTP).query(query))
            .key
            .as_str()
            .to_owned()
    };
    let keys: HashSet<String> = [
        "",
        "limit=10",
        "limit=11",
        "limits=10",
        "limit=10&after=x",
        "limit",
    ]
    .into_iter()
    .map(q)
    .collect();
    assert_eq!(keys.len(), 6);
    assert_ne!(q("a"), q("a=1"));
    assert_eq!(q("a"), q("a="), "a name without `=` has the empty value");
}

#[test]
fn each_raw_body_byte_changes_the_key() {
    let raw: Vec<u8> = vec![0xff, 0xfe, b'h', b'i', 0x00, b'\n', 0x80];
    let base = keyed(&Request::new("POST", "/upload").body(&raw));
    assert!(base.material["body"].is_null());
    assert_eq!(base.material["body_sha256"], json!(sha256_hex(&raw)));
    let mut keys = HashSet::from([base.key.as_str().to_owned()]);
    for i in 0..raw.len() {
        let mut changed = raw.clone();
        changed[i] ^= 0x01;
        let k = keyed(&Request::new("POST", "/upload").body(&changed));
        assert!(keys.insert(k.key.as_str().to_owned()), "byte {i}");
    }
    let mut longer = raw.clone();
    longer.push(b' ');
    assert!(keys.insert(
        keyed(&Request::new("POST", "/upload").body(&longer))
            .key
            .as_str()
            .to_owned()
    ));
}

#[test]
fn bodies_that_are_not_json_are_keyed_raw() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    for raw in [
        &b"not json"[..],
        b"{\"a\":",
        b"\xef\xbb\xbf{}",
        b" ",
        b"{\"a\":1} x",
        b"[1e400]",
        b"\"\\ud800\"",
        deep.as_bytes(),
    ] {
        let k = keyed(&Request::new("POST", CHAT).body(raw));
        assert!(k.material["body"].is_null(), "{raw:?}");
        assert_eq!(k.material["body_sha256"], json!(sha256_hex(raw)), "{raw:?}");
    }
    let empty = keyed(&Request::new("POST", CHAT));
    assert!(empty.material["body"].is_null());
    assert!(empty.material["body_sha256"].is_null());
}

#[test]
fn keep_alive_changes_the_key_outside_ollama() {
    for path in [CHAT, RESPONSES, COMPLETIONS, EMBEDDINGS, MESSAGES, HTTP] {
        assert_ne!(
            key_of_value(path, &base_body()),
            key_of_value(path, &with(base_body(), "keep_alive", json!(0))),
            "{path}"
        );
    }
}

#[test]
fn leading_whitespace_changes_the_key() {
    let k = |content: &str| {
        key_of_value(
            CHAT,
            &json!({"messages": [{"role": "user", "content": content}]}),
        )
    };
    let keys: HashSet<String> = [
        "a\nb", " a\nb", "a\n b", "\ta\nb", "a\n\tb", "a\n\nb", "a\nb\n",
    ]
    .into_iter()
    .map(k)
    .collect();
    assert_eq!(
        keys.len(),
        7,
        "leading whitespace and blank lines are content"
    );
}

#[test]
fn trailing_whitespace_counts_outside_prompt_members() {
    assert_ne!(
        key_of(CHAT, r#"{"model":"m","stop":["x"]}"#),
        key_of(CHAT, r#"{"model":"m","stop":["x "]}"#)
    );
    assert_ne!(
        key_of(CHAT, r#"{"model":"m"}"#),
        key_of(CHAT, r#"{"model":"m "}"#)
    );
}

// ---------------------------------------------------------------------------------------------
// system_sha256 per profile.
// ---------------------------------------------------------------------------------------------

fn system_of(path: &str, body: Value) -> Option<String> {
    keyed(&Request::new("POST", path).body(body.to_string().as_bytes())).system_sha256
}

fn sha(text: &str) -> Option<String> {
    Some(sha256_hex(text.as_bytes()))
}

#[test]
fn system_sha256_for_chat_joins_system_and_developer_messages() {
    let body = json!({"messages": [
        {"role": "system", "content": "Rule one.  "},
        {"role": "user", "content": "Hi"},
        {"role": "developer", "content": "Rule two."},
        {"role": "assistant", "content": "Hello"},
        {"role": "system", "content": [{"type": "text", "text": "Part "}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "three."}]}
    ]});
    // Parts of a content array concatenate; trailing whitespace is gone by then (step 2).
    let expected = sha("Rule one.\nRule two.\nPartthree.");
    assert_eq!(system_of(CHAT, body.clone()), expected);
    assert_eq!(system_of(OLLAMA_CHAT, body), expected);
    assert_eq!(
        system_of(
            CHAT,
            json!({"messages": [{"role": "user", "content": "Hi"}]})
        ),
        None
    );
}

#[test]
fn system_sha256_for_responses_takes_instructions_then_input_messages() {
    let body = json!({
        "instructions": "Be terse.",
        "input": [
            {"role": "developer", "content": [{"type": "input_text", "text": "Use JSON."}]},
            {"role": "user", "content": "Hi"}
        ]
    });
    assert_eq!(system_of(RESPONSES, body), sha("Be terse.\nUse JSON."));
    assert_eq!(
        system_of(RESPONSES, json!({"instructions": "Only this."})),
        sha("Only this.")
    );
    assert_eq!(
        system_of(
            RESPONSES,
            json!({"input": [{"role": "system", "content": "Sys."}]})
        ),
        sha("Sys.")
    );
    assert_eq!(system_of(RESPONSES, json!({"input": "Hi"})), None);
}

#[test]
fn system_sha256_for_anthropic_takes_a_string_or_blocks() {
    assert_eq!(
        system_of(MESSAGES, json!({"system": "Be kind."})),
        sha("Be kind.")
    );
    assert_eq!(
        system_of(
            MESSAGES,
            json!({"system": [{"type": "text", "text": "Be kind."}, {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]})
        ),
        sha("Be kind.\nBe brief.")
    );
    assert_eq!(
        system_of(
            MESSAGES,
            json!({"messages": [{"role": "user", "content": "Hi"}]})
        ),
        None
    );
    assert_eq!(system_of(MESSAGES, json!({"system": null})), None);
    // A `system` role message is not Anthropic's way of saying it.
    assert_eq!(
        system_of(
            MESSAGES,
            json!({"messages": [{"role": "system", "content": "x"}]})
        ),
        None
    );
    assert_eq!(keyed(&vector2()).system_sha256, sha("Be kind."));
}

#[test]
fn system_sha256_for_ollama_generate_is_the_system_member() {
    assert_eq!(
        system_of(
            OLLAMA_GENERATE,
            json!({"system": "Be brief.\t", "prompt": "Hi"})
        ),
        sha("Be brief.")
    );
    assert_eq!(system_of(OLLAMA_GENERATE, json!({"prompt": "Hi"})), None);
}

#[test]
fn system_sha256_is_null_for_profiles_without_system_text() {
    for path in [COMPLETIONS, EMBEDDINGS, OLLAMA_EMBED, HTTP] {
        let body = json!({"system": "x", "instructions": "y", "messages": [{"role": "system", "content": "z"}]});
        assert_eq!(system_of(path, body), None, "{path}");
    }
}

#[test]
fn system_sha256_is_in_the_material() {
    let k = keyed(&vector2());
    assert_eq!(k.material["system_sha256"], json!(k.system_sha256));
}

// ---------------------------------------------------------------------------------------------
// KeyConfig: the volatile list is configurable.
// ---------------------------------------------------------------------------------------------

#[test]
fn extra_volatile_names_are_dropped() {
    let config = KeyConfig {
        extra_volatile: vec!["seed".into(), "x-trace".into()],
        ..KeyConfig::default()
    };
    let k = |body: &Value| {
        Request::new("POST", CHAT)
            .body(body.to_string().as_bytes())
            .key(&config)
            .key
    };
    assert_eq!(k(&base_body()), k(&with(base_body(), "seed", json!(1))));
    assert_eq!(
        k(&base_body()),
        k(&with(base_body(), "x-trace", json!("t")))
    );
    assert_ne!(k(&base_body()), k(&with(base_body(), "top_k", json!(1))));
    // The default configuration keys them.
    assert_ne!(
        key_of_value(CHAT, &base_body()),
        key_of_value(CHAT, &with(base_body(), "seed", json!(1)))
    );
}

#[test]
fn kept_volatile_names_count_again() {
    let config = KeyConfig {
        keep_volatile: vec!["user".into(), "keep_alive".into()],
        ..KeyConfig::default()
    };
    let k = |path: &str, body: &Value| {
        Request::new("POST", path)
            .body(body.to_string().as_bytes())
            .key(&config)
            .key
    };
    assert_ne!(
        k(CHAT, &base_body()),
        k(CHAT, &with(base_body(), "user", json!("u")))
    );
    assert_ne!(
        k(OLLAMA_CHAT, &base_body()),
        k(OLLAMA_CHAT, &with(base_body(), "keep_alive", json!("5m")))
    );
    // Names not kept stay volatile.
    assert_eq!(
        k(CHAT, &base_body()),
        k(CHAT, &with(base_body(), "stream", json!(true)))
    );
    assert!(config.is_volatile(cassette_keying::Profile::OpenaiChat, "stream"));
    assert!(!config.is_volatile(cassette_keying::Profile::OpenaiChat, "user"));
}

// ---------------------------------------------------------------------------------------------
// diff: why two requests have different keys.
// ---------------------------------------------------------------------------------------------

fn paths(old: &Keyed, new: &Keyed) -> Vec<String> {
    diff(&old.material, &new.material)
        .into_iter()
        .map(|d| d.path)
        .collect()
}

#[test]
fn diff_of_equivalent_requests_is_empty() {
    let a = keyed(&Request::new("POST", CHAT).body(VECTOR1_BODY.as_bytes()));
    let b = keyed(&Request::new("post", "/v1/chat/completions/").body(
        br#"{"messages":[{"content":"You are terse.\nAnswer briefly.","role":"system"},{"role":"user","content":"Where is my refund?"}],"model":"gpt-4o-mini","temperature":1.0}"#,
    ));
    assert_eq!(a.key, b.key);
    assert!(diff(&a.material, &b.material).is_empty());
}

#[test]
fn diff_names_the_body_paths_headers_and_system_prompt_that_differ() {
    let old = keyed(&vector2());
    let mut new = vector2();
    new.headers = vec![("anthropic-version", "2024-01-01")];
    new.body = br#"{"model":"claude-sonnet-4-5","max_tokens":256,"system":"Be nice.","messages":[{"role":"user","content":"Hello"}],"temperature":0.5,"top_k":5}"#;
    let new = keyed(&new);
    let found = diff(&old.material, &new.material);
    let shown: Vec<String> = found.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        shown,
        [
            "body.messages[0].content: \"Hi\" -> \"Hello\"",
            "body.system: \"Be kind.\" -> \"Be nice.\"",
            "body.temperature: 1 -> 0.5",
            "body.top_k: added 5",
            "headers.anthropic-version: \"2023-06-01\" -> \"2024-01-01\"",
            "system_sha256 changed",
        ]
    );
    let Change::Changed { old: was, new: now } = &found[5].change else {
        panic!("system_sha256 should be a change: {:?}", found[5]);
    };
    assert_eq!(was, &serde_json::json!(sha256_hex(b"Be kind.")));
    assert_eq!(now, &serde_json::json!(sha256_hex(b"Be nice.")));
}

#[test]
fn diff_names_target_method_path_query_and_removed_messages() {
    let old = keyed(
        &Request::new("POST", CHAT)
            .query("a=1")
            .body(VECTOR1_BODY.as_bytes()),
    );
    let new = keyed(
        &Request::new("PUT", "/v2/chat/completions")
            .target("openai")
            .query("a=2")
            .body(br#"{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse.\nAnswer briefly."}]}"#),
    );
    assert_eq!(
        paths(&old, &new),
        [
            "body.messages[1]",
            "method",
            "path",
            "query[0][1]",
            "target"
        ]
    );
}

#[test]
fn diff_reports_a_raw_body_change_as_its_hash() {
    let old = keyed(&Request::new("POST", "/upload").body(b"\xff1"));
    let new = keyed(&Request::new("POST", "/upload").body(b"\xff2"));
    assert_eq!(paths(&old, &new), ["body_sha256"]);
    let json = keyed(&Request::new("POST", "/upload").body(b"{}"));
    assert_eq!(paths(&old, &json), ["body", "body_sha256"]);
}

#[test]
fn a_repeated_member_name_keeps_its_last_value() {
    assert_eq!(key_of(HTTP, r#"{"a":1,"a":2}"#), key_of(HTTP, r#"{"a":2}"#));
    assert_ne!(key_of(HTTP, r#"{"a":1,"a":2}"#), key_of(HTTP, r#"{"a":1}"#));
}

/// Azure OpenAI: `/openai/deployments/{name}/chat/completions?api-version=...` is keyed by the
/// `openai.chat` rules; the deployment (path) and the API version (query) count, the `api-key`
/// header does not.
#[test]
fn azure_deployments_key_as_openai_chat() {
    let path = "/openai/deployments/gpt-4o-mini/chat/completions";
    let body = br#"{"messages":[{"role":"user","content":"Hi  "}]}"#;
    let azure = |path, query, key| {
        keyed(
            &Request::new("POST", path)
                .target("azure")
                .query(query)
                .header("api-key", key)
                .body(body),
        )
    };
    let base = azure(path, "api-version=2024-10-21", "secret-1");
    assert_eq!(base.profile.as_str(), "openai.chat");
    assert_eq!(base.material["body"]["temperature"], json!(1));
    assert_eq!(base.material["body"]["messages"][0]["content"], json!("Hi"));
    assert_eq!(
        base.key,
        azure(path, "api-version=2024-10-21", "secret-2").key
    );
    assert_ne!(
        base.key,
        azure(path, "api-version=2025-01-01", "secret-1").key
    );
    assert_ne!(
        base.key,
        azure(
            "/openai/deployments/gpt-4o/chat/completions",
            "api-version=2024-10-21",
            "secret-1"
        )
        .key
    );
}

// ---------------------------------------------------------------------------------------------
// Occurrences (sequence mode): an addition to key v1 that changes no base key.
// ---------------------------------------------------------------------------------------------

const VECTOR1_OCCURRENCE2_KEY: &str =
    "8b6a610c4513ea6299dae425542fe8dd36bf0a6fd61482de941cea825fe38ed5";
const VECTOR1_OCCURRENCE3_KEY: &str =
    "095567290736cf508bb8401ffc2a9ffd168959e7179de2e982cc673807583311";

fn vector1() -> Keyed {
    keyed(&Request::new("POST", CHAT).body(VECTOR1_BODY.as_bytes()))
}

#[test]
fn the_first_occurrence_is_the_base_key() {
    for n in [0, 1] {
        let first = vector1().occurrence(n);
        assert_eq!(first.key.as_str(), VECTOR1_KEY, "occurrence {n}");
        assert_eq!(first.material.get("occurrence"), None);
        assert_eq!(first.occurrence_number(), 1);
    }
}

#[test]
fn later_occurrences_pin_their_material_and_key() {
    let base = vector1();
    let second = base.clone().occurrence(2);
    // The base material with one member more, in its sorted place.
    let expected = base.canonical.replacen(
        r#""method":"POST","#,
        r#""method":"POST","occurrence":2,"#,
        1,
    );
    assert_eq!(second.canonical, expected);
    assert_eq!(second.key.as_str(), sha256_hex(expected.as_bytes()));
    assert_eq!(second.key.as_str(), VECTOR1_OCCURRENCE2_KEY);
    assert_eq!(second.occurrence_number(), 2);
    assert_eq!(
        base.clone().occurrence(3).key.as_str(),
        VECTOR1_OCCURRENCE3_KEY
    );
    // Each occurrence has its own key, none equal to the base key; the profile and system hash
    // are the request's.
    let keys: HashSet<String> = (1..=50)
        .map(|n| base.clone().occurrence(n).key.as_str().to_owned())
        .collect();
    assert_eq!(keys.len(), 50);
    assert_eq!(second.profile, base.profile);
    assert_eq!(second.system_sha256, base.system_sha256);
    // Numbering an occurrence again replaces the number; it does not stack, and the first
    // occurrence of a numbered key is the base key again.
    assert_eq!(
        second.clone().occurrence(3).key.as_str(),
        VECTOR1_OCCURRENCE3_KEY
    );
    let first = second.occurrence(1);
    assert_eq!(first.key.as_str(), VECTOR1_KEY);
    assert_eq!(first.canonical, base.canonical);
}

#[test]
fn diff_names_the_occurrence() {
    let base = vector1();
    let shown: Vec<String> = diff(&base.material, &base.clone().occurrence(4).material)
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].starts_with("occurrence"), "{shown:?}");
}

// ---------------------------------------------------------------------------------------------
// Test-scoped keys (adopt): an addition to key v1 that changes no plain key.
// ---------------------------------------------------------------------------------------------

const VECTOR1_TEST: &str = "tests/test_chat.py::test_same_request_second";
const VECTOR1_TEST_KEY: &str = "d42377def8b783d8ff2c1a117e5d008945f0117f14092ef2c68f278fac8aec36";
const VECTOR1_TEST_OCCURRENCE2_KEY: &str =
    "e53c9b495d798fdec3fd43340f3d86999a16ae71c5a9a291fc8f0c94224ce49f";

#[test]
fn test_scoped_keys_pin_their_material_and_key() {
    let base = vector1();
    assert_eq!(base.test_scope(), None);
    assert_eq!(base.clone().for_test(None).key.as_str(), VECTOR1_KEY);
    let scoped = base.clone().for_test(Some(VECTOR1_TEST));
    // The plain material with one member more, in its sorted place (after `target`, before `v`).
    let expected = base.canonical.replacen(
        r#","v":1}"#,
        &format!(r#","test":"{VECTOR1_TEST}","v":1}}"#),
        1,
    );
    assert_ne!(expected, base.canonical);
    assert_eq!(scoped.canonical, expected);
    assert_eq!(scoped.key.as_str(), sha256_hex(expected.as_bytes()));
    assert_eq!(scoped.key.as_str(), VECTOR1_TEST_KEY);
    assert_eq!(scoped.test_scope(), Some(VECTOR1_TEST));
    assert_eq!(scoped.profile, base.profile);
    assert_eq!(scoped.system_sha256, base.system_sha256);
    // Another test, another key; none equal to the plain key.
    let other = base
        .clone()
        .for_test(Some("tests/test_chat.py::test_same_request_first"));
    assert_ne!(other.key, scoped.key);
    assert_ne!(other.key.as_str(), VECTOR1_KEY);
    // An empty id is still a scope: a member present is never the plain key.
    assert_ne!(base.clone().for_test(Some("")).key.as_str(), VECTOR1_KEY);
    // Scoping again replaces the test; `None` gives the plain key back, byte for byte.
    assert_eq!(other.clone().for_test(Some(VECTOR1_TEST)).key, scoped.key);
    let plain = scoped.clone().for_test(None);
    assert_eq!(plain.key.as_str(), VECTOR1_KEY);
    assert_eq!(plain.canonical, base.canonical);
    // With occurrences, in either order: both members, one key.
    let both = scoped.clone().occurrence(2);
    assert_eq!(both.key.as_str(), VECTOR1_TEST_OCCURRENCE2_KEY);
    assert_eq!(
        base.clone().occurrence(2).for_test(Some(VECTOR1_TEST)).key,
        both.key
    );
    assert_eq!(both.occurrence_number(), 2);
    assert_eq!(both.test_scope(), Some(VECTOR1_TEST));
    assert_eq!(
        both.clone().occurrence(1).for_test(None).key.as_str(),
        VECTOR1_KEY
    );
    // Characters JSON escapes are escaped as step 7 says (the id is a JSON string).
    let quoted = base.clone().for_test(Some("t.py::t[\"a\\b\"]"));
    assert!(
        quoted.canonical.contains(r#""test":"t.py::t[\"a\\b\"]","#),
        "{}",
        quoted.canonical
    );
}

#[test]
fn diff_names_the_test_scope() {
    let base = vector1();
    let shown: Vec<String> = diff(&base.material, &base.clone().for_test(Some("t")).material)
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].starts_with("test"), "{shown:?}");
}
