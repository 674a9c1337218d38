//! Sealing: no credential planted anywhere in a document reaches its stored bytes, a secret a
//! provider streamed in pieces is redacted in the events exact replay keeps (every provider
//! format), and the audit flags a stored document where it was not.

use cassette_keying::{Key, KeyConfig, McpRequest, Profile};
use cassette_tape::audit::audit;
use cassette_tape::redact::{find_credentials, Redactor, REDACTED};
use cassette_tape::{
    Cassette, KeySettings, Meta, Sealed, Sequence, StoredBody, StoredRequest, StoredResponse,
    TestScope,
};
use cassette_wire::{Assembler, StreamFormat};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A credential of a known shape (an OpenAI project key).
const SECRET: &str = "sk-proj-7Fh2kQ9xLm3Np8Rs5Tv1Wy4Za6Bc0De2Fg";

/// A document with every field set. Built without `..Default::default()`: a field added to the
/// document does not compile here until it is given a value, and then the planting test below
/// puts a credential into it.
fn full() -> Cassette {
    Cassette {
        format: 3,
        key: Key::parse(&"ab".repeat(32)).expect("hex"),
        key_version: 1,
        key_settings: Some(KeySettings {
            fingerprint: "070e95e06023".into(),
            volatile: vec!["seed".into()],
            keep_volatile: vec!["user".into()],
            ignore: vec!["$.metadata".into()],
        }),
        sequence: Some(Sequence {
            base_key: Key::parse(&"cd".repeat(32)).expect("hex"),
            occurrence: 2,
        }),
        test_scope: Some(TestScope {
            test: "tests/test_chat.py::test_b".into(),
            plain_key: Key::parse(&"ef".repeat(32)).expect("hex"),
        }),
        recorded_at: "2026-12-01T00:00:00Z".into(),
        tool: "cassette 0.1.0".into(),
        target: "default".into(),
        upstream: "https://api.openai.com".into(),
        request: StoredRequest {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            query: "api-version=1".into(),
            headers: BTreeMap::from([
                ("content-type".into(), "application/json".into()),
                ("openai-beta".into(), "assistants=v2".into()),
            ]),
            body: StoredBody::Json(json!({
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": "hello"}]
            })),
        },
        response: StoredResponse {
            status: 200,
            headers: BTreeMap::from([
                ("content-type".into(), "text/event-stream".into()),
                ("x-request-id".into(), "req_1".into()),
            ]),
            body: StoredBody::Text("data: hi".into()),
            stream: Some("openai.chat".into()),
            events: Some(vec![
                json!({"event": "message", "data": "{\"a\":\"b\"}", "id": "1"}),
                json!("{\"done\":true}"),
            ]),
            body_text: Some("{\"a\": \"b\"}".into()),
            failure: None,
        },
        meta: Meta {
            profile: "openai.chat".into(),
            requested_model: Some("gpt-4o".into()),
            response_model: Some("gpt-4o-2024".into()),
            finish_reason: Some("stop".into()),
            usage: Some(json!({"total_tokens": 3, "note": "x"})),
            latency_ms: 1,
            request_redacted: false,
            test: Some("tests/test_chat.py::test_greeting[gpt-4o]".into()),
            source: Some("tests/cassettes/test_chat/test_greeting.yaml interaction 1".into()),
        },
    }
}

