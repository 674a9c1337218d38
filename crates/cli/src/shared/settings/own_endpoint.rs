//! A user's own endpoint is honoured, never redirected: where a base-URL variable the proxy
//! would set for the clients (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`, ...) is already set in
//! the environment, say to a company gateway, its value becomes that route's upstream unless
//! cassette's own settings (cassette.toml's `[routes.NAME] upstream`, `--upstream`,
//! `UPSTREAM_BASE`, `--route`) set the route. Otherwise the proxy would take the clients'
//! traffic and send it, with the route's key (the gateway's key, read from the same
//! environment), to the vendor's default host: a credential sent to a third party.

use super::values::parse_base_url;
use anyhow::bail;
use cassette_recorder::Route;

/// A base-URL variable popular clients read (the client table of docs/proxy.md says who reads
/// which).
#[derive(Debug)]
pub(crate) struct BaseUrlVariable {
    /// The variable (`OPENAI_BASE_URL`).
    pub(crate) name: &'static str,
    /// The proxy path it is pointed at for the clients (`child_env.rs`).
    pub(crate) path: &'static str,
    /// The URL a client uses when it is unset: what it names in a process whose requests are
    /// caught in process, where the vendor's host maps to its route.
    pub(crate) vendor: &'static str,
    /// Whose upstream a value the user set becomes ([`honour`]), and how it is read.
    pub(crate) honour: Honour,
}

/// How a base-URL variable's value, when the user set one, becomes a route's upstream.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Honour {
    /// A base URL (`https://gateway.internal/v1`), of the named route.
    BaseUrl(&'static str),
    /// Ollama's host (`gpu-box`, `gpu-box:8080`, `https://gpu-box`), of the named route, read as
    /// the ollama clients read it: `http` and port 11434 unless it says otherwise. Ollama's
    /// default address is the route's built-in upstream, also as `0.0.0.0`, which an Ollama
    /// server is often told to listen on through the same variable.
    OllamaHost(&'static str),
}

impl Honour {
    fn route(self) -> &'static str {
        match self {
            Self::BaseUrl(route) | Self::OllamaHost(route) => route,
        }
    }

    /// The upstream `value` names, or none when it is the route's built-in one.
    fn upstream(self, value: &str) -> Result<Option<String>, String> {
        match self {
            Self::BaseUrl(_) => parse_base_url(value).map(Some),
            Self::OllamaHost(_) => ollama_upstream(value),
        }
    }
}

/// Ollama's port, where a host without one is served.
const OLLAMA_PORT: u16 = 11434;

/// The base URL an ollama client makes of `OLLAMA_HOST` (its `_parse_host`), or none for
/// Ollama's default address on this machine.
fn ollama_upstream(text: &str) -> Result<Option<String>, String> {
    let schemed = text.contains("://");
    let full = if schemed {
        text.to_owned()
    } else {
        format!("http://{text}")
    };
    let mut url = url::Url::parse(&full).map_err(|e| format!("`{text}` is not a host: {e}"))?;
    if !schemed && url.port().is_none() {
        url.set_port(Some(OLLAMA_PORT))
            .map_err(|()| format!("`{text}` is not a host"))?;
    }
    let base = parse_base_url(url.as_str().trim_end_matches('/'))?;
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_unspecified(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback() || ip.is_unspecified(),
        None => false,
    };
    let default = loopback && url.port_or_known_default() == Some(OLLAMA_PORT);
    Ok((!default).then_some(base))
}

