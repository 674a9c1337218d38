//! The one owned request type, and its view as the keying crate sees it.

use crate::error::{Error, Result};
use crate::headers::declares_json;
use bytes::Bytes;
use cassette_keying::{BodyKind, HitKey, KeyConfig, Keyed};
use serde_json::Value;

/// The name of the route that serves requests not mounted under a named route.
pub const DEFAULT_TARGET: &str = "default";

/// An HTTP request as the recorder handles it: already routed, so `path` has lost any route
/// prefix and `target` names the route. The proxy builds one per HTTP request; the suite
/// runner, `cassette key` and `cassette explain` build them from files; a stored cassette gives
/// back the (redacted) one it recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Route name; `default` for the unnamed route.
    pub target: String,
    /// HTTP method, any case.
    pub method: String,
    /// Path as the upstream will see it, without the query.
    pub path: String,
    /// Raw query string without `?`.
    pub query: String,
    /// Headers as received, repeats allowed.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Bytes,
}

impl Request {
    /// A request to the default target with no query, headers or body.
    pub fn new(method: &str, path: &str) -> Request {
        Request {
            target: DEFAULT_TARGET.to_owned(),
            method: method.to_owned(),
            path: path.to_owned(),
            query: String::new(),
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    /// A POST of a JSON body to the default target.
    pub fn post_json(path: &str, body: &Value) -> Request {
        Request {
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: Bytes::from(body.to_string()),
            ..Request::new("POST", path)
        }
    }

    /// Borrows this request as the keying crate's request: the one way a recorder request is
    /// keyed, explained or compared.
    pub fn as_keying(&self) -> cassette_keying::Request<'_> {
        cassette_keying::Request {
            target: &self.target,
            method: &self.method,
            path: &self.path,
            query: &self.query,
            headers: self
                .headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str()))
                .collect(),
            body: &self.body,
        }
    }

    /// The model asked for: the `model` the body names, when the body is JSON and names one,
    /// else the one a Gemini path names (`.../models/MODEL:generateContent`).
    pub fn model(&self) -> Option<String> {
        let from_body = serde_json::from_slice::<Value>(&self.body)
            .ok()
            .and_then(|value| value.get("model")?.as_str().map(str::to_owned));
        from_body.or_else(|| model_in_path(&self.path).map(str::to_owned))
    }

    /// The key of this request under `config` (shorthand for `as_keying().key(config)`).
    pub fn key(&self, config: &KeyConfig) -> Keyed {
        self.as_keying().key(config)
    }

    /// The same key without its explanation, and what a replay hit needs: one pass over the
    /// body (shorthand for `as_keying().hit_key(config)`).
    pub fn hit_key(&self, config: &KeyConfig) -> HitKey {
        self.as_keying().hit_key(config)
    }

    /// Refuses a POST whose body is declared as JSON (`application/json`, `*+json`) but that
    /// keying read as opaque bytes: recorded, it would be keyed and forwarded as something the
    /// client did not mean to send. `body` is what keying found, so the body is parsed once on
    /// the way to a hit; only a refusal parses it again, to say where it breaks.
    ///
    /// The bytes of a resumable upload (`x-goog-upload-command: upload`) are what the client
    /// means to send whatever their declared type: google-genai sends a file under its client's
    /// default `content-type: application/json`, and Google takes it.
    pub fn check_declared_json(&self, body: BodyKind) -> Result<()> {
        if body != BodyKind::Opaque
            || !self.method.eq_ignore_ascii_case("POST")
            || !declares_json(&self.headers)
            || self.is_upload_chunk()
        {
            return Ok(());
        }
        let reason = match serde_json::from_slice::<Value>(&self.body) {
            Err(e) => e.to_string(),
            Ok(_) => "it is not one JSON value in UTF-8".to_owned(),
        };
        Err(Error::NotJson { reason })
    }
}

