//! The nearest-recording index: which recordings exist at each target and path, and a compact
//! fingerprint of each one's key material, so the first miss of a run at 100,000 cassettes on
//! S3 reads a handful of objects instead of every cassette.
//!
//! # Records and segments
//!
//! An [`IndexRecord`] is one recording's key, target, path, profile, time, and its material as
//! *leaves*: every scalar at its JSON path, as a hash of the path and a hash of the value, plus
//! for long strings their *shape*: the length, and hashes of the prefixes and suffixes of 8,
//! 16, 32, ... characters. Two shapes tell how long the common beginning and end of two strings
//! are (within a factor of two), which is what the exact distance weighs (the share of
//! characters outside them), without storing the prompt. Records are written in **segments** (the store's index
//! namespace, see `Store::put_segment`), JSON Lines behind a header line:
//!
//! - every recorder that writes cassettes writes its own create-only segments (`w-…`), batched
//!   (at most a second late, or when many are pending, and when asked to flush);
//! - `cassette index` compacts them into one `base-…` segment covering every cassette the
//!   store lists, and deletes the segments it absorbed.
//!
//! # Finding the nearest recording
//!
//! On a miss the index reads the segments it has not read (one LIST, then one GET each). When
//! no base segment exists yet it also lists the keys and reads the cassettes no segment covers
//! (the old full scan, once per process); with a base it trusts the segments and lists the
//! keys only when they offer no candidate at all. Candidates at the request's target, path and
//! profile are ranked by their leaves; the best few are read whole and diffed exactly, so the
//! explanation is the same as a full scan would give whenever the ranking keeps the true
//! nearest among them. Segments are hints: a record whose cassette is gone is skipped.

use super::{distance, redacted_material, redacted_paths, Explanation, Nearest};
use cassette_keying::{
    diff, normalize_path, to_canonical_string, CanonicalKeyConfig, Difference, Key, KeyConfig,
    Profile, KEY_VERSION, TEST_MEMBER,
};
use cassette_review::difference_lines;
use cassette_store::{Created, DynStore, SegmentName};
use cassette_tape::mcp::MCP_PROFILE;
use cassette_tape::redact::Redactor;
use cassette_tape::Cassette;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many cassettes are read at once while scanning.
const SCAN_CONCURRENCY: usize = 32;

/// How many ranked candidates are read whole and diffed exactly.
const REFINED: usize = 8;

/// Strings at least this long get a shape.
const SHAPED: usize = 24;

/// The shortest prefix and suffix a shape hashes; each next one is twice as long.
const SHAPE_START: usize = 8;

/// The version of the segment format; readers skip segments of another version.
const SEGMENT_FORMAT: u32 = 1;

/// One recording as the index knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexRecord {
    /// The cassette's key.
    pub key: Key,
    /// The route (key target).
    pub target: String,
    /// The path, normalized as keys see it.
    pub path: String,
    /// The keying profile.
    pub profile: String,
    /// When it was recorded.
    pub recorded_at: String,
    /// The test that recorded it (`meta.test`), when a test runner named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// The material's leaves, each `PATHHASH:VALUEHASH[:LENGTH:PREFIXES:SUFFIXES]` in hex
    /// (prefix and suffix hashes joined by `.`).
    leaves: Vec<String>,
}

/// A leaf decoded: hashes of its path and value, and the shape of a long string.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Leaf {
    path: u32,
    value: u64,
    shape: Option<Shape>,
}

/// A long string's length in characters and 24-bit hashes of its prefixes and suffixes of
/// 8, 16, 32, ... characters (as many as fit).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shape {
    len: u32,
    prefixes: Vec<u32>,
    suffixes: Vec<u32>,
}

