//! Secrets that reached disk or output before issue 10 (items 9 to 13), recorded end to end
//! through a `Recorder` against a scripted upstream that stands in for a vendor or a gateway
//! (LiteLLM's header habits included): every planted secret is looked for in every stored byte,
//! base64-stored bodies decoded, and the things that must survive are checked too.

mod support;

use base64::Engine;
use bytes::Bytes;
use cassette_recorder::{Cassette, Error, Mode, Recorder, RecorderConfig, Request, Route, Source};
use cassette_store::DynStore;
use cassette_tape::redact::find_credentials;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use support::{keyed_recorder, ROUTE_KEY};

const KEY: &str = "sk-proj-7Fh2Kd9Lq3Wz8Xc1Vb6Nm4Tr0Yp5Ju2Ie8Ow3Aq";

/// One scripted answer: status, headers, body, and the sizes a stream is cut into.
#[derive(Clone, Default)]
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Bytes,
    pieces: Option<usize>,
}

impl Answer {
    fn json(value: Value) -> Answer {
        Answer {
            status: 200,
            headers: vec![("content-type", "application/json".into())],
            body: Bytes::from(value.to_string()),
            pieces: None,
        }
    }
}

/// A scripted upstream on 127.0.0.1:0: the answer for each path, the requests it saw.
struct Upstream {
    url: String,
    answers: Arc<Mutex<HashMap<String, Answer>>>,
    requests: Arc<Mutex<u64>>,
}

impl Upstream {
    async fn start() -> Upstream {
        let answers: Arc<Mutex<HashMap<String, Answer>>> = Arc::default();
        let requests: Arc<Mutex<u64>> = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (script, seen) = (answers.clone(), requests.clone());
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let answer = script.lock().unwrap().get(uri.path()).cloned();
            *seen.lock().unwrap() += 1;
            async move {
                let answer = answer.unwrap_or(Answer {
                    status: 404,
                    ..Answer::default()
                });
                let mut response = axum::response::Response::builder().status(answer.status);
                for (name, value) in &answer.headers {
                    response = response.header(*name, value);
                }
                let body = match answer.pieces {
                    None => axum::body::Body::from(answer.body),
                    Some(size) => {
                        let pieces: Vec<Result<Bytes, std::io::Error>> = answer
                            .body
                            .chunks(size)
                            .map(|c| Ok(Bytes::copy_from_slice(c)))
                            .collect();
                        axum::body::Body::from_stream(futures::stream::iter(pieces))
                    }
                };
                response.body(body).unwrap()
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Upstream {
            url,
            answers,
            requests,
        }
    }

    fn answer(&self, path: &str, answer: Answer) {
        self.answers.lock().unwrap().insert(path.into(), answer);
    }

    fn requests(&self) -> u64 {
        *self.requests.lock().unwrap()
    }
}

fn recorder(mode: Mode, upstream: &Upstream, store: &DynStore) -> Recorder {
    let config = RecorderConfig {
        mode,
        routes: vec![Route::new("default", upstream.url.clone())],
        ..RecorderConfig::default()
    };
    Recorder::new(config, store.clone()).unwrap()
}

fn memory() -> DynStore {
    cassette_store::open("memory://").unwrap()
}

/// Every stored byte, with base64-stored bodies also decoded, as text to search.
async fn everything_stored(store: &DynStore) -> String {
    let mut out = String::new();
    for key in store.list("").await.unwrap() {
        let bytes = store.get(&key).await.unwrap().unwrap();
        out.push_str(&String::from_utf8_lossy(&bytes));
        let cassette = Cassette::from_document(&bytes).unwrap();
        for body in [&cassette.request.body, &cassette.response.body] {
            if let cassette_tape::document::StoredBody::Base64(b64) = body {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .unwrap();
                out.push_str(&String::from_utf8_lossy(&decoded));
            }
        }
    }
    out
}

fn assert_absent(stored: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(
            !stored.contains(secret),
            "`{secret}` reached the store:\n{stored}"
        );
    }
    assert_eq!(find_credentials(stored.as_bytes()), vec![], "{stored}");
}

