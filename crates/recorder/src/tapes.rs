//! Adopt: a recorder that answers what it forwards from the running test's vcrpy tapes instead
//! of an upstream ([`Answers::Tapes`](crate::config::Answers)). A test runner names a test's
//! tapes and its `match_on` when the test's scope begins ([`TapeSet`]); each request the mode
//! forwards is answered by the first unplayed interaction of those tapes that vcrpy's matchers
//! find alike (`cassette-vcr`, the reader `cassette import` uses too), and the answer goes down
//! the recorder's one write path like any upstream answer (sealed, stored create-only,
//! counted). A request no interaction answers gets no answer at all
//! ([`Error::Unanswered`]): nothing is stored for it, and nothing connects anywhere.
//!
//! A runner that applies the suite's own matchers itself (they are the suite's Python code)
//! names, with each request it sends, the interactions they let answer
//! ([`ADOPT_ALLOW_HEADER`]); the first unplayed of those answers it instead.
//!
//! Per test the deck notes what each answer's tape request differs in from today's request,
//! in the key's terms and rendered as a miss explanation renders its differences (the drift
//! vcrpy's default matching never looked at), what it could not answer, and what of its tapes
//! could not be read; the runner reads that with the test's tally ([`TapeReport`]).

use crate::config::Route;
use crate::error::Error;
use crate::miss::redacted_material;
use crate::scope::{TapeFilters, TapeSet, ADOPT_ALLOW_HEADER};
use bytes::Bytes;
use cassette_keying::KeyConfig;
use cassette_review::render::difference_lines;
use cassette_tape::redact::Redactor;
use cassette_tape::Request;
use cassette_vcr::{Interaction, MatchOn, Sent};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// How many unanswered requests and unreadable tapes a test's report keeps with their text.
const KEPT: usize = 50;

/// The tapes of the tests running now, by test.
#[derive(Default)]
pub(crate) struct TapeDeck {
    tests: Mutex<HashMap<String, Playing>>,
}

/// One test's tapes and what it asked of them.
struct Playing {
    /// The tapes as the runner named them, and whether any of them exists.
    tapes: Vec<String>,
    present: bool,
    /// vcrpy's `filter_headers` and `filter_query_parameters`, applied to today's request.
    filters: TapeFilters,
    match_on: MatchOn,
    /// Whether the runner names the interactions matching each request ([`TapeSet::judged`]).
    judged: bool,
    slots: Vec<Slot>,
    report: TapeReport,
}

/// One interaction of a test's tapes.
struct Slot {
    /// The tape it is on, as named, and that tape's place among the test's tapes, from 0.
    tape: String,
    tape_index: usize,
    /// Its place on that tape, from 1.
    number: usize,
    interaction: Interaction,
    played: bool,
}

/// What a test's tapes answered, for its runner (the adopt report).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct TapeReport {
    /// The tapes named for the test.
    tapes: Vec<String>,
    /// Its `match_on`, as named.
    match_on: Vec<String>,
    /// The matchers of `match_on` that are not vcrpy's, and not applied (to every request,
    /// or, where the runner applies them itself, to a request it did not judge).
    matchers_not_applied: Vec<String>,
    /// Whether the runner applied the suite's own matchers to the requests it judged.
    judged: bool,
    /// Each answer: the request, the interaction that answered it and how the tape's request
    /// differs from it.
    adopted: Vec<Adopted>,
    /// Requests no interaction answered, each once.
    unmatched: Vec<String>,
    /// Tapes that could not be read at all.
    errors: Vec<String>,
    /// Interactions that could not be read, and what was left out of the others.
    skipped: Vec<String>,
    /// Interactions no request asked for.
    unused_interactions: usize,
    /// The downloads its tapes answered (GETs of a host no route serves), each URL without
    /// credentials: stored as recordings of their hosts.
    downloads: Vec<String>,
}

