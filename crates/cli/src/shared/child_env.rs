//! The environment of a command behind the proxy (`cassette exec`'s command, a test process
//! that a test runner plugin points at `cassette proxy --ready json`): every popular client's
//! base URL pointed at the proxy, placeholder keys, and unless the catch is off the proxy
//! variables, so a client whose base URL still points at a vendor is caught.

use crate::shared::settings::{Honoured, RouteKey, ServeSettings, BASE_URL_VARIABLES};
use cassette_recorder::proxy::RunSecret;

/// The API key the command gets in every key variable: SDKs refuse to construct without one,
/// and the proxy replaces it with the route's real key (or, in replay, never sends anything).
pub(crate) const PLACEHOLDER_API_KEY: &str = "cassette";

/// Key variables popular clients need set to construct, whatever the routes are.
const CLIENT_KEY_VARIABLES: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
];

/// cassette's own key variable: no client reads it, so the command does not get it at all.
const CASSETTE_KEY_VARIABLE: &str = "UPSTREAM_API_KEY";

/// The route Azure OpenAI clients are pointed at, when one is configured (an Azure resource has
/// no fixed upstream, so there is no built-in one), and the variable they read.
const AZURE_ROUTE: &str = "azure";
const AZURE_ENDPOINT_VARIABLE: &str = "AZURE_OPENAI_ENDPOINT";

/// Settings of clients that would otherwise call out on their own, whatever their base URL:
/// set unless the user set them. litellm downloads its price list when imported, and its
/// Anthropic beta-header table the first time a request of its needs it (inside a test, whose
/// refusal would fail it), though it ships a copy of each;
/// openai-agents posts traces to the vendor directly (and only with the placeholder key); the
/// rest are the documented telemetry opt-outs of popular frameworks, whose reports replay would
/// refuse (failing an all-hits run) and record would send out unrecorded.
const CLIENT_DEFAULTS: &[(&str, &str)] = &[
    ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
    ("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True"),
    ("OPENAI_AGENTS_DISABLE_TRACING", "1"),
    // CrewAI: telemetry.crewai.com
    ("CREWAI_DISABLE_TELEMETRY", "true"),
    // Haystack: its PostHog telemetry
    ("HAYSTACK_TELEMETRY_ENABLED", "False"),
    // chromadb: PostHog product telemetry
    ("ANONYMIZED_TELEMETRY", "False"),
    // mem0: PostHog telemetry
    ("MEM0_TELEMETRY", "False"),
    // huggingface_hub: usage pings
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    // Gradio: analytics
    ("GRADIO_ANALYTICS_ENABLED", "False"),
    // unstructured and other Scarf-instrumented packages
    ("SCARF_NO_ANALYTICS", "true"),
    // The shared convention many tools honour (consoledonottrack.com)
    ("DO_NOT_TRACK", "1"),
];

/// The proxy variables clients honour (curl reads only the lower-case `http_proxy`; most
/// others either form).
const PROXY_VARIABLES: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];
const NO_PROXY_VARIABLES: &[&str] = &["NO_PROXY", "no_proxy"];

/// Hosts that always stay direct: the proxy itself and the tests' own local servers.
const LOOPBACK: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// Node 24 (and 22.21+) honours the proxy variables in `fetch` and `http` only when asked.
const NODE_PROXY_SWITCH: (&str, &str) = ("NODE_USE_ENV_PROXY", "1");

