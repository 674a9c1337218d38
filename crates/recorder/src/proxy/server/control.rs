//! The test runners' control of the proxy: the endpoint (`/_cassette/scopes/ID`) that begins,
//! tallies and ends a test's scope, the lines of the control pipe that do the same, and the
//! `/_scope/ID/` prefix that puts a request in a scope.

use super::answer::{bad_request, error_response, json_response};
use super::state::AppState;
#[cfg(unix)]
use crate::proxy::scopes::Control;
use crate::proxy::scopes::{self, Begin, Read, RunnerRefused, Scopes, DEFAULT_SCOPE};
use axum::extract::{Request as HttpRequest, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt;
use serde_json::json;
use std::sync::Arc;

/// The header of an in-process transport naming the scope (a test's alias) of the test that
/// sent the request, from whichever of its threads or tasks: the test a background thread
/// started is known where the scope the runner's pipe last began is not.
const SCOPE_HEADER: &str = "x-cassette-scope";

/// The scope a request's [`SCOPE_HEADER`] named (taken off by [`take_token`]).
#[derive(Debug, Clone)]
pub(super) struct NamedScope(pub(super) String);

/// The scope a request names (its [`SCOPE_HEADER`], else `/_scope/ID/...`, taken off its path
/// either way), else the default one.
pub(super) fn in_scope(mut request: HttpRequest) -> (String, HttpRequest) {
    let named = request
        .extensions()
        .get::<NamedScope>()
        .map(|n| n.0.clone());
    let Some((id, path)) = scopes::split_scope(request.uri().path()) else {
        return (named.unwrap_or_else(|| DEFAULT_SCOPE.to_owned()), request);
    };
    let id = named.unwrap_or_else(|| id.to_owned());
    let path_and_query = match request.uri().query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_owned(),
    };
    let mut parts = request.uri().clone().into_parts();
    if let Ok(rewritten) = path_and_query.parse() {
        parts.path_and_query = Some(rewritten);
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    (id, request)
}

/// The header carrying the control token of the runner that started the proxy.
const TOKEN_HEADER: &str = "x-cassette-control";

/// The control token a request presented, taken off its headers (see [`take_token`]).
#[derive(Clone)]
struct ControlToken(String);

/// The outermost layer: takes the control token off every request before anything else sees
/// it, so no route, forward-proxy request or channel request can send it upstream or record
/// it; the control endpoint reads it from the request's extensions. The scope header is taken
/// off alike (it names a test, nothing an upstream is told).
pub(super) async fn take_token(mut request: HttpRequest, next: Next) -> Response {
    let mut take = |name: &str| match request.headers_mut().remove(name) {
        Some(value) => value.to_str().ok().map(str::to_owned),
        None => None,
    };
    // A repeated header is removed whole by `remove`; only its first value is looked at.
    let (token, named) = (take(TOKEN_HEADER), take(SCOPE_HEADER));
    if let Some(token) = token {
        request.extensions_mut().insert(ControlToken(token));
    }
    if let Some(named) = named {
        request.extensions_mut().insert(NamedScope(named));
    }
    next.run(request).await
}

/// Whether `path` is under `/_cassette/`, the proxy's own paths (those of its control endpoint
/// and counters): its first segment, percent-decoded and in any case, begins `_cassette`. Such
/// a path that names no endpoint is a 404 from the proxy, never an upstream request.
pub(super) fn is_own_path(path: &str) -> bool {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    let decoded = percent_decoded(first).to_ascii_lowercase();
    decoded.trim_start_matches('/').starts_with("_cassette")
}

/// `text` with its `%XX` escapes decoded (bytes that are not UTF-8 are replaced).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let (h, l) = (hex(h).unwrap_or(0), hex(l).unwrap_or(0));
                out.push(u8::try_from(h * 16 + l).unwrap_or(0));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The 404 of a path under `/_cassette/` that names none of the proxy's endpoints.
pub(super) fn not_own_endpoint(path: &str) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "cassette_not_found",
        &format!(
            "`{path}` is under /_cassette/, the proxy's own paths, and names none of its \
             endpoints (/_cassette/stats, /_cassette/scopes, /_cassette/scopes/ID); it is never \
             sent upstream"
        ),
        None,
    )
}

/// The refusal of a request under `/_scope/ID/` (or naming ID in `x-cassette-scope`) for a
/// scope its runner never began: a client error, not retried (a made-up scope would otherwise
/// cost the proxy memory for ever).
pub(super) fn unknown_scope(id: &str) -> Response {
    let id: String = id.chars().take(128).collect();
    let mut response = error_response(
        StatusCode::BAD_REQUEST,
        "cassette_unknown_scope",
        &format!(
            "scope `{id}` was never begun: the test runner that started the proxy begins a \
             scope (PUT /_cassette/scopes/{id}, or a `begin` line on the control pipe; a \
             test's `alias`) before its requests use /_scope/{id}/ or x-cassette-scope"
        ),
        None,
    );
    response
        .headers_mut()
        .insert("x-should-retry", http::HeaderValue::from_static("false"));
    response
}

/// The counts of every test that ended (`GET /_cassette/scopes`), and the tallies of the
/// requests that came for a test after it ended (`late`), for the runner's summary.
pub(super) async fn ended(State(state): State<Arc<AppState>>, request: HttpRequest) -> Response {
    let scopes = match state.control_caller(&request) {
        Ok(scopes) => scopes,
        Err(refused) => return *refused,
    };
    json_response(
        StatusCode::OK,
        &json!({ "ended": scopes.ended(), "late": scopes.late() }),
    )
}