fn chat_answer(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
    })
}

async fn stored_cassette(store: &DynStore, key: &cassette_keying::Key) -> Cassette {
    Cassette::from_document(&store.get(key).await.unwrap().unwrap()).unwrap()
}

/// Item 9: a key right after an escape in tool-call arguments, and in a prompt line.
#[tokio::test]
async fn keys_after_escapes_in_json_held_in_strings_are_redacted() {
    let upstream = Upstream::start().await;
    upstream.answer("/v1/chat/completions", Answer::json(chat_answer("done")));
    let store = memory();
    let arguments = json!({"script": format!("export A=1\n{KEY}\tB"), "note": "x"}).to_string();
    assert!(arguments.contains(r"\nsk-proj-"), "{arguments}");
    let request = Request::post_json(
        "/v1/chat/completions",
        &json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "user", "content": format!("line one\n{KEY}")},
                {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "run", "arguments": arguments}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": format!(r#"{{"out":"ok\u0020{KEY}"}}"#)}
            ]
        }),
    );
    recorder(Mode::Record, &upstream, &store)
        .handle(request)
        .await
        .unwrap();
    let stored = everything_stored(&store).await;
    assert_absent(&stored, &[KEY, &KEY[8..]]);
}

/// Item 10: `-F api_key=... -F file=@a.mp3`, a form-encoded token request, a binary body.
#[tokio::test]
async fn multipart_form_and_binary_bodies_keep_no_credentials() {
    let upstream = Upstream::start().await;
    upstream.answer(
        "/v1/audio/transcriptions",
        Answer::json(json!({"text": "hello tokens"})),
    );
    upstream.answer(
        "/oauth/token",
        Answer {
            status: 200,
            headers: vec![("content-type", "application/x-www-form-urlencoded".into())],
            body: Bytes::from("access_token=gho_opaqueAccessToken&token_type=bearer&scope=repo"),
            pieces: None,
        },
    );
    upstream.answer(
        "/v1/files/upload",
        Answer::json(json!({"id": "file-1", "bytes": 12})),
    );
    let store = memory();
    let rec = recorder(Mode::Record, &upstream, &store);

    let boundary = "X-BOUNDARY-9f8e7d";
    let mut multipart = Vec::new();
    for (name, value) in [
        ("api_key", "opaque-multipart-secret"),
        ("model", "whisper-1"),
    ] {
        multipart.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    multipart.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.mp3\"\r\nContent-Type: audio/mpeg\r\n\r\n").as_bytes());
    multipart.extend_from_slice(&[0xff, 0xfb, 0x90, 0x00, b' ']);
    multipart.extend_from_slice(KEY.as_bytes());
    multipart.extend_from_slice(&[0x00, 0xfe]);
    multipart.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let transcription = rec
        .handle(Request {
            headers: vec![(
                "content-type".into(),
                format!("multipart/form-data; boundary={boundary}"),
            )],
            body: Bytes::from(multipart),
            ..Request::new("POST", "/v1/audio/transcriptions")
        })
        .await
        .unwrap();

    rec.handle(Request {
        headers: vec![(
            "content-type".into(),
            "application/x-www-form-urlencoded".into(),
        )],
        body: Bytes::from("grant_type=client_credentials&client_secret=opaque-client-secret&password=opaque-password&scope=read"),
        ..Request::new("POST", "/oauth/token")
    })
    .await
    .unwrap();

    let mut binary = vec![0x00, 0x01, 0xff, b'\n'];
    binary.extend_from_slice(format!("AWS=AKIAIOSFODNN7EXAMPLE {KEY}").as_bytes());
    binary.push(0x80);
    rec.handle(Request {
        headers: vec![("content-type".into(), "application/octet-stream".into())],
        body: Bytes::from(binary),
        ..Request::new("POST", "/v1/files/upload")
    })
    .await
    .unwrap();

    let stored = everything_stored(&store).await;
    assert_absent(
        &stored,
        &[
            KEY,
            "opaque-multipart-secret",
            "opaque-client-secret",
            "opaque-password",
            "gho_opaqueAccessToken",
            "AKIAIOSFODNN7EXAMPLE",
        ],
    );
    assert!(stored.contains("client_secret=[REDACTED]&password=[REDACTED]&scope=read"));
    assert!(stored.contains("access_token=[REDACTED]&token_type=bearer&scope=repo"));
    let cassette = stored_cassette(&store, &transcription.key).await;
    let body = cassette.request.body.to_bytes().unwrap();
    assert!(body.starts_with(format!("--{boundary}\r\n").as_bytes()));
    assert!(
        body.windows(9).any(|w| w == b"whisper-1"),
        "other fields stay"
    );
    assert!(cassette.meta.request_redacted);
}