/// Keeps the real keys this process holds from the command it serves. The command's own
/// environment gets placeholders only, but it could read this process's: on Linux, any process
/// of the same user may read another's `/proc/PID/environ` (the environment as it was when the
/// process started, which removing a variable later does not change) and its memory. An
/// undumpable process's `/proc` files belong to root and it cannot be traced, so neither can
/// be read (nor is a core dump of it written). Root, or a process with `CAP_SYS_PTRACE`, still
/// can: docs/proxy.md says what is guaranteed. Elsewhere this does nothing.
pub(crate) fn hide_own_environment() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_DUMPABLE takes an integer and touches no memory of ours.
        let done = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        if done != 0 {
            eprintln!(
                "cassette: warning: cannot make this process undumpable ({}); the command it \
                 serves may read its environment in /proc",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// Where a command behind the proxy reaches it: `url`, the proxy's own address (what the
/// proxy variables name: a forward proxy is addressed by host), and `base`, what every base
/// URL begins with: `url` followed by the run secret's path (`/_run/SECRET`) when the proxy
/// requires one.
#[derive(Debug, Clone)]
pub(crate) struct ProxyAddress {
    pub(crate) url: String,
    pub(crate) base: String,
    secret: Option<RunSecret>,
}

impl ProxyAddress {
    pub(crate) fn new(url: &str, secret: Option<&RunSecret>) -> ProxyAddress {
        ProxyAddress {
            url: url.to_owned(),
            base: match secret {
                Some(secret) => format!("{url}{}", secret.path_prefix()),
                None => url.to_owned(),
            },
            secret: secret.cloned(),
        }
    }

    /// `text` (a variable's value) as it may be printed: without the run secret.
    pub(crate) fn shown(&self, text: &str) -> String {
        match &self.secret {
            Some(secret) => secret.hide(text),
            None => text.to_owned(),
        }
    }
}

/// What the child's environment gains or loses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EnvChange {
    Set(String, String),
    Remove(String),
}

/// The environment changes for the child, given where it reaches the proxy, where the routes'
/// keys come from (one entry per route), the catch, and the current environment (`lookup`).
/// `CASSETTE_PROXY_URL` and the base URLs carry the run secret, the proxy variables do not.
pub(crate) fn child_env(
    proxy: &ProxyAddress,
    keys: &[RouteKey],
    serve: &ServeSettings,
    lookup: impl Fn(&str) -> Option<String>,
) -> Vec<EnvChange> {
    let set = |name: &str, value: String| EnvChange::Set(name.to_owned(), value);
    let is_set = |name: &str| matches!(lookup(name), Some(v) if !v.trim().is_empty());
    let (url, base) = (proxy.url.as_str(), proxy.base.as_str());
    let mut env = vec![set("CASSETTE_PROXY_URL", base.to_owned())];
    for variable in BASE_URL_VARIABLES {
        env.push(set(variable.name, format!("{base}{}", variable.path)));
    }
    if keys.iter().any(|k| k.route == AZURE_ROUTE) {
        env.push(set(
            AZURE_ENDPOINT_VARIABLE,
            format!("{base}/{AZURE_ROUTE}"),
        ));
    }
    for (name, value) in CLIENT_DEFAULTS {
        if !is_set(name) {
            env.push(set(name, (*value).to_owned()));
        }
    }
    if serve.catches() {
        env.extend(proxy_env(url, serve, &is_set));
    }
    env.extend(key_env(keys, &lookup));
    env
}

/// The variable that gives a Python process catching in process [`in_process_base_urls`]
/// (JSON; `cassette_cli/_base_urls.py` reads it).
pub(crate) const IN_PROCESS_URLS_ENV: &str = "CASSETTE_IN_PROCESS_URLS";

/// The base-URL variables as a process whose requests are caught in process sees them (the
/// pytest plugin's test process): not the proxy's address but where the request would go
/// without cassette, so a client following them sends the vendor's URL (or the user's own
/// endpoint, in `honoured`: the route's upstream now) and a test that snapshots a request URL
/// sees what it saw under vcrpy. The channel routes those hosts ([`child_env`]'s values remain
/// what the process's children get: a child cassette does not catch in process, such as a
/// Node 20 `fetch` that ignores the proxy variables, must still reach the proxy). With the
/// proxy variables set for the children (`serve` catches), they are there too as the user had
/// them (`lookup`; null: unset): every request of the process is caught before a proxy
/// setting is read, and httpx builds one transport, with its own TLS context (about 20 ms of
/// loading CA certificates), for every proxy variable set, in each client it makes.
pub(crate) fn in_process_base_urls(
    honoured: &[Honoured],
    serve: &ServeSettings,
    lookup: impl Fn(&str) -> Option<String>,
) -> serde_json::Map<String, serde_json::Value> {
    let base_urls = BASE_URL_VARIABLES.iter().map(|variable| {
        let name = variable.name;
        let value = honoured
            .iter()
            .find(|h| h.variable == name)
            .map_or(variable.vendor, |h| h.value.as_str());
        (name.to_owned(), serde_json::Value::from(value))
    });
    let proxies = PROXY_VARIABLES
        .iter()
        .chain(NO_PROXY_VARIABLES)
        .filter(|_| serve.catches())
        .map(|name| {
            let own = lookup(name).filter(|value| !value.trim().is_empty());
            (
                (*name).to_owned(),
                own.map_or(serde_json::Value::Null, serde_json::Value::from),
            )
        });
    base_urls.chain(proxies).collect()
}

/// The proxy variables: everything through the proxy but loopback and the allowed hosts.
fn proxy_env(url: &str, serve: &ServeSettings, is_set: &dyn Fn(&str) -> bool) -> Vec<EnvChange> {
    let mut direct: Vec<String> = LOOPBACK.iter().map(|h| (*h).to_owned()).collect();
    for pattern in serve.allowed() {
        let entry = pattern.no_proxy_entry();
        if !direct.contains(&entry) {
            direct.push(entry);
        }
    }
    let direct = direct.join(",");
    let mut env: Vec<EnvChange> = PROXY_VARIABLES
        .iter()
        .map(|name| EnvChange::Set((*name).to_owned(), url.to_owned()))
        .chain(
            NO_PROXY_VARIABLES
                .iter()
                .map(|name| EnvChange::Set((*name).to_owned(), direct.clone())),
        )
        .collect();
    let (name, value) = NODE_PROXY_SWITCH;
    if !is_set(name) {
        env.push(EnvChange::Set(name.to_owned(), value.to_owned()));
    }
    env
}

/// Placeholder keys: in every route's key variable and every client key variable left unset,
/// so SDKs construct and never see a real key; cassette's own key variable removed.
fn key_env(keys: &[RouteKey], lookup: &dyn Fn(&str) -> Option<String>) -> Vec<EnvChange> {
    let held = |name: &str| keys.iter().any(|k| k.sources.iter().any(|s| s == name));
    let mut names: Vec<&str> = CLIENT_KEY_VARIABLES.to_vec();
    for key in keys {
        for source in &key.sources {
            if !names.contains(&source.as_str()) {
                names.push(source);
            }
        }
    }
    let mut env = Vec::new();
    for name in names {
        let unset = !matches!(lookup(name), Some(v) if !v.trim().is_empty());
        if name == CASSETTE_KEY_VARIABLE {
            env.push(EnvChange::Remove(name.to_owned()));
        } else if held(name) || unset {
            env.push(EnvChange::Set(
                name.to_owned(),
                PLACEHOLDER_API_KEY.to_owned(),
            ));
        }
    }
    if !names_contain(&env, CASSETTE_KEY_VARIABLE) && lookup(CASSETTE_KEY_VARIABLE).is_some() {
        env.push(EnvChange::Remove(CASSETTE_KEY_VARIABLE.to_owned()));
    }
    env
}

fn names_contain(env: &[EnvChange], name: &str) -> bool {
    env.iter().any(|change| match change {
        EnvChange::Set(n, _) | EnvChange::Remove(n) => n == name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::settings::keys_summary;
    use cassette_recorder::proxy::Forwarding;

    fn route_key(route: &str, sources: &[&str], from: Option<&str>) -> RouteKey {
        RouteKey {
            route: route.to_owned(),
            sources: sources.iter().map(|s| (*s).to_owned()).collect(),
            from: from.map(str::to_owned),
        }
    }

    fn built_in(from: Option<&str>, anthropic: Option<&str>) -> Vec<RouteKey> {
        vec![
            route_key("default", &["UPSTREAM_API_KEY", "OPENAI_API_KEY"], from),
            route_key("anthropic", &["ANTHROPIC_API_KEY"], anthropic),
            route_key("ollama", &[], None),
            route_key("gemini", &["GEMINI_API_KEY", "GOOGLE_API_KEY"], None),
        ]
    }

    fn catching(allow: &[&str]) -> ServeSettings {
        ServeSettings {
            miss_status: 409,
            retrying_miss_status: None,
            forwarding: Forwarding::Catch {
                allow: allow.iter().map(|a| a.parse().unwrap()).collect(),
            },
        }
    }

    fn env_of(keys: &[RouteKey], lookup: impl Fn(&str) -> Option<String>) -> Vec<EnvChange> {
        child_env(
            &ProxyAddress::new("http://127.0.0.1:5", None),
            keys,
            &catching(&[]),
            lookup,
        )
    }

    fn get<'a>(env: &'a [EnvChange], name: &str) -> Option<&'a str> {
        env.iter().find_map(|c| match c {
            EnvChange::Set(n, v) if n == name => Some(v.as_str()),
            _ => None,
        })
    }

    fn removed(env: &[EnvChange], name: &str) -> bool {
        env.contains(&EnvChange::Remove(name.to_owned()))
    }

    #[test]
    fn child_env_points_every_client_at_the_proxy() {
        let env = env_of(&built_in(None, None), |_| None);
        for (name, value) in [
            ("CASSETTE_PROXY_URL", "http://127.0.0.1:5"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:5/v1"),
            ("OPENAI_API_BASE", "http://127.0.0.1:5/v1"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:5/anthropic"),
            ("OLLAMA_HOST", "http://127.0.0.1:5/ollama"),
            ("OLLAMA_API_BASE", "http://127.0.0.1:5/ollama"),
            ("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:5/gemini"),
            ("GROQ_BASE_URL", "http://127.0.0.1:5/groq"),
            ("CO_API_URL", "http://127.0.0.1:5/cohere"),
            ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
            ("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True"),
            ("OPENAI_AGENTS_DISABLE_TRACING", "1"),
            ("CREWAI_DISABLE_TELEMETRY", "true"),
            ("HAYSTACK_TELEMETRY_ENABLED", "False"),
            ("ANONYMIZED_TELEMETRY", "False"),
            ("DO_NOT_TRACK", "1"),
        ] {
            assert_eq!(get(&env, name), Some(value), "{name}");
        }
        // No azure route, no Azure endpoint: the user's own (if any) is left alone.
        assert_eq!(get(&env, "AZURE_OPENAI_ENDPOINT"), None);
        // Nothing set: every client gets a placeholder, so SDKs construct.
        for name in CLIENT_KEY_VARIABLES {
            assert_eq!(get(&env, name), Some(PLACEHOLDER_API_KEY), "{name}");
        }
    }

    #[test]
    fn base_urls_carry_the_run_secret_and_the_proxy_variables_do_not() {
        let secret = RunSecret::new("0123456789abcdef0123").unwrap();
        let proxy = ProxyAddress::new("http://127.0.0.1:5", Some(&secret));
        let env = child_env(&proxy, &built_in(None, None), &catching(&[]), |_| None);
        let base = "http://127.0.0.1:5/_run/0123456789abcdef0123";
        assert_eq!(get(&env, "CASSETTE_PROXY_URL"), Some(base));
        assert_eq!(get(&env, "OPENAI_BASE_URL"), Some(&*format!("{base}/v1")));
        assert_eq!(get(&env, "OLLAMA_HOST"), Some(&*format!("{base}/ollama")));
        assert_eq!(get(&env, "HTTPS_PROXY"), Some("http://127.0.0.1:5"));
        assert_eq!(
            proxy.shown(&format!("{base}/v1")),
            "http://127.0.0.1:5/_run/…/v1"
        );
    }

    #[test]
    fn an_azure_route_gets_the_azure_endpoint_and_its_key_a_placeholder() {
        let mut keys = built_in(None, None);
        keys.push(route_key(
            "azure",
            &["AZURE_OPENAI_API_KEY"],
            Some("AZURE_OPENAI_API_KEY"),
        ));
        let real = |name: &str| (name == "AZURE_OPENAI_API_KEY").then(|| "az-real".to_owned());
        let env = env_of(&keys, real);
        assert_eq!(
            get(&env, "AZURE_OPENAI_ENDPOINT"),
            Some("http://127.0.0.1:5/azure")
        );
        assert_eq!(get(&env, "AZURE_OPENAI_API_KEY"), Some(PLACEHOLDER_API_KEY));
    }

    #[test]
    fn everything_but_loopback_and_allowed_hosts_goes_through_the_proxy() {
        let serve = catching(&["huggingface.co", "*.internal.example", "db.local:5432"]);
        let env = child_env(
            &ProxyAddress::new("http://127.0.0.1:5", None),
            &built_in(None, None),
            &serve,
            |_| None,
        );
        for name in PROXY_VARIABLES {
            assert_eq!(get(&env, name), Some("http://127.0.0.1:5"), "{name}");
        }
        for name in NO_PROXY_VARIABLES {
            assert_eq!(
                get(&env, name),
                Some("localhost,127.0.0.1,::1,huggingface.co,.internal.example,db.local"),
                "{name}"
            );
        }
        assert_eq!(get(&env, "NODE_USE_ENV_PROXY"), Some("1"));

        // The catch off: no proxy variable at all (the user's own stay as they are).
        let off = ServeSettings {
            miss_status: 409,
            retrying_miss_status: None,
            forwarding: Forwarding::Off,
        };
        let env = child_env(
            &ProxyAddress::new("http://127.0.0.1:5", None),
            &built_in(None, None),
            &off,
            |_| None,
        );
        for name in PROXY_VARIABLES.iter().chain(NO_PROXY_VARIABLES) {
            assert_eq!(get(&env, name), None, "{name}");
        }
        assert_eq!(get(&env, "NODE_USE_ENV_PROXY"), None);
    }

    #[test]
    fn a_users_own_client_settings_win_over_the_defaults() {
        let own = |name: &str| match name {
            "LITELLM_LOCAL_MODEL_COST_MAP" => Some("False".to_owned()),
            "CREWAI_DISABLE_TELEMETRY" => Some("false".to_owned()),
            "NODE_USE_ENV_PROXY" => Some("0".to_owned()),
            _ => None,
        };
        let env = env_of(&built_in(None, None), own);
        assert_eq!(get(&env, "LITELLM_LOCAL_MODEL_COST_MAP"), None);
        assert_eq!(get(&env, "CREWAI_DISABLE_TELEMETRY"), None);
        assert_eq!(get(&env, "NODE_USE_ENV_PROXY"), None);
        assert_eq!(get(&env, "OPENAI_AGENTS_DISABLE_TRACING"), Some("1"));
    }

    #[test]
    fn the_command_never_sees_a_key_the_proxy_holds() {
        let real = |name: &str| match name {
            "OPENAI_API_KEY" => Some("sk-real-openai".to_owned()),
            "UPSTREAM_API_KEY" => Some("sk-real-upstream".to_owned()),
            "ANTHROPIC_API_KEY" => Some("sk-ant-real".to_owned()),
            "GEMINI_API_KEY" => Some("AIza-real-gemini".to_owned()),
            "ACME_LLM_KEY" => Some("acme-real".to_owned()),
            "MISTRAL_API_KEY" => Some("mistral-own".to_owned()),
            _ => None,
        };
        let mut keys = vec![
            route_key(
                "default",
                &["UPSTREAM_API_KEY", "OPENAI_API_KEY"],
                Some("UPSTREAM_API_KEY"),
            ),
            route_key(
                "anthropic",
                &["ANTHROPIC_API_KEY"],
                Some("ANTHROPIC_API_KEY"),
            ),
            route_key("ollama", &[], None),
            route_key(
                "gemini",
                &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
                Some("GEMINI_API_KEY"),
            ),
        ];
        keys.push(route_key("acme", &["ACME_LLM_KEY"], Some("ACME_LLM_KEY")));
        let env = env_of(&keys, real);
        for name in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "ACME_LLM_KEY",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
        ] {
            assert_eq!(get(&env, name), Some(PLACEHOLDER_API_KEY), "{name}");
        }
        assert!(removed(&env, "UPSTREAM_API_KEY"));
        // No route reads MISTRAL_API_KEY: the client's own key passes through as set.
        assert_eq!(get(&env, "MISTRAL_API_KEY"), None);
        assert!(!removed(&env, "MISTRAL_API_KEY"));
        // A client key variable no route reads keeps a value the user set.
        let keys = vec![route_key("default", &["OPENAI_API_KEY"], None)];
        let env = env_of(&keys, |n| {
            (n == "GEMINI_API_KEY").then(|| "AIza-own".to_owned())
        });
        assert_eq!(get(&env, "GEMINI_API_KEY"), None);
        let shown = format!("{:?}", env_of(&built_in(None, None), real));
        for secret in ["sk-real", "sk-ant-real", "acme-real", "AIza-real"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    #[test]
    fn the_summary_names_where_each_key_came_from() {
        let mut keys = built_in(Some("OPENAI_API_KEY"), None);
        keys.push(route_key("acme", &["ACME_LLM_KEY"], Some("ACME_LLM_KEY")));
        assert_eq!(
            keys_summary(&keys),
            "keys held for default (OPENAI_API_KEY), acme (ACME_LLM_KEY); none for anthropic, ollama, gemini"
        );
        assert_eq!(
            keys_summary(&built_in(None, None)),
            "no route holds a key (clients' own credentials pass through)"
        );
    }

    #[test]
    fn in_process_the_base_urls_name_the_vendor_or_the_users_own_endpoint() {
        let honoured = [Honoured {
            variable: "OPENAI_BASE_URL".to_owned(),
            route: "default".to_owned(),
            value: "https://gateway.internal/v1".to_owned(),
            upstream: "https://gateway.internal/v1".to_owned(),
        }];
        let user = |name: &str| (name == "HTTPS_PROXY").then(|| "http://corp:3128".to_owned());
        let urls = in_process_base_urls(&honoured, &catching(&[]), user);
        let url_of = |name: &str| urls.get(name).and_then(|v| v.as_str());
        // Honoured: the user's endpoint, the route's upstream.
        assert_eq!(
            url_of("OPENAI_BASE_URL"),
            Some("https://gateway.internal/v1")
        );
        // Set but not honoured (cassette's settings chose the route): the vendor's URL, which
        // routes to that route wherever it points; the user's value would be refused.
        assert_eq!(
            url_of("ANTHROPIC_BASE_URL"),
            Some("https://api.anthropic.com")
        );
        assert_eq!(url_of("OPENAI_API_BASE"), Some("https://api.openai.com/v1"));
        assert_eq!(url_of("OLLAMA_HOST"), Some("http://127.0.0.1:11434"));
        // Every variable the children get a proxy URL in is named, and no other.
        let children = env_of(&built_in(None, None), |_| None);
        for name in BASE_URL_VARIABLES.iter().map(|v| v.name) {
            assert!(get(&children, name).is_some_and(|v| v.starts_with("http://127.0.0.1:5/")));
        }
        // The proxy variables as the user had them: a proxy of their own, or none.
        assert_eq!(url_of("HTTPS_PROXY"), Some("http://corp:3128"));
        for name in PROXY_VARIABLES.iter().chain(NO_PROXY_VARIABLES) {
            assert!(get(&children, name).is_some(), "{name}");
            if *name != "HTTPS_PROXY" {
                assert_eq!(urls.get(*name), Some(&serde_json::Value::Null), "{name}");
            }
        }
        let variables = BASE_URL_VARIABLES.len() + PROXY_VARIABLES.len() + NO_PROXY_VARIABLES.len();
        assert_eq!(urls.len(), variables);
        // Not catching: no proxy variable is set for the children, none named.
        let off = ServeSettings {
            forwarding: Forwarding::Off,
            ..catching(&[])
        };
        let off = in_process_base_urls(&honoured, &off, user);
        assert_eq!(off.len(), BASE_URL_VARIABLES.len());
    }
}
