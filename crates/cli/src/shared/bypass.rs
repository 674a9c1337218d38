//! What to say about traffic that bypassed the base URL: for each host the proxy counted, what
//! makes its client use the proxy instead (the variable its SDK reads, a route to mount, what
//! to pass in code), or how to let the test suite reach it legitimately. The recorder counts;
//! only the command line knows the variables and settings, so the advice lives here.
//!
//! Hosts fall into three kinds, reported apart: LLM APIs (a client that missed the proxy),
//! helper downloads (an encoding, a model, a price list a library fetches) and telemetry (a
//! framework reporting usage). Under `cassette exec`, the advice for an LLM API whose
//! variable exec set says so: that client had the variable and went around it, so the
//! variable was missing from its process (a suite deleting it, a subprocess started without
//! it) or its base URL is set in code. Where a request named its client (a `User-Agent`, which
//! plain-HTTP requests carry and a `CONNECT` rarely does), the advice is that client's.

use cassette_recorder::proxy::{Bypassed, ProxyStats};
use cassette_recorder::Mode;

/// What a host is, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An LLM API: a client that should have gone through the proxy.
    Llm,
    /// A helper download: an encoding, a model or a price list a library fetches.
    Download,
    /// A framework reporting usage.
    Telemetry,
}

/// A well-known host (`*.` for every subdomain) and what makes its clients go through the
/// proxy. Kept in step with the client table of docs/proxy.md.
struct Known {
    host: &'static str,
    kind: Kind,
    /// The variable its usual client reads for its base URL, when exec sets one.
    variable: Option<&'static str>,
    /// What to do, for any client.
    advice: &'static str,
    /// What to do for a client its user-agent token names (matched case-insensitively as a
    /// prefix of the token).
    clients: &'static [(&'static str, &'static str)],
}

const fn llm(host: &'static str, variable: Option<&'static str>, advice: &'static str) -> Known {
    Known {
        host,
        kind: Kind::Llm,
        variable,
        advice,
        clients: &[],
    }
}

/// What an OpenAI-compatible client (litellm, the openai SDK with a `base_url`) needs for the
/// groq route.
const GROQ_OPENAI: &str = "an OpenAI-compatible client (litellm `groq/`, openai with base_url): \
     base URL <proxy>/groq/openai/v1";
const GROQ_SDK: &str = "the groq SDK reads GROQ_BASE_URL=<proxy>/groq and joins /openai/v1 itself";
const MISTRAL_SDK: &str = "mistralai reads no variable: Mistral(server_url=\"<proxy>/mistral\") \
     (not /mistral/v1: the SDK joins /v1 itself), with a route [routes.mistral] upstream = \
     \"https://api.mistral.ai\"";
const MISTRAL_OPENAI: &str = "an OpenAI-compatible client: base URL <proxy>/mistral/v1, with a \
     route [routes.mistral] upstream = \"https://api.mistral.ai\"";

