//! Downloads: a file a test fetches from a host no route serves (an image, a PDF it hands to a
//! vision model), or asks about first (a HEAD, for its type and size). vcrpy kept such a GET
//! or HEAD on the test's tape; adopt and `cassette import` store
//! what the tape holds as a recording of that host, keyed by the `download` profile (method
//! and the whole URL, `docs/keying.md`), and every mode serves a stored one. Nothing here
//! opens a connection: a download no recording holds is refused by the caller, as a bypass of
//! the base URL.

use super::import::{Apart, Imported};
use super::recording::{Answer, Draft};
use super::write::{Stamp, Stored};
use super::Recorder;
use crate::config::{Downloads, Sharing};
use crate::error::Result;
use crate::mode::Write;
use crate::response::{Outcome, Source};
use crate::scope::Scope;
use bytes::Bytes;
use cassette_keying::{DownloadRequest, Key, Keyed};
use cassette_tape::{Cassette, Request};
use std::time::Instant;

/// The methods a download is asked with: the file, or what its headers say of it.
const METHODS: [&str; 2] = ["GET", "HEAD"];

/// Whether a request with `method` to a host no route serves can be a download (a GET or a
/// HEAD); anything else sends something, and is never answered from a recording of the host.
pub fn is_download_method(method: &str) -> bool {
    METHODS.iter().any(|m| m.eq_ignore_ascii_case(method))
}

/// A download recorded elsewhere (a vcrpy tape's GET or HEAD of a host no route serves).
#[derive(Debug, Clone)]
pub struct Download {
    /// The method it was asked with: `GET`, or `HEAD` (headers, no body).
    pub method: String,
    /// The URL as it was fetched (a credential in its query never reaches the store).
    pub url: url::Url,
    /// The answer's status.
    pub status: u16,
    /// The answer's headers.
    pub headers: Vec<(String, String)>,
    /// The file's bytes, decoded (no content encoding).
    pub body: Bytes,
    /// When it was recorded, RFC 3339.
    pub recorded_at: String,
    /// What recorded it, for the cassette's `tool` field.
    pub tool: String,
    /// The test that fetched it, when known (`meta.test`).
    pub test: Option<String>,
    /// Where it was recorded (`meta.source`).
    pub source: Option<String>,
}

/// The recorder's request standing for a download: its origin as the target, no headers and
/// no body (neither is keyed nor stored).
fn request_of(method: &str, url: &url::Url) -> Request {
    Request {
        target: url.origin().ascii_serialization(),
        method: method.to_ascii_uppercase(),
        path: url.path().to_owned(),
        query: url.query().unwrap_or("").to_owned(),
        headers: Vec::new(),
        body: Bytes::new(),
    }
}

/// The key of a download, from the recorder's request standing for it.
fn keyed(request: &Request) -> Keyed {
    DownloadRequest {
        method: &request.method,
        ..DownloadRequest::get(&request.target, &request.path).query(&request.query)
    }
    .key()
}

/// The key material of `method url` as a download (for the drift of a tape's download).
pub(crate) fn download_material(method: &str, url: &url::Url) -> serde_json::Value {
    keyed(&request_of(method, url)).material
}

/// The key `cassette import` and adopt store a download of `url` asked with `method` under.
pub fn download_key(method: &str, url: &url::Url) -> Key {
    keyed(&request_of(method, url)).key
}

impl Recorder {
    /// Answers `method url` (a host no route serves, asked by the test `scope` names): in
    /// adopt, from the test's tapes when one of their interactions matches (stored first, so
    /// the replay after it answers the same), else from the download stored for the URL, in
    /// any mode. `Ok(None)` when nothing holds it (the caller refuses it, naming the URL),
    /// and for anything but a GET or a HEAD.
    pub async fn download(
        &self,
        method: &str,
        url: &url::Url,
        headers: &[(String, String)],
        scope: &Scope,
    ) -> Result<Option<Outcome>> {
        if !is_download_method(method) {
            return Ok(None);
        }
        let request = request_of(method, url);
        let keyed = keyed(&request);
        if let (Some(deck), Downloads::Stored) = (&self.inner.tapes, self.inner.config.downloads) {
            let test = scope.test.as_deref();
            let redactor = &self.inner.redactor;
            let asked = (request.method.as_str(), url);
            if let Some(answer) = crate::tapes::answer_download(
                deck,
                asked,
                headers,
                test,
                redactor,
                download_material,
            ) {
                let download = Download {
                    method: request.method.clone(),
                    url: url.clone(),
                    status: answer.status,
                    headers: answer.headers,
                    body: answer.body,
                    recorded_at: String::new(),
                    tool: String::new(),
                    test: scope.test.clone(),
                    source: None,
                };
                let cassette = self.download_cassette(&request, &keyed, download.clone());
                let stamp = Stamp::now(0);
                let stored = self
                    .write(
                        cassette,
                        stamp,
                        Write::CreateOnly,
                        Some(keyed.material.clone()),
                    )
                    .await?;
                if stored == Stored::Won {
                    self.note_recorded_here(&keyed.key);
                }
                let Some(cassette) = self.lookup(&keyed).await? else {
                    return Ok(None);
                };
                let mut outcome = self.replay(&request, keyed, cassette)?;
                if stored == Stored::Won {
                    outcome.source = Source::Recorded;
                }
                return Ok(Some(outcome));
            }
        }
        match self.lookup(&keyed).await? {
            Some(cassette) => self.replay(&request, keyed, cassette).map(Some),
            None => Ok(None),
        }
    }

    /// Stores `download` as a recording of its host, as [`Recorder::import`] stores an API
    /// exchange: create-only, compared with what is stored under its key (one URL, one file:
    /// another answer stored there is a conflict, never kept apart for a test, since replay
    /// reads a download's plain key only).
    pub async fn import_download(
        &self,
        download: Download,
        write: Write,
    ) -> Result<(Key, Imported)> {
        let request = request_of(&download.method, &download.url);
        let keyed = keyed(&request);
        let stamp = Stamp {
            recorded_at: download.recorded_at.clone(),
            tool: download.tool.clone(),
            latency_ms: 0,
        };
        let source = download.source.clone();
        let mut cassette = self.download_cassette(&request, &keyed, download);
        cassette.meta.source = source;
        self.store_imported(keyed, cassette, stamp, write, Apart::Never)
            .await
    }

    /// The cassette of a download: the request as the recorder stands for it (its query
    /// redacted when sealed), the answer whole.
    fn download_cassette(&self, request: &Request, keyed: &Keyed, download: Download) -> Cassette {
        let draft = Draft {
            recorder: self.clone(),
            upstream: request.target.clone(),
            request: request.clone(),
            keyed_key: keyed.key.clone(),
            profile: keyed.profile,
            test: download.test,
            sharing: Sharing::Shared,
            sequence: None,
            material: None,
            status: download.status,
            headers: download.headers,
            started: Instant::now(),
            write: Write::CreateOnly,
            flight: None,
            failure: None,
        };
        draft.cassette(Answer::whole(&download.body))
    }
}
