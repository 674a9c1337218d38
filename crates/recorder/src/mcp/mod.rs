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
//! An MCP cassette is an ordinary cassette document (`cassette_tape::mcp` says how one is laid
//! out), sealed and stored through the recorder's one write path like any other.
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

pub use cassette_tape::mcp::{MCP_METHOD, MCP_PROFILE, SSE_STREAM};
pub use engine::{Answer, McpCall, McpMiss, McpRecorder, MissHook, Recording, Transcript};
