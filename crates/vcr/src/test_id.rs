//! The test a pytest-recording tape belongs to, from where pytest-recording keeps it.

use std::path::{Component, Path};

/// The pytest node id of the test pytest-recording recorded a tape for, from the tape's path
/// relative to the suite's root: `DIR/cassettes/MODULE/NAME.yaml` belongs to
/// `DIR/MODULE.py::NAME` (`Class.test` for a method, `Class::test` in the node id). `None` for
/// a tape kept elsewhere.
pub fn test_id(path: &Path) -> Option<String> {
    let parts: Vec<&str> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => part.to_str(),
            _ => None,
        })
        .collect();
    let [dir @ .., cassettes, module, file] = parts.as_slice() else {
        return None;
    };
    if *cassettes != "cassettes" {
        return None;
    }
    let name = file
        .strip_suffix(".yaml")
        .or_else(|| file.strip_suffix(".yml"))?;
    // Only the part before a parameter id names a class: `test_x[1.5]` has none.
    let bracket = name.find('[').unwrap_or(name.len());
    let name = match name[..bracket].split_once('.') {
        Some((class, _)) => format!("{class}::{}", &name[class.len() + 1..]),
        None => name.to_owned(),
    };
    let mut file = dir.join("/");
    if !file.is_empty() {
        file.push('/');
    }
    Some(format!("{file}{module}.py::{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_ids_follow_pytest_recordings_layout() {
        let id = |p: &str| test_id(Path::new(p));
        assert_eq!(
            id("tests/cassettes/test_chat/test_hello.yaml").as_deref(),
            Some("tests/test_chat.py::test_hello")
        );
        assert_eq!(
            id("tests/models/cassettes/test_openai/TestChat.test_stream[gpt-4o].yaml").as_deref(),
            Some("tests/models/test_openai.py::TestChat::test_stream[gpt-4o]")
        );
        assert_eq!(
            id("cassettes/test_x/test_t[1.5].yaml").as_deref(),
            Some("test_x.py::test_t[1.5]")
        );
        assert_eq!(id("tapes/test_chat.yaml"), None);
    }
}
