//! The `download` profile of the key contract: a file a test fetched from a host no route
//! serves (an image, a PDF handed to a vision model), stored so that replay serves it instead
//! of the network.
//!
//! A download is keyed by its method and its whole URL, nothing else: no header (a file's
//! bytes do not depend on who asks), no body (a GET has none). The query follows step 5, so a
//! signed URL's credential (`X-Amz-Signature`, `sig`, `token`) never enters the key while the
//! rest of the URL still tells two files apart. See `docs/keying.md`, "Profile `download`".
//!
//! This profile is part of key contract version [`KEY_VERSION`]: it adds a kind of request
//! and changes no key of the other profiles (its material has members no HTTP material has).

use crate::canonical::canonical_query;
use crate::{
    sha256_hex, to_canonical_string, BodyKind, Key, Keyed, Profile, Streaming, KEY_VERSION,
};
use serde_json::{Map, Value};

/// A download as the key contract sees it. Borrowed: keying copies only what it writes.
#[derive(Debug, Clone, Copy)]
pub struct DownloadRequest<'a> {
    /// The HTTP method (any case; stored downloads are GETs).
    pub method: &'a str,
    /// The URL's origin as the WHATWG URL standard serializes it: `scheme://host[:port]`,
    /// the host lowercase (IDNA's ASCII form), the scheme's default port left out.
    pub origin: &'a str,
    /// The URL's path as sent (percent-encoded), never normalized: `/a//b` is another file.
    pub path: &'a str,
    /// The raw query string without `?`.
    pub query: &'a str,
}

impl<'a> DownloadRequest<'a> {
    /// A GET of `origin` + `path`, without a query.
    pub fn get(origin: &'a str, path: &'a str) -> Self {
        DownloadRequest {
            method: "GET",
            origin,
            path,
            query: "",
        }
    }

    /// Sets the query string (without `?`).
    pub fn query(mut self, query: &'a str) -> Self {
        self.query = query;
        self
    }

    /// Computes the key of this download.
    pub fn key(&self) -> Keyed {
        let mut material = Map::new();
        material.insert("v".into(), Value::from(KEY_VERSION));
        material.insert("profile".into(), Value::from(Profile::Download.as_str()));
        material.insert(
            "method".into(),
            Value::from(self.method.to_ascii_uppercase()),
        );
        material.insert("origin".into(), Value::from(self.origin));
        material.insert("path".into(), Value::from(self.path));
        material.insert(
            "query".into(),
            canonical_query(Profile::Download, self.query),
        );
        let material = Value::Object(material);
        let canonical = to_canonical_string(&material);
        Keyed {
            key: Key(sha256_hex(canonical.as_bytes())),
            profile: Profile::Download,
            material,
            canonical,
            system_sha256: None,
            // A file is sent whole.
            streaming: Streaming::default(),
            body: BodyKind::Empty,
        }
    }
}
