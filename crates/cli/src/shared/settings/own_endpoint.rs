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
    /// The route whose upstream a value the user set becomes ([`honour`]), or none: the Ollama
    /// variables also configure an Ollama server (`OLLAMA_HOST=0.0.0.0` is where it listens,
    /// not a base URL), and the ollama route holds no key that could go astray.
    pub(crate) honoured_for: Option<&'static str>,
}

/// Every base-URL variable the proxy sets for its clients; of two for one route, the first set
/// is honoured.
pub(crate) const BASE_URL_VARIABLES: &[BaseUrlVariable] = &[
    // openai (Python, Node), langchain-openai, instructor, pydantic-ai, openai-agents, Vercel AI SDK
    variable(
        "OPENAI_BASE_URL",
        "/v1",
        "https://api.openai.com/v1",
        Some("default"),
    ),
    // llama-index, litellm, older langchain
    variable(
        "OPENAI_API_BASE",
        "/v1",
        "https://api.openai.com/v1",
        Some("default"),
    ),
    // anthropic (Python, Node), langchain-anthropic, Vercel AI SDK
    variable(
        "ANTHROPIC_BASE_URL",
        "/anthropic",
        "https://api.anthropic.com",
        Some("anthropic"),
    ),
    // ollama (Python, JS)
    variable("OLLAMA_HOST", "/ollama", "http://127.0.0.1:11434", None),
    // litellm's ollama providers
    variable("OLLAMA_API_BASE", "/ollama", "http://localhost:11434", None),
    // google-genai, pydantic-ai `google:`
    variable(
        "GOOGLE_GEMINI_BASE_URL",
        "/gemini",
        "https://generativelanguage.googleapis.com",
        Some("gemini"),
    ),
    // groq (Python): joins /openai/v1/... itself
    variable(
        "GROQ_BASE_URL",
        "/groq",
        "https://api.groq.com",
        Some("groq"),
    ),
    // cohere (Python)
    variable(
        "CO_API_URL",
        "/cohere",
        "https://api.cohere.com",
        Some("cohere"),
    ),
];

const fn variable(
    name: &'static str,
    path: &'static str,
    vendor: &'static str,
    honoured_for: Option<&'static str>,
) -> BaseUrlVariable {
    BaseUrlVariable {
        name,
        path,
        vendor,
        honoured_for,
    }
}

/// A variable whose value became a route's upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Honoured {
    /// The variable (`OPENAI_BASE_URL`).
    pub(crate) variable: String,
    /// The route it is the upstream of.
    pub(crate) route: String,
    /// Its value, the route's upstream now.
    pub(crate) upstream: String,
}

impl Honoured {
    /// The line that says so, on stderr and in the report; the URL shown without credentials.
    pub(crate) fn line(&self) -> String {
        format!(
            "{}={} is the `{}` route's upstream (your own endpoint: cassette records it there, \
             with that route's key; set [routes.{}] upstream in cassette.toml to choose another)",
            self.variable,
            cassette_keying::shown_urls(&self.upstream),
            self.route,
            self.route
        )
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
    for (variable, route_name) in BASE_URL_VARIABLES
        .iter()
        .filter_map(|v| Some((v.name, v.honoured_for?)))
    {
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
        let upstream = match parse_base_url(&value) {
            Ok(upstream) => upstream,
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
}
