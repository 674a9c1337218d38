//! The cassette document and what goes into it: the stored request and response, the keying
//! settings, sequence and review facts ([`Cassette`], `docs/cassette-format.md`), the one owned
//! [`Request`] type with its keying view, the header helpers every layer shares, and all of
//! redaction ([`redact`]).
//!
//! A [`Cassette`] is plain data, built by whoever recorded or imported an exchange. It becomes
//! stored bytes only as a [`Sealed`] document: [`Sealed::seal`] redacts every stored field (the
//! events of an exact stream included, with the pass that finds a secret split across events)
//! and derives the review facts from what is stored, and [`Sealed::to_document`] is the only
//! serialization for storage. `cassette verify`'s audit ([`audit::audit`]) redacts a copy of a
//! stored document field by field as sealing does, and reports what changed, so what is
//! checked is what is done.
//!
//! # Architecture invariant
//!
//! This crate is pure: no IO, no async runtime, no clock, no environment. It depends on the two
//! other pure crates (`cassette-keying`, `cassette-wire`) and data crates only, so the compiler
//! keeps it so; timestamps, tool versions and latencies are handed in by the recorder.

#![deny(missing_docs)]

pub mod audit;
pub mod document;
mod error;
pub mod headers;
pub mod mcp;
mod order;
pub mod redact;
mod request;
mod seal;

pub use document::{
    Cassette, KeySettings, Meta, Sequence, StoredBody, StoredRequest, StoredResponse, TestScope,
    UpstreamFailure,
};
pub use error::{Error, Result};
pub use request::{model_in_path, Request, DEFAULT_TARGET};
pub use seal::{CassetteRedaction, Sealed};
