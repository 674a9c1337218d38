//! Every answer the proxy writes: an outcome as status, headers and body with `x-cassette`
//! and `x-cassette-key` (step 7 of the life of a request in ARCHITECTURE.md), and every error
//! as JSON in the shape the client's SDK parses (Ollama's own for Ollama clients), a miss with
//! the status its client will not retry; a recorded upstream failure as no answer at all.

use super::state::AppState;
use crate::error::{report, Error};
use crate::proxy::config::retries_409;
use crate::response::{Outcome, ResponseBody};
use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

impl AppState {
    /// The text of an error answer: the error with its causes, and the embedder's advice.
    pub(super) fn message(&self, err: &Error) -> String {
        let message = report(err);
        match self.advice.and_then(|advice| advice(err)) {
            Some(advice) => format!("{message} ({advice})"),
            None => message,
        }
    }

    /// Answers a recorder error. The client gets the details, but a 409 is easy to lose inside
    /// a test framework's output, so the proxy's own log keeps every error visible too.
    pub(super) fn error_response(&self, err: &Error) -> Response {
        self.answer_error(err, &Asker::default())
    }

    /// Answers an error of the recorder to a client: a miss gets the miss status, or the one
    /// for clients that retry a 409 whatever `x-should-retry` says; an Ollama client gets the
    /// error in Ollama's shape.
    pub(super) fn answer_error(&self, err: &Error, asker: &Asker) -> Response {
        let message = self.message(err);
        tracing::warn!("{message}");
        let mut response = recorder_error_response(err, &message, asker.ollama);
        if matches!(err, Error::Miss(_)) {
            *response.status_mut() = match (self.retrying_miss_status, &asker.user_agent) {
                (Some(status), Some(agent)) if retries_409(agent) => status,
                _ => self.miss_status,
            };
        }
        response
    }
}

/// Who asked, for the shape of an error answer.
#[derive(Debug, Default)]
pub(super) struct Asker {
    /// The client's `User-Agent`.
    pub(super) user_agent: Option<String>,
    /// Whether it asked an Ollama API (`/api/chat`, `/api/generate`, `/api/embed`), whose
    /// clients show an error whose `error` is not a string as `[object Object]`.
    pub(super) ollama: bool,
}

pub(super) fn outcome_response(outcome: Outcome) -> Response {
    let Outcome {
        key,
        source,
        response,
    } = outcome;
    let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let body = match response.body {
        ResponseBody::Full(bytes) => Body::from(bytes),
        ResponseBody::Stream(stream) => Body::from_stream(stream),
    };
    let mut out = Response::new(body);
    *out.status_mut() = status;
    let headers = out.headers_mut();
    for (name, value) in &response.headers {
        // A header the upstream sent that HTTP cannot carry again is dropped, not fatal.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(name, value);
        }
    }
    headers.insert("x-cassette", HeaderValue::from_static(source.as_str()));
    if let Ok(value) = HeaderValue::from_str(key.as_str()) {
        headers.insert("x-cassette-key", value);
    }
    out
}

