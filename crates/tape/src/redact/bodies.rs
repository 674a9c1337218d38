//! Bodies that are not plain JSON: form-encoded fields and multipart parts by name, text parts
//! by content, and binary bytes (a base64-stored body, an uploaded file) scanned for credential
//! shapes.
//!
//! Multipart bodies are only *located* here (delimiter lines, part headers, part contents), never
//! decoded and re-encoded: every byte outside a redacted part content stays as it was, so a
//! reviewer sees the upload as the client sent it.

use super::names::is_form_credential_name;
use super::shapes::find_credentials;
use super::{Redactor, REDACTED};
use crate::document::StoredBody;
use base64::Engine;
use regex::bytes::Regex as BytesRegex;
use serde_json::Value;
use std::borrow::Cow;
use std::ops::Range;

/// What redacting one stored body did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BodyRedaction {
    /// Whether anything in the body was replaced.
    pub changed: bool,
    /// Credential-shaped runs replaced inside a body stored as base64, where no reader of the
    /// stored document could have seen them: the recorder says so in its log.
    pub in_binary: usize,
}

/// How a body is to be read, from its `content-type`.
enum Media {
    Form,
    Multipart(String),
    Other,
}

impl Media {
    fn of(content_type: Option<&str>) -> Media {
        let Some(content_type) = content_type else {
            return Media::Other;
        };
        let mut params = content_type.split(';');
        let essence = params.next().unwrap_or("").trim().to_ascii_lowercase();
        match essence.as_str() {
            "application/x-www-form-urlencoded" => Media::Form,
            "multipart/form-data" | "multipart/mixed" | "multipart/related" => params
                .filter_map(|p| p.split_once('='))
                .find(|(name, _)| name.trim().eq_ignore_ascii_case("boundary"))
                .map(|(_, value)| unquote(value.trim()).to_owned())
                .filter(|b| !b.is_empty())
                .map_or(Media::Other, Media::Multipart),
            _ => Media::Other,
        }
    }
}

fn unquote(s: &str) -> &str {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s)
}

