//! Cassettes for the recorder's benchmarks: what recording a chat completion would store.

use cassette_recorder::Request;
use cassette_tape::document::{
    Cassette, Meta, StoredBody, StoredRequest, StoredResponse, FORMAT_VERSION,
};
use serde_json::json;
use std::collections::BTreeMap;

/// The cassette recording `incoming` (the `i`-th request of a benchmark) from `upstream`:
/// a short chat completion that names `i`.
pub(crate) fn recorded(incoming: &Request, i: usize, upstream: &str) -> Cassette {
    let keyed = incoming.key(&Default::default());
    Cassette {
        format: FORMAT_VERSION,
        key: keyed.key,
        key_version: cassette_keying::KEY_VERSION,
        key_settings: None,
        sequence: None,
        test_scope: None,
        recorded_at: "2026-11-29T09:00:00Z".into(),
        tool: "bench".into(),
        target: "default".into(),
        upstream: upstream.into(),
        request: StoredRequest {
            method: "POST".into(),
            path: incoming.path.clone(),
            query: String::new(),
            headers: BTreeMap::new(),
            body: StoredBody::from_bytes(&incoming.body),
        },
        response: StoredResponse {
            status: 200,
            headers: BTreeMap::new(),
            body: StoredBody::Json(json!({
                "object": "chat.completion", "model": "gpt-4o-mini",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": format!("Refund {i} is on its way.")}}]
            })),
            stream: None,
            events: None,
            body_text: None,
            failure: None,
        },
        meta: Meta::default(),
    }
}
