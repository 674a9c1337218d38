//! vcrpy's `match_on`: which recorded interaction answers a request, as vcrpy's own matchers
//! (`vcr/matchers.py`, `vcr/request.py`) decide it.
//!
//! - `method`, `scheme`, `host`, `port`, `path`: equal (the host without case, the port the
//!   scheme's default when the URL names none);
//! - `query`: the same parameters in any order, blank ones dropped (vcrpy's
//!   `sorted(parse_qsl(query))`);
//! - `uri`: the same URL, parameters in the same order;
//! - `raw_body`: the same bytes; `body`: the same after the transformations vcrpy applies
//!   when both requests' headers ask for the same ones (chunked transfer undone, a form's
//!   parameters, JSON parsed), else the same bytes;
//! - `headers`: the same names (without case) with the same first values.
//!
//! Where a request reaches a tape through cassette rather than through the client library
//! vcrpy patched, two things differ from vcrpy, both on purpose: credentials are compared by
//! nothing (query parameters and headers that carry one are left out of `query`, `uri` and
//! `headers` on both sides: a suite filters them from its tapes, and today's request carries a
//! placeholder), and `headers` leaves out what the transport sets (`host`, `content-length`,
//! `connection`, `accept-encoding`, ...), which differ between any two hops. A matcher vcrpy
//! does not have (one a suite registered) is not applied, and named ([`MatchOn::unknown`]).

use crate::decode::header_value;
use crate::Interaction;
use serde_json::Value;
use std::collections::BTreeMap;

/// One of vcrpy's matchers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Matcher {
    /// The method.
    Method,
    /// The URL's scheme.
    Scheme,
    /// The URL's host.
    Host,
    /// The URL's port.
    Port,
    /// The URL's path.
    Path,
    /// The URL's parameters, in any order.
    Query,
    /// The whole URL.
    Uri,
    /// The body, after vcrpy's transformations.
    Body,
    /// The body's bytes.
    RawBody,
    /// The headers.
    Headers,
}

impl Matcher {
    /// Every matcher, by its vcrpy name.
    const ALL: [(Matcher, &'static str); 10] = [
        (Matcher::Method, "method"),
        (Matcher::Scheme, "scheme"),
        (Matcher::Host, "host"),
        (Matcher::Port, "port"),
        (Matcher::Path, "path"),
        (Matcher::Query, "query"),
        (Matcher::Uri, "uri"),
        (Matcher::Body, "body"),
        (Matcher::RawBody, "raw_body"),
        (Matcher::Headers, "headers"),
    ];

    /// The matcher vcrpy names `name`.
    pub fn from_name(name: &str) -> Option<Matcher> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(m, _)| *m)
    }

    /// Its vcrpy name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(m, _)| *m == self)
            .map_or("?", |(_, n)| n)
    }
}

/// vcrpy's default `match_on`.
pub const DEFAULT_MATCH_ON: [Matcher; 6] = [
    Matcher::Method,
    Matcher::Scheme,
    Matcher::Host,
    Matcher::Port,
    Matcher::Path,
    Matcher::Query,
];

/// A `match_on` list as a suite gives it: the matchers applied, and the names of those that
/// are not vcrpy's (a suite's own, registered with `register_matcher`), which are not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchOn {
    /// The matchers applied, in order.
    pub matchers: Vec<Matcher>,
    /// The names given that are not vcrpy's matchers.
    pub unknown: Vec<String>,
}

impl MatchOn {
    /// The list of names, vcrpy's default when empty.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> MatchOn {
        if names.is_empty() {
            return MatchOn::default();
        }
        let mut out = MatchOn {
            matchers: Vec::new(),
            unknown: Vec::new(),
        };
        for name in names {
            match Matcher::from_name(name.as_ref()) {
                Some(matcher) => out.matchers.push(matcher),
                None => out.unknown.push(name.as_ref().to_owned()),
            }
        }
        out
    }

    /// Whether every matcher applied finds `sent` and `recorded` alike.
    pub fn matches(&self, sent: &Sent<'_>, recorded: &Interaction) -> bool {
        self.matchers.iter().all(|m| matches(*m, sent, recorded))
    }

    /// The names, as given (applied ones first).
    pub fn names(&self) -> Vec<String> {
        self.matchers
            .iter()
            .map(|m| m.name().to_owned())
            .chain(self.unknown.iter().cloned())
            .collect()
    }
}