/// A header sent twice is read by its first value everywhere, as servers read it (hyper's
/// `HeaderMap::get`, Node's `content-type`): a form whose request repeats `Content-Type` is
/// redacted as the form the upstream reads. The stored headers once kept the last value, so
/// the seal took this body for plain text and stored its password.
#[tokio::test]
async fn a_repeated_content_type_is_read_by_its_first_value_when_sealing() {
    let upstream = Upstream::start().await;
    upstream.answer(
        "/oauth/token",
        Answer::json(json!({"token_type": "bearer"})),
    );
    let store = memory();
    let rec = recorder(Mode::Record, &upstream, &store);
    let outcome = rec
        .handle(Request {
            headers: vec![
                (
                    "Content-Type".into(),
                    "application/x-www-form-urlencoded".into(),
                ),
                ("content-type".into(), "text/plain".into()),
            ],
            body: Bytes::from("grant_type=password&password=opaque-repeated-password"),
            ..Request::new("POST", "/oauth/token")
        })
        .await
        .unwrap();
    let stored = everything_stored(&store).await;
    assert_absent(&stored, &["opaque-repeated-password"]);
    let cassette = stored_cassette(&store, &outcome.key).await;
    assert_eq!(
        cassette.request.headers["content-type"],
        "application/x-www-form-urlencoded"
    );
}

/// Item 11: a gateway's prefixed vendor headers and its internals are not stored.
#[tokio::test]
async fn response_headers_are_stored_from_an_allow_list() {
    let upstream = Upstream::start().await;
    let mut answer = Answer::json(chat_answer("Hi"));
    answer.headers.extend([
        ("set-cookie", "__cf_bm=opaque-cookie-1; path=/; HttpOnly".to_owned()),
        ("llm_provider-set-cookie", "_cfuvid=opaque-cookie-2; path=/".to_owned()),
        ("llm_provider-openai-organization", "org-opaqueOrg".to_owned()),
        ("x-litellm-model-api-base", "https://opaque-internal.example/v1".to_owned()),
        ("x-litellm-key-hash", "opaque-key-hash".to_owned()),
        ("www-authenticate", "Bearer realm=\"x\", token=\"opaque-www\"".to_owned()),
        ("x-upload-url", "https://up.example/u?X-Amz-Signature=opaque-sig-1".to_owned()),
        (
            "location",
            "https://files.example/f/1?X-Amz-Credential=opaque-cred&X-Amz-Signature=opaque-sig-2&token=opaque-token&part=1".to_owned(),
        ),
        ("x-request-id", "req_abc123".to_owned()),
        ("openai-processing-ms", "412".to_owned()),
        ("x-ratelimit-remaining-tokens", "149000".to_owned()),
        ("retry-after", "1".to_owned()),
    ]);
    upstream.answer("/v1/chat/completions", answer);
    let store = memory();
    let key = recorder(Mode::Record, &upstream, &store)
        .handle(Request::post_json(
            "/v1/chat/completions",
            &json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}),
        ))
        .await
        .unwrap()
        .key;
    let stored = everything_stored(&store).await;
    assert_absent(&stored, &["opaque", "org-"]);
    let headers = stored_cassette(&store, &key).await.response.headers;
    let names: Vec<&str> = headers.keys().map(String::as_str).collect();
    // The `location` leads away from the upstream: not stored at all, so that replay never
    // sends a redirect-following client out of the sandbox (issue 10, item 7).
    assert_eq!(
        names,
        [
            "content-type",
            "openai-processing-ms",
            "retry-after",
            "x-ratelimit-remaining-tokens",
            "x-request-id"
        ]
    );
    assert!(!headers.contains_key("location"));
}

