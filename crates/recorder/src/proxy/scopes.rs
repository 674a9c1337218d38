//! Test scopes: which test each request belongs to, as a test runner's plugin says through the
//! proxy's control endpoint, and what happened during each test: requests, replays, misses
//! with their explanation, recordings, errors, and refused bypasses; and what of it fails the
//! test, as the failure text the runner prints (rendered by `cassette_review::failure`, so
//! the pytest plugin and the vitest and jest helpers print the same lines and render none).
//!
//! A request belongs to the scope its path names (`/_scope/ID/...`, stripped before routing:
//! a test runner whose workers share one proxy gives each worker or test file base URLs of
//! its own), or else to the `default` scope (a runner whose tests run one at a time in front
//! of their own proxy). Forward-proxy requests that bypassed the base URL carry no path of
//! ours: they count for the `default` scope. A test may be begun with an alias of its own,
//! which its requests name from whichever of its threads or tasks sent them (the in-process
//! transports' `x-cassette-scope`): such a request is that test's while it runs, and a late
//! request of that test once it ended (kept apart, for the runner's summary), never the test's
//! that runs when it arrives.
//!
//! A proxy that answers from vcrpy tapes (adopt) reads a test's tapes when its scope begins
//! (`tapes` and `match_on` in the begin), and a tally tells what they answered (`adopt`).
//!
//! The control endpoint answers only a caller holding the proxy's control token (which the
//! runner's plugin read from the proxy's ready line), besides the checks every request passes
//! (a loopback `Host`, no foreign browser origin).

use super::forward::Bypassed;
use super::sent::SentRequest;
use crate::config::{Repeats, Sharing};
use crate::engine::Recorder;
use crate::error::Error;
use crate::mode::Mode;
use crate::response::{Outcome, Source};
use crate::scope::{Scope, TapeFilters, TapeSet};
use crate::tapes::TapeReport;
use cassette_review::failure::{self, Missed, Problems, Refused};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;

/// The scope of requests whose path names none.
pub(super) const DEFAULT_SCOPE: &str = "default";

/// The path prefix that names a scope: `/_scope/ID/...`.
pub(crate) const SCOPE_PREFIX: &str = "/_scope/";

/// The longest scope id accepted, and the characters it may hold (it is a path segment).
const MAX_SCOPE_ID: usize = 128;

/// How many misses and errors a tally keeps with their text (the counts are always whole).
const KEPT: usize = 50;

/// What a test asks for when it starts (`PUT /_cassette/scopes/ID`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Begin {
    /// The test's id as its runner names it.
    #[serde(default)]
    test: Option<String>,
    /// A mode for this test instead of the proxy's own (`replay`, `record`, `auto`, `off`).
    #[serde(default)]
    mode: Option<String>,
    /// `same` or `sequence`, for this test's repeats of one request.
    #[serde(default)]
    repeats: Option<String>,
    /// `shared` (the default) or `own` (adopt: recordings other tests made answer this test
    /// only when its upstream answers the same).
    #[serde(default)]
    sharing: Option<String>,
    /// The test's vcrpy tapes, for a proxy that answers from them (adopt): paths it can open.
    #[serde(default)]
    tapes: Option<Vec<String>>,
    /// The vcrpy matchers the tapes were recorded with (vcrpy's default when absent).
    #[serde(default)]
    match_on: Option<Vec<String>>,
    /// The tapes only the suite's serializer reads, deserialized by the runner (by path).
    #[serde(default)]
    documents: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    /// vcrpy's `filter_headers` and `filter_query_parameters`: `[name, replacement|null]`.
    #[serde(default)]
    filters: Option<BeginFilters>,
    /// The runner judges which interactions match each request it sends in process
    /// ([`TapeSet::judged`](crate::scope::TapeSet::judged)).
    #[serde(default)]
    judged: bool,
    /// Keep the requests the test sends, for its runner (`GET ...?requests=true`).
    #[serde(default)]
    keep_requests: bool,
    /// The test's own name for its requests (a scope id no scope or other test has): a request
    /// naming it (the in-process transports' `x-cassette-scope`, or `/_scope/ALIAS/`) is this
    /// test's while it runs, from whichever thread or task of the test it comes, and a late
    /// request of this test once it ended, never the next test's.
    #[serde(default)]
    alias: Option<String>,
}