/// Every base-URL variable the proxy sets for its clients; of two for one route, the first set
/// is honoured.
pub(crate) const BASE_URL_VARIABLES: &[BaseUrlVariable] = &[
    // openai (Python, Node), langchain-openai, instructor, pydantic-ai, openai-agents, Vercel AI SDK
    variable(
        "OPENAI_BASE_URL",
        "/v1",
        "https://api.openai.com/v1",
        Honour::BaseUrl("default"),
    ),
    // llama-index, litellm, older langchain
    variable(
        "OPENAI_API_BASE",
        "/v1",
        "https://api.openai.com/v1",
        Honour::BaseUrl("default"),
    ),
    // anthropic (Python, Node), langchain-anthropic, Vercel AI SDK
    variable(
        "ANTHROPIC_BASE_URL",
        "/anthropic",
        "https://api.anthropic.com",
        Honour::BaseUrl("anthropic"),
    ),
    // ollama (Python, JS)
    variable(
        "OLLAMA_HOST",
        "/ollama",
        "http://127.0.0.1:11434",
        Honour::OllamaHost("ollama"),
    ),
    // litellm's ollama providers
    variable(
        "OLLAMA_API_BASE",
        "/ollama",
        "http://localhost:11434",
        Honour::OllamaHost("ollama"),
    ),
    // google-genai, pydantic-ai `google:`
    variable(
        "GOOGLE_GEMINI_BASE_URL",
        "/gemini",
        "https://generativelanguage.googleapis.com",
        Honour::BaseUrl("gemini"),
    ),
    // groq (Python): joins /openai/v1/... itself
    variable(
        "GROQ_BASE_URL",
        "/groq",
        "https://api.groq.com",
        Honour::BaseUrl("groq"),
    ),
    // cohere (Python)
    variable(
        "CO_API_URL",
        "/cohere",
        "https://api.cohere.com",
        Honour::BaseUrl("cohere"),
    ),
];

const fn variable(
    name: &'static str,
    path: &'static str,
    vendor: &'static str,
    honour: Honour,
) -> BaseUrlVariable {
    BaseUrlVariable {
        name,
        path,
        vendor,
        honour,
    }
}

/// A variable whose value became a route's upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Honoured {
    /// The variable (`OPENAI_BASE_URL`).
    pub(crate) variable: String,
    /// The route it is the upstream of.
    pub(crate) route: String,
    /// Its value, as the user set it.
    pub(crate) value: String,
    /// The route's upstream now: the value, or the base URL it names (Ollama's host).
    pub(crate) upstream: String,
}

impl Honoured {
    /// The line that says so, on stderr and in the report; the URL shown without credentials.
    pub(crate) fn line(&self) -> String {
        let upstream = cassette_keying::shown_urls(&self.upstream);
        let named = if self.value == self.upstream {
            String::new()
        } else {
            format!(", {upstream}")
        };
        format!(
            "{}={} is the `{}` route's upstream (your own endpoint{named}: cassette records it \
             there, with that route's key; set [routes.{}] upstream in cassette.toml to choose \
             another)",
            self.variable,
            shown_value(&self.value),
            self.route,
            self.route
        )
    }
}

/// `value` without the credentials it may hold, also as a host without a scheme
/// (`user:secret@gpu-box`, as OLLAMA_HOST may be).
fn shown_value(value: &str) -> String {
    if value.contains("://") {
        return cassette_keying::shown_urls(value).into_owned();
    }
    let shown = cassette_keying::shown_urls(&format!("http://{value}")).into_owned();
    match shown.strip_prefix("http://") {
        Some(host) => host.to_owned(),
        None => shown,
    }
}

