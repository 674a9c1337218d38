//! Replay misses: what was asked, and how it differs from the nearest recording.
//!
//! Finding the nearest recording costs a scan of the store, so it runs only on a miss and keeps
//! an in-memory index between misses; a hit never pays for it.

use crate::cassette::Cassette;
use crate::redact::Redactor;
use cassette_keying::{
    diff, normalize_path, CanonicalKeyConfig, Change, Difference, Key, KeyConfig, KEY_VERSION,
};
use cassette_store::DynStore;
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// How many differences a miss message lists before summarizing the rest.
const SHOWN_DIFFERENCES: usize = 8;

/// How many cassettes are read at once while indexing.
const INDEX_CONCURRENCY: usize = 32;

/// A request that replay could not answer.
#[derive(Debug, Clone, Serialize)]
pub struct Miss {
    /// The request's key.
    pub key: Key,
    /// Keying profile.
    pub profile: String,
    /// Route name.
    pub target: String,
    /// HTTP method.
    pub method: String,
    /// Request path.
    pub path: String,
    /// The requested model, when the body names one.
    pub model: Option<String>,
    /// Where the recorder looked.
    pub store: String,
    /// Set when a repeat of a recorded request was asked more times than it was recorded
    /// (sequence mode).
    pub repeat: Option<Repeat>,
    /// Why nothing answered.
    pub explanation: Explanation,
}

/// A request asked more times in one session than it was recorded (sequence mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Repeat {
    /// The request's base key (its first occurrence).
    pub base_key: Key,
    /// The occurrence asked for.
    pub asked: u32,
    /// How many occurrences are recorded, the first ones in a row (at least 1).
    pub recorded: u32,
}

impl fmt::Display for Repeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let times = if self.recorded == 1 { "time" } else { "times" };
        write!(
            f,
            "This request was recorded {} {times}, asked a {} time (repeats of a request are \
             answered in sequence, each from its own recording; its first is {}).",
            self.recorded,
            ordinal(self.asked),
            self.base_key.short()
        )
    }
}

impl Repeat {
    /// Why a repeat missed: no nearest recording to compare with (the request itself is
    /// recorded), only how many times it was and which time it was asked.
    pub(crate) fn explanation(&self) -> Explanation {
        Explanation {
            nearest: None,
            summary: self.to_string(),
        }
    }
}

/// `1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`, ...
pub fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The nearest recording and what differs, or why there is none.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The closest recording at the same target and path, when there is one.
    pub nearest: Option<Nearest>,
    /// One readable sentence.
    pub summary: String,
}

/// The recording closest to a missed request.
#[derive(Debug, Clone, Serialize)]
pub struct Nearest {
    /// Its key.
    pub key: Key,
    /// When it was recorded.
    pub recorded_at: String,
    /// What differs, recorded value first: the keying settings or key version it was keyed
    /// under when they are not the current ones (`recorded with volatile [seed]; now []`),
    /// then the components of the request (`body.temperature: 0 -> 0.7`).
    pub differences: Vec<String>,
}

impl Miss {
    /// The explanation as one line per difference, for CLI output.
    pub fn explanation_lines(&self) -> Vec<String> {
        match &self.explanation.nearest {
            Some(nearest) => nearest.differences.clone(),
            None => vec![self.explanation.summary.clone()],
        }
    }
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cassette miss: no recording for {} {} (target {}",
            self.method, self.path, self.target
        )?;
        if let Some(model) = &self.model {
            write!(f, ", model {model}")?;
        }
        write!(
            f,
            ") with key {} in {}. {} Record it in record or auto mode.",
            self.key, self.store, self.explanation.summary
        )
    }
}

#[derive(Debug, Clone)]
struct IndexEntry {
    key: Key,
    target: String,
    path: String,
    recorded_at: String,
    material: Value,
    /// The profile it was keyed under (`meta.profile`).
    profile: String,
    key_version: u32,
    /// The keying settings it was keyed under, when the document records them.
    settings: Option<CanonicalKeyConfig>,
    request_redacted: bool,
}

/// Materials of stored cassettes, loaded lazily and refreshed incrementally on each miss.
#[derive(Debug, Default)]
pub(crate) struct NearestIndex {
    entries: HashMap<Key, IndexEntry>,
    unreadable: HashSet<Key>,
    /// The settings the index's materials were computed under.
    settings: CanonicalKeyConfig,
}