/// One answer from a tape.
#[derive(Debug, Clone, Serialize)]
struct Adopted {
    /// Today's request, as the vendor would have seen it (without credentials).
    request: String,
    /// The tape that answered, and the interaction on it, from 1.
    tape: String,
    interaction: usize,
    /// What the tape's request differs in from today's, one difference a line.
    drift: Vec<String>,
    /// The `[keying] ignore` paths of the differences that look made afresh by the client on
    /// every run (ids): the replay after adopt will miss this request until the key leaves
    /// them out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    made_afresh: Vec<String>,
}

/// How a tape's request drifted from today's: one line a difference, and the ignore paths of
/// those that look made afresh on every run.
type Drift = (Vec<String>, Vec<String>);

/// A tape's answer to a request.
pub(crate) struct TapeAnswer {
    /// The vendor's URL the request stands for, without credentials.
    pub(crate) endpoint: String,
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Bytes,
}

impl TapeDeck {
    fn tests(&self) -> MutexGuard<'_, HashMap<String, Playing>> {
        // Every update is one call that cannot panic half-way; a poisoned lock is still whole.
        self.tests.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Begins `test` with its tapes (none named: every request it sends goes unanswered),
    /// reading them now: a tape that cannot be read is noted for the test.
    pub(crate) fn begin(&self, test: &str, set: Option<&TapeSet>, redactor: &Redactor) {
        let set = set.cloned().unwrap_or_default();
        let match_on = MatchOn::parse(&set.match_on);
        let mut report = TapeReport {
            tapes: set.paths.clone(),
            match_on: match_on.names(),
            // A judging runner applies them; what it did not judge is noted as it comes.
            matchers_not_applied: match set.judged {
                true => Vec::new(),
                false => match_on.unknown.clone(),
            },
            judged: set.judged,
            ..TapeReport::default()
        };
        let mut slots = Vec::new();
        let mut present = false;
        for (tape_index, tape) in set.paths.iter().enumerate() {
            let read = match set.documents.get(tape) {
                Some(serde_json::Value::String(why)) => Some(Err(why.clone())),
                Some(document) => {
                    Some(cassette_vcr::read_document(document).map_err(|e| e.to_string()))
                }
                None => read_tape(tape),
            };
            let Some(read) = read else {
                continue;
            };
            present = true;
            let interactions = match read {
                Ok(interactions) => interactions,
                Err(err) => {
                    let line = format!("cannot read the vcrpy tape {tape}: {err}");
                    report.errors.push(redactor.text(&line));
                    continue;
                }
            };
            for (i, interaction) in interactions.into_iter().enumerate() {
                let number = i + 1;
                match interaction {
                    Ok(interaction) if interaction.unreadable_uri.is_some() && !set.judged => {
                        // Its URL was replaced before recording: only a judge applying the
                        // same replacement to today's request can match it.
                        let why = interaction.unreadable_uri.unwrap_or_default();
                        report.skipped.push(redactor.text(&format!(
                            "{tape} interaction {number} cannot be read: {why}; skipped it"
                        )));
                    }
                    Ok(interaction) => {
                        for what in &interaction.left_out {
                            report
                                .skipped
                                .push(format!("{tape} interaction {number}: {what}"));
                        }
                        slots.push(Slot {
                            tape: tape.clone(),
                            tape_index,
                            number,
                            interaction,
                            played: false,
                        });
                    }
                    Err(err) => report.skipped.push(redactor.text(&format!(
                        "{tape} interaction {number} cannot be read: {err}; skipped it"
                    ))),
                }
            }
        }
        let playing = Playing {
            tapes: set.paths,
            present,
            filters: set.filters,
            match_on,
            judged: set.judged,
            slots,
            report,
        };
        self.tests().insert(test.to_owned(), playing);
    }

    /// What `test`'s tapes answered so far; `end` forgets the test.
    pub(crate) fn report(&self, test: &str, end: bool) -> Option<TapeReport> {
        let mut tests = self.tests();
        let playing = tests.get(test)?;
        let mut report = playing.report.clone();
        report.unused_interactions = playing.slots.iter().filter(|s| !s.played).count();
        if end {
            tests.remove(test);
        }
        Some(report)
    }

