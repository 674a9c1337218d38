//! Multipart bodies keyed by their parts (docs/keying.md, "Multipart bodies"): a
//! `multipart/form-data` body is framed by a boundary the client picks at random for every
//! request, so its raw bytes never key alike twice (audio transcriptions, file uploads). A
//! well-formed one is keyed instead by what it says: each part's name, filename, content type
//! and bytes (short text fields as text, everything else as its SHA-256 and size). Anything
//! unusual (no boundary, a preamble, a part without a name, bytes after the closing delimiter)
//! keeps the raw-body rule, so no body is keyed by a guess.

use crate::is_query_credential;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The longest text field keyed as text; longer fields, files and binary fields are keyed by
/// their SHA-256 and size.
pub const MULTIPART_TEXT_MAX: usize = 4096;

/// The material `body` of a well-formed `multipart/form-data` body: `{"multipart": {NAME:
/// [PART, ...], ...}}`, each part `{"value": TEXT}` or `{"sha256": HEX, "size": N}`, with
/// `"filename"`, `"filename*"` and `"content_type"` when it has them. `None` when the request
/// does not declare a multipart form with a boundary, or its body is not one.
pub(crate) fn keyed_parts(headers: &[(&str, &str)], body: &[u8]) -> Option<Value> {
    let boundary = form_boundary(headers)?;
    let parts = split(body, boundary.as_bytes())?;
    let mut by_name: Map<String, Value> = Map::new();
    for part in parts {
        let part = read_part(part)?;
        // Left out of the key like a credential query parameter, and never stored.
        if is_query_credential(&part.name) {
            continue;
        }
        let entry = by_name
            .entry(part.name.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = entry {
            list.push(part.material());
        }
    }
    let mut body = Map::new();
    body.insert("multipart".into(), Value::Object(by_name));
    Some(Value::Object(body))
}

/// The boundary of a `multipart/form-data` content type, when the request has exactly one
/// content type and it is that.
fn form_boundary(headers: &[(&str, &str)]) -> Option<String> {
    let mut types = headers
        .iter()
        .filter(|(name, _)| name.trim().eq_ignore_ascii_case("content-type"))
        .map(|(_, value)| *value);
    let value = types.next()?;
    if types.next().is_some() {
        return None;
    }
    let (media, params) = value.split_once(';').unwrap_or((value, ""));
    if !media.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    let boundary = parameters(params)?
        .into_iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("boundary"))?
        .1;
    // RFC 2046: 1 to 70 characters.
    (1..=70).contains(&boundary.len()).then_some(boundary)
}

/// `; name=value; name="quoted \"value\""` as pairs; `None` when it does not read as that.
fn parameters(text: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        rest = rest.strip_prefix(';').unwrap_or(rest).trim_start();
        if rest.is_empty() {
            break;
        }
        let eq = rest.find('=')?;
        let name = rest[..eq].trim().to_owned();
        if name.is_empty() || name.contains([';', '"']) {
            return None;
        }
        rest = rest[eq + 1..].trim_start();
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut text = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => text.push(chars.next()?.1),
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    c => text.push(c),
                }
            }
            let end = end?;
            value = text;
            rest = quoted[end + 1..].trim_start();
        } else {
            let end = rest.find(';').unwrap_or(rest.len());
            value = rest[..end].trim().to_owned();
            rest = &rest[end..];
        }
        if !rest.is_empty() && !rest.starts_with(';') {
            return None;
        }
        out.push((name, value));
    }
    Some(out)
}

