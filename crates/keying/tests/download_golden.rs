//! Golden tests for the `download` profile of key v1: a pinned vector (request, canonical
//! bytes, key), then what must change the key of a download and what must leave it alone.
//!
//! A failure here means the key contract changed. Either the change is a bug, or it is
//! deliberate and `KEY_VERSION` must be bumped together with these expectations.

use cassette_keying::{sha256_hex, DownloadRequest, KeyConfig, Profile, Request, KEY_VERSION};

const ORIGIN: &str = "https://upload.wikimedia.org";
const PATH: &str = "/wikipedia/commons/3/3a/Cat03.jpg";

fn key(origin: &str, path: &str, query: &str) -> String {
    DownloadRequest::get(origin, path)
        .query(query)
        .key()
        .key
        .as_str()
        .to_owned()
}

#[test]
fn the_vector_is_pinned_to_the_byte() {
    assert_eq!(KEY_VERSION, 1);
    let keyed = DownloadRequest::get(ORIGIN, PATH).query("width=200").key();
    let canonical = r#"{"method":"GET","origin":"https://upload.wikimedia.org","path":"/wikipedia/commons/3/3a/Cat03.jpg","profile":"download","query":[["width","200"]],"v":1}"#;
    assert_eq!(keyed.canonical, canonical);
    assert_eq!(keyed.key.as_str(), sha256_hex(canonical.as_bytes()));
    assert_eq!(
        keyed.key.as_str(),
        "b94918836075a71cde6bff7405be903b28a585ac97819dfe35429e6cc609ce11"
    );
    assert_eq!(keyed.profile, Profile::Download);
    assert_eq!(keyed.profile.as_str(), "download");
    assert!(!keyed.profile.is_llm());
}

#[test]
fn every_part_of_the_url_and_the_method_tells_files_apart() {
    let base = key(ORIGIN, PATH, "width=200");
    for (what, other) in [
        (
            "scheme",
            key("http://upload.wikimedia.org", PATH, "width=200"),
        ),
        ("host", key("https://files.example", PATH, "width=200")),
        (
            "port",
            key("https://upload.wikimedia.org:8443", PATH, "width=200"),
        ),
        (
            "path",
            key(ORIGIN, "/wikipedia/commons/3/3a/Cat04.jpg", "width=200"),
        ),
        (
            "unnormalized path",
            key(ORIGIN, "/wikipedia//commons/3/3a/Cat03.jpg", "width=200"),
        ),
        ("query value", key(ORIGIN, PATH, "width=400")),
        ("query name", key(ORIGIN, PATH, "height=200")),
        ("no query", key(ORIGIN, PATH, "")),
    ] {
        assert_ne!(other, base, "{what}");
    }
    let head = DownloadRequest {
        method: "HEAD",
        ..DownloadRequest::get(ORIGIN, PATH).query("width=200")
    };
    assert_ne!(head.key().key.as_str(), base, "method");
}

#[test]
fn a_signed_urls_credentials_stay_out_while_two_files_stay_apart() {
    // An S3 presigned URL, an Azure SAS and a token parameter: the credentials are left out
    // (as redaction leaves them out of the stored query), so the stored URL keys back.
    let signed = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=0123abcd&sig=SASSIG&token=SECRET";
    let stripped = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host";
    let bucket = "https://bucket.s3.amazonaws.com";
    assert_eq!(
        key(bucket, "/cat.png", signed),
        key(bucket, "/cat.png", stripped)
    );
    let other_signature = signed
        .replace("0123abcd", "ffff0000")
        .replace("SECRET", "OTHER");
    assert_eq!(
        key(bucket, "/cat.png", signed),
        key(bucket, "/cat.png", &other_signature)
    );
    assert_ne!(
        key(bucket, "/cat.png", signed),
        key(bucket, "/dog.png", signed)
    );
    let keyed = DownloadRequest::get(bucket, "/cat.png").query(signed).key();
    for secret in ["0123abcd", "SASSIG", "SECRET", "AKIAEXAMPLE"] {
        assert!(
            !keyed.canonical.contains(secret),
            "{secret}: {}",
            keyed.canonical
        );
    }
    // Query order is not what a file is.
    assert_eq!(key(ORIGIN, PATH, "a=1&b=2"), key(ORIGIN, PATH, "b=2&a=1"));
}

#[test]
fn no_download_key_is_the_key_of_an_http_request() {
    // The same method, path and query as an HTTP request of any target: another material
    // (no `target`, `headers` or `body` members; an `origin`), so no existing key moves and
    // none is shared.
    for target in ["default", "download", ORIGIN] {
        let http = Request::new("GET", PATH)
            .target(target)
            .query("width=200")
            .key(&KeyConfig::default());
        assert_ne!(
            http.key.as_str(),
            key(ORIGIN, PATH, "width=200"),
            "{target}"
        );
        assert_eq!(http.profile, Profile::Http);
    }
}
