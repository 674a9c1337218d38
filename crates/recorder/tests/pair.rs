//! Pairing a re-record (`miss::pair`): each new recording with the old one a miss of its
//! request would name as nearest, one to one, within a distance; never across paths.

use bytes::Bytes;
use cassette_keying::KeyConfig;
use cassette_recorder::miss::pair;
use cassette_recorder::{Cassette, Exchange, Mode, Recorder, RecorderConfig, Request, Route};
use cassette_store::DynStore;
use serde_json::json;
use std::sync::Arc;

fn chat(path: &str, system: &str, prompt: &str) -> Request {
    Request::post_json(
        path,
        &json!({"model": "m", "temperature": 0,
                "messages": [{"role": "system", "content": system},
                             {"role": "user", "content": prompt}]}),
    )
}

/// The cassettes of `requests`, recorded (imported: nothing is sent) into a store of their own.
async fn recorded(requests: Vec<Request>) -> Vec<Cassette> {
    let store: DynStore = Arc::new(cassette_store::memory::MemoryStore::new());
    let config = RecorderConfig {
        mode: Mode::Record,
        routes: vec![Route::new("default", "http://127.0.0.1:9")],
        ..RecorderConfig::default()
    };
    let recorder = Recorder::new(config, store.clone()).unwrap();
    let mut keys = Vec::new();
    for request in requests {
        let exchange = Exchange {
            request,
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Bytes::from(r#"{"choices":[{"message":{"content":"ok"}}]}"#),
            upstream: "https://api.openai.com".into(),
            recorded_at: "2026-01-01T00:00:00Z".into(),
            tool: "test".into(),
            occurrence: 1,
            test: None,
            source: None,
        };
        let (key, _) = recorder
            .import(exchange, cassette_recorder::Write::Overwrite)
            .await
            .unwrap();
        keys.push(key);
    }
    let mut out = Vec::new();
    for key in keys {
        let bytes = store.get(&key).await.unwrap().unwrap();
        out.push(Cassette::from_document(&bytes).unwrap());
    }
    out
}

fn questions(system: &str) -> Vec<Request> {
    [
        "Where is my refund for order 1?",
        "Where is my refund for order 2?",
        "Translate this email into French, please.",
        "What is the capital of France?",
    ]
    .iter()
    .map(|q| chat("/v1/chat/completions", system, q))
    .collect()
}

#[tokio::test]
async fn each_new_recording_finds_its_own_old_one() {
    let old = recorded(questions("You are a support agent.")).await;
    let new = recorded(questions("You are a kind support agent.")).await;
    // Listed in another order: pairing is by request, not by position.
    let mut shuffled = new.clone();
    shuffled.reverse();
    let pairs = pair(&old, &shuffled, &KeyConfig::default(), 2.5).await;
    assert_eq!(pairs.len(), 4, "{pairs:?}");
    for (i, p) in pairs.iter().enumerate() {
        // In the order of `new`, each with the old recording of the same question.
        assert_eq!(p.new, shuffled[i].key);
        let j = new.iter().position(|c| c.key == p.new).unwrap();
        assert_eq!(p.old, old[j].key, "pair {i}");
        // The system prompt's text differs, shown once (its hash is left out).
        let paths: Vec<&str> = p.differences.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["body.messages[0].content"], "{p:?}");
        assert!(p.distance > 1.0 && p.distance < 2.0, "{p:?}");
    }
}