impl Default for MatchOn {
    fn default() -> Self {
        MatchOn {
            matchers: DEFAULT_MATCH_ON.to_vec(),
            unknown: Vec::new(),
        }
    }
}

/// Today's request, as the vendor would have received it.
#[derive(Debug, Clone, Copy)]
pub struct Sent<'a> {
    /// The method.
    pub method: &'a str,
    /// The vendor's URL.
    pub uri: &'a url::Url,
    /// The headers.
    pub headers: &'a [(String, String)],
    /// The body.
    pub body: &'a [u8],
}

/// Whether `matcher` finds today's request `sent` and the tape's `recorded` alike.
pub fn matches(matcher: Matcher, sent: &Sent<'_>, recorded: &Interaction) -> bool {
    let (now, then) = (sent.uri, &recorded.uri);
    match matcher {
        Matcher::Method => sent.method == recorded.method,
        Matcher::Scheme => now.scheme() == then.scheme(),
        Matcher::Host => now.host_str() == then.host_str(),
        Matcher::Port => now.port_or_known_default() == then.port_or_known_default(),
        Matcher::Path => now.path() == then.path(),
        Matcher::Query => {
            let sorted = |url: &url::Url| {
                let mut pairs = query(url);
                pairs.retain(|(_, value)| !value.is_empty());
                pairs.sort();
                pairs
            };
            sorted(now) == sorted(then)
        }
        Matcher::Uri => {
            now.scheme() == then.scheme()
                && now.host_str() == then.host_str()
                && now.port_or_known_default() == then.port_or_known_default()
                && now.path() == then.path()
                && query(now) == query(then)
        }
        Matcher::RawBody => sent.body == &recorded.request_body[..],
        Matcher::Body => body_matches(
            sent.headers,
            sent.body,
            &recorded.request_headers,
            &recorded.request_body,
        ),
        Matcher::Headers => {
            compared_headers(sent.headers) == compared_headers(&recorded.request_headers)
        }
    }
}

/// A URL's parameters, decoded, without those that carry a credential.
fn query(url: &url::Url) -> Vec<(String, String)> {
    url.query_pairs()
        .filter(|(name, _)| !cassette_keying::is_query_credential(name))
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect()
}

/// Headers the transport (or cassette's hop) sets, which differ between any two hops.
const TRANSPORT: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "accept-encoding",
    "te",
    "upgrade",
    "proxy-connection",
];

/// Headers that carry a credential: a suite filters them from its tapes.
const CREDENTIALS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "cookie",
];

/// Whether a header (its name in lower case) carries a credential, which a suite filters from
/// its tapes and cassette never compares, stores or hands on.
pub fn credential_header(name: &str) -> bool {
    CREDENTIALS.contains(&name)
}

/// Headers as vcrpy's `headers` matcher compares them: names without case, the first value of
/// each, without transport headers and credentials.
fn compared_headers(headers: &[(String, String)]) -> BTreeMap<String, &str> {
    let mut out = BTreeMap::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        if TRANSPORT.contains(&name.as_str())
            || credential_header(&name)
            || name.starts_with("x-cassette")
        {
            continue;
        }
        out.entry(name).or_insert(value.as_str());
    }
    out
}

/// vcrpy's body transformations, asked for by a request's headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transform {
    Dechunk,
    Form,
    Json,
}

fn transforms(headers: &[(String, String)]) -> Vec<Transform> {
    let has = |name: &str, value: &str| {
        header_value(headers, name).is_some_and(|v| v.to_ascii_lowercase().contains(value))
    };
    let mut out = Vec::new();
    if has("transfer-encoding", "chunked") {
        out.push(Transform::Dechunk);
    }
    if has("content-type", "application/x-www-form-urlencoded") {
        out.push(Transform::Form);
    }
    if has("content-type", "application/json") {
        out.push(Transform::Json);
    }
    out
}

/// A body on its way through the transformations.
#[derive(Debug, PartialEq)]
enum Shape {
    Bytes(Vec<u8>),
    Form(BTreeMap<String, Vec<String>>),
    Json(Option<Value>),
}

