//! Request files read from disk, for `cassette key --request` and `cassette explain`: the
//! format (one HTTP request written down as JSON) is `cassette_grade::request_file`'s.

use anyhow::Context;
use cassette_grade::request_file::parse;
use cassette_recorder::Request;
use std::path::Path;

/// Reads and parses the request file at `path`. Errors name the file.
pub fn load(path: &Path) -> anyhow::Result<Request> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading request file {}", path.display()))?;
    parse(&text).with_context(|| format!("in request file {}", path.display()))
}
