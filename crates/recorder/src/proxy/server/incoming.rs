//! Reading a request for an upstream: its route (a first path segment naming one), the body
//! limit (an over-limit body is drained before the 413, so the client sees it), the body stall
//! timeout, and headers HTTP can carry on; the result is the one owned [`Request`].

use super::answer::bad_request;
use super::channel::Routed;
use super::state::AppState;
use crate::error::Error;
use axum::body::Body;
use axum::extract::Request as HttpRequest;
use axum::response::Response;
use bytes::Bytes;
use cassette_tape::Request;
use http_body_util::BodyExt;

/// How much of an over-limit body is still read (and discarded) before the 413 goes out, so
/// the client, still sending, sees the answer rather than a reset connection.
const DRAIN_AFTER_LIMIT: usize = 16 * 1024 * 1024;

/// Turns an HTTP request into the recorder's request: routes it, checks the body limit and the
/// headers, reads the body.
pub(super) async fn read_request(
    state: &AppState,
    request: HttpRequest,
) -> Result<Request, Response> {
    let (parts, body) = request.into_parts();
    let limit = state.max_body;

    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(length) = declared {
        if length > limit as u64 {
            drain(body, DRAIN_AFTER_LIMIT).await;
            return Err(state.error_response(&Error::BodyTooLarge {
                size: usize::try_from(length).unwrap_or(usize::MAX),
                limit,
            }));
        }
    }

    let mut headers = Vec::with_capacity(parts.headers.len());
    for (name, value) in &parts.headers {
        match value.to_str() {
            Ok(value) => headers.push((name.as_str().to_owned(), value.to_owned())),
            Err(_) => {
                return Err(bad_request(&format!(
                    "header `{name}` is not visible ASCII; cassette cannot key or forward it"
                )))
            }
        }
    }

    let (target, path) = state.route_of(&parts.extensions, parts.uri.path());
    let query = parts.uri.query().unwrap_or("").to_owned();

    let declared = declared.and_then(|length| usize::try_from(length).ok());
    let body = read_body(state, body, declared).await?;

    // A body declared as JSON that is not is refused by the recorder, from what keying read.
    Ok(Request {
        target,
        method: parts.method.as_str().to_owned(),
        path,
        query,
        headers,
        body,
    })
}

impl AppState {
    /// The route (target) of a request and the path its upstream sees: the one its URL chose
    /// when it came over the channel, else by its first path segment.
    pub(super) fn route_of(
        &self,
        extensions: &http::Extensions,
        raw_path: &str,
    ) -> (String, String) {
        match extensions.get::<Routed>() {
            Some(Routed(target)) => {
                let path = if raw_path.is_empty() { "/" } else { raw_path };
                (target.clone(), path.to_owned())
            }
            None => route(&self.mounts, &self.unrouted, raw_path),
        }
    }
}

/// Splits a request path into the route (target) and the path the upstream sees; a path that
/// names no mounted route goes to `unrouted`.
pub(super) fn route(mounts: &[String], unrouted: &str, raw_path: &str) -> (String, String) {
    let trimmed = raw_path.trim_start_matches('/');
    let (first, rest) = match trimmed.find('/') {
        Some(i) => (&trimmed[..i], &trimmed[i..]),
        None => (trimmed, ""),
    };
    if !first.is_empty() && mounts.iter().any(|m| m == first) {
        let path = if rest.is_empty() { "/" } else { rest };
        (first.to_owned(), path.to_owned())
    } else {
        let path = if raw_path.is_empty() { "/" } else { raw_path };
        (unrouted.to_owned(), path.to_owned())
    }
}

async fn read_body(state: &AppState, body: Body, length: Option<usize>) -> Result<Bytes, Response> {
    let limit = state.max_body;
    let mut body = body;
    // The declared length (already checked against the limit) saves regrowing the buffer.
    let mut buffer: Vec<u8> = Vec::with_capacity(length.unwrap_or(0).min(limit));
    loop {
        let frame = match tokio::time::timeout(state.body_timeout, body.frame()).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(_) => {
                return Err(state.error_response(&Error::SlowBody {
                    idle: state.body_timeout,
                }))
            }
        };
        let frame =
            frame.map_err(|e| bad_request(&format!("cannot read the request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if buffer.len() + data.len() > limit {
                let size = buffer.len() + data.len();
                drain(body, DRAIN_AFTER_LIMIT).await;
                return Err(state.error_response(&Error::BodyTooLarge { size, limit }));
            }
            buffer.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(buffer))
}

/// Reads and discards up to `budget` more bytes of a body.
async fn drain(mut body: Body, budget: usize) {
    let mut seen = 0usize;
    while seen < budget {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    seen += data.len();
                }
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_TARGET;

    #[test]
    fn routes_strip_the_mount_and_default_keeps_the_path() {
        let mounts = vec!["anthropic".to_owned(), "ollama".to_owned()];
        let table = [
            ("/v1/chat/completions", "default", "/v1/chat/completions"),
            ("/anthropic/v1/messages", "anthropic", "/v1/messages"),
            ("/anthropic", "anthropic", "/"),
            ("/anthropicx/v1", "default", "/anthropicx/v1"),
            ("/ollama/api/chat", "ollama", "/api/chat"),
            ("/", "default", "/"),
        ];
        for (raw, target, path) in table {
            assert_eq!(
                route(&mounts, DEFAULT_TARGET, raw),
                (target.to_owned(), path.to_owned()),
                "{raw}"
            );
        }
        // A proxy standing where one upstream is expected routes what names no route there.
        assert_eq!(
            route(&mounts, "ollama", "/api/chat"),
            ("ollama".to_owned(), "/api/chat".to_owned())
        );
        assert_eq!(
            route(&mounts, "ollama", "/anthropic/v1/messages"),
            ("anthropic".to_owned(), "/v1/messages".to_owned())
        );
    }
}
