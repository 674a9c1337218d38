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
use axum::response::Response;
use http_body_util::BodyExt;
use serde_json::json;
use std::sync::Arc;

/// The scope a request names (`/_scope/ID/...`, taken off its path), else the default one.
pub(super) fn in_scope(mut request: HttpRequest) -> (String, HttpRequest) {
    let Some((id, path)) = scopes::split_scope(request.uri().path()) else {
        return (DEFAULT_SCOPE.to_owned(), request);
    };
    let id = id.to_owned();
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

/// The counts of every test that ended (`GET /_cassette/scopes`), for the runner's summary.
pub(super) async fn ended(State(state): State<Arc<AppState>>, request: HttpRequest) -> Response {
    let scopes = match state.control_caller(&request) {
        Ok(scopes) => scopes,
        Err(refused) => return *refused,
    };
    json_response(StatusCode::OK, &json!({ "ended": scopes.ended() }))
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
            .headers()
            .get("x-cassette-control")
            .and_then(|v| v.to_str().ok());
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
            let begin: Begin = if body.is_empty() {
                Begin::default()
            } else {
                match serde_json::from_slice(&body) {
                    Ok(begin) => begin,
                    Err(e) => return bad_request(&format!("a scope is begun with JSON: {e}")),
                }
            };
            let scope = match begin.scope() {
                Ok(scope) => scope,
                Err(reason) => return bad_request(&reason),
            };
            if let Err(reason) = scopes.begin_with(&state.recorder, &id, scope, &bypassed) {
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
            Ok(Control::Begin { id, scope }) => {
                // A test the recorder cannot begin is noted in its tally.
                let bypassed = self.forward.bypassed();
                let _ = scopes.begin_with(&self.recorder, &id, scope, &bypassed);
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
