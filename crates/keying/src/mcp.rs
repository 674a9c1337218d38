//! The `mcp` profile of the key contract: JSON-RPC requests to MCP tool servers.
//!
//! An MCP request is keyed by the server's identity, the JSON-RPC method and the canonical
//! `params`, without the values that differ between two sessions asking the same question:
//! the JSON-RPC `id` (never an input here), `_meta.progressToken`, the client's name and version
//! and trace context. See `docs/keying.md`, "Profile `mcp`".
//!
//! This profile is part of key contract version [`KEY_VERSION`]: it was
//! added without changing any key of the HTTP profiles.

use crate::{sha256_hex, to_canonical_string, Key, Keyed, Profile, KEY_VERSION};
use serde_json::{Map, Value};

/// Members of `params._meta` left out of the key. They are chosen per session or per request
/// by the client or its tracing, never part of the question: a progress token is a fresh
/// number per call, client info names the SDK build, trace context is random per call.
pub const MCP_VOLATILE_META: &[&str] = &[
    "progressToken",
    "io.modelcontextprotocol/clientInfo",
    "traceparent",
    "tracestate",
    "baggage",
];

/// Members of `initialize` params left out of the key: the client's name and version, which
/// change with every SDK upgrade and never change what a server answers.
pub const MCP_VOLATILE_INITIALIZE: &[&str] = &["clientInfo"];

/// An MCP JSON-RPC request as the key contract sees it. Borrowed, so keying copies only the
/// params it canonicalizes.
#[derive(Debug, Clone, Copy)]
pub struct McpRequest<'a> {
    /// The server's identity: the name it was given, else the file name of its command.
    pub server: &'a str,
    /// The JSON-RPC method, such as `tools/call`.
    pub method: &'a str,
    /// The JSON-RPC `params`, when the request has them.
    pub params: Option<&'a Value>,
}

impl<'a> McpRequest<'a> {
    /// A request without params.
    pub fn new(server: &'a str, method: &'a str) -> Self {
        McpRequest {
            server,
            method,
            params: None,
        }
    }

    /// Sets the params.
    pub fn params(mut self, params: &'a Value) -> Self {
        self.params = Some(params);
        self
    }

    /// Computes the key of this request.
    pub fn key(&self) -> Keyed {
        let mut material = Map::new();
        material.insert("v".into(), Value::from(KEY_VERSION));
        material.insert("profile".into(), Value::from(Profile::Mcp.as_str()));
        material.insert("server".into(), Value::from(self.server));
        material.insert("method".into(), Value::from(self.method));
        material.insert("params".into(), canonical_params(self.method, self.params));
        let material = Value::Object(material);
        let canonical = to_canonical_string(&material);
        Keyed {
            key: Key(sha256_hex(canonical.as_bytes())),
            profile: Profile::Mcp,
            material,
            canonical,
            system_sha256: None,
            // A JSON-RPC request asks for no HTTP stream.
            streaming: crate::Streaming::default(),
            // The params are JSON by construction.
            body: crate::BodyKind::Json,
        }
    }
}

/// The params as they enter the key: absent or `null` params are `{}`; an object loses the
/// volatile `_meta` members (and `_meta` itself when nothing is left of it) and, for
/// `initialize`, `clientInfo`; anything else is kept as it is.
pub fn canonical_params(method: &str, params: Option<&Value>) -> Value {
    let map = match params {
        None | Some(Value::Null) => return Value::Object(Map::new()),
        Some(Value::Object(map)) => map,
        Some(other) => return other.clone(),
    };
    let mut out = Map::new();
    for (name, value) in map {
        if method == "initialize" && MCP_VOLATILE_INITIALIZE.contains(&name.as_str()) {
            continue;
        }
        if name == "_meta" {
            if let Value::Object(meta) = value {
                let kept: Map<String, Value> = meta
                    .iter()
                    .filter(|(k, _)| !MCP_VOLATILE_META.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if !kept.is_empty() {
                    out.insert(name.clone(), Value::Object(kept));
                }
                continue;
            }
        }
        out.insert(name.clone(), value.clone());
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn params_lose_only_volatile_members() {
        let params = json!({
            "name": "t",
            "_meta": {"progressToken": 7, "io.modelcontextprotocol/logLevel": "info"}
        });
        assert_eq!(
            canonical_params("tools/call", Some(&params)),
            json!({"name": "t", "_meta": {"io.modelcontextprotocol/logLevel": "info"}})
        );
        let only_token = json!({"name": "t", "_meta": {"progressToken": 7}});
        assert_eq!(
            canonical_params("tools/call", Some(&only_token)),
            json!({"name": "t"})
        );
        assert_eq!(canonical_params("tools/list", None), json!({}));
        assert_eq!(canonical_params("x", Some(&json!([1, 2]))), json!([1, 2]));
        let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}});
        assert_eq!(
            canonical_params("initialize", Some(&init)),
            json!({"protocolVersion": "2025-11-25", "capabilities": {}})
        );
        // `clientInfo` is only volatile in `initialize`; elsewhere it is an argument.
        let call = json!({"clientInfo": 1});
        assert_eq!(canonical_params("tools/call", Some(&call)), call);
    }
}