/// Every string in a JSON value, by path.
fn string_paths(value: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        Value::String(_) => out.push(path.clone()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(i.to_string());
                string_paths(item, path, out);
                path.pop();
            }
        }
        Value::Object(map) => {
            for (name, child) in map {
                path.push(name.clone());
                string_paths(child, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(value: &'a mut Value, path: &[String]) -> &'a mut Value {
    path.iter().fold(value, |v, step| match v {
        Value::Array(items) => &mut items[step.parse::<usize>().expect("index")],
        other => &mut other[step.as_str()],
    })
}

#[test]
fn a_credential_planted_in_any_string_of_the_document_never_reaches_the_stored_bytes() {
    let document = serde_json::to_value(full()).expect("serializes");
    let mut paths = Vec::new();
    string_paths(&document, &mut Vec::new(), &mut paths);
    assert!(
        paths.len() > 30,
        "the sample covers the document: {paths:?}"
    );
    let mut planted = 0;
    for path in &paths {
        for plant in [SECRET.to_owned(), format!("text {SECRET} text")] {
            let mut hostile = document.clone();
            let slot = at(&mut hostile, path);
            // Event data is JSON text: the secret goes inside it, where a provider puts it.
            let text = slot.as_str().unwrap_or_default().to_owned();
            *slot = Value::String(if text.starts_with('{') {
                text.replacen("\"b\"", &format!("\"{plant}\""), 1).replacen(
                    "true",
                    &format!("\"{plant}\""),
                    1,
                )
            } else {
                plant
            });
            // Keys are validated when read: a document with a planted key is no document.
            let Ok(cassette) = serde_json::from_value::<Cassette>(hostile) else {
                assert!(
                    path.last().is_some_and(|p| p.ends_with("key")),
                    "only the hex keys refuse a planted value, not {path:?}"
                );
                continue;
            };
            planted += 1;
            let sealed = Sealed::seal(cassette, &Redactor::default(), None);
            let bytes = sealed.to_document();
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains(SECRET) && find_credentials(&bytes).is_empty(),
                "a credential planted at {path:?} reached the stored bytes:\n{text}"
            );
        }
    }
    assert!(
        planted >= 2 * (paths.len() - 3),
        "{planted} of {}",
        paths.len()
    );
}

#[test]
fn sealing_is_idempotent_and_derives_the_review_facts_from_what_is_stored() {
    let mut cassette = full();
    cassette.response.body = StoredBody::Json(json!({
        "model": "gpt-4o-2024-08-06",
        "choices": [{"message": {"content": "ok"}, "finish_reason": "length"}],
        "usage": {"total_tokens": 9}
    }));
    cassette.meta.response_model = None;
    let once = Sealed::seal(cassette, &Redactor::default(), None);
    let meta = &once.cassette().meta;
    assert_eq!(meta.response_model.as_deref(), Some("gpt-4o-2024-08-06"));
    assert_eq!(meta.finish_reason.as_deref(), Some("length"));
    assert_eq!(meta.requested_model.as_deref(), Some("gpt-4o"));
    assert_eq!(meta.usage, Some(json!({"total_tokens": 9})));
    let twice = Sealed::seal(once.cassette().clone(), &Redactor::default(), None);
    assert_eq!(twice.to_document(), once.to_document());
}

#[test]
fn an_answers_replayed_text_keeps_its_bytes_or_its_member_order_and_never_a_secret() {
    let mut cassette = full();
    cassette.response.stream = None;
    cassette.response.events = None;
    let received = r#"{"id": "c-1",  "object": "chat.completion", "choices": [{"message": {"content": "ok"}}]}"#;
    let answer = |cassette: &mut Cassette, body: &str, text: &str| {
        cassette.response.body = StoredBody::from_bytes(body.as_bytes());
        cassette.response.body_text = Some(text.to_owned());
    };
    let sealed = |cassette: &Cassette| {
        let sealed = Sealed::seal(cassette.clone(), &Redactor::default(), None);
        let again = Sealed::seal(sealed.cassette().clone(), &Redactor::default(), None);
        assert_eq!(again.to_document(), sealed.to_document(), "idempotent");
        sealed.cassette().response.body_text.clone()
    };
    // Left alone by redaction: the received bytes.
    answer(&mut cassette, received, received);
    assert_eq!(sealed(&cassette).as_deref(), Some(received));
    // Redacted: the redacted answer, compact, in the received member order.
    let leaky = received.replace("ok", SECRET);
    answer(&mut cassette, &leaky, &leaky);
    assert_eq!(
        sealed(&cassette).as_deref(),
        Some(
            r#"{"id":"c-1","object":"chat.completion","choices":[{"message":{"content":"[REDACTED]"}}]}"#
        )
    );
    // A text that says more than its body (a hand edit) is written from the body.
    answer(&mut cassette, received, &leaky);
    assert_eq!(
        sealed(&cassette).as_deref(),
        Some(r#"{"id":"c-1","object":"chat.completion","choices":[{"message":{"content":"ok"}}]}"#)
    );
    let findings = audit(&cassette);
    assert!(
        findings.iter().any(|f| f.location == "response.body_text"),
        "{findings:?}"
    );
    // Nothing to keep when it is what the body gives anyway, or when the answer streamed.
    let sorted = r#"{"choices":[{"message":{"content":"ok"}}],"id":"c-1"}"#;
    answer(&mut cassette, sorted, sorted);
    assert_eq!(sealed(&cassette), None);
    answer(&mut cassette, received, received);
    cassette.response.stream = Some("openai.chat".into());
    assert_eq!(sealed(&cassette), None);
}

#[test]
fn a_stored_request_redaction_changed_is_marked_and_keys_to_its_material() {
    let mut cassette = full();
    cassette.sequence = None;
    cassette.test_scope = None;
    cassette.key_settings = Some(KeySettings::of(&KeyConfig::default()));
    let request = cassette_tape::Request::from(&cassette);
    let keyed = request.key(&KeyConfig::default());
    cassette.key = keyed.key.clone();
    let clean = Sealed::seal(cassette.clone(), &Redactor::default(), None);
    assert!(!clean.cassette().meta.request_redacted);
    assert_eq!(clean.material(), &keyed.material);
    // The material handed in is kept when redaction changed nothing the key reads.
    let given = Sealed::seal(
        cassette.clone(),
        &Redactor::default(),
        Some(json!({"given": 1})),
    );
    assert_eq!(given.material(), &json!({"given": 1}));
    // A prompt holding a key: stored redacted, so the stored request keys differently.
    cassette.request.body = StoredBody::Json(json!({
        "model": "gpt-4o", "messages": [{"role": "user", "content": SECRET}]
    }));
    let keyed = cassette_tape::Request::from(&cassette).key(&KeyConfig::default());
    cassette.key = keyed.key.clone();
    let sealed = Sealed::seal(cassette, &Redactor::default(), Some(keyed.material));
    assert!(sealed.cassette().meta.request_redacted);
    assert!(sealed.material().to_string().contains(REDACTED));
}

#[test]
fn a_test_scoped_recording_keys_to_its_test_and_a_secret_in_the_id_is_marked() {
    let mut cassette = full();
    cassette.sequence = None;
    cassette.key_settings = Some(KeySettings::of(&KeyConfig::default()));
    let plain = cassette_tape::Request::from(&cassette).key(&KeyConfig::default());
    for (test, redacted) in [
        ("tests/test_chat.py::test_b", false),
        (&*format!("tests/test_chat.py::test_b[{SECRET}]"), true),
    ] {
        let keyed = plain.clone().for_test(Some(test));
        cassette.test_scope = TestScope::of(&keyed);
        cassette.meta.test = Some(test.to_owned());
        cassette.key = keyed.key.clone();
        let sealed = Sealed::seal(cassette.clone(), &Redactor::default(), Some(keyed.material));
        assert_eq!(sealed.cassette().meta.request_redacted, redacted, "{test}");
        let text = String::from_utf8_lossy(&sealed.to_document()).into_owned();
        assert!(!text.contains(SECRET), "{text}");
        if !redacted {
            assert_eq!(
                sealed.material(),
                &plain.clone().for_test(Some(test)).material
            );
        }
    }
}

#[test]
fn mcp_documents_get_no_llm_facts_and_key_by_the_mcp_profile() {
    let keyed = McpRequest::new("notes", "tools/call")
        .params(&json!({"name": "search", "arguments": {"q": "x"}}))
        .key();
    let mut cassette = full();
    cassette.key = keyed.key.clone();
    cassette.key_settings = None;
    cassette.sequence = None;
    cassette.test_scope = None;
    cassette.target = "notes".into();
    cassette.request.method = "MCP".into();
    cassette.request.path = "tools/call".into();
    cassette.request.query = String::new();
    cassette.request.body = StoredBody::Json(json!({"name": "search", "arguments": {"q": "x"}}));
    cassette.meta = Meta {
        profile: "mcp".into(),
        ..Meta::default()
    };
    let sealed = Sealed::seal(cassette, &Redactor::default(), None);
    assert_eq!(sealed.cassette().meta.requested_model, None);
    assert!(!sealed.cassette().meta.request_redacted);
}

/// A stream of each provider format with `SECRET` split across two pieces of its text.
fn split_streams() -> Vec<(StreamFormat, String)> {
    let (a, b) = SECRET.split_at(14);
    let chat = |text: &str| {
        format!(
            "data: {}\n\n",
            json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]})
        )
    };
    let openai_chat = format!(
        "{}{}{}data: [DONE]\n\n",
        chat("my key is "),
        chat(a),
        chat(b)
    );
    let responses = |text: &str| {
        format!(
            "event: response.output_text.delta\ndata: {}\n\n",
            json!({"type": "response.output_text.delta", "delta": text})
        )
    };
    let openai_responses = format!("{}{}", responses(a), responses(b));
    let anthropic = |text: &str| {
        format!(
            "event: content_block_delta\ndata: {}\n\n",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
        )
    };
    let anthropic = format!("{}{}", anthropic(a), anthropic(b));
    let gemini = |text: &str| {
        format!(
            "data: {}\n\n",
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]})
        )
    };
    let gemini = format!("{}{}", gemini(a), gemini(b));
    let ollama = |text: &str, done: bool| {
        format!(
            "{}\n",
            json!({"model": "llama3", "message": {"role": "assistant", "content": text}, "done": done})
        )
    };
    let ollama = format!(
        "{}{}{}",
        ollama(a, false),
        ollama(b, false),
        ollama("", true)
    );
    vec![
        (StreamFormat::OpenaiChat, openai_chat),
        (StreamFormat::OpenaiResponses, openai_responses),
        (StreamFormat::AnthropicMessages, anthropic),
        (StreamFormat::GeminiSse, gemini),
        (StreamFormat::OllamaNdjson, ollama),
    ]
}

