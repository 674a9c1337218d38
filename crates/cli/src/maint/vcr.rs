//! vcrpy cassettes read for `cassette import`, in the shapes real suites write them: bodies as
//! `body.string`, a bare string, `!!binary`, `base64_string`, a YAML mapping or sequence (a
//! JSON body written as YAML), or a `parsed_body` mapping beside or instead of `body` (custom
//! serializers); header values as strings, numbers or `!!binary`; gzip, deflate or brotli
//! answers. Each interaction converts or fails on its own, so one odd value costs that
//! interaction (named), never the file; an empty request or answer where one was expected is
//! an error naming what the tape holds instead, never an empty cassette.

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use cassette_keying::Profile;
use cassette_recorder::config::DEFAULT_TARGET;
use cassette_recorder::{Exchange, Request, Route};
use serde_json::Value;
use std::io::Read;
use std::path::{Component, Path};
use yaml_serde::Value as Yaml;

/// The largest vcrpy cassette read.
const MAX_YAML_FILE: u64 = 256 << 20;

/// The local tag `!!binary` is read as. The YAML library resolves the standard tag to its
/// base64 text, losing that the value was binary; a local tag keeps it. The text is replaced
/// everywhere, quoted text included, and put back in every string read (see [`restore`]), so
/// a body that merely mentions `!!binary` is read unchanged.
const BINARY_TAG: &str = "!cassette-import-binary";

/// One interaction of a tape, converted.
pub(crate) enum Item {
    /// A call to an API a route serves.
    Exchange(Box<Exchange>),
    /// A request to a host no route serves, at a path no LLM profile reads (a fixture
    /// downloaded from the web): nothing asks the proxy for it on replay.
    Download { method: String, url: String },
}