fn body_matches(
    now_headers: &[(String, String)],
    now: &[u8],
    then_headers: &[(String, String)],
    then: &[u8],
) -> bool {
    let mut list = transforms(now_headers);
    if list != transforms(then_headers) {
        list.clear();
    }
    let shaped = |body: &[u8]| {
        list.iter()
            .try_fold(Shape::Bytes(body.to_vec()), |shape, t| transform(shape, *t))
    };
    match (shaped(now), shaped(then)) {
        (Some(Shape::Json(Some(a))), Some(Shape::Json(Some(b)))) => json_equal(&a, &b),
        (Some(a), Some(b)) => a == b,
        // A body a transformation cannot read (vcrpy would raise): compared as bytes.
        _ => now == then,
    }
}

fn transform(shape: Shape, transform: Transform) -> Option<Shape> {
    let Shape::Bytes(body) = shape else {
        // vcrpy hands a transformed body on to the next transformation, which then fails.
        return None;
    };
    Some(match transform {
        Transform::Dechunk => Shape::Bytes(dechunk(&body)?),
        Transform::Form => {
            let text = std::str::from_utf8(&body).ok().filter(|t| t.is_ascii())?;
            let mut form: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (name, value) in url::form_urlencoded::parse(text.as_bytes()) {
                if !value.is_empty() {
                    form.entry(name.into_owned())
                        .or_default()
                        .push(value.into_owned());
                }
            }
            Shape::Form(form)
        }
        Transform::Json if body.is_empty() => Shape::Json(None),
        Transform::Json => Shape::Json(Some(serde_json::from_slice(&body).ok()?)),
    })
}

/// A chunked body's data (`45\r\n<69 bytes>\r\n0\r\n\r\n`); a body that does not start like one
/// is taken as it is, as vcrpy's `_dechunk` does; a malformed one is `None`.
fn dechunk(body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let digits = body[pos..]
            .iter()
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        let after = pos + digits;
        if digits == 0 || body.get(after..after + 2) != Some(b"\r\n") {
            return (pos == 0).then(|| body.to_vec());
        }
        let size = usize::from_str_radix(std::str::from_utf8(&body[pos..after]).ok()?, 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        let start = after + 2;
        let end = start.checked_add(size)?;
        if body.get(end..end + 2) != Some(b"\r\n") {
            return None;
        }
        out.extend_from_slice(&body[start..end]);
        pos = end + 2;
    }
}

