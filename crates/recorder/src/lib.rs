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
//!
//! The recorder knows no command line: its messages name no flag or environment variable (the
//! CLI adds that advice), and its errors say what to change in the recorder's own terms.
//!
//! # Where things are
//!
//! [`Request`] (`request`) is the one owned request type; the engine (`engine/`) answers it
//! through [`Recorder`] with a [`Response`] (`response`), replaying a [`Cassette`]
//! (`cassette`) or recording one (`engine/recording.rs`) with [`redact`] and [`stream`]
//! applied; [`miss`] explains what replay could not answer; [`proxy`] serves all of it over
//! HTTP.

#![deny(missing_docs)]

pub mod cassette;
pub mod config;
mod engine;
mod error;
mod hit_cache;
pub mod mcp;
pub mod miss;
mod mode;
pub mod proxy;
pub mod redact;
mod request;
mod response;
pub mod stream;
mod upstream;

pub use cassette::Cassette;
pub use config::{ErrorRecording, RecorderConfig, Repeats, Route, StreamReplay};
pub use engine::{Exchange, ImportWrite, Recorder, RecordingFailure, Stats};
pub use error::{BoxError, Error, Result, Setting};
pub use hit_cache::HitCacheStats;
pub use miss::Miss;
pub use mode::Mode;
pub use request::Request;
pub use response::{BodyStream, Outcome, Response, ResponseBody, Source};
