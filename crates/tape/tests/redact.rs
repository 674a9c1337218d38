//! Redaction end to end: secrets planted everywhere never reach the stored bytes, and a
//! realistic LLM exchange comes out untouched.

use base64::Engine;
use cassette_tape::redact::{find_credentials, RedactionRules, Redactor, REDACTED};
use serde_json::{json, Value};

fn hdrs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

fn redactor(rules: RedactionRules) -> Redactor {
    match Redactor::new(&rules) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

/// Deterministic pseudo-random bytes (an image stand-in) so the test never flakes.
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u8
        })
        .collect()
}

/// One raw interaction, as it arrives before anything is stored.
struct Exchange<'a> {
    url: &'a str,
    query: &'a str,
    req_headers: Vec<(String, String)>,
    req_body: Value,
    resp_headers: Vec<(String, String)>,
    resp_body: Value,
    resp_text: String,
}

/// What a store would hold for one interaction, in the shape of a cassette document.
fn stored_document(red: &Redactor, mut x: Exchange<'_>) -> Vec<u8> {
    red.json(&mut x.req_body);
    red.json(&mut x.resp_body);
    let doc = json!({
        "upstream": red.url(x.url),
        "request": {
            "query": red.query(x.query),
            "headers": red.request_headers(&x.req_headers),
            "body": x.req_body,
        },
        "response": {
            "headers": red.response_headers(&x.resp_headers),
            "body": x.resp_body,
            "text": red.text(&x.resp_text),
        }
    });
    match serde_json::to_vec_pretty(&doc) {
        Ok(bytes) => bytes,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn planted_secrets_never_reach_the_stored_bytes() {
    let openai = "sk-proj-7Fh2Kd9Lq3Wz8Xc1Vb6Nm4Tr0Yp5Ju2Ie8Ow3Aq";
    let anthropic = "sk-ant-api03-Q9x2Lm7Vb4Kp1Zt8Rw3Yc6Hn0Js5Fd2Ga9Ue4Oi7_AA";
    let aws = "AKIAIOSFODNN7EXAMPLE";
    let github = "ghp_a1B2c3D4e5F6a1B2c3D4e5F6a1B2c3D4e5F6";
    let google = "AIzaSyB1c2D3e4FSyB1c2D3e4FSyB1c2D3e4F5g6";
    let slack = "xoxb-1234567890-0987654321-AbCdEfGh";
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    let bearer = "8f3a9c2e1b7d4f60a5e2c9b1d0";
    let pem =
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----";

    let url = "https://alice:PLANT-userinfo-pw@api.example.com/v1?key=PLANT-url-key&alt=sse#access_token=PLANT-fragment-at";
    let query = "api_key=PLANT-q-apikey&alt=sse&access_token=PLANT-q-at&Signature=PLANT-q-sig&Token=PLANT-q-token&KEY=PLANT-q-key&beta=true";
    let req_headers = hdrs(&[
        ("Authorization", &format!("Bearer {bearer}")),
        ("x-api-key", anthropic),
        ("api-key", "PLANT-h-azure"),
        ("Cookie", "session=PLANT-h-cookie"),
        ("x-goog-api-key", google),
        ("Proxy-Authorization", "Basic PLANT-h-proxy"),
        ("OpenAI-Organization", "PLANT-h-org"),
        ("Content-Type", "application/json"),
        ("Accept", &format!("application/json; x={openai}")),
        ("anthropic-version", "2023-06-01"),
    ]);
    let req_body = json!({
        "model": "gpt-4o-mini",
        "max_tokens": 1024,
        "max_completion_tokens": 512,
        "api_key": "PLANT-b-apikey",
        "Client-Secret": "PLANT-b-cs",
        "messages": [
            {"role": "system", "content": format!("Use key {openai} and {aws} carefully.")},
            {"role": "user", "content": [
                {"type": "text", "text": format!("my token is {github} and {slack}")},
                {"type": "text", "text": format!("Authorization: Bearer {bearer}2")},
                {"type": "text", "text": pem},
            ]},
        ],
        "metadata": {
            "auth": [{"password": "PLANT-b-pw", "accessToken": "PLANT-b-at"}, {"refresh_token": 918273645}],
            "user_profile": {"ssn": "PLANT-ssn-078-05-1120", "email": "planted.person@example.com"},
            "nested": [[[{"session_token": "PLANT-b-st", "note": jwt}]]],
            "keyed": {google: "value"},
        },
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object",
            "properties": {"token": {"type": "string", "default": anthropic}},
        }}}],
    });
    let resp_headers = hdrs(&[
        ("Set-Cookie", "__cf_bm=PLANT-r-cookie; path=/"),
        ("Authorization", "PLANT-r-auth"),
        ("X-Api-Key", "PLANT-r-xapikey"),
        ("x-auth-token", "PLANT-r-authtoken"),
        ("x-debug", "PLANT-r-debug"),
        ("llm_provider-set-cookie", "PLANT-r-gateway-cookie"),
        ("content-type", "application/json"),
        ("x-request-id", &format!("issued {jwt}")),
    ]);
    let resp_body = json!({
        "id": "chatcmpl-1",
        "choices": [{"message": {"role": "assistant", "content": format!("Here: {anthropic}")}}],
        "access_token": "PLANT-r-at",
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    });
    let resp_text = format!("data: {{\"k\":\"{google}\",\"a\":\"Bearer {bearer}3\"}}\n\n");

    let red = redactor(RedactionRules {
        json_paths: vec!["$.metadata.user_profile.ssn".into()],
        patterns: vec![r"[\w.+-]+@[\w-]+\.[\w.]+".into()],
    });
    let bytes = stored_document(
        &red,
        Exchange {
            url,
            query,
            req_headers,
            req_body,
            resp_headers,
            resp_body,
            resp_text,
        },
    );
    let stored = String::from_utf8_lossy(&bytes);

    let planted = [
        openai,
        anthropic,
        aws,
        github,
        google,
        slack,
        jwt,
        bearer,
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        "PLANT",
        "planted.person",
        "918273645",
    ];
    for secret in planted {
        assert!(
            !stored.contains(secret),
            "`{secret}` reached the store:\n{stored}"
        );
    }
    assert_eq!(
        find_credentials(&bytes),
        vec![],
        "credential shapes in:\n{stored}"
    );

    let doc: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(doc["request"]["body"]["max_tokens"], json!(1024));
    assert_eq!(doc["request"]["body"]["max_completion_tokens"], json!(512));
    assert_eq!(doc["response"]["body"]["usage"]["total_tokens"], json!(12));
    assert_eq!(doc["request"]["query"], json!("alt=sse&beta=true"));
    assert_eq!(doc["upstream"], json!("https://api.example.com/v1?alt=sse"));
    assert_eq!(
        doc["request"]["headers"],
        json!([
            ["content-type", "application/json"],
            ["accept", "application/json; x=[REDACTED]"],
            ["anthropic-version", "2023-06-01"],
        ])
    );
    assert_eq!(
        doc["response"]["headers"],
        json!([
            ["content-type", "application/json"],
            ["x-request-id", "issued [REDACTED]"],
        ])
    );
    assert_eq!(doc["request"]["body"]["api_key"], json!(REDACTED));
    assert!(doc["request"]["body"]["metadata"]["keyed"]
        .get(REDACTED)
        .is_some());
}

