//! `KeyConfig`: the `ignore` JSON paths (an addition to key v1 that changes nothing when empty)
//! and the settings fingerprint recorders store beside the key version.

use cassette_keying::{JsonPath, KeyConfig, Request, DEFAULT_KEY_CONFIG_FINGERPRINT, KEY_VERSION};
use serde_json::{json, Value};

const CHAT: &str = "/v1/chat/completions";
const GEMINI: &str = "/v1beta/models/gemini-2.0-flash:generateContent";

fn ignoring(paths: &[&str]) -> KeyConfig {
    KeyConfig {
        ignore: paths.iter().map(|p| JsonPath::parse(p).unwrap()).collect(),
        ..KeyConfig::default()
    }
}

fn key(path: &str, body: &Value, config: &KeyConfig) -> String {
    Request::new("POST", path)
        .body(body.to_string().as_bytes())
        .key(config)
        .key
        .to_string()
}

/// A Gemini tool loop's second turn, with the client-generated function call id pydantic-ai
/// sends back (a fresh uuid every run).
fn second_turn(call_id: &str, city: &str) -> Value {
    json!({
        "contents": [
            {"role": "user", "parts": [{"text": "Weather in Rome?"}]},
            {"role": "model", "parts": [{"functionCall": {"id": call_id, "name": "weather", "args": {"city": city}}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": call_id, "name": "weather", "response": {"t": 21}}}]}
        ]
    })
}

#[test]
fn ignored_paths_leave_client_ids_out_of_the_key() {
    let config = ignoring(&[
        "$.contents[*].parts[*].functionCall.id",
        "$.contents[*].parts[*].functionResponse.id",
    ]);
    let a = key(GEMINI, &second_turn("pyd_ai_1f2e", "Rome"), &config);
    let b = key(GEMINI, &second_turn("pyd_ai_9c0d", "Rome"), &config);
    assert_eq!(a, b);
    // Everything else still counts.
    let c = key(GEMINI, &second_turn("pyd_ai_9c0d", "Paris"), &config);
    assert_ne!(a, c);
    // Without the setting, the ids count.
    assert_ne!(
        key(
            GEMINI,
            &second_turn("pyd_ai_1f2e", "Rome"),
            &KeyConfig::default()
        ),
        key(
            GEMINI,
            &second_turn("pyd_ai_9c0d", "Rome"),
            &KeyConfig::default()
        ),
    );
}

#[test]
fn ignored_values_are_absent_from_the_material() {
    let config = ignoring(&["$..id"]);
    let keyed = Request::new("POST", GEMINI)
        .body(second_turn("x", "Rome").to_string().as_bytes())
        .key(&config);
    assert!(!keyed.canonical.contains("\"id\""), "{}", keyed.canonical);
    assert_eq!(keyed.material["v"], json!(KEY_VERSION));
}

#[test]
fn ignore_applies_after_the_defaults_of_step_2() {
    // `temperature` is merged in by step 2; ignoring it makes every temperature alike.
    let config = ignoring(&["$.temperature"]);
    let body = |t: Value| json!({"model": "m", "messages": [], "temperature": t});
    assert_eq!(
        key(CHAT, &body(json!(0)), &config),
        key(CHAT, &body(json!(0.7)), &config)
    );
    assert_eq!(
        key(CHAT, &body(json!(0)), &config),
        key(CHAT, &json!({"model": "m", "messages": []}), &config)
    );
}

#[test]
fn ignore_changes_the_system_hash_only_through_the_body() {
    let config = ignoring(&["$.messages[0]"]);
    let keyed = Request::new("POST", CHAT)
        .body(
            json!({"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]})
                .to_string()
                .as_bytes(),
        )
        .key(&config);
    // The system message was removed before step 3, so there is no system text.
    assert_eq!(keyed.system_sha256, None);
}

#[test]
fn an_empty_ignore_list_and_a_path_that_matches_nothing_change_no_key() {
    let body = second_turn("id-1", "Rome");
    let plain = key(GEMINI, &body, &KeyConfig::default());
    assert_eq!(key(GEMINI, &body, &ignoring(&[])), plain);
    assert_eq!(key(GEMINI, &body, &ignoring(&["$.nothing.here"])), plain);
    // The public vector 1 under a configuration whose path matches nothing.
    let vector1 = r#"{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse.  \nAnswer briefly.\t"},{"role":"user","content":"Where is my refund?"}],"stream":true,"user":"u-42"}"#;
    let keyed = Request::new("POST", CHAT)
        .body(vector1.as_bytes())
        .key(&ignoring(&["$.tools[*].id"]));
    assert_eq!(
        keyed.key.as_str(),
        "0137a00afad39e5e38a42ac95d5ed2eb013790cc49f8a19be09d30278b70d1db"
    );
}

#[test]
fn raw_bodies_are_not_touched() {
    let config = ignoring(&["$..id"]);
    let keyed = Request::new("POST", "/upload")
        .body(b"\xff\x00id")
        .key(&config);
    let plain = Request::new("POST", "/upload")
        .body(b"\xff\x00id")
        .key(&KeyConfig::default());
    assert_eq!(keyed.key, plain.key);
}

#[test]
fn the_default_fingerprint_is_pinned() {
    assert_eq!(
        KeyConfig::default().fingerprint(),
        DEFAULT_KEY_CONFIG_FINGERPRINT
    );
    assert_eq!(DEFAULT_KEY_CONFIG_FINGERPRINT, "070e95e06023");
    assert_eq!(ignoring(&[]).fingerprint(), DEFAULT_KEY_CONFIG_FINGERPRINT);
}

#[test]
fn the_fingerprint_ignores_order_repeats_and_spelling() {
    let a = KeyConfig {
        extra_volatile: vec!["seed".into(), "x".into()],
        keep_volatile: vec!["user".into()],
        ignore: vec![JsonPath::parse("$.a[*].id").unwrap()],
    };
    let b = KeyConfig {
        extra_volatile: vec!["x".into(), "seed".into(), "seed".into()],
        keep_volatile: vec!["user".into()],
        ignore: vec![JsonPath::parse("$['a'].*['id']").unwrap()],
    };
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert_eq!(a.fingerprint().len(), 12);
    // Each setting counts.
    for changed in [
        KeyConfig {
            extra_volatile: vec!["seed".into()],
            ..a.clone()
        },
        KeyConfig {
            keep_volatile: vec![],
            ..a.clone()
        },
        KeyConfig {
            ignore: vec![],
            ..a.clone()
        },
    ] {
        assert_ne!(changed.fingerprint(), a.fingerprint(), "{changed:?}");
    }
    // A name moved from one list to another is a different configuration.
    let moved = KeyConfig {
        extra_volatile: vec!["user".into()],
        keep_volatile: vec!["seed".into(), "x".into()],
        ignore: a.ignore.clone(),
    };
    assert_ne!(moved.fingerprint(), a.fingerprint());
}

#[test]
fn differences_name_each_setting_recorded_value_first() {
    let recorded = KeyConfig {
        extra_volatile: vec!["seed".into()],
        ..KeyConfig::default()
    }
    .canonical();
    let now = KeyConfig::default().canonical();
    assert_eq!(recorded.differences(&now), ["volatile [seed]; now []"]);
    assert!(now.differences(&now).is_empty());
    let ignore = ignoring(&["$..id", "$.b"]).canonical();
    assert_eq!(ignore.ignore, ["$..id", "$.b"]);
    assert_eq!(now.differences(&ignore), ["ignore []; now [$..id, $.b]"]);
}