    /// The first unplayed interaction of `test`'s tapes that its `match_on` finds alike with
    /// `sent` (`shown`, as the vendor would have seen it, for messages), played: noted with
    /// the `drift` of its request. `Err` says why nothing answers, as the test's report does.
    fn play(
        &self,
        test: Option<&str>,
        sent: &Sent<'_>,
        shown: &str,
        drift: impl FnOnce(&Interaction) -> Drift,
    ) -> Result<Interaction, String> {
        let Some(test) = test else {
            return Err(format!("{shown} was sent outside any test"));
        };
        let mut tests = self.tests();
        let Some(playing) = tests.get_mut(test) else {
            return Err(format!(
                "{shown} was sent by test `{test}`, which was begun without its tapes"
            ));
        };
        let allowed = allowed_of(sent.headers).map_err(|why| format!("{shown}: {why}"))?;
        let (uri, headers) = filtered(&playing.filters, sent);
        let sent = Sent {
            uri: &uri,
            headers: &headers,
            ..*sent
        };
        if allowed.is_none() && playing.judged {
            // Sent where the runner could not judge it (another process, a client it does not
            // patch): matched here, without the suite's own matchers.
            let report = &mut playing.report;
            for name in &playing.match_on.unknown {
                if !report.matchers_not_applied.contains(name) {
                    report.matchers_not_applied.push(name.clone());
                }
            }
        }
        let found = playing.slots.iter_mut().find(|slot| {
            !slot.played
                && match &allowed {
                    Some(allowed) => allowed.contains(&(slot.tape_index, slot.number)),
                    None => playing.match_on.matches(&sent, &slot.interaction),
                }
        });
        if let Some(slot) = found {
            slot.played = true;
            let (drift, made_afresh) = drift(&slot.interaction);
            let adopted = Adopted {
                request: shown.to_owned(),
                tape: slot.tape.clone(),
                interaction: slot.number,
                drift,
                made_afresh,
            };
            let interaction = slot.interaction.clone();
            playing.report.adopted.push(adopted);
            return Ok(interaction);
        }
        let names = match playing.tapes.is_empty() {
            true => "(no tape)".to_owned(),
            false => playing.tapes.join(", "),
        };
        let on = match (&allowed, playing.match_on.unknown.is_empty()) {
            (Some(_), false) => format!(
                "{} as the suite's vcrpy settings match (its own matchers and \
                 before_record_request applied in the test process)",
                playing.match_on.names().join(", ")
            ),
            (Some(_), true) => format!(
                "{} as the suite's vcrpy settings match (its before_record_request applied in \
                 the test process)",
                playing.match_on.names().join(", ")
            ),
            (None, _) => playing.match_on.names().join(", "),
        };
        let mut why = if playing.present {
            format!("no unused interaction of {names} matches {shown} on {on}")
        } else {
            format!("no vcrpy tape for this test ({names} does not exist), asked for {shown}")
        };
        let unread = playing
            .report
            .skipped
            .iter()
            .filter(|line| line.ends_with("; skipped it"))
            .count();
        if unread > 0 {
            why.push_str(&format!(
                " ({unread} interaction(s) of its tapes could not be read)"
            ));
        }
        let unmatched = &mut playing.report.unmatched;
        // A client that retries what got no answer asks again: named once.
        if !unmatched.contains(&why) && unmatched.len() < KEPT {
            unmatched.push(why.clone());
        }
        Err(why)
    }
}

