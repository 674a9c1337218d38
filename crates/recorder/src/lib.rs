//! Record and replay of LLM API calls: modes, the cassette document, redaction, streaming and
//! the HTTP proxy.
//!
//! # Architecture invariant
//!
//! The recorder is the only code path that may open a connection to an upstream, and it does so
//! only in `record`, `auto` (on a miss) and `off` modes. Replay never touches the network.

#![deny(missing_docs)]

pub mod redact;
pub mod stream;
