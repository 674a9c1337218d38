//! An MCP exchange as a cassette document: `target` is the server's identity,
//! `request.method` is [`MCP_METHOD`] and `request.path` the JSON-RPC method, `request.body`
//! the params, `response.body` the answer as JSON-RPC messages (`{"notifications": [...],
//! "response": {...}}`) and `meta.profile` is [`MCP_PROFILE`]. Keyed by keying's `mcp`
//! profile ([`cassette_keying::McpRequest`]); [`Cassette::is_mcp`](crate::Cassette::is_mcp)
//! tells such a document.

/// The `meta.profile` of MCP cassettes.
pub const MCP_PROFILE: &str = "mcp";

/// The `request.method` of MCP cassettes: the JSON-RPC method is stored as the `path`.
pub const MCP_METHOD: &str = "MCP";

/// The `response.stream` of an MCP answer that came as server-sent events.
pub const SSE_STREAM: &str = "mcp.sse";