impl Shape {
    fn of(text: &str) -> Shape {
        // The hashes are of the prefixes' and suffixes' bytes, found by character boundary: no
        // copy of the text (a 30 MiB prompt as a list of chars was 120 MiB).
        let len = text.chars().count();
        let hash = |part: &str| fnv(part.as_bytes()) as u32 & 0xff_ffff;
        let mut prefixes = Vec::new();
        let mut suffixes = Vec::new();
        let mut k = SHAPE_START;
        while k <= len {
            let end = text.char_indices().nth(k).map_or(text.len(), |(i, _)| i);
            let start = text.char_indices().nth_back(k - 1).map_or(0, |(i, _)| i);
            prefixes.push(hash(&text[..end]));
            suffixes.push(hash(&text[start..]));
            k *= 2;
        }
        Shape {
            len: len as u32,
            prefixes,
            suffixes,
        }
    }

    /// The share of characters outside the common beginning and end, estimated from the
    /// longest prefix and suffix lengths both hash alike (so at most twice too high).
    fn changed_share(&self, other: &Shape) -> f64 {
        let common = |a: &[u32], b: &[u32]| {
            a.iter()
                .zip(b)
                .take_while(|(x, y)| x == y)
                .count()
                .checked_sub(1)
                .map_or(0, |j| SHAPE_START << j)
        };
        let shorter = self.len.min(other.len) as usize;
        let longest = self.len.max(other.len).max(1) as usize;
        let kept = (common(&self.prefixes, &other.prefixes)
            + common(&self.suffixes, &other.suffixes))
        .min(shorter);
        (longest - kept) as f64 / longest as f64
    }
}

impl IndexRecord {
    /// The record of a stored cassette, whose stored request keys to `material` (what
    /// `Cassette::keyed_request` gives: redacted parts stay redacted, so nothing secret is
    /// fingerprinted).
    pub fn new(cassette: &Cassette, material: &Value) -> IndexRecord {
        let mut leaves = Vec::new();
        walk(material, &mut String::new(), &mut leaves);
        IndexRecord {
            key: cassette.key.clone(),
            target: cassette.target.clone(),
            // The path its key sees (Gemini's streaming method as the plain one), so a streamed
            // and a plain request find each other's recordings.
            path: material
                .get("path")
                .and_then(Value::as_str)
                .map_or_else(|| normalize_path(&cassette.request.path), str::to_owned),
            profile: material
                .get("profile")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            recorded_at: cassette.recorded_at.clone(),
            test: cassette.meta.test.clone(),
            leaves: leaves.iter().map(Leaf::encode).collect(),
        }
    }

    /// The record of a cassette keyed under `config`.
    pub fn of(cassette: &Cassette, config: &KeyConfig) -> IndexRecord {
        IndexRecord::new(cassette, &cassette.keyed_request(config).material)
    }

    fn decoded(&self) -> Vec<Leaf> {
        self.leaves.iter().filter_map(|l| Leaf::decode(l)).collect()
    }
}

impl Leaf {
    fn encode(&self) -> String {
        let mut out = format!("{:08x}:{:016x}", self.path, self.value);
        if let Some(shape) = &self.shape {
            let join = |hashes: &[u32]| {
                hashes
                    .iter()
                    .map(|h| format!("{h:06x}"))
                    .collect::<Vec<_>>()
                    .join(".")
            };
            out.push_str(&format!(
                ":{:x}:{}:{}",
                shape.len,
                join(&shape.prefixes),
                join(&shape.suffixes)
            ));
        }
        out
    }

    fn decode(text: &str) -> Option<Leaf> {
        let mut parts = text.split(':');
        let path = u32::from_str_radix(parts.next()?, 16).ok()?;
        let value = u64::from_str_radix(parts.next()?, 16).ok()?;
        let hashes = |part: &str| -> Option<Vec<u32>> {
            part.split('.')
                .filter(|h| !h.is_empty())
                .map(|h| u32::from_str_radix(h, 16).ok())
                .collect()
        };
        let shape = match parts.next() {
            Some(len) => Some(Shape {
                len: u32::from_str_radix(len, 16).ok()?,
                prefixes: hashes(parts.next()?)?,
                suffixes: hashes(parts.next()?)?,
            }),
            None => None,
        };
        Some(Leaf { path, value, shape })
    }
}

