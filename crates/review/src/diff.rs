//! The review of two sets of recordings as data (`cassette diff`, and a suite run live against
//! its tapes): each recording as a review shows it, how the two sides were paired, what differs
//! in their requests, and the verdict on their answers, most severe first. The pages and
//! summaries of [`crate::html`] and [`crate::markdown`] render it.

use crate::render::{difference_line, difference_pieces, Piece, SHOWN_DIFFERENCES};
use crate::verdict::{Drift, Facts, Judged};
use cassette_keying::{Difference, Key};
use cassette_tape::Cassette;

/// One recording as a review shows it.
#[derive(Debug, Clone)]
pub struct Recording {
    /// Its key.
    pub key: Key,
    /// `POST /v1/chat/completions`, or `(unreadable)`.
    pub request: String,
    /// The route (key target).
    pub route: String,
    /// The model the request asked for.
    pub requested_model: Option<String>,
    /// When it was recorded.
    pub recorded_at: String,
    /// What the answer says, or why the cassette could not be read.
    pub facts: Result<Facts, String>,
}

impl Recording {
    /// A recording read from a cassette (or why it could not be), its answer read by `facts`
    /// (see [`Facts::of`]).
    pub fn of(
        key: &Key,
        cassette: &Result<Cassette, String>,
        facts: impl FnOnce(&Cassette) -> Facts,
    ) -> Recording {
        match cassette {
            Ok(c) => Recording {
                key: key.clone(),
                request: format!("{} {}", c.request.method, c.request.path),
                route: c.target.clone(),
                requested_model: c.requested_model().map(str::to_owned),
                recorded_at: c.recorded_at.clone(),
                facts: Ok(facts(c)),
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
    pub fn describe(&self) -> String {
        match &self.requested_model {
            Some(model) => format!("{}, {model}", self.request),
            None => self.request.clone(),
        }
    }
}

/// How the two sides of a reviewed item were matched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pairing {
    /// One key in both sets (and no re-record replaced it).
    SameKey,
    /// A re-record: a key only the new set has, paired with the recording of the old set it
    /// replaces, whether or not the new set still holds that one.
    Rerecorded {
        /// How far apart the two requests are (as a miss weighs it).
        distance: f64,
        /// What matched them.
        by: PairedBy,
        /// Whether the new set still holds the old recording.
        old: OldTape,
    },
    /// A key only one set has, paired with none.
    Alone,
}

/// What matched a re-record with the recording it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairedBy {
    /// Both were recorded by the same test (or suite case), as their metadata names it, at the
    /// same route and path.
    SameTest,
    /// The old one is the recording a replay miss of the new request would name as nearest.
    Nearest,
}

/// Where the replaced recording of a re-record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OldTape {
    /// Only the old set has it (deleted, or a store written afresh).
    Gone,
    /// The new set still holds it: a re-record writes the new key beside the old one, so the
    /// old one stays until it is deleted. Stale, unless something else still replays it.
    StillInB,
}

/// One line of the request difference of a pair: the miss explanation's line, and the same as
/// pieces for renderers that mark changes themselves.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestLine {
    /// Where (`body.messages[0].content`, `system`).
    pub path: String,
    /// What changed, as pieces.
    pub pieces: Vec<Piece>,
    /// The whole line as the miss explanation writes it.
    pub text: String,
}

/// One reviewed item: a shared key, a pair, or a key only one set has.
#[derive(Debug, Clone)]
pub struct Reviewed {
    /// The verdict and why.
    pub judged: Judged,
    /// How the sides were matched.
    pub pairing: Pairing,
    /// The old recording (A), when there is one.
    pub old: Option<Recording>,
    /// The new recording (B), when there is one.
    pub new: Option<Recording>,
    /// What differs in the request (pairs only).
    pub request: Vec<RequestLine>,
}

impl RequestLine {
    /// The request differences of a pair as a miss explains them: the first
    /// [`SHOWN_DIFFERENCES`], then how many more.
    pub fn of_differences(differences: &[Difference]) -> Vec<RequestLine> {
        let mut lines: Vec<RequestLine> = differences
            .iter()
            .take(SHOWN_DIFFERENCES)
            .map(|d| RequestLine {
                path: d.path.clone(),
                pieces: difference_pieces(d),
                text: difference_line(d),
            })
            .collect();
        if differences.len() > SHOWN_DIFFERENCES {
            let more = format!(
                "and {} more differences",
                differences.len() - SHOWN_DIFFERENCES
            );
            lines.push(RequestLine {
                path: String::new(),
                pieces: vec![Piece::Text(more.clone())],
                text: more,
            });
        }
        lines
    }
}

impl Reviewed {
    /// The verdict.
    pub fn drift(&self) -> Drift {
        self.judged.drift
    }

    /// The key it is listed under: the new one when there is one.
    pub fn key(&self) -> &Key {
        match (&self.new, &self.old) {
            (Some(r), _) | (None, Some(r)) => &r.key,
            (None, None) => unreachable!("a reviewed item has at least one side"),
        }
    }

    /// Whether anything at all differs (a shared key whose usage alone changed does).
    pub fn differs(&self) -> bool {
        self.drift() != Drift::Same
            || !self.judged.notes.is_empty()
            || self.pairing != Pairing::SameKey
    }
}

/// What `cassette diff` found, most severe first.
#[derive(Debug, Clone)]
pub struct DiffReview {
    /// The old set (A), as named.
    pub a: String,
    /// The new set (B), as named.
    pub b: String,
    /// Cassettes in A and in B.
    pub sizes: (usize, usize),
    /// Every item, sorted by severity, then key.
    pub items: Vec<Reviewed>,
}

impl DiffReview {
    /// Sorts the items most severe first, then by key, so a report is stable.
    pub fn new(a: String, b: String, sizes: (usize, usize), mut items: Vec<Reviewed>) -> Self {
        items.sort_by(|x, y| y.drift().cmp(&x.drift()).then_with(|| x.key().cmp(y.key())));
        DiffReview { a, b, sizes, items }
    }

    /// How many items got `drift`.
    pub fn count(&self, drift: Drift) -> usize {
        self.items.iter().filter(|i| i.drift() == drift).count()
    }

    /// How many re-records were paired with the recording they replace.
    pub fn pairs(&self) -> usize {
        self.items
            .iter()
            .filter(|i| matches!(i.pairing, Pairing::Rerecorded { .. }))
            .count()
    }

    /// How many keys both sets hold that no re-record replaced.
    pub fn shared(&self) -> usize {
        self.items
            .iter()
            .filter(|i| i.pairing == Pairing::SameKey)
            .count()
    }

    /// The replaced recordings the new set still holds (stale), by key.
    pub fn replaced(&self) -> Vec<&Key> {
        self.items
            .iter()
            .filter(|i| {
                matches!(
                    i.pairing,
                    Pairing::Rerecorded {
                        old: OldTape::StillInB,
                        ..
                    }
                )
            })
            .filter_map(|i| i.old.as_ref().map(|r| &r.key))
            .collect()
    }

    /// `2 changed, 0 removed, 1 added, 3 reworded, 40 same`.
    pub fn counts_line(&self) -> String {
        Drift::BY_SEVERITY
            .iter()
            .map(|d| format!("{} {}", self.count(*d), d.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
