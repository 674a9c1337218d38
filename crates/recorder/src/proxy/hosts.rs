//! Which route serves a URL: the one table from vendor hosts to routes (`api.openai.com` is the
//! `default` route, `api.anthropic.com` is `anthropic`, ...), joined with the host of every
//! configured route's upstream. A request that reaches the proxy with its original URL (the
//! in-process channel) is routed by it, so a client with a vendor's URL in its code records
//! and replays like one pointed at the proxy.

use crate::config::{Route, DEFAULT_TARGET};

/// A vendor cassette knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Vendor {
    /// The route named for it.
    pub route: &'static str,
    /// The hosts its API is served on: `host` alone is the scheme's default port, `host:port`
    /// that port only.
    pub hosts: &'static [&'static str],
    /// The upstream its route is mounted with when nothing names one; `None`: a route of that
    /// name is mounted only when configured.
    pub built_in: Option<&'static str>,
}

/// The one table of vendors: a route of a vendor's name, wherever its upstream points (a
/// test's fake, a gateway), serves requests for the vendor's hosts. The built-in routes come
/// first, in the order settings list them.
pub const VENDORS: &[Vendor] = &[
    vendor(
        DEFAULT_TARGET,
        &["api.openai.com"],
        Some("https://api.openai.com"),
    ),
    vendor(
        "anthropic",
        &["api.anthropic.com"],
        Some("https://api.anthropic.com"),
    ),
    vendor(
        "ollama",
        &["127.0.0.1:11434", "localhost:11434"],
        Some("http://127.0.0.1:11434"),
    ),
    vendor(
        "gemini",
        &["generativelanguage.googleapis.com"],
        Some("https://generativelanguage.googleapis.com"),
    ),
    vendor("groq", &["api.groq.com"], Some("https://api.groq.com")),
    vendor(
        "cohere",
        &["api.cohere.com", "api.cohere.ai"],
        Some("https://api.cohere.com"),
    ),
    vendor("mistral", &["api.mistral.ai"], None),
    vendor("together", &["api.together.xyz", "api.together.ai"], None),
    vendor("fireworks", &["api.fireworks.ai"], None),
    vendor("deepseek", &["api.deepseek.com"], None),
    vendor("openrouter", &["openrouter.ai"], None),
    vendor("xai", &["api.x.ai"], None),
    vendor("perplexity", &["api.perplexity.ai"], None),
];

const fn vendor(
    route: &'static str,
    hosts: &'static [&'static str],
    built_in: Option<&'static str>,
) -> Vendor {
    Vendor {
        route,
        hosts,
        built_in,
    }
}

/// The routes mounted without any setting, the default route first: name and upstream.
pub fn built_in_routes() -> impl Iterator<Item = (&'static str, &'static str)> {
    VENDORS
        .iter()
        .filter_map(|v| v.built_in.map(|upstream| (v.route, upstream)))
}

/// One host (and port) a route serves.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Served {
    host: String,
    /// `None`: the URL scheme's default port.
    port: Option<u16>,
    route: String,
}

/// The hosts the configured routes serve.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    /// The routes' own upstreams first: a route whose upstream is a vendor's host serves it
    /// even when the vendor's table names another route.
    served: Vec<Served>,
}

impl Hosts {
    /// The table for `routes`: each route's upstream host, then its vendor's hosts.
    pub fn new(routes: &[Route]) -> Hosts {
        let mut served = Vec::new();
        for route in routes {
            if let Ok(url) = url::Url::parse(&route.base_url) {
                if let Some(host) = url.host_str() {
                    served.push(Served {
                        host: bare(host),
                        port: url.port_or_known_default(),
                        route: route.name.clone(),
                    });
                }
            }
        }
        for vendor in VENDORS {
            if !routes.iter().any(|r| r.name == vendor.route) {
                continue;
            }
            for host in vendor.hosts {
                let (host, port) = match host.rsplit_once(':') {
                    Some((host, port)) => (host, port.parse().ok()),
                    None => (*host, None),
                };
                served.push(Served {
                    host: host.to_owned(),
                    port,
                    route: vendor.route.to_owned(),
                });
            }
        }
        Hosts { served }
    }

    /// The route serving `host:port` (`host` in any case, IPv6 with or without brackets;
    /// `default_port` the URL scheme's), if any.
    pub fn route(&self, host: &str, port: u16, default_port: u16) -> Option<&str> {
        let host = bare(host);
        self.served
            .iter()
            .find(|s| s.host == host && s.port.unwrap_or(default_port) == port)
            .map(|s| s.route.as_str())
    }