const KNOWN: &[Known] = &[
    llm("api.openai.com", Some("OPENAI_BASE_URL"), "set OPENAI_BASE_URL=<proxy>/v1"),
    llm(
        "api.anthropic.com",
        Some("ANTHROPIC_BASE_URL"),
        "set ANTHROPIC_BASE_URL=<proxy>/anthropic",
    ),
    llm(
        "generativelanguage.googleapis.com",
        Some("GOOGLE_GEMINI_BASE_URL"),
        "set GOOGLE_GEMINI_BASE_URL=<proxy>/gemini",
    ),
    llm(
        "*.openai.azure.com",
        None,
        "mount an `azure` route and set AZURE_OPENAI_ENDPOINT",
    ),
    llm(
        "*.cognitiveservices.azure.com",
        None,
        "mount an `azure` route and set AZURE_OPENAI_ENDPOINT",
    ),
    llm("ollama.com", Some("OLLAMA_HOST"), "set OLLAMA_HOST=<proxy>/ollama"),
    Known {
        host: "api.groq.com",
        kind: Kind::Llm,
        variable: Some("GROQ_BASE_URL"),
        advice: "the groq SDK reads GROQ_BASE_URL=<proxy>/groq and joins /openai/v1 itself; an \
                 OpenAI-compatible client (litellm `groq/`): base URL <proxy>/groq/openai/v1",
        clients: &[
            ("groq", GROQ_SDK),
            ("openai", GROQ_OPENAI),
            ("litellm", GROQ_OPENAI),
        ],
    },
    Known {
        host: "api.cohere.com",
        kind: Kind::Llm,
        variable: Some("CO_API_URL"),
        advice: "the cohere SDK reads CO_API_URL=<proxy>/cohere",
        clients: &[],
    },
    Known {
        host: "api.cohere.ai",
        kind: Kind::Llm,
        variable: Some("CO_API_URL"),
        advice: "the cohere SDK reads CO_API_URL=<proxy>/cohere",
        clients: &[],
    },
    Known {
        host: "api.mistral.ai",
        kind: Kind::Llm,
        variable: None,
        advice: "mistralai reads no variable: Mistral(server_url=\"<proxy>/mistral\") (not \
                 /mistral/v1: the SDK joins /v1 itself), with a route [routes.mistral] \
                 upstream = \"https://api.mistral.ai\"; an OpenAI-compatible client: base URL \
                 <proxy>/mistral/v1",
        clients: &[("mistral", MISTRAL_SDK), ("openai", MISTRAL_OPENAI)],
    },
    llm(
        "openrouter.ai",
        None,
        "mount a route: [routes.openrouter] upstream = \"https://openrouter.ai/api\", base URL <proxy>/openrouter/v1",
    ),
    llm(
        "api.together.xyz",
        None,
        "mount a route: [routes.together] upstream = \"https://api.together.xyz\", base URL <proxy>/together/v1",
    ),
    llm(
        "api.deepseek.com",
        None,
        "mount a route: [routes.deepseek] upstream = \"https://api.deepseek.com\", base URL <proxy>/deepseek/v1",
    ),
    llm(
        "api.x.ai",
        None,
        "mount a route: [routes.xai] upstream = \"https://api.x.ai\", base URL <proxy>/xai/v1",
    ),
    Known {
        host: "openaipublic.blob.core.windows.net",
        kind: Kind::Download,
        variable: None,
        advice: "tiktoken fetching an encoding: set TIKTOKEN_CACHE_DIR to a folder that holds \
                 it (run once with the host reachable, or allow it), or turn off what needs it \
                 (langchain-openai embeddings: check_embedding_ctx_length=False)",
        clients: &[],
    },
    Known {
        host: "huggingface.co",
        kind: Kind::Download,
        variable: None,
        advice: "a model or tokenizer download: cache it and set HF_HUB_OFFLINE=1, or allow the host",
        clients: &[],
    },
    Known {
        host: "raw.githubusercontent.com",
        kind: Kind::Download,
        variable: None,
        advice: "a download (litellm's price list and Anthropic beta headers: LITELLM_LOCAL_MODEL_COST_MAP=True and LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS=True, which exec and the test-runner helpers set unless you set them): allow the host if the suite needs it",
        clients: &[],
    },
    Known {
        host: "telemetry.crewai.com",
        kind: Kind::Telemetry,
        variable: None,
        advice: "CrewAI's telemetry: CREWAI_DISABLE_TELEMETRY=true (exec sets it unless you set it otherwise)",
        clients: &[],
    },
    Known {
        host: "*.posthog.com",
        kind: Kind::Telemetry,
        variable: None,
        advice: "usage analytics (chromadb, mem0 and others report to PostHog): ANONYMIZED_TELEMETRY=False, MEM0_TELEMETRY=False, DO_NOT_TRACK=1 (exec sets them unless you did)",
        clients: &[],
    },
    Known {
        host: "api.smith.langchain.com",
        kind: Kind::Telemetry,
        variable: None,
        advice: "LangSmith tracing: unset LANGSMITH_TRACING / LANGCHAIN_TRACING_V2 for the tests",
        clients: &[],
    },
];

