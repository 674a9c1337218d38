//! Built-in credential shapes: `sk-...`, `AKIA...`, JWTs, `Bearer <token>` and the rest, found
//! wherever they appear in stored text and in `cassette verify` audits.

use super::{REDACTED, SECRET_GROUP};
use regex::bytes::Regex as BytesRegex;
use regex::{Captures, Regex, RegexSet};
use std::borrow::Cow;
use std::ops::Range;
use std::sync::LazyLock;

/// One credential-shaped match found by [`find_credentials`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CredentialMatch {
    /// Which shape matched, e.g. `openai_api_key` or `jwt`.
    pub pattern: &'static str,
    /// Byte offset of the secret in the audited bytes.
    pub offset: usize,
    /// Length of the secret in bytes.
    pub len: usize,
}

/// A known credential shape. `check` sees the secret part of a match and rejects look-alikes
/// the regex alone cannot (the regex crate has no look-around). A shape whose regex starts with
/// [`glued!`] also matches a secret glued right after a word character (`x_sk-proj-...`,
/// `1sk-...`, `xAKIA...`), where no word boundary is; `glued` then decides, on top of `check`,
/// whether the secret is random enough to be one (`disk-0123456789abcdefghij` is not), and a
/// glued match inside a long run of base64 is data, never a key ([`inside_base64`]).
struct ShapeDef {
    name: &'static str,
    regex: &'static str,
    check: fn(&str) -> bool,
    glued: fn(&str) -> bool,
}

fn always(_: &str) -> bool {
    true
}

/// For shapes that never match glued to a word (their regex has no `glue` group).
fn never(_: &str) -> bool {
    false
}

/// A random key has a digit, a capital and a small letter: words, version strings and
/// identifiers glued to a prefix mostly do not (`disk-0123456789abcdefghijklmnop`,
/// `risk-ant-colony-optimization-2024`).
fn random(secret: &str) -> bool {
    let has = |f: fn(&u8) -> bool| secret.bytes().any(|b| f(&b));
    has(u8::is_ascii_digit) && has(u8::is_ascii_uppercase) && has(u8::is_ascii_lowercase)
}

/// Letters of both cases: Hugging Face tokens are letters only.
fn cased(secret: &str) -> bool {
    let has = |f: fn(&u8) -> bool| secret.bytes().any(|b| f(&b));
    has(u8::is_ascii_uppercase) && has(u8::is_ascii_lowercase)
}

/// How much longer than a glued match the run of base64 characters around it may be: a key
/// glued to a short word (`my_key_sk-...`, `token=x1AKIA...`) stands alone, while one inside a
/// kilobyte of base64 (an image, an embedding) is a chance run of the data.
const GLUE_SLACK: usize = 64;

/// Whether the glued match `start..end` of `bytes` lies inside a longer run of base64
/// characters (standard or URL-safe alphabet, padding included) than a word and a key make.
fn inside_base64(bytes: &[u8], start: usize, end: usize) -> bool {
    let base64 =
        |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-');
    let before = bytes[..start]
        .iter()
        .rev()
        .take_while(|b| base64(b))
        .count();
    let after = bytes[end..].iter().take_while(|b| base64(b)).count();
    before + after > GLUE_SLACK
}

/// Hyphenated or underscored words (`sk-learn-compatible-estimator`) are prose, not keys: real
/// keys are random and carry digits or capitals.
fn not_prose(secret: &str) -> bool {
    let tail = secret.split_once('-').map_or(secret, |(_, t)| t);
    let segments: Vec<&str> = tail.split(['-', '_']).collect();
    let prose = segments.len() >= 2
        && segments
            .iter()
            .all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase()));
    !prose
}

/// A bearer token is random: it has a digit, or it is long and not made of words.
fn bearer_token(token: &str) -> bool {
    if token.bytes().any(|b| b.is_ascii_digit()) {
        return true;
    }
    let wordy = token
        .split(['-', '_', '.', '~', '+', '/'])
        .filter(|s| !s.is_empty())
        .count()
        >= 2;
    token.len() >= 24 && !wordy
}