impl NearestIndex {
    /// Brings the index up to date with the store: reads cassettes it has not seen, forgets
    /// deleted ones. Unreadable cassettes are skipped (a miss explanation is best effort; the
    /// corrupt file is reported when it is actually asked for).
    pub(crate) async fn refresh(&mut self, store: &DynStore, config: &KeyConfig) -> usize {
        self.settings = config.canonical();
        let Ok(keys) = store.list("").await else {
            return self.entries.len();
        };
        let present: HashSet<&Key> = keys.iter().collect();
        self.entries.retain(|k, _| present.contains(k));
        let new_keys: Vec<Key> = keys
            .iter()
            .filter(|k| !self.entries.contains_key(*k) && !self.unreadable.contains(*k))
            .cloned()
            .collect();
        let loaded: Vec<(Key, Option<IndexEntry>)> = futures::stream::iter(new_keys)
            .map(|key| async move {
                let entry = match store.get(&key).await {
                    Ok(Some(bytes)) => Cassette::from_document(&bytes)
                        .ok()
                        .map(|c| index_entry(&c, config)),
                    _ => None,
                };
                (key, entry)
            })
            .buffer_unordered(INDEX_CONCURRENCY)
            .collect()
            .await;
        for (key, entry) in loaded {
            match entry {
                Some(entry) => {
                    self.entries.insert(key, entry);
                }
                None => {
                    self.unreadable.insert(key);
                }
            }
        }
        self.entries.len()
    }

    /// Explains a miss for a request with this target, path and material. Recordings at the
    /// same path are compared, and those whose material keys the same path (a Gemini stream
    /// request finds the plain request's recording). The material is redacted first, as a
    /// recording of it would be: the explanation ends up in 409 bodies, logs and CI output, and
    /// must not echo the request's credentials (values cut short for display could not be
    /// recognised afterwards). A difference only in a redacted value then shows as the same
    /// request, explained as redacted.
    pub(crate) fn explain(
        &self,
        target: &str,
        path: &str,
        material: &Value,
        redactor: &Redactor,
    ) -> Explanation {
        let material = &redacted_material(material, redactor);
        let path = redactor.text(&normalize_path(path));
        let keyed_path = material.get("path");
        let nearest = self
            .entries
            .values()
            .filter(|e| e.target == target)
            .filter(|e| {
                e.path == path || (keyed_path.is_some() && e.material.get("path") == keyed_path)
            })
            .filter(|e| e.material.get("profile") == material.get("profile"))
            .map(|e| (e, diff(&e.material, material)))
            .min_by(|(a, da), (b, db)| {
                distance(da)
                    .total_cmp(&distance(db))
                    .then_with(|| b.recorded_at.cmp(&a.recorded_at))
            });
        match nearest {
            None => Explanation {
                nearest: None,
                summary: format!(
                    "No recording exists at {path} for target {target} ({} cassettes stored).",
                    self.entries.len()
                ),
            },
            Some((entry, differences)) => {
                let profile = material.get("profile").and_then(Value::as_str);
                let keyed_under = self.keyed_under(entry, profile, differences.is_empty());
                let mut shown = keyed_under.clone();
                shown.extend(render(&differences));
                let key = entry.key.short();
                let summary = if differences.is_empty() {
                    format!(
                        "The nearest recording, {key}, is this same request keyed differently: {}.",
                        shown.join("; ")
                    )
                } else if keyed_under.is_empty() {
                    format!(
                        "The nearest recording, {key}, differs in: {}.",
                        shown.join("; ")
                    )
                } else {
                    format!(
                        "The nearest recording, {key}, was {}; and differs in: {}.",
                        keyed_under.join("; "),
                        render(&differences).join("; ")
                    )
                };
                Explanation {
                    summary,
                    nearest: Some(Nearest {
                        key: entry.key.clone(),
                        recorded_at: entry.recorded_at.clone(),
                        differences: shown,
                    }),
                }
            }
        }
    }