/// What to do about requests to an unknown host.
// The libraries' words, and the flag only the CLI may name (tests/library_boundaries.rs).
fn unknown_host() -> String {
    format!(
        "{} (or --allow-host)",
        cassette_review::failure::UNROUTED_HOST_ADVICE
    )
}

/// The well-known host `host` is, if it is one.
fn known(host: &str) -> Option<&'static Known> {
    let host = host.to_ascii_lowercase();
    KNOWN.iter().find(|k| match k.host.strip_prefix("*.") {
        Some(domain) => host
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1),
        None => host == k.host,
    })
}

/// What kind of host `host` is (an unknown one counts as an LLM API: it may well be one).
pub(crate) fn kind(host: &str) -> Kind {
    known(host).map_or(Kind::Llm, |k| k.kind)
}

/// What makes the client of `host` go through the proxy (or why it is reached at all), for the
/// clients named (user-agent tokens), given what `exec` set (`set`: a variable's value, `None`
/// for `cassette proxy`, which sets nothing).
pub(crate) fn advice(
    host: &str,
    clients: &[String],
    set: &dyn Fn(&str) -> Option<String>,
) -> String {
    let Some(known) = known(host) else {
        return unknown_host();
    };
    let client = clients.iter().find_map(|token| {
        let token = token.to_ascii_lowercase();
        known
            .clients
            .iter()
            .find(|(prefix, _)| token.starts_with(prefix))
            .map(|(_, advice)| (token.clone(), *advice))
    });
    let advice = match &client {
        Some((token, advice)) => format!("{token}: {advice}"),
        None => known.advice.to_owned(),
    };
    match known.variable.and_then(|v| Some((v, set(v)?))) {
        // The client went around a variable exec gave it: say that, not "set it".
        Some((variable, value)) => {
            // "set VAR" is what exec did; anything more the advice says still helps.
            let more = if advice.starts_with(&format!("set {variable}")) {
                String::new()
            } else {
                format!(" ({advice})")
            };
            format!(
                "exec set {variable}={value}, yet this client went to the host itself: \
                 {variable} was missing from the process that sent it (removed by the suite, as \
                 a conftest's monkeypatch.delenv does, or not passed to a subprocess), or the \
                 client was given its base URL in code; keep {variable} as exec sets it{more}"
            )
        }
        None => advice,
    }
}

