//! Replay: a cassette becomes the response, re-synthesized as a stream in the provider's own
//! events when the request asks for one.

use crate::cassette::Cassette;
use crate::response::{Response, ResponseBody};
use crate::stream::{self, StreamFormat, SynthesisOptions};
use cassette_keying::{Profile, Streaming};

/// Builds the replayed response: a re-synthesized stream when the request asks for one (as
/// keying read it) and the recording holds a final response, else the stored body. The stream
/// is in the format the request expects (`query` tells Gemini's event stream from its JSON
/// array), whatever format the recording was made in.
pub(super) fn replay_response(
    profile: Profile,
    streaming: Streaming,
    query: &str,
    cassette: Cassette,
    chunk_size: usize,
) -> std::result::Result<Response, String> {
    let wants_stream = streaming.wanted;
    let stored = cassette.response;
    let recorded_format = stored.stream.as_deref().and_then(StreamFormat::from_name);
    let mut headers: Vec<(String, String)> = stored.headers.into_iter().collect();

    let synthesize_as = match (recorded_format, stored.body.as_json()) {
        // Generic streams are only ever replayed as they were recorded.
        (Some(f @ (StreamFormat::GenericSse | StreamFormat::GenericNdjson)), Some(_)) => Some(f),
        (recorded, Some(_)) if wants_stream && (200..300).contains(&stored.status) => {
            StreamFormat::for_request(profile, query).or(recorded)
        }
        _ => None,
    };
    let body = match (synthesize_as, stored.body.as_json()) {
        (Some(format), Some(final_response)) => {
            let options = SynthesisOptions {
                chunk_size,
                include_usage: streaming.include_usage,
            };
            let pieces =
                stream::synthesize(format, final_response, &options).map_err(|e| e.to_string())?;
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

fn set_header(headers: &mut Vec<(String, String)>, name: &str, value: &str) {
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    headers.push((name.to_owned(), value.to_owned()));
}