impl Request {
    /// Whether this carries bytes of a resumable upload: its `x-goog-upload-command` says
    /// `upload` (`upload`, `upload, finalize`).
    fn is_upload_chunk(&self) -> bool {
        crate::headers::header(&self.headers, "x-goog-upload-command").is_some_and(|command| {
            command
                .split(',')
                .any(|part| part.trim().eq_ignore_ascii_case("upload"))
        })
    }
}

/// The model of a Gemini method path: the segment after the last `models/`, up to its `:`.
pub fn model_in_path(path: &str) -> Option<&str> {
    let (_, rest) = path.rsplit_once("/models/")?;
    let (model, _method) = rest.split_once(':')?;
    (!model.is_empty() && !model.contains('/')).then_some(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_declared_json_post_that_is_not_json_is_refused() {
        let declared = |method: &str, body: &'static [u8]| Request {
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: Bytes::from_static(body),
            ..Request::new(method, "/v1/chat/completions")
        };
        let truncated = declared("POST", b"{\"model\": \"m\", \"messages\": [");
        let err = truncated.check_declared_json(BodyKind::Opaque).unwrap_err();
        assert!(matches!(err, Error::NotJson { .. }), "{err}");
        assert!(err.to_string().contains("EOF while parsing"), "{err}");
        let not_utf8 = declared("POST", b"{\"a\": \"\xff\"}");
        let err = not_utf8.check_declared_json(BodyKind::Opaque).unwrap_err();
        assert!(err.to_string().contains("declared as JSON"), "{err}");
        assert!(declared("PUT", b"[")
            .check_declared_json(BodyKind::Opaque)
            .is_ok());
        assert!(truncated.check_declared_json(BodyKind::Json).is_ok());
        let mut undeclared = truncated.clone();
        undeclared.headers.clear();
        assert!(undeclared.check_declared_json(BodyKind::Opaque).is_ok());
        // A resumable upload's bytes, under the client's default JSON content type.
        let mut chunk = declared("POST", b"Meeting notes");
        let command = |value: &str| ("X-Goog-Upload-Command".to_owned(), value.to_owned());
        chunk.headers.push(command("upload, finalize"));
        assert!(chunk.check_declared_json(BodyKind::Opaque).is_ok());
        chunk.headers.pop();
        chunk.headers.push(command("start"));
        assert!(chunk.check_declared_json(BodyKind::Opaque).is_err());
    }

    #[test]
    fn the_model_comes_from_the_body_or_a_gemini_path() {
        let chat = Request::post_json("/v1/chat/completions", &json!({"model": "gpt-4o"}));
        assert_eq!(chat.model().as_deref(), Some("gpt-4o"));
        let gemini = Request::post_json(
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            &json!({"contents": []}),
        );
        assert_eq!(gemini.model().as_deref(), Some("gemini-2.5-flash"));
        for path in [
            "/v1/models",
            "/v1beta/models/:generateContent",
            "/v1/models/a/b:x",
        ] {
            assert_eq!(Request::new("POST", path).model(), None, "{path}");
        }
    }

    #[test]
    fn the_keying_view_borrows_every_part() {
        let request = Request {
            target: "anthropic".into(),
            query: "beta=true".into(),
            headers: vec![
                ("anthropic-version".into(), "2023-06-01".into()),
                ("anthropic-beta".into(), "a".into()),
            ],
            ..Request::post_json("/v1/messages", &json!({"model": "m"}))
        };
        let view = request.as_keying();
        assert_eq!(
            (view.target, view.method, view.path, view.query),
            ("anthropic", "POST", "/v1/messages", "beta=true")
        );
        assert_eq!(view.headers.len(), 2);
        assert_eq!(view.body, br#"{"model":"m"}"#);
        let built = cassette_keying::Request::new("POST", "/v1/messages")
            .target("anthropic")
            .query("beta=true")
            .header("anthropic-version", "2023-06-01")
            .header("anthropic-beta", "a")
            .body(br#"{"model":"m"}"#)
            .key(&KeyConfig::default());
        assert_eq!(request.key(&KeyConfig::default()).key, built.key);
    }
}
