//! Record and replay of LLM API calls: the IO around the pure crates. Modes, upstream calls,
//! the HTTP proxy, MCP relays and miss explanations; the cassette document and redaction live in
//! `cassette-tape`, the provider stream formats in `cassette-wire`.
//!
//! # What is re-exported
//!
//! The crate re-exports the types of `cassette-tape` that its own public signatures take or
//! return ([`Request`] for [`Recorder::handle`], [`Cassette`] and [`Sealed`], the
//! [`RedactionRules`] of a [`RecorderConfig`], the [`Redactor`] of [`Recorder::redactor`]), as
//! object_store re-exports what its API needs: an embedder that records and replays needs no
//! second dependency, and cannot end up with a second, mismatched version of those types. It
//! does not re-export the crates themselves: whoever reads cassette documents, redacts or
//! assembles streams on their own names `cassette-tape` or `cassette-wire`, so each crate's
//! public surface is its own and one change to tape is not also a change to this crate's API.
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
//! [`Recorder::handle`] (`service.rs`) sends a request to the MCP relay when its route is an MCP
//! route ([`mcp`]), to the engine (`engine/`) otherwise. The engine answers a [`Request`] with a
//! [`Response`] (`response`), replaying a [`Cassette`] or recording one (`engine/recording.rs`,
//! streams assembled by `cassette-wire`); every recording, HTTP, MCP or imported, is written by one
//! path (`engine/write.rs`) as a [`Sealed`] document. What a mode does on a hit and on a miss is
//! decided in one place ([`Mode::on_hit`], [`Mode::on_miss`]); [`miss`] explains what replay
//! could not answer, through one nearest-recording index the engine owns and lends to MCP;
//! [`proxy`] serves all of it over HTTP.

#![deny(missing_docs)]

pub mod config;
mod engine;
mod error;
mod hit_cache;
pub mod mcp;
pub mod miss;
mod mode;
pub mod proxy;
mod response;
mod scope;
mod service;
mod tapes;
mod upstream;

pub use cassette_tape::redact::{RedactionRules, Redactor};
pub use cassette_tape::{Cassette, Request, Sealed};
pub use config::{
    Answers, Downloads, ErrorRecording, RecorderConfig, Repeats, Route, Sharing, StreamReplay,
};
pub use engine::{
    download_key, is_download_method, Download, Exchange, Imported, Recorder, RecordingFailure,
    Rekeyed, Stats, Stored,
};
pub use error::{BoxError, Error, Result, Setting};
pub use hit_cache::HitCacheStats;
pub use miss::Miss;
pub use mode::{Mode, OnHit, OnMiss, Write};
pub use response::{BodyStream, Outcome, Response, ResponseBody, Source};
pub use scope::{Scope, TapeFilters, TapeSet};