/// FNV-1a, 64 bits: stable on every machine and in every version, unlike `std`'s hasher.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The leaves of a material: every scalar (and empty container) at its path. The key version
/// is left out: it is the same for every record of one contract.
fn walk(value: &Value, path: &mut String, out: &mut Vec<Leaf>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (name, child) in map {
                // The key version, and the test a test-scoped recording is kept for: neither
                // is part of what a request asks.
                if path.is_empty() && (name == "v" || name == TEST_MEMBER) {
                    continue;
                }
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(name);
                walk(child, path, out);
                path.truncate(len);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, child) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(child, path, out);
                path.truncate(len);
            }
        }
        leaf => {
            let shape = match leaf {
                Value::String(s) if s.chars().count() >= SHAPED => Some(Shape::of(s)),
                _ => None,
            };
            out.push(Leaf {
                path: fnv(path.as_bytes()) as u32,
                value: fnv(to_canonical_string(leaf).as_bytes()),
                shape,
            });
        }
    }
}

/// How far apart two records' leaves are, as [`distance`] weighs a diff: 1 for a leaf only one
/// has or that changed, the estimated changed share for a long string.
fn leaf_distance(a: &[Leaf], b: &HashMap<u32, Leaf>) -> f64 {
    let mut total = 0.0;
    let mut seen = 0usize;
    for leaf in a {
        match b.get(&leaf.path) {
            Some(other) => {
                seen += 1;
                if other.value != leaf.value {
                    total += match (&leaf.shape, &other.shape) {
                        (Some(x), Some(y)) => x.changed_share(y),
                        _ => 1.0,
                    };
                }
            }
            None => total += 1.0,
        }
    }
    total + (b.len() - seen.min(b.len())) as f64
}

/// The first line of a segment.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    cassette_index: u32,
    kind: SegmentKind,
}

/// What a segment covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SegmentKind {
    /// The recordings of one writer.
    Writer,
    /// Every cassette the store listed when it was compacted.
    Base,
}

/// A fresh segment name: its kind, the time and a per-process counter, so writers never
/// collide and names sort by age.
fn segment_name(kind: SegmentKind) -> SegmentName {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let millis = chrono::Utc::now().timestamp_millis();
    let unique = fnv(format!(
        "{}-{}-{millis}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        std::thread::current().name().unwrap_or("")
    )
    .as_bytes());
    let prefix = match kind {
        SegmentKind::Writer => "w",
        SegmentKind::Base => "base",
    };
    let name = format!("{prefix}-{millis:013}-{unique:016x}.jsonl");
    SegmentName::parse(&name).unwrap_or_else(|| unreachable!("{name} is a segment name"))
}

/// Writes `records` as a new segment of `kind`; `Ok(None)` when the store keeps no segments or
/// there is nothing to write.
pub async fn write_segment(
    store: &DynStore,
    records: &[IndexRecord],
    kind: SegmentKind,
) -> crate::Result<Option<SegmentName>> {
    if records.is_empty() || !store.keeps_segments() {
        return Ok(None);
    }
    let mut text = serde_json::to_vec(&Header {
        cassette_index: SEGMENT_FORMAT,
        kind,
    })
    .unwrap_or_default();
    text.push(b'\n');
    for record in records {
        text.extend(serde_json::to_vec(record).unwrap_or_default());
        text.push(b'\n');
    }
    let name = segment_name(kind);
    match store.put_segment(&name, text.into()).await? {
        Created::Won => Ok(Some(name)),
        // A name of ours taken already: the clock went back and the counter wrapped, or the
        // same segment was written twice. Either way it holds these records or newer.
        Created::AlreadyExists => Ok(Some(name)),
    }
}

/// A segment read back: its kind and records. `None` for another format version or a
/// segment that is not one (a segment is a hint, never a reason to fail).
fn parse_segment(bytes: &[u8]) -> Option<(SegmentKind, Vec<IndexRecord>)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    let header: Header = serde_json::from_str(lines.next()?).ok()?;
    if header.cassette_index != SEGMENT_FORMAT {
        return None;
    }
    // A torn last line (a writer killed mid-write cannot leave one, but a hand edit can) is
    // skipped like any unreadable line.
    let records = lines
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    Some((header.kind, records))
}

