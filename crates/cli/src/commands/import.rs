//! `cassette import PATH...`: tapes written by other tools become cassettes keyed by the
//! current contract, so an older suite's recordings replay under cassette:
//!
//! - the seed harness's flat `<16 hex>.json` files, `{"key", "params", "text"}`: `params` is
//!   the chat request (a `messages` list, or a `prompt` with an optional `system`, as the suite
//!   shorthand takes it) and `text` the answer, stored as an OpenAI-compatible chat completion;
//! - vcrpy YAML cassettes (`interactions` of `request` and `response`), in every shape
//!   `cassette-vcr` reads (the reader the adopt run's proxy uses too), streamed answers
//!   assembled into their final response as when recording.
//!
//! No answer is lost or mixed with another: an interaction that cannot be converted is named
//! and skipped (the rest of its file is imported), a header value that cannot is named and
//! left out (the rest of its interaction is imported); the n-th repeat of one request within a
//! tape is stored as its n-th occurrence (sequence mode replays them in order); a key another
//! test's tape already stored with a different answer keeps the first and stores this one
//! under its test-scoped key (docs/keying.md), both tapes named; where the tests are not known
//! (or are one test) it is a conflict naming both tapes (the stored one is kept); every cassette keeps its provenance (`meta.source`, and `meta.test` from the
//! tape's place in a pytest-recording suite). Requests to hosts no route serves are refused
//! and named when they call an API path (a stranger's answers must not replay for a vendor's
//! requests); a GET of any other path (a fixture downloaded from the web) is stored as a
//! download of its host, which replay serves to the test process (`docs/keying.md`, "Profile
//! `download`"), unless `[adopt] downloads = false`, when it is named and not imported.
//!
//! Imports go through the recorder's redaction (credentials in headers and queries are never
//! stored) and are create-only unless `--overwrite`; the source files are left in place.

mod vcr;
use crate::shared::progress::Progress;
use crate::shared::settings::{RecorderArgs, SettingsFile};
use anyhow::{bail, Context};
use bytes::Bytes;
use cassette_grade::suite::CHAT_PATH;
use cassette_recorder::{
    download_key, is_download_method, Download, Downloads, Exchange, Imported, Mode, Recorder,
    Request, Write,
};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use vcr::Item;

/// Arguments of `cassette import`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "PATH is a file or a folder (searched recursively): seed-harness tapes \
(<16 hex>.json with key, params, text) and vcrpy cassettes (.yaml, .yml) are imported, anything \
else is skipped and named.\n\
Repeats of one request within a tape are stored as its occurrences: replay them with \
repeats = \"sequence\". A key another test's tape stored with a different answer keeps the \
first, and this answer is stored for its test alone (a test-scoped key); where the tests are \
not known it is a conflict: the first is kept and both tapes are named.\n\
Exit status: 0 all imported (or already there), 2 some could not be imported or conflict.\n\n\
Examples:\n  \
cassette import tests/cassettes --dry-run\n  \
cassette import old_cassettes/ --store file://cassettes\n  \
cassette import tests/cassettes/test_chat.yaml --route anthropic=https://api.anthropic.com"
)]
pub(crate) struct ImportArgs {
    /// Files or folders to import.
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<PathBuf>,

    /// Replace cassettes already stored under the same keys.
    #[arg(long, conflicts_with = "dry_run")]
    overwrite: bool,

    /// Store nothing: print, per file, what would be imported, kept, numbered, skipped or in
    /// conflict, with counts.
    #[arg(long)]
    dry_run: bool,

    /// Fill in a header the tape's serializer deleted from requests of a route:
    /// `ROUTE:NAME=VALUE` (e.g. `anthropic:anthropic-version=2023-06-01`), for a keyed header
    /// whose value the SDK always sends. Applied only where a request lacks it; each use is
    /// reported.
    #[arg(long, value_name = "ROUTE:NAME=VALUE", value_parser = parse_restore)]
    restore_header: Vec<Restore>,

    #[command(flatten)]
    recorder: RecorderArgs,
}

/// A header filled in on imported requests of a route that lack it.
#[derive(Debug, Clone)]
struct Restore {
    route: String,
    name: String,
    value: String,
}