/// The `filters` of a begin.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BeginFilters {
    #[serde(default)]
    headers: Vec<(String, Option<String>)>,
    #[serde(default)]
    query: Vec<(String, Option<String>)>,
}

impl Begin {
    /// Takes the test's alias off the begin (see [`Begin::alias`]).
    pub(super) fn take_alias(&mut self) -> Option<String> {
        self.alias.take()
    }

    /// The scope asked for; an unknown mode or repeats value is a bad request naming it.
    pub(super) fn scope(self) -> Result<Scope, String> {
        let mode = match self.mode {
            None => None,
            Some(mode) => Some(mode.parse::<Mode>()?),
        };
        let repeats = match self.repeats.as_deref() {
            None => None,
            Some("same") => Some(Repeats::Same),
            Some("sequence") => Some(Repeats::Sequence),
            Some(other) => {
                return Err(format!(
                    "unknown repeats `{other}`: expected same or sequence"
                ))
            }
        };
        let sharing = match self.sharing.as_deref() {
            None | Some("shared") => Sharing::Shared,
            Some("own") => Sharing::Own,
            Some(other) => {
                return Err(format!("unknown sharing `{other}`: expected shared or own"))
            }
        };
        let extra = self.documents.is_some() || self.filters.is_some() || self.judged;
        let tapes = match (self.tapes, self.match_on) {
            (None, Some(_)) => return Err("`match_on` is given with `tapes`".to_owned()),
            (None, None) if extra => {
                return Err("`documents`, `filters` and `judged` are given with `tapes`".to_owned())
            }
            (None, None) => None,
            (Some(paths), match_on) => {
                let filters = self.filters.unwrap_or_default();
                Some(TapeSet {
                    paths,
                    match_on: match_on.unwrap_or_default(),
                    documents: self.documents.unwrap_or_default(),
                    filters: TapeFilters {
                        headers: filters.headers,
                        query: filters.query,
                    },
                    judged: self.judged,
                })
            }
        };
        Ok(Scope {
            test: self.test,
            mode,
            repeats,
            sharing,
            tapes,
            keep_requests: self.keep_requests,
        })
    }
}

/// A message of the control pipe (one JSON object a line on the proxy's stdin, see
/// [`super::pipe`]): what `PUT` and `DELETE` of the control endpoint do, without a round trip.
#[derive(Debug)]
#[cfg_attr(not(unix), allow(dead_code))]
pub(super) enum Control {
    /// `{"op":"begin","scope":ID, "test":..., "mode":..., "repeats":..., "sharing":...}`: `PUT`.
    Begin {
        id: String,
        scope: Scope,
        alias: Option<String>,
    },
    /// `{"op":"end","scope":ID}`: `DELETE`, whose tally nobody reads (the runner asks the
    /// endpoint when a notice told it something went wrong).
    End { id: String },
}

impl Control {
    /// One line of the pipe; a line that is not a message names what is wrong with it. A
    /// `begin` takes the members of `PUT`'s body, whatever they are, besides `op` and `scope`.
    pub(super) fn parse(line: &[u8]) -> Result<Control, String> {
        let bad = |e: &dyn std::fmt::Display| format!("a control message is one line of JSON: {e}");
        let mut members: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(line).map_err(|e| bad(&e))?;
        let mut take = |name: &str| match members.remove(name) {
            Some(serde_json::Value::String(text)) => Ok(text),
            _ => Err(bad(&format!("`{name}` must be a string"))),
        };
        let (op, id) = (take("op")?, take("scope")?);
        if !valid_scope_id(&id) {
            return Err(format!(
                "a control message's scope is 1 to 128 letters, digits, `-`, `_` or `.`, not \
                 `{}`",
                id.chars().take(MAX_SCOPE_ID).collect::<String>()
            ));
        }
        match op.as_str() {
            "begin" => {
                let mut begin: Begin = serde_json::from_value(serde_json::Value::Object(members))
                    .map_err(|e| bad(&e))?;
                let alias = begin.take_alias();
                Ok(Control::Begin {
                    id,
                    scope: begin.scope()?,
                    alias,
                })
            }
            "end" if members.is_empty() => Ok(Control::End { id }),
            "end" => Err(bad(&"`end` takes only `op` and `scope`")),
            other => Err(bad(&format!("unknown op `{other}`: expected begin or end"))),
        }
    }
}