/// A credential whose random part has a digit: `ek_` or similar prefixes are also common words.
fn has_digit(secret: &str) -> bool {
    secret.bytes().any(|b| b.is_ascii_digit())
}

/// `user:password` from a URL: a password that is already the redaction marker is not a secret.
fn url_password(userinfo: &str) -> bool {
    userinfo
        .split_once(':')
        .is_some_and(|(_, password)| !password.is_empty() && password != REDACTED)
}

/// What may come right before a credential: a word boundary, or the tail of an escape that glues
/// a letter or digit to it in stored text, where a word boundary is missing: `\n`, `\t`, `\r`,
/// `\b`, `\f` and `\uXXXX` in JSON held in a string (tool-call `arguments`, stream events, the
/// stored document itself as `cassette verify` reads it), `%XX` in URLs and forms. Escapes ending
/// in a non-word character (`\"`, `\/`, `\\`, `%`-less punctuation) already leave a boundary.
///
/// `(?-u:\b)` keeps the regexes on the fast DFA engines (a Unicode word boundary makes them fall
/// back on non-ASCII text); every shape is ASCII, so ASCII boundaries are what we mean.
macro_rules! left {
    () => {
        r"(?:(?-u:\b)|\\[nrtbf]|\\u[0-9A-Fa-f]{4}|%[0-9A-Fa-f]{2})"
    };
}

/// What [`left!`] allows, or a word character the secret is glued to, captured as `glue` so the
/// shape's `glued` check decides (see [`ShapeDef`]). The escapes come first: `\nsk-...` is an
/// escape before a key, not a key glued to an `n`.
macro_rules! glued {
    () => {
        r"(?:(?-u:\b)|\\[nrtbf]|\\u[0-9A-Fa-f]{4}|%[0-9A-Fa-f]{2}|(?P<glue>[A-Za-z0-9_]))"
    };
}

// The order is priority: more specific shapes first, `bearer` last, so an audit names the best
// match.
const SHAPES: &[ShapeDef] = &[
    ShapeDef {
        name: "private_key",
        regex: r"(?P<redact>-----BEGIN[A-Z ]{0,20}PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]{0,20}PRIVATE KEY-----|$))",
        check: always,
        glued: never,
    },
    ShapeDef {
        name: "jwt",
        regex: concat!(
            glued!(),
            r"(?P<redact>eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)"
        ),
        check: always,
        glued: random,
    },
    ShapeDef {
        name: "anthropic_api_key",
        regex: concat!(glued!(), r"(?P<redact>sk-ant-[A-Za-z0-9_-]{20,})"),
        check: always,
        glued: random,
    },
    ShapeDef {
        name: "openai_api_key",
        regex: concat!(glued!(), r"(?P<redact>sk-[A-Za-z0-9_-]{20,})"),
        check: not_prose,
        glued: random,
    },
    ShapeDef {
        name: "openai_ephemeral_key",
        regex: concat!(left!(), r"(?P<redact>ek_[A-Za-z0-9]{20,})(?-u:\b)"),
        check: has_digit,
        glued: never,
    },
    ShapeDef {
        name: "stripe_key",
        regex: concat!(
            glued!(),
            r"(?P<redact>[sr]k_(?:live|test)_[A-Za-z0-9]{16,})"
        ),
        check: always,
        glued: random,
    },
    ShapeDef {
        name: "aws_access_key_id",
        regex: concat!(glued!(), r"(?P<redact>(?:AKIA|ASIA)[0-9A-Z]{16})(?-u:\b)"),
        check: always,
        glued: always,
    },
    ShapeDef {
        name: "github_token",
        regex: concat!(
            glued!(),
            r"(?P<redact>(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}))"
        ),
        check: always,
        glued: random,
    },
    ShapeDef {
        name: "google_api_key",
        regex: concat!(glued!(), r"(?P<redact>AIza[0-9A-Za-z_-]{35,})"),
        check: always,
        glued: random,
    },
    ShapeDef {
        name: "slack_token",
        regex: concat!(glued!(), r"(?P<redact>xox[abprse]-[A-Za-z0-9-]{10,})"),
        check: always,
        glued: random,
    },
    ShapeDef {
        name: "huggingface_token",
        regex: concat!(glued!(), r"(?P<redact>hf_[A-Za-z0-9]{30,})(?-u:\b)"),
        check: always,
        glued: cased,
    },
    ShapeDef {
        name: "groq_api_key",
        regex: concat!(glued!(), r"(?P<redact>gsk_[A-Za-z0-9]{30,})"),
        check: always,
        glued: random,
    },
    ShapeDef {
        name: "xai_api_key",
        regex: concat!(glued!(), r"(?P<redact>xai-[A-Za-z0-9]{30,})"),
        check: always,
        glued: random,
    },
    // `scheme://user:password@host`: the userinfo goes, the scheme and host stay. A user alone
    // (`ssh://git@host`) is no secret; a token used as the user has a shape of its own. The
    // scheme may be missing (`//user:pw@host`, a scheme-relative URL) or glued to a word
    // (`x_https://...`), so it is not required: the `//` and the `@` after a colon are the shape.
    ShapeDef {
        name: "url_password",
        regex: r"//(?P<redact>[^\s/?#@:\\\x22'<>]*:[^\s/?#@\\\x22'<>]+)@",
        check: url_password,
        glued: never,
    },
    // The separator may be escaped or encoded too: `Bearer\u0020...`, `Bearer%20...`,
    // `Bearer+...` (a form-encoded space).
    ShapeDef {
        name: "bearer_token",
        regex: concat!(
            left!(),
            r"(?i-u:bearer)(?:\s|\\[nrt]|\\u0020|%20|\+)+(?P<redact>[A-Za-z0-9._~+/-]{16,}=*)"
        ),
        check: bearer_token,
        glued: never,
    },
];