/// The interactions of a vcrpy cassette, each converted or its error; an error for the whole
/// file only when it is not a vcrpy cassette at all.
pub(crate) fn read_tape(
    path: &Path,
    routes: &[Route],
    recorded_at: &str,
    tool: &str,
) -> anyhow::Result<Vec<anyhow::Result<Item>>> {
    let size = std::fs::metadata(path)?.len();
    if size > MAX_YAML_FILE {
        bail!("it is {size} bytes; a vcrpy cassette read here is at most {MAX_YAML_FILE}");
    }
    let text = std::fs::read_to_string(path)?;
    // Before the YAML library: its parser takes time quadratic in flow nesting.
    if let Some((line, column)) = super::yaml_depth::too_deep(&text, super::yaml_depth::MAX_DEPTH) {
        bail!(
            "not a vcrpy cassette: it nests collections more than {} levels deep at line {line}, \
             column {column} (a vcrpy cassette nests a few), so it is not read",
            super::yaml_depth::MAX_DEPTH
        );
    }
    if text.contains(BINARY_TAG) {
        bail!("it holds the text {BINARY_TAG:?}, which the reader uses itself");
    }
    let text = text.replace("!!binary", BINARY_TAG);
    let mut doc: Yaml = yaml_serde::from_str(&text).map_err(|err| {
        let err = err.to_string().replace(BINARY_TAG, "!!binary");
        if err.contains("recursion limit exceeded") {
            // Block nesting: the library stops at its limit, in linear time.
            anyhow!(
                "not a vcrpy cassette: it nests collections too deeply for the YAML reader ({err})"
            )
        } else {
            anyhow!("not valid YAML: {err}")
        }
    })?;
    restore(&mut doc);
    let interactions = doc
        .get("interactions")
        .and_then(Yaml::as_sequence)
        .ok_or_else(|| anyhow!("no \"interactions\" list: not a vcrpy cassette"))?;
    Ok(interactions
        .iter()
        .map(|interaction| item(interaction, routes, recorded_at, tool))
        .collect())
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

/// The test pytest-recording recorded a tape for, from where it keeps it:
/// `DIR/cassettes/MODULE/NAME.yaml` belongs to `DIR/MODULE.py::NAME` (`Class.test` for a
/// method, `Class::test` in the node id). `None` for a tape kept elsewhere.
pub(crate) fn test_id(path: &Path) -> Option<String> {
    let cwd = std::env::current_dir().ok();
    let path = cwd
        .as_deref()
        .and_then(|cwd| path.strip_prefix(cwd).ok())
        .unwrap_or(path);
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

fn item(
    interaction: &Yaml,
    routes: &[Route],
    recorded_at: &str,
    tool: &str,
) -> anyhow::Result<Item> {
    let request = interaction
        .get("request")
        .ok_or_else(|| anyhow!("no \"request\""))?;
    let response = interaction
        .get("response")
        .ok_or_else(|| anyhow!("no \"response\""))?;
    let uri = request
        .get("uri")
        .and_then(Yaml::as_str)
        .ok_or_else(|| anyhow!("request.uri is missing"))?;
    let url = url::Url::parse(uri).with_context(|| format!("request.uri {uri:?}"))?;
    let method = request
        .get("method")
        .and_then(Yaml::as_str)
        .unwrap_or("POST")
        .to_ascii_uppercase();
    let Some((target, upstream, path)) = route_of(&url, routes) else {
        let mut url = url;
        // The query may hold a credential; the report does not need it.
        url.set_query(None);
        return Ok(Item::Download {
            method,
            url: url.to_string(),
        });
    };
    let request_headers = headers(request.get("headers")).context("request.headers")?;
    let request_body = part_body(request).context("request body")?;
    let status = response
        .get("status")
        .and_then(|s| s.get("code").or(Some(s)))
        .and_then(Yaml::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .ok_or_else(|| anyhow!("response.status.code is missing"))?;
    let response_headers = headers(response.get("headers")).context("response.headers")?;
    let raw = part_body(response).context("response body")?;
    let response_body = decode(raw, &response_headers)?;
    if request_body.is_empty()
        && matches!(method.as_str(), "POST" | "PUT" | "PATCH")
        && Profile::from_path(&path) != Profile::Http
    {
        bail!(
            "the request body is empty ({method} {path}); the tape's request holds {}: a custom \
             serializer may keep the body elsewhere, so it is not imported as an empty request",
            members(request)
        );
    }
    let declared_empty = header_value(&response_headers, "content-length") == Some("0");
    if response_body.is_empty()
        && !declared_empty
        && !matches!(status, 204 | 304)
        && method != "HEAD"
    {
        bail!(
            "the answer is empty (status {status}) and not declared so; the tape's response \
             holds {}: a custom serializer may keep the body elsewhere, so it is not imported \
             as an empty answer",
            members(response)
        );
    }
    Ok(Item::Exchange(Box::new(Exchange {
        request: Request {
            target,
            method,
            path,
            query: url.query().unwrap_or("").to_owned(),
            headers: request_headers,
            body: request_body,
        },
        status,
        headers: response_headers
            .into_iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("content-encoding"))
            .collect(),
        body: response_body,
        upstream,
        recorded_at: recorded_at.to_owned(),
        tool: tool.to_owned(),
        occurrence: 1,
        test: None,
        source: None,
    })))
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

fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

/// The route a recorded URL belongs to, its upstream, and the path a client of the proxy
/// sends: a route whose upstream has the URL's scheme, host and port (the route's own path
/// removed, keeping its last segment, which the proxy shares with the request path); else the
/// default route with the whole path when an LLM profile reads that path; else `None` (a
/// download from a host no route serves).
pub(crate) fn route_of(url: &url::Url, routes: &[Route]) -> Option<(String, String, String)> {
    let origin = url.origin().ascii_serialization();
    for route in routes {
        let Ok(base) = url::Url::parse(&route.base_url) else {
            continue;
        };
        if base.origin().ascii_serialization() != origin {
            continue;
        }
        let base_path = base.path().trim_end_matches('/');
        let kept = base_path.rsplit('/').next().unwrap_or("");
        let prefix = &base_path[..base_path.len() - kept.len()];
        let rest = url
            .path()
            .strip_prefix(prefix.trim_end_matches('/'))
            .filter(|rest| rest.starts_with('/'));
        if let Some(rest) = rest {
            return Some((route.name.clone(), route.base_url.clone(), rest.to_owned()));
        }
    }
    (Profile::from_path(url.path()) != Profile::Http)
        .then(|| (DEFAULT_TARGET.to_owned(), origin, url.path().to_owned()))
}

/// vcrpy headers: a map of names to lists of values (or single values).
fn headers(value: Option<&Yaml>) -> anyhow::Result<Vec<(String, String)>> {
    let Some(Yaml::Mapping(map)) = value else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (name, values) in map {
        let name = name
            .as_str()
            .ok_or_else(|| anyhow!("a header name is not a string"))?;
        let values = match values {
            Yaml::Sequence(list) => list.iter().collect::<Vec<_>>(),
            single => vec![single],
        };
        for value in values {
            let value = match value {
                Yaml::Null => continue,
                Yaml::String(s) => s.clone(),
                Yaml::Number(n) => n.to_string(),
                Yaml::Bool(b) => b.to_string(),
                // botocore records header values as bytes.
                Yaml::Tagged(tagged) if is_binary(&tagged.tag) => {
                    String::from_utf8(base64(&tagged.value)?.to_vec())
                        .map_err(|_| anyhow!("header {name}: its !!binary value is not text"))?
                }
                other => bail!("header {name}: unexpected value {}", kind(other)),
            };
            out.push((name.to_owned(), value));
        }
    }
    Ok(out)
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

fn base64(value: &Yaml) -> anyhow::Result<Bytes> {
    use base64::Engine;
    let Yaml::String(b64) = value else {
        bail!("a !!binary value is not text");
    };
    let compact: String = b64.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map(Bytes::from)
        .context("a !!binary value is not valid base64")
}

/// The body of a request or response: its `parsed_body` when a custom serializer stored one,
/// else its `body`.
fn part_body(part: &Yaml) -> anyhow::Result<Bytes> {
    match part.get("parsed_body") {
        Some(Yaml::Null) | None => body(part.get("body")),
        Some(parsed) => json_text(parsed).context("parsed_body"),
    }
}

/// A vcrpy body: a string, `!!binary` base64, `{string: ...}`, `{base64_string: ...}`, a
/// `parsed_body` inside it, a mapping or list written as YAML (JSON), or nothing.
fn body(value: Option<&Yaml>) -> anyhow::Result<Bytes> {
    use base64::Engine;
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
                let compact: String = b64.split_whitespace().collect();
                return base64::engine::general_purpose::STANDARD
                    .decode(compact)
                    .map(Bytes::from)
                    .context("body.base64_string is not valid base64");
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
        Some(other) => bail!("unexpected body: {}", kind(other)),
    }
}

/// A body written as YAML, as the JSON text it stands for.
fn json_text(value: &Yaml) -> anyhow::Result<Bytes> {
    Ok(Bytes::from(serde_json::to_vec(&to_json(value)?)?))
}

fn to_json(value: &Yaml) -> anyhow::Result<Value> {
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
                        .ok_or_else(|| anyhow!("the number {n} has no JSON form"))?,
                )
            }
        }
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Sequence(list) => Value::Array(list.iter().map(to_json).collect::<Result<_, _>>()?),
        Yaml::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (name, value) in map {
                let name = name
                    .as_str()
                    .ok_or_else(|| anyhow!("a member name is {}, not a string", kind(name)))?;
                out.insert(name.to_owned(), to_json(value)?);
            }
            Value::Object(out)
        }
        Yaml::Tagged(_) => bail!("a tagged value inside a JSON body"),
    })
}