/// The interactions a runner named as matching a request ([`ADOPT_ALLOW_HEADER`]), as
/// `(tape index, interaction number)` pairs; `None` when it named none (it did not judge the
/// request). A header that is not of that form is an error naming it, never a guess.
fn allowed_of(headers: &[(String, String)]) -> Result<Option<Vec<(usize, usize)>>, String> {
    let Some((_, value)) = headers
        .iter()
        .find(|(name, _)| name.trim().eq_ignore_ascii_case(ADOPT_ALLOW_HEADER))
    else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let parsed = pair
            .split_once(':')
            .and_then(|(t, n)| Some((t.parse().ok()?, n.parse().ok()?)));
        match parsed {
            Some(pair) => out.push(pair),
            None => {
                return Err(format!(
                    "its {ADOPT_ALLOW_HEADER} header holds `{pair}`, not TAPE:NUMBER"
                ))
            }
        }
    }
    Ok(Some(out))
}

/// Today's URL and headers as vcrpy matches them: its `filter_query_parameters` and
/// `filter_headers` applied, as they were to the tape's request when it was recorded (a name
/// without a replacement is removed, else its value replaced).
fn filtered(filters: &TapeFilters, sent: &Sent<'_>) -> (url::Url, Vec<(String, String)>) {
    let mut uri = sent.uri.clone();
    if !filters.query.is_empty() {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (name, value) in sent.uri.query_pairs() {
            match filters.query.iter().find(|(n, _)| *n == name) {
                None => pairs.push((name.into_owned(), value.into_owned())),
                Some((_, Some(replacement))) => {
                    pairs.push((name.into_owned(), replacement.clone()))
                }
                Some((_, None)) => {}
            }
        }
        if pairs.is_empty() {
            uri.set_query(None);
        } else {
            uri.query_pairs_mut().clear().extend_pairs(pairs);
        }
    }
    let mut headers = Vec::with_capacity(sent.headers.len());
    for (name, value) in sent.headers {
        if name.trim().eq_ignore_ascii_case(ADOPT_ALLOW_HEADER) {
            continue; // the runner's, not the client's
        }
        match filters
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.trim()))
        {
            None => headers.push((name.clone(), value.clone())),
            Some((_, Some(replacement))) => headers.push((name.clone(), replacement.clone())),
            Some((_, None)) => {}
        }
    }
    (uri, headers)
}

/// A tape's interactions as read, each converted or its error.
type Read = Vec<Result<Interaction, cassette_vcr::Error>>;

/// A tape's interactions, `None` when there is no such file; `Err` says why it cannot be read.
fn read_tape(tape: &str) -> Option<Result<Read, String>> {
    let path = std::path::Path::new(tape);
    let meta = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => return None,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
        Err(err) => return Some(Err(err.to_string())),
    };
    if meta.len() > cassette_vcr::MAX_TAPE_BYTES {
        let err = cassette_vcr::Error::TooLarge {
            size: meta.len(),
            limit: cassette_vcr::MAX_TAPE_BYTES,
        };
        return Some(Err(err.to_string()));
    }
    Some(match std::fs::read_to_string(path) {
        Ok(text) => cassette_vcr::read(&text).map_err(|e| e.to_string()),
        Err(err) => Err(err.to_string()),
    })
}

/// Answers `request` (routed, its path spelled as its route's API spells it) from the tapes of
/// `test`, as the route's upstream would have been asked it.
pub(crate) fn answer(
    deck: &TapeDeck,
    route: &Route,
    request: &Request,
    test: Option<&str>,
    key: &KeyConfig,
    redactor: &Redactor,
) -> Result<TapeAnswer, Error> {
    let endpoint = crate::upstream::join_url(&route.base_url, &request.path, &request.query);
    let unanswered = |reason: String| Error::Unanswered {
        reason: redactor.text(&reason),
    };
    let uri = url::Url::parse(&endpoint)
        .map_err(|e| unanswered(format!("the route's URL {endpoint} does not parse: {e}")))?;
    let method = request.method.to_ascii_uppercase();
    let sent = Sent {
        method: &method,
        uri: &uri,
        headers: &request.headers,
        body: &request.body,
    };
    let endpoint = redactor.url(&endpoint);
    let shown = format!("{method} {endpoint}");
    let drift = |recorded: &Interaction| drift(route, request, recorded, key, redactor);
    let played = deck.play(test, &sent, &shown, drift).map_err(unanswered)?;
    Ok(TapeAnswer {
        endpoint,
        status: played.status,
        headers: played.response_headers,
        body: played.response_body,
    })
}

