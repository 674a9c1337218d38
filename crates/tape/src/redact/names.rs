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

/// Response headers stored, by exact name: what a client or a reviewer needs from an LLM answer
/// (its type, the request id support asks for, retry advice, processing time, where a created
/// thing is). Everything else is dropped, whatever it is called: cookies, credentials, and a
/// gateway's re-sent vendor headers under a prefix (`llm_provider-set-cookie`) or its own
/// internals (`x-litellm-model-api-base`). A deny-list would miss the next gateway's spelling.
pub const RESPONSE_HEADER_ALLOW_LIST: &[&str] = &[
    "content-type",
    "content-language",
    "content-disposition",
    "cache-control",
    "location",
    "content-location",
    "retry-after",
    "retry-after-ms",
    "x-should-retry",
    "request-id",
    "x-request-id",
    "x-amzn-requestid",
    "x-amz-request-id",
    "apim-request-id",
    "x-ms-request-id",
    "cf-ray",
    "openai-processing-ms",
    "openai-version",
    "openai-model",
    "x-envoy-upstream-service-time",
    "server-timing",
    "ratelimit",
    "ratelimit-policy",
    // Google's resumable upload (the Gemini Files API): where the bytes go and how far it is.
    "x-goog-upload-url",
    "x-goog-upload-control-url",
    "x-goog-upload-status",
    "x-goog-upload-chunk-granularity",
    "x-goog-upload-size-received",
];

/// Response header families stored, by name prefix: rate limits (`x-ratelimit-remaining-tokens`,
/// `anthropic-ratelimit-requests-reset`, the IETF draft's `ratelimit-*`).
pub const RESPONSE_HEADER_ALLOW_PREFIXES: &[&str] = &[
    "x-ratelimit-",
    "anthropic-ratelimit-",
    "ratelimit-",
    "x-ms-ratelimit-",
];

/// Stored response headers whose value is the URL of the client's next request (Google's
/// resumable upload: the start answers where the bytes go). Stored as the upstream sent them,
/// less credentials; the recorder points them through the proxy on the way to the client.
pub const NEXT_REQUEST_URL_HEADERS: &[&str] = &["x-goog-upload-url", "x-goog-upload-control-url"];

/// Stored response headers whose value is a URL: they lose userinfo and credential parameters
/// (a signed upload URL's `X-Amz-Signature`, a `key=`, a `token=`) like any stored URL.
pub(super) const URL_VALUED_HEADERS: &[&str] = &[
    "location",
    "content-location",
    "x-goog-upload-url",
    "x-goog-upload-control-url",
];

/// Whether a response header (lowercased name) is stored.
pub(super) fn is_stored_response_header(lower: &str) -> bool {
    RESPONSE_HEADER_ALLOW_LIST.contains(&lower)
        || RESPONSE_HEADER_ALLOW_PREFIXES
            .iter()
            .any(|prefix| lower.starts_with(prefix))
}

/// Query parameter names removed: the key contract's own list
/// ([`cassette_keying::QUERY_CREDENTIALS`]), so a parameter left out of the key is never stored
/// and one that is stored is in the key. Normalized: compared after form-decoding, ASCII
/// lowercasing and removing `-` and `_`.
pub const QUERY_CREDENTIAL_NAMES: &[&str] = cassette_keying::QUERY_CREDENTIALS;

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
    // issue 10: names seen in the wild (LangChain, LiteLLM, gateways, OAuth, cloud SDKs)
    "auth",
    "authorizationtoken",
    "pwd",
    "usertoken",
    "accesskey",
    "accesskeysecret",
    "oauthtoken",
    "bearertoken",
    "privatetoken",
    "appsecret",
    "masterkey",
    "signingkey",
    "webhooksecret",
    "openaiapikey",
    "anthropicapikey",
    "azureapikey",
    "azureopenaiapikey",
    "googleapikey",
    "geminiapikey",
    "groqapikey",
    "mistralapikey",
    "cohereapikey",
    "togetherapikey",
    "deepseekapikey",
    "xaiapikey",
    "huggingfacetoken",
    "hftoken",
    "huggingfacehubapitoken",
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

pub(crate) fn is_body_credential_name(name: &str) -> bool {
    let n = normalize_name(name);
    BODY_CREDENTIALS.contains(&n) && !BODY_SAFE.contains(&n)
}

pub(super) fn is_query_credential_name(raw_name: &str) -> bool {
    // Decoded for comparison only; stored bytes are never re-encoded.
    cassette_keying::is_query_credential(&cassette_keying::form_decode(raw_name))
}

/// A field of a form-encoded or multipart body named like a credential: a query credential
/// name or a body credential name. The body safe-list does not apply: it names JSON fields of
/// LLM APIs, and a form field called `signature` is a credential.
pub(super) fn is_form_credential_name(raw_name: &str) -> bool {
    let decoded = cassette_keying::form_decode(raw_name);
    cassette_keying::is_query_credential(&decoded)
        || BODY_CREDENTIALS.contains(&normalize_name(&decoded))
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

    fn hdrs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// Issue 33: Gemini's resumable upload answers where the bytes go; the URL is stored (the
    /// upload id with it, which is no secret and must replay as it is: a long random one is no
    /// credential shape) without a `key=` and with its status headers.
    #[test]
    fn upload_url_headers_are_stored_without_credentials() {
        let out = crate::redact::Redactor::default().response_headers(&hdrs(&[
            (
                "X-Goog-Upload-URL",
                "https://generativelanguage.googleapis.com/upload/v1beta/files?upload_id=AHxI1nPn4T0xKq3lqK7mZkz0B9WvR2bZ7cJ3AKIAv5w1yQeXw8sA9fC1kL0mN2oP4qR6sT8uV0wX2yZ4aB6cD8eF0gH2iJ4kL6&upload_protocol=resumable&key=AIzaSyD0123456789abcdefghijklmnopqrstu",
            ),
            ("X-Goog-Upload-Status", "active"),
            ("X-Goog-Upload-Chunk-Granularity", "8388608"),
            ("X-Goog-Upload-Header-Content-Length", "12"),
        ]));
        assert_eq!(
            out,
            hdrs(&[
                (
                    "x-goog-upload-url",
                    "https://generativelanguage.googleapis.com/upload/v1beta/files?upload_id=AHxI1nPn4T0xKq3lqK7mZkz0B9WvR2bZ7cJ3AKIAv5w1yQeXw8sA9fC1kL0mN2oP4qR6sT8uV0wX2yZ4aB6cD8eF0gH2iJ4kL6&upload_protocol=resumable"
                ),
                ("x-goog-upload-status", "active"),
                ("x-goog-upload-chunk-granularity", "8388608"),
            ])
        );
    }

    #[test]
    fn normalize_ignores_case_and_separators() {
        assert_eq!(normalize_name("API_KEY"), "apikey");
        assert_eq!(normalize_name("x-api-key"), "xapikey");
        assert_eq!(normalize_name("clientSecret"), "clientsecret");
    }
}