/// The body without its content encoding: gzip, deflate and brotli are decoded; another
/// encoding is an error rather than a cassette holding compressed bytes.
pub(crate) fn decode(body: Bytes, headers: &[(String, String)]) -> anyhow::Result<Bytes> {
    let encoding = header_value(headers, "content-encoding").map(str::to_ascii_lowercase);
    let mut out = Vec::new();
    match encoding.as_deref() {
        None | Some("" | "identity") => return Ok(body),
        Some("gzip" | "x-gzip") => flate2::read::MultiGzDecoder::new(&body[..])
            .read_to_end(&mut out)
            .context("the gzip answer does not decode (truncated?)")?,
        Some("deflate") => flate2::read::ZlibDecoder::new(&body[..])
            .read_to_end(&mut out)
            .context("the deflate answer does not decode (truncated?)")?,
        Some("br") => brotli::Decompressor::new(&body[..], 4096)
            .read_to_end(&mut out)
            .context("the brotli answer does not decode (truncated?)")?,
        Some(other) => bail!(
            "the answer is {other}-encoded, which cannot be decoded here; re-record it with vcrpy's decode_compressed_response=True"
        ),
    };
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> Vec<Route> {
        [
            ("default", "https://api.openai.com"),
            ("anthropic", "https://api.anthropic.com"),
            ("groq", "https://api.groq.com/openai/v1"),
        ]
        .iter()
        .map(|(name, base)| Route::new(*name, *base))
        .collect()
    }

    #[test]
    fn urls_map_to_the_route_and_path_a_proxy_client_sends() {
        let of = |uri: &str| {
            route_of(&url::Url::parse(uri).unwrap(), &routes())
                .map(|(target, _, path)| format!("{target} {path}"))
        };
        let of = |uri: &str| of(uri).unwrap_or_else(|| "download".into());
        assert_eq!(
            of("https://api.openai.com/v1/chat/completions"),
            "default /v1/chat/completions"
        );
        assert_eq!(
            of("https://api.anthropic.com/v1/messages"),
            "anthropic /v1/messages"
        );
        assert_eq!(
            of("https://api.groq.com/openai/v1/chat/completions"),
            "groq /v1/chat/completions"
        );
        assert_eq!(
            of("https://elsewhere.example/v1/chat/completions"),
            "default /v1/chat/completions"
        );
        assert_eq!(of("https://files.example/fixtures/cat.png"), "download");
        // A host a route serves is imported whatever its path.
        assert_eq!(
            of("https://api.openai.com/v1/files/x"),
            "default /v1/files/x"
        );
    }

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

    #[test]
    fn bodies_in_every_shape_read_as_the_bytes_sent() {
        let read = |text: &str| {
            let text = text.replace("!!binary", BINARY_TAG);
            let mut doc: Yaml = yaml_serde::from_str(&text).unwrap();
            restore(&mut doc);
            part_body(&doc).map(|b| String::from_utf8_lossy(&b).into_owned())
        };
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
    fn binary_header_values_are_text() {
        let text = "h:\n  amz-sdk-invocation-id:\n  - !!binary |\n    NGE4Zg==\n  x-n: [3]\n"
            .replace("!!binary", BINARY_TAG);
        let doc: Yaml = yaml_serde::from_str(&text).unwrap();
        assert_eq!(
            headers(doc.get("h")).unwrap(),
            vec![
                ("amz-sdk-invocation-id".to_owned(), "4a8f".to_owned()),
                ("x-n".to_owned(), "3".to_owned())
            ]
        );
        let text = format!("h: {{x: [{BINARY_TAG} /w==]}}");
        let doc: Yaml = yaml_serde::from_str(&text).unwrap();
        assert!(format!("{:#}", headers(doc.get("h")).unwrap_err()).contains("header x"));
    }

    #[test]
    fn compressed_answers_are_decoded_and_bad_ones_refused() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(b"{\"ok\":true}").unwrap();
        let bytes = Bytes::from(gz.finish().unwrap());
        let gzip = vec![("Content-Encoding".to_owned(), "gzip".to_owned())];
        assert_eq!(
            decode(bytes.clone(), &gzip).unwrap(),
            Bytes::from("{\"ok\":true}")
        );
        let truncated = bytes.slice(..bytes.len() / 2);
        assert!(format!("{:#}", decode(truncated, &gzip).unwrap_err()).contains("truncated"));
        let mut writer = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22);
        writer.write_all(b"{\"ok\":1}").unwrap();
        let br = writer.into_inner();
        let brotli = vec![("content-encoding".to_owned(), "br".to_owned())];
        assert_eq!(
            decode(Bytes::from(br), &brotli).unwrap(),
            Bytes::from("{\"ok\":1}")
        );
        let zstd = vec![("content-encoding".to_owned(), "zstd".to_owned())];
        assert!(decode(bytes, &zstd)
            .unwrap_err()
            .to_string()
            .contains("decode_compressed_response"));
    }
}
