//! A fake LLM upstream on loopback, for recording the example suite and for the suite-runner
//! benchmark without a real provider: OpenAI-compatible chat, Anthropic messages and Ollama
//! chat, answered deterministically from the prompt (see `tests/common/fake_llm.rs`, which the
//! end-to-end tests use too).
//!
//! ```text
//! cargo run --example fake_upstream -- [PORT]     # prints its base URL, serves until killed
//! ```

#[path = "../tests/common/fake_llm.rs"]
mod fake_llm;

use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = match std::env::args().nth(1) {
        Some(port) => port
            .parse()
            .map_err(|e| format!("the port must be a number, not {port:?}: {e}"))?,
        None => 0,
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let fake = fake_llm::FakeLlm::start_on(addr, "")
        .map_err(|e| format!("cannot start the fake upstream on {addr}: {e}"))?;
    println!("{}", fake.url);
    std::io::stdout().flush()?;
    // Serve until the process is killed; the fake's threads do the work.
    loop {
        std::thread::park();
    }
}
