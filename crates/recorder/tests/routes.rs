//! Provider routes through the recorder: the `anthropic` route's two base-URL spellings reach
//! `/v1/messages` and share a key; Azure OpenAI deployments are keyed by the `openai.chat`
//! rules with the deployment and `api-version` in the key and the route's `api-key` as the
//! only credential upstream; a route that now points at another origin than the one a
//! cassette was recorded from does not replay it.

mod support;

use cassette_recorder::config::ApiKey;
use cassette_recorder::config::Replays;
use cassette_recorder::{Cassette, Error, Mode, Recorder, RecorderConfig, Request, Route, Source};
use cassette_store::DynStore;
use serde_json::json;
use support::{completion, fixture, FakeUpstream, Reply};

const AZURE_KEY: &str = "0123456789abcdef0123456789abcdef";

fn recorder(mode: Mode, routes: Vec<Route>, store: &DynStore) -> Recorder {
    let config = RecorderConfig {
        mode,
        routes,
        ..RecorderConfig::default()
    };
    Recorder::new(config, store.clone()).unwrap()
}

fn anthropic(path: &str) -> Request {
    Request {
        target: "anthropic".into(),
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("anthropic-version".into(), "2023-06-01".into()),
            ("x-api-key".into(), "cassette".into()),
        ],
        ..Request::post_json(
            path,
            &json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}),
        )
    }
}

#[tokio::test]
async fn both_anthropic_base_url_spellings_reach_v1_messages_with_one_key() {
    let mut fake = FakeUpstream::start().await;
    let answer: serde_json::Value =
        serde_json::from_slice(&fixture("anthropic.response.json")).unwrap();
    fake.reply("/v1/messages", Reply::json(200, answer.clone()));
    let store = cassette_store::open("memory://").unwrap();
    let url = fake.url.clone();
    let routes = || vec![Route::new("anthropic", &url)];

    // The Vercel AI SDK with ANTHROPIC_BASE_URL=<proxy>/anthropic sends /anthropic/messages.
    let recorded = recorder(Mode::Record, routes(), &store)
        .handle(anthropic("/messages"))
        .await
        .unwrap();
    assert_eq!(recorded.source, Source::Recorded);
    assert_eq!(fake.seen()[0].uri, "/v1/messages");
    let cassette =
        Cassette::from_document(&store.get(&recorded.key).await.unwrap().unwrap()).unwrap();
    assert_eq!(cassette.request.path, "/v1/messages");

    // The official SDKs send /anthropic/v1/messages: the same tape answers.
    fake.stop();
    let replayer = recorder(Mode::Replay, routes(), &store);
    for path in ["/v1/messages", "/messages"] {
        let replayed = replayer.handle(anthropic(path)).await.unwrap();
        assert_eq!(replayed.key, recorded.key, "{path}");
        assert_eq!(replayed.source, Source::Replayed);
    }
    // Only the anthropic route is rewritten.
    let elsewhere = Request {
        target: "default".into(),
        ..anthropic("/messages")
    };
    let Err(Error::Miss(miss)) = recorder(Mode::Replay, routes(), &store)
        .handle(elsewhere)
        .await
    else {
        panic!("expected a miss")
    };
    assert_eq!(miss.path, "/messages");
}

fn azure(deployment: &str, version: &str) -> Request {
    Request {
        target: "azure".into(),
        query: format!("api-version={version}"),
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("api-key".into(), "cassette".into()),
        ],
        ..Request::post_json(
            &format!("/openai/deployments/{deployment}/chat/completions"),
            &json!({"messages": [{"role": "user", "content": "Where is my refund?  "}], "temperature": 1}),
        )
    }
}