fn parse_restore(text: &str) -> Result<Restore, String> {
    let shape = || {
        format!("{text:?}: expected ROUTE:NAME=VALUE, e.g. anthropic:anthropic-version=2023-06-01")
    };
    let (route, rest) = text.split_once(':').ok_or_else(shape)?;
    let (name, value) = rest.split_once('=').ok_or_else(shape)?;
    let (route, name) = (route.trim(), name.trim().to_ascii_lowercase());
    if route.is_empty()
        || name.is_empty()
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err(shape());
    }
    Ok(Restore {
        route: route.to_owned(),
        name,
        value: value.trim().to_owned(),
    })
}

/// Keyed headers a vendor's SDK always sends, which serializers that delete vendor headers
/// drop: an imported request without one will not be asked for on replay.
const ALWAYS_SENT: &[(&str, &str)] = &[("anthropic.messages", "anthropic-version")];

/// What one source file held.
enum Source {
    Seed,
    Vcr,
}

/// What an earlier interaction of this run stored under a key: where from, and a fingerprint
/// of the answer (status and body as the tape holds them). A later one with the same key is
/// decided against it without touching the store, so the first in file order wins and the
/// writes themselves can run in parallel.
struct Seen {
    at: String,
    test: Option<String>,
    answer: (u16, u64),
}

/// The earlier tape of this run whose answer to the same request differs.
#[derive(Clone)]
struct Earlier {
    at: String,
    test: Option<String>,
}

/// Counts for one file, or for the whole run.
#[derive(Default, Clone, Copy)]
struct Counts {
    imported: usize,
    kept: usize,
    replaced: usize,
    failed: usize,
    conflicts: usize,
    apart: usize,
    repeats: usize,
    downloads: usize,
    /// Downloads stored (or already stored) as recordings of their hosts.
    stored_downloads: usize,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.imported += other.imported;
        self.kept += other.kept;
        self.replaced += other.replaced;
        self.failed += other.failed;
        self.conflicts += other.conflicts;
        self.apart += other.apart;
        self.repeats += other.repeats;
        self.downloads += other.downloads;
        self.stored_downloads += other.stored_downloads;
    }
}

/// How many imports write at once: a file store spends most of an import waiting for its
/// atomic writes to reach the disk.
const PARALLEL_WRITES: usize = 32;

/// One interaction on its way: what it is, and once decided, what happened to it.
struct Entry {
    at: String,
    request: String,
    key: String,
    occurrence: u32,
    /// The host of a download (a GET of a host no route serves).
    download: Option<String>,
    state: State,
}

/// What is to be imported: an API exchange, or a download of a host no route serves.
enum Pending {
    Exchange(Exchange),
    Download(Download),
}

enum State {
    /// To be imported.
    Pending(Box<Pending>),
    /// To be imported after every pending one: an earlier tape of this run, another test's,
    /// answers the same request differently, so this one goes under its test-scoped key once
    /// that one holds the plain key (the first in file order wins the plain key, as before).
    Apart(Box<Pending>, Earlier),
    /// A dry run's [`State::Apart`]: it would be stored under its test-scoped key.
    WouldApart(Earlier),
    /// Imported (or not) as the recorder or an earlier tape of this run decided.
    Done(Imported),
    /// Not converted or not stored: the message says why.
    Failed(String),
    /// A download from a host no route serves, not imported (`[adopt] downloads = false`).
    Download(String),
}

/// One source file: its interactions and what is said about it as a whole.
struct FileResult {
    path: PathBuf,
    test: Option<String>,
    interactions: usize,
    entries: Vec<Entry>,
    notes: Vec<String>,
}