/// The JSON error answer for a recorder error, with `message` as its text.
fn recorder_error_response(err: &Error, message: &str, ollama: bool) -> Response {
    let status =
        StatusCode::from_u16(err.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut detail = serde_json::Map::new();
    match err {
        Error::Miss(miss) => {
            detail.insert("key".into(), json!(miss.key));
            detail.insert("profile".into(), json!(miss.profile));
            detail.insert("target".into(), json!(miss.target));
            detail.insert("method".into(), json!(miss.method));
            detail.insert("path".into(), json!(miss.path));
            detail.insert("model".into(), json!(miss.model));
            detail.insert("store".into(), json!(miss.store));
            if let Some(repeat) = &miss.repeat {
                detail.insert("repeat".into(), json!(repeat));
            }
            detail.insert(
                "explanation".into(),
                serde_json::to_value(&miss.explanation).unwrap_or(Value::Null),
            );
        }
        Error::Upstream { endpoint, .. } => {
            detail.insert("upstream".into(), json!(endpoint));
        }
        Error::AnswerTooLarge { endpoint, limit } => {
            detail.insert("upstream".into(), json!(endpoint));
            detail.insert("limit".into(), json!(limit));
        }
        Error::NoUpstream { target } => {
            detail.insert("target".into(), json!(target));
        }
        _ => {
            if let Some(key) = err.key() {
                detail.insert("key".into(), json!(key));
            }
        }
    }
    let mut response = match ollama {
        true => ollama_error_response(status, err.kind(), message, detail),
        false => error_response(status, err.kind(), message, Some(detail)),
    };
    // Only an unreachable upstream is worth retrying; a miss, a bad request or a broken
    // configuration answers the same way every time.
    if !matches!(err, Error::Upstream { .. }) {
        response
            .headers_mut()
            .insert("x-should-retry", HeaderValue::from_static("false"));
    }
    response
}

pub(super) fn bad_request(reason: &str) -> Response {
    let mut response = error_response(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        &format!("invalid request: {reason}"),
        None,
    );
    response
        .headers_mut()
        .insert("x-should-retry", HeaderValue::from_static("false"));
    response
}

pub(super) fn error_response(
    status: StatusCode,
    kind: &str,
    message: &str,
    detail: Option<serde_json::Map<String, Value>>,
) -> Response {
    let mut error = serde_json::Map::new();
    error.insert("type".into(), json!(kind));
    error.insert("code".into(), json!(kind));
    error.insert("message".into(), json!(message));
    for (name, value) in detail.unwrap_or_default() {
        error.insert(name, value);
    }
    // `type: error` at the top is the Anthropic envelope; OpenAI clients read `error` only.
    json_response(status, &json!({ "type": "error", "error": error }))
}

/// An error in Ollama's shape, `{"error": "message"}`, which its clients show as the message;
/// the details stay beside it under `cassette`.
fn ollama_error_response(
    status: StatusCode,
    kind: &str,
    message: &str,
    mut detail: serde_json::Map<String, Value>,
) -> Response {
    detail.insert("type".into(), json!(kind));
    json_response(status, &json!({ "error": message, "cassette": detail }))
}

pub(super) fn json_response(status: StatusCode, value: &Value) -> Response {
    let mut response = (status, value.to_string()).into_response();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The longest a replayed upstream failure waits before its connection is closed: a recorded
/// timeout replays the wait it recorded, up to this, so a test of a timeout path stays short.
pub(crate) const FAILURE_DELAY_CAP: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a replayed `failure` waits before the connection closes.
pub(super) fn failure_delay(failure: cassette_tape::UpstreamFailure) -> std::time::Duration {
    std::time::Duration::from_millis(failure.after_ms()).min(FAILURE_DELAY_CAP)
}

/// Marks a response that is never sent: its connection is closed instead, without an answer
/// (what a replayed reset or timeout looks like to the client).
#[derive(Debug, Clone, Copy)]
pub(super) struct Abort;

/// The error that makes hyper close a connection without writing the response.
#[derive(Debug)]
pub(super) struct Aborted;

impl std::fmt::Display for Aborted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("closed without an answer: a recorded upstream failure replayed")
    }
}

impl std::error::Error for Aborted {}

/// The proxy's service, closing the connection where a response is marked [`Abort`]: hyper
/// writes nothing for a request whose service fails, and drops the connection.
#[derive(Clone)]
pub(super) struct Aborting<S>(pub(super) S);

impl<S, R, B> hyper::service::Service<R> for Aborting<S>
where
    S: hyper::service::Service<R, Response = http::Response<B>>,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<B>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn call(&self, request: R) -> Self::Future {
        let answered = self.0.call(request);
        Box::pin(async move {
            let response = answered.await.map_err(Into::into)?;
            if response.extensions().get::<Abort>().is_some() {
                return Err(Box::new(Aborted) as Self::Error);
            }
            Ok(response)
        })
    }
}
