//! Replay: a cassette becomes the response, re-synthesized as a stream in the provider's own
//! events when the request asks for one.

use crate::cassette::Cassette;
use crate::response::{Response, ResponseBody};
use crate::stream::{self, StreamFormat, SynthesisOptions};
use cassette_keying::Profile;
use serde_json::Value;

/// Builds the replayed response, in the shape the upstream answered: a request that asks what
/// the recorded one asked (a stream or not) gets what the upstream sent (a stream
/// re-synthesized, or replayed event by event when the events were kept; JSON when the upstream
/// answered a streaming request with JSON). A request that asks the other way gets what it
/// asks for, since `stream` is not part of the key and one recording serves both.
pub(super) fn replay_response(
    profile: Profile,
    request_body: &[u8],
    cassette: Cassette,
    chunk_size: usize,
) -> std::result::Result<Response, String> {
    let request_json: Option<Value> = serde_json::from_slice(request_body).ok();
    let wants_stream = request_json
        .as_ref()
        .is_some_and(|b| stream::wants_stream(profile, b));
    let recorded_asked = cassette
        .request
        .body
        .as_json()
        .is_some_and(|b| stream::wants_stream(profile, b));
    let mut headers: Vec<(String, String)> = cassette
        .response
        .headers
        .iter()
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    sandbox_locations(&cassette, &mut headers);
    let stored = cassette.response;
    let recorded_format = stored.stream.as_deref().and_then(StreamFormat::from_name);
    let success = (200..300).contains(&stored.status);
    let as_stream = match recorded_format {
        // Generic streams are only ever replayed as they were recorded.
        Some(StreamFormat::GenericSse | StreamFormat::GenericNdjson) => true,
        _ if !success => false,
        _ if wants_stream == recorded_asked => recorded_format.is_some(),
        _ => wants_stream,
    };
    let synthesize_as = as_stream
        .then(|| recorded_format.or_else(|| StreamFormat::for_profile(profile)))
        .flatten();
    let body = match (synthesize_as, stored.body.as_json()) {
        (Some(format), Some(final_response)) => {
            let include_usage = request_json.as_ref().is_some_and(stream::include_usage);
            let options = SynthesisOptions {
                chunk_size,
                include_usage,
            };
            let pieces = match stored.events {
                // Recorded event by event (exact stream replay): sent as recorded.
                Some(events) => stream::synthesize(
                    format.framing(),
                    &serde_json::json!({ "events": events }),
                    &options,
                ),
                None => stream::synthesize(format, final_response, &options),
            }
            .map_err(|e| e.to_string())?;
            set_header(&mut headers, "content-type", format.content_type());
            set_header(&mut headers, "cache-control", "no-cache");
            ResponseBody::Stream(Box::pin(futures::stream::iter(
                pieces.into_iter().map(Ok::<_, std::io::Error>),
            )))
        }
        _ => {
            if recorded_format.is_some() {
                set_header(&mut headers, "content-type", "application/json");
            }
            ResponseBody::Full(stored.body.to_bytes()?)
        }
    };
    Ok(Response {
        status: stored.status,
        headers,
        body,
    })
}

/// Keeps a recorded redirect inside the sandbox: an absolute `Location` (recorded before
/// locations were rewritten at recording time) is pointed through the proxy when it leads under
/// the recorded upstream, and dropped when it leads anywhere else. Relative ones stay.
fn sandbox_locations(cassette: &Cassette, headers: &mut Vec<(String, String)>) {
    let called = || {
        crate::upstream::join_url(
            &cassette.upstream,
            &cassette.request.path,
            &cassette.request.query,
        )
    };
    headers.retain_mut(|(name, value)| {
        if !name.eq_ignore_ascii_case("location") || !value.contains("://") {
            return true;
        }
        let local = crate::upstream::location_through_proxy(
            value,
            &called(),
            &cassette.upstream,
            &cassette.target,
        );
        match local {
            Some(local) => {
                *value = local;
                true
            }
            None => false,
        }
    });
}

fn set_header(headers: &mut Vec<(String, String)>, name: &str, value: &str) {
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    headers.push((name.to_owned(), value.to_owned()));
}