/// Runs `cassette import`.
pub(crate) fn run(args: ImportArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let write = if args.dry_run {
        Write::Nothing
    } else if args.overwrite {
        Write::Overwrite
    } else {
        Write::CreateOnly
    };
    let mut settings = args.recorder.resolve(file)?;
    // Writing needs a writable store; nothing is ever sent upstream by an import.
    settings.config.mode = Mode::Record;
    let routes = settings.config.routes.clone();
    let downloads = settings.config.downloads;
    let recorder = settings.build()?;
    let mut files = Vec::new();
    for path in &args.paths {
        collect(path, &mut files)?;
    }
    let runtime = crate::shared::runtime::runtime()?;
    let mut total = Counts::default();
    let mut seen: HashMap<String, Seen> = HashMap::new();
    let progress = Progress::bar(files.len() as u64, "files");
    // Read, convert, number and decide against this run's earlier tapes, in file order.
    let mut results = Vec::new();
    for (path, source) in &files {
        progress.inc();
        let recorded_at = modified(path);
        let (items, test) = match source {
            Source::Seed => (
                seed_exchange(path).map(|e| {
                    vec![Ok(Item::Exchange {
                        exchange: Box::new(e),
                        left_out: Vec::new(),
                    })]
                }),
                None,
            ),
            Source::Vcr => (
                vcr::read_tape(
                    path,
                    &routes,
                    &recorded_at,
                    &tool("the vcrpy cassette", path),
                ),
                vcr::test_id(path),
            ),
        };
        let items = match items {
            Ok(items) => items,
            Err(err) => {
                total.failed += 1;
                progress.println(format!("cannot import {}: {err:#}", path.display()));
                if args.dry_run {
                    progress.suspend(|| println!("{}: not a tape that imports", path.display()));
                }
                continue;
            }
        };
        let plan = Plan {
            path,
            single: matches!(source, Source::Seed),
            test,
            restore: &args.restore_header,
            recorder: &recorder,
            downloads,
        };
        results.push(plan.plan(items, &mut seen));
    }
    // Store what is pending, several at once; the outcomes are reported in file order.
    runtime.block_on(store_all(&recorder, &mut results, write));
    for result in &results {
        let counts = report(result, write, &progress);
        if args.dry_run {
            progress.suspend(|| {
                println!(
                    "{}",
                    dry_run_line(&result.path, result.interactions, counts)
                )
            });
        }
        total.add(counts);
    }
    let mut hosts: Vec<&str> = results
        .iter()
        .flat_map(|r| &r.entries)
        .filter(|e| matches!(e.state, State::Done(Imported::Stored | Imported::Replaced)))
        .filter_map(|e| e.download.as_deref())
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    progress.finish();
    runtime.block_on(crate::shared::runtime::flush_index(&recorder));
    let verb = if args.dry_run {
        "would import"
    } else {
        "imported"
    };
    eprintln!(
        "{verb} {}, kept {} already stored, failed {}, {} conflict(s) with another tape's answer, \
         {} repeat(s) numbered for sequence mode{}{}, {} download(s) stored{}, {} download(s) \
         not imported ({}); the source files are left in place",
        total.imported,
        total.kept,
        total.failed,
        total.conflicts,
        total.repeats,
        apart_count(total),
        if total.replaced > 0 {
            format!(", {} replaced", total.replaced)
        } else {
            String::new()
        },
        total.stored_downloads,
        match hosts.is_empty() {
            true => String::new(),
            false => format!(" (from {})", hosts.join(", ")),
        },
        total.downloads,
        recorder.store().location()
    );
    Ok(if total.failed > 0 || total.conflicts > 0 {
        ExitCode::from(crate::shared::runtime::EXIT_ERROR)
    } else {
        ExitCode::SUCCESS
    })
}

/// Imports every pending entry, [`PARALLEL_WRITES`] at a time.
async fn store_all(recorder: &Recorder, results: &mut [FileResult], write: Write) {
    // The exchanges kept apart for their test go second: the plain key is then the first
    // tape's, whatever order the parallel writes finish in.
    for apart in [false, true] {
        store_pass(recorder, results, write, apart).await;
    }
}