/// What [`compact`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Compacted {
    /// Cassettes the new base segment covers.
    pub cassettes: usize,
    /// Of those, cassettes that had to be read (no segment covered them).
    pub read: usize,
    /// Segments absorbed and deleted.
    pub absorbed: usize,
    /// Cassettes that could not be read as cassettes (left out).
    pub unreadable: usize,
    /// The new base segment, when the store keeps segments.
    pub segment: Option<String>,
    /// Segments that do not read as index segments (garbage, another tool's, a symlink the
    /// store does not follow): neither folded in nor deleted.
    pub kept: Vec<String>,
}

/// Builds one base segment covering every cassette the store lists (reading only the cassettes
/// no segment covers), then deletes the segments it absorbed. Safe while others write: a
/// segment written after the listing is kept, and its cassettes are indexed by it.
pub async fn compact(store: &DynStore, config: &KeyConfig) -> crate::Result<Compacted> {
    // Segments first: every cassette a listed segment names was written before it, so it is in
    // the key listing that follows (unless it was deleted since, and then it is left out).
    let names = store.list_segments().await?;
    let keys = store.list("").await?;
    let mut records: HashMap<Key, IndexRecord> = HashMap::new();
    // Only segments that read as ours are folded in and deleted; anything else under the
    // segments' name is kept, untouched, and named.
    let mut ours = Vec::new();
    let mut kept = Vec::new();
    for name in &names {
        match store.get_segment(name).await? {
            Some(bytes) => match parse_segment(&bytes) {
                Some((_, parsed)) => {
                    for record in parsed {
                        records.insert(record.key.clone(), record);
                    }
                    ours.push(name);
                }
                None => kept.push(name.to_string()),
            },
            None => kept.push(name.to_string()),
        }
    }
    let listed: HashSet<&Key> = keys.iter().collect();
    records.retain(|key, _| listed.contains(key));
    let missing: Vec<Key> = keys
        .iter()
        .filter(|k| !records.contains_key(*k))
        .cloned()
        .collect();
    let read = missing.len();
    let scanned = scan(store, missing, config).await;
    let unreadable = scanned.iter().filter(|(_, r)| r.is_none()).count();
    for (key, record) in scanned {
        if let Some(record) = record {
            records.insert(key, record);
        }
    }
    let mut all: Vec<IndexRecord> = records.into_values().collect();
    all.sort_by(|a, b| a.key.cmp(&b.key));
    let segment = write_segment(store, &all, SegmentKind::Base).await?;
    let mut absorbed = 0;
    if segment.is_some() {
        for name in ours {
            store.delete_segment(name).await?;
            absorbed += 1;
        }
    }
    Ok(Compacted {
        cassettes: all.len(),
        read,
        absorbed,
        unreadable,
        segment: segment.map(|s| s.to_string()),
        kept,
    })
}

/// Reads cassettes and makes their records; `None` for one that is gone or not a cassette.
async fn scan(
    store: &DynStore,
    keys: Vec<Key>,
    config: &KeyConfig,
) -> Vec<(Key, Option<IndexRecord>)> {
    futures::stream::iter(keys)
        .map(|key| async move {
            let record = match store.get(&key).await {
                Ok(Some(bytes)) => Cassette::from_document(&bytes)
                    .ok()
                    .map(|c| IndexRecord::of(&c, config)),
                _ => None,
            };
            (key, record)
        })
        .buffer_unordered(SCAN_CONCURRENCY)
        .collect()
        .await
}

/// What the index knows of one recording.
#[derive(Debug, Clone)]
struct Entry {
    record: IndexRecord,
    leaves: Vec<Leaf>,
}

/// The recordings of a store, loaded on the first miss and refreshed on each later one.
#[derive(Default)]
pub(crate) struct NearestIndex {
    entries: HashMap<Key, Entry>,
    /// Segments already read.
    read_segments: HashSet<SegmentName>,
    /// Whether a base segment has been read: then the segments are trusted to cover the store.
    has_base: bool,
    /// Keys read directly that were not cassettes.
    unreadable: HashSet<Key>,
    /// Requests to the store since the index was built, for benchmarks and tests.
    requests: u64,
    /// The keying settings of the requests explained, to name a recording keyed otherwise.
    settings: CanonicalKeyConfig,
    /// The paths of the request explained that redaction changed, to name them when the
    /// difference is hidden by it.
    redacted: Vec<String>,
}

