//! Replay: a cassette becomes the response, re-synthesized as a stream in the provider's own
//! events when the request asks for one.

use crate::response::{BodyStream, Response, ResponseBody};
use bytes::Bytes;
use cassette_keying::{Profile, Streaming};
use cassette_tape::headers::set_header;
use cassette_tape::{Cassette, StoredBody};
use cassette_wire::{self as stream, StreamFormat, SynthesisOptions};
use futures::StreamExt;
use serde_json::Value;

/// Builds the replayed response, in the shape the upstream answered: a request that asks what
/// the recorded one asked (a stream or not) gets what the upstream sent (a stream
/// re-synthesized, or replayed event by event when the events were kept; JSON when the upstream
/// answered a streaming request with JSON). A request that asks the other way gets what it
/// asks for, since `stream` is not part of the key and one recording serves both. A stream is
/// in the format the request expects (`query` tells Gemini's event stream from its JSON
/// array), whatever format the recording was made in.
pub(super) fn replay_response(
    profile: Profile,
    streaming: Streaming,
    query: &str,
    cassette: Cassette,
    chunk_size: usize,
) -> std::result::Result<Response, String> {
    let wants_stream = streaming.wanted;
    let recorded_asked = asked_for_stream(profile, &cassette);
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
    let synthesize_as = match (as_stream, recorded_format) {
        (false, _) => None,
        (true, Some(f @ (StreamFormat::GenericSse | StreamFormat::GenericNdjson))) => Some(f),
        (true, recorded) => StreamFormat::for_request(profile, query).or(recorded),
    };
    let body = match (synthesize_as, stored.body) {
        (Some(format), StoredBody::Json(final_response)) => {
            let options = SynthesisOptions {
                chunk_size,
                include_usage: streaming.include_usage,
            };
            let body = match stored.events {
                // Recorded event by event (exact stream replay): sent as recorded, when the
                // request expects the format they were recorded in.
                Some(events) if Some(format) == recorded_format => stream_body(
                    format.framing(),
                    serde_json::json!({ "events": events }),
                    options,
                )?,
                _ => stream_body(format, final_response, options)?,
            };
            set_header(&mut headers, "content-type", format.content_type());
            set_header(&mut headers, "cache-control", "no-cache");
            ResponseBody::Stream(body)
        }
        (_, body) => {
            if recorded_format.is_some() {
                set_header(&mut headers, "content-type", "application/json");
            }
            // The answer as the client got it when it was recorded (member order and, unless
            // redacted, bytes), for a JSON answer that was not a stream.
            let bytes = match (&body, stored.body_text) {
                (StoredBody::Json(_), Some(text)) if recorded_format.is_none() => Bytes::from(text),
                _ => body.to_bytes()?,
            };
            ResponseBody::Full(bytes)
        }
    };
    Ok(Response {
        status: stored.status,
        headers,
        body,
    })
}

/// Whether the recorded request asked for a stream, read as keying reads it (see
/// [`Streaming`]): Gemini by its path, the others by the body's `stream`.
fn asked_for_stream(profile: Profile, cassette: &Cassette) -> bool {
    if profile == Profile::GeminiGenerate {
        return Profile::path_streams(&cassette.request.path);
    }
    match cassette
        .request
        .body
        .as_json()
        .and_then(|b| b.get("stream"))
    {
        Some(Value::Bool(stream)) => *stream,
        Some(_) => false,
        None => cassette.request.body.as_json().is_some() && profile.streams_by_default(),
    }
}

/// Answers whose text (strings and names, summed) is larger than this are synthesized as the
/// client reads them; smaller ones at once. A synthesized stream is about fifteen times the
/// text it carries, so this bounds what a replayed stream holds to a few MiB.
const SYNTHESIZE_LAZILY_ABOVE: usize = 256 * 1024;

/// The stream synthesized from `final_response`: small answers at once (a synthesis error is
/// then a corrupt cassette, answered before any header), large ones block by block on a
/// blocking thread that waits for the client to read, so a 30 MiB answer never becomes half a
/// GiB of events in memory. A large answer's synthesis error comes after the headers: the
/// stream is cut, and the log says why.
fn stream_body(
    format: StreamFormat,
    final_response: Value,
    options: SynthesisOptions,
) -> std::result::Result<BodyStream, String> {
    let runtime = match tokio::runtime::Handle::try_current() {
        Ok(runtime) if text_size(&final_response) > SYNTHESIZE_LAZILY_ABOVE => runtime,
        _ => {
            let pieces =
                stream::synthesize(format, &final_response, &options).map_err(|e| e.to_string())?;
            return Ok(Box::pin(futures::stream::iter(
                pieces.into_iter().map(Ok::<_, std::io::Error>),
            )));
        }
    };
    // Two blocks in flight: the synthesizer stays at most one block ahead of the client.
    let (blocks, received) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(2);
    let chunk_size = options.chunk_size;
    runtime.spawn_blocking(move || {
        let mut sink = |block: Bytes| blocks.blocking_send(Ok(block)).is_ok();
        if let Err(err) = stream::synthesize_into(format, &final_response, &options, &mut sink) {
            tracing::warn!("a replayed {format} stream was cut off: {err}");
            let _ = blocks.blocking_send(Err(std::io::Error::other(err.to_string())));
        }
    });
    let pieces = tokio_stream::wrappers::ReceiverStream::new(received).flat_map(move |block| {
        let pieces = match block {
            Ok(block) => stream::cut_block(block, chunk_size)
                .into_iter()
                .map(Ok)
                .collect(),
            Err(err) => vec![Err(err)],
        };
        futures::stream::iter(pieces)
    });
    Ok(Box::pin(pieces))
}

/// About how many bytes of text a JSON value carries.
fn text_size(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(text_size).sum(),
        Value::Object(members) => members.iter().map(|(k, v)| k.len() + text_size(v)).sum(),
        _ => 8,
    }
}

/// Keeps a recorded redirect inside the sandbox: an absolute `Location` (recorded before
/// locations were rewritten at recording time) is pointed through the proxy when it leads under
/// the recorded upstream, and dropped when it leads anywhere else. Relative ones stay. So is the
/// stored URL of a next request (an upload's), which is always stored absolute.
fn sandbox_locations(cassette: &Cassette, headers: &mut Vec<(String, String)>) {
    let called = || {
        crate::upstream::join_url(
            &cassette.upstream,
            &cassette.request.path,
            &cassette.request.query,
        )
    };
    headers.retain_mut(|(name, value)| {
        if crate::upstream::is_next_url_header(name) {
            // Stored as the upstream sent it: pointed through the proxy, or dropped when it
            // leads anywhere else (the client then fails loudly, never reaching out).
            let local = crate::upstream::next_url_through_proxy(
                value,
                &called(),
                &cassette.upstream,
                &cassette.target,
            );
            return match local {
                Some(local) => {
                    *value = local;
                    true
                }
                None => false,
            };
        }
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