impl AppState {
    /// The scopes, when `request` may use the control endpoint: the proxy has one and the
    /// caller holds its token.
    fn control_caller(&self, request: &HttpRequest) -> Result<&Scopes, Box<Response>> {
        let Some(scopes) = &self.scopes else {
            return Err(Box::new(error_response(
                StatusCode::NOT_FOUND,
                "cassette_not_found",
                "this proxy has no control endpoint: it was started without a control token",
                None,
            )));
        };
        let token = request
            .extensions()
            .get::<ControlToken>()
            .map(|ControlToken(token)| token.as_str());
        if !scopes.authorized(token) {
            return Err(Box::new(error_response(
                StatusCode::FORBIDDEN,
                "cassette_forbidden",
                "the control endpoint answers only the test runner that started the proxy (the \
                 x-cassette-control token of its ready line)",
                None,
            )));
        }
        Ok(scopes)
    }
}

/// The control endpoint of test runners (`/_cassette/scopes/ID`): `PUT` begins a test in the
/// scope (a JSON body: `test`, and optionally `mode` and `repeats`), `GET` tells what the scope
/// saw so far, with its failure text, `DELETE` tells it and ends the test (`?unused=true` also
/// lists the recordings the test made in an earlier run and did not use, `?report=true` leaves
/// out of the next read's failure text what this one told, and `DELETE`'s body may hand in
/// the requests the runner refused itself: `{"refused": [{"host": "h:443", "requests": 2}]}`).
pub(super) async fn control(
    State(state): State<Arc<AppState>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    request: HttpRequest,
) -> Response {
    let scopes = match state.control_caller(&request) {
        Ok(scopes) => scopes,
        Err(refused) => return *refused,
    };
    if !scopes::valid_scope_id(&id) {
        return bad_request("a scope id is 1 to 128 letters, digits, `-`, `_` or `.`");
    }
    let method = request.method().clone();
    let query = request.uri().query().unwrap_or_default();
    let asks = |what: &str| query.split('&').any(|p| p == what);
    let (unused, report, sent) = (
        asks("unused=true"),
        asks("report=true"),
        asks("requests=true"),
    );
    let bypassed = state.forward.bypassed();
    match method {
        Method::PUT => {
            let body = match request.into_body().collect().await {
                Ok(body) => body.to_bytes(),
                Err(e) => return bad_request(&format!("cannot read the body: {e}")),
            };
            let mut begin: Begin = if body.is_empty() {
                Begin::default()
            } else {
                match serde_json::from_slice(&body) {
                    Ok(begin) => begin,
                    Err(e) => return bad_request(&format!("a scope is begun with JSON: {e}")),
                }
            };
            let alias = begin.take_alias();
            let scope = match begin.scope() {
                Ok(scope) => scope,
                Err(reason) => return bad_request(&reason),
            };
            if let Err(reason) = scopes.begin_with(&state.recorder, &id, scope, alias, &bypassed) {
                return bad_request(&reason);
            }
            json_response(StatusCode::OK, &json!({"scope": id}))
        }
        Method::GET | Method::DELETE => {
            let end = method == Method::DELETE;
            let body = match request.into_body().collect().await {
                Ok(body) => body.to_bytes(),
                Err(e) => return bad_request(&format!("cannot read the body: {e}")),
            };
            let refused = match RunnerRefused::from_body(&body) {
                Ok(refused) => refused,
                Err(reason) => return bad_request(&reason),
            };
            let recorded = match (unused, scopes.test(&id)) {
                (false, _) => None,
                (true, None) => Some(Vec::new()),
                (true, Some(test)) => Some(
                    state
                        .recorder
                        .recordings_of_test(&test)
                        .await
                        .iter()
                        .map(|k| k.to_string())
                        .collect(),
                ),
            };
            let read = Read {
                end,
                report,
                recorded,
                refused,
                sent,
            };
            let tally = scopes
                .read(&id, &bypassed, read)
                .with_tapes(&state.recorder, end);
            json_response(StatusCode::OK, &json!(tally))
        }
        _ => error_response(
            StatusCode::METHOD_NOT_ALLOWED,
            "cassette_method_not_allowed",
            "the control endpoint takes PUT, GET and DELETE",
            None,
        ),
    }
}

impl AppState {
    /// Follows one line of the control pipe.
    #[cfg(unix)]
    pub(super) fn follow_line(&self, line: Result<&[u8], String>) {
        let Some(scopes) = &self.scopes else {
            return;
        };
        match line.and_then(Control::parse) {
            Ok(Control::Begin { id, scope, alias }) => {
                // A test the recorder cannot begin is noted in its tally.
                let bypassed = self.forward.bypassed();
                let _ = scopes.begin_with(&self.recorder, &id, scope, alias, &bypassed);
            }
            Ok(Control::End { id }) => {
                let end = Read {
                    end: true,
                    ..Read::default()
                };
                let tally = scopes
                    .read(&id, &self.forward.bypassed(), end)
                    .with_tapes(&self.recorder, true);
                scopes.tell_idle(&tally);
            }
            // Whichever test runs now cannot be vouched for: the runner reads why.
            Err(reason) => scopes.count(DEFAULT_SCOPE, |tally| tally.control_error(reason)),
        }
    }
}