/// Answers a GET or HEAD of `url` (a host no route serves: a download) from the tapes of `test`, when
/// an unused interaction matches it by the test's `match_on`; noted as a download in its
/// report. `None` when none does (noted as unmatched, and the caller refuses it). `material`
/// is a download's key material (the engine's `download` profile), for the drift of a tape's
/// download: given by the caller, as the engine depends on this file and not the other way.
pub(crate) fn answer_download(
    deck: &TapeDeck,
    (method, url): (&str, &url::Url),
    headers: &[(String, String)],
    test: Option<&str>,
    redactor: &Redactor,
    material: impl Fn(&str, &url::Url) -> serde_json::Value,
) -> Option<TapeAnswer> {
    let sent = Sent {
        method,
        uri: url,
        headers,
        body: &[],
    };
    let endpoint = redactor.url(url.as_str());
    let shown = format!("{method} {endpoint}");
    let drift = |recorded: &Interaction| {
        // A tape whose URL was replaced is compared as if it named today's.
        let then = match recorded.unreadable_uri {
            Some(_) => url,
            None => &recorded.uri,
        };
        let before = material(&recorded.method, then);
        let after = material(method, url);
        let before = redacted_material(&before, redactor);
        let after = redacted_material(&after, redactor);
        let differences = cassette_keying::diff(&before, &after);
        let lines = difference_lines(&differences)
            .iter()
            .map(|line| redactor.text(line))
            .collect();
        (lines, Vec::new())
    };
    let played = deck.play(test, &sent, &shown, drift).ok()?;
    if let Some(test) = test {
        if let Some(playing) = deck.tests().get_mut(test) {
            playing.report.downloads.push(endpoint.clone());
        }
    }
    Some(TapeAnswer {
        endpoint,
        status: played.status,
        headers: played.response_headers,
        body: played.response_body,
    })
}