/// The parts between the delimiters (each its headers and content), when the body is exactly
/// `--B CRLF part (CRLF --B CRLF part)* CRLF --B--` with an optional final CRLF.
fn split<'b>(body: &'b [u8], boundary: &[u8]) -> Option<Vec<&'b [u8]>> {
    let mut delimiter = Vec::with_capacity(boundary.len() + 4);
    delimiter.extend_from_slice(b"\r\n--");
    delimiter.extend_from_slice(boundary);
    // The first delimiter has no CRLF before it.
    let mut rest = body.strip_prefix(&delimiter[2..])?;
    let mut parts = Vec::new();
    loop {
        if let Some(after) = rest.strip_prefix(b"--") {
            return (after.is_empty() || after == b"\r\n").then_some(parts);
        }
        rest = rest.strip_prefix(b"\r\n")?;
        let end = find(rest, &delimiter)?;
        parts.push(&rest[..end]);
        rest = &rest[end + delimiter.len()..];
    }
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let (first, tail) = needle.split_first()?;
    let mut from = 0;
    while let Some(offset) = haystack[from..].iter().position(|b| b == first) {
        let at = from + offset;
        if haystack[at + 1..].starts_with(tail) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// One part as the key sees it.
struct Part<'b> {
    name: String,
    filename: Option<String>,
    filename_ext: Option<String>,
    content_type: Option<String>,
    content: &'b [u8],
}

impl Part<'_> {
    fn material(&self) -> Value {
        let mut out = Map::new();
        if let Some(filename) = &self.filename {
            out.insert("filename".into(), Value::from(filename.as_str()));
        }
        if let Some(filename) = &self.filename_ext {
            out.insert("filename*".into(), Value::from(filename.as_str()));
        }
        if let Some(content_type) = &self.content_type {
            out.insert("content_type".into(), Value::from(content_type.as_str()));
        }
        let text = std::str::from_utf8(self.content)
            .ok()
            .filter(|_| self.filename.is_none() && self.filename_ext.is_none())
            .filter(|text| text.len() <= MULTIPART_TEXT_MAX);
        match text {
            Some(text) => {
                out.insert("value".into(), Value::from(text));
            }
            None => {
                out.insert(
                    "sha256".into(),
                    Value::from(crate::hex(&Sha256::digest(self.content).into())),
                );
                out.insert("size".into(), Value::from(self.content.len()));
            }
        }
        Value::Object(out)
    }
}

