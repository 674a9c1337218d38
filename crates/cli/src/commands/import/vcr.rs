//! vcrpy cassettes for `cassette import`: the tape file read (within the reader's size limit)
//! and its interactions, as `cassette-vcr` reads them, turned into exchanges of the routes
//! that serve their URLs. The adopt run's proxy reads tapes through the same reader, so a
//! tape imports as it adopts.

use anyhow::{anyhow, bail};
use cassette_keying::Profile;
use cassette_recorder::proxy::Hosts;
use cassette_recorder::{Download, Exchange, Request, Route};
use std::path::Path;

/// One interaction of a tape, converted.
pub(crate) enum Item {
    /// A call to an API a route serves, and what of it the reader left out (a header value
    /// that is not text), one line each.
    Exchange {
        exchange: Box<Exchange>,
        left_out: Vec<String>,
    },
    /// A request to a host no route serves, at a path no LLM profile reads (a fixture
    /// downloaded from the web): a GET is stored as a download of that host, which replay
    /// serves to the test process; `shown` is the request without the URL's query.
    Download {
        method: String,
        shown: String,
        download: Box<Download>,
    },
}

/// The interactions of a vcrpy cassette, each converted or its error; an error for the whole
/// file only when it is not a vcrpy cassette at all.
pub(crate) fn read_tape(
    path: &Path,
    routes: &[Route],
    recorded_at: &str,
    tool: &str,
) -> anyhow::Result<Vec<anyhow::Result<Item>>> {
    let size = std::fs::metadata(path)?.len();
    if size > cassette_vcr::MAX_TAPE_BYTES {
        bail!(cassette_vcr::Error::TooLarge {
            size,
            limit: cassette_vcr::MAX_TAPE_BYTES
        });
    }
    let text = std::fs::read_to_string(path)?;
    Ok(cassette_vcr::read(&text)?
        .into_iter()
        .map(|interaction| {
            let interaction = interaction.map_err(|err| anyhow!(err))?;
            item(interaction, routes, recorded_at, tool)
        })
        .collect())
}

/// The test pytest-recording recorded a tape for, from where it keeps it (relative to the
/// current folder, the suite's root); `None` for a tape kept elsewhere.
pub(crate) fn test_id(path: &Path) -> Option<String> {
    let cwd = std::env::current_dir().ok();
    let path = cwd
        .as_deref()
        .and_then(|cwd| path.strip_prefix(cwd).ok())
        .unwrap_or(path);
    cassette_vcr::test_id(path)
}

fn item(
    interaction: cassette_vcr::Interaction,
    routes: &[Route],
    recorded_at: &str,
    tool: &str,
) -> anyhow::Result<Item> {
    let cassette_vcr::Interaction {
        method,
        uri,
        unreadable_uri,
        request_headers,
        request_body,
        status,
        response_headers,
        response_body,
        left_out,
    } = interaction;
    if let Some(why) = unreadable_uri {
        // Only a run applying the suite's `before_record_request` (adopt) can match it.
        bail!(
            "{why}: the tape's URL was replaced (a suite's before_record_request?), so no route \
             can be told; `pytest --cassette=adopt` answers from it in the suite's own matching"
        );
    }
    let Some((target, upstream, path)) = route_of(&uri, routes) else {
        let mut url = uri.clone();
        // The query may hold a credential; the report does not need it.
        url.set_query(None);
        if Profile::from_path(url.path()) != Profile::Http {
            // An API call to a host no route serves is no recording of any route's: filed
            // under one, it would answer that route's requests with a stranger's answers.
            bail!(
                "{method} {url} calls an API on a host no route serves (`{}`): refused; add a \
                 route for it (--route NAME=URL, or [routes] in cassette.toml) if it is yours",
                url.host_str().unwrap_or_default()
            );
        }
        let download = Download {
            method: method.clone(),
            url: uri,
            status,
            headers: response_headers,
            body: response_body,
            recorded_at: recorded_at.to_owned(),
            tool: tool.to_owned(),
            test: None,
            source: None,
        };
        return Ok(Item::Download {
            shown: format!("{method} {url}"),
            method,
            download: Box::new(download),
        });
    };
    let exchange = Exchange {
        request: Request {
            target,
            method,
            path,
            query: uri.query().unwrap_or("").to_owned(),
            headers: request_headers,
            body: request_body,
        },
        status,
        headers: response_headers,
        body: response_body,
        upstream,
        recorded_at: recorded_at.to_owned(),
        tool: tool.to_owned(),
        occurrence: 1,
        test: None,
        source: None,
    };
    Ok(Item::Exchange {
        exchange: Box::new(exchange),
        left_out,
    })
}

/// The route a recorded URL belongs to, its upstream, and the path a client of the proxy
/// sends: a route whose upstream serves the URL ([`Route::local_path`]); else the route whose
/// vendor's host it is (the one host table, [`Hosts`], the channel routes by too); else
/// `None`, a host no route serves.
pub(crate) fn route_of(url: &url::Url, routes: &[Route]) -> Option<(String, String, String)> {
    for route in routes {
        if let Some(path) = route.local_path(url) {
            return Some((route.name.clone(), route.base_url.clone(), path));
        }
    }
    let hosts = Hosts::new(routes);
    let (route, path) = hosts.route_url(routes, url)?;
    // The upstream it was recorded from, as the tape says.
    Some((route.name.clone(), url.origin().ascii_serialization(), path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> Vec<Route> {
        [
            ("default", "https://api.openai.com"),
            ("anthropic", "https://api.anthropic.com"),
            ("groq", "https://api.groq.com/openai/v1"),
        ]
        .iter()
        .map(|(name, base)| Route::new(*name, *base))
        .collect()
    }

    #[test]
    fn urls_map_to_the_route_and_path_a_proxy_client_sends() {
        let of = |uri: &str| {
            route_of(&url::Url::parse(uri).unwrap(), &routes())
                .map(|(target, _, path)| format!("{target} {path}"))
        };
        let of = |uri: &str| of(uri).unwrap_or_else(|| "download".into());
        assert_eq!(
            of("https://api.openai.com/v1/chat/completions"),
            "default /v1/chat/completions"
        );
        assert_eq!(
            of("https://api.anthropic.com/v1/messages"),
            "anthropic /v1/messages"
        );
        assert_eq!(
            of("https://api.groq.com/openai/v1/chat/completions"),
            "groq /v1/chat/completions"
        );
        // A host no route serves belongs to none, whatever its path (issue 35 item 10).
        for stranger in [
            "https://elsewhere.example/v1/chat/completions",
            "https://api.openai.com.evil.example/v1/chat/completions",
            "http://169.254.169.254/v1/chat/completions",
        ] {
            assert_eq!(of(stranger), "download", "{stranger}");
        }
        assert_eq!(of("https://files.example/fixtures/cat.png"), "download");
        // A host a route serves is imported whatever its path.
        assert_eq!(
            of("https://api.openai.com/v1/files/x"),
            "default /v1/files/x"
        );
    }
}
