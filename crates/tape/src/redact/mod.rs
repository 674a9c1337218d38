//! Redaction: what never reaches disk. Pure transformations of what gets stored; the key is
//! computed from the original request elsewhere, so nothing here changes which tape answers.
//!
//! The rules, in order of strength (see `docs/redaction.md`):
//!
//! * request and response headers are kept from allow-lists only (a gateway re-sending vendor
//!   headers under a prefix gets nothing through);
//! * query parameters named like credentials are removed (the key contract's own list, so they
//!   are never in the key either), and form-encoded and multipart fields so named lose their
//!   value;
//! * JSON members whose *name* is an exact credential name lose their value, except names on an
//!   explicit safe-list of LLM API fields and anything under `logprobs`-like subtrees (whose
//!   member names are model tokens, not field names); JSON held in a string gets the same rules;
//! * credential-*shaped* substrings (`sk-...`, `AKIA...`, JWTs, `Bearer <token>`, ...) are
//!   replaced wherever they appear in a stored string, also right after an escape (`\nsk-...`),
//!   inside binary bodies, and across the events of a stream;
//! * users add JSON paths and regexes for their own data (personal data, internal ids).
//!
//! One file per job: `shapes` finds credential-shaped text, `names` holds the header, query and
//! body name lists, `json_path` applies user JSON paths (parsed by `cassette_keying::JsonPath`),
//! `redactor` puts them together in [`Redactor`], `bodies` reads forms, multipart and binary
//! bodies, `streams` finds secrets split across the events of a stored stream, and `live` does it
//! as a stream's events arrive, for what the proxy passes on. A whole
//! cassette is redacted by [`Sealed::seal`](crate::Sealed::seal) alone, field by field.

mod bodies;
mod json_path;
mod live;
mod names;
mod redactor;
mod shapes;
mod streams;

pub use bodies::BodyRedaction;
pub use live::{Released, SplitWatch};
pub(crate) use names::is_body_credential_name;
pub use names::{
    normalize_name, BODY_CREDENTIAL_NAMES, BODY_SAFE_NAMES, NEXT_REQUEST_URL_HEADERS,
    QUERY_CREDENTIAL_NAMES, REQUEST_HEADER_ALLOW_LIST, RESPONSE_HEADER_ALLOW_LIST,
    RESPONSE_HEADER_ALLOW_PREFIXES,
};
pub use redactor::{Redactor, Secret, MIN_REDACTED_SECRET};
pub use shapes::{credential_shape_names, find_credentials, CredentialMatch};

use serde::{Deserialize, Serialize};

/// What every redacted value or substring is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// The capture group that, when present in a pattern, limits the replacement to that group
/// (so `Bearer [REDACTED]` keeps its scheme, and users can keep context around a match).
const SECRET_GROUP: &str = "redact";

/// User-supplied extra rules (from config).
///
/// * `json_paths`: JSON paths into request and response bodies whose values are replaced with
///   [`REDACTED`], e.g. `$.messages[*].content` or `$..email`. Supported syntax: `$`, `.name`,
///   `['name']`, `[N]`, `[*]`, `.*`, `..name`.
/// * `patterns`: regexes replaced wherever they match in stored strings (JSON string values and
///   member names, text bodies, kept header values, query strings). When a pattern has a group
///   named `redact`, only that group is replaced: `email: (?P<redact>\S+)`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RedactionRules {
    /// JSON paths whose values are replaced with [`REDACTED`].
    pub json_paths: Vec<String>,
    /// Regexes whose matches are replaced with [`REDACTED`].
    pub patterns: Vec<String>,
}
