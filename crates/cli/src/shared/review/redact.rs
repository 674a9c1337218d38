//! The redaction a review applies to what it shows when no recorder is built (`cassette diff`):
//! the recorder's own [`Redactor`] with the configured rules (cassette.toml's `[redact]`), the
//! built-in credential names and shapes, and the values of the API keys the routes read from
//! the environment, as a recorder replaces them. Stored cassettes went through it when they were
//! recorded; a review redacts them again (`cassette_review::redact::reseal`).

use crate::shared::settings::{key_sources, SettingsFile};
use anyhow::Context;
use cassette_recorder::proxy::built_in_routes;
use cassette_tape::redact::{RedactionRules, Redactor, Secret};

/// The redactor of a review: the settings file's rules and the routes' keys from the
/// environment, built as the recorder builds its own ([`Redactor::with_secrets`]).
pub(crate) fn output_redactor(file: &SettingsFile) -> anyhow::Result<Redactor> {
    let rules = RedactionRules {
        json_paths: file.redact_paths.clone(),
        patterns: file.redact_patterns.clone(),
    };
    let mut routes: Vec<&str> = built_in_routes().map(|(name, _)| name).collect();
    routes.extend(file.routes.iter().map(|r| r.name.as_str()));
    let keys: Vec<(&str, String)> = routes
        .into_iter()
        .flat_map(|route| {
            key_sources(route, file)
                .into_iter()
                .filter_map(move |var| Some((route, std::env::var(&var).ok()?)))
        })
        .collect();
    let secrets: Vec<Secret<'_>> = keys
        .iter()
        .map(|(route, value)| Secret { name: route, value })
        .collect();
    // The file's rules were checked when it was read; a key too long for a pattern is named by
    // its route, never quoted.
    Redactor::with_secrets(&rules, &secrets)
        .context("cannot build the redaction rules from the settings file and the routes' API keys")
}
