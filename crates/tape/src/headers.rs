//! Header lists as every layer handles them: looked up by case-insensitive name, read for a
//! declared JSON body, stored under lower-cased names.

use std::collections::BTreeMap;

/// The first value of a header, by case-insensitive name.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
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

/// Headers as a stored map: names trimmed and lower-cased (a repeated header keeps its last
/// value).
pub fn lowercased(headers: &[(String, String)]) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.clone()))
        .collect()
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
        assert_eq!(header(&headers, "accept"), None);
        let stored = lowercased(&headers);
        assert_eq!(stored.len(), 1);
        assert_eq!(stored["x-request-id"], "b");
    }
}