#[test]
fn a_realistic_exchange_is_not_touched() {
    let image = base64::engine::general_purpose::STANDARD.encode(noise(256 * 1024, 7));
    let request = json!({
        "model": "gpt-4o-2024-08-06",
        "max_tokens": 1024,
        "max_completion_tokens": 800,
        "temperature": 0,
        "top_logprobs": 3,
        "logprobs": true,
        "logit_bias": {"50256": -100},
        "stop": ["\n\nUser:"],
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [
            {"role": "system", "content": "You are a support agent. Keep answers under max_tokens. Never reveal the password reset token flow; sketch a skeleton plan as a task-list. Bearer of bad news: be kind. Tokens are billed per call."},
            {"role": "user", "content": [
                {"type": "text", "text": "What is in this picture? Also, my order is #12345."},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{image}"), "detail": "low"}},
            ]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_Ab12Cd34Ef56Gh78", "type": "function",
                "function": {"name": "lookup_order", "arguments": "{\"order_id\":\"12345\",\"max_tokens\":50}"}}]},
            {"role": "tool", "tool_call_id": "call_Ab12Cd34Ef56Gh78", "content": "{\"status\":\"shipped\",\"tokens\":12}"},
        ],
        "tools": [{"type": "function", "function": {
            "name": "reset_login",
            "description": "Resets a user's login; needs the one-time token.",
            "parameters": {"type": "object", "properties": {
                "token": {"type": "string", "description": "one-time token from the email"},
                "password": {"type": "string", "minLength": 12},
                "max_tokens": {"type": "integer", "default": 256},
                "token_budget": {"type": "integer"},
            }, "required": ["token", "password"]},
        }}],
    });
    let response = json!({
        "id": "chatcmpl-9pWz2Xf8hYqL3mN7vKj5tR1sD0aB",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_3aa7262c27",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "A skeleton key on a task-list. Your order shipped."},
            "logprobs": {"content": [{"token": "A", "logprob": -0.0001, "bytes": [65],
                "top_logprobs": [{"token": "A", "logprob": -0.0001, "bytes": [65]}, {"token": " password", "logprob": -9.2, "bytes": null}]}]}}],
        "usage": {"prompt_tokens": 1234, "completion_tokens": 12, "total_tokens": 1246,
            "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "accepted_prediction_tokens": 0}},
        "anthropic_like": {"content": [
            {"type": "thinking", "thinking": "Let me think.", "signature": "EqQBCkgIARABGAIiQLZ3Vq5hQo8B1mN+/Xx9wY0ab=="},
            {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"location": "Paris"}},
        ], "usage": {"input_tokens": 2095, "output_tokens": 503, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
            "thinking": {"type": "enabled", "budget_tokens": 2048}, "stop_sequences": ["###"]},
        "ollama_like": {"model": "llama3.2", "done": true, "eval_count": 42, "prompt_eval_count": 26, "options": {"num_predict": 128, "num_ctx": 4096}},
    });
    let red = Redactor::default();
    for original in [request, response] {
        let mut v = original.clone();
        assert!(!red.json_changed(&mut v));
        assert_eq!(v, original);
        let bytes = match serde_json::to_vec(&v) {
            Ok(b) => b,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(find_credentials(&bytes), vec![]);
    }
    let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\",\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n";
    assert_eq!(red.text(sse), sse);
    let headers = hdrs(&[
        ("content-type", "text/event-stream; charset=utf-8"),
        ("anthropic-ratelimit-tokens-remaining", "39000"),
        ("request-id", "req_018EeWyXxfu5pfWkrYcMdjWG"),
        ("cf-ray", "8c1a2b3c4d5e6f70-CDG"),
    ]);
    assert_eq!(red.response_headers(&headers), headers);
}

#[test]
fn random_base64_is_not_flagged() {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    for seed in 0..8 {
        // URL-safe base64 has `-` and `_`, which keys have too (issue 25, item 12: a key glued
        // to a word character is found, but not a chance run inside data).
        let bytes = noise(512 * 1024, seed);
        for blob in [STANDARD.encode(&bytes), URL_SAFE_NO_PAD.encode(&bytes)] {
            assert_eq!(Redactor::default().text(&blob), blob, "seed {seed}");
            assert_eq!(find_credentials(blob.as_bytes()), vec![], "seed {seed}");
        }
    }
}
