//! Reviewing what changed, for people: drift verdicts of re-recorded answers (`verdict`), the
//! review of `cassette diff` as data (here), its HTML pages and those of `cassette run`
//! (`html`), Markdown summaries for pull requests (`markdown`), and where they are written
//! (`output`: files written whole, the GitHub step summary appended to). Everything a review
//! shows has been through the configured redaction first (`redact`).

pub(crate) mod html;
pub(crate) mod markdown;
pub(crate) mod output;
pub(crate) mod redact;
pub(crate) mod verdict;

use cassette_recorder::miss::Piece;
use cassette_recorder::Cassette;
use cassette_store::Key;
pub(crate) use verdict::{Drift, Facts, FailOn, Judged};

/// One recording as a review shows it.
#[derive(Debug, Clone)]
pub(crate) struct Recording {
    /// Its key.
    pub(crate) key: Key,
    /// `POST /v1/chat/completions`, or `(unreadable)`.
    pub(crate) request: String,
    /// The route (key target).
    pub(crate) route: String,
    /// The model the request asked for.
    pub(crate) requested_model: Option<String>,
    /// When it was recorded.
    pub(crate) recorded_at: String,
    /// What the answer says, or why the cassette could not be read.
    pub(crate) facts: Result<Facts, String>,
}

impl Recording {
    /// A recording read from a cassette (or why it could not be).
    pub(crate) fn of(key: &Key, cassette: &Result<Cassette, String>) -> Recording {
        match cassette {
            Ok(c) => Recording {
                key: key.clone(),
                request: format!("{} {}", c.request.method, c.request.path),
                route: c.target.clone(),
                requested_model: c.requested_model().map(str::to_owned),
                recorded_at: c.recorded_at.clone(),
                facts: Ok(Facts::of(c)),
            },
            Err(why) => Recording {
                key: key.clone(),
                request: "(unreadable)".to_owned(),
                route: String::new(),
                requested_model: None,
                recorded_at: String::new(),
                facts: Err(why.clone()),
            },
        }
    }

    /// `POST /v1/chat/completions, m`: the request in a few words.
    pub(crate) fn describe(&self) -> String {
        match &self.requested_model {
            Some(model) => format!("{}, {model}", self.request),
            None => self.request.clone(),
        }
    }
}

/// How the two sides of a reviewed item were matched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Pairing {
    /// One key in both sets.
    SameKey,
    /// A key only the old set has, paired with the nearest key only the new set has.
    Nearest {
        /// How far apart the two requests are (as a miss weighs it).
        distance: f64,
    },
    /// A key only one set has, paired with none.
    Alone,
}

/// One line of the request difference of a pair: the miss explanation's line, and the same as
/// pieces for renderers that mark changes themselves.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RequestLine {
    /// Where (`body.messages[0].content`, `system`).
    pub(crate) path: String,
    /// What changed, as pieces.
    pub(crate) pieces: Vec<Piece>,
    /// The whole line as the miss explanation writes it.
    pub(crate) text: String,
}

/// One reviewed item: a shared key, a pair, or a key only one set has.
#[derive(Debug, Clone)]
pub(crate) struct Reviewed {
    /// The verdict and why.
    pub(crate) judged: Judged,
    /// How the sides were matched.
    pub(crate) pairing: Pairing,
    /// The old recording (A), when there is one.
    pub(crate) old: Option<Recording>,
    /// The new recording (B), when there is one.
    pub(crate) new: Option<Recording>,
    /// What differs in the request (pairs only).
    pub(crate) request: Vec<RequestLine>,
}

impl Reviewed {
    /// The verdict.
    pub(crate) fn drift(&self) -> Drift {
        self.judged.drift
    }

    /// The key it is listed under: the new one when there is one.
    pub(crate) fn key(&self) -> &Key {
        match (&self.new, &self.old) {
            (Some(r), _) | (None, Some(r)) => &r.key,
            (None, None) => unreachable!("a reviewed item has at least one side"),
        }
    }

    /// Whether anything at all differs (a shared key whose usage alone changed does).
    pub(crate) fn differs(&self) -> bool {
        self.drift() != Drift::Same
            || !self.judged.notes.is_empty()
            || self.pairing != Pairing::SameKey
    }
}

/// What `cassette diff` found, most severe first.
#[derive(Debug, Clone)]
pub(crate) struct DiffReview {
    /// The old set (A), as named.
    pub(crate) a: String,
    /// The new set (B), as named.
    pub(crate) b: String,
    /// Cassettes in A and in B.
    pub(crate) sizes: (usize, usize),
    /// Every item, sorted by severity, then key.
    pub(crate) items: Vec<Reviewed>,
}

impl DiffReview {
    /// Sorts the items most severe first, then by key, so a report is stable.
    pub(crate) fn new(
        a: String,
        b: String,
        sizes: (usize, usize),
        mut items: Vec<Reviewed>,
    ) -> Self {
        items.sort_by(|x, y| y.drift().cmp(&x.drift()).then_with(|| x.key().cmp(y.key())));
        DiffReview { a, b, sizes, items }
    }

    /// How many items got `drift`.
    pub(crate) fn count(&self, drift: Drift) -> usize {
        self.items.iter().filter(|i| i.drift() == drift).count()
    }

    /// How many pairs of a re-record were matched by their nearest request.
    pub(crate) fn pairs(&self) -> usize {
        self.items
            .iter()
            .filter(|i| matches!(i.pairing, Pairing::Nearest { .. }))
            .count()
    }

    /// `2 changed, 0 removed, 1 added, 3 reworded, 40 same`.
    pub(crate) fn counts_line(&self) -> String {
        Drift::BY_SEVERITY
            .iter()
            .map(|d| format!("{} {}", self.count(*d), d.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
