//! A whole cassette document, every part redacted by the rule for its kind: the one function
//! the recorder, the MCP engine and `cassette verify`'s audit share, so what is checked is what
//! is done.

use super::{BodyRedaction, Redactor};
use crate::cassette::{Cassette, StoredBody};
use serde_json::Value;
use std::collections::BTreeMap;

/// What redacting a cassette did to its bodies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CassetteRedaction {
    /// The request body.
    pub request: BodyRedaction,
    /// The response body.
    pub response: BodyRedaction,
}

impl Redactor {
    /// Redacts a cassette in place: the upstream URL, the request path, query, headers
    /// (allow-list) and body (read by its `content-type`), the response headers (allow-list)
    /// and body (a stream kept event by event also across its events), and the review facts in
    /// `meta`. Redacting a redacted cassette changes nothing.
    pub fn cassette(&self, cassette: &mut Cassette) -> CassetteRedaction {
        cassette.upstream = self.url(&cassette.upstream);

        let request = &mut cassette.request;
        request.path = self.text(&request.path);
        request.query = self.query(&request.query);
        request.headers = self
            .request_headers(&pairs(&request.headers))
            .into_iter()
            .collect();
        let content_type = request.headers.get("content-type").cloned();
        let request_body = self.body(&mut request.body, content_type.as_deref());

        let response = &mut cassette.response;
        response.headers = self
            .response_headers(&pairs(&response.headers))
            .into_iter()
            .collect();
        let mut split = false;
        if let (Some(_), StoredBody::Json(body)) = (&response.stream, &mut response.body) {
            if body.get("events").is_some_and(Value::is_array) {
                split = self.split_secrets(body);
            }
        }
        let content_type = response.headers.get("content-type").cloned();
        let mut response_body = self.body(&mut response.body, content_type.as_deref());
        response_body.changed |= split;

        let meta = &mut cassette.meta;
        for fact in [
            &mut meta.requested_model,
            &mut meta.response_model,
            &mut meta.finish_reason,
        ]
        .into_iter()
        .flatten()
        {
            *fact = self.text(fact);
        }
        if let Some(usage) = &mut meta.usage {
            self.json(usage);
        }
        CassetteRedaction {
            request: request_body,
            response: response_body,
        }
    }
}

fn pairs(headers: &BTreeMap<String, String>) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}