/// A part's headers and content; `None` unless its headers are well formed and say
/// `Content-Disposition: form-data; name="..."`.
fn read_part(part: &[u8]) -> Option<Part<'_>> {
    let (head, content) = if let Some(content) = part.strip_prefix(b"\r\n") {
        // No headers at all: no name, not a form field.
        (&b""[..], content)
    } else {
        let end = find(part, b"\r\n\r\n")?;
        (&part[..end], &part[end + 4..])
    };
    let head = std::str::from_utf8(head).ok()?;
    let mut disposition = None;
    let mut content_type = None;
    for line in head.split("\r\n").filter(|l| !l.is_empty()) {
        // Folded header lines are obsolete in HTTP and multipart alike.
        if line.starts_with([' ', '\t']) {
            return None;
        }
        let (name, value) = line.split_once(':')?;
        let name = name.trim();
        // A repeated disposition or content type is not ours to choose between.
        let repeated = if name.eq_ignore_ascii_case("content-disposition") {
            disposition.replace(value.trim()).is_some()
        } else if name.eq_ignore_ascii_case("content-type") {
            content_type
                .replace(value.trim().to_ascii_lowercase())
                .is_some()
        } else {
            false
        };
        if repeated {
            return None;
        }
    }
    let disposition = disposition?;
    let (kind, params) = disposition.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("form-data") {
        return None;
    }
    let params = parameters(params)?;
    let param = |wanted: &str| {
        params
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(wanted))
            .map(|(_, value)| value.clone())
    };
    Some(Part {
        name: param("name")?,
        filename: param("filename"),
        filename_ext: param("filename*"),
        content_type,
        content,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(boundary: &str, parts: &[(&str, &str)]) -> Vec<u8> {
        let mut body = Vec::new();
        for (head, content) in parts {
            body.extend_from_slice(
                format!("--{boundary}\r\n{head}\r\n\r\n{content}\r\n").as_bytes(),
            );
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        body
    }

    fn parts_of(content_type: &str, body: &[u8]) -> Option<Value> {
        keyed_parts(&[("Content-Type", content_type)], body)
    }

    #[test]
    fn a_form_is_read_as_its_parts() {
        let body = form(
            "abc123",
            &[
                ("Content-Disposition: form-data; name=\"model\"", "whisper-1"),
                (
                    "Content-Disposition: form-data; name=\"file\"; filename=\"a; b \\\"c\\\".mp3\"\r\nContent-Type: Audio/MPEG",
                    "ID3\u{1}bytes",
                ),
            ],
        );
        let parts = parts_of("multipart/form-data; boundary=abc123", &body).unwrap();
        assert_eq!(
            parts,
            json!({"multipart": {
                "model": [{"value": "whisper-1"}],
                "file": [{
                    "filename": "a; b \"c\".mp3",
                    "content_type": "audio/mpeg",
                    "sha256": crate::sha256_hex("ID3\u{1}bytes".as_bytes()),
                    "size": 9
                }]
            }})
        );
        // A quoted boundary reads alike.
        assert_eq!(
            parts_of(
                "Multipart/Form-Data; charset=utf-8; boundary=\"abc123\"",
                &body
            ),
            Some(parts)
        );
    }

    #[test]
    fn anything_unusual_is_not_read_as_a_form() {
        let good = form("b", &[("Content-Disposition: form-data; name=\"x\"", "1")]);
        assert!(parts_of("multipart/form-data; boundary=b", &good).is_some());
        let mut with_preamble = b"preamble\r\n".to_vec();
        with_preamble.extend_from_slice(&good);
        let mut trailing = good.clone();
        trailing.extend_from_slice(b"epilogue");
        for (content_type, body) in [
            ("multipart/form-data", good.clone()),
            ("multipart/mixed; boundary=b", good.clone()),
            ("application/json", good.clone()),
            ("multipart/form-data; boundary=c", good.clone()),
            ("multipart/form-data; boundary=b", with_preamble),
            ("multipart/form-data; boundary=b", trailing),
            (
                "multipart/form-data; boundary=b",
                good[..good.len() - 4].to_vec(),
            ),
            (
                "multipart/form-data; boundary=b",
                form("b", &[("Content-Type: text/plain", "no name")]),
            ),
            (
                "multipart/form-data; boundary=b",
                form("b", &[("Content-Disposition: attachment; name=\"x\"", "1")]),
            ),
            (
                "multipart/form-data; boundary=b",
                form(
                    "b",
                    &[("Content-Disposition: form-data; name=\"x\"\r\n folded", "1")],
                ),
            ),
        ] {
            assert_eq!(
                parts_of(content_type, &body),
                None,
                "{content_type} {body:?}"
            );
        }
        let long = "x".repeat(71);
        assert_eq!(
            parts_of(
                &format!("multipart/form-data; boundary={long}"),
                &form(&long, &[])
            ),
            None
        );
        // Two content types: which one is meant is not ours to guess.
        assert_eq!(
            keyed_parts(
                &[
                    ("content-type", "multipart/form-data; boundary=b"),
                    ("content-type", "text/plain")
                ],
                &good
            ),
            None
        );
    }

    #[test]
    fn long_or_binary_fields_and_credentials() {
        let long = "y".repeat(MULTIPART_TEXT_MAX + 1);
        let body = form(
            "b",
            &[
                ("Content-Disposition: form-data; name=\"prompt\"", &long),
                (
                    "Content-Disposition: form-data; name=\"api_key\"",
                    "sk-secret",
                ),
                ("Content-Disposition: form-data; name=\"tags\"", "a"),
                ("Content-Disposition: form-data; name=\"tags\"", "b"),
            ],
        );
        let parts = parts_of("multipart/form-data; boundary=b", &body).unwrap();
        assert_eq!(
            parts["multipart"]["prompt"][0]["size"],
            json!(MULTIPART_TEXT_MAX + 1)
        );
        assert!(parts["multipart"].get("api_key").is_none());
        assert_eq!(
            parts["multipart"]["tags"],
            json!([{"value": "a"}, {"value": "b"}])
        );
    }
}
