//! vcrpy cassettes in the shapes real suites write them: bodies as `body.string`, a bare
//! string, `!!binary`, `base64_string`, a YAML mapping or sequence (a JSON body written as
//! YAML), or a `parsed_body` mapping beside or instead of `body` (custom serializers); header
//! values as strings, numbers or `!!binary`; gzip, deflate or brotli answers. Each
//! interaction converts or fails on its own, so one odd value costs that interaction (named),
//! never the tape; a header value that cannot be converted costs only that header (noted on
//! the interaction). An empty request or answer where one was expected is an error naming
//! what the tape holds instead, never an empty interaction.

use crate::decode::{decode, header_value};
use crate::depth::{too_deep, MAX_DEPTH};
use crate::Error;
use bytes::Bytes;
use cassette_keying::Profile;
use serde_json::Value;
use yaml_serde::Value as Yaml;

/// The URL an interaction stands at when its tape's URL is not one (see
/// [`Interaction::unreadable_uri`]): a scheme no request is sent with, so vcrpy's URL matchers
/// never find it alike with one.
const UNREADABLE_URI: &str = "cassette-unreadable:";

/// The largest vcrpy cassette read, in bytes: a reader of files checks it before reading one.
pub const MAX_TAPE_BYTES: u64 = 256 << 20;

/// The local tag `!!binary` is read as. The YAML library resolves the standard tag to its
/// base64 text, losing that the value was binary; a local tag keeps it. The text is replaced
/// everywhere, quoted text included, and put back in every string read (see [`restore`]), so
/// a body that merely mentions `!!binary` is read unchanged.
const BINARY_TAG: &str = "!cassette-import-binary";

/// One interaction of a tape: the request as recorded and its answer, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Interaction {
    /// The request method, in capitals (`POST` when the tape names none).
    pub method: String,
    /// The URL the request was sent to (a placeholder where it is [`Self::unreadable_uri`]).
    pub uri: url::Url,
    /// Why the tape's URL is not one, when it is not: a suite's `before_record_request` may
    /// replace it before recording (`**REDACTED**`), and vcrpy, which applies the same function
    /// to today's request, still matches such a tape on the other matchers. Only what applies
    /// that function (adopt's judge in the test process) can match it; an import cannot place
    /// it at any route.
    pub unreadable_uri: Option<String>,
    /// The request headers, each value on its own (vcrpy keeps lists).
    pub request_headers: Vec<(String, String)>,
    /// The request body as sent.
    pub request_body: Bytes,
    /// The answer's status.
    pub status: u16,
    /// The answer's headers, without `content-encoding` (the body is decoded).
    pub response_headers: Vec<(String, String)>,
    /// The answer's body, decoded (gzip, deflate and brotli undone).
    pub response_body: Bytes,
    /// What of the interaction could not be converted and was left out (a header value that
    /// is not text), one line each; the rest is what the tape holds.
    pub left_out: Vec<String>,
}

/// The interactions of a vcrpy cassette's text, each converted or its error, in order; an
/// error for the whole text only when it is not a vcrpy cassette at all.
pub fn read(text: &str) -> Result<Vec<Result<Interaction, Error>>, Error> {
    let size = text.len() as u64;
    if size > MAX_TAPE_BYTES {
        return Err(Error::TooLarge {
            size,
            limit: MAX_TAPE_BYTES,
        });
    }
    // Before the YAML library: its parser takes time quadratic in flow nesting.
    if let Some((line, column)) = too_deep(text, MAX_DEPTH) {
        return Err(Error::TooDeep {
            line,
            column,
            limit: MAX_DEPTH,
        });
    }
    if text.contains(BINARY_TAG) {
        return Err(Error::ReservedText { text: BINARY_TAG });
    }
    let mut doc = parse(text)?;
    restore(&mut doc);
    interactions(&doc)
}

/// The interactions of a tape the suite's own serializer deserialized (vcrpy's dict shape,
/// as JSON: bytes as `{"!!binary": base64}`), read as a tape's text is, each converted or its
/// error; an error only when it holds no `interactions` list.
pub fn read_document(document: &Value) -> Result<Vec<Result<Interaction, Error>>, Error> {
    if too_deep_json(document, MAX_DEPTH) {
        return Err(Error::TooDeepForYaml {
            reason: format!("the document nests deeper than {MAX_DEPTH}"),
        });
    }
    interactions(&from_json(document))
}