struct Shapes {
    set: RegexSet,
    regexes: Vec<Regex>,
    bytes: Vec<BytesRegex>,
}

// The shape regexes are constants; `compiled_shapes_are_valid` (a unit test) compiles every one
// of them, so the `None` fallback below is unreachable in a tested build. If it ever were hit,
// the redactor degrades to name- and path-based rules rather than panicking.
static SHAPES_COMPILED: LazyLock<Option<Shapes>> = LazyLock::new(|| {
    let set = RegexSet::new(SHAPES.iter().map(|s| s.regex)).ok()?;
    let regexes = SHAPES
        .iter()
        .map(|s| Regex::new(s.regex).ok())
        .collect::<Option<Vec<_>>>()?;
    let bytes = SHAPES
        .iter()
        .map(|s| BytesRegex::new(s.regex).ok())
        .collect::<Option<Vec<_>>>()?;
    Some(Shapes {
        set,
        regexes,
        bytes,
    })
});
pub(super) fn redact_shapes(text: &str) -> Cow<'_, str> {
    let Some(shapes) = SHAPES_COMPILED.as_ref() else {
        return Cow::Borrowed(text);
    };
    // One pass over the text decides which shapes can match at all; most strings match none.
    let hits = shapes.set.matches(text);
    if !hits.matched_any() {
        return Cow::Borrowed(text);
    }
    let mut out = Cow::Borrowed(text);
    for i in hits.iter() {
        let (Some(def), Some(regex)) = (SHAPES.get(i), shapes.regexes.get(i)) else {
            continue;
        };
        let ranges = shape_matches(def, regex, &out);
        if ranges.is_empty() {
            continue;
        }
        let mut new = String::with_capacity(out.len());
        let mut last = 0;
        for range in ranges {
            new.push_str(&out[last..range.start]);
            new.push_str(REDACTED);
            last = range.end;
        }
        new.push_str(&out[last..]);
        out = Cow::Owned(new);
    }
    out
}

/// The byte ranges of every credential shape in `text` (the secret part of each match), in no
/// particular order; they may overlap.
pub(super) fn shape_ranges(text: &str) -> Vec<Range<usize>> {
    let Some(shapes) = SHAPES_COMPILED.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for i in shapes.set.matches(text).iter() {
        let (Some(def), Some(regex)) = (SHAPES.get(i), shapes.regexes.get(i)) else {
            continue;
        };
        out.extend(shape_matches(def, regex, text));
    }
    out
}