/// One miss during a test.
#[derive(Debug, Clone, Serialize)]
pub(super) struct MissedRequest {
    /// The key that missed.
    key: String,
    /// The request in a few words.
    request: String,
    /// The one-line summary of what differs from the nearest recording.
    summary: String,
    /// What differs, one difference a line (long prompts as a word diff).
    explanation: Vec<String>,
}

/// A host whose traffic bypassed the base URL during a test.
#[derive(Debug, Clone, Serialize)]
pub(super) struct BypassedHost {
    host: String,
    requests: u64,
    refused: bool,
}

/// Requests a runner refused itself during a test, before they reached any proxy (the Node
/// helpers' `fetch` in replay, for a client with the vendor's URL in code): `host:port` and
/// how many. A runner hands them in when it reads the tally (`DELETE`'s body, `{"refused":
/// [...]}`), so that its failure text is rendered here with the rest.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RunnerRefused {
    host: String,
    requests: u64,
}

impl RunnerRefused {
    /// The refusals a read's body hands in: none for an empty body, else
    /// `{"refused": [{"host": "api.openai.com:443", "requests": 2}]}`.
    pub(super) fn from_body(body: &[u8]) -> Result<Vec<RunnerRefused>, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Body {
            #[serde(default)]
            refused: Vec<RunnerRefused>,
        }
        if body.is_empty() {
            return Ok(Vec::new());
        }
        serde_json::from_slice::<Body>(body)
            .map(|b| b.refused)
            .map_err(|e| {
                format!("a tally is read with no body, or with `{{\"refused\": [...]}}`: {e}")
            })
    }
}

/// How a tally is read (`GET` or `DELETE` of the control endpoint, or the control pipe's end).
#[derive(Debug, Clone, Default)]
pub(super) struct Read {
    /// Whether the test ends (`DELETE`).
    pub(super) end: bool,
    /// Whether the runner prints this read's failure text (`?report=true`): the next read's
    /// leaves out what this one told. Other reads (a test asking for its counts) tell what no
    /// reporting read told, and change nothing.
    pub(super) report: bool,
    /// The recordings of the tally's test, when asked for its unused ones (`?unused=true`).
    pub(super) recorded: Option<Vec<String>>,
    /// What the runner refused itself.
    pub(super) refused: Vec<RunnerRefused>,
    /// Whether the requests the scope kept are told (`?requests=true`).
    pub(super) sent: bool,
}

/// How much of a scope's problems a reporting read has told, so that the next tells only more.
#[derive(Debug, Clone, Default)]
struct Told {
    /// Misses kept with their explanation.
    missed: usize,
    /// Misses counted.
    misses: u64,
    /// Errors kept.
    failed: usize,
    /// Refused requests by host.
    refused: HashMap<String, u64>,
    /// Whether the unused recordings were told.
    unused: bool,
}