/// Imports the pending entries (`apart`: those kept apart for their test),
/// [`PARALLEL_WRITES`] at a time.
async fn store_pass(recorder: &Recorder, results: &mut [FileResult], write: Write, apart: bool) {
    use futures::StreamExt;
    let mut pending = Vec::new();
    for (f, result) in results.iter_mut().enumerate() {
        for (e, entry) in result.entries.iter_mut().enumerate() {
            let ready = match entry.state {
                State::Pending(_) => !apart,
                State::Apart(..) => apart,
                _ => false,
            };
            if !ready {
                continue;
            }
            match std::mem::replace(&mut entry.state, State::Failed(String::new())) {
                State::Pending(exchange) => pending.push((f, e, exchange, None)),
                State::Apart(exchange, earlier) => pending.push((f, e, exchange, Some(earlier))),
                other => entry.state = other,
            }
        }
    }
    let outcomes: Vec<(usize, usize, State)> = futures::stream::iter(pending)
        .map(|(f, e, exchange, earlier)| async move {
            let imported = match *exchange {
                Pending::Exchange(exchange) => recorder.import(exchange, write).await,
                Pending::Download(download) => recorder.import_download(download, write).await,
            };
            let state = match (imported, earlier) {
                // A dry run stored nothing: the plain key is not the earlier tape's yet.
                (Ok((_, Imported::Stored)), Some(earlier)) if write == Write::Nothing => {
                    State::WouldApart(earlier)
                }
                (Ok((_, outcome)), _) => State::Done(outcome),
                (Err(err), _) => State::Failed(format!("{:#}", anyhow::Error::new(err))),
            };
            (f, e, state)
        })
        .buffer_unordered(PARALLEL_WRITES)
        .collect()
        .await;
    for (f, e, state) in outcomes {
        results[f].entries[e].state = state;
    }
}

fn dry_run_line(path: &Path, interactions: usize, c: Counts) -> String {
    format!(
        "{}: {interactions} interaction(s): {} would be imported ({} as later occurrences{}), {} \
         already stored, {} conflict(s), {} cannot be imported, {} download(s) stored, {} \
         download(s) not imported",
        path.display(),
        c.imported + c.replaced,
        c.repeats,
        apart_count(c),
        c.kept,
        c.conflicts,
        c.failed,
        c.stored_downloads,
        c.downloads
    )
}

/// `, N kept apart for their test` when there are any.
fn apart_count(c: Counts) -> String {
    match c.apart {
        0 => String::new(),
        n => format!(", {n} kept apart for their test"),
    }
}

/// One source file being converted and decided.
struct Plan<'a> {
    path: &'a Path,
    /// A file holding one exchange (a seed tape): named without an interaction number.
    single: bool,
    test: Option<String>,
    restore: &'a [Restore],
    recorder: &'a Recorder,
    /// Whether downloads are stored (`[adopt] downloads`).
    downloads: Downloads,
}