/// The secrets of one shape in `text`, in order and apart: each match's `redact` group, when
/// the shape's checks accept it.
fn shape_matches(def: &ShapeDef, regex: &Regex, text: &str) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for caps in regex.captures_iter(text) {
        let Some(secret) = caps.name(SECRET_GROUP).or_else(|| caps.get(0)) else {
            continue;
        };
        let glue = caps.name("glue").map(|g| g.start());
        let accepted = accepts(def, secret.as_str(), glue, text.as_bytes(), secret.end());
        let apart = out.last().is_none_or(|last| last.end <= secret.start());
        if accepted && apart && !secret.is_empty() {
            out.push(secret.range());
        }
    }
    out
}

/// Whether a match of `def` whose secret is `secret` (ending at `end` in `all`) is one: the
/// shape's check, and for a match glued to a word (`glue`: where the word character is) the
/// shape's `glued` check, outside a long run of base64.
fn accepts(def: &ShapeDef, secret: &str, glue: Option<usize>, all: &[u8], end: usize) -> bool {
    if !(def.check)(secret) {
        return false;
    }
    match glue {
        None => true,
        Some(start) => (def.glued)(secret) && !inside_base64(all, start, end),
    }
}

/// The ranges of the non-empty matches (or their `redact` group) accepted by `check`.
pub(super) fn match_ranges(
    regex: &Regex,
    grouped: bool,
    text: &str,
    check: impl Fn(&str) -> bool,
) -> Vec<Range<usize>> {
    regex
        .captures_iter(text)
        .filter_map(|caps| secret_range(&caps, grouped))
        .filter(|&(start, end)| start < end && check(&text[start..end]))
        .map(|(start, end)| start..end)
        .collect()
}

/// Replaces each match (or its `redact` group) accepted by `check`; `Cow::Borrowed` when none
/// was replaced. Empty matches are skipped so no pattern can sprinkle markers between letters.
pub(super) fn replace_matches<'a>(
    regex: &Regex,
    grouped: bool,
    text: &'a str,
    check: impl Fn(&str) -> bool,
) -> Cow<'a, str> {
    let mut out = String::new();
    let mut last = 0;
    for caps in regex.captures_iter(text) {
        let Some(m) = secret_range(&caps, grouped) else {
            continue;
        };
        if m.0 == m.1 || m.0 < last || !check(&text[m.0..m.1]) {
            continue;
        }
        out.push_str(&text[last..m.0]);
        out.push_str(REDACTED);
        last = m.1;
    }
    if last == 0 && out.is_empty() {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[last..]);
    Cow::Owned(out)
}

fn secret_range(caps: &Captures<'_>, grouped: bool) -> Option<(usize, usize)> {
    let m = if grouped {
        caps.name(SECRET_GROUP).or_else(|| caps.get(0))
    } else {
        caps.get(0)
    }?;
    Some((m.start(), m.end()))
}