/// What happened in one scope since its test began.
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct Tally {
    /// The test, as its runner named it.
    test: Option<String>,
    /// Requests answered (or refused) for this scope.
    requests: u64,
    /// Answered from a cassette.
    hits: u64,
    /// Replay misses.
    misses: u64,
    /// Answers stored as cassettes (a stream: being stored).
    recorded: u64,
    /// Answers passed through unstored.
    passed_through: u64,
    /// Other errors (the upstream unreachable, a refused mode, a corrupt cassette).
    errors: u64,
    /// The first misses, with their explanation.
    missed: Vec<MissedRequest>,
    /// The first errors' messages.
    failed: Vec<String>,
    /// Traffic that bypassed the base URL during the test (the `default` scope only).
    bypassed: Vec<BypassedHost>,
    /// The keys of every request answered, replayed or recorded, in order, each once.
    keys: Vec<String>,
    /// Recordings the test made in an earlier run and did not use in this one (asked for on
    /// `DELETE ...?unused=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    unused: Option<Vec<String>>,
    /// What fails the test, one line each, as its runner prints it: what no earlier reporting
    /// read told (see [`Read::report`]). Empty when nothing does.
    failure: Vec<String>,
    /// The last miss kept, in one line, for a runner's list of the tests that failed.
    headline: Option<String>,
    /// How to record a miss, in the embedder's words (its advice on one).
    #[serde(skip)]
    record: Option<String>,
    /// What a reporting read told.
    #[serde(skip)]
    told: Told,
    /// What the test's vcrpy tapes answered, for a proxy that answers from them.
    #[serde(skip_serializing_if = "Option::is_none")]
    adopt: Option<TapeReport>,
    /// The requests the test sent, when its begin asked to keep them and the read asks for
    /// them (`?requests=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    sent: Option<Vec<SentRequest>>,
}

impl Tally {
    /// Adds what the test's vcrpy tapes answered (a proxy that answers from tapes); `end`
    /// forgets them, as the test ends.
    pub(super) fn with_tapes(mut self, recorder: &Recorder, end: bool) -> Tally {
        if let Some(test) = &self.test {
            self.adopt = recorder.tape_report(test, end);
        }
        self
    }

    fn note_key(&mut self, key: String) {
        if !self.keys.contains(&key) {
            self.keys.push(key);
        }
    }

    /// Counts one answer.
    pub(super) fn outcome(&mut self, outcome: &Outcome) {
        self.requests += 1;
        match outcome.source {
            Source::Replayed => self.hits += 1,
            Source::Recorded | Source::Recording => self.recorded += 1,
            Source::PassedThrough => self.passed_through += 1,
            // An MCP route answers a miss with a JSON-RPC error: its explanation is in the body.
            Source::Missed => {
                self.misses += 1;
                if self.missed.len() < KEPT {
                    self.missed.push(MissedRequest {
                        key: outcome.key.to_string(),
                        request: "an MCP request".into(),
                        summary: "no recording; see the JSON-RPC error the client got".into(),
                        explanation: Vec::new(),
                    });
                }
            }
        }
        self.note_key(outcome.key.to_string());
    }

    /// Misses and errors so far: what fails a test (with refused bypasses, counted apart).
    fn problems(&self) -> u64 {
        self.misses + self.errors
    }

    /// A control message that could not be followed: the test it was meant for cannot be
    /// vouched for.
    pub(super) fn control_error(&mut self, reason: String) {
        self.errors += 1;
        if self.failed.len() < KEPT {
            self.failed.push(format!("cassette control pipe: {reason}"));
        }
    }

    /// Counts one error answer; `message` is what the client was told, `advice` what the
    /// embedder says fixes the error (for a miss: how to record).
    pub(super) fn error(&mut self, err: &Error, message: String, advice: Option<String>) {
        self.requests += 1;
        match err {
            Error::Miss(miss) => {
                self.misses += 1;
                if self.record.is_none() {
                    self.record = advice;
                }
                if self.missed.len() < KEPT {
                    self.missed.push(MissedRequest {
                        key: miss.key.to_string(),
                        request: miss.request_line(),
                        summary: miss.explanation.summary.clone(),
                        explanation: miss.explanation_lines(),
                    });
                }
            }
            // A test's are named in its tally's `adopt` report, once per distinct request; one
            // outside any test has no report, and is named here.
            Error::Unanswered { .. } if self.test.is_some() => self.errors += 1,
            // What the test recorded (a reset, a timeout) for its retry path: no problem.
            Error::FailureReplayed { .. } => {}
            _ => {
                self.errors += 1;
                if self.failed.len() < KEPT {
                    self.failed.push(message);
                }
            }
        }
    }
}