/// Whether a JSON value nests deeper than `limit`.
fn too_deep_json(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 0)];
    while let Some((value, depth)) = stack.pop() {
        if depth > limit {
            return true;
        }
        match value {
            Value::Array(list) => stack.extend(list.iter().map(|v| (v, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    false
}

/// A JSON document as the YAML a tape would hold: `{"!!binary": base64}` as `!!binary`.
fn from_json(value: &Value) -> Yaml {
    match value {
        Value::Null => Yaml::Null,
        Value::Bool(b) => Yaml::Bool(*b),
        Value::Number(n) => yaml_serde::to_value(n).unwrap_or(Yaml::Null),
        Value::String(s) => Yaml::String(s.clone()),
        Value::Array(list) => Yaml::Sequence(list.iter().map(from_json).collect()),
        Value::Object(map) => {
            if let (1, Some(Value::String(b64))) = (map.len(), map.get("!!binary")) {
                return Yaml::Tagged(Box::new(yaml_serde::value::TaggedValue {
                    tag: yaml_serde::value::Tag::new(BINARY_TAG),
                    value: Yaml::String(b64.clone()),
                }));
            }
            Yaml::Mapping(
                map.iter()
                    .map(|(k, v)| (Yaml::String(k.clone()), from_json(v)))
                    .collect(),
            )
        }
    }
}

/// The interactions of a tape's document.
fn interactions(doc: &Yaml) -> Result<Vec<Result<Interaction, Error>>, Error> {
    let interactions = doc
        .get("interactions")
        .and_then(Yaml::as_sequence)
        .ok_or(Error::NoInteractions)?;
    Ok(interactions
        .iter()
        .map(|interaction| convert(interaction).map_err(|reason| Error::Interaction { reason }))
        .collect())
}

/// The YAML document, `!!binary` read as [`BINARY_TAG`].
fn parse(text: &str) -> Result<Yaml, Error> {
    let text = text.replace("!!binary", BINARY_TAG);
    yaml_serde::from_str(&text).map_err(|err| {
        let reason = err.to_string().replace(BINARY_TAG, "!!binary");
        if reason.contains("recursion limit exceeded") {
            // Block nesting: the library stops at its limit, in linear time.
            Error::TooDeepForYaml { reason }
        } else {
            Error::NotYaml { reason }
        }
    })
}

/// Puts `!!binary` back where the reader's own tag replaced it inside text.
fn restore(value: &mut Yaml) {
    match value {
        Yaml::String(s) if s.contains(BINARY_TAG) => *s = s.replace(BINARY_TAG, "!!binary"),
        Yaml::Sequence(list) => list.iter_mut().for_each(restore),
        Yaml::Mapping(map) => map.values_mut().for_each(restore),
        Yaml::Tagged(tagged) => restore(&mut tagged.value),
        _ => {}
    }
}

/// A reason a part of an interaction does not convert, with what it was converting.
type Fail<T> = Result<T, String>;

trait Context<T> {
    fn context(self, what: &str) -> Fail<T>;
}

impl<T> Context<T> for Fail<T> {
    fn context(self, what: &str) -> Fail<T> {
        self.map_err(|reason| format!("{what}: {reason}"))
    }
}

fn convert(interaction: &Yaml) -> Fail<Interaction> {
    let request = interaction
        .get("request")
        .ok_or_else(|| "no \"request\"".to_owned())?;
    let response = interaction
        .get("response")
        .ok_or_else(|| "no \"response\"".to_owned())?;
    let uri = request
        .get("uri")
        .and_then(Yaml::as_str)
        .ok_or_else(|| "request.uri is missing".to_owned())?;
    let (uri, unreadable_uri) = match url::Url::parse(uri) {
        Ok(parsed) => (parsed, None),
        Err(err) => {
            let placeholder = url::Url::parse(UNREADABLE_URI).map_err(|e| e.to_string())?;
            (placeholder, Some(format!("request.uri {uri:?}: {err}")))
        }
    };
    let method = request
        .get("method")
        .and_then(Yaml::as_str)
        .unwrap_or("POST")
        .to_ascii_uppercase();
    let mut left_out = Vec::new();
    let request_headers = headers(request.get("headers"), "request", &mut left_out);
    let request_body = part_body(request).context("request body")?;
    let status = response
        .get("status")
        .and_then(|s| s.get("code").or(Some(s)))
        .and_then(Yaml::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .ok_or_else(|| "response.status.code is missing".to_owned())?;
    let response_headers = headers(response.get("headers"), "response", &mut left_out);
    let raw = part_body(response).context("response body")?;
    let response_body = decode(raw, &response_headers)?;
    if request_body.is_empty()
        && matches!(method.as_str(), "POST" | "PUT" | "PATCH")
        && Profile::from_path(uri.path()) != Profile::Http
    {
        return Err(format!(
            "the request body is empty ({method} {}); the tape's request holds {}: a custom \
             serializer may keep the body elsewhere, so it is not read as an empty request",
            uri.path(),
            members(request)
        ));
    }
    let declared_empty = header_value(&response_headers, "content-length") == Some("0");
    if response_body.is_empty()
        && !declared_empty
        && !matches!(status, 204 | 304)
        && method != "HEAD"
    {
        return Err(format!(
            "the answer is empty (status {status}) and not declared so; the tape's response \
             holds {}: a custom serializer may keep the body elsewhere, so it is not read as \
             an empty answer",
            members(response)
        ));
    }
    Ok(Interaction {
        method,
        uri,
        unreadable_uri,
        request_headers,
        request_body,
        status,
        response_headers: response_headers
            .into_iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("content-encoding"))
            .collect(),
        response_body,
        left_out,
    })
}

/// The members of a tape's request or response, for an error that says where a body is not.
fn members(part: &Yaml) -> String {
    let names: Vec<String> = part
        .as_mapping()
        .map(|map| {
            map.iter()
                .map(|(name, value)| {
                    let name = name.as_str().unwrap_or("?");
                    match value {
                        Yaml::Mapping(inner) => {
                            let inner: Vec<&str> =
                                inner.keys().map(|k| k.as_str().unwrap_or("?")).collect();
                            format!("{name} {{{}}}", inner.join(", "))
                        }
                        _ => name.to_owned(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        "nothing".to_owned()
    } else {
        names.join(", ")
    }
}

/// vcrpy headers: a map of names to lists of values (or single values). A value that is not
/// text (a `!!binary` one that is not UTF-8, such as an AWS request id, a mapping) is left out
/// and noted in `left_out`: only that header is lost, never the interaction.
fn headers(value: Option<&Yaml>, part: &str, left_out: &mut Vec<String>) -> Vec<(String, String)> {
    let Some(Yaml::Mapping(map)) = value else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, values) in map {
        let Some(name) = name.as_str() else {
            left_out.push(format!(
                "a {part} header whose name is {}, not text: left out",
                kind(name)
            ));
            continue;
        };
        let values = match values {
            Yaml::Sequence(list) => list.iter().collect::<Vec<_>>(),
            single => vec![single],
        };
        for value in values {
            match header_text(value) {
                Ok(Some(text)) => out.push((name.to_owned(), text)),
                Ok(None) => {}
                Err(why) => left_out.push(format!("{part} header {name}: {why}; left out")),
            }
        }
    }
    out
}

/// A header value as text; `None` for a null one (nothing sent).
fn header_text(value: &Yaml) -> Fail<Option<String>> {
    Ok(Some(match value {
        Yaml::Null => return Ok(None),
        Yaml::String(s) => s.clone(),
        Yaml::Number(n) => n.to_string(),
        Yaml::Bool(b) => b.to_string(),
        // botocore records header values as bytes.
        Yaml::Tagged(tagged) if is_binary(&tagged.tag) => {
            String::from_utf8(base64(&tagged.value)?.to_vec())
                .map_err(|_| "its !!binary value is not UTF-8 text".to_owned())?
        }
        other => return Err(format!("unexpected value {}", kind(other))),
    }))
}

fn is_binary(tag: &yaml_serde::value::Tag) -> bool {
    *tag == BINARY_TAG.trim_start_matches('!')
}

fn kind(value: &Yaml) -> &'static str {
    match value {
        Yaml::Null => "null",
        Yaml::Bool(_) => "a boolean",
        Yaml::Number(_) => "a number",
        Yaml::String(_) => "a string",
        Yaml::Sequence(_) => "a list",
        Yaml::Mapping(_) => "a mapping",
        Yaml::Tagged(_) => "a tagged value",
    }
}

fn base64(value: &Yaml) -> Fail<Bytes> {
    let Yaml::String(b64) = value else {
        return Err("a !!binary value is not text".to_owned());
    };
    base64_text(b64).context("a !!binary value is not valid base64")
}

fn base64_text(text: &str) -> Fail<Bytes> {
    use base64::Engine;
    let compact: String = text.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map(Bytes::from)
        .map_err(|err| err.to_string())
}

/// The body of a request or response: its `parsed_body` when a custom serializer stored one,
/// else its `body`.
fn part_body(part: &Yaml) -> Fail<Bytes> {
    match part.get("parsed_body") {
        Some(Yaml::Null) | None => body(part.get("body")),
        Some(parsed) => json_text(parsed).context("parsed_body"),
    }
}

/// A vcrpy body: a string, `!!binary` base64, `{string: ...}`, `{base64_string: ...}`, a
/// `parsed_body` inside it, a mapping or list written as YAML (JSON), or nothing.
fn body(value: Option<&Yaml>) -> Fail<Bytes> {
    match value {
        None | Some(Yaml::Null) => Ok(Bytes::new()),
        Some(Yaml::String(s)) => Ok(Bytes::from(s.clone())),
        Some(Yaml::Tagged(tagged)) if is_binary(&tagged.tag) => base64(&tagged.value),
        Some(Yaml::Mapping(map)) => {
            let only = |names: &[&str]| {
                map.keys()
                    .all(|k| k.as_str().is_some_and(|k| names.contains(&k)))
            };
            if let Some(Yaml::String(b64)) = map.get("base64_string") {
                return base64_text(b64).context("body.base64_string is not valid base64");
            }
            if map.contains_key("string") && only(&["string", "encoding"]) {
                return body(map.get("string"));
            }
            if map.contains_key("parsed_body") && only(&["parsed_body", "encoding"]) {
                return json_text(&map["parsed_body"]).context("body.parsed_body");
            }
            json_text(value.unwrap_or(&Yaml::Null))
        }
        Some(list @ Yaml::Sequence(_)) => json_text(list),
        Some(other) => Err(format!("unexpected body: {}", kind(other))),
    }
}

/// A body written as YAML, as the JSON text it stands for.
fn json_text(value: &Yaml) -> Fail<Bytes> {
    let json = to_json(value)?;
    serde_json::to_vec(&json)
        .map(Bytes::from)
        .map_err(|err| err.to_string())
}

fn to_json(value: &Yaml) -> Fail<Value> {
    Ok(match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(*b),
        Yaml::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                Value::Number(
                    serde_json::Number::from_f64(f)
                        .ok_or_else(|| format!("the number {n} has no JSON form"))?,
                )
            }
        }
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Sequence(list) => Value::Array(list.iter().map(to_json).collect::<Fail<_>>()?),
        Yaml::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (name, value) in map {
                let name = name
                    .as_str()
                    .ok_or_else(|| format!("a member name is {}, not a string", kind(name)))?;
                out.insert(name.to_owned(), to_json(value)?);
            }
            Value::Object(out)
        }
        Yaml::Tagged(_) => return Err("a tagged value inside a JSON body".to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Yaml {
        let mut doc = parse(text).unwrap();
        restore(&mut doc);
        doc
    }

    #[test]
    fn bodies_in_every_shape_read_as_the_bytes_sent() {
        let read =
            |text: &str| part_body(&doc(text)).map(|b| String::from_utf8_lossy(&b).into_owned());
        let json = r#"{"a":[1,2.5,null,true,"x"]}"#;
        for text in [
            "body: '{\"a\":[1,2.5,null,true,\"x\"]}'",
            "body: {string: '{\"a\":[1,2.5,null,true,\"x\"]}'}",
            "parsed_body: {a: [1, 2.5, null, true, x]}",
            "body: {a: [1, 2.5, null, true, x]}",
            "body: {parsed_body: {a: [1, 2.5, null, true, x]}}",
            "body: !!binary eyJhIjpbMSwyLjUsbnVsbCx0cnVlLCJ4Il19",
            "body:\n  string: !!binary |\n    eyJhIjpbMSwyLjUs\n    bnVsbCx0cnVlLCJ4Il19\n",
            "body: {encoding: UTF-8, base64_string: eyJhIjpbMSwyLjUsbnVsbCx0cnVlLCJ4Il19}",
        ] {
            assert_eq!(read(text).unwrap(), json, "{text}");
        }
        // A body that mentions the tag is read unchanged.
        assert_eq!(
            read("body: {string: 'tags: !!binary and !!str'}").unwrap(),
            "tags: !!binary and !!str"
        );
        assert!(read("body: {a: !!binary eA==}").is_err());
        assert!(read("body: {1: x}").is_err());
    }

    #[test]
    fn binary_header_values_are_text_or_left_out_alone() {
        let mut left_out = Vec::new();
        let text = "h:\n  amz-sdk-invocation-id:\n  - !!binary |\n    NGE4Zg==\n  x-n: [3]\n";
        assert_eq!(
            headers(doc(text).get("h"), "request", &mut left_out),
            vec![
                ("amz-sdk-invocation-id".to_owned(), "4a8f".to_owned()),
                ("x-n".to_owned(), "3".to_owned())
            ]
        );
        assert!(left_out.is_empty(), "{left_out:?}");
        // Not UTF-8 (`/w==` is 0xFF), and a mapping: each left out, the other headers kept.
        let text = "h: {x-amz-id-2: [!!binary /w==], x-ok: [yes], x-odd: {a: 1}}";
        assert_eq!(
            headers(doc(text).get("h"), "response", &mut left_out),
            vec![("x-ok".to_owned(), "yes".to_owned())]
        );
        assert_eq!(
            left_out,
            [
                "response header x-amz-id-2: its !!binary value is not UTF-8 text; left out",
                "response header x-odd: unexpected value a mapping; left out"
            ]
        );
    }

    #[test]
    fn one_interaction_that_does_not_convert_costs_only_itself() {
        let tape = "interactions:\n\
- request: {method: GET, uri: 'https://h.example/a'}\n  response: {status: {code: 200}, body: {string: ok}, headers: {x-amz-id-2: [!!binary /w==]}}\n\
- request: {method: GET, uri: 'https://h.example/b'}\n  response: {status: {code: 200}, body: {string: !!binary 'not base64!'}}\n\
- request: {method: GET}\n  response: {status: {code: 200}}\n\
version: 1\n";
        let read = read(tape).unwrap();
        assert_eq!(read.len(), 3);
        let first = read[0].as_ref().unwrap();
        assert_eq!(first.response_body, Bytes::from("ok"));
        assert_eq!(first.left_out.len(), 1, "{:?}", first.left_out);
        let second = read[1].as_ref().unwrap_err().to_string();
        assert!(
            second.starts_with("response body: a !!binary value is not valid base64"),
            "{second}"
        );
        assert_eq!(
            read[2].as_ref().unwrap_err().to_string(),
            "request.uri is missing"
        );
    }

    #[test]
    fn a_document_the_suites_serializer_deserialized_reads_as_its_tape_would() {
        // vcrpy's dict shape as JSON: bytes as {"!!binary": base64}, in bodies and headers.
        let document = serde_json::json!({"interactions": [
            {"request": {"method": "POST", "uri": "https://api.openai.com/v1/chat/completions",
                         "body": "{\"model\":\"m\"}", "headers": {"Content-Type": ["application/json"]}},
             "response": {"status": {"code": 200}, "body": {"string": {"!!binary": "eyJvayI6MX0="}},
                          "headers": {"x-amz-id-2": [{"!!binary": "/w=="}], "x-ok": [{"!!binary": "eWVz"}]}}},
            {"request": {"method": "GET"}, "response": {"status": {"code": 200}}}
        ], "version": 1});
        let read = read_document(&document).unwrap();
        let first = read[0].as_ref().unwrap();
        assert_eq!(first.request_body, Bytes::from(r#"{"model":"m"}"#));
        assert_eq!(first.response_body, Bytes::from(r#"{"ok":1}"#));
        assert_eq!(
            first.response_headers,
            [("x-ok".to_owned(), "yes".to_owned())]
        );
        assert_eq!(first.left_out.len(), 1, "{:?}", first.left_out);
        assert_eq!(
            read[1].as_ref().unwrap_err().to_string(),
            "request.uri is missing"
        );
        assert!(matches!(
            read_document(&serde_json::json!({"recorded": []})),
            Err(Error::NoInteractions)
        ));
        let mut deep = serde_json::json!(1);
        for _ in 0..(MAX_DEPTH + 2) {
            deep = serde_json::json!([deep]);
        }
        assert!(read_document(&serde_json::json!({ "interactions": deep })).is_err());
    }

    #[test]
    fn whole_tapes_that_are_not_vcrpy_cassettes_say_why() {
        let deep = format!("interactions: {}", "[".repeat(5000));
        assert!(matches!(read(&deep), Err(Error::TooDeep { line: 1, .. })));
        assert!(matches!(read("a: [1"), Err(Error::NotYaml { .. })));
        assert!(matches!(read("a: 1\n"), Err(Error::NoInteractions)));
        assert!(matches!(
            read("x: !cassette-import-binary 1\n"),
            Err(Error::ReservedText { .. })
        ));
        assert_eq!(read("interactions: []\n").unwrap(), Vec::new());
    }
}