/// Item 12: query credentials are neither stored nor keyed, so a replay that sends a
/// placeholder where the recording sent the real key hits the same tape.
#[tokio::test]
async fn query_credentials_leave_the_store_and_the_key() {
    let upstream = Upstream::start().await;
    let path = "/v1beta/models/gemini-2.0-flash:generateContent";
    upstream.answer(path, Answer::json(json!({"candidates": []})));
    let store = memory();
    let body = json!({"contents": [{"parts": [{"text": "Hi"}]}]});
    let with_query = |query: String| Request {
        query,
        ..Request::post_json(path, &body)
    };
    let names = [
        "key",
        "api_secret",
        "secret_key",
        "bearer",
        "credential",
        "token",
        "sig",
        "subscription-key",
        "auth",
        "access-token",
    ];
    let real: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{n}=opaque-real-{i}"))
        .collect();
    let recorded = recorder(Mode::Record, &upstream, &store)
        .handle(with_query(format!(
            "alt=json&{}&q=%3D{KEY}&h=Bearer%208f3a9c2e1b7d4f60a5e2c9b1",
            real.join("&")
        )))
        .await
        .unwrap();
    let stored = everything_stored(&store).await;
    assert_absent(&stored, &["opaque-real", KEY, "8f3a9c2e1b7d4f60a5e2c9b1"]);
    let cassette = stored_cassette(&store, &recorded.key).await;
    assert_eq!(
        cassette.request.query,
        "alt=json&q=%3D[REDACTED]&h=Bearer%20[REDACTED]"
    );

    let placeholders: Vec<String> = names.iter().map(|n| format!("{n}=placeholder")).collect();
    let replayed = recorder(Mode::Replay, &upstream, &store)
        .handle(with_query(format!(
            "{}&alt=json&q=%3D{KEY}&h=Bearer%208f3a9c2e1b7d4f60a5e2c9b1",
            placeholders.join("&")
        )))
        .await
        .unwrap();
    assert_eq!(replayed.source, Source::Replayed);
    assert_eq!(replayed.key, recorded.key);
    assert_eq!(upstream.requests(), 1);
}

/// Item 12: a key in the request path, as the model, under body names LangChain and gateways
/// use, as a Realtime client secret, and in an MCP server URL.
#[tokio::test]
async fn keys_in_the_path_model_and_named_body_members_are_redacted() {
    let upstream = Upstream::start().await;
    let key_path = format!("/v1/keys/{KEY}/usage");
    upstream.answer(&key_path, Answer::json(json!({"usage": 1})));
    upstream.answer(
        "/v1/realtime/sessions",
        Answer::json(json!({
            "id": "sess_1", "object": "realtime.session", "model": "gpt-realtime",
            "client_secret": {"value": "opaque-ephemeral-secret", "expires_at": 1_700_000_000}
        })),
    );
    upstream.answer(
        "/v1/responses",
        Answer::json(json!({"id": "resp_1", "output": []})),
    );
    let store = memory();
    let rec = recorder(Mode::Record, &upstream, &store);
    let in_path = rec.handle(Request::new("GET", &key_path)).await.unwrap();
    rec.handle(Request::post_json(
        "/v1/realtime/sessions",
        &json!({"model": KEY, "openai_api_key": "opaque-1", "auth": "opaque-2", "pwd": "opaque-3",
                "user_token": "opaque-4", "access_key": "opaque-5", "max_tokens": 4096}),
    ))
    .await
    .unwrap();
    rec.handle(Request::post_json(
        "/v1/responses",
        &json!({"model": "gpt-4.1", "input": "Summarize the password policy in 50 tokens.",
                "tools": [{"type": "mcp", "server_label": "wiki",
                           "server_url": "https://bot:opaque-mcp-password@mcp.example.com/mcp",
                           "headers": {"Authorization": "Bearer opaque-mcp-bearer-token"}}]}),
    ))
    .await
    .unwrap();
    let stored = everything_stored(&store).await;
    assert_absent(&stored, &[KEY, "opaque"]);
    assert!(stored.contains("Summarize the password policy in 50 tokens."));
    assert!(stored.contains("\"max_tokens\": 4096"));
    assert!(stored.contains("https://[REDACTED]@mcp.example.com/mcp"));
    let cassette = stored_cassette(&store, &in_path.key).await;
    assert_eq!(cassette.request.path, "/v1/keys/[REDACTED]/usage");
    assert!(cassette.meta.request_redacted);
}

