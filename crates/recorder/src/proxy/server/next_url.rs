//! The URL of a client's next request, as the client must see it: Gemini's resumable upload
//! answers its start with `x-goog-upload-url`, and google-genai sends the bytes to that URL as
//! it is, whatever base URL it was given. The recorder hands it on as a path through the proxy
//! (`/gemini/upload/v1beta/files?upload_id=...`, `upstream::next_url_through_proxy`); here it
//! becomes absolute, the way this client reached the proxy: at the `Host` it asked, behind the
//! same `/_run/SECRET/` and `/_scope/ID/` segments its base URL had (a secret sent as a header
//! stays out of the URL), or, over the channel, at the origin of the URL it asked for, which
//! its transport sends through the channel again. Only the answer is rewritten: the cassette
//! keeps the upstream's URL.

use super::state::OnChannel;
use crate::proxy::scopes::split_scope;
use axum::extract::Request as HttpRequest;

/// A request whose path carried the run secret (`/_run/SECRET/...`), the prefix it had.
#[derive(Clone)]
pub(super) struct SecretInPath(pub(super) String);

/// The origin (`https://generativelanguage.googleapis.com`) of the URL a channel request asked
/// for.
#[derive(Debug, Clone)]
pub(super) struct ReachedAt(pub(super) String);

/// Where a client reached the proxy, for the URLs of its next requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reached {
    /// Through a base URL: the proxy's own URL as the client wrote it, prefixes included
    /// (`http://127.0.0.1:8080/_run/SECRET/_scope/ID`).
    Base(String),
    /// Over the channel, asking for a URL at this origin.
    Channel(String),
    /// Neither can be told (no `Host`): the path is handed on as the recorder made it.
    Unknown,
}

impl Reached {
    /// Where `request` came from; called before its scope segment is taken off its path.
    pub(super) fn of(request: &HttpRequest) -> Reached {
        let extensions = request.extensions();
        // A channel request in origin form asked for the proxy's own URL (a client following
        // a base-URL variable): it is answered like one that came by HTTP.
        if let (Some(OnChannel), Some(ReachedAt(origin))) =
            (extensions.get::<OnChannel>(), extensions.get::<ReachedAt>())
        {
            return Reached::Channel(origin.clone());
        }
        let host = request
            .uri()
            .authority()
            .map(|a| a.as_str().to_owned())
            .or_else(|| {
                let host = request.headers().get(http::header::HOST)?;
                Some(host.to_str().ok()?.to_owned())
            });
        let Some(host) = host.filter(|h| !h.is_empty()) else {
            return Reached::Unknown;
        };
        let mut base = format!("http://{host}");
        if let Some(SecretInPath(prefix)) = extensions.get::<SecretInPath>() {
            base.push_str(prefix);
        }
        if let Some((id, _)) = split_scope(request.uri().path()) {
            base.push_str(crate::proxy::scopes::SCOPE_PREFIX.trim_end_matches('/'));
            base.push('/');
            base.push_str(id);
        }
        Reached::Base(base)
    }

    /// `headers` with every next-request URL the recorder pointed through the proxy (a path,
    /// `/TARGET/...` for a named route) made absolute for this client.
    pub(super) fn rewrite(&self, target: &str, headers: &mut [(String, String)]) {
        for (name, value) in headers.iter_mut() {
            if !crate::upstream::is_next_url_header(name) || !value.starts_with('/') {
                continue;
            }
            match self {
                Reached::Base(base) => *value = format!("{base}{value}"),
                Reached::Channel(origin) => {
                    let own = if target == crate::config::DEFAULT_TARGET {
                        value.as_str()
                    } else {
                        value
                            .strip_prefix('/')
                            .and_then(|v| v.strip_prefix(target))
                            .filter(|rest| rest.is_empty() || rest.starts_with(['/', '?']))
                            .unwrap_or(value)
                    };
                    *value = format!("{origin}{own}");
                }
                Reached::Unknown => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> Vec<(String, String)> {
        vec![
            ("x-goog-upload-url".to_owned(), value.to_owned()),
            ("location".to_owned(), "/gemini/v1/x".to_owned()),
        ]
    }

    #[test]
    fn a_path_becomes_the_url_the_client_reached() {
        let path = "/gemini/upload/v1beta/files?upload_id=u1";
        let mut h = headers(path);
        Reached::Base("http://127.0.0.1:9/_run/s/_scope/t1".to_owned()).rewrite("gemini", &mut h);
        assert_eq!(
            h[0].1,
            "http://127.0.0.1:9/_run/s/_scope/t1/gemini/upload/v1beta/files?upload_id=u1"
        );
        assert_eq!(h[1].1, "/gemini/v1/x", "only next-request URLs");
        let mut h = headers(path);
        Reached::Channel("https://generativelanguage.googleapis.com".to_owned())
            .rewrite("gemini", &mut h);
        assert_eq!(
            h[0].1,
            "https://generativelanguage.googleapis.com/upload/v1beta/files?upload_id=u1"
        );
        let mut h = headers("/upload/v1beta/files");
        Reached::Channel("http://h:1".to_owned()).rewrite("default", &mut h);
        assert_eq!(h[0].1, "http://h:1/upload/v1beta/files");
        // A URL the recorder could not point through the proxy is left as it is.
        let mut h = headers("https://elsewhere.example/up");
        Reached::Base("http://127.0.0.1:9".to_owned()).rewrite("gemini", &mut h);
        assert_eq!(h[0].1, "https://elsewhere.example/up");
        let mut h = headers(path);
        Reached::Unknown.rewrite("gemini", &mut h);
        assert_eq!(h[0].1, path);
    }
}
