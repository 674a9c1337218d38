//! Golden tests for the `mcp` profile of key v1: pinned canonical bytes and keys, then one test
//! per value that must leave the key alone and one per input that must change it.
//!
//! A failure here means the key contract changed. Either the change is a bug, or it is
//! deliberate and `KEY_VERSION` must be bumped together with these expectations.

use cassette_keying::mcp::{canonical_params, MCP_VOLATILE_META};
use cassette_keying::{diff, sha256_hex, McpRequest, KEY_VERSION};
use serde_json::{json, Value};

const META_2026: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"mcp","version":"0.1.0"},"io.modelcontextprotocol/clientCapabilities":{}}"#;

fn key(server: &str, method: &str, params: Option<Value>) -> String {
    let request = McpRequest::new(server, method);
    match &params {
        Some(p) => request.params(p).key().key.as_str().to_owned(),
        None => request.key().key.as_str().to_owned(),
    }
}

fn call(arguments: Value) -> Value {
    json!({"name": "next_number", "arguments": arguments})
}

fn call_key(params: Value) -> String {
    key("counter", "tools/call", Some(params))
}

fn initialize(version: &str, capabilities: Value, client_version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "clientInfo": {"name": "mcp", "version": client_version}
    })
}

fn meta_2026() -> Value {
    serde_json::from_str(META_2026).expect("valid JSON")
}

fn with_meta(mut params: Value, meta: Value) -> Value {
    params
        .as_object_mut()
        .expect("test params are objects")
        .insert("_meta".into(), meta);
    params
}

// ---------------------------------------------------------------------------------------------
// Pinned table: request -> canonical bytes -> key.
// ---------------------------------------------------------------------------------------------

struct Golden {
    name: &'static str,
    server: &'static str,
    method: &'static str,
    params: Option<&'static str>,
    canonical: &'static str,
    key: &'static str,
}

const GOLDEN: &[Golden] = &[
    Golden {
        name: "docs vector 3: tools/call",
        server: "counter",
        method: "tools/call",
        params: Some(
            r#"{"name":"next_number","arguments":{"label":"a","step":1.0},"_meta":{"progressToken":7}}"#,
        ),
        canonical: r#"{"method":"tools/call","params":{"arguments":{"label":"a","step":1},"name":"next_number"},"profile":"mcp","server":"counter","v":1}"#,
        key: "0f3ec137c40cb38abe79da04502f659b019ec734799360edb247f8cc63e82292",
    },
    Golden {
        name: "initialize: protocol version and capabilities, no clientInfo",
        server: "counter",
        method: "initialize",
        params: Some(
            r#"{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"mcp","version":"0.1.0"}}"#,
        ),
        canonical: r#"{"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}},"protocolVersion":"2025-11-25"},"profile":"mcp","server":"counter","v":1}"#,
        key: "9a3e262c72a37b32d3a41f67cd4374a389aa1c4343fc7a7ca1523a185f9e6198",
    },
    Golden {
        name: "tools/list without params",
        server: "counter",
        method: "tools/list",
        params: None,
        canonical: r#"{"method":"tools/list","params":{},"profile":"mcp","server":"counter","v":1}"#,
        key: "6c14038d4c0574215b52a23012d6ccc90edf855332da604d5752a87b9cd5b8b4",
    },
    Golden {
        name: "2026-07-28 request: protocol version and capabilities in _meta, client info out",
        server: "counter",
        method: "tools/list",
        params: Some(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"mcp","version":"0.1.0"},"io.modelcontextprotocol/clientCapabilities":{}}}"#,
        ),
        canonical: r#"{"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}},"profile":"mcp","server":"counter","v":1}"#,
        key: "63d89f0891255906239b3d947301b0f01413293fd018926f0ac77fbe42c6c2e9",
    },
    Golden {
        name: "params that are not an object are kept as they are",
        server: "legacy-server",
        method: "sum",
        params: Some(r#"[1, 2.50, "x"]"#),
        canonical: r#"{"method":"sum","params":[1,2.5,"x"],"profile":"mcp","server":"legacy-server","v":1}"#,
        key: "ca3288bad9a755153d60e0e01270f1e0638b8d6f7e0f079f5cfdc9f6824b0a79",
    },
];

