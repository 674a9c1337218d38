//! Grading LLM answers: what an answer is ([`answer`]), the graders a suite case or a test
//! names ([`graders`]: a registry of deterministic graders, and the judge graders), the pure
//! half of LLM-as-judge ([`judge`]: its requests, its prompt, its votes and their tally), the
//! one grading function ([`grading`]), suites of cases ([`suite`], [`request_file`]), what a
//! run reports per case ([`result`]) and JUnit reports ([`junit`]).
//!
//! Adding a grader is a change inside this crate: a grader and its builder in the registry,
//! tested with data. The judge's requests are sent by whoever implements [`judge::Ask`]: the
//! `cassette` binary sends them through its recorder, so a verdict is recorded once and
//! replayed like any other tape; tests answer them with canned replies.
//!
//! # Architecture invariant
//!
//! This crate is pure: no IO, no async runtime, no clock, no environment. It depends on the
//! three other pure crates (`cassette-keying`, `cassette-wire`, `cassette-tape`) and data
//! crates only, so the compiler keeps it so: a suite is handed in as text, a judge vote's reply
//! comes back through [`judge::Ask`], and timings are the caller's. The grading functions are
//! `async` only so that [`judge::Ask`] can be; they await nothing else. The one piece of
//! process-wide state is a cache of compiled `regex` patterns, which changes no result.

#![deny(missing_docs)]

pub mod answer;
mod error;
pub mod graders;
pub mod grading;
pub mod judge;
pub mod junit;
pub mod request_file;
pub mod result;
pub mod suite;

pub use error::{BadLine, Error, Result};