/// JSON equality as Python's: numbers by value (`1 == 1.0`), the rest structurally.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(name, value)| y.get(name).is_some_and(|other| json_equal(value, other)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn recorded(method: &str, uri: &str, headers: &[(&str, &str)], body: &str) -> Interaction {
        Interaction {
            method: method.to_owned(),
            uri: url::Url::parse(uri).unwrap(),
            unreadable_uri: None,
            request_headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
            request_body: Bytes::from(body.to_owned()),
            status: 200,
            response_headers: Vec::new(),
            response_body: Bytes::from("{}"),
            left_out: Vec::new(),
        }
    }

    /// Today's request: method, URL, headers and body.
    type Asked<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a str);

    fn check(matcher: &str, (method, uri, headers, body): Asked<'_>, tape: &Interaction) -> bool {
        let uri = url::Url::parse(uri).unwrap();
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect();
        let sent = Sent {
            method,
            uri: &uri,
            headers: &headers,
            body: body.as_bytes(),
        };
        matches(Matcher::from_name(matcher).unwrap(), &sent, tape)
    }

    #[test]
    fn each_matcher_compares_what_vcrpy_compares() {
        let json = [("Content-Type", "application/json")];
        let tape = recorded(
            "POST",
            "https://API.example.com/v1/chat?b=2&a=1&blank=&key=AIzaRecorded",
            &json,
            r#"{"model": "m", "n": 1}"#,
        );
        let same_url = "https://api.example.com:443/v1/chat?a=1&b=2&key=cassette";
        let table: &[(&str, Asked<'_>, bool)] = &[
            ("method", ("POST", same_url, &[], ""), true),
            ("method", ("GET", same_url, &[], ""), false),
            (
                "scheme",
                ("POST", "http://api.example.com/v1/chat", &[], ""),
                false,
            ),
            ("host", ("POST", "https://api.example.com/x", &[], ""), true),
            (
                "host",
                ("POST", "https://other.example.com/v1/chat", &[], ""),
                false,
            ),
            ("port", ("POST", same_url, &[], ""), true),
            (
                "port",
                ("POST", "https://api.example.com:8443/v1/chat", &[], ""),
                false,
            ),
            ("path", ("POST", same_url, &[], ""), true),
            (
                "path",
                ("POST", "https://api.example.com/v1/chat/", &[], ""),
                false,
            ),
            // Any order, blank parameters dropped, credentials compared by nothing.
            ("query", ("POST", same_url, &[], ""), true),
            (
                "query",
                ("POST", "https://api.example.com/v1/chat?a=1", &[], ""),
                false,
            ),
            (
                "query",
                (
                    "POST",
                    "https://api.example.com/v1/chat?a=1&b=2&b=3",
                    &[],
                    "",
                ),
                false,
            ),
            // The same parameters in another order are another URI.
            ("uri", ("POST", same_url, &[], ""), false),
            (
                "uri",
                (
                    "POST",
                    "https://api.example.com/v1/chat?b=2&a=1&blank=",
                    &[],
                    "",
                ),
                true,
            ),
            // JSON bodies by value when both say JSON; otherwise by bytes.
            (
                "body",
                ("POST", same_url, &json, r#"{"n":1.0,"model":"m"}"#),
                true,
            ),
            (
                "body",
                ("POST", same_url, &json, r#"{"n":2,"model":"m"}"#),
                false,
            ),
            (
                "body",
                ("POST", same_url, &[], r#"{"n":1,"model":"m"}"#),
                false,
            ),
            (
                "body",
                ("POST", same_url, &[], r#"{"model": "m", "n": 1}"#),
                true,
            ),
            (
                "raw_body",
                ("POST", same_url, &json, r#"{"n":1,"model":"m"}"#),
                false,
            ),
            (
                "raw_body",
                ("POST", same_url, &[], r#"{"model": "m", "n": 1}"#),
                true,
            ),
        ];
        for (matcher, sent, expected) in table {
            assert_eq!(
                check(matcher, *sent, &tape),
                *expected,
                "{matcher} {sent:?}"
            );
        }
    }

    #[test]
    fn forms_and_chunked_bodies_are_compared_as_vcrpy_reads_them() {
        let form = [("content-type", "application/x-www-form-urlencoded")];
        let tape = recorded("POST", "https://h.example/", &form, "a=1&b=x+y&c=");
        let url = "https://h.example/";
        assert!(check("body", ("POST", url, &form, "b=x%20y&a=1"), &tape));
        assert!(!check("body", ("POST", url, &form, "b=x&a=1"), &tape));
        let chunked = [("Transfer-Encoding", "chunked")];
        let tape = recorded(
            "POST",
            url,
            &chunked,
            "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        );
        assert!(check("body", ("POST", url, &chunked, "hello world"), &tape));
        assert!(!check("body", ("POST", url, &chunked, "hello"), &tape));
        assert_eq!(dechunk(b"5\r\nhel"), None);
    }

    #[test]
    fn headers_match_without_case_transport_or_credentials() {
        let tape = recorded(
            "POST",
            "https://h.example/",
            &[
                ("Content-Type", "application/json"),
                ("X-Trace", "a"),
                ("X-Trace", "b"),
            ],
            "",
        );
        let url = "https://h.example/";
        let today: &[(&str, &str)] = &[
            ("content-type", "application/json"),
            ("x-trace", "a"),
            ("host", "127.0.0.1:5"),
            ("authorization", "Bearer cassette"),
            ("content-length", "0"),
        ];
        assert!(check("headers", ("POST", url, today, ""), &tape));
        assert!(!check(
            "headers",
            ("POST", url, &[("x-trace", "a")], ""),
            &tape
        ));
    }

    #[test]
    fn match_on_names_what_it_does_not_apply() {
        let on = MatchOn::parse(&["method", "body", "my_matcher"]);
        assert_eq!(on.matchers, [Matcher::Method, Matcher::Body]);
        assert_eq!(on.unknown, ["my_matcher"]);
        assert_eq!(on.names(), ["method", "body", "my_matcher"]);
        assert_eq!(MatchOn::parse::<&str>(&[]), MatchOn::default());
        assert_eq!(
            MatchOn::default().names(),
            ["method", "scheme", "host", "port", "path", "query"]
        );
    }
}