/// Item 12: a key a generic stream (Gemini's `alt=sse`) sends in pieces is redacted in the
/// assembled text, and replay serves the redacted text.
#[tokio::test]
async fn a_key_split_across_stream_events_is_never_stored() {
    let upstream = Upstream::start().await;
    let path = "/v1beta/models/gemini-2.0-flash:streamGenerateContent";
    let event = |text: &str, last: bool| {
        let mut data =
            json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}}]});
        if last {
            // A Gemini stream ends with the finish reason; one without it was cut off.
            data["candidates"][0]["finishReason"] = json!("STOP");
        }
        format!("data: {data}\r\n\r\n")
    };
    let sse: String = [
        event("The key is ", false),
        event(&KEY[..14], false),
        event(&KEY[14..], false),
        event(". Done.", true),
    ]
    .concat();
    upstream.answer(
        path,
        Answer {
            status: 200,
            headers: vec![("content-type", "text/event-stream".into())],
            body: Bytes::from(sse),
            pieces: Some(7),
        },
    );
    let store = memory();
    let request = Request {
        query: "alt=sse".into(),
        ..Request::post_json(path, &json!({"contents": [{"parts": [{"text": "key?"}]}]}))
    };
    let live = recorder(Mode::Record, &upstream, &store)
        .handle(request.clone())
        .await
        .unwrap();
    let live_text =
        String::from_utf8_lossy(&live.response.into_bytes().await.unwrap()).into_owned();
    assert!(
        live_text.contains(&KEY[..14]),
        "the live client gets the real answer"
    );
    let stored = everything_stored(&store).await;
    assert_absent(&stored, &[&KEY[..14], &KEY[14..]]);

    let replayed = recorder(Mode::Replay, &upstream, &store)
        .handle(request)
        .await
        .unwrap();
    let text: String = String::from_utf8_lossy(&replayed.response.into_bytes().await.unwrap())
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|d| {
            d["candidates"][0]["content"]["parts"][0]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, "The key is [REDACTED]. Done.");
}
/// Item 13: a miss never echoes the request's credentials: not in the error's text (the 409
/// body and the stderr line are made of it), not in its fields, not in the differences.
#[tokio::test]
async fn a_miss_echoes_no_credential_of_the_request() {
    let upstream = Upstream::start().await;
    upstream.answer("/v1/chat/completions", Answer::json(chat_answer("ok")));
    let store = memory();
    let ask = |content: &str, extra: Value| {
        let mut body =
            json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]});
        if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
            body.extend(extra);
        }
        Request::post_json("/v1/chat/completions", &body)
    };
    recorder(Mode::Record, &upstream, &store)
        .handle(ask(
            "Where is my refund?",
            json!({"api_key": "opaque-recorded"}),
        ))
        .await
        .unwrap();
    let second = "sk-ant-api03-Q9x2Lm7Vb4Kp1Zt8Rw3Yc6Hn0Js5Fd2Ga9Ue4Oi7_AA";
    let missed = ask(
        &format!("Where is my refund? My key is {KEY} and {second}"),
        json!({"api_key": "opaque-live-api-key", "password": "opaque-live-pw", "model": second}),
    );
    let err = recorder(Mode::Replay, &upstream, &store)
        .handle(missed)
        .await
        .unwrap_err();
    let Error::Miss(miss) = &err else {
        panic!("expected a miss, got {err}")
    };
    let everything = format!(
        "{err}\n{}\n{}",
        serde_json::to_string(miss).unwrap(),
        miss.explanation_lines().join("\n")
    );
    for secret in [KEY, &KEY[..20], second, &second[..20], "opaque-live"] {
        assert!(
            !everything.contains(secret),
            "`{secret}` echoed:\n{everything}"
        );
    }
    assert!(
        everything.contains("body.messages[0].content"),
        "the difference is still named:\n{everything}"
    );
}