/// The nearest recording found: its key and time, how it was keyed, and what differs.
struct Found {
    key: Key,
    recorded_at: String,
    key_version: u32,
    /// The profile it was keyed under (`meta.profile`).
    profile: String,
    settings: Option<CanonicalKeyConfig>,
    request_redacted: bool,
    /// The test a test-scoped recording is kept for.
    kept_for: Option<String>,
    differences: Vec<Difference>,
    /// The ignore paths of the differences that look made afresh on every run (ids).
    made_afresh: Vec<String>,
    /// How far its request is from the one asked ([`distance`] of the differences).
    distance: f64,
}

impl fmt::Debug for NearestIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NearestIndex")
            .field("entries", &self.entries.len())
            .field("has_base", &self.has_base)
            .finish_non_exhaustive()
    }
}

impl NearestIndex {
    /// Reads the segments not read yet; without a base segment, also lists the keys and reads
    /// the cassettes no segment covers. Failures leave the index as it was: an explanation is
    /// best effort.
    async fn refresh(&mut self, store: &DynStore, config: &KeyConfig) {
        if store.keeps_segments() {
            self.requests += 1;
            if let Ok(names) = store.list_segments().await {
                for name in names {
                    if self.read_segments.contains(&name) {
                        continue;
                    }
                    self.requests += 1;
                    let Ok(Some(bytes)) = store.get_segment(&name).await else {
                        continue;
                    };
                    if let Some((kind, records)) = parse_segment(&bytes) {
                        self.has_base |= kind == SegmentKind::Base;
                        for record in records {
                            self.insert(record);
                        }
                    }
                    self.read_segments.insert(name);
                }
            }
        }
        if !self.has_base {
            self.scan_unindexed(store, config).await;
        }
    }

    /// Lists the keys, forgets records of deleted cassettes and reads the cassettes no record
    /// covers.
    async fn scan_unindexed(&mut self, store: &DynStore, config: &KeyConfig) {
        self.requests += 1;
        let Ok(keys) = store.list("").await else {
            return;
        };
        let present: HashSet<&Key> = keys.iter().collect();
        self.entries.retain(|k, _| present.contains(k));
        let missing: Vec<Key> = keys
            .iter()
            .filter(|k| !self.entries.contains_key(*k) && !self.unreadable.contains(*k))
            .cloned()
            .collect();
        self.requests += missing.len() as u64;
        for (key, record) in scan(store, missing, config).await {
            match record {
                Some(record) => self.insert(record),
                None => {
                    self.unreadable.insert(key);
                }
            }
        }
    }

    fn insert(&mut self, record: IndexRecord) {
        let leaves = record.decoded();
        self.entries
            .insert(record.key.clone(), Entry { record, leaves });
    }

    /// Explains a miss of a request with this target, path and material: brings the index up
    /// to date, ranks the recordings at the same target, path and profile, and diffs the best
    /// few exactly. The material is redacted first, as a recording of it would be: the
    /// explanation ends up in 409 bodies, logs and CI output, and must not echo the request's
    /// credentials. A difference only in a redacted value then shows as the same request,
    /// explained as redacted.
    pub(crate) async fn explain(
        &mut self,
        store: &DynStore,
        config: &KeyConfig,
        redactor: &Redactor,
        (target, path, material): (&str, &str, &Value),
        test: Option<&str>,
    ) -> Explanation {
        self.settings = config.canonical();
        let redacted = redacted_material(material, redactor);
        self.redacted.clear();
        redacted_paths(material, &redacted, &mut String::new(), &mut self.redacted);
        let material = &redacted;
        self.refresh(store, config).await;
        let path = redactor.text(&normalize_path(path));
        let at = (target, path.as_str(), material);
        let mut nearest = self.nearest(store, config, at, test).await;
        if nearest.is_none() && self.has_base {
            // The segments know of nothing here: a cassette no segment covers (copied in by an
            // older tool, say) may still be; look once.
            self.scan_unindexed(store, config).await;
            nearest = self.nearest(store, config, at, test).await;
        }
        match nearest {
            None => Explanation {
                nearest: None,
                summary: format!(
                    "No recording exists at {path} for target {target} ({} cassettes stored).",
                    self.entries.len()
                ),
            },
            Some(found) => {
                let profile = material.get("profile").and_then(Value::as_str);
                self.explained(found, profile.unwrap_or(""))
            }
        }
    }