#[tokio::test]
async fn azure_deployments_are_keyed_like_openai_chat_with_the_route_key_upstream() {
    let mut fake = FakeUpstream::start().await;
    let answer: serde_json::Value =
        serde_json::from_slice(&fixture("openai_chat.response.json")).unwrap();
    let path = "/openai/deployments/gpt-4o-mini/chat/completions";
    fake.reply(path, Reply::json(200, answer));
    let store = cassette_store::open("memory://").unwrap();
    let url = fake.url.clone();
    let routes = || {
        let mut route = Route::new("azure", format!("{url}/"));
        route.api_key = ApiKey::new(AZURE_KEY);
        vec![route]
    };

    let recorded = recorder(Mode::Record, routes(), &store)
        .handle(azure("gpt-4o-mini", "2024-10-21"))
        .await
        .unwrap();
    let seen = &fake.seen()[0];
    assert_eq!(seen.uri, format!("{path}?api-version=2024-10-21"));
    assert_eq!(
        seen.headers.get("api-key").map(String::as_str),
        Some(AZURE_KEY)
    );
    assert!(!seen.headers.contains_key("authorization"));
    let document = store.get(&recorded.key).await.unwrap().unwrap();
    assert!(!String::from_utf8_lossy(&document).contains(AZURE_KEY));
    let cassette = Cassette::from_document(&document).unwrap();
    assert_eq!(cassette.meta.profile, "openai.chat");

    fake.stop();
    let replayer = recorder(Mode::Replay, routes(), &store);
    // openai.chat rules: trailing whitespace and the temperature default do not matter.
    let mut same = azure("gpt-4o-mini", "2024-10-21");
    same.body = bytes::Bytes::from(
        json!({"messages": [{"role": "user", "content": "Where is my refund?"}]}).to_string(),
    );
    assert_eq!(replayer.handle(same).await.unwrap().key, recorded.key);

    let Err(Error::Miss(miss)) = replayer.handle(azure("gpt-4o-mini", "2025-01-01")).await else {
        panic!("another api-version must miss")
    };
    assert_eq!(
        miss.explanation_lines(),
        [r#"query[0][1]: "2024-10-21" -> "2025-01-01""#],
        "{miss}"
    );
    let Err(Error::Miss(miss)) = replayer.handle(azure("gpt-4o", "2024-10-21")).await else {
        panic!("another deployment must miss")
    };
    assert_eq!(miss.path, "/openai/deployments/gpt-4o/chat/completions");
}

async fn vendor(text: &str) -> FakeUpstream {
    let fake = FakeUpstream::start().await;
    fake.reply("/v1/chat/completions", Reply::json(200, completion(text)));
    fake
}

fn ask() -> Request {
    Request::post_json(
        "/v1/chat/completions",
        &json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}),
    )
}

async fn content(outcome: cassette_recorder::Outcome) -> String {
    let body: serde_json::Value =
        serde_json::from_slice(&outcome.response.into_bytes().await.unwrap()).unwrap();
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn origin(fake: &FakeUpstream) -> &str {
    &fake.url
}

#[tokio::test]
async fn a_route_pointed_at_another_origin_does_not_replay_the_first_vendors_answer() {
    let (a, b) = (vendor("from A").await, vendor("from B").await);
    let store = cassette_store::open("memory://").unwrap();
    let at = |fake: &FakeUpstream| vec![Route::new("default", format!("{}/v1", fake.url))];
    let recorded = recorder(Mode::Record, at(&a), &store)
        .handle(ask())
        .await
        .unwrap();
    assert_eq!(content(recorded).await, "from A");

    // Replay with the route at B: a miss naming both origins, and B is never asked.
    let err = recorder(Mode::Replay, at(&b), &store)
        .handle(ask())
        .await
        .unwrap_err();
    let Error::Miss(miss) = &err else {
        panic!("expected a miss, got {err}")
    };
    let summary = &miss.explanation.summary;
    assert!(
        summary.contains(&format!("recorded from {}", origin(&a)))
            && summary.contains(&format!("now points at {}", origin(&b))),
        "{summary}"
    );
    assert_eq!(b.requests(), 0);

    // Auto with the route at B: B is asked, its answer is given and replaces A's (twice: the
    // hit path with its cache, then the lookup).
    let auto = recorder(Mode::Auto, at(&b), &store);
    let first = auto.handle(ask()).await.unwrap();
    assert_eq!(first.source, Source::Recorded);
    assert_eq!(content(first).await, "from B");
    let again = auto.handle(ask()).await.unwrap();
    assert_eq!(again.source, Source::Replayed);
    assert_eq!(content(again).await, "from B");
    assert_eq!(b.requests(), 1);

    // Now A's route is the other one; a built-in route nobody named replays any origin's.
    let err = recorder(Mode::Replay, at(&a), &store)
        .handle(ask())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("recorded from {}", origin(&b))),
        "{err}"
    );
    let mut built_in = Route::new("default", "https://api.openai.com/v1");
    built_in.replays = Replays::AnyOrigin;
    let replayed = recorder(Mode::Replay, vec![built_in], &store)
        .handle(ask())
        .await
        .unwrap();
    assert_eq!(content(replayed).await, "from B");
    assert_eq!(a.requests(), 1);
}
