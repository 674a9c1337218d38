//! Record and replay of LLM API calls: modes, the cassette document, redaction, streaming and
//! the HTTP proxy.
//!
//! Build a [`Recorder`] from a store and a [`RecorderConfig`], then hand it requests with
//! [`Recorder::handle`]. The mode decides what happens:
//!
//! | mode     | hit               | miss                                   |
//! |----------|-------------------|----------------------------------------|
//! | `replay` | replay the tape   | [`Error::Miss`], never the network     |
//! | `auto`   | replay the tape   | call the upstream, store (create-only) |
//! | `record` | call the upstream, store (overwrite)                     ||
//! | `off`    | call the upstream, store nothing                         ||
//!
//! # Architecture invariant
//!
//! The recorder is the only code path that may open a connection to an upstream (the
//! `upstream` module), and it does so only in `record`, `auto` (on a miss) and `off` modes. A
//! replay-mode recorder does not even own an HTTP client.

#![deny(missing_docs)]

pub mod cassette;
pub mod config;
mod error;
pub mod mcp;
pub mod miss;
pub mod mode;
pub mod proxy;
mod recorder;
pub mod redact;
pub mod stream;
pub mod upstream;

pub use cassette::Cassette;
pub use config::{ErrorRecording, RecorderConfig, Route};
pub use error::{Error, Result};
pub use miss::Miss;
pub use mode::Mode;
pub use recorder::{
    BodyStream, IncomingRequest, Outcome, Recorder, Response, ResponseBody, Source, Stats,
};