impl Tally {
    /// Renders what fails the test and `told` has not told (the whole tally for a fresh
    /// `told`) into `failure`, and notes it as told; `headline` is the last miss kept.
    fn render(&mut self, told: &mut Told) {
        let new_missed = self.missed.get(told.missed..).unwrap_or_default();
        let counted = self.misses.saturating_sub(told.misses);
        let unused = match &self.unused {
            Some(unused) if !told.unused => unused.as_slice(),
            _ => &[],
        };
        let problems = Problems {
            missed: new_missed.iter().map(MissedRequest::as_missed).collect(),
            more_misses: counted.saturating_sub(new_missed.len() as u64),
            record: self.record.as_deref(),
            failed: self
                .failed
                .get(told.failed..)
                .unwrap_or_default()
                .iter()
                .map(String::as_str)
                .collect(),
            refused: self
                .bypassed
                .iter()
                .filter(|b| b.refused)
                .filter_map(|b| {
                    let before = told.refused.get(&b.host).copied().unwrap_or(0);
                    (b.requests > before).then(|| Refused {
                        host: &b.host,
                        requests: b.requests - before,
                    })
                })
                .collect(),
            unused,
        };
        let failure = failure::lines(&problems);
        told.missed = self.missed.len();
        told.misses = self.misses;
        told.failed = self.failed.len();
        told.unused |= !unused.is_empty();
        for b in self.bypassed.iter().filter(|b| b.refused) {
            told.refused.insert(b.host.clone(), b.requests);
        }
        self.failure = failure;
        self.headline = self
            .missed
            .last()
            .map(|m| failure::headline(&m.as_missed()));
    }
}

impl MissedRequest {
    fn as_missed(&self) -> Missed<'_> {
        Missed {
            key: &self.key,
            request: &self.request,
            summary: &self.summary,
            explanation: &self.explanation,
        }
    }
}

#[derive(Default)]
struct Entry {
    scope: Scope,
    tally: Tally,
    /// Bypass counts by host when the test began (the `default` scope's are the difference).
    bypassed_before: HashMap<String, u64>,
    /// Whether a notice was written that nobody has read the tally for since.
    notice_pending: bool,
    /// The tally's problems when it was last read or noticed: only more get a notice.
    problems_told: u64,
    /// The requests the test sent, when its begin asked to keep them.
    sent: Vec<SentRequest>,
    /// The test's alias, when its begin gave one.
    alias: Option<String>,
    /// Whether this is what requests naming an ended test's alias did (see [`Scopes::late`]).
    late: bool,
}

impl Entry {
    /// The entry of requests that came for the test of `scope` after it ended.
    fn late(scope: Scope) -> Entry {
        Entry {
            tally: Tally {
                test: scope.test.clone(),
                ..Tally::default()
            },
            scope,
            late: true,
            ..Entry::default()
        }
    }
}

/// What a test's alias names (see [`Begin::alias`]).
enum Alias {
    /// The test runs in this scope.
    Running(String),
    /// The test ended: its scope (its tapes read no more), for the requests that come late.
    Ended(Scope),
}

/// The counts of every test that ended, summed (`GET /_cassette/scopes`): the runner's
/// summary, without reading each test's tally.
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct Ended {
    tests: u64,
    requests: u64,
    hits: u64,
    misses: u64,
    recorded: u64,
    passed_through: u64,
    errors: u64,
}

impl Ended {
    fn add(&mut self, tally: &Tally) {
        self.tests += 1;
        self.requests += tally.requests;
        self.hits += tally.hits;
        self.misses += tally.misses;
        self.recorded += tally.recorded;
        self.passed_through += tally.passed_through;
        self.errors += tally.errors;
    }
}

/// Whether a scope's problems are told on stdout as they happen (the control pipe's notices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Notices {
    /// Only the control endpoint tells.
    Off,
    /// `{"problem":ID}` on stdout, before the answer that caused it leaves.
    Stdout,
}

#[derive(Default)]
struct Table {
    entries: HashMap<String, Entry>,
    /// Every scope the runner began (through the control endpoint or the pipe, both the
    /// runner's own): only these take requests, so a made-up `/_scope/ID/` costs nothing.
    begun: std::collections::HashSet<String>,
    /// Every alias a test was begun with, running or ended.
    aliases: HashMap<String, Alias>,
    ended: Ended,
}