/// For `cassette verify`: every credential-shaped match in stored bytes, by byte offset (the
/// shapes are ASCII, so the bytes are searched as they are; invalid UTF-8 is skipped over, not
/// converted). Overlapping matches are reported once, under the most specific shape. Text
/// already replaced with [`REDACTED`] never matches.
pub fn find_credentials(bytes: &[u8]) -> Vec<CredentialMatch> {
    let Some(shapes) = SHAPES_COMPILED.as_ref() else {
        return Vec::new();
    };
    let mut found: Vec<(usize, usize, usize, &'static str)> = Vec::new();
    for (i, (def, regex)) in SHAPES.iter().zip(&shapes.bytes).enumerate() {
        for caps in regex.captures_iter(bytes) {
            let Some(m) = caps.name(SECRET_GROUP).or_else(|| caps.get(0)) else {
                continue;
            };
            let glue = caps.name("glue").map(|g| g.start());
            let secret = String::from_utf8_lossy(m.as_bytes());
            if m.start() == m.end() || !accepts(def, &secret, glue, bytes, m.end()) {
                continue;
            }
            found.push((m.start(), m.end(), i, def.name));
        }
    }
    found.sort_by_key(|&(start, end, priority, _)| (start, priority, std::cmp::Reverse(end)));
    let mut out: Vec<CredentialMatch> = Vec::new();
    let mut covered_to = 0;
    for (start, end, _, pattern) in found {
        if start < covered_to {
            continue;
        }
        covered_to = end;
        out.push(CredentialMatch {
            pattern,
            offset: start,
            len: end - start,
        });
    }
    out
}

/// The names of the built-in credential shapes, in priority order (for docs and help texts).
pub fn credential_shape_names() -> impl Iterator<Item = &'static str> {
    SHAPES.iter().map(|s| s.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::Redactor;
    use serde_json::json;

    fn r() -> Redactor {
        Redactor::default()
    }

    /// Realistic examples of every built-in shape, by shape name.
    fn samples() -> Vec<(&'static str, String)> {
        vec![
            (
                "private_key",
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x9\n-----END RSA PRIVATE KEY-----"
                    .to_owned(),
            ),
            (
                "jwt",
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
                    .to_owned(),
            ),
            (
                "anthropic_api_key",
                "sk-ant-api03-Q9x2Lm7Vb4Kp1Zt8Rw3Yc6Hn0Js5Fd2Ga9Ue4Oi7_AA".to_owned(),
            ),
            (
                "openai_api_key",
                "sk-proj-7Fh2Kd9Lq3Wz8Xc1Vb6Nm4Tr0Yp5Ju2Ie8Ow3Aq".to_owned(),
            ),
            ("openai_api_key", format!("sk-{}", "aB3".repeat(16))),
            ("stripe_key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc".to_owned()),
            ("aws_access_key_id", "AKIAIOSFODNN7EXAMPLE".to_owned()),
            ("github_token", format!("ghp_{}", "a1B2c3D4e5F6".repeat(3))),
            (
                "github_token",
                format!("github_pat_11ABCDEFG0{}", "x9Y8z7W6_".repeat(4)),
            ),
            ("google_api_key", format!("AIza{}", "SyB1c2D3e4F".repeat(3) + "5g6")),
            ("slack_token", "xoxb-1234567890-0987654321-AbCdEfGh".to_owned()),
            ("huggingface_token", format!("hf_{}", "QwErTyUiOpAsDfGhJk".repeat(2))),
            ("groq_api_key", format!("gsk_{}", "Zx8Cv7Bn6M".repeat(5))),
            ("xai_api_key", format!("xai-{}", "Pq1Wo2Ei3R".repeat(5))),
            (
                "openai_ephemeral_key",
                "ek_68b9f2c1e4a04190bfd0e1f0e0d8a7b0".to_owned(),
            ),
        ]
    }

    const BEARER: &str = "Bearer 8f3a9c2e1b7d4f60a5e2c9b1";

    #[test]
    fn compiled_shapes_are_valid() {
        for shape in SHAPES {
            assert!(Regex::new(shape.regex).is_ok(), "{}", shape.name);
            assert!(BytesRegex::new(shape.regex).is_ok(), "{}", shape.name);
        }
        assert!(SHAPES_COMPILED.is_some());
        let mut names: Vec<_> = credential_shape_names().collect();
        names.dedup();
        assert_eq!(names.len(), SHAPES.len());
    }

    #[test]
    fn each_shape_is_redacted_in_context() {
        let red = r();
        for (name, secret) in samples() {
            let text = format!("before {secret} after");
            assert_eq!(red.text(&text), "before [REDACTED] after", "{name}");
            let mut v = json!({"messages": [{"content": [{"text": text}]}]});
            red.json(&mut v);
            assert_eq!(
                v["messages"][0]["content"][0]["text"], "before [REDACTED] after",
                "{name}"
            );
            let found = find_credentials(format!("xx {secret} yy").as_bytes());
            assert_eq!(
                found,
                vec![CredentialMatch {
                    pattern: name,
                    offset: 3,
                    len: secret.len()
                }],
                "{name}"
            );
        }
    }

    #[test]
    fn bearer_keeps_its_scheme_and_needs_a_token() {
        let red = r();
        assert_eq!(
            red.text("Authorization: Bearer 8f3a9c2e1b7d4f60a5e2c9b1"),
            "Authorization: Bearer [REDACTED]"
        );
        assert_eq!(
            red.text("bearer abcDEFghiJKLmnoPQRstuVWXyz"),
            "bearer [REDACTED]"
        );
        for prose in [
            "Bearer of bad news",
            "The Bearer tokens section of RFC 6750",
            "a bearer authentication-mechanism-overview",
            "Bearer [REDACTED]",
        ] {
            assert_eq!(red.text(prose), prose);
        }
    }

    #[test]
    fn look_alikes_are_not_mangled() {
        let red = r();
        for text in [
            "skeleton",
            "task-list",
            "risk-assessment-framework-for-banks",
            "ask-me-anything-about-the-universe",
            "sk-learn-compatible-estimator-library",
            "sk-short",
            "disk-0123456789abcdefghijklmnop",
            "AKIA is a prefix",
            "eyJhbGciOiJIUzI1NiJ9 alone is just base64 JSON",
            "the ghp_ prefix",
            "max_tokens=1024 tokens=12 token_budget=7",
            "model: claude-3-5-sonnet-20241022, id: msg_01XFDUDYJgAACzvnptvVoYEL",
            "chatcmpl-9pWz2Xf8hYqL3mN7vKj5tR1sD0aB, call_Ab12Cd34Ef56Gh78",
        ] {
            assert_eq!(red.text(text), text);
            assert!(find_credentials(text.as_bytes()).is_empty(), "{text}");
        }
    }

    #[test]
    fn find_credentials_reports_byte_offsets_once_per_secret() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N";
        let mut bytes = vec![0xff, 0xfe, b' '];
        bytes.extend_from_slice(format!("Bearer {jwt} ").as_bytes());
        bytes.extend_from_slice("é sk-ant-api03-Q9x2Lm7Vb4Kp1Zt8Rw3Yc6Hn0Js5Fd2G".as_bytes());
        let found = find_credentials(&bytes);
        assert_eq!(
            found,
            vec![
                CredentialMatch {
                    pattern: "jwt",
                    offset: 10,
                    len: jwt.len()
                },
                CredentialMatch {
                    pattern: "anthropic_api_key",
                    offset: 10 + jwt.len() + 1 + 3,
                    len: 45
                },
            ]
        );
        let redacted = r().text(&String::from_utf8_lossy(&bytes));
        assert!(find_credentials(redacted.as_bytes()).is_empty());
    }

    /// Issue 10, item 9: an escape glues a letter or digit to the secret (`\nsk-...` has no word
    /// boundary), in JSON held in a string and in the stored document `verify` reads.
    #[test]
    fn shapes_right_after_an_escape_are_found() {
        let red = r();
        let mut secrets = samples();
        secrets.push(("bearer_token", BEARER.to_owned()));
        for (name, secret) in secrets {
            let plain = BEARER.strip_prefix("Bearer ").unwrap_or_default();
            let hidden = if name == "bearer_token" {
                plain
            } else {
                &secret
            };
            // Real characters that JSON escapes, as serde_json writes them.
            for before in ["\n", "\t", "\r", "\"", "\u{1b}", "\u{8}", "\u{c}"] {
                let text = format!("line{before}{secret}");
                let arguments = json!({ "note": text }).to_string();
                // The stored document: the text is escaped once; verify reads those bytes.
                let document = json!({ "content": text }).to_string();
                let found = find_credentials(document.as_bytes());
                assert_eq!(found.len(), 1, "{name} after {before:?} in {document}");
                assert_eq!(found[0].pattern, name, "{document}");
                assert_eq!(
                    red.text(&text),
                    format!("line{before}{}", red.text(&secret)),
                    "{name}"
                );
                // JSON in a string (tool-call arguments): escaped twice in the document.
                let mut body = json!({"tool_calls": [{"function": {"arguments": arguments}}]});
                red.json(&mut body);
                let stored = body.to_string();
                assert!(
                    !stored.contains(hidden),
                    "{name} after {before:?}: {stored}"
                );
                assert!(find_credentials(stored.as_bytes()).is_empty(), "{stored}");
                let unredacted = json!({ "arguments": arguments }).to_string();
                assert_eq!(
                    find_credentials(unredacted.as_bytes()).len(),
                    1,
                    "{name} after {before:?}: {unredacted}"
                );
            }
            // Escapes as a model or a client writes them into JSON text, and URL encoding.
            for raw in [
                r"\u0020", r"\u00e9", r"\n", r"\\n", r"\t", "%3D", "%20", "%0A",
            ] {
                let text = format!(r#"{{"note":"x{raw}{secret}"}}"#);
                let redacted = red.text(&text);
                assert!(!redacted.contains(hidden), "{name} after {raw}: {redacted}");
                assert_eq!(
                    redacted,
                    format!(r#"{{"note":"x{raw}{}"}}"#, red.text(&secret)),
                    "{name} after {raw}"
                );
                let found = find_credentials(text.as_bytes());
                assert_eq!(found.len(), 1, "{name} after {raw}: {text}");
            }
        }
    }

    #[test]
    fn a_bearer_separator_may_be_escaped_or_encoded() {
        let red = r();
        let token = "8f3a9c2e1b7d4f60a5e2c9b1";
        for separator in [r"\u0020", r"\t", r"\n", "%20", "+", "%20%20"] {
            let text = format!("Authorization: Bearer{separator}{token}");
            assert_eq!(
                red.text(&text),
                format!("Authorization: Bearer{separator}[REDACTED]")
            );
            assert_eq!(find_credentials(text.as_bytes()).len(), 1, "{text}");
        }
        for prose in [
            "Bearer+of+bad+news",
            r"Bearer\u0020of bad news",
            "bearer%20bonds",
        ] {
            assert_eq!(red.text(prose), prose);
        }
    }

    #[test]
    fn escaped_look_alikes_are_not_mangled() {
        let red = r();
        for text in [
            r"\nskeleton",
            r"\ntask-list",
            r"\nsk-learn-compatible-estimator-library",
            "%3Dsk-short",
            r"\u0020AKIA is a prefix",
            r"\nmax_tokens=1024\ttokens=12",
            r"\nweek_2024_01_01_and_more_words_here",
            "ek_ is a prefix, ek_short1, check_20240101aaaaaaaaaaaaaaa",
            "https://host.example:8443/path@v2 and ssh://git@github.com/org/repo",
            "https://user:[REDACTED]@host.example",
        ] {
            assert_eq!(red.text(text), text);
            assert!(find_credentials(text.as_bytes()).is_empty(), "{text}");
        }
    }

    /// Issue 25, item 12: a key glued right after a word character has no word boundary before
    /// it (`x_sk-proj-...`, `1sk-...`, `xAKIA...`), and was missed.
    #[test]
    fn a_key_glued_after_a_word_character_is_found() {
        let red = r();
        for (name, secret) in samples() {
            if name == "openai_ephemeral_key" {
                // `ek_` ends too many words (`check_20240101...`): it needs its boundary.
                continue;
            }
            for glue in ["x_", "1", "x", "my_key_is_", "token=x"] {
                let text = format!("note {glue}{secret} end");
                assert_eq!(
                    red.text(&text),
                    format!("note {glue}[REDACTED] end"),
                    "{name} after {glue}"
                );
                let found = find_credentials(text.as_bytes());
                assert_eq!(
                    found,
                    vec![CredentialMatch {
                        pattern: name,
                        offset: 5 + glue.len(),
                        len: secret.len()
                    }],
                    "{name} after {glue}"
                );
                // In a stored document, and in JSON held in a string.
                let mut body = json!({"arguments": json!({"note": text}).to_string()});
                red.json(&mut body);
                assert!(!body.to_string().contains(&secret), "{name}: {body}");
            }
        }
    }

    #[test]
    fn glued_look_alikes_and_base64_are_not_mangled() {
        let red = r();
        // Random-looking data: base64 of every byte value, three times over, in both alphabets.
        let bytes: Vec<u8> = (0..=255u8).cycle().take(768).collect();
        let standard = base64_of(&bytes, b"+/");
        let url_safe = base64_of(&bytes, b"-_");
        for text in [
            "disk-0123456789abcdefghijklmnop".to_owned(),
            "whisk-0123456789abcdefghijklmnopqrst".to_owned(),
            "risk-ant-colony-optimization-algorithm-2024".to_owned(),
            "task_sk-learn-compatible-estimator".to_owned(),
            "XAKIA is no key, nor is AKIAS".to_owned(),
            "the_ghp_prefix_and_github_pat_prefix".to_owned(),
            "check_20240101aaaaaaaaaaaaaaa".to_owned(),
            "ORDER_AKIA_2024".to_owned(),
            // A glued shape inside a long run of base64 is a chance run of the data.
            format!("{standard}xAIzaSyB1c2D3e4FSyB1c2D3e4FSyB1c2D3e4F5g6{standard}"),
            format!("{url_safe}1sk-proj-7Fh2Kd9Lq3Wz8Xc1Vb6Nm4Tr0Yp5Ju2Ie8Ow3Aq{url_safe}"),
            format!("data:image/png;base64,{standard}xAKIAIOSFODNN7EXAMPLE/{standard}"),
            standard.clone(),
            url_safe.clone(),
        ] {
            assert_eq!(red.text(&text), text);
            assert!(find_credentials(text.as_bytes()).is_empty(), "{text}");
        }
    }

    /// Base64 of `bytes` with `extra` as the alphabet's last two characters.
    fn base64_of(bytes: &[u8], extra: &[u8; 2]) -> String {
        let alphabet: Vec<u8> = (b'A'..=b'Z')
            .chain(b'a'..=b'z')
            .chain(b'0'..=b'9')
            .chain(extra.iter().copied())
            .collect();
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                out.push(char::from(alphabet[(n >> (18 - 6 * i) & 63) as usize]));
            }
        }
        out
    }

    /// Issue 25, item 12: the password of a scheme-relative URL, or of one whose scheme is glued
    /// to a word, kept its password.
    #[test]
    fn a_url_password_without_its_scheme_is_found() {
        let red = r();
        for (text, expected) in [
            (
                "//alice:s3cret-pw@mcp.example.com/sse",
                "//[REDACTED]@mcp.example.com/sse",
            ),
            (
                r#"{"url": "//bot:hunter2@db.internal:5432"}"#,
                r#"{"url": "//[REDACTED]@db.internal:5432"}"#,
            ),
            (
                "x_https://app:p4ss@host.example/x",
                "x_https://[REDACTED]@host.example/x",
            ),
            (
                "see 1postgres://app:pw@db/app",
                "see 1postgres://[REDACTED]@db/app",
            ),
        ] {
            assert_eq!(red.text(text), expected);
            let found = find_credentials(text.as_bytes());
            assert_eq!(found.len(), 1, "{text}");
            assert_eq!(found[0].pattern, "url_password", "{text}");
        }
        for kept in [
            "// a comment: see https://example.com/a@b",
            "https://host.example:8443/path@v2 and //cdn.example.com:443/x@y",
            "//git@github.com/org/repo",
            "//user:[REDACTED]@host",
        ] {
            assert_eq!(red.text(kept), kept);
            assert!(find_credentials(kept.as_bytes()).is_empty(), "{kept}");
        }
    }

    #[test]
    fn url_passwords_lose_the_userinfo_and_keep_the_host() {
        let red = r();
        for (url, expected) in [
            (
                "https://alice:s3cret-pw@mcp.example.com/sse",
                "https://[REDACTED]@mcp.example.com/sse",
            ),
            (
                "redis://:hunter2@127.0.0.1:6379/0",
                "redis://[REDACTED]@127.0.0.1:6379/0",
            ),
            (
                "postgres://app:p%40ss@db.internal/app",
                "postgres://[REDACTED]@db.internal/app",
            ),
        ] {
            assert_eq!(red.text(url), expected);
            let found = find_credentials(url.as_bytes());
            assert_eq!(found.len(), 1, "{url}");
            assert_eq!(found[0].pattern, "url_password");
        }
        let mut body = json!({"tools": [{"type": "mcp", "server_label": "deepwiki",
            "server_url": "https://bot:tok3n-XYZ@mcp.example.com/mcp"}]});
        red.json(&mut body);
        assert_eq!(
            body["tools"][0]["server_url"],
            "https://[REDACTED]@mcp.example.com/mcp"
        );
    }
}