/// Item 13: the proxy's 409 body (its `message` is also the proxy's stderr line) echoes no
/// credential of the request.
#[tokio::test]
async fn the_409_body_echoes_no_credential() {
    let upstream = Upstream::start().await;
    upstream.answer("/v1/chat/completions", Answer::json(chat_answer("ok")));
    let store = memory();
    let chat = |content: &str| json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]});
    recorder(Mode::Record, &upstream, &store)
        .handle(Request::post_json(
            "/v1/chat/completions",
            &chat("Where is my refund?"),
        ))
        .await
        .unwrap();
    let proxy = cassette_recorder::proxy::spawn(
        recorder(Mode::Replay, &upstream, &store),
        &cassette_recorder::proxy::ProxyConfig::ephemeral(),
    )
    .await
    .unwrap();
    let mut body = chat(&format!("Where is my refund?\n{KEY}"));
    body["api_key"] = json!("opaque-live-api-key");
    let response = reqwest::Client::new()
        .post(format!(
            "{}/v1/keys/{KEY}/chat/completions?token=opaque-q&q=%3D{KEY}",
            proxy.url()
        ))
        .header("authorization", format!("Bearer {KEY}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    let text = response.text().await.unwrap();
    for secret in [KEY, &KEY[..20], "opaque"] {
        assert!(!text.contains(secret), "`{secret}` echoed:\n{text}");
    }
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(error["error"]["type"], "cassette_miss");
    assert_eq!(
        error["error"]["path"],
        "/v1/keys/[REDACTED]/chat/completions"
    );
    proxy.stop().await.unwrap();
}

/// Item 13: an MCP miss (the JSON-RPC error a client gets, and the log line) echoes no
/// credential from the tool's arguments.
#[tokio::test]
async fn an_mcp_miss_echoes_no_credential() {
    use cassette_recorder::mcp::{McpCall, McpRecorder, Recording, Transcript};
    let upstream = Upstream::start().await;
    let store = memory();
    let engine = |mode| McpRecorder::new(recorder(mode, &upstream, &store), "vault", "stdio:vault");
    let call = |arguments: Value| McpCall {
        id: json!(1),
        method: "tools/call".into(),
        params: Some(json!({"name": "lookup", "arguments": arguments})),
    };
    let recorded = call(json!({"query": "refund policy", "api_key": "opaque-recorded"}));
    let recording = Recording {
        notifications: vec![],
        response: json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}),
    };
    let writer = engine(Mode::Record);
    let keyed = writer.key(&recorded);
    writer
        .store(
            &recorded,
            &keyed,
            &recording,
            &Transcript::default(),
            cassette_recorder::Write::Overwrite,
        )
        .await
        .unwrap();
    let missed = call(
        json!({"query": format!("refund policy {KEY}"), "api_key": "opaque-live",
        "headers": {"Authorization": format!("Bearer {KEY}")}}),
    );
    let reader = engine(Mode::Replay);
    let miss = reader.miss(&missed, &reader.key(&missed)).await;
    let everything = format!("{miss}\n{}", miss.error_line(&json!(1)));
    for secret in [KEY, &KEY[..20], "opaque-live"] {
        assert!(
            !everything.contains(secret),
            "`{secret}` echoed:\n{everything}"
        );
    }
    assert!(
        everything.contains("params.arguments.query"),
        "{everything}"
    );
}

