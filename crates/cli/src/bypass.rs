//! What to say about traffic that bypassed the base URL: for each host the proxy counted, what
//! makes its client use the proxy instead (the variable its SDKs read, a route to mount), or
//! how to let the test suite reach it legitimately. The recorder counts; only the command line
//! knows the variables and settings, so the advice lives here.

use cassette_recorder::proxy::{Bypassed, ProxyStats};
use cassette_recorder::Mode;

/// Well-known hosts (`*.` for every subdomain) and what makes their clients go through the
/// proxy. Kept in step with the client table of docs/proxy.md.
const ADVICE: &[(&str, &str)] = &[
    ("api.openai.com", "set OPENAI_BASE_URL"),
    ("api.anthropic.com", "set ANTHROPIC_BASE_URL"),
    (
        "generativelanguage.googleapis.com",
        "set GOOGLE_GEMINI_BASE_URL",
    ),
    (
        "*.openai.azure.com",
        "mount an `azure` route and set AZURE_OPENAI_ENDPOINT",
    ),
    (
        "*.cognitiveservices.azure.com",
        "mount an `azure` route and set AZURE_OPENAI_ENDPOINT",
    ),
    ("ollama.com", "set OLLAMA_HOST"),
    (
        "openrouter.ai",
        "mount a route: [routes.openrouter] upstream = \"https://openrouter.ai/api\", base URL <proxy>/openrouter/v1",
    ),
    (
        "api.groq.com",
        "mount a route: [routes.groq] upstream = \"https://api.groq.com/openai\", base URL <proxy>/groq/v1",
    ),
    (
        "api.mistral.ai",
        "mount a route: [routes.mistral] upstream = \"https://api.mistral.ai\", base URL <proxy>/mistral/v1",
    ),
    (
        "api.together.xyz",
        "mount a route: [routes.together] upstream = \"https://api.together.xyz\", base URL <proxy>/together/v1",
    ),
    (
        "api.deepseek.com",
        "mount a route: [routes.deepseek] upstream = \"https://api.deepseek.com\", base URL <proxy>/deepseek/v1",
    ),
    (
        "api.x.ai",
        "mount a route: [routes.xai] upstream = \"https://api.x.ai\", base URL <proxy>/xai/v1",
    ),
    (
        "openaipublic.blob.core.windows.net",
        "tiktoken fetching an encoding: cache it (TIKTOKEN_CACHE_DIR) or allow the host",
    ),
    (
        "huggingface.co",
        "a model or tokenizer download: cache it (HF_HUB_OFFLINE=1) or allow the host",
    ),
    (
        "raw.githubusercontent.com",
        "a download (litellm's price list: LITELLM_LOCAL_MODEL_COST_MAP=True): allow the host if the suite needs it",
    ),
];

/// What to do about requests to an unknown host.
const UNKNOWN_HOST: &str =
    "point its client at the proxy with a route ([routes.NAME]), or allow it: [bypass] allow in cassette.toml, --allow-host";

/// What makes the client of `host` go through the proxy (or why it is reached at all).
pub(crate) fn advice(host: &str) -> &'static str {
    let host = host.to_ascii_lowercase();
    ADVICE
        .iter()
        .find(|(pattern, _)| match pattern.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1),
            None => host == *pattern,
        })
        .map_or(UNKNOWN_HOST, |(_, advice)| advice)
}

/// `api.openai.com:443 (set OPENAI_BASE_URL), example.com:80 ×2 (...)`: each host once, with
/// its count when several hosts share the total.
fn hosts(bypassed: &[Bypassed]) -> String {
    bypassed
        .iter()
        .map(|b| {
            let count = if bypassed.len() > 1 && b.requests() > 1 {
                format!(" ×{}", b.requests())
            } else {
                String::new()
            };
            format!("{}:{}{count} ({})", b.host, b.port, advice(&b.host))
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

/// The report of the traffic that bypassed the base URL, when there was some: in replay it
/// was refused (and fails the run); otherwise it went through unrecorded, and replay will
/// refuse it.
pub(crate) fn report(stats: &ProxyStats, mode: Mode) -> Option<String> {
    let total = stats.bypass_count();
    if total == 0 {
        return None;
    }
    let refused: u64 = stats.bypassed.iter().map(|b| b.refused).sum();
    let hosts = hosts(&stats.bypassed);
    let verb = if total == 1 { "was" } else { "were" };
    Some(if mode == Mode::Replay {
        format!(
            "{} bypassed the base URL and {verb} refused (replay never connects anywhere): {hosts}",
            requests(total)
        )
    } else if refused == total {
        format!(
            "{} bypassed the base URL and {verb} refused: {hosts}",
            requests(total)
        )
    } else {
        format!(
            "WARNING: {} bypassed the base URL and {verb} tunnelled unrecorded: replay will refuse {}: {hosts}",
            requests(total),
            if total == 1 { "it" } else { "them" }
        )
    })
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
        }
    }

    fn stats(bypassed: Vec<Bypassed>) -> ProxyStats {
        ProxyStats {
            bypassed,
            ..ProxyStats::default()
        }
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
            ("api.groq.com", "https://api.groq.com/openai"),
            ("huggingface.co", "allow"),
            ("intranet.example", "[bypass] allow"),
            // A wildcard is for subdomains only, and a suffix is not a subdomain.
            ("openai.azure.com", "[bypass] allow"),
            ("evilopenai.azure.com", "[bypass] allow"),
            ("api.openai.com.evil.example", "[bypass] allow"),
        ] {
            assert!(advice(host).contains(needle), "{host}: {}", advice(host));
        }
    }

    #[test]
    fn the_report_names_each_host_and_what_to_set() {
        assert_eq!(report(&stats(vec![]), Mode::Replay), None);
        let one_host = stats(vec![bypassed("api.openai.com", 443, 2, 0)]);
        assert_eq!(
            report(&one_host, Mode::Replay).unwrap(),
            "2 requests bypassed the base URL and were refused (replay never connects anywhere): api.openai.com:443 (set OPENAI_BASE_URL)"
        );
        let two_hosts = stats(vec![
            bypassed("api.anthropic.com", 443, 0, 1),
            bypassed("api.openai.com", 443, 0, 3),
        ]);
        assert_eq!(
            report(&two_hosts, Mode::Record).unwrap(),
            "WARNING: 4 requests bypassed the base URL and were tunnelled unrecorded: replay will refuse them: api.anthropic.com:443 (set ANTHROPIC_BASE_URL), api.openai.com:443 ×3 (set OPENAI_BASE_URL)"
        );
        let single = stats(vec![bypassed("api.openai.com", 443, 0, 1)]);
        assert!(report(&single, Mode::Auto)
            .unwrap()
            .starts_with("WARNING: 1 request bypassed the base URL and was tunnelled unrecorded: replay will refuse it:"));
    }
}