    /// Why a recording keys differently besides its request: another key version, another
    /// profile (a profile added since, for requests that used to be keyed `http`), other
    /// keying settings (named), or, when nothing else differs, redaction or a hand edit.
    fn keyed_under(
        &self,
        entry: &IndexEntry,
        profile: Option<&str>,
        same_request: bool,
    ) -> Vec<String> {
        let mut out = Vec::new();
        if entry.key_version != KEY_VERSION {
            out.push(format!(
                "keyed under key version {}; this tool keys with version {KEY_VERSION}",
                entry.key_version
            ));
        }
        if let Some(profile) = profile.filter(|p| !entry.profile.is_empty() && entry.profile != *p)
        {
            out.push(format!(
                "keyed under the `{}` profile; this tool keys these requests with the `{profile}` profile, re-record it",
                entry.profile
            ));
        }
        match &entry.settings {
            Some(recorded) => out.extend(
                recorded
                    .differences(&self.settings)
                    .into_iter()
                    .map(|d| format!("recorded with {d}")),
            ),
            None if same_request && out.is_empty() => out.push(
                "recorded by an older cassette that did not store its keying settings; it was \
                 probably keyed with other volatile settings"
                    .to_owned(),
            ),
            None => {}
        }
        if same_request && out.is_empty() {
            out.push(if entry.request_redacted {
                "the part of the request that differs was redacted when it was stored".to_owned()
            } else {
                "nothing in its stored request; it was edited by hand or stored under another key"
                    .to_owned()
            });
        }
        out
    }
}

/// Key material as a recording would store it: the request body (`body`, or an MCP request's
/// `params`) by the JSON rules, every other string by the shape and user rules.
fn redacted_material(material: &Value, redactor: &Redactor) -> Value {
    let mut out = material.clone();
    if let Value::Object(members) = &mut out {
        for (name, value) in members.iter_mut() {
            match name.as_str() {
                "body" | "params" => redactor.json(value),
                _ => redact_strings(value, redactor),
            }
        }
    }
    out
}

fn redact_strings(value: &mut Value, redactor: &Redactor) {
    match value {
        Value::String(s) => *s = redactor.text(s),
        Value::Array(items) => items.iter_mut().for_each(|v| redact_strings(v, redactor)),
        Value::Object(members) => members
            .values_mut()
            .for_each(|v| redact_strings(v, redactor)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// How far apart two requests are: each difference counts 1, except that a changed string
/// counts only the share of its characters that changed, so a reworded prompt is nearer than
/// a different one.
fn distance(differences: &[Difference]) -> f64 {
    differences
        .iter()
        .map(|d| match &d.change {
            Change::Changed { old, new } if old.starts_with('"') && new.starts_with('"') => {
                changed_share(old, new)
            }
            _ => 1.0,
        })
        .sum()
}

/// The share of characters outside the common prefix and suffix of two strings.
fn changed_share(old: &str, new: &str) -> f64 {
    let a: Vec<char> = old.chars().collect();
    let b: Vec<char> = new.chars().collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let max_suffix = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    let longest = a.len().max(b.len()).max(1);
    (longest - prefix - suffix) as f64 / longest as f64
}

fn render(differences: &[Difference]) -> Vec<String> {
    let mut shown: Vec<String> = differences
        .iter()
        .take(SHOWN_DIFFERENCES)
        .map(|d| d.to_string())
        .collect();
    if differences.len() > SHOWN_DIFFERENCES {
        shown.push(format!(
            "and {} more differences",
            differences.len() - SHOWN_DIFFERENCES
        ));
    }
    shown
}

fn index_entry(cassette: &Cassette, config: &KeyConfig) -> IndexEntry {
    // The stored request, redacted: it may key differently from the original where redaction
    // removed something, which only makes such a tape look a little farther away.
    let material = cassette.keyed_request(config).material;
    IndexEntry {
        key: cassette.key.clone(),
        target: cassette.target.clone(),
        path: normalize_path(&cassette.request.path),
        recorded_at: cassette.recorded_at.clone(),
        material,
        profile: cassette.meta.profile.clone(),
        key_version: cassette.key_version,
        settings: cassette.key_settings.as_ref().map(|s| s.canonical()),
        request_redacted: cassette.meta.request_redacted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_read_as_english() {
        let shown: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            shown,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd",
                "101st", "111th"
            ]
        );
    }

    #[test]
    fn a_reworded_string_is_nearer_than_a_different_one() {
        let reworded = changed_share("\"Where is my refund?\"", "\"Where's my refund?\"");
        let different = changed_share("\"Something else\"", "\"Where's my refund?\"");
        assert!(reworded < 0.3, "{reworded}");
        assert!(different > 0.8, "{different}");
        assert_eq!(changed_share("\"same\"", "\"same\""), 0.0);
    }
}