/// The events of a stream as exact replay keeps them (the recorder's own framing pass).
fn exact_events(format: StreamFormat, stream: &str) -> Vec<Value> {
    let mut framing = Assembler::new(format.framing());
    framing.push(stream.as_bytes());
    match framing.finish().expect("frames") {
        Value::Object(mut map) => match map.remove("events") {
            Some(Value::Array(events)) => events,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

fn streamed(format: StreamFormat, events: Vec<Value>) -> Cassette {
    let mut cassette = full();
    cassette.sequence = None;
    cassette.test_scope = None;
    cassette.response.body = StoredBody::Json(json!({"choices": []}));
    cassette.response.stream = Some(format.name().to_owned());
    cassette.response.events = Some(events);
    cassette.meta.profile = Profile::OpenaiChat.to_string();
    cassette
}

#[test]
fn a_secret_split_across_exact_stream_events_is_redacted_for_every_provider_format() {
    let (first_piece, _) = SECRET.split_at(14);
    for (format, stream) in split_streams() {
        let events = exact_events(format, &stream);
        let raw = serde_json::to_string(&events).expect("json");
        assert!(
            !raw.contains(SECRET) && raw.contains(first_piece),
            "{format}: the sample splits the secret: {raw}"
        );
        let unsealed = streamed(format, events);
        // The audit of a store that kept the pieces flags them.
        let findings = audit(&unsealed);
        assert!(
            findings
                .iter()
                .any(|f| f.location.starts_with("response.events[")
                    && f.reason.contains("split across stream events")),
            "{format}: {findings:?}"
        );
        assert!(findings
            .iter()
            .all(|f| !f.to_string().contains(first_piece)));
        let sealed = Sealed::seal(unsealed, &Redactor::default(), None);
        assert!(sealed.redaction().events, "{format}");
        let kept = serde_json::to_string(&sealed.cassette().response.events).expect("json");
        assert!(
            !kept.contains(first_piece) && kept.contains(REDACTED),
            "{format}: a piece of the secret was stored: {kept}"
        );
        // Replayed as sent, the events still make a stream of the provider's format.
        assert!(audit(sealed.cassette()).is_empty(), "{format}");
    }
}