/// `fixture` with the last two non-empty string values of `field` (plain ones, without escapes)
/// replaced by the two halves of `KEY`, the first after a space: a provider streaming the key in
/// two pieces at the end of its answer.
fn split_key_into(fixture: &str, field: &str) -> String {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../wire/tests/fixtures")
            .join(fixture),
    )
    .unwrap();
    let needle = format!("\"{field}\":");
    let mut values = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(&needle) {
        let start = from + at + needle.len();
        let value = text[start..].trim_start();
        from = start;
        let Some(body) = value.strip_prefix('"') else {
            continue;
        };
        let open = text.len() - body.len();
        let end = open + body.find('"').unwrap();
        if end > open && !text[open..end].contains('\\') {
            values.push(open..end);
        }
    }
    let [.., first, second] = &values[..] else {
        panic!("{fixture}: fewer than two `{field}` values")
    };
    let mut out = text.clone();
    out.replace_range(second.clone(), &KEY[14..]);
    out.replace_range(first.clone(), &format!(" {}", &KEY[..14]));
    out
}

/// Issue 20: with exact stream replay, the events kept beside the final response are sealed
/// like it: a key a provider streamed in two pieces is stored in no piece, for every provider
/// stream format, and the replayed events assemble `[REDACTED]`.
#[tokio::test]
async fn a_key_split_across_exact_stream_events_is_never_stored_for_any_provider() {
    let gemini = "/v1beta/models/gemini-2.5-flash:streamGenerateContent";
    let cases = [
        (
            "openai_chat_text.sse",
            "content",
            "/v1/chat/completions",
            json!({"model": "gpt-4o-mini", "stream": true, "messages": [{"role": "user", "content": "key?"}]}),
            "",
            "text/event-stream",
        ),
        (
            "openai_responses.sse",
            "delta",
            "/v1/responses",
            json!({"model": "gpt-4.1-mini", "stream": true, "input": "key?"}),
            "",
            "text/event-stream",
        ),
        (
            "anthropic_tool_use.sse",
            "text",
            "/v1/messages",
            json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": true, "messages": [{"role": "user", "content": "key?"}]}),
            "",
            "text/event-stream",
        ),
        (
            "gemini_text.sse",
            "text",
            gemini,
            json!({"contents": [{"parts": [{"text": "key?"}]}]}),
            "alt=sse",
            "text/event-stream",
        ),
        (
            "ollama_chat.ndjson",
            "content",
            "/api/chat",
            json!({"model": "llama3.2", "messages": [{"role": "user", "content": "key?"}]}),
            "",
            "application/x-ndjson",
        ),
    ];
    for (fixture, field, path, body, query, content_type) in cases {
        let stream = split_key_into(fixture, field);
        assert!(
            stream.contains(&KEY[..14]) && stream.contains(&KEY[14..]) && !stream.contains(KEY),
            "{fixture}"
        );
        let upstream = Upstream::start().await;
        upstream.answer(
            path,
            Answer {
                status: 200,
                headers: vec![("content-type", content_type.into())],
                body: Bytes::from(stream),
                pieces: Some(9),
            },
        );
        let store = memory();
        let config = RecorderConfig {
            mode: Mode::Record,
            stream_replay: cassette_recorder::StreamReplay::Exact,
            routes: vec![Route::new("default", upstream.url.clone())],
            ..RecorderConfig::default()
        };
        let request = Request {
            query: query.into(),
            ..Request::post_json(path, &body)
        };
        let live = Recorder::new(config.clone(), store.clone())
            .unwrap()
            .handle(request.clone())
            .await
            .unwrap();
        let live = String::from_utf8_lossy(&live.response.into_bytes().await.unwrap()).into_owned();
        assert!(
            live.contains(&KEY[..14]),
            "{fixture}: the live client gets the real answer"
        );
        let keys = store.list("").await.unwrap();
        assert_eq!(keys.len(), 1, "{fixture}: recorded once");
        let cassette = stored_cassette(&store, &keys[0]).await;
        assert!(
            cassette
                .response
                .events
                .as_ref()
                .is_some_and(|e| e.len() > 2),
            "{fixture}: the events are kept"
        );
        let stored = everything_stored(&store).await;
        assert_absent(&stored, &[&KEY[..14], &KEY[14..]]);

        let replay = Recorder::new(
            RecorderConfig {
                mode: Mode::Replay,
                ..config
            },
            store.clone(),
        )
        .unwrap();
        let replayed = replay.handle(request).await.unwrap();
        let replayed =
            String::from_utf8_lossy(&replayed.response.into_bytes().await.unwrap()).into_owned();
        assert!(
            replayed.contains("[REDACTED]") && !replayed.contains(&KEY[..14]),
            "{fixture}: {replayed}"
        );
    }
}

