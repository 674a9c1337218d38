//! Request files: one HTTP request written down as JSON, as `cassette key`, `cassette explain`
//! and `cassette probe` read it, and as a suite case's `request` member holds it.
//!
//! ```json
//! {
//!   "target": "default",                       // optional, default "default"
//!   "method": "POST",                          // optional, default "POST"
//!   "path": "/v1/chat/completions",            // required; may carry "?query"
//!   "query": "a=1&b=2",                        // optional, leading "?" allowed
//!   "headers": {"anthropic-version": "2023-06-01", "anthropic-beta": ["a", "b"]},
//!   "body": {"model": "gpt-4o-mini", "messages": []}
//! }
//! ```
//!
//! `headers` is an object (a value may be a list for repeated headers) or a list of
//! `[name, value]` pairs. The body is at most one of `body` (any JSON value, sent as compact
//! JSON), `body_text` (sent as its UTF-8 bytes) or `body_base64` (for bodies that are not
//! text). Unknown members are an error, so a misspelt `header` cannot silently key a request
//! without its headers.

use crate::error::{bail, Error, Result};
use base64::Engine;
use cassette_tape::{Request, DEFAULT_TARGET};
use serde_json::{Map, Value};

const MEMBERS: &[&str] = &[
    "target",
    "method",
    "path",
    "query",
    "headers",
    "body",
    "body_text",
    "body_base64",
];

/// Parses the text of a request file.
pub fn parse(text: &str) -> Result<Request> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| Error::request(format!("not valid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        bail!(request, "a request file is a JSON object");
    };
    if let Some(unknown) = obj.keys().find(|k| !MEMBERS.contains(&k.as_str())) {
        bail!(
            request,
            "unknown member {unknown:?} (expected one of: {})",
            MEMBERS.join(", ")
        );
    }

    let raw_path =
        string_member(&obj, "path")?.ok_or_else(|| Error::request("\"path\" is required"))?;
    let mut query = string_member(&obj, "query")?.map(|q| q.trim_start_matches('?').to_owned());
    let path = match raw_path.split_once('?') {
        Some((path, in_path)) => {
            if query.is_some() {
                bail!(
                    request,
                    "the query is given twice: in \"path\" and in \"query\""
                );
            }
            query = Some(in_path.to_owned());
            path.to_owned()
        }
        None => raw_path.to_owned(),
    };

    Ok(Request {
        target: string_member(&obj, "target")?
            .unwrap_or(DEFAULT_TARGET)
            .to_owned(),
        method: string_member(&obj, "method")?.unwrap_or("POST").to_owned(),
        path,
        query: query.unwrap_or_default(),
        headers: headers(obj.get("headers"))?,
        body: body(&obj)?.into(),
    })
}

fn string_member<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => bail!(request, "\"{name}\" must be a string, found {other}"),
    }
}

fn headers(value: Option<&Value>) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (name, value) in map {
                match value {
                    Value::String(v) => out.push((name.clone(), v.clone())),
                    Value::Array(values) => {
                        for v in values {
                            let v = v.as_str().ok_or_else(|| {
                                Error::request(format!(
                                    "header {name:?}: values must be strings, found {v}"
                                ))
                            })?;
                            out.push((name.clone(), v.to_owned()));
                        }
                    }
                    other => bail!(
                        request,
                        "header {name:?}: value must be a string, found {other}"
                    ),
                }
            }
        }
        Some(Value::Array(pairs)) => {
            for pair in pairs {
                match pair.as_array().map(Vec::as_slice) {
                    Some([Value::String(n), Value::String(v)]) => out.push((n.clone(), v.clone())),
                    _ => bail!(
                        request,
                        "\"headers\" as a list holds [name, value] string pairs, found {pair}"
                    ),
                }
            }
        }
        Some(other) => bail!(
            request,
            "\"headers\" must be an object or a list of pairs, found {other}"
        ),
    }
    Ok(out)
}

fn body(obj: &Map<String, Value>) -> Result<Vec<u8>> {
    let given: Vec<&str> = ["body", "body_text", "body_base64"]
        .into_iter()
        .filter(|name| obj.get(*name).is_some_and(|v| !v.is_null()))
        .collect();
    if given.len() > 1 {
        bail!(
            request,
            "give at most one of \"body\", \"body_text\", \"body_base64\" (found {given:?})"
        );
    }
    if let Some(text) = string_member(obj, "body_text")? {
        return Ok(text.as_bytes().to_vec());
    }
    if let Some(encoded) = string_member(obj, "body_base64")? {
        return base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| Error::request(format!("\"body_base64\" is not valid base64: {e}")));
    }
    match obj.get("body") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(value) => serde_json::to_vec(value)
            .map_err(|e| Error::request(format!("re-serializing \"body\": {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_request_file() {
        let r = parse(
            r#"{"target":"anthropic","method":"put","path":"/v1/messages?beta=true",
                "headers":{"anthropic-beta":["a","b"],"x-api-key":"k"},
                "body":{"model":"m"}}"#,
        )
        .unwrap();
        assert_eq!(r.target, "anthropic");
        assert_eq!(r.method, "put");
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.query, "beta=true");
        assert_eq!(
            r.headers,
            [
                ("anthropic-beta".to_owned(), "a".to_owned()),
                ("anthropic-beta".to_owned(), "b".to_owned()),
                ("x-api-key".to_owned(), "k".to_owned()),
            ]
        );
        assert_eq!(r.body, &br#"{"model":"m"}"#[..]);
        let borrowed = r.as_keying();
        assert_eq!(borrowed.headers.len(), 3);
        assert_eq!(borrowed.body, &r.body[..]);
    }

    #[test]
    fn defaults_and_other_body_forms() {
        let r = parse(
            r#"{"path":"/x","query":"?a=1","headers":[["A","1"],["a","2"]],"body_text":"hi"}"#,
        )
        .unwrap();
        assert_eq!((r.target.as_str(), r.method.as_str()), ("default", "POST"));
        assert_eq!(r.query, "a=1");
        assert_eq!(r.headers.len(), 2);
        assert_eq!(r.body, &b"hi"[..]);
        let r = parse(r#"{"path":"/x","body_base64":"/wA="}"#).unwrap();
        assert_eq!(r.body, &[0xff, 0x00][..]);
        assert!(parse(r#"{"path":"/x"}"#).unwrap().body.is_empty());
    }

    #[test]
    fn mistakes_are_errors() {
        for (text, needle) in [
            (r#"{"method":"GET"}"#, "\"path\" is required"),
            (r#"{"path":"/x","header":{}}"#, "unknown member \"header\""),
            (r#"{"path":"/x","body":{},"body_text":""}"#, "at most one"),
            (r#"{"path":"/x?a=1","query":"b=2"}"#, "given twice"),
            (r#"{"path":"/x","headers":[["a"]]}"#, "[name, value]"),
            (r#"{"path":"/x","body_base64":"!!"}"#, "not valid base64"),
            (r#"{"path":3}"#, "must be a string"),
            ("[]", "JSON object"),
            ("{", "not valid JSON"),
        ] {
            let err = format!("{:#}", parse(text).unwrap_err());
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