#[tokio::test]
async fn pairs_are_one_to_one_and_within_the_distance() {
    let system = "You are a support agent.";
    let old = recorded(vec![chat(
        "/v1/chat/completions",
        system,
        "Where is my refund for order 1?",
    )])
    .await;
    let new = recorded(vec![
        chat(
            "/v1/chat/completions",
            system,
            "Where is my refund for order 7?",
        ),
        chat(
            "/v1/chat/completions",
            system,
            "Where is my refund for order 1, please?",
        ),
    ])
    .await;
    let pairs = pair(&old, &new, &KeyConfig::default(), 2.5).await;
    // Both are nearest to the one old recording: the nearer one gets it.
    assert_eq!(pairs.len(), 1, "{pairs:?}");
    assert_eq!(
        (pairs[0].old.clone(), pairs[0].new.clone()),
        (old[0].key.clone(), new[0].key.clone())
    );
    assert_eq!(
        pairs[0].differences[0].path, "body.messages[1].content",
        "{pairs:?}"
    );
    // Nothing within the distance: no pair at all.
    assert!(pair(&old, &new, &KeyConfig::default(), 0.01)
        .await
        .is_empty());
    // Another path (another profile, another upstream API) is never a pair.
    let elsewhere = recorded(vec![chat(
        "/v1/responses",
        system,
        "Where is my refund for order 1?",
    )])
    .await;
    assert!(pair(&old, &elsewhere, &KeyConfig::default(), 100.0)
        .await
        .is_empty());
    assert!(pair(&[], &new, &KeyConfig::default(), 100.0)
        .await
        .is_empty());
}

/// Two old recordings equally near, recorded in the same second: the nearest is the same one
/// every time (the one with the smaller key), not whichever a hash map lists first. A miss
/// explanation and a review that changed from run to run would read as drift that is not there.
#[tokio::test]
async fn a_tie_is_broken_the_same_way_every_time() {
    let system = "You are a support agent.";
    let old = recorded(vec![
        chat("/v1/chat/completions", system, "Question alpha"),
        chat("/v1/chat/completions", system, "Question gamma"),
    ])
    .await;
    let new = recorded(vec![chat("/v1/chat/completions", system, "Question delta")]).await;
    let smaller = old.iter().map(|c| c.key.clone()).min().unwrap();
    for round in 0..24 {
        let pairs = pair(&old, &new, &KeyConfig::default(), 10.0).await;
        assert_eq!(pairs.len(), 1, "{pairs:?}");
        assert_eq!(pairs[0].old, smaller, "round {round}: {pairs:?}");
    }
}

/// `replaced`: a re-record's old recording may still be in the new set; the same test's
/// recording comes first, and two tests' recordings are never one re-record.
#[tokio::test]
async fn a_rerecord_is_paired_with_what_it_replaces_even_when_that_is_kept() {
    use cassette_recorder::miss::replaced;
    use cassette_review::PairedBy;
    use std::collections::HashSet;
    let system = "Be brief.";
    let path = "/v1/chat/completions";
    let tested = |mut c: Cassette, test: Option<&str>| {
        c.meta.test = test.map(str::to_owned);
        c
    };
    let old = recorded(vec![
        chat(path, system, "What is the capital of France?"),
        chat(path, system, "Name the largest city of Germany, please."),
        chat(path, system, "Translate this email into French, please."),
    ])
    .await;
    let old = vec![
        tested(old[0].clone(), Some("t1")),
        tested(old[1].clone(), Some("t2")),
        tested(old[2].clone(), None),
    ];
    let new = recorded(vec![
        // Nearest to t1's recording, but t2 made it: it replaces t2's.
        chat(path, system, "What is the capital of France, please?"),
        // No test named: the nearest request, kept in the new set.
        chat(path, system, "Translate this email into German, please."),
        // Near t1's recording, but made by a third test: nothing it replaces.
        chat(path, system, "What is the capital of Spain?"),
    ])
    .await;
    let new = vec![
        tested(new[0].clone(), Some("t2")),
        tested(new[1].clone(), None),
        tested(new[2].clone(), Some("t3")),
    ];
    // Every old recording is still in the new set.
    let kept: HashSet<_> = old.iter().map(|c| c.key.clone()).collect();
    let found = replaced(&old, &kept, &new, &KeyConfig::default(), 2.5).await;
    let seen: Vec<_> = found
        .iter()
        .map(|r| (r.paired.old.clone(), r.paired.new.clone(), r.by))
        .collect();
    assert_eq!(
        seen,
        [
            (old[1].key.clone(), new[0].key.clone(), PairedBy::SameTest),
            (old[2].key.clone(), new[1].key.clone(), PairedBy::Nearest),
        ],
        "{found:?}"
    );
    // Without the old recordings kept, the untested new one still pairs, the same way.
    let found = replaced(
        &old,
        &HashSet::new(),
        &new[1..2],
        &KeyConfig::default(),
        2.5,
    )
    .await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].paired.old, old[2].key);
}
