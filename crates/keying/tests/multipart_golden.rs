//! Golden tests for multipart bodies (docs/keying.md, "Multipart bodies"): a pinned vector,
//! then one test per thing that must leave the key alone (the boundary the client picks at
//! random, the order of differently named parts, header spelling, a credential field) and one
//! per input that must change it (a part's bytes, name, filename or content type), and the
//! bodies that keep the raw-body rule.
//!
//! A failure here means the key contract changed: either a bug, or a deliberate change that
//! bumps `KEY_VERSION` together with these expectations.

use cassette_keying::{diff, sha256_hex, KeyConfig, Keyed, Request, MULTIPART_TEXT_MAX};
use serde_json::json;

const TRANSCRIBE: &str = "/v1/audio/transcriptions";

/// The audio every test uploads: bytes that are not UTF-8.
const AUDIO: &[u8] = b"ID3\x04\x00\x00\xff\xfb\x90\x64\x00\x0fsome mp3 frames";

/// One part: its header lines and content.
struct Part<'a> {
    head: String,
    content: &'a [u8],
}

fn field(name: &str, value: &str) -> Part<'static> {
    Part {
        head: format!("Content-Disposition: form-data; name=\"{name}\""),
        content: Box::leak(value.as_bytes().to_vec().into_boxed_slice()),
    }
}

fn file<'a>(name: &str, filename: &str, content_type: &str, content: &'a [u8]) -> Part<'a> {
    Part {
        head: format!(
            "Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: {content_type}"
        ),
        content,
    }
}