impl Redactor {
    /// Redacts a stored body in place, read as its `content-type` says: JSON by the JSON rules,
    /// a form (`application/x-www-form-urlencoded`) field by field, a multipart body part by
    /// part, other text by the shape and user rules, and a base64-stored body by scanning its
    /// decoded bytes for credential shapes (each match is replaced by `[REDACTED]` in the
    /// bytes; the rest of the binary stays as it was).
    pub fn body(&self, body: &mut StoredBody, content_type: Option<&str>) -> BodyRedaction {
        let media = Media::of(content_type);
        match body {
            StoredBody::Empty => BodyRedaction::default(),
            StoredBody::Json(value) => BodyRedaction {
                changed: self.json_changed(value),
                in_binary: 0,
            },
            StoredBody::Text(text) => {
                let redacted: Cow<'_, str> = match &media {
                    Media::Form => self.form(text),
                    Media::Multipart(boundary) => {
                        let (bytes, _) = self.multipart(text.as_bytes(), boundary);
                        match bytes {
                            Cow::Borrowed(_) => Cow::Borrowed(text.as_str()),
                            Cow::Owned(bytes) => {
                                Cow::Owned(String::from_utf8(bytes).unwrap_or_else(|e| {
                                    String::from_utf8_lossy(e.as_bytes()).into()
                                }))
                            }
                        }
                    }
                    Media::Other => self.scrub(text),
                };
                match redacted {
                    Cow::Borrowed(_) => BodyRedaction::default(),
                    Cow::Owned(new) => {
                        *text = new;
                        BodyRedaction {
                            changed: true,
                            in_binary: 0,
                        }
                    }
                }
            }
            StoredBody::Base64(encoded) => {
                let engine = base64::engine::general_purpose::STANDARD;
                // A hand-edited document may hold anything; what does not decode is left for
                // `cassette verify` to report, not guessed at.
                let Ok(bytes) = engine.decode(encoded.as_bytes()) else {
                    return BodyRedaction::default();
                };
                let (redacted, found) = match &media {
                    Media::Multipart(boundary) => self.multipart(&bytes, boundary),
                    _ => binary(&bytes),
                };
                match redacted {
                    Cow::Borrowed(_) => BodyRedaction::default(),
                    Cow::Owned(new) => {
                        *encoded = engine.encode(new);
                        BodyRedaction {
                            changed: true,
                            in_binary: found,
                        }
                    }
                }
            }
        }
    }

    /// A form-encoded body: fields named like credentials keep their name and lose their value;
    /// the others are kept byte for byte except credential shapes (also once decoded).
    fn form<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut changed = false;
        let fields: Vec<Cow<'_, str>> = text
            .split('&')
            .map(|field| {
                let (name, value) = field.split_once('=').unwrap_or((field, ""));
                let field =
                    if is_form_credential_name(name) && !value.is_empty() && value != REDACTED {
                        Cow::Owned(format!("{name}={REDACTED}"))
                    } else {
                        self.encoded_pair(field)
                    };
                changed |= matches!(field, Cow::Owned(_));
                field
            })
            .collect();
        let joined = if changed {
            Cow::Owned(fields.join("&"))
        } else {
            Cow::Borrowed(text)
        };
        match self.scrub(&joined) {
            Cow::Borrowed(_) => joined,
            Cow::Owned(scrubbed) => Cow::Owned(scrubbed),
        }
    }

    /// A multipart body: each part named like a credential loses its content; text parts get
    /// the JSON or text rules, binary parts (an uploaded file) the byte scan; finally the whole
    /// body is scanned once more, for part headers and anything outside the parts. Returns the
    /// body and how many credential shapes were replaced in bytes that are not UTF-8.
    fn multipart<'a>(&self, bytes: &'a [u8], boundary: &str) -> (Cow<'a, [u8]>, usize) {
        let mut found = 0;
        let mut out: Option<Vec<u8>> = None;
        let mut copied = 0;
        for part in parts(bytes, boundary) {
            let content = &bytes[part.content.clone()];
            let Some(new) = self.part(&part.headers(bytes), content, &mut found) else {
                continue;
            };
            let out = out.get_or_insert_with(|| Vec::with_capacity(bytes.len()));
            out.extend_from_slice(&bytes[copied..part.content.start]);
            out.extend_from_slice(&new);
            copied = part.content.end;
        }
        let body: Cow<'a, [u8]> = match out {
            None => Cow::Borrowed(bytes),
            Some(mut out) => {
                out.extend_from_slice(&bytes[copied..]);
                Cow::Owned(out)
            }
        };
        let (rest, more) = binary(&body);
        let body = match rest {
            Cow::Borrowed(_) => body,
            Cow::Owned(rest) => Cow::Owned(rest),
        };
        let binary_body = std::str::from_utf8(&body).is_err();
        (body, if binary_body { found + more } else { found })
    }

    /// The new content of one part, or `None` to keep it.
    fn part(&self, headers: &PartHeaders, content: &[u8], found: &mut usize) -> Option<Vec<u8>> {
        if headers.name.as_deref().is_some_and(is_form_credential_name) {
            let unchanged = content.is_empty() || content == REDACTED.as_bytes();
            return (!unchanged).then(|| REDACTED.as_bytes().to_vec());
        }
        let Ok(text) = std::str::from_utf8(content) else {
            let (new, count) = binary(content);
            *found += count;
            return match new {
                Cow::Borrowed(_) => None,
                Cow::Owned(new) => Some(new),
            };
        };
        let trimmed = text.trim_start();
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            if let Ok(mut value) = serde_json::from_str::<Value>(text) {
                if !self.json_changed(&mut value) {
                    return None;
                }
                return serde_json::to_vec(&value).ok();
            }
        }
        match self.scrub(text) {
            Cow::Borrowed(_) => None,
            Cow::Owned(new) => Some(new.into_bytes()),
        }
    }
}