/// Issue 35 item 6: an upstream that echoes the route's key (a 401 message, a 200 body, a
/// header, a stream that carries it across network pieces) hands the command no real key.
#[tokio::test]
async fn a_route_key_the_upstream_echoes_never_reaches_the_client() {
    let upstream = Upstream::start().await;
    let store = memory();
    let rec = keyed_recorder(&upstream.url, &store);
    let placeholder = "sk-cassette-placeholder";
    let ask = |path: &str, body: Value| {
        let mut request = Request::post_json(path, &body);
        request
            .headers
            .push(("authorization".into(), format!("Bearer {placeholder}")));
        request
    };
    let chat = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});

    upstream.answer(
        "/v1/denied",
        Answer {
            status: 401,
            headers: vec![
                ("content-type", "application/json".into()),
                ("www-authenticate", format!("Bearer realm=\"{ROUTE_KEY}\"")),
            ],
            body: Bytes::from(
                json!({"error": {"message": format!("Incorrect API key provided: {ROUTE_KEY}")}})
                    .to_string(),
            ),
            pieces: Some(5),
        },
    );
    let denied = rec.handle(ask("/v1/denied", chat.clone())).await.unwrap();
    assert_eq!(denied.response.status, 401);
    let headers = format!("{:?}", denied.response.headers);
    assert!(!headers.contains(ROUTE_KEY), "{headers}");
    let body = String::from_utf8_lossy(&denied.response.into_bytes().await.unwrap()).into_owned();
    assert!(!body.contains(ROUTE_KEY), "{body}");
    assert!(
        body.contains("Incorrect API key provided: [REDACTED]"),
        "{body}"
    );

    upstream.answer(
        "/v1/chat/completions",
        Answer::json(chat_answer(&format!("your key is {ROUTE_KEY}"))),
    );
    let whole = rec
        .handle(ask("/v1/chat/completions", chat.clone()))
        .await
        .unwrap();
    let body = String::from_utf8_lossy(&whole.response.into_bytes().await.unwrap()).into_owned();
    assert!(!body.contains(ROUTE_KEY), "{body}");
    assert!(body.contains("your key is [REDACTED]"), "{body}");

    let event = |content: &str| {
        let data = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1,
            "model": "m", "choices": [{"index": 0, "delta": {"content": content},
            "finish_reason": null}]});
        format!("data: {data}\n\n")
    };
    let sse = [
        event("key: "),
        event(ROUTE_KEY),
        event(" again "),
        event(ROUTE_KEY),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    for size in [1, 7, 40] {
        upstream.answer(
            "/v1/chat/completions",
            Answer {
                status: 200,
                headers: vec![("content-type", "text/event-stream".into())],
                body: Bytes::from(sse.clone()),
                pieces: Some(size),
            },
        );
        let mut body = chat.clone();
        body["stream"] = json!(true);
        body["n"] = json!(size);
        let streamed = rec.handle(ask("/v1/chat/completions", body)).await.unwrap();
        let text =
            String::from_utf8_lossy(&streamed.response.into_bytes().await.unwrap()).into_owned();
        assert!(!text.contains(ROUTE_KEY), "pieces of {size}: {text}");
        assert!(text.contains("[REDACTED]"), "pieces of {size}: {text}");
        assert!(
            text.ends_with("data: [DONE]\n\n"),
            "pieces of {size}: {text}"
        );
    }
    let stored = everything_stored(&store).await;
    assert_absent(&stored, &[ROUTE_KEY]);
}
