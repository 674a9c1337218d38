//! The failure text of a test: what a test runner's helper prints when cassette fails a test
//! (a replay miss with what differs from the nearest recording, an error, requests that
//! bypassed the base URL and were refused, recordings a strict test no longer asks for), one
//! line each. The proxy renders it here for each test it keeps a tally of, and the pytest
//! plugin and the vitest and jest helpers print the lines as they are, so every runner says
//! the same words.

/// What to do about requests to a host no route serves and no allow-list names: `cassette
/// exec`'s bypass report and every runner's failure text say the same words.
pub const UNROUTED_HOST_ADVICE: &str = "point its client at the proxy with a route ([routes.NAME]), or allow it: [bypass] allow in cassette.toml";

/// A miss during a test.
#[derive(Debug, Clone, Copy)]
pub struct Missed<'a> {
    /// The key that missed.
    pub key: &'a str,
    /// The request in a few words (`POST /v1/chat/completions (target default, model m)`).
    pub request: &'a str,
    /// The one-line summary of what differs from the nearest recording.
    pub summary: &'a str,
    /// What differs, one difference a line (long prompts as a word diff).
    pub explanation: &'a [String],
}

/// A host whose requests bypassed the base URL during a test and were refused.
#[derive(Debug, Clone, Copy)]
pub struct Refused<'a> {
    /// `host:port`.
    pub host: &'a str,
    /// How many requests were refused.
    pub requests: u64,
}

/// What a test did that fails it, as its failure text lists it.
#[derive(Debug, Clone, Default)]
pub struct Problems<'a> {
    /// The misses explained, in order.
    pub missed: Vec<Missed<'a>>,
    /// Misses besides those, counted but not kept with their explanation.
    pub more_misses: u64,
    /// How to record what missed, in the embedder's terms (a setting, a command line); the
    /// library's own words when it names none.
    pub record: Option<&'a str>,
    /// Errors, each as the client was told it.
    pub failed: Vec<&'a str>,
    /// Hosts whose requests bypassed the base URL and were refused.
    pub refused: Vec<Refused<'a>>,
    /// Recordings the test made in an earlier run and did not ask for in this one.
    pub unused: &'a [String],
}

impl Problems<'_> {
    /// Whether nothing fails the test.
    pub fn is_empty(&self) -> bool {
        self.missed.is_empty()
            && self.more_misses == 0
            && self.failed.is_empty()
            && self.refused.is_empty()
            && self.unused.is_empty()
    }
}

/// The failure text, one line each; empty when nothing fails the test. Lines that belong to
/// the one before are indented.
pub fn lines(problems: &Problems<'_>) -> Vec<String> {
    let mut lines = Vec::new();
    for miss in &problems.missed {
        lines.push(format!(
            "cassette miss: no recording for {} (key {})",
            miss.request, miss.key
        ));
        if !miss.summary.is_empty() {
            lines.push(format!("  {}", miss.summary));
        }
        // Each difference a line, unless the summary said it all (one short difference).
        let explanation = miss.explanation;
        if explanation.len() > 1
            || explanation
                .iter()
                .any(|l| !miss.summary.contains(l.as_str()))
        {
            lines.extend(explanation.iter().map(|line| format!("    {line}")));
        }
    }
    if problems.more_misses > 0 {
        lines.push(if problems.missed.is_empty() {
            format!("cassette miss: {} more misses", problems.more_misses)
        } else {
            format!("  ... and {} more misses", problems.more_misses)
        });
    }
    if !problems.missed.is_empty() || problems.more_misses > 0 {
        let record = match problems.record {
            Some(how) => format!("record it with {how}"),
            None => "record it in record or auto mode".to_owned(),
        };
        lines.push(format!(
            "  (replay never calls the vendor: {record}, which calls the vendor with your key)"
        ));
    }
    for failure in &problems.failed {
        lines.push(format!("cassette error: {failure}"));
    }
    for refused in &problems.refused {
        lines.push(format!(
            "cassette: {} request(s) to {} bypassed the base URL and were refused (replay never \
             connects anywhere): the client has a hard-coded URL or reads a variable cassette \
             does not set; give it the proxy's base URL (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, \
             ...: see docs/proxy.md); a host that is not an LLM API: {UNROUTED_HOST_ADVICE}",
            refused.requests, refused.host
        ));
    }
    if !problems.unused.is_empty() {
        let keys: Vec<&str> = problems
            .unused
            .iter()
            .map(|key| key.get(..16).unwrap_or(key))
            .collect();
        lines.push(format!(
            "cassette strict: {} recording(s) this test made were not asked for: {} (the test \
             changed, or the recordings are stale: re-record it, or `cassette gc` them)",
            problems.unused.len(),
            keys.join(", ")
        ));
    }
    lines
}