#[test]
fn golden_table_pins_canonical_bytes_and_keys() {
    for golden in GOLDEN {
        let params: Option<Value> = golden
            .params
            .map(|p| serde_json::from_str(p).expect("golden params are JSON"));
        let request = McpRequest::new(golden.server, golden.method);
        let keyed = match &params {
            Some(p) => request.params(p).key(),
            None => request.key(),
        };
        assert_eq!(keyed.canonical, golden.canonical, "{}", golden.name);
        assert_eq!(
            keyed.key.as_str(),
            sha256_hex(golden.canonical.as_bytes()),
            "{}: the key is the SHA-256 of the canonical bytes",
            golden.name
        );
        assert_eq!(keyed.key.as_str(), golden.key, "{}", golden.name);
        assert_eq!(keyed.profile.as_str(), "mcp", "{}", golden.name);
        assert_eq!(keyed.system_sha256, None, "{}", golden.name);
    }
}

#[test]
fn key_version_is_in_the_material() {
    let keyed = McpRequest::new("s", "ping").key();
    assert_eq!(keyed.material["v"], json!(KEY_VERSION));
    assert_eq!(keyed.material["profile"], json!("mcp"));
}

// ---------------------------------------------------------------------------------------------
// Must NOT change the key.
// ---------------------------------------------------------------------------------------------

#[test]
fn progress_token_does_not_matter() {
    let plain = call_key(call(json!({"label": "a"})));
    for token in [json!(1), json!("abc-123"), json!(99999)] {
        let with_token = with_meta(call(json!({"label": "a"})), json!({"progressToken": token}));
        assert_eq!(call_key(with_token), plain, "progressToken {token}");
    }
}

#[test]
fn each_volatile_meta_member_does_not_matter() {
    let plain = call_key(call(json!({"label": "a"})));
    for name in MCP_VOLATILE_META {
        let mut meta = serde_json::Map::new();
        meta.insert((*name).to_owned(), json!("per-session value"));
        let params = with_meta(call(json!({"label": "a"})), Value::Object(meta));
        assert_eq!(call_key(params), plain, "{name}");
    }
}

#[test]
fn an_empty_meta_does_not_matter() {
    assert_eq!(
        call_key(with_meta(call(json!({"label": "a"})), json!({}))),
        call_key(call(json!({"label": "a"})))
    );
}

#[test]
fn client_info_does_not_matter_in_initialize() {
    let base = key(
        "s",
        "initialize",
        Some(initialize("2025-11-25", json!({}), "0.1.0")),
    );
    let upgraded = key(
        "s",
        "initialize",
        Some(initialize("2025-11-25", json!({}), "2.3.0")),
    );
    assert_eq!(base, upgraded);
    let renamed = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "claude-desktop", "version": "9"}});
    assert_eq!(key("s", "initialize", Some(renamed)), base);
}

#[test]
fn client_info_does_not_matter_in_2026_meta() {
    let base = with_meta(call(json!({"label": "a"})), meta_2026());
    let mut other_client = meta_2026();
    other_client["io.modelcontextprotocol/clientInfo"] = json!({"name": "agent", "version": "7.1"});
    assert_eq!(
        call_key(base),
        call_key(with_meta(call(json!({"label": "a"})), other_client))
    );
}