/// Makes the routes that cassette's own settings leave at their built-in upstream
/// (`set_by_cassette` says which it sets) take the upstream a base-URL variable names, looked
/// up with `lookup`. A value that points at a cassette proxy (`CASSETTE_PROXY_URL`: a nested
/// run, a pytest-xdist worker) is the proxy's own and is not taken.
pub(crate) fn honour(
    routes: &mut [Route],
    set_by_cassette: impl Fn(&str) -> bool,
    lookup: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Vec<Honoured>> {
    let proxy = lookup("CASSETTE_PROXY_URL").filter(|p| !p.trim().is_empty());
    let mut honoured: Vec<Honoured> = Vec::new();
    for &BaseUrlVariable {
        name: variable,
        honour,
        ..
    } in BASE_URL_VARIABLES
    {
        let route_name = honour.route();
        if honoured.iter().any(|h| h.route == route_name) || set_by_cassette(route_name) {
            continue;
        }
        let Some(value) = lookup(variable).map(|v| v.trim().to_owned()) else {
            continue;
        };
        if value.is_empty()
            || proxy
                .as_deref()
                .is_some_and(|p| value.starts_with(p.trim_end_matches('/')))
        {
            continue;
        }
        let Some(route) = routes.iter_mut().find(|r| r.name == route_name) else {
            continue;
        };
        let upstream = match honour.upstream(&value) {
            Ok(Some(upstream)) => upstream,
            Ok(None) => continue,
            Err(why) => bail!(
                "{variable} is set to a value that is not a base URL ({why}); cassette would make \
                 it the `{route_name}` route's upstream (your own endpoint). Fix it, or set \
                 [routes.{route_name}] upstream in cassette.toml"
            ),
        };
        route.base_url.clone_from(&upstream);
        honoured.push(Honoured {
            variable: variable.to_owned(),
            route: route_name.to_owned(),
            value,
            upstream,
        });
    }
    Ok(honoured)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> Vec<Route> {
        vec![
            Route::new("default", "https://api.openai.com"),
            Route::new("anthropic", "https://api.anthropic.com"),
        ]
    }

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn a_users_base_url_becomes_the_routes_upstream() {
        let mut routes = routes();
        let honoured = honour(
            &mut routes,
            |_| false,
            env(&[("OPENAI_BASE_URL", "https://gateway.internal/v1")]),
        )
        .unwrap();
        assert_eq!(routes[0].base_url, "https://gateway.internal/v1");
        assert_eq!(routes[1].base_url, "https://api.anthropic.com");
        assert_eq!(honoured.len(), 1);
        assert!(honoured[0].line().starts_with(
            "OPENAI_BASE_URL=https://gateway.internal/v1 is the `default` route's upstream"
        ));
    }

    #[test]
    fn cassettes_own_settings_and_its_own_proxy_win() {
        let mut routes = routes();
        let honoured = honour(
            &mut routes,
            |route| route == "default",
            env(&[
                ("OPENAI_BASE_URL", "https://gateway.internal/v1"),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:5/anthropic"),
                ("CASSETTE_PROXY_URL", "http://127.0.0.1:5"),
            ]),
        )
        .unwrap();
        assert!(honoured.is_empty(), "{honoured:?}");
        assert_eq!(routes[0].base_url, "https://api.openai.com");
        assert_eq!(routes[1].base_url, "https://api.anthropic.com");
        let bad = honour(
            &mut routes,
            |_| false,
            env(&[("ANTHROPIC_BASE_URL", "not a url")]),
        );
        assert!(bad.unwrap_err().to_string().contains("ANTHROPIC_BASE_URL"));
    }

    #[test]
    fn an_ollama_host_is_read_as_the_ollama_clients_read_it() {
        for (value, upstream) in [
            ("gpu-box", Some("http://gpu-box:11434")),
            ("gpu-box:8080", Some("http://gpu-box:8080")),
            ("https://gpu-box", Some("https://gpu-box")),
            ("http://10.0.0.7:11434/", Some("http://10.0.0.7:11434")),
            ("127.0.0.1:8089", Some("http://127.0.0.1:8089")),
            // Ollama's default address: the route's built-in upstream, nothing said.
            ("0.0.0.0", None),
            ("0.0.0.0:11434", None),
            ("localhost:11434", None),
            ("http://127.0.0.1:11434", None),
            ("[::1]", None),
        ] {
            let mut routes = vec![Route::new("ollama", "http://127.0.0.1:11434")];
            let honoured = honour(&mut routes, |_| false, env(&[("OLLAMA_HOST", value)])).unwrap();
            assert_eq!(
                honoured.first().map(|h| h.upstream.as_str()),
                upstream,
                "{value}"
            );
            let expected = upstream.unwrap_or("http://127.0.0.1:11434");
            assert_eq!(routes[0].base_url, expected, "{value}");
        }
        let mut routes = vec![Route::new("ollama", "http://127.0.0.1:11434")];
        let honoured = honour(
            &mut routes,
            |_| false,
            env(&[("OLLAMA_HOST", "user:hunter2@gpu-box")]),
        )
        .unwrap();
        let line = honoured[0].line();
        assert!(line.starts_with("OLLAMA_HOST="), "{line}");
        assert!(
            line.contains("gpu-box") && !line.contains("hunter2"),
            "{line}"
        );
        let mut routes = vec![Route::new("ollama", "http://127.0.0.1:11434")];
        let bad = honour(&mut routes, |_| false, env(&[("OLLAMA_HOST", "gpu:port")]));
        assert!(bad.unwrap_err().to_string().contains("OLLAMA_HOST"));
    }
}