/// A miss in one line, for a runner's list of the tests that failed:
/// `POST /v1/chat/completions (target default, model m): The nearest recording, ...`.
pub fn headline(miss: &Missed<'_>) -> String {
    format!("{}: {}", miss.request, miss.summary)
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn miss<'a>(summary: &'a str, explanation: &'a [String]) -> Missed<'a> {
        Missed {
            key: "ab12",
            request: "POST /v1/chat/completions (target default, model m)",
            summary,
            explanation,
        }
    }

    #[test]
    fn a_miss_is_explained_a_difference_a_line_unless_its_summary_says_it_all() {
        let one = ["body.temperature: 0 -> 0.7".to_owned()];
        let said = "The nearest recording, 0123, differs in: body.temperature: 0 -> 0.7.";
        let lines = lines(&Problems {
            missed: vec![miss(said, &one)],
            ..Problems::default()
        });
        assert_eq!(
            lines,
            [
                "cassette miss: no recording for POST /v1/chat/completions (target default, model m) (key ab12)",
                "  The nearest recording, 0123, differs in: body.temperature: 0 -> 0.7.",
                "  (replay never calls the vendor: record it in record or auto mode, which calls the vendor with your key)",
            ]
        );
        let two = ["body.a: 1 -> 2".to_owned(), "body.b: 1 -> 2".to_owned()];
        let lines = super::lines(&Problems {
            missed: vec![miss(
                "The nearest recording differs in: body.a, body.b.",
                &two,
            )],
            more_misses: 3,
            record: Some("the record mode"),
            ..Problems::default()
        });
        assert_eq!(lines[2..4], ["    body.a: 1 -> 2", "    body.b: 1 -> 2"]);
        assert_eq!(lines[4], "  ... and 3 more misses");
        assert_eq!(
            lines[5],
            "  (replay never calls the vendor: record it with the record mode, which calls the vendor with your key)"
        );
    }

    #[test]
    fn errors_bypasses_and_unused_recordings_each_get_a_line() {
        let unused = ["0123456789abcdef0123".to_owned(), "fedcba".to_owned()];
        let problems = Problems {
            failed: vec!["upstream unreachable"],
            refused: vec![Refused {
                host: "api.openai.com:443",
                requests: 2,
            }],
            unused: &unused,
            ..Problems::default()
        };
        assert!(!problems.is_empty());
        let lines = lines(&problems);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0], "cassette error: upstream unreachable");
        assert!(lines[1].starts_with(
            "cassette: 2 request(s) to api.openai.com:443 bypassed the base URL and were refused"
        ));
        // A host that is no LLM API is allowed as exec's report says (issue 34, item 9).
        assert!(
            lines[1].ends_with("or allow it: [bypass] allow in cassette.toml"),
            "{lines:?}"
        );
        assert!(lines[2].starts_with(
            "cassette strict: 2 recording(s) this test made were not asked for: 0123456789abcdef, fedcba ("
        ));
        assert!(super::lines(&Problems::default()).is_empty());
        assert!(Problems::default().is_empty());
    }

    #[test]
    fn misses_only_counted_still_say_how_to_record() {
        let lines = lines(&Problems {
            more_misses: 4,
            ..Problems::default()
        });
        assert_eq!(lines[0], "cassette miss: 4 more misses");
        assert!(lines[1].starts_with("  (replay never calls the vendor: "));
    }

    #[test]
    fn the_headline_is_the_request_and_the_summary() {
        assert_eq!(
            headline(&miss("No recording exists.", &[])),
            "POST /v1/chat/completions (target default, model m): No recording exists."
        );
        assert_eq!(
            headline(&Missed {
                request: "an MCP request",
                summary: "",
                ..miss("", &[])
            }),
            "an MCP request:"
        );
    }
}