/// Replaces every credential-shaped run in `bytes` with [`REDACTED`]; returns the bytes and how
/// many runs were replaced.
fn binary(bytes: &[u8]) -> (Cow<'_, [u8]>, usize) {
    let found = find_credentials(bytes);
    if found.is_empty() {
        return (Cow::Borrowed(bytes), 0);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut copied = 0;
    for m in &found {
        out.extend_from_slice(&bytes[copied..m.offset]);
        out.extend_from_slice(REDACTED.as_bytes());
        copied = m.offset + m.len;
    }
    out.extend_from_slice(&bytes[copied..]);
    (Cow::Owned(out), found.len())
}

/// Where one part of a multipart body is.
struct Part {
    headers: Range<usize>,
    content: Range<usize>,
}

/// The headers of a part that matter here.
struct PartHeaders {
    /// The form field name, from `content-disposition`.
    name: Option<String>,
}

impl Part {
    fn headers(&self, bytes: &[u8]) -> PartHeaders {
        let text = String::from_utf8_lossy(&bytes[self.headers.clone()]);
        let name = text
            .lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-disposition"))
            .and_then(|(_, value)| {
                value
                    .split(';')
                    .skip(1)
                    .filter_map(|p| p.split_once('='))
                    .find(|(n, _)| n.trim().eq_ignore_ascii_case("name"))
                    .map(|(_, v)| unquote(v.trim()).to_owned())
            });
        PartHeaders { name }
    }
}

/// The parts of a multipart body: between delimiter lines (`--BOUNDARY` at the start of a
/// line), each a header block, an empty line and the content; the content ends before the line
/// break that precedes the next delimiter. A body without two delimiters has no parts.
fn parts(bytes: &[u8], boundary: &str) -> Vec<Part> {
    let Ok(delimiter) = BytesRegex::new(&format!("(?-u)--{}", regex::escape(boundary))) else {
        return Vec::new();
    };
    let starts: Vec<usize> = delimiter
        .find_iter(bytes)
        .map(|m| m.start())
        .filter(|&at| at == 0 || bytes[..at].ends_with(b"\n"))
        .collect();
    let delimiter_len = boundary.len() + 2;
    let mut out = Vec::new();
    for pair in starts.windows(2) {
        let (this, next) = (pair[0], pair[1]);
        let after = this + delimiter_len;
        if bytes[after..].starts_with(b"--") {
            break;
        }
        // The rest of the delimiter line (transport padding) ends at its line break.
        let Some(line_end) = bytes[after..next].iter().position(|&b| b == b'\n') else {
            continue;
        };
        let start = after + line_end + 1;
        let end = if bytes[..next].ends_with(b"\r\n") {
            next - 2
        } else {
            next - 1
        };
        if end < start {
            continue;
        }
        let region = &bytes[start..end];
        let (header_end, content_start) = match find(region, b"\r\n\r\n") {
            Some(i) => (i, i + 4),
            None => match find(region, b"\n\n") {
                Some(i) => (i, i + 2),
                None => continue,
            },
        };
        out.push(Part {
            headers: start..start + header_end,
            content: start + content_start..end,
        });
    }
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r() -> Redactor {
        Redactor::default()
    }

    const KEY: &str = "sk-proj-7Fh2Kd9Lq3Wz8Xc1Vb6Nm4Tr0Yp5Ju2Ie8Ow3Aq";

    /// A multipart body as curl sends `-F api_key=... -F model=whisper-1 -F file=@a.mp3`.
    fn upload(file: &[u8], extra: &str) -> Vec<u8> {
        let b = "------------------------a1b2c3d4e5f6";
        let mut body = Vec::new();
        for (name, value) in [
            ("api_key", "opaque-upload-secret"),
            ("model", "whisper-1"),
            ("prompt", extra),
        ] {
            body.extend_from_slice(
                format!(
                    "--{b}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
                )
                .as_bytes(),
            );
        }
        body.extend_from_slice(
            format!("--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.mp3\"\r\nContent-Type: audio/mpeg\r\n\r\n").as_bytes(),
        );
        body.extend_from_slice(file);
        body.extend_from_slice(format!("\r\n--{b}--\r\n").as_bytes());
        body
    }

    const MULTIPART: &str = "multipart/form-data; boundary=------------------------a1b2c3d4e5f6";

    fn mp3(with_key: bool) -> Vec<u8> {
        let mut file = vec![0xff, 0xfb, 0x90, 0x64, 0x00, 0x0f, 0xf0, 0x00];
        file.extend_from_slice(b"ID3 comment ");
        if with_key {
            file.extend_from_slice(KEY.as_bytes());
        }
        file.extend_from_slice(&[0x00, 0xfe, 0x80, 0x81, 0x7f]);
        file
    }

    fn decoded(body: &StoredBody) -> Vec<u8> {
        body.to_bytes().map(|b| b.to_vec()).unwrap_or_default()
    }

    /// Issue 10, item 10: `-F api_key=... -F file=@a.mp3` stores no credential, text or binary.
    #[test]
    fn multipart_fields_are_redacted_by_name_and_shape() {
        let raw = upload(&mp3(true), &format!("say {KEY} twice"));
        let mut body = StoredBody::from_bytes(&raw);
        assert!(matches!(body, StoredBody::Base64(_)));
        let report = r().body(&mut body, Some(MULTIPART));
        assert!(report.changed);
        assert_eq!(report.in_binary, 1, "the key inside the mp3 bytes");
        let stored = decoded(&body);
        let text = String::from_utf8_lossy(&stored);
        assert!(!text.contains("opaque-upload-secret"), "{text}");
        assert!(!text.contains(KEY), "{text}");
        assert!(
            text.contains("name=\"api_key\"\r\n\r\n[REDACTED]\r\n"),
            "{text}"
        );
        assert!(text.contains("whisper-1"), "{text}");
        assert!(text.contains("say [REDACTED] twice"), "{text}");
        // Every byte of the file but the key is kept.
        let mut expected_file = mp3(false);
        expected_file.splice(20..20, REDACTED.bytes());
        assert!(
            stored
                .windows(expected_file.len())
                .any(|w| w == expected_file),
            "the rest of the file survives"
        );
        // Redacting again changes nothing.
        assert!(!r().body(&mut body, Some(MULTIPART)).changed);
    }

    #[test]
    fn a_clean_multipart_upload_keeps_every_byte() {
        let mut raw = upload(&mp3(false), "a podcast about tokens and passwords");
        raw = String::from_utf8_lossy(&raw)
            .replace("opaque-upload-secret", "")
            .into_bytes();
        let mut body = StoredBody::from_bytes(&raw);
        let before = body.clone();
        assert_eq!(
            r().body(&mut body, Some(MULTIPART)),
            BodyRedaction::default()
        );
        assert_eq!(body, before);
    }

    #[test]
    fn a_text_only_multipart_body_stays_text() {
        let b = "XyZ";
        let raw = format!(
            "--{b}\nContent-Disposition: form-data; name=\"client_secret\"\n\ncs-123\n--{b}\nContent-Disposition: form-data; name=\"meta\"\nContent-Type: application/json\n\n{{\"password\":\"pw\",\"max_tokens\":5}}\n--{b}--\n"
        );
        let mut body = StoredBody::from_bytes(raw.as_bytes());
        let report = r().body(
            &mut body,
            Some(&format!("multipart/form-data; boundary=\"{b}\"")),
        );
        assert_eq!(
            report,
            BodyRedaction {
                changed: true,
                in_binary: 0
            }
        );
        let StoredBody::Text(text) = &body else {
            panic!("{body:?}")
        };
        assert!(
            text.contains("name=\"client_secret\"\n\n[REDACTED]\n"),
            "{text}"
        );
        assert!(
            text.contains(r#"{"max_tokens":5,"password":"[REDACTED]"}"#),
            "{text}"
        );
        assert!(!text.contains("cs-123"));
    }

    /// Issue 10, item 10: form-encoded bodies by name.
    #[test]
    fn form_fields_are_redacted_by_name() {
        let form = format!(
            "grant_type=client_credentials&client_secret=cs-opaque&api_key=k-opaque&password=pw%21&scope=read+write&max_tokens=5&note=use%20{KEY}&empty="
        );
        let mut body = StoredBody::from_bytes(form.as_bytes());
        let report = r().body(
            &mut body,
            Some("application/x-www-form-urlencoded; charset=utf-8"),
        );
        assert!(report.changed);
        assert_eq!(
            body,
            StoredBody::Text(
                "grant_type=client_credentials&client_secret=[REDACTED]&api_key=[REDACTED]&password=[REDACTED]&scope=read+write&max_tokens=5&note=use%20[REDACTED]&empty=".into()
            )
        );
        assert!(
            !r().body(&mut body, Some("application/x-www-form-urlencoded"))
                .changed
        );
        // Without the content type it is text: shapes only.
        let mut text = StoredBody::from_bytes(b"password=pw&q=1");
        assert!(!r().body(&mut text, Some("text/plain")).changed);
    }

    /// Issue 10, item 10: a base64-stored body is decoded and scanned.
    #[test]
    fn binary_bodies_are_scanned() {
        let mut raw = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0xff];
        raw.extend_from_slice(format!("tEXt\0key\0{KEY}\0").as_bytes());
        raw.extend_from_slice(&[0x00, 0xfe]);
        let mut body = StoredBody::from_bytes(&raw);
        let report = r().body(&mut body, Some("image/png"));
        assert_eq!(
            report,
            BodyRedaction {
                changed: true,
                in_binary: 1
            }
        );
        let stored = decoded(&body);
        assert!(!String::from_utf8_lossy(&stored).contains(KEY));
        assert!(stored.starts_with(&raw[..9]));
        assert!(stored.ends_with(b"[REDACTED]\0\x00\xfe"));
        let mut clean = StoredBody::from_bytes(&[0xff, 0x00, 0xfe, b'a']);
        assert!(!r().body(&mut clean, None).changed);
    }

    #[test]
    fn media_types_are_read_with_their_parameters() {
        assert!(matches!(
            Media::of(Some("Multipart/Form-Data; charset=utf-8; BOUNDARY=\"a b\"")),
            Media::Multipart(b) if b == "a b"
        ));
        assert!(matches!(
            Media::of(Some("multipart/form-data")),
            Media::Other
        ));
        assert!(matches!(
            Media::of(Some("application/x-www-form-urlencoded")),
            Media::Form
        ));
        assert!(matches!(Media::of(None), Media::Other));
    }
}
