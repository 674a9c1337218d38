//! How deeply a YAML text nests flow collections (`[[[...`, `{a: {a: ...`), found in one
//! linear pass before the YAML library sees the text: its parser takes time quadratic in that
//! depth (400 KB of brackets took over a minute) before its own recursion limit answers. A
//! vcrpy cassette nests a few levels; the reader refuses anything past [`MAX_DEPTH`].
//!
//! The scan knows just enough YAML to not count brackets that are text: quoted scalars
//! (`'...'` with `''`, `"..."` with `\` escapes, across lines), comments, block scalars
//! (`|`, `>` and the lines indented under them) and plain scalars in block context, where a
//! `[` in `key: see [1]` starts nothing. A bracket opens a flow collection only where a value
//! starts (after `key: `, `- `, `? `, an anchor or tag, or at the start of a line), and inside
//! a flow collection every bracket outside quotes counts.

/// The deepest flow nesting read.
pub const MAX_DEPTH: usize = 64;

/// Where a text nests flow collections more than `limit` deep: the 1-based line and column of
/// the bracket that goes past it.
pub(crate) fn too_deep(text: &str, limit: usize) -> Option<(usize, usize)> {
    #[derive(Clone, Copy, PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let mut depth = 0usize;
    let mut quote = Quote::None;
    // Lines indented more than this belong to a block scalar.
    let mut block_scalar: Option<usize> = None;
    for (number, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start_matches(' ').len();
        if let Some(parent) = block_scalar {
            if line.trim().is_empty() || indent > parent {
                continue;
            }
            block_scalar = None;
        }
        let bytes = line.as_bytes();
        // Where a value (or, in a flow collection, a token) may start.
        let mut value_start = quote == Quote::None;
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            let next = bytes.get(i + 1).copied();
            let spaced = |c: Option<u8>| c.is_none_or(|c| c == b' ' || c == b'\t');
            match quote {
                Quote::Double => {
                    match b {
                        b'\\' => i += 1,
                        b'"' => quote = Quote::None,
                        _ => {}
                    }
                    i += 1;
                    continue;
                }
                Quote::Single => {
                    if b == b'\'' {
                        if next == Some(b'\'') {
                            i += 1;
                        } else {
                            quote = Quote::None;
                        }
                    }
                    i += 1;
                    continue;
                }
                Quote::None => {}
            }
            let after_space = i == 0 || matches!(bytes[i - 1], b' ' | b'\t');
            match b {
                b'#' if after_space => break,
                b' ' | b'\t' => {}
                b'[' | b'{' if depth > 0 || value_start => {
                    depth += 1;
                    if depth > limit {
                        return Some((number + 1, i + 1));
                    }
                    value_start = true;
                }
                b']' | b'}' if depth > 0 => {
                    depth -= 1;
                    value_start = false;
                }
                b',' if depth > 0 => value_start = true,
                b'"' if value_start => quote = Quote::Double,
                b'\'' if value_start => quote = Quote::Single,
                b'|' | b'>' if value_start && depth == 0 => {
                    block_scalar = Some(indent);
                    break;
                }
                b':' if spaced(next) || depth > 0 => value_start = true,
                b'-' | b'?' if value_start && spaced(next) => {}
                b'&' | b'!' if value_start => {
                    // An anchor or tag: the value starts after it.
                    while i + 1 < bytes.len() && !matches!(bytes[i + 1], b' ' | b'\t') {
                        i += 1;
                    }
                }
                _ => value_start = false,
            }
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_flow_collections_are_found_where_they_go_too_deep() {
        let deep = format!("a: {}{}\n", "[".repeat(100), "]".repeat(100));
        assert_eq!(too_deep(&deep, 64), Some((1, 4 + 64)));
        let maps = format!("x: 1\nb: {}1{}\n", "{a: ".repeat(70), "}".repeat(70));
        assert_eq!(too_deep(&maps, 64), Some((2, 4 + 64 * 4)));
        let mixed = format!("- {}\n", "[{k: ".repeat(40));
        assert!(too_deep(&mixed, 64).is_some());
        // Split over lines.
        let lines = "a:\n".to_owned() + &"  [\n".repeat(80);
        assert_eq!(too_deep(&lines, 64).map(|(l, _)| l), Some(66));
    }

    #[test]
    fn brackets_that_are_text_are_not_counted() {
        let many = "[".repeat(200);
        for text in [
            format!("a: '{many}'\n"),
            format!("a: \"{many} \\\" {many}\"\n"),
            format!("a: 'it''s {many}'\n"),
            format!("a: |\n  {many}\n  more {many}\n\nb: 1\n"),
            format!("a: >-\n    {many}\nb: c\n"),
            format!("a: see {many}\n"),
            format!("a: 1 # {many}\n"),
            format!("- x {many}\n- \"multi\n  line {many}\"\n"),
            format!("a: [b, 'c{many}', \"{many}\"]\n"),
            format!("a: !!binary |\n  {many}\n"),
            format!("body:\n  string: '{{\"model\": \"{many}\"}}'\n"),
        ] {
            assert_eq!(too_deep(&text, 64), None, "{text}");
        }
        // A block scalar ends where the indentation comes back.
        let text = format!("a: |\n  {many}\nb: {}\n", "[".repeat(70));
        assert_eq!(too_deep(&text, 64), Some((3, 4 + 64)));
    }

    #[test]
    fn a_vcrpy_cassette_is_shallow() {
        let cassette = "interactions:\n- request:\n    body: '{\"messages\": [{\"role\": \"user\"}]}'\n    headers:\n      accept:\n      - application/json\n    method: POST\n    uri: https://api.openai.com/v1/chat/completions\n  response:\n    body:\n      string: !!binary |\n        H4sIAAAAAAAAA6pWKkktLlGyUlAqS8wpTVWqBQAAAP//\n    headers: {}\n    status:\n      code: 200\n      message: OK\nversion: 1\n";
        assert_eq!(too_deep(cassette, 2), None);
    }
}