    /// The recording in `store` nearest to the request `cassette` stored, by the same rule as
    /// a miss's explanation (same target, path and profile; ranked by leaves, the best few
    /// diffed exactly), keyed under `config`: its key, its distance and what differs (the
    /// recording's values as old, `cassette`'s as new). The cassette's request is stored
    /// redacted already, so nothing here is redacted again.
    pub(crate) async fn nearest_to(
        &mut self,
        store: &DynStore,
        config: &KeyConfig,
        cassette: &Cassette,
    ) -> Option<(Key, f64, Vec<Difference>)> {
        self.settings = config.canonical();
        self.refresh(store, config).await;
        let material = cassette.keyed_request(config).material;
        let path = normalize_path(&cassette.request.path);
        let at = (cassette.target.as_str(), path.as_str(), &material);
        // Not within a test: any recording of the other set may be the one re-recorded.
        let found = self.nearest(store, config, at, None).await?;
        Some((found.key, found.distance, found.differences))
    }

    /// The explanation of the nearest recording: how it was keyed when that differs, then what
    /// differs in the request.
    fn explained(&self, found: Found, profile: &str) -> Explanation {
        let same_request = found.differences.is_empty();
        let keyed_under = self.keyed_under(&found, profile, same_request);
        let differences = difference_lines(&found.differences);
        let hint = made_afresh_hint(&found.made_afresh);
        let mut shown = keyed_under.clone();
        shown.extend(differences.iter().cloned());
        let key = found.key.short();
        let summary = if same_request {
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
                differences.join("; ")
            )
        };
        let summary = match &hint {
            Some(hint) => format!("{summary} {hint}"),
            None => summary,
        };
        Explanation {
            summary,
            nearest: Some(Nearest {
                key: found.key,
                recorded_at: found.recorded_at,
                differences: shown,
                hint,
            }),
        }
    }

    /// Why a recording keys differently besides its request: another key version, another
    /// profile (one added since, for requests that used to be keyed `http`), other keying
    /// settings (named), or, when nothing else differs, redaction or a hand edit.
    fn keyed_under(&self, found: &Found, profile: &str, same_request: bool) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(test) = &found.kept_for {
            out.push(format!(
                "kept for test `{test}` alone (its own answer to this request, under its \
                 test-scoped key)"
            ));
        }
        if found.key_version != KEY_VERSION {
            out.push(format!(
                "keyed under key version {}; this tool keys with version {KEY_VERSION}",
                found.key_version
            ));
        }
        if !found.profile.is_empty() && !profile.is_empty() && found.profile != profile {
            out.push(format!(
                "keyed under the `{}` profile; this tool keys these requests with the `{profile}` profile, re-record it",
                found.profile
            ));
        }
        match &found.settings {
            // MCP keys take no keying settings: whatever is configured keyed them alike.
            _ if profile == MCP_PROFILE => {}
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
            out.push(if found.request_redacted {
                let mut why =
                    "the part of the request that differs was redacted when it was stored"
                        .to_owned();
                if !self.redacted.is_empty() {
                    let shown: Vec<&str> =
                        self.redacted.iter().take(4).map(String::as_str).collect();
                    why.push_str(&format!(" (redacted: {})", shown.join(", ")));
                }
                why
            } else {
                "nothing in its stored request; it was edited by hand or stored under another key"
                    .to_owned()
            });
        }
        out
    }

    /// The keys of the recordings `test` made, the index brought up to date first.
    pub(crate) async fn recordings_of(
        &mut self,
        store: &DynStore,
        config: &KeyConfig,
        test: &str,
    ) -> Vec<Key> {
        self.refresh(store, config).await;
        let mut keys: Vec<Key> = self
            .entries
            .values()
            .filter(|e| e.record.test.as_deref() == Some(test))
            .map(|e| e.record.key.clone())
            .collect();
        keys.sort();
        keys
    }

    /// The nearest recording that still exists, with its exact differences: among the ones
    /// `test` recorded, when it recorded any here ("your tape against your request"), else
    /// among all.
    async fn nearest(
        &mut self,
        store: &DynStore,
        config: &KeyConfig,
        (target, path, material): (&str, &str, &Value),
        test: Option<&str>,
    ) -> Option<Found> {
        let profile = material
            .get("profile")
            .and_then(Value::as_str)
            .unwrap_or("");
        let keyed_path = material.get("path").and_then(Value::as_str);
        let mut wanted = Vec::new();
        walk(material, &mut String::new(), &mut wanted);
        let wanted: HashMap<u32, Leaf> = wanted.into_iter().map(|l| (l.path, l)).collect();
        let mut ranked: Vec<(f64, &Entry)> = self
            .entries
            .values()
            .filter(|e| {
                let record = &e.record;
                // Recordings at the path the key sees, or the path as sent; and under this
                // profile, or under `http` from before the profile existed (the diff below
                // re-keys them under today's rules, and names the profile they were keyed
                // under).
                record.target == target
                    && (record.path == path || Some(record.path.as_str()) == keyed_path)
                    && (record.profile == profile || record.profile == Profile::Http.as_str())
            })
            .map(|e| (leaf_distance(&e.leaves, &wanted), e))
            .collect();
        if let Some(test) = test {
            let own = |(_, e): &(f64, &Entry)| e.record.test.as_deref() == Some(test);
            if ranked.iter().any(own) {
                ranked.retain(own);
            }
        }
        ranked.sort_by(|(da, a), (db, b)| {
            // Newest first, then by key: never the hash map's order, so a miss names the same
            // recording on every run.
            da.total_cmp(db)
                .then_with(|| b.record.recorded_at.cmp(&a.record.recorded_at))
                .then_with(|| a.record.key.cmp(&b.record.key))
        });
        let candidates: Vec<Key> = ranked
            .iter()
            .take(REFINED)
            .map(|(_, e)| e.record.key.clone())
            .collect();
        self.requests += candidates.len() as u64;
        let fetched: Vec<(Key, Option<Cassette>)> = futures::stream::iter(candidates)
            .map(|key| async move {
                let cassette = match store.get(&key).await {
                    Ok(Some(bytes)) => Cassette::from_document(&bytes).ok(),
                    _ => None,
                };
                (key, cassette)
            })
            .buffered(REFINED)
            .collect()
            .await;
        let mut best: Option<(f64, Found)> = None;
        for (key, cassette) in fetched {
            let Some(cassette) = cassette else {
                // Gone (deleted after it was indexed) or damaged: not a recording to name.
                self.entries.remove(&key);
                continue;
            };
            // A test-scoped recording is compared as its plain request: the test it is kept
            // for is no difference of the request (the miss names the plain key).
            let recorded = cassette.keyed_request(config).for_test(None).material;
            let differences = diff(&recorded, material);
            let d = distance(&differences);
            let better = match &best {
                None => true,
                Some((bd, found)) => {
                    d < *bd
                        || (d == *bd
                            && (cassette.recorded_at > found.recorded_at
                                || (cassette.recorded_at == found.recorded_at && key < found.key)))
                }
            };
            if better {
                let found = Found {
                    key,
                    recorded_at: cassette.recorded_at.clone(),
                    key_version: cassette.key_version,
                    profile: cassette.meta.profile.clone(),
                    settings: cassette.key_settings.as_ref().map(|s| s.canonical()),
                    request_redacted: cassette.meta.request_redacted,
                    kept_for: cassette.test_scope.as_ref().map(|scope| scope.test.clone()),
                    made_afresh: cassette_keying::made_afresh(&recorded, material, &differences),
                    differences,
                    distance: d,
                };
                best = Some((d, found));
            }
        }
        best.map(|(_, found)| found)
    }

    /// Store requests made so far (LIST and GET), for tests and benchmarks.
    pub(crate) fn requests(&self) -> u64 {
        self.requests
    }
}