/// A body as the openai SDK (httpx) frames it.
fn form(boundary: &str, parts: &[Part<'_>]) -> Vec<u8> {
    let mut body = Vec::new();
    for part in parts {
        body.extend_from_slice(format!("--{boundary}\r\n{}\r\n\r\n", part.head).as_bytes());
        body.extend_from_slice(part.content);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

fn keyed(body: &[u8], boundary: &str) -> Keyed {
    let content_type = format!("multipart/form-data; boundary={boundary}");
    Request::new("POST", TRANSCRIBE)
        .header("content-type", &content_type)
        .header("authorization", "Bearer sk-proj-secret")
        .body(body)
        .key(&KeyConfig::default())
}

/// The parts of a transcription as the openai SDK sends them.
fn transcription() -> Vec<Part<'static>> {
    vec![
        file("file", "speech.mp3", "audio/mpeg", AUDIO),
        field("model", "whisper-1"),
        field("language", "en"),
    ]
}

fn key(parts: &[Part<'_>]) -> String {
    keyed(&form("a1b2c3d4e5f6", parts), "a1b2c3d4e5f6")
        .key
        .as_str()
        .to_owned()
}

const VECTOR_CANONICAL: &str = r#"{"body":{"multipart":{"file":[{"content_type":"audio/mpeg","filename":"speech.mp3","sha256":"006925560740845cdba2c6545a538c5cc9fa119a621fb76652af7b48a745c209","size":27}],"language":[{"value":"en"}],"model":[{"value":"whisper-1"}]}},"body_sha256":null,"headers":{},"method":"POST","path":"/v1/audio/transcriptions","profile":"http","query":[],"system_sha256":null,"target":"default","v":1}"#;
const VECTOR_KEY: &str = "c528a1d346b135b119ea1504ae66841429681fbd0ec40f228be484f93b8daa80";

#[test]
fn the_vector_keys_to_its_pinned_material_and_key() {
    let keyed = keyed(&form("c7a8b9", &transcription()), "c7a8b9");
    assert_eq!(keyed.canonical, VECTOR_CANONICAL);
    assert_eq!(keyed.key.as_str(), VECTOR_KEY);
    assert_eq!(keyed.material["body_sha256"], json!(null));
    assert_eq!(
        keyed.material["body"]["multipart"]["file"][0]["sha256"],
        json!(sha256_hex(AUDIO))
    );
}

#[test]
fn the_random_boundary_and_transport_details_leave_the_key_alone() {
    let base = key(&transcription());
    // Another boundary, as every request has, quoted or not.
    for boundary in [
        "x",
        "----WebKitFormBoundary7MA4YWxkTrZu0gW",
        "0123456789abcdef",
    ] {
        let body = form(boundary, &transcription());
        assert_eq!(keyed(&body, boundary).key.as_str(), base, "{boundary}");
        let quoted = format!("Multipart/Form-Data; boundary=\"{boundary}\"");
        let k = Request::new("POST", TRANSCRIBE)
            .header("CONTENT-TYPE", &quoted)
            .body(&body)
            .key(&KeyConfig::default());
        assert_eq!(k.key.as_str(), base, "quoted {boundary}");
    }
    // Parts of different names in another order; header names spelled otherwise; other part
    // headers; no final CRLF after the closing delimiter.
    let mut reordered = transcription();
    reordered.rotate_left(1);
    assert_eq!(key(&reordered), base);
    let mut spelled = transcription();
    spelled[1].head = "content-disposition: form-data;name=model".into();
    assert_eq!(key(&spelled), base);
    let mut extra = transcription();
    extra[2].head.push_str("\r\nX-Trace: 42");
    assert_eq!(key(&extra), base);
    let mut body = form("a1b2c3d4e5f6", &transcription());
    body.truncate(body.len() - 2);
    assert_eq!(keyed(&body, "a1b2c3d4e5f6").key.as_str(), base);
    // A credential sent as a form field stays out of the key, like a credential parameter.
    let mut with_key = transcription();
    with_key.push(field("api_key", "sk-live-one"));
    let mut other_key = transcription();
    other_key.push(field("api_key", "sk-live-two"));
    assert_eq!(key(&with_key), key(&other_key));
}

#[test]
fn what_the_parts_say_changes_the_key_and_a_miss_names_the_part() {
    let base_parts = transcription();
    let base = key(&base_parts);
    let other_audio = b"ID3\x04\x00\x00\xff\xfb\x90\x64\x00\x0fother frames!!!";
    let changes: Vec<(&str, Vec<Part<'static>>)> = vec![
        ("file bytes", {
            let mut p = transcription();
            p[0] = file("file", "speech.mp3", "audio/mpeg", other_audio);
            p
        }),
        ("filename", {
            let mut p = transcription();
            p[0] = file("file", "speech2.mp3", "audio/mpeg", AUDIO);
            p
        }),
        ("content type", {
            let mut p = transcription();
            p[0] = file("file", "speech.mp3", "audio/wav", AUDIO);
            p
        }),
        ("field value", {
            let mut p = transcription();
            p[1] = field("model", "gpt-4o-transcribe");
            p
        }),
        ("field name", {
            let mut p = transcription();
            p[2] = field("lang", "en");
            p
        }),
        ("an added field", {
            let mut p = transcription();
            p.push(field("temperature", "0"));
            p
        }),
        ("repeats of one name in another order", {
            let mut p = transcription();
            p.push(field("timestamp_granularities[]", "word"));
            p.push(field("timestamp_granularities[]", "segment"));
            p
        }),
    ];
    let mut seen = vec![base.clone()];
    for (what, parts) in &changes {
        let k = key(parts);
        assert!(!seen.contains(&k), "{what} did not change the key");
        seen.push(k);
    }
    let mut swapped = transcription();
    swapped.push(field("timestamp_granularities[]", "segment"));
    swapped.push(field("timestamp_granularities[]", "word"));
    assert!(!seen.contains(&key(&swapped)), "order within a name");

    // The explanation of a miss names the part that differs.
    let recorded = keyed(&form("r", &base_parts), "r");
    let asked = keyed(&form("q", &changes[3].1), "q");
    let differences: Vec<String> = diff(&recorded.material, &asked.material)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        differences,
        ["body.multipart.model[0].value: \"whisper-1\" -> \"gpt-4o-transcribe\""],
        "{differences:?}"
    );
    let asked = keyed(&form("q", &changes[0].1), "q");
    let differences: Vec<String> = diff(&recorded.material, &asked.material)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(differences.len(), 1, "{differences:?}");
    assert!(
        differences[0].starts_with("body.multipart.file[0].sha256: "),
        "{differences:?}"
    );
}

#[test]
fn long_text_is_hashed_and_short_text_kept() {
    let short = "p".repeat(MULTIPART_TEXT_MAX);
    let long = "p".repeat(MULTIPART_TEXT_MAX + 1);
    let k = keyed(&form("b", &[field("prompt", &short)]), "b");
    assert_eq!(
        k.material["body"]["multipart"]["prompt"][0]["value"],
        json!(short)
    );
    let k = keyed(&form("b", &[field("prompt", &long)]), "b");
    assert_eq!(
        k.material["body"]["multipart"]["prompt"][0],
        json!({"sha256": sha256_hex(long.as_bytes()), "size": MULTIPART_TEXT_MAX + 1})
    );
}

#[test]
fn bodies_that_are_not_well_formed_forms_keep_the_raw_rule() {
    let body = form("a1b2c3d4e5f6", &transcription());
    let raw = |content_type: Option<&str>, body: &[u8]| {
        let mut request = Request::new("POST", TRANSCRIBE).body(body);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let keyed = request.key(&KeyConfig::default());
        assert_eq!(keyed.material["body"], json!(null));
        assert_eq!(keyed.material["body_sha256"], json!(sha256_hex(body)));
    };
    raw(None, &body);
    raw(Some("application/octet-stream"), &body);
    raw(Some("multipart/form-data; boundary=other"), &body);
    raw(Some("multipart/form-data"), &body);
    raw(
        Some("multipart/form-data; boundary=a1b2c3d4e5f6"),
        &body[..body.len() - 8],
    );
    let mut preamble = b"this is a preamble\r\n".to_vec();
    preamble.extend_from_slice(&body);
    raw(
        Some("multipart/form-data; boundary=a1b2c3d4e5f6"),
        &preamble,
    );
    // A JSON body declared as multipart is JSON, keyed as ever.
    let json_body = br#"{"model":"whisper-1"}"#;
    let keyed = Request::new("POST", TRANSCRIBE)
        .header("content-type", "multipart/form-data; boundary=x")
        .body(json_body)
        .key(&KeyConfig::default());
    assert_eq!(keyed.material["body"], json!({"model": "whisper-1"}));
}

#[test]
fn hit_key_agrees() {
    let body = form("h", &transcription());
    let request = Request::new("POST", TRANSCRIBE)
        .header("content-type", "multipart/form-data; boundary=h")
        .body(&body);
    let config = KeyConfig::default();
    assert_eq!(request.hit_key(&config).key, request.key(&config).key);
}