    /// The route serving `url`, and the path the route is asked for: the URL's path under the
    /// route's upstream when the URL is the upstream's own ([`Route::local_path`]), else the
    /// URL's path as it is (a vendor's URL, its API at the root).
    pub fn route_url<'r>(
        &self,
        routes: &'r [Route],
        url: &url::Url,
    ) -> Option<(&'r Route, String)> {
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        let default_port = match url.scheme() {
            "https" => 443,
            _ => 80,
        };
        let name = self.route(host, port, default_port)?;
        let route = routes.iter().find(|r| r.name == name)?;
        let path = route
            .local_path(url)
            .unwrap_or_else(|| url.path().to_owned());
        Some((route, path))
    }
}

/// A host as compared: lowercase, without IPv6 brackets or a trailing dot.
fn bare(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> Vec<Route> {
        vec![
            Route::new(DEFAULT_TARGET, "http://127.0.0.1:9999"),
            Route::new("anthropic", "http://127.0.0.1:9999"),
            Route::new("groq", "https://api.groq.com"),
            Route::new("ollama", "http://127.0.0.1:11434"),
            Route::new("gateway", "https://gateway.internal/openai/v1"),
        ]
    }

    fn routed(url: &str) -> Option<(String, String)> {
        let routes = routes();
        let hosts = Hosts::new(&routes);
        let url = url::Url::parse(url).unwrap();
        hosts
            .route_url(&routes, &url)
            .map(|(route, path)| (route.name.clone(), path))
    }

    #[test]
    fn a_built_in_route_serves_its_own_upstreams_host_and_names_each_vendor_once() {
        let routes: Vec<Route> = built_in_routes()
            .map(|(name, upstream)| Route::new(name, upstream))
            .collect();
        assert_eq!(routes[0].name, DEFAULT_TARGET);
        let hosts = Hosts::new(&routes);
        for route in &routes {
            let url = url::Url::parse(&route.base_url).unwrap();
            let vendor = VENDORS.iter().find(|v| v.route == route.name).unwrap();
            let host = url.host_str().unwrap();
            let port = url.port();
            let named = match port {
                Some(port) => format!("{host}:{port}"),
                None => host.to_owned(),
            };
            assert!(vendor.hosts.contains(&named.as_str()), "{named}");
            let found = hosts.route_url(&routes, &url).map(|(r, _)| r.name.as_str());
            assert_eq!(found, Some(route.name.as_str()));
        }
        let mut names: Vec<_> = VENDORS.iter().map(|v| v.route).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), VENDORS.len());
    }

    #[test]
    fn vendor_hosts_map_to_their_routes_wherever_the_route_points() {
        let table = [
            (
                "https://api.openai.com/v1/chat/completions",
                Some(("default", "/v1/chat/completions")),
            ),
            (
                "https://API.Anthropic.com/v1/messages",
                Some(("anthropic", "/v1/messages")),
            ),
            (
                "https://api.groq.com/openai/v1/chat/completions",
                Some(("groq", "/openai/v1/chat/completions")),
            ),
            (
                "http://localhost:11434/api/chat",
                Some(("ollama", "/api/chat")),
            ),
            (
                "http://127.0.0.1:11434/api/chat",
                Some(("ollama", "/api/chat")),
            ),
            // The route's own upstream, under its base path (the last segment is kept, as a
            // client of the proxy sends it).
            (
                "https://gateway.internal/openai/v1/chat/completions",
                Some(("gateway", "/v1/chat/completions")),
            ),
            // A test's fake standing in for the vendor is the route's upstream too.
            (
                "http://127.0.0.1:9999/v1/chat/completions",
                Some(("default", "/v1/chat/completions")),
            ),
            // Another port, another host, or a vendor whose route is not configured.
            ("https://api.openai.com:8443/v1/chat/completions", None),
            (
                "http://api.openai.com/v1/chat/completions",
                Some(("default", "/v1/chat/completions")),
            ),
            ("https://example.com/v1/chat/completions", None),
            ("https://api.mistral.ai/v1/chat/completions", None),
        ];
        for (url, expected) in table {
            let expected = expected.map(|(r, p)| (r.to_owned(), p.to_owned()));
            assert_eq!(routed(url), expected, "{url}");
        }
    }

    #[test]
    fn a_configured_route_of_a_known_name_serves_its_vendors_host() {
        let routes = vec![Route::new("mistral", "http://127.0.0.1:1")];
        let hosts = Hosts::new(&routes);
        assert_eq!(hosts.route("api.mistral.ai", 443, 443), Some("mistral"));
        assert_eq!(hosts.route("api.openai.com", 443, 443), None);
    }
}