/// `api.openai.com:443 (set OPENAI_BASE_URL), example.com:80 ×2 (...)`: each host once, with
/// its count when several hosts share the total.
fn hosts(bypassed: &[&Bypassed], set: &dyn Fn(&str) -> Option<String>) -> String {
    bypassed
        .iter()
        .map(|b| {
            let count = if bypassed.len() > 1 && b.requests() > 1 {
                format!(" ×{}", b.requests())
            } else {
                String::new()
            };
            format!(
                "{}:{}{count} ({})",
                b.host,
                b.port,
                advice(&b.host, &b.clients, set)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn requests(n: u64) -> String {
    if n == 1 {
        "1 request".to_owned()
    } else {
        format!("{n} requests")
    }
}

/// The report of the traffic that bypassed the base URL, one line per kind of host that had
/// some: in replay it was refused (and fails the run); otherwise it went through unrecorded,
/// and replay will refuse it. `set` is what exec set in the command's environment.
pub(crate) fn report(
    stats: &ProxyStats,
    mode: Mode,
    set: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut lines = Vec::new();
    for (kind, several, one) in [
        (Kind::Llm, "bypassed the base URL", "bypassed the base URL"),
        (
            Kind::Download,
            "were helper downloads (not LLM calls)",
            "was a helper download (not an LLM call)",
        ),
        (
            Kind::Telemetry,
            "were telemetry (not LLM calls)",
            "was telemetry (not an LLM call)",
        ),
    ] {
        let of_kind: Vec<&Bypassed> = stats
            .bypassed
            .iter()
            .filter(|b| self::kind(&b.host) == kind)
            .collect();
        let total: u64 = of_kind.iter().map(|b| b.requests()).sum();
        if total == 0 {
            continue;
        }
        let refused: u64 = of_kind.iter().map(|b| b.refused).sum();
        let hosts = hosts(&of_kind, set);
        let verb = if total == 1 { "was" } else { "were" };
        let what = if total == 1 { one } else { several };
        lines.push(if mode == Mode::Replay {
            format!(
                "{} {what} and {verb} refused (replay never connects anywhere): {hosts}",
                requests(total)
            )
        } else if refused == total {
            format!("{} {what} and {verb} refused: {hosts}", requests(total))
        } else {
            format!(
                "WARNING: {} {what} and {verb} tunnelled unrecorded: replay will refuse {}: {hosts}",
                requests(total),
                if total == 1 { "it" } else { "them" }
            )
        });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bypassed(host: &str, port: u16, refused: u64, tunnelled: u64) -> Bypassed {
        Bypassed {
            host: host.to_owned(),
            port,
            refused,
            tunnelled,
            clients: Vec::new(),
        }
    }

    fn stats(bypassed: Vec<Bypassed>) -> ProxyStats {
        ProxyStats {
            bypassed,
            ..ProxyStats::default()
        }
    }

    fn nothing_set(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn vendor_hosts_map_to_what_their_clients_read() {
        for (host, needle) in [
            ("api.openai.com", "OPENAI_BASE_URL"),
            ("API.OpenAI.com", "OPENAI_BASE_URL"),
            ("api.anthropic.com", "ANTHROPIC_BASE_URL"),
            (
                "generativelanguage.googleapis.com",
                "GOOGLE_GEMINI_BASE_URL",
            ),
            ("my-resource.openai.azure.com", "AZURE_OPENAI_ENDPOINT"),
            ("x.cognitiveservices.azure.com", "AZURE_OPENAI_ENDPOINT"),
            ("ollama.com", "OLLAMA_HOST"),
            ("openrouter.ai", "[routes.openrouter]"),
            ("api.groq.com", "GROQ_BASE_URL=<proxy>/groq"),
            ("api.groq.com", "<proxy>/groq/openai/v1"),
            ("api.cohere.com", "CO_API_URL=<proxy>/cohere"),
            ("api.mistral.ai", "server_url=\"<proxy>/mistral\""),
            ("api.mistral.ai", "not /mistral/v1"),
            ("huggingface.co", "allow"),
            ("openaipublic.blob.core.windows.net", "TIKTOKEN_CACHE_DIR"),
            ("telemetry.crewai.com", "CREWAI_DISABLE_TELEMETRY=true"),
            ("intranet.example", "[bypass] allow"),
            // A wildcard is for subdomains only, and a suffix is not a subdomain.
            ("openai.azure.com", "[bypass] allow"),
            ("evilopenai.azure.com", "[bypass] allow"),
            ("api.openai.com.evil.example", "[bypass] allow"),
        ] {
            let said = advice(host, &[], &nothing_set);
            assert!(said.contains(needle), "{host}: {said}");
        }
    }

    #[test]
    fn a_client_that_names_itself_gets_its_own_hint() {
        let groq = advice("api.groq.com", &["Groq/Python".into()], &nothing_set);
        assert!(
            groq.starts_with("groq/python: the groq SDK reads GROQ_BASE_URL"),
            "{groq}"
        );
        assert!(!groq.contains("litellm"), "{groq}");
        let litellm = advice("api.groq.com", &["OpenAI/Python".into()], &nothing_set);
        assert!(litellm.contains("<proxy>/groq/openai/v1"), "{litellm}");
        assert!(!litellm.contains("GROQ_BASE_URL"), "{litellm}");
        let mistral = advice(
            "api.mistral.ai",
            &["mistral-client-python/1.9".into()],
            &nothing_set,
        );
        assert!(
            mistral.contains("server_url=\"<proxy>/mistral\""),
            "{mistral}"
        );
        assert!(
            !mistral.contains("base URL <proxy>/mistral/v1"),
            "{mistral}"
        );
        // An unknown client gets the general hint.
        let other = advice("api.mistral.ai", &["curl/8".into()], &nothing_set);
        assert!(
            other.contains("server_url") && other.contains("/mistral/v1"),
            "{other}"
        );
    }

    #[test]
    fn a_variable_exec_set_is_named_as_set_not_as_to_set() {
        let set =
            |name: &str| (name == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:5/v1".to_owned());
        let said = advice("api.openai.com", &[], &set);
        assert!(
            said.starts_with("exec set OPENAI_BASE_URL=http://127.0.0.1:5/v1, yet this client went to the host itself"),
            "{said}"
        );
        assert!(
            said.contains("missing from the process that sent it"),
            "{said}"
        );
        assert!(said.contains("monkeypatch.delenv"), "{said}");
        // What exec did not set is still to be set.
        assert_eq!(
            advice("api.openai.com", &[], &nothing_set),
            "set OPENAI_BASE_URL=<proxy>/v1"
        );
        assert!(advice("api.anthropic.com", &[], &set).starts_with("set ANTHROPIC_BASE_URL"));
    }

    #[test]
    fn the_report_names_each_host_and_what_to_set() {
        assert!(report(&stats(vec![]), Mode::Replay, &nothing_set).is_empty());
        let one_host = stats(vec![bypassed("api.openai.com", 443, 2, 0)]);
        assert_eq!(
            report(&one_host, Mode::Replay, &nothing_set),
            ["2 requests bypassed the base URL and were refused (replay never connects anywhere): api.openai.com:443 (set OPENAI_BASE_URL=<proxy>/v1)"]
        );
        let two_hosts = stats(vec![
            bypassed("api.anthropic.com", 443, 0, 1),
            bypassed("api.openai.com", 443, 0, 3),
        ]);
        assert_eq!(
            report(&two_hosts, Mode::Record, &nothing_set),
            ["WARNING: 4 requests bypassed the base URL and were tunnelled unrecorded: replay will refuse them: api.anthropic.com:443 (set ANTHROPIC_BASE_URL=<proxy>/anthropic), api.openai.com:443 ×3 (set OPENAI_BASE_URL=<proxy>/v1)"]
        );
        let single = stats(vec![bypassed("api.openai.com", 443, 0, 1)]);
        assert!(report(&single, Mode::Auto, &nothing_set)[0]
            .starts_with("WARNING: 1 request bypassed the base URL and was tunnelled unrecorded: replay will refuse it:"));
    }

    #[test]
    fn downloads_and_telemetry_are_reported_apart_from_llm_bypasses() {
        let mixed = stats(vec![
            bypassed("openaipublic.blob.core.windows.net", 443, 1, 0),
            bypassed("telemetry.crewai.com", 4319, 3, 0),
            bypassed("api.openai.com", 443, 1, 0),
        ]);
        let lines = report(&mixed, Mode::Replay, &nothing_set);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines[0].starts_with("1 request bypassed the base URL"),
            "{lines:?}"
        );
        assert!(
            lines[0].contains("api.openai.com") && !lines[0].contains("tiktoken"),
            "{lines:?}"
        );
        assert!(
            lines[1]
                .starts_with("1 request was a helper download (not an LLM call) and was refused"),
            "{lines:?}"
        );
        assert!(lines[1].contains("TIKTOKEN_CACHE_DIR"), "{lines:?}");
        assert!(
            lines[2].starts_with("3 requests were telemetry (not LLM calls) and were refused"),
            "{lines:?}"
        );
        assert!(lines[2].contains("CREWAI_DISABLE_TELEMETRY"), "{lines:?}");
    }
}
