//! Names: which request headers are kept, which response headers, query parameters and JSON
//! members are credentials, and which LLM API fields are safe from name rules.

use std::collections::HashSet;
use std::sync::LazyLock;

/// Request headers kept on disk. Everything else (authorization, x-api-key, api-key, cookies,
/// user agents, tracing ids) is dropped: a deny-list would miss the next vendor's header.
pub const REQUEST_HEADER_ALLOW_LIST: &[&str] = &[
    "content-type",
    "accept",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
];

/// Response headers never stored: cookies, credentials, hop-by-hop headers, and the framing
/// headers that stop being true once the body is stored decoded.
pub const RESPONSE_HEADER_DENY_LIST: &[&str] = &[
    "set-cookie",
    "set-cookie2",
    "cookie",
    "authorization",
    "proxy-authorization",
    "proxy-authenticate",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "x-auth-token",
    "x-access-token",
    "x-refresh-token",
    "x-session-token",
    "x-csrf-token",
    "x-xsrf-token",
    "x-amz-security-token",
    "ocp-apim-subscription-key",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "content-encoding",
];

/// Query parameter names removed, compared after [`normalize_name`] (case and `-`/`_`
/// ignored).
pub const QUERY_CREDENTIAL_NAMES: &[&str] = &[
    "key",
    "apikey",
    "xapikey",
    "apitoken",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "authtoken",
    "sessiontoken",
    "token",
    "auth",
    "authorization",
    "password",
    "passwd",
    "secret",
    "clientsecret",
    "privatekey",
    "subscriptionkey",
    "sig",
    "signature",
    "xamzsignature",
    "xamzcredential",
    "xamzsecuritytoken",
    "xgoogsignature",
    "xgoogcredential",
];

/// JSON member names whose scalar values are redacted, compared after [`normalize_name`]. An
/// exact list, not substrings: `max_tokens` or `token_budget` never match.
pub const BODY_CREDENTIAL_NAMES: &[&str] = &[
    "apikey",
    "xapikey",
    "apisecret",
    "apitoken",
    "authtoken",
    "xauthtoken",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "sessiontoken",
    "securitytoken",
    "token",
    "bearer",
    "authorization",
    "proxyauthorization",
    "password",
    "passwd",
    "passphrase",
    "secret",
    "clientsecret",
    "secretkey",
    "privatekey",
    "secretaccesskey",
    "awssecretaccesskey",
    "awssessiontoken",
    "cookie",
    "setcookie",
    "credential",
    "credentials",
    "subscriptionkey",
    "ocpapimsubscriptionkey",
    "xgoogapikey",
];

/// LLM API member names that are never redacted by name, compared after [`normalize_name`].
/// None is on the credential list today; the list guards against a future addition (say a
/// substring rule) mangling them, and documents what must survive byte for byte.
pub const BODY_SAFE_NAMES: &[&str] = &[
    // request limits and sampling
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "max_new_tokens",
    "max_tokens_to_sample",
    "maxOutputTokens",
    "num_predict",
    "num_ctx",
    "top_logprobs",
    "logprobs",
    "logit_bias",
    "stop_sequences",
    "budget_tokens",
    "thinking_budget",
    "token_budget",
    // usage
    "tokens",
    "token_count",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "prompt_tokens",
    "completion_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_tokens",
    "cached_tokens",
    "audio_tokens",
    "text_tokens",
    "image_tokens",
    "accepted_prediction_tokens",
    "rejected_prediction_tokens",
    "input_tokens_details",
    "output_tokens_details",
    "prompt_tokens_details",
    "completion_tokens_details",
    "promptTokenCount",
    "candidatesTokenCount",
    "totalTokenCount",
    "thoughtsTokenCount",
    "cachedContentTokenCount",
    "eval_count",
    "prompt_eval_count",
    // opaque values that must replay byte for byte (thinking signatures, encrypted reasoning)
    "signature",
    "thoughtSignature",
    "encrypted_content",
];

/// Subtrees whose member names are model output (token strings in legacy `top_logprobs`, token
/// ids in `logit_bias`) or where `token` means a model token: name rules do not apply inside;
/// shape rules still do.
pub(super) const NAME_EXEMPT_SUBTREES: &[&str] = &["logprobs", "toplogprobs", "logitbias"];

/// Lowercase with `-` and `_` removed, so `API_KEY`, `api-key` and `apiKey` compare equal.
pub fn normalize_name(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

fn normalized_set(list: &[&str]) -> HashSet<String> {
    list.iter().map(|n| normalize_name(n)).collect()
}

static BODY_CREDENTIALS: LazyLock<HashSet<String>> =
    LazyLock::new(|| normalized_set(BODY_CREDENTIAL_NAMES));
static BODY_SAFE: LazyLock<HashSet<String>> = LazyLock::new(|| normalized_set(BODY_SAFE_NAMES));
static QUERY_CREDENTIALS: LazyLock<HashSet<String>> =
    LazyLock::new(|| normalized_set(QUERY_CREDENTIAL_NAMES));

pub(super) fn is_body_credential_name(name: &str) -> bool {
    let n = normalize_name(name);
    BODY_CREDENTIALS.contains(&n) && !BODY_SAFE.contains(&n)
}

pub(super) fn is_query_credential_name(raw_name: &str) -> bool {
    // Decoded for comparison only; stored bytes are never re-encoded.
    QUERY_CREDENTIALS.contains(&normalize_name(&cassette_keying::form_decode(raw_name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_list_and_credential_list_are_disjoint() {
        for safe in BODY_SAFE_NAMES {
            assert!(
                !BODY_CREDENTIALS.contains(&normalize_name(safe)),
                "{safe} is on both lists"
            );
            assert!(!is_body_credential_name(safe), "{safe}");
        }
    }

    #[test]
    fn normalize_ignores_case_and_separators() {
        assert_eq!(normalize_name("API_KEY"), "apikey");
        assert_eq!(normalize_name("x-api-key"), "xapikey");
        assert_eq!(normalize_name("clientSecret"), "clientsecret");
    }
}