impl Table {
    /// The scope a request naming `id` is counted in: a running test's, for its alias; else
    /// `id` (a scope, or an ended test's alias, whose late requests are kept under it).
    fn resolve<'a>(&'a self, id: &'a str) -> &'a str {
        if self.begun.contains(id) {
            return id;
        }
        match self.aliases.get(id) {
            Some(Alias::Running(scope)) => scope,
            _ => id,
        }
    }

    /// Notes that the test of `entry` ended: what names its alias from now on comes late.
    fn retire(&mut self, entry: &Entry) {
        if let Some(alias) = &entry.alias {
            let scope = Scope {
                tapes: None,
                keep_requests: false,
                ..entry.scope.clone()
            };
            self.aliases.insert(alias.clone(), Alias::Ended(scope));
        }
    }
}

/// The scopes of a proxy with a control token.
pub(super) struct Scopes {
    token: String,
    notices: Notices,
    table: Mutex<Table>,
    /// Notices not written because the runner's pipe was full (a runner that stopped reading
    /// must not block request handling).
    dropped: std::sync::atomic::AtomicU64,
}

impl Scopes {
    pub(super) fn new(token: String, notices: Notices) -> Scopes {
        Scopes {
            token,
            notices,
            table: Mutex::default(),
            dropped: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Whether scope `id` takes requests: the default scope, one the runner began, or a
    /// test's alias.
    pub(super) fn begun(&self, id: &str) -> bool {
        let table = self.table();
        id == DEFAULT_SCOPE || table.begun.contains(id) || table.aliases.contains_key(id)
    }

    /// Whether a control request carries the token (compared in constant time: a local process
    /// that may probe the port must not learn it a byte at a time).
    pub(super) fn authorized(&self, presented: Option<&str>) -> bool {
        let Some(presented) = presented else {
            return false;
        };
        super::run_secret::same_bytes(presented.as_bytes(), self.token.as_bytes())
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // Every update is one call that cannot panic half-way; a poisoned lock is still whole.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The scope of a request in scope `id` (the default scope when none began); for an
    /// ended test's alias, that test's.
    pub(super) fn scope(&self, id: &str) -> Scope {
        let table = self.table();
        let id = table.resolve(id);
        match (table.entries.get(id), table.aliases.get(id)) {
            (Some(entry), _) => entry.scope.clone(),
            (None, Some(Alias::Ended(scope))) => scope.clone(),
            _ => Scope::default(),
        }
    }

    /// Begins the test `scope` names in scope `id` for `recorder`, which reads the test's
    /// tapes when it answers from tapes; `Err` when the recorder cannot begin it (the scope is
    /// begun all the same, its problem noted, so that the test fails naming it).
    pub(super) fn begin_with(
        &self,
        recorder: &Recorder,
        id: &str,
        scope: Scope,
        alias: Option<String>,
        bypassed: &[Bypassed],
    ) -> Result<(), String> {
        let begun = recorder
            .begin(&scope)
            .map_err(|err| crate::error::report(&err));
        let aliased = self.begin(id, scope, alias, bypassed);
        begun.and(aliased).inspect_err(|reason| {
            self.count(id, |tally| tally.control_error(reason.clone()));
        })
    }

    /// Begins a test in scope `id`, forgetting what the scope saw before, under its `alias`
    /// too; `Err` names an alias that cannot be the test's (the test is begun without it).
    pub(super) fn begin(
        &self,
        id: &str,
        scope: Scope,
        alias: Option<String>,
        bypassed: &[Bypassed],
    ) -> Result<(), String> {
        let tally = Tally {
            test: scope.test.clone(),
            ..Tally::default()
        };
        let before = bypassed
            .iter()
            .map(|b| (bypass_name(b), b.requests()))
            .collect();
        let mut table = self.table();
        let alias = match alias {
            None => Ok(None),
            Some(alias)
                if valid_scope_id(&alias)
                    && alias != DEFAULT_SCOPE
                    && alias != id
                    && !table.begun.contains(&alias)
                    && !table.aliases.contains_key(&alias) =>
            {
                Ok(Some(alias))
            }
            Some(alias) => Err(format!(
                "the alias `{}` of a begin must be a scope id (1 to 128 letters, digits, `-`, \
                 `_` or `.`) that no scope and no other test has",
                alias.chars().take(MAX_SCOPE_ID).collect::<String>()
            )),
        };
        let kept = alias.clone().unwrap_or_default();
        if let Some(alias) = &kept {
            table
                .aliases
                .insert(alias.clone(), Alias::Running(id.to_owned()));
        }
        table.begun.insert(id.to_owned());
        let replaced = table.entries.insert(
            id.to_owned(),
            Entry {
                scope,
                tally,
                bypassed_before: before,
                alias: kept,
                ..Entry::default()
            },
        );
        // A test begun again without an end: the one before it ended all the same.
        if let Some(replaced) = replaced {
            table.retire(&replaced);
        }
        alias.map(|_| ())
    }

    /// Counts something that happened in scope `id` (or for the test whose alias it is, as it
    /// is when the count is made: a request that outlived its test comes late); a new problem
    /// is noticed. Nothing is kept for a scope the runner never began.
    pub(super) fn count(&self, id: &str, note: impl FnOnce(&mut Tally)) {
        let mut table = self.table();
        let id = table.resolve(id).to_owned();
        if id != DEFAULT_SCOPE && !table.begun.contains(&id) {
            let late = match table.aliases.get(&id) {
                Some(Alias::Ended(scope)) => scope.clone(),
                _ => return,
            };
            table
                .entries
                .entry(id.clone())
                .or_insert_with(|| Entry::late(late));
        }
        let entry = table.entries.entry(id.clone()).or_default();
        note(&mut entry.tally);
        if entry.tally.problems() > entry.problems_told {
            entry.problems_told = entry.tally.problems();
            self.notice(&id, entry);
        }
    }

    /// What requests did that came for tests after they ended (a thread or a task the test
    /// started, still sending), one tally each with its failure text, for the runner's summary.
    pub(super) fn late(&self) -> Vec<Tally> {
        let table = self.table();
        let mut late: Vec<Tally> = table
            .entries
            .values()
            .filter(|e| e.late)
            .map(|e| {
                let mut tally = e.tally.clone();
                tally.render(&mut Told::default());
                tally
            })
            .collect();
        late.sort_by(|a, b| a.test.cmp(&b.test));
        late
    }

    /// Keeps a request scope `id` sent, when its test asked for them (`keep_requests`).
    pub(super) fn keep(&self, id: &str, sent: impl FnOnce() -> SentRequest) {
        let mut table = self.table();
        let id = table.resolve(id).to_owned();
        if let Some(entry) = table.entries.get_mut(&id) {
            if entry.scope.keep_requests && entry.sent.len() < super::sent::KEPT {
                entry.sent.push(sent());
            }
        }
    }

    /// A forward-proxy request was refused: the `default` scope's test bypassed the base URL.
    pub(super) fn refused_bypass(&self) {
        let mut table = self.table();
        let entry = table.entries.entry(DEFAULT_SCOPE.to_owned()).or_default();
        self.notice(DEFAULT_SCOPE, entry);
    }

    /// Tells the runner that scope `id` saw a problem, once until it reads the tally: a test
    /// that misses ten thousand times writes one line, and the pipe never fills.
    fn notice(&self, id: &str, entry: &mut Entry) {
        if self.notices == Notices::Off || entry.notice_pending {
            return;
        }
        entry.notice_pending = true;
        self.tell(&json!({ "problem": id }));
    }

    /// Writes one line on stdout for the runner, only if the pipe has room now: request
    /// handling never waits on a runner that does not read (a line is under `PIPE_BUF`, so a
    /// pipe with room takes it whole). A line that does not fit is dropped and counted.
    fn tell(&self, line: &serde_json::Value) {
        let mut out = std::io::stdout().lock();
        if !room_on_stdout() {
            let dropped = self
                .dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1;
            tracing::warn!(
                "the test runner is not reading the control pipe's notices (stdout is full): \
                 dropped {dropped} so far"
            );
            return;
        }
        // A runner that stopped reading is gone, and stops the proxy: nothing to tell anyone.
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }

    /// Tells the runner, when a test's scope ended without a request (`{"idle":TEST}` on
    /// stdout), for its list of the tests that reached nothing through cassette.
    pub(super) fn tell_idle(&self, tally: &Tally) {
        if self.notices == Notices::Off || tally.requests > 0 || !tally.bypassed.is_empty() {
            return;
        }
        let Some(test) = &tally.test else {
            return;
        };
        self.tell(&json!({ "idle": test }));
    }

    /// The counts of every test that ended so far.
    pub(super) fn ended(&self) -> Ended {
        self.table().ended.clone()
    }

    /// The test scope `id` is for, as its runner named it.
    pub(super) fn test(&self, id: &str) -> Option<String> {
        let table = self.table();
        table.entries.get(id).and_then(|e| e.tally.test.clone())
    }

    /// What scope `id` saw so far, with its failure text; ending the test (`read.end`) makes
    /// its requests the default scope's again.
    pub(super) fn read(&self, id: &str, bypassed: &[Bypassed], read: Read) -> Tally {
        let mut table = self.table();
        // A scope nothing happened in yet tells an empty tally, and keeps no entry.
        let mut fresh = Entry::default();
        let known = table.entries.contains_key(id);
        let entry = table.entries.get_mut(id).unwrap_or(&mut fresh);
        entry.notice_pending = false;
        entry.problems_told = entry.tally.problems();
        let mut tally = entry.tally.clone();
        if read.sent {
            tally.sent = Some(entry.sent.clone());
        }
        if known && id == DEFAULT_SCOPE {
            tally.bypassed = bypassed
                .iter()
                .filter_map(|b| {
                    let name = bypass_name(b);
                    let before = entry.bypassed_before.get(&name).copied().unwrap_or(0);
                    let during = b.requests().saturating_sub(before);
                    (during > 0).then_some(BypassedHost {
                        host: name,
                        requests: during,
                        refused: b.refused > 0,
                    })
                })
                .collect();
        }
        tally
            .bypassed
            .extend(read.refused.into_iter().map(|r| BypassedHost {
                host: r.host,
                requests: r.requests,
                refused: true,
            }));
        if let Some(recorded) = read.recorded {
            let unused = recorded
                .into_iter()
                .filter(|key| !tally.keys.contains(key))
                .collect();
            tally.unused = Some(unused);
        }
        let mut told = tally.told.clone();
        tally.render(&mut told);
        if read.report {
            entry.tally.told = told;
        }
        if let Some(ended) = read.end.then(|| table.entries.remove(id)).flatten() {
            table.retire(&ended);
            table.ended.add(&tally);
        }
        tally
    }
}

/// Whether stdout can take a short line without blocking (always, where it is not a pipe
/// that can fill, or off Unix).
fn room_on_stdout() -> bool {
    #[cfg(unix)]
    {
        let mut poll = libc::pollfd {
            fd: libc::STDOUT_FILENO,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd, a zero timeout: poll only reads and writes `poll`.
        let ready = unsafe { libc::poll(&mut poll, 1, 0) };
        // An error or a hang-up is let through: the write then fails at once, never blocks.
        ready != 0
    }
    #[cfg(not(unix))]
    true
}

/// A bypassed host as `host:port`.
fn bypass_name(bypassed: &Bypassed) -> String {
    format!("{}:{}", bypassed.host, bypassed.port)
}

/// Splits a scope prefix off a request path: the scope id and the path that follows. A path
/// that names no scope (or a malformed one) belongs to the default scope, unchanged.
pub(crate) fn split_scope(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix(SCOPE_PREFIX)?;
    let (id, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    valid_scope_id(id).then_some((id, path))
}

/// Whether `id` can name a scope: 1 to 128 letters, digits, `-`, `_` or `.`.
pub(super) fn valid_scope_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_SCOPE_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests;