impl Plan<'_> {
    /// The tape's converted interactions: repeats numbered, keys another tape of this run
    /// already has decided against it (same answer kept, another one a conflict).
    fn plan(
        &self,
        items: Vec<anyhow::Result<Item>>,
        seen: &mut HashMap<String, Seen>,
    ) -> FileResult {
        let mut result = FileResult {
            path: self.path.to_owned(),
            test: self.test.clone(),
            interactions: items.len(),
            entries: Vec::new(),
            notes: Vec::new(),
        };
        // Per base key: the answers of its occurrences so far, and the request.
        let mut occurrences: HashMap<String, (Vec<(u16, u64)>, String)> = HashMap::new();
        let mut order = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            let at = if self.single {
                self.path.display().to_string()
            } else {
                format!("{} interaction {}", self.path.display(), i + 1)
            };
            let mut entry = Entry {
                at: at.clone(),
                request: String::new(),
                key: String::new(),
                occurrence: 1,
                download: None,
                state: State::Failed(String::new()),
            };
            let mut exchange = match item {
                Ok(Item::Exchange { exchange, left_out }) => {
                    for what in left_out {
                        result.notes.push(format!("note {at}: {what}"));
                    }
                    *exchange
                }
                Ok(Item::Download {
                    method,
                    shown,
                    mut download,
                }) => {
                    entry.state = match (is_download_method(&method), self.downloads) {
                        (true, Downloads::Stored) => {
                            download.test = self.test.clone();
                            download.source = Some(at.clone());
                            self.download(&mut entry, shown, download, seen)
                        }
                        _ => State::Download(shown),
                    };
                    result.entries.push(entry);
                    continue;
                }
                Err(err) => {
                    entry.state = State::Failed(format!("{err:#}"));
                    result.entries.push(entry);
                    continue;
                }
            };
            self.restore_headers(&mut exchange, &at, &mut result.notes);
            let answer = (exchange.status, fingerprint(&exchange.body));
            entry.request = format!("{} {}", exchange.request.method, exchange.request.path);
            let base = self
                .recorder
                .key_of(&exchange.request, 1)
                .as_str()
                .to_owned();
            let (answers, _) = occurrences.entry(base.clone()).or_insert_with(|| {
                order.push(base.clone());
                (Vec::new(), entry.request.clone())
            });
            answers.push(answer);
            entry.occurrence = u32::try_from(answers.len()).unwrap_or(u32::MAX);
            entry.key = if entry.occurrence == 1 {
                base
            } else {
                self.recorder
                    .key_of(&exchange.request, entry.occurrence)
                    .as_str()
                    .to_owned()
            };
            exchange.occurrence = entry.occurrence;
            exchange.test = self.test.clone();
            exchange.source = Some(at.clone());
            entry.state = match seen.get(&entry.key) {
                Some(earlier) if earlier.answer == answer => State::Done(Imported::Same),
                Some(earlier) if self.test.is_some() && earlier.test != self.test => State::Apart(
                    Box::new(Pending::Exchange(exchange)),
                    Earlier {
                        at: earlier.at.clone(),
                        test: earlier.test.clone(),
                    },
                ),
                Some(earlier) => State::Done(Imported::Conflict {
                    test: earlier.test.clone(),
                    source: earlier.at.clone(),
                }),
                None => {
                    seen.insert(
                        entry.key.clone(),
                        Seen {
                            at,
                            test: self.test.clone(),
                            answer,
                        },
                    );
                    State::Pending(Box::new(Pending::Exchange(exchange)))
                }
            };
            result.entries.push(entry);
        }
        for base in order {
            let (answers, request) = &occurrences[&base];
            let differ = answers.windows(2).any(|w| w[0] != w[1]);
            if answers.len() > 1 && differ {
                result.notes.push(format!(
                    "sequence: {} sends {request} {} times with different answers: stored as its \
                     occurrences 1 to {}; replay them in order with repeats = \"sequence\" \
                     (without it every repeat gets the first answer)",
                    self.path.display(),
                    answers.len(),
                    answers.len()
                ));
            }
        }
        result
    }

    /// A download to store as a recording of its host: keyed by its URL, decided against this
    /// run's earlier tapes (the same file kept once; another answer for the URL a conflict,
    /// since one URL is one file).
    fn download(
        &self,
        entry: &mut Entry,
        shown: String,
        download: Box<Download>,
        seen: &mut HashMap<String, Seen>,
    ) -> State {
        let answer = (download.status, fingerprint(&download.body));
        entry.key = download_key(&download.method, &download.url)
            .as_str()
            .to_owned();
        entry.request = shown;
        entry.download = Some(download.url.origin().ascii_serialization());
        match seen.get(&entry.key) {
            Some(earlier) if earlier.answer == answer => State::Done(Imported::Same),
            Some(earlier) => State::Done(Imported::Conflict {
                test: earlier.test.clone(),
                source: earlier.at.clone(),
            }),
            None => {
                seen.insert(
                    entry.key.clone(),
                    Seen {
                        at: entry.at.clone(),
                        test: self.test.clone(),
                        answer,
                    },
                );
                State::Pending(Box::new(Pending::Download(*download)))
            }
        }
    }

    /// Fills in the headers `--restore-header` names where a request lacks them, and says
    /// where a header every SDK sends is missing without such a rule.
    fn restore_headers(&self, exchange: &mut Exchange, at: &str, notes: &mut Vec<String>) {
        let request = &mut exchange.request;
        let has = |request: &Request, name: &str| {
            request
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        for rule in self.restore.iter().filter(|r| r.route == request.target) {
            if !has(request, &rule.name) {
                request
                    .headers
                    .push((rule.name.clone(), rule.value.clone()));
                notes.push(format!(
                    "restored {at}: {}: {} (--restore-header), missing from the tape",
                    rule.name, rule.value
                ));
            }
        }
        let profile = cassette_keying::Profile::from_path(&request.path).to_string();
        for (_, name) in ALWAYS_SENT.iter().filter(|(p, _)| *p == profile) {
            if !has(request, name) {
                notes.push(format!(
                    "note {at}: the request has no {name} header (deleted by the tape's \
                     serializer?); the SDK sends one, so its replay will miss: import with \
                     --restore-header {}:{name}=VALUE",
                    request.target
                ));
            }
        }
    }
}

