//! Who may send API requests through a proxy that holds a per-run secret (see
//! [`crate::proxy::RunSecret`]): the secret is taken off every request first, from its path
//! (`/_run/SECRET/...`) or its `x-cassette-run` header, and a request without it is refused
//! before anything is routed, counted or sent, in every mode that may call an upstream.

use super::answer::error_response;
use super::next_url::SecretInPath;
use super::state::AppState;
use super::state::OnChannel;
use crate::proxy::run_secret::{split_run, RUN_SECRET_HEADER};
use axum::extract::{Request as HttpRequest, State};
use axum::http::{Extensions, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

/// A request that carried the proxy's run secret.
#[derive(Clone, Copy)]
struct Admitted;

/// The outermost layer, beside the control token's: takes the run secret off every request's
/// path and headers, so that no route, scope, key, recording, log line or upstream sees it, and
/// marks a request that carried the right one. A wrong secret is refused here, in every mode;
/// a path under `/_run/` on a proxy that has no secret too (it would otherwise be sent
/// upstream as it is).
pub(super) async fn take_run_secret(
    State(state): State<Arc<AppState>>,
    mut request: HttpRequest,
    next: Next,
) -> Response {
    let header = request.headers_mut().remove(RUN_SECRET_HEADER);
    let in_path = split_run(request.uri().path()).map(|(secret, rest)| {
        let admitted = state
            .run_secret
            .as_ref()
            .is_some_and(|own| own.matches(secret.as_bytes()));
        (admitted, rest.to_owned())
    });
    let mut admitted = false;
    if let Some((right, rest)) = in_path {
        if !right {
            return wrong_secret(state.run_secret.is_some(), "its path (/_run/…/)");
        }
        without_prefix(&mut request, &rest);
        admitted = true;
        if let Some(own) = &state.run_secret {
            // The URLs of the client's next requests keep the prefix its base URL had.
            let prefix = SecretInPath(own.path_prefix());
            request.extensions_mut().insert(prefix);
        }
    }
    if let Some(value) = header {
        match &state.run_secret {
            Some(own) if own.matches(value.as_bytes()) => admitted = true,
            Some(_) => return wrong_secret(true, "its x-cassette-run header"),
            // A proxy that needs no secret ignores one that is offered.
            None => {}
        }
    }
    if admitted {
        request.extensions_mut().insert(Admitted);
    }
    next.run(request).await
}

/// `request` with its path replaced by `rest` (its query, scheme and authority kept).
fn without_prefix(request: &mut HttpRequest, rest: &str) {
    let path_and_query = match request.uri().query() {
        Some(query) => format!("{rest}?{query}"),
        None => rest.to_owned(),
    };
    let mut parts = request.uri().clone().into_parts();
    if let Ok(rewritten) = path_and_query.parse() {
        parts.path_and_query = Some(rewritten);
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
}

impl AppState {
    /// The refusal of an API request that did not carry the run secret, when the proxy has one
    /// and its mode may call an upstream (a scope's mode is not asked: it never makes a
    /// replaying recorder call out, and a stranger can name any scope); `None` when it may be
    /// served. Requests on the channel (owner-only) need none.
    pub(super) fn refuse_stranger(&self, extensions: &Extensions) -> Option<Response> {
        self.run_secret.as_ref()?;
        if extensions.get::<Admitted>().is_some() || extensions.get::<OnChannel>().is_some() {
            return None;
        }
        let mode = self.recorder.mode();
        if !mode.may_call_upstream() {
            return None;
        }
        tracing::warn!(
            "refused a request without the run secret (mode {mode}): another program of this \
             machine, not the run that started the proxy"
        );
        let mut response = error_response(
            StatusCode::FORBIDDEN,
            "cassette_forbidden",
            &format!(
                "this cassette proxy is in {mode} mode, where it calls upstreams with its \
                 owner's API keys, and serves only the run that started it (cassette exec, the \
                 pytest plugin, the Node helpers): the run secret is missing. Send requests to \
                 the base URLs that run gave its clients (the proxy's URL followed by \
                 /_run/…/), or with the x-cassette-run header; nothing was sent upstream. A \
                 proxy started without a run secret serves any local program"
            ),
            Some(serde_json::Map::from_iter([(
                "missing".to_owned(),
                serde_json::Value::from("run_secret"),
            )])),
        );
        response
            .headers_mut()
            .insert("x-should-retry", http::HeaderValue::from_static("false"));
        Some(response)
    }
}

/// The refusal of a secret that is not this proxy's (or of one offered to a proxy that has
/// none), never quoting what was sent.
fn wrong_secret(has_secret: bool, where_: &str) -> Response {
    let message = if has_secret {
        format!(
            "the run secret in {where_} is not this cassette proxy's: use the base URLs the run \
             that started it gave its clients"
        )
    } else {
        format!(
            "this cassette proxy was started without a run secret, so it takes none in \
             {where_}: drop /_run/…/ from the base URL"
        )
    };
    let mut response = error_response(StatusCode::FORBIDDEN, "cassette_forbidden", &message, None);
    response
        .headers_mut()
        .insert("x-should-retry", http::HeaderValue::from_static("false"));
    response
}
