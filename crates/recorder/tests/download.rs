//! Downloads (a file fetched from a host no route serves, as a vcrpy tape holds it): imported
//! as a recording of that host under the `download` key, stored byte for byte without the
//! credentials of its URL, served in every mode, compared with what is stored like any import,
//! and never answered for another URL or another method.

use bytes::Bytes;
use cassette_recorder::{
    download_key, Download, Imported, Mode, Recorder, RecorderConfig, Scope, Source, Write,
};
use cassette_store::DynStore;
use std::sync::Arc;

/// Every byte value behind a PNG signature: no text.
fn image() -> Bytes {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend((0..=255u8).cycle().take(1024));
    Bytes::from(bytes)
}

const SIGNED: &str = "https://bucket.s3.amazonaws.com/cats/cat.png?X-Amz-Date=20260101T000000Z&X-Amz-Signature=AMZSIG0123456789&token=SECRETTOKEN0123";

fn download(url: &str, body: Bytes) -> Download {
    Download {
        method: "GET".into(),
        url: url::Url::parse(url).unwrap(),
        status: 200,
        headers: vec![
            ("Content-Type".into(), "image/png".into()),
            ("Set-Cookie".into(), "session=COOKIESECRET".into()),
        ],
        body,
        recorded_at: "2026-01-01T00:00:00Z".into(),
        tool: "vcrpy".into(),
        test: Some("tests/test_vision.py::test_cat".into()),
        source: Some("tests/cassettes/test_vision/test_cat.yaml interaction 1".into()),
    }
}

fn recorder(mode: Mode, store: &DynStore) -> Recorder {
    let config = RecorderConfig {
        mode,
        ..RecorderConfig::default()
    };
    Recorder::new(config, store.clone()).unwrap()
}

fn url(text: &str) -> url::Url {
    url::Url::parse(text).unwrap()
}

#[tokio::test]
async fn an_imported_download_is_stored_without_its_credentials_and_served_in_every_mode() {
    let store: DynStore = Arc::new(cassette_store::memory::MemoryStore::new());
    let importer = recorder(Mode::Record, &store);
    let (key, imported) = importer
        .import_download(download(SIGNED, image()), Write::CreateOnly)
        .await
        .unwrap();
    assert_eq!(imported, Imported::Stored);
    assert_eq!(key, download_key("GET", &url(SIGNED)));
    let document = store.get(&key).await.unwrap().expect("stored");
    let text = String::from_utf8(document.to_vec()).unwrap();
    for secret in ["AMZSIG", "SECRETTOKEN", "COOKIESECRET"] {
        assert!(!text.contains(secret), "{secret}: {text}");
    }
    let cassette = cassette_recorder::Cassette::from_document(&document).unwrap();
    assert!(cassette.is_download());
    assert_eq!(cassette.target, "https://bucket.s3.amazonaws.com");
    assert_eq!(cassette.request.query, "X-Amz-Date=20260101T000000Z");
    // The stored request keys back to the key (`cassette verify`).
    let config = cassette_keying::KeyConfig::default();
    assert_eq!(cassette.keyed_request(&config).key, key);

    // The same file again is kept; another file under the same URL is a conflict.
    let again = importer
        .import_download(download(SIGNED, image()), Write::CreateOnly)
        .await
        .unwrap();
    assert_eq!(again.1, Imported::Same);
    let other = importer
        .import_download(
            download(SIGNED, Bytes::from_static(b"GIF89a")),
            Write::CreateOnly,
        )
        .await
        .unwrap();
    assert!(matches!(other.1, Imported::Conflict { .. }), "{other:?}");

    // Served in every mode, with another signature (the credential is not the file).
    let resigned = SIGNED
        .replace("AMZSIG0123456789", "OTHERSIG")
        .replace("SECRETTOKEN0123", "T2");
    for mode in [Mode::Replay, Mode::Auto, Mode::Record, Mode::Off] {
        let served = recorder(mode, &store)
            .download("GET", &url(&resigned), &[], &Scope::default())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{mode:?}: served"));
        assert_eq!(served.source, Source::Replayed, "{mode:?}");
        assert_eq!(served.key, key, "{mode:?}");
        assert_eq!(served.response.status, 200);
        let content_type = served
            .response
            .headers
            .iter()
            .find(|(n, _)| n == "content-type")
            .map(|(_, v)| v.as_str());
        assert_eq!(content_type, Some("image/png"), "{mode:?}");
        assert_eq!(served.response.into_bytes().await.unwrap(), image());
    }

    // Another file of the host, another port, or another method: nothing holds it.
    let replay = recorder(Mode::Replay, &store);
    for (method, other) in [
        ("GET", SIGNED.replace("cat.png", "dog.png")),
        (
            "GET",
            SIGNED.replace("amazonaws.com/", "amazonaws.com:8443/"),
        ),
        (
            "GET",
            SIGNED.replace("X-Amz-Date=20260101T000000Z", "X-Amz-Date=20260102T000000Z"),
        ),
        ("POST", SIGNED.to_owned()),
        ("HEAD", SIGNED.to_owned()),
    ] {
        let answer = replay
            .download(method, &url(&other), &[], &Scope::default())
            .await
            .unwrap();
        assert!(answer.is_none(), "{method} {other}");
    }
}