#[test]
fn member_order_whitespace_and_number_spelling_do_not_matter() {
    let a: Value =
        serde_json::from_str(r#"{"name":"next_number","arguments":{"label":"a","n":1}}"#).unwrap();
    let b: Value = serde_json::from_str(
        r#" { "arguments" : { "n" : 1.0e0 , "label" : "a" } , "name" : "next_number" } "#,
    )
    .unwrap();
    assert_eq!(call_key(a), call_key(b));
}

#[test]
fn absent_null_and_empty_params_are_one_key() {
    let absent = key("s", "tools/list", None);
    assert_eq!(key("s", "tools/list", Some(Value::Null)), absent);
    assert_eq!(key("s", "tools/list", Some(json!({}))), absent);
    assert_eq!(
        key(
            "s",
            "tools/list",
            Some(json!({"_meta": {"progressToken": 3}}))
        ),
        absent
    );
}

// ---------------------------------------------------------------------------------------------
// MUST change the key.
// ---------------------------------------------------------------------------------------------

#[test]
fn the_server_changes_the_key() {
    assert_ne!(key("a", "tools/list", None), key("b", "tools/list", None));
    // Names are exact: no case folding, no trimming.
    assert_ne!(key("a", "tools/list", None), key("A", "tools/list", None));
}

#[test]
fn the_method_changes_the_key() {
    assert_ne!(key("s", "tools/list", None), key("s", "prompts/list", None));
    assert_ne!(key("s", "tools/list", None), key("s", "Tools/List", None));
}

#[test]
fn the_tool_name_changes_the_key() {
    let a = call_key(json!({"name": "next_number", "arguments": {}}));
    let b = call_key(json!({"name": "now", "arguments": {}}));
    assert_ne!(a, b);
}

#[test]
fn each_argument_changes_the_key() {
    let base = call_key(call(json!({"label": "a", "step": 1, "tags": ["x"]})));
    for changed in [
        json!({"label": "b", "step": 1, "tags": ["x"]}),
        json!({"label": "a ", "step": 1, "tags": ["x"]}),
        json!({"label": "a", "step": 2, "tags": ["x"]}),
        json!({"label": "a", "step": "1", "tags": ["x"]}),
        json!({"label": "a", "step": 1, "tags": ["x", "y"]}),
        json!({"label": "a", "step": 1}),
        json!({"label": "a", "step": 1, "tags": ["x"], "extra": null}),
    ] {
        assert_ne!(call_key(call(changed.clone())), base, "{changed}");
    }
}

#[test]
fn the_protocol_version_changes_the_initialize_key() {
    assert_ne!(
        key(
            "s",
            "initialize",
            Some(initialize("2025-06-18", json!({}), "1"))
        ),
        key(
            "s",
            "initialize",
            Some(initialize("2025-11-25", json!({}), "1"))
        )
    );
}

#[test]
fn client_capabilities_change_the_initialize_key() {
    assert_ne!(
        key(
            "s",
            "initialize",
            Some(initialize("2025-11-25", json!({}), "1"))
        ),
        key(
            "s",
            "initialize",
            Some(initialize("2025-11-25", json!({"sampling": {}}), "1"))
        )
    );
}

#[test]
fn protocol_version_and_capabilities_in_2026_meta_change_the_key() {
    let base = call_key(with_meta(call(json!({})), meta_2026()));
    let mut newer = meta_2026();
    newer["io.modelcontextprotocol/protocolVersion"] = json!("2027-01-01");
    assert_ne!(call_key(with_meta(call(json!({})), newer)), base);
    let mut capable = meta_2026();
    capable["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    assert_ne!(call_key(with_meta(call(json!({})), capable)), base);
}

#[test]
fn other_meta_members_change_the_key() {
    let base = call_key(call(json!({})));
    // A log level opt-in changes which notifications the server sends.
    let opted_in = with_meta(
        call(json!({})),
        json!({"io.modelcontextprotocol/logLevel": "debug"}),
    );
    assert_ne!(call_key(opted_in), base);
    let unknown = with_meta(call(json!({})), json!({"com.example/tenant": "a"}));
    assert_ne!(call_key(unknown), base);
}

#[test]
fn a_pagination_cursor_changes_the_key() {
    assert_ne!(
        key("s", "tools/list", Some(json!({"cursor": "page-2"}))),
        key("s", "tools/list", None)
    );
}

// ---------------------------------------------------------------------------------------------
// Explanations.
// ---------------------------------------------------------------------------------------------

#[test]
fn diff_names_the_changed_argument() {
    let old = McpRequest::new("counter", "tools/call")
        .params(&call(json!({"label": "a"})))
        .key()
        .material;
    let new_params = call(json!({"label": "z"}));
    let new = McpRequest::new("counter", "tools/call")
        .params(&new_params)
        .key()
        .material;
    let shown: Vec<String> = diff(&old, &new).iter().map(|d| d.to_string()).collect();
    assert_eq!(shown, ["params.arguments.label: \"a\" -> \"z\""]);
}

#[test]
fn canonical_params_are_public_for_tools_that_explain_keys() {
    assert_eq!(
        canonical_params("tools/call", Some(&json!({"_meta": {"progressToken": 1}}))),
        json!({})
    );
}

#[test]
fn mcp_requests_number_their_occurrences_like_http_ones() {
    let params = json!({"name": "next_number", "arguments": {"label": "a", "step": 1.0}, "_meta": {"progressToken": 7}});
    let base = McpRequest::new("counter", "tools/call")
        .params(&params)
        .key();
    assert_eq!(base.clone().occurrence(1).key, base.key);
    let second = base.clone().occurrence(2);
    assert_eq!(
        second.canonical,
        r#"{"method":"tools/call","occurrence":2,"params":{"arguments":{"label":"a","step":1},"name":"next_number"},"profile":"mcp","server":"counter","v":1}"#
    );
    assert_ne!(second.key, base.key);
    assert_eq!(second.occurrence_number(), 2);
}
