//! Header lists as every layer handles them: one shape, `(name, value)` pairs in the order
//! received (`Request::headers`, an answer's headers), looked up by case-insensitive name, read
//! for a declared JSON body, stored under lower-cased names.
//!
//! One rule for a header sent more than once: its first value is the one read, looked up and
//! stored, as servers read it (hyper's `HeaderMap::get`, Node's `content-type`), so that what
//! decides how a body is redacted is what the upstream read. Keying alone reads every value
//! (joined with `,`, `docs/keying.md` step 4), by contract.

use std::collections::BTreeMap;

/// Whether two header names name one header: trimmed, case-insensitive (as they are stored).
fn same_name(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// The first value of a header, by case-insensitive name.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| same_name(n, name))
        .map(|(_, v)| v.as_str())
}

/// Sets a header to one value: every value it had, under any case of its name, is replaced.
pub fn set_header(headers: &mut Vec<(String, String)>, name: &str, value: &str) {
    headers.retain(|(n, _)| !same_name(n, name));
    headers.push((name.to_owned(), value.to_owned()));
}

/// Whether the headers declare a JSON body (`application/json`, `...+json`).
pub fn declares_json(headers: &[(String, String)]) -> bool {
    header(headers, "content-type").is_some_and(|value| {
        let essence = value
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        essence == "application/json" || essence.ends_with("+json")
    })
}

/// Headers as a stored map: names trimmed and lower-cased, a repeated header by its first
/// value (the one [`header`] reads).
pub fn lowercased(headers: &[(String, String)]) -> BTreeMap<String, String> {
    let mut stored = BTreeMap::new();
    for (name, value) in headers {
        stored
            .entry(name.trim().to_ascii_lowercase())
            .or_insert_with(|| value.clone());
    }
    stored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types_are_recognised() {
        let with = |v: &str| vec![("Content-Type".to_owned(), v.to_owned())];
        assert!(declares_json(&with("application/json")));
        assert!(declares_json(&with("Application/JSON; charset=utf-8")));
        assert!(declares_json(&with("application/vnd.api+json")));
        assert!(!declares_json(&with("text/plain")));
        assert!(!declares_json(&[]));
    }

    #[test]
    fn lookups_ignore_case_and_stored_names_are_lower_case() {
        let headers = vec![
            ("X-Request-Id".to_owned(), "a".to_owned()),
            (" x-request-id ".to_owned(), "b".to_owned()),
        ];
        assert_eq!(header(&headers, "x-REQUEST-id"), Some("a"));
        assert_eq!(header(&headers[1..], "x-request-id"), Some("b"));
        assert_eq!(header(&headers, "accept"), None);
        // Stored as it is read: by its first value.
        let stored = lowercased(&headers);
        assert_eq!(stored.len(), 1);
        assert_eq!(stored["x-request-id"], "a");
        let mut set = headers.clone();
        set_header(&mut set, "X-REQUEST-ID", "c");
        assert_eq!(set, [("X-REQUEST-ID".to_owned(), "c".to_owned())]);
    }
}