/// What the tape's request differs in from today's `request`, in the key's terms (each
/// material redacted as a recording would store it), one difference a line as a miss
/// explanation shows them, and the ignore paths of the differences made afresh on every run.
fn drift(
    route: &Route,
    request: &Request,
    recorded: &Interaction,
    key: &KeyConfig,
    redactor: &Redactor,
) -> Drift {
    // A tape whose URL was replaced before recording (adopt's judge matched it) is compared as
    // if it named today's path and query: nothing tells what it held.
    let (path, query) = match recorded.unreadable_uri {
        Some(_) => (request.path.clone(), request.query.clone()),
        None => {
            let path = route
                .local_path(&recorded.uri)
                .unwrap_or_else(|| recorded.uri.path().to_owned());
            let path = route.api_path(&path).into_owned();
            (path, recorded.uri.query().unwrap_or("").to_owned())
        }
    };
    let then = Request {
        target: request.target.clone(),
        method: recorded.method.clone(),
        path,
        query,
        headers: recorded.request_headers.clone(),
        body: recorded.request_body.clone(),
    };
    let before = redacted_material(&then.key(key).material, redactor);
    let after = redacted_material(&request.key(key).material, redactor);
    let differences: Vec<_> = cassette_keying::diff(&before, &after)
        .into_iter()
        .filter(|d| d.path != "system_sha256")
        .collect();
    let made_afresh = cassette_keying::made_afresh(&before, &after, &differences);
    let lines = difference_lines(&differences)
        .iter()
        .map(|line| redactor.text(line))
        .collect();
    (lines, made_afresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tape(dir: &std::path::Path, name: &str, text: &str) -> String {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }

    const CHAT: &str = "https://api.openai.com/v1/chat/completions";

    fn interaction(question: &str, answer: &str) -> String {
        format!(
            "- request:\n    body: '{{\"model\":\"m\",\"messages\":[{{\"role\":\"user\",\"content\":\"{question}\"}}]}}'\n    headers: {{Content-Type: [application/json]}}\n    method: POST\n    uri: {CHAT}\n  response:\n    body: {{string: '{{\"answer\":\"{answer}\"}}'}}\n    headers: {{Content-Type: [application/json]}}\n    status: {{code: 200, message: OK}}\n"
        )
    }

    fn ask(question: &str) -> Request {
        Request::post_json(
            "/v1/chat/completions",
            &serde_json::json!({"model": "m", "messages": [{"role": "user", "content": question}]}),
        )
    }

    fn play(deck: &TapeDeck, test: Option<&str>, request: &Request) -> Result<String, Error> {
        let route = Route::new("default", "https://api.openai.com");
        let redactor = Redactor::default();
        let answer = answer(
            deck,
            &route,
            request,
            test,
            &KeyConfig::default(),
            &redactor,
        )?;
        Ok(String::from_utf8_lossy(&answer.body).into_owned())
    }

    #[test]
    fn interactions_answer_once_each_in_order_and_drift_is_keyed() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "interactions:\n{}{}{}version: 1\n",
            interaction("Name a colour.", "teal"),
            interaction("Name a colour.", "amber"),
            interaction("Name a city.", "Paris")
        );
        let path = tape(dir.path(), "t.yaml", &text);
        let deck = TapeDeck::default();
        let set = TapeSet {
            paths: vec![path.clone()],
            ..TapeSet::default()
        };
        deck.begin("t", Some(&set), &Redactor::default());
        let colour = ask("Name a colour.");
        assert_eq!(
            play(&deck, Some("t"), &colour).unwrap(),
            r#"{"answer":"teal"}"#
        );
        assert_eq!(
            play(&deck, Some("t"), &colour).unwrap(),
            r#"{"answer":"amber"}"#
        );
        // vcrpy's default match_on reads no body: the third interaction answers.
        assert_eq!(
            play(&deck, Some("t"), &colour).unwrap(),
            r#"{"answer":"Paris"}"#
        );
        let err = play(&deck, Some("t"), &colour).unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "no unused interaction of {path} matches POST {CHAT} on method, scheme, host, \
                 port, path, query"
            )),
            "{err}"
        );
        let report = deck.report("t", true).unwrap();
        assert_eq!(report.adopted[0].drift, Vec::<String>::new());
        assert_eq!(
            report.adopted[2].drift,
            [r#"body.messages[0].content: "Name a city." -> "Name a colour.""#]
        );
        assert_eq!(report.unmatched.len(), 1);
        assert_eq!(report.unused_interactions, 0);
        assert!(deck.report("t", false).is_none(), "ended");
    }

    #[test]
    fn filters_and_documents_are_applied_as_vcrpy_applies_them() {
        // The tape holds the filtered request: the trace id replaced, the session dropped.
        let text = "interactions:\n- request:\n    body: '{}'\n    headers: {Content-Type: [application/json], X-Trace: [TRACE]}\n    method: POST\n    uri: https://api.openai.com/v1/chat/completions?a=1\n  response:\n    body: {string: 'from the file'}\n    headers: {}\n    status: {code: 200}\n";
        let dir = tempfile::tempdir().unwrap();
        let path = tape(dir.path(), "t.yaml", text);
        let document = serde_json::json!({"interactions": [{
            "request": {"method": "POST", "uri": "https://api.openai.com/v1/chat/completions?a=1",
                        "body": "{}", "headers": {"Content-Type": ["application/json"], "X-Trace": ["TRACE"]}},
            "response": {"status": {"code": 200}, "body": {"string": "from the document"}}}]});
        let mut request = ask("Hi");
        request.query = "a=1&session=s-123".into();
        request.headers.push(("x-trace".into(), "run-42".into()));
        let filters = TapeFilters {
            headers: vec![("X-Trace".into(), Some("TRACE".into()))],
            query: vec![("session".into(), None)],
        };
        let match_on = ["method", "query", "headers"].map(String::from).to_vec();
        let deck = TapeDeck::default();
        let unfiltered = TapeSet {
            paths: vec![path.clone()],
            match_on: match_on.clone(),
            ..TapeSet::default()
        };
        deck.begin("t", Some(&unfiltered), &Redactor::default());
        assert!(
            play(&deck, Some("t"), &request).is_err(),
            "vcrpy would not match"
        );
        let filtered = TapeSet {
            filters: filters.clone(),
            ..unfiltered.clone()
        };
        deck.begin("t", Some(&filtered), &Redactor::default());
        assert_eq!(play(&deck, Some("t"), &request).unwrap(), "from the file");
        // The suite's serializer's document is read instead of the file; its error is named.
        let documents = [(path.clone(), document)].into_iter().collect();
        let from_document = TapeSet {
            documents,
            ..filtered.clone()
        };
        deck.begin("t", Some(&from_document), &Redactor::default());
        assert_eq!(
            play(&deck, Some("t"), &request).unwrap(),
            "from the document"
        );
        let documents = [(path.clone(), serde_json::json!("it raised ValueError"))]
            .into_iter()
            .collect();
        deck.begin(
            "t",
            Some(&TapeSet {
                documents,
                ..filtered
            }),
            &Redactor::default(),
        );
        let report = deck.report("t", true).unwrap();
        assert_eq!(
            report.errors,
            [format!(
                "cannot read the vcrpy tape {path}: it raised ValueError"
            )]
        );
    }

    #[test]
    fn a_broken_interaction_is_skipped_and_a_broken_tape_named() {
        let dir = tempfile::tempdir().unwrap();
        let good = interaction("Hi", "hello");
        let broken = "- request: {method: POST, uri: 'https://api.openai.com/v1/chat/completions', body: '{}'}\n  response: {status: {code: 200}, headers: {content-encoding: [zstd]}, body: {string: x}}\n";
        let tape_path = tape(
            dir.path(),
            "t.yaml",
            &format!("interactions:\n{broken}{good}version: 1\n"),
        );
        let hostile = tape(dir.path(), "h.yaml", &"interactions: [".repeat(5000));
        let missing = dir.path().join("none.yaml").to_string_lossy().into_owned();
        let deck = TapeDeck::default();
        let set = TapeSet {
            paths: vec![tape_path.clone(), hostile.clone(), missing],
            match_on: vec!["method".into(), "body".into(), "custom".into()],
            ..TapeSet::default()
        };
        deck.begin("t", Some(&set), &Redactor::default());
        assert_eq!(
            play(&deck, Some("t"), &ask("Hi")).unwrap(),
            r#"{"answer":"hello"}"#
        );
        let err = play(&deck, Some("t"), &ask("Bye")).unwrap_err().to_string();
        assert!(
            err.contains("(1 interaction(s) of its tapes could not be read)"),
            "{err}"
        );
        let report = deck.report("t", false).unwrap();
        assert_eq!(report.adopted[0].interaction, 2);
        assert_eq!(report.matchers_not_applied, ["custom"]);
        assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
        assert!(
            report.skipped[0].starts_with(&format!(
                "{tape_path} interaction 1 cannot be read: the answer is zstd-encoded"
            )),
            "{:?}",
            report.skipped
        );
        assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
        assert!(
            report.errors[0].starts_with(&format!(
                "cannot read the vcrpy tape {hostile}: not a vcrpy cassette"
            )),
            "{:?}",
            report.errors
        );
        // Outside any test, or in a test begun without tapes: no answer.
        assert!(play(&deck, None, &ask("Hi"))
            .unwrap_err()
            .to_string()
            .contains("outside any test"));
        deck.begin("bare", None, &Redactor::default());
        let err = play(&deck, Some("bare"), &ask("Hi"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no vcrpy tape for this test ((no tape) does not exist)"),
            "{err}"
        );
    }

    #[test]
    fn a_runner_judging_the_suites_own_matchers_picks_the_interaction() {
        // Two tapes: the suite's own matcher (applied by the runner) lets only the second
        // tape's first interaction and the first tape's second answer; the built-in matchers
        // alone would take the first tape's first.
        let dir = tempfile::tempdir().unwrap();
        let first = tape(
            dir.path(),
            "a.yaml",
            &format!(
                "interactions:\n{}{}version: 1\n",
                interaction("Hi", "one"),
                interaction("Hi", "two")
            ),
        );
        let second = tape(
            dir.path(),
            "b.yaml",
            &format!("interactions:\n{}version: 1\n", interaction("Hi", "three")),
        );
        let set = TapeSet {
            paths: vec![first, second],
            match_on: vec!["method".into(), "probe_shape".into()],
            judged: true,
            ..TapeSet::default()
        };
        let deck = TapeDeck::default();
        deck.begin("t", Some(&set), &Redactor::default());
        let judged = |allow: &str| {
            let mut request = ask("Hi");
            request
                .headers
                .push((ADOPT_ALLOW_HEADER.into(), allow.into()));
            request
        };
        assert_eq!(
            play(&deck, Some("t"), &judged("1:1, 0:2")).unwrap(),
            r#"{"answer":"two"}"#
        );
        assert_eq!(
            play(&deck, Some("t"), &judged("1:1,0:2")).unwrap(),
            r#"{"answer":"three"}"#
        );
        let report = deck.report("t", false).unwrap();
        assert!(report.judged && report.matchers_not_applied.is_empty());
        // Nothing left that the runner allows: unanswered, saying how it was matched.
        let err = play(&deck, Some("t"), &judged("1:1,0:2"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("on method, probe_shape as the suite's vcrpy settings match"),
            "{err}"
        );
        assert!(play(&deck, Some("t"), &judged("")).is_err(), "none allowed");
        // A header that is not TAPE:NUMBER is named, never guessed at.
        let err = play(&deck, Some("t"), &judged("0:1,first"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("holds `first`, not TAPE:NUMBER"), "{err}");
        // A request the runner did not judge is matched here, and the report says the suite's
        // matcher was not applied to it.
        assert_eq!(
            play(&deck, Some("t"), &ask("Hi")).unwrap(),
            r#"{"answer":"one"}"#
        );
        let report = deck.report("t", true).unwrap();
        assert_eq!(report.matchers_not_applied, ["probe_shape"]);
    }

    #[test]
    fn an_id_made_afresh_is_named_with_its_ignore_path() {
        let body = |id: &str| {
            serde_json::json!({"model": "m", "messages": [
                {"role": "tool", "tool_call_id": id, "content": "42"}]})
        };
        let recorded = body("call_ec239e630d2f4ef6b1b7e1e9e4eccd58").to_string();
        let text = format!(
            "interactions:\n- request:\n    body: '{recorded}'\n    headers: {{Content-Type: [application/json]}}\n    method: POST\n    uri: {CHAT}\n  response:\n    body: {{string: ok}}\n    headers: {{}}\n    status: {{code: 200}}\nversion: 1\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let set = TapeSet {
            paths: vec![tape(dir.path(), "t.yaml", &text)],
            ..TapeSet::default()
        };
        let deck = TapeDeck::default();
        deck.begin("t", Some(&set), &Redactor::default());
        let today = Request::post_json(
            "/v1/chat/completions",
            &body("call_4274a5ec758943acbb1b30e626e326d0"),
        );
        assert_eq!(play(&deck, Some("t"), &today).unwrap(), "ok");
        let report = deck.report("t", true).unwrap();
        assert_eq!(
            report.adopted[0].made_afresh,
            ["$.messages[*].tool_call_id"]
        );
    }
}