/// The advice for differences that look made afresh by the client on every run (ids): a
/// request holding one is never sent twice, so no recording of it can answer until the key
/// leaves the member out.
fn made_afresh_hint(paths: &[String]) -> Option<String> {
    if paths.is_empty() {
        return None;
    }
    let quoted: Vec<String> = paths.iter().map(|p| format!("{p:?}")).collect();
    Some(format!(
        "These look like ids the client makes afresh on every run: leave them out of the key \
         with `[keying] ignore = [{}]` in cassette.toml, then `cassette rekey`.",
        quoted.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_hash_the_same_characters_as_before_without_copying_them() {
        // The hashes stored in existing segments were of strings rebuilt from a char list.
        let by_chars = |text: &str| {
            let chars: Vec<char> = text.chars().collect();
            let hash =
                |part: &[char]| fnv(part.iter().collect::<String>().as_bytes()) as u32 & 0xff_ffff;
            let (mut prefixes, mut suffixes, mut k) = (Vec::new(), Vec::new(), SHAPE_START);
            while k <= chars.len() {
                prefixes.push(hash(&chars[..k]));
                suffixes.push(hash(&chars[chars.len() - k..]));
                k *= 2;
            }
            (chars.len() as u32, prefixes, suffixes)
        };
        for text in [
            "exactly8",
            "Héllo wörld, 日本語のテキストです and more text after it, long enough for four sizes",
            &"ünïcödé ".repeat(300),
        ] {
            let shape = Shape::of(text);
            assert_eq!(
                (shape.len, shape.prefixes, shape.suffixes),
                by_chars(text),
                "{text}"
            );
        }
    }

    #[test]
    fn shapes_estimate_the_changed_share_of_templated_prompts() {
        let prompt = |i: usize, when: &str| {
            format!(
                "Question number {i}: where is my refund for order {i}? I paid by card and the \
                 parcel came back to you {when}."
            )
        };
        let asked = Shape::of(&prompt(50_000, "two weeks ago"));
        let same_case = Shape::of(&prompt(50_000, "last week")).changed_share(&asked);
        let next_case = Shape::of(&prompt(50_001, "last week")).changed_share(&asked);
        let other_words = Shape::of("Translate this customer email into French, politely please.")
            .changed_share(&asked);
        assert!(same_case < 0.6, "{same_case}");
        assert!(next_case > 0.8, "{next_case}");
        assert!(other_words > 0.95, "{other_words}");
        assert_eq!(asked.changed_share(&asked), 0.0);
    }

    #[test]
    fn leaves_encode_and_decode() {
        let leaf = Leaf {
            path: 0xdead_beef,
            value: 42,
            shape: Some(Shape::of("a string long enough to have a shape of its own")),
        };
        assert_eq!(Leaf::decode(&leaf.encode()), Some(leaf.clone()));
        let plain = Leaf {
            shape: None,
            ..leaf
        };
        assert_eq!(Leaf::decode(&plain.encode()), Some(plain));
        assert_eq!(Leaf::decode("zz:1"), None);
    }

    #[test]
    fn segments_round_trip_and_foreign_ones_are_skipped() {
        let record = IndexRecord {
            key: Key::parse(&"ab".repeat(32)).expect("a key"),
            target: "default".into(),
            path: "/v1/chat/completions".into(),
            profile: "openai.chat".into(),
            recorded_at: "2026-01-01T00:00:00Z".into(),
            test: None,
            leaves: vec!["00000001:0000000000000002".into()],
        };
        let text = format!(
            "{{\"cassette_index\":1,\"kind\":\"base\"}}\n{}\nnot json\n",
            serde_json::to_string(&record).unwrap()
        );
        let (kind, records) = parse_segment(text.as_bytes()).unwrap();
        assert_eq!((kind, records), (SegmentKind::Base, vec![record]));
        assert!(parse_segment(b"{\"cassette_index\":2,\"kind\":\"base\"}\n").is_none());
        assert!(parse_segment(b"\xff").is_none());
    }
}
