//! Facade over the cassette crates; its `tests/` folder holds the end-to-end suite of the whole tool.
pub use cassette_keying as keying;
pub use cassette_recorder as recorder;
pub use cassette_store as store;
