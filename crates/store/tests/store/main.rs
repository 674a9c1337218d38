//! Integration tests of the store crate against real files, real sled databases, real
//! processes and a real S3-compatible server (SeaweedFS started by `scripts/s3-server.sh`).

mod bad_input;
mod common;
mod concurrency;
mod conformance;
mod crash;
mod damage;

/// Not a test: the entry point of the child processes that the concurrency, crash and lock
/// tests start by re-running this test binary with `CASSETTE_STORE_CHILD` set. Without that
/// variable it returns at once.
#[test]
fn child_process_entry() {
    if let Ok(role) = std::env::var(common::CHILD_ENV) {
        common::run_child(&role);
        std::process::exit(0);
    }
}