/// Says what happened to each interaction of a file, and counts it.
fn report(result: &FileResult, write: Write, progress: &Progress) -> Counts {
    let mut counts = Counts::default();
    let dry = write == Write::Nothing;
    for note in &result.notes {
        progress.println(note.clone());
    }
    for entry in &result.entries {
        let Entry {
            at,
            request,
            key,
            occurrence,
            state,
            ..
        } = entry;
        let nth = if *occurrence > 1 {
            format!(", occurrence {occurrence}")
        } else {
            String::new()
        };
        if *occurrence > 1 && matches!(state, State::Done(_)) {
            counts.repeats += 1;
        }
        if let (Some(host), State::Done(Imported::Stored | Imported::Replaced)) =
            (&entry.download, state)
        {
            counts.stored_downloads += 1;
            let verb = if dry { "would store" } else { "stored" };
            progress.suspend(|| {
                println!("{verb} {at} as {key} ({request}: a download of {host}, served on replay)")
            });
            continue;
        }
        match state {
            State::Pending(_) => {}
            State::Failed(err) => {
                counts.failed += 1;
                progress.println(format!("cannot import {at}: {err}; skipped it"));
            }
            State::Download(what) => {
                counts.downloads += 1;
                progress.println(format!(
                    "not imported {at}: {what} is not an API call a route serves (no route has \
                     its host), and downloads are not stored ([adopt] downloads = false, or not \
                     a GET): replay refuses it; a test that needs it should read it from a file"
                ));
            }
            State::Done(Imported::Stored) => {
                counts.imported += 1;
                let verb = if dry { "would import" } else { "imported" };
                progress.suspend(|| println!("{verb} {at} as {key} ({request}{nth})"));
            }
            State::Done(Imported::Replaced) => {
                counts.replaced += 1;
                progress.suspend(|| {
                    println!("replaced {key} with {at} ({request}{nth}): it answered differently")
                });
            }
            State::Done(Imported::Same) => {
                counts.kept += 1;
                progress.suspend(|| println!("kept {key}: already stored, same answer ({at})"));
            }
            State::Apart(..) => {}
            State::Done(Imported::TestScoped { key, test, source }) => {
                counts.imported += 1;
                counts.apart += 1;
                let line = apart_line(result.test.as_deref(), request, source, test.as_deref());
                progress.suspend(|| println!("imported {at} as {key} {line}"));
            }
            State::WouldApart(earlier) => {
                counts.imported += 1;
                counts.apart += 1;
                let line = apart_line(
                    result.test.as_deref(),
                    request,
                    &earlier.at,
                    earlier.test.as_deref(),
                );
                progress.suspend(|| println!("would import {at} under its test-scoped key {line}"));
            }
            State::Done(Imported::Conflict { test, source }) => {
                counts.conflicts += 1;
                let ours = result
                    .test
                    .as_deref()
                    .map(|t| format!(" (test {t})"))
                    .unwrap_or_default();
                let theirs = test
                    .as_deref()
                    .map(|t| format!(" (test {t})"))
                    .unwrap_or_default();
                let kept = if dry { "would keep" } else { "kept" };
                progress.println(format!(
                    "conflict {key}: {at}{ours} answers {request} differently from {source}{theirs}, \
                     stored first; {kept} that one and not this: a replay would give one test \
                     the other's answer, so make the requests differ (or import the other tape \
                     into its own store)"
                ));
            }
            State::Done(other) => {
                counts.imported += 1;
                progress.suspend(|| println!("imported {at} as {key} ({request}{nth}): {other:?}"));
            }
        }
    }
    counts
}

/// Why an interaction is stored for its test alone.
fn apart_line(ours: Option<&str>, request: &str, source: &str, theirs: Option<&str>) -> String {
    let theirs = theirs.map(|t| format!(" (test {t})")).unwrap_or_default();
    format!(
        "for test {} only ({request}): {source}{theirs} answers the same request differently, \
         so each test keeps its own answer (a test-scoped key, docs/keying.md)",
        ours.unwrap_or("?")
    )
}

