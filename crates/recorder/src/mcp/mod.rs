//! Record and replay of MCP tool servers: the same three rules as for LLM APIs (replay is
//! free, a miss fails loudly, the key is explainable and versioned) for the JSON-RPC requests
//! an agent sends its tools. See `docs/mcp.md`.
//!
//! * [`McpRecorder`] keys requests with the `mcp` profile of the key contract
//!   ([`cassette_keying::McpRequest`]), answers them from the store, stores answers as cassette
//!   documents and explains misses, through a [`Recorder`](crate::Recorder)'s store, mode,
//!   redaction rules, counters and usage log.
//! * [`stdio::serve`] is the stdio transport (`cassette mcp -- COMMAND`).
//! * Streamable HTTP servers are recorded through the proxy on routes named in
//!   [`RecorderConfig::mcp_routes`](crate::RecorderConfig::mcp_routes) (the `http` module).
//!
//! An MCP cassette is an ordinary cassette document: `target` is the server's identity,
//! `request.method` is `MCP` and `request.path` the JSON-RPC method, `request.body` the params,
//! `response.body` the answer as JSON-RPC messages (`{"notifications": [...], "response":
//! {...}}`) and `meta.profile` is `mcp`.
//!
//! # Architecture invariant
//!
//! In replay mode no server is ever started and no connection is opened: the stdio relay
//! starts a server only in `record`, `off` and (on a miss) `auto`.

mod engine;
pub(crate) mod http;
mod lines;
pub mod message;
pub mod stdio;

pub(crate) use engine::keyed_stored_request;
pub use engine::{
    is_mcp_cassette, McpCall, McpMiss, McpRecorder, MissHook, Persistence, Recording, Replayed,
    Transcript, MCP_METHOD, MCP_PROFILE, SSE_STREAM,
};
