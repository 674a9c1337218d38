//! Placeholder until the keying benchmark lands.
fn main() {}