/// A fingerprint of an answer's body, to tell answers apart (not a security boundary).
fn fingerprint(body: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut hasher);
    hasher.finish()
}

/// The importable files under `path`: seed tapes and vcrpy cassettes; other files are named
/// as skipped, except cassettes of our own (an import may be pointed at a cassette folder).
fn collect(path: &Path, out: &mut Vec<(PathBuf, Source)>) -> anyhow::Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("cannot list {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for entry in entries {
            let hidden = entry
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            if !hidden {
                collect(&entry, out)?;
            }
        }
        return Ok(());
    }
    let name = path.to_string_lossy();
    if name.ends_with(".yaml") || name.ends_with(".yml") {
        out.push((path.to_owned(), Source::Vcr));
        return Ok(());
    }
    let json = name
        .ends_with(".json")
        .then(|| std::fs::read(path).ok())
        .flatten()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
    match json {
        Some(v) if v.get("params").is_some() && v.get("text").is_some() => {
            out.push((path.to_owned(), Source::Seed));
        }
        Some(v) if v.get("key_version").is_some() && v.get("request").is_some() => {}
        // A suite's own code beside its tapes (`cassette import tests/`) is no tape to mention.
        _ if name.ends_with(".py") => {}
        _ => eprintln!(
            "skipped {}: not a seed-harness tape or a vcrpy cassette",
            path.display()
        ),
    }
    Ok(())
}

/// When a file was last written, as the best guess at when it was recorded.
fn modified(path: &Path) -> String {
    let time = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map(chrono::DateTime::<chrono::Utc>::from)
        .unwrap_or_else(|_| chrono::Utc::now());
    time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn tool(what: &str, path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    format!(
        "cassette {} import of {what} {}",
        env!("CARGO_PKG_VERSION"),
        name.unwrap_or_default()
    )
}

/// A seed-harness tape: `{"key", "params", "text"}`.
fn seed_exchange(path: &Path) -> anyhow::Result<Exchange> {
    let value: Value = serde_json::from_slice(&std::fs::read(path)?).context("not valid JSON")?;
    let params = match value.get("params") {
        Some(Value::Object(params)) => params.clone(),
        _ => bail!("\"params\" must be an object"),
    };
    let Some(Value::String(text)) = value.get("text") else {
        bail!("\"text\" must be a string");
    };
    let body = seed_body(params)?;
    let model = body.get("model").cloned().unwrap_or(Value::Null);
    let answer = json!({
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
    });
    Ok(Exchange {
        request: Request::post_json(CHAT_PATH, &body),
        status: 200,
        headers: vec![("content-type".to_owned(), "application/json".to_owned())],
        body: Bytes::from(answer.to_string()),
        upstream: "https://api.openai.com".to_owned(),
        recorded_at: modified(path),
        tool: tool("the seed-harness tape", path),
        occurrence: 1,
        test: None,
        source: None,
    })
}

/// The chat body of a seed tape's `params`: as is when it has `messages`, else the suite
/// shorthand's (`system` then `prompt` as messages, every other member kept).
fn seed_body(mut params: Map<String, Value>) -> anyhow::Result<Value> {
    if params.contains_key("messages") {
        return Ok(Value::Object(params));
    }
    let Some(Value::String(prompt)) = params.remove("prompt") else {
        bail!("\"params\" has neither \"messages\" nor a \"prompt\" string");
    };
    let mut messages = Vec::new();
    match params.remove("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(system)) => {
            messages.push(json!({"role": "system", "content": system}));
        }
        Some(other) => bail!("params.system must be a string, found {other}"),
    }
    messages.push(json!({"role": "user", "content": prompt}));
    params.insert("messages".into(), Value::Array(messages));
    Ok(Value::Object(params))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_params_become_a_chat_body() {
        let body = seed_body(
            json!({"model": "m", "system": "Be brief", "prompt": "Hi", "temperature": 0})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap();
        assert_eq!(
            body,
            json!({"model": "m", "temperature": 0, "messages": [
                {"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hi"}]})
        );
        assert!(seed_body(Map::new()).is_err());
    }
}
