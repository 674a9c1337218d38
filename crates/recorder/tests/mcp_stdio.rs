//! The MCP stdio engine: record, replay, auto and off against a fake MCP server (an in-process
//! stand-in for a tool server, or a small `sh` script where a real process matters), driven
//! through in-memory pipes the way an MCP client drives `cassette mcp`.

use cassette_keying::KeyConfig;
use cassette_recorder::mcp::stdio::{
    self, Ending, ServerCommand, ServerIo, ServerLauncher, StdioOptions, StdioReport,
};
use cassette_recorder::mcp::{McpMiss, McpRecorder};
use cassette_recorder::{Cassette, ErrorRecording, Mode, Recorder, RecorderConfig};
use cassette_store::memory::MemoryStore;
use cassette_store::DynStore;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::task::JoinHandle;

const PIPE: usize = 1 << 16;
const WAIT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// A fake MCP server, in process.
// ---------------------------------------------------------------------------------------------

/// What the fake server saw and did, shared with the test.
#[derive(Default)]
struct FakeState {
    starts: AtomicU64,
    calls: AtomicU64,
    received: Mutex<Vec<Value>>,
}

/// Launches in-process fake servers. Tools:
/// * `count {label}`: a log notification, a progress notification when asked, then
///   `label: N` with N counting the calls of all servers started so far;
/// * `die`: the server ends without answering;
/// * `garbage`: a line that is not JSON, then an answer;
/// * `huge {size}`: an answer of about `size` bytes;
/// * `fail`: a JSON-RPC error.
#[derive(Clone, Default)]
struct FakeServer {
    state: Arc<FakeState>,
}

impl FakeServer {
    fn starts(&self) -> u64 {
        self.state.starts.load(Ordering::SeqCst)
    }

    fn received(&self) -> Vec<Value> {
        self.state.received.lock().unwrap().clone()
    }
}

impl ServerLauncher for FakeServer {
    fn launch(&self) -> std::io::Result<ServerIo> {
        self.state.starts.fetch_add(1, Ordering::SeqCst);
        let (engine_side_in, server_in) = tokio::io::duplex(PIPE);
        let (server_out, engine_side_out) = tokio::io::duplex(PIPE);
        tokio::spawn(run_fake(self.state.clone(), server_in, server_out));
        Ok(ServerIo {
            stdin: Box::pin(engine_side_in),
            stdout: Box::pin(engine_side_out),
            child: None,
        })
    }

    fn describe(&self) -> String {
        "fake-server --stdio".into()
    }
}

async fn run_fake(state: Arc<FakeState>, input: DuplexStream, mut output: DuplexStream) {
    let mut lines = BufReader::new(input).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let message: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(_) => continue,
        };
        state.received.lock().unwrap().push(message.clone());
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        let method = message["method"].as_str().unwrap_or_default();
        let params = &message["params"];
        let mut out: Vec<String> = Vec::new();
        let result = match method {
            "initialize" => {
                json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}})
            }
            "tools/list" => {
                json!({"tools": [{"name": "count", "inputSchema": {"type": "object"}}]})
            }
            "ping" => json!({}),
            "tools/call" => match params["name"].as_str().unwrap_or_default() {
                "count" => {
                    let n = state.calls.fetch_add(1, Ordering::SeqCst) + 1;
                    out.push(json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": format!("counting {n}")}}).to_string());
                    if let Some(token) = params["_meta"].get("progressToken") {
                        out.push(json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1, "total": 1}}).to_string());
                    }
                    let label = params["arguments"]["label"].as_str().unwrap_or("?");
                    json!({"content": [{"type": "text", "text": format!("{label}: {n}")}]})
                }
                "die" => return,
                "garbage" => {
                    out.push("this is not JSON".to_owned());
                    json!({"content": [{"type": "text", "text": "after garbage"}]})
                }
                "huge" => {
                    let size = params["arguments"]["size"].as_u64().unwrap_or(1000) as usize;
                    json!({"content": [{"type": "text", "text": "x".repeat(size)}]})
                }
                "huge-id-last" => {
                    // Its id after a long result, as a server may order its members.
                    let size = params["arguments"]["size"].as_u64().unwrap_or(1000) as usize;
                    let text = "x".repeat(size);
                    let line = format!(
                        r#"{{"jsonrpc":"2.0","result":{{"content":[{{"type":"text","text":"{text}"}}]}},"id":{id}}}"#
                    );
                    if write_line(&mut output, &line).await.is_err() {
                        return;
                    }
                    continue;
                }
                "secret" => {
                    json!({"content": [{"type": "text", "text": "ok"}], "token": "tok-abcdef"})
                }
                "fail" => {
                    let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "database down"}});
                    out.push(error.to_string());
                    for line in out {
                        if write_line(&mut output, &line).await.is_err() {
                            return;
                        }
                    }
                    continue;
                }
                other => {
                    json!({"content": [{"type": "text", "text": format!("unknown tool {other}")}], "isError": true})
                }
            },
            other => json!({"unknown": other}),
        };
        out.push(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string());
        for line in out {
            if write_line(&mut output, &line).await.is_err() {
                return;
            }
        }
    }
}

async fn write_line(output: &mut DuplexStream, line: &str) -> std::io::Result<()> {
    output.write_all(line.as_bytes()).await?;
    output.write_all(b"\n").await?;
    output.flush().await
}

/// A launcher that must never be used: replay never starts a server.
struct NoServer;

impl ServerLauncher for NoServer {
    fn launch(&self) -> std::io::Result<ServerIo> {
        panic!("replay started the server")
    }

    fn describe(&self) -> String {
        "no-server".into()
    }
}

// ---------------------------------------------------------------------------------------------
// The client side.
// ---------------------------------------------------------------------------------------------

struct Client {
    to_engine: DuplexStream,
    from_engine: tokio::io::Lines<BufReader<DuplexStream>>,
    session: JoinHandle<cassette_recorder::Result<StdioReport>>,
}

impl Client {
    async fn send(&mut self, message: Value) {
        self.send_raw(message.to_string().as_bytes()).await;
    }

    async fn send_raw(&mut self, line: &[u8]) {
        self.to_engine.write_all(line).await.unwrap();
        self.to_engine.write_all(b"\n").await.unwrap();
        self.to_engine.flush().await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = self.recv_line().await;
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    async fn recv_line(&mut self) -> String {
        tokio::time::timeout(WAIT, self.from_engine.next_line())
            .await
            .expect("an answer in time")
            .expect("readable")
            .expect("an answer, not the end")
    }

    /// Sends a request and returns everything up to and including its response.
    async fn call(&mut self, id: Value, method: &str, params: Value) -> Vec<Value> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let mut out = Vec::new();
        loop {
            let message = self.recv().await;
            let done = message.get("id") == Some(&id) && message.get("method").is_none();
            out.push(message);
            if done {
                return out;
            }
        }
    }

    /// Closes the session and returns its report and every message sent after the last one
    /// read.
    async fn close_reading_the_rest(mut self) -> (StdioReport, Vec<Value>) {
        drop(std::mem::replace(
            &mut self.to_engine,
            tokio::io::duplex(1).0,
        ));
        let mut rest = Vec::new();
        let read_all = async {
            while let Ok(Some(line)) = self.from_engine.next_line().await {
                rest.push(serde_json::from_str(&line).unwrap());
            }
        };
        tokio::time::timeout(WAIT, read_all)
            .await
            .expect("the output ends");
        let report = tokio::time::timeout(WAIT, self.session)
            .await
            .expect("the session ends")
            .expect("no panic")
            .expect("no error");
        (report, rest)
    }

    async fn close(self) -> StdioReport {
        drop(self.to_engine);
        tokio::time::timeout(WAIT, self.session)
            .await
            .expect("the session ends")
            .expect("no panic")
            .expect("no error")
    }
}

fn recorder(mode: Mode, store: &DynStore) -> Recorder {
    recorder_with(mode, store, RecorderConfig::default())
}

fn recorder_with(mode: Mode, store: &DynStore, config: RecorderConfig) -> Recorder {
    Recorder::new(RecorderConfig { mode, ..config }, store.clone()).unwrap()
}

fn session(engine: McpRecorder, launcher: Arc<dyn ServerLauncher>) -> Client {
    session_with(engine, launcher, StdioOptions::default())
}

fn session_with(
    engine: McpRecorder,
    launcher: Arc<dyn ServerLauncher>,
    options: StdioOptions,
) -> Client {
    let (to_engine, engine_in) = tokio::io::duplex(PIPE);
    let (engine_out, from_engine) = tokio::io::duplex(PIPE);
    let session = tokio::spawn(stdio::serve(
        engine, launcher, engine_in, engine_out, options,
    ));
    Client {
        to_engine,
        from_engine: BufReader::new(from_engine).lines(),
        session,
    }
}

fn memory_store() -> DynStore {
    Arc::new(MemoryStore::new())
}

fn engine(mode: Mode, store: &DynStore) -> McpRecorder {
    McpRecorder::new(recorder(mode, store), "fake", "stdio:fake-server")
}

fn count(label: &str) -> Value {
    json!({"name": "count", "arguments": {"label": label}})
}

fn initialize() -> Value {
    json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test-client", "version": "1.0"}})
}

/// Records a session: initialize, tools/list, two counts (the second with a progress token).
async fn record_session(store: &DynStore, server: &FakeServer) -> Vec<Vec<Value>> {
    let mut client = session(engine(Mode::Record, store), Arc::new(server.clone()));
    let mut answers = Vec::new();
    answers.push(client.call(json!(1), "initialize", initialize()).await);
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    answers.push(client.call(json!(2), "tools/list", json!({})).await);
    answers.push(client.call(json!(3), "tools/call", count("a")).await);
    let with_token =
        json!({"name": "count", "arguments": {"label": "b"}, "_meta": {"progressToken": 17}});
    answers.push(client.call(json!(4), "tools/call", with_token).await);
    let report = client.close().await;
    assert_eq!(report.ending, Ending::ClientClosed);
    assert_eq!(report.stats.server_starts, 1);
    answers
}

// ---------------------------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn replay_answers_with_the_clients_ids_and_the_recorded_notifications_in_order() {
    let store = memory_store();
    let server = FakeServer::default();
    let recorded = record_session(&store, &server).await;
    assert_eq!(
        recorded[2].last().unwrap()["result"]["content"][0]["text"],
        "a: 1"
    );
    assert_eq!(
        recorded[3].len(),
        3,
        "log, progress, answer: {:?}",
        recorded[3]
    );
    let keys = store.list("").await.unwrap();
    assert_eq!(keys.len(), 4);
    // `cassette verify` recomputes every key from the stored request, with the mcp profile.
    for key in &keys {
        let document = store.get(key).await.unwrap().unwrap();
        let cassette = Cassette::from_document(&document).unwrap();
        assert!(!cassette.meta.request_redacted);
        let recomputed = cassette.keyed_request(&KeyConfig::default()).key;
        assert_eq!(&recomputed, key);
    }

    let replay = engine(Mode::Replay, &store);
    let stats = replay.recorder().clone();
    let mut client = session(replay, Arc::new(NoServer));
    let init = client.call(json!("i-1"), "initialize", initialize()).await;
    assert_eq!(init.len(), 1);
    assert_eq!(init[0]["id"], "i-1");
    assert_eq!(init[0]["result"]["serverInfo"]["name"], "fake");
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let first = client.call(json!(90), "tools/call", count("a")).await;
    assert_eq!(first.len(), 2, "{first:?}");
    assert_eq!(first[0]["method"], "notifications/message");
    assert_eq!(first[0]["params"]["data"], "counting 1");
    assert_eq!(first[1]["id"], 90);
    assert_eq!(first[1]["result"]["content"][0]["text"], "a: 1");

    // Another progress token: the replayed progress carries the client's token.
    let with_token =
        json!({"name": "count", "arguments": {"label": "b"}, "_meta": {"progressToken": "tok-x"}});
    let second = client.call(json!("z"), "tools/call", with_token).await;
    assert_eq!(second.len(), 3, "{second:?}");
    assert_eq!(second[0]["params"]["data"], "counting 2");
    assert_eq!(second[1]["method"], "notifications/progress");
    assert_eq!(second[1]["params"]["progressToken"], "tok-x");
    assert_eq!(second[2]["id"], "z");
    assert_eq!(second[2]["result"]["content"][0]["text"], "b: 2");

    // Without a progress token, no progress is sent.
    let again = client.call(json!(91), "tools/call", count("b")).await;
    assert_eq!(again.len(), 2, "{again:?}");
    assert_eq!(again[1]["result"]["content"][0]["text"], "b: 2");

    let report = client.close().await;
    assert_eq!(report.stats.server_starts, 0);
    assert_eq!(report.stats.requests, 4);
    assert_eq!(stats.stats().hits, 4);
    assert_eq!(stats.stats().misses, 0);
    assert_eq!(server.starts(), 1, "only the recording started the server");
}

#[tokio::test]
async fn a_miss_is_a_json_rpc_error_naming_the_tool_and_the_changed_argument() {
    let store = memory_store();
    record_session(&store, &FakeServer::default()).await;
    let seen: Arc<Mutex<Vec<McpMiss>>> = Arc::default();
    let hook_seen = seen.clone();
    let replay = engine(Mode::Replay, &store).with_miss_hook(Arc::new(move |miss: &McpMiss| {
        hook_seen.lock().unwrap().push(miss.clone())
    }));
    let recorder = replay.recorder().clone();
    let mut client = session(replay, Arc::new(NoServer));
    let answer = client.call(json!(5), "tools/call", count("zzz")).await;
    assert_eq!(answer.len(), 1);
    let error = &answer[0]["error"];
    assert_eq!(answer[0]["id"], 5);
    assert_eq!(error["code"], -32090);
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("tool `count`"), "{message}");
    assert!(message.contains("params.arguments.label"), "{message}");
    assert!(message.contains("\"zzz\""), "{message}");
    assert!(message.contains("server `fake`"), "{message}");
    let key = error["data"]["key"].as_str().unwrap();
    assert_eq!(key.len(), 64);
    assert!(message.contains(key), "{message}");
    assert_eq!(error["data"]["type"], "cassette_miss");
    assert_eq!(error["data"]["method"], "tools/call");
    assert_eq!(error["data"]["subject"], "count");

    // A method never recorded says so.
    let none = client.call(json!(6), "prompts/list", json!({})).await;
    let message = none[0]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("Nothing is recorded for prompts/list"),
        "{message}"
    );

    client.close().await;
    assert_eq!(recorder.stats().misses, 2);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].key, key);
}

#[tokio::test]
async fn replay_accepts_notifications_and_answers_pings_without_a_recording() {
    let store = memory_store();
    let mut client = session(engine(Mode::Replay, &store), Arc::new(NoServer));
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}))
        .await;
    // The client's answer to a server request nobody sent is dropped too.
    client
        .send(json!({"jsonrpc": "2.0", "id": "s-1", "result": {}}))
        .await;
    let pong = client.call(json!(1), "ping", json!({})).await;
    assert_eq!(pong, [json!({"jsonrpc": "2.0", "id": 1, "result": {}})]);
    let report = client.close().await;
    assert_eq!(report.stats.notifications, 2);
    assert_eq!(report.stats.server_starts, 0);
}

#[tokio::test]
async fn malformed_lines_get_json_rpc_errors_and_the_session_goes_on() {
    let store = memory_store();
    record_session(&store, &FakeServer::default()).await;
    let mut client = session(engine(Mode::Replay, &store), Arc::new(NoServer));
    client.send_raw(b"{not json").await;
    let parse = client.recv().await;
    assert_eq!(parse["error"]["code"], -32700);
    assert_eq!(parse["id"], Value::Null);
    client.send_raw(br#"{"jsonrpc":"2.0","id":7}"#).await;
    let invalid = client.recv().await;
    assert_eq!(invalid["error"]["code"], -32600);
    assert_eq!(invalid["id"], 7);
    client
        .send_raw(br#"[{"jsonrpc":"2.0","id":8,"method":"ping"}]"#)
        .await;
    let batch = client.recv().await;
    assert_eq!(batch["error"]["code"], -32600);
    assert!(batch["error"]["message"]
        .as_str()
        .unwrap()
        .contains("batches"));
    client.send_raw(b"").await;
    let empty = client.recv().await;
    assert_eq!(empty["error"]["code"], -32700);
    let answer = client.call(json!(9), "tools/call", count("a")).await;
    assert_eq!(
        answer.last().unwrap()["result"]["content"][0]["text"],
        "a: 1"
    );
    let report = client.close().await;
    assert_eq!(report.stats.errors, 4);
}

#[tokio::test]
async fn a_client_line_over_the_limit_is_refused_without_buffering_it() {
    let store = memory_store();
    record_session(&store, &FakeServer::default()).await;
    let options = StdioOptions {
        max_message: 4096,
        ..StdioOptions::default()
    };
    let mut client = session_with(engine(Mode::Replay, &store), Arc::new(NoServer), options);
    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": count(&"x".repeat(1 << 20))});
    client.send(huge).await;
    let refused = client.recv().await;
    assert_eq!(refused["error"]["code"], -32603);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("over the limit of 4096 bytes"),
        "{message}"
    );
    // The rest of the long line was skipped, not read as messages.
    let answer = client.call(json!(2), "tools/call", count("a")).await;
    assert_eq!(answer.len(), 2);
    client.close().await;
}

#[tokio::test]
async fn a_server_line_over_the_limit_is_passed_on_whole_and_not_recorded() {
    let store = memory_store();
    let options = StdioOptions {
        max_message: 4096,
        ..StdioOptions::default()
    };
    let server = FakeServer::default();
    let engine = engine(Mode::Record, &store);
    let recorder = engine.recorder().clone();
    let mut client = session_with(engine, Arc::new(server), options);
    // Issue 25, item 10: the long answer answered its call, which the end of the session then
    // answered a second time as one the server never answered; whether the id comes first or
    // after the long result.
    for (id, tool) in [(json!(1), "huge"), (json!("call-2"), "huge-id-last")] {
        let huge = json!({"name": tool, "arguments": {"size": 200_000}});
        let answer = client.call(id.clone(), "tools/call", huge).await;
        assert_eq!(answer.len(), 1, "{tool}");
        let text = answer[0]["result"]["content"][0]["text"].as_str().unwrap();
        assert_eq!(text.len(), 200_000);
    }
    // The relay still works after it, and records what fits.
    let small = client.call(json!(3), "tools/call", count("a")).await;
    assert_eq!(small.last().unwrap()["id"], 3);
    let (report, rest) = client.close_reading_the_rest().await;
    assert!(rest.is_empty(), "one response per id: {rest:?}");
    assert_eq!(report.stats.errors, 0);
    assert_eq!(
        store.list("").await.unwrap().len(),
        1,
        "only the small answer"
    );
    let failures = recorder.recording_failures();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[1].reason.contains("over the limit of 4096 bytes"),
        "{}",
        failures[1]
    );
}

#[tokio::test]
async fn a_server_that_dies_mid_call_fails_the_call_and_records_nothing() {
    let store = memory_store();
    let server = FakeServer::default();
    let mut client = session(engine(Mode::Record, &store), Arc::new(server));
    client.call(json!(1), "tools/call", count("a")).await;
    let died = client
        .call(
            json!(2),
            "tools/call",
            json!({"name": "die", "arguments": {}}),
        )
        .await;
    let error = &died[0]["error"];
    assert_eq!(error["code"], -32603);
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("fake-server --stdio"), "{message}");
    assert!(message.contains("before answering tools/call"), "{message}");
    assert!(message.contains("nothing was recorded"), "{message}");
    let report = tokio::time::timeout(WAIT, client.session)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(report.ending, Ending::ServerExited);
    assert_eq!(report.stats.errors, 1);
    assert_eq!(
        store.list("").await.unwrap().len(),
        1,
        "only the answered call"
    );
}

#[tokio::test]
async fn a_server_line_that_is_not_json_is_passed_on_and_the_answer_still_recorded() {
    let store = memory_store();
    let mut client = session(
        engine(Mode::Record, &store),
        Arc::new(FakeServer::default()),
    );
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "garbage", "arguments": {}}}))
        .await;
    assert_eq!(client.recv_line().await, "this is not JSON");
    let answer = client.recv().await;
    assert_eq!(answer["result"]["content"][0]["text"], "after garbage");
    client.close().await;
    assert_eq!(store.list("").await.unwrap().len(), 1);
}

#[tokio::test]
async fn auto_replays_hits_and_starts_the_server_once_with_the_sessions_handshake() {
    let store = memory_store();
    record_session(&store, &FakeServer::default()).await;

    let server = FakeServer::default();
    let mut client = session(engine(Mode::Auto, &store), Arc::new(server.clone()));
    client.call(json!(1), "initialize", initialize()).await;
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let hit = client.call(json!(2), "tools/call", count("a")).await;
    assert_eq!(hit.last().unwrap()["result"]["content"][0]["text"], "a: 1");
    assert_eq!(server.starts(), 0, "a hit starts nothing");

    let miss = client.call(json!(3), "tools/call", count("new")).await;
    assert_eq!(miss.last().unwrap()["id"], 3);
    assert_eq!(
        miss.last().unwrap()["result"]["content"][0]["text"],
        "new: 1"
    );
    assert_eq!(server.starts(), 1);
    let received = server.received();
    let methods: Vec<&str> = received
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        ["initialize", "notifications/initialized", "tools/call"]
    );
    assert_eq!(received[0]["id"], "cassette-handshake");
    assert_eq!(received[0]["params"]["clientInfo"]["name"], "test-client");

    let again = client.call(json!(4), "tools/call", count("other")).await;
    assert_eq!(
        again.last().unwrap()["result"]["content"][0]["text"],
        "other: 2"
    );
    assert_eq!(server.starts(), 1, "a running server is reused");
    client.close().await;
    assert_eq!(store.list("").await.unwrap().len(), 6);

    // What auto recorded replays.
    let mut client = session(engine(Mode::Replay, &store), Arc::new(NoServer));
    let replayed = client.call(json!(1), "tools/call", count("new")).await;
    assert_eq!(
        replayed.last().unwrap()["result"]["content"][0]["text"],
        "new: 1"
    );
    client.close().await;
}

#[tokio::test]
async fn off_relays_without_storing() {
    let store = memory_store();
    let mut client = session(engine(Mode::Off, &store), Arc::new(FakeServer::default()));
    let answer = client.call(json!(1), "tools/call", count("a")).await;
    assert_eq!(
        answer.last().unwrap()["result"]["content"][0]["text"],
        "a: 1"
    );
    client.close().await;
    assert!(store.list("").await.unwrap().is_empty());
}

#[tokio::test]
async fn json_rpc_errors_are_recorded_only_when_asked() {
    let fail = json!({"name": "fail", "arguments": {}});
    let store = memory_store();
    let mut client = session(
        engine(Mode::Record, &store),
        Arc::new(FakeServer::default()),
    );
    let answer = client.call(json!(1), "tools/call", fail.clone()).await;
    assert_eq!(answer[0]["error"]["message"], "database down");
    client.close().await;
    assert!(store.list("").await.unwrap().is_empty());

    let config = RecorderConfig {
        errors: ErrorRecording::Record,
        ..RecorderConfig::default()
    };
    let engine = McpRecorder::new(
        recorder_with(Mode::Record, &store, config),
        "fake",
        "stdio:x",
    );
    let mut client = session(engine, Arc::new(FakeServer::default()));
    client.call(json!(1), "tools/call", fail.clone()).await;
    client.close().await;
    assert_eq!(store.list("").await.unwrap().len(), 1);
    let mut client = session(
        McpRecorder::new(recorder(Mode::Replay, &store), "fake", "stdio:x"),
        Arc::new(NoServer),
    );
    let replayed = client.call(json!(7), "tools/call", fail).await;
    assert_eq!(replayed[0]["id"], 7);
    assert_eq!(replayed[0]["error"]["message"], "database down");
    client.close().await;
}

#[tokio::test]
async fn stored_exchanges_are_redacted_and_still_answer() {
    let store = memory_store();
    let mut client = session(
        engine(Mode::Record, &store),
        Arc::new(FakeServer::default()),
    );
    let params = json!({"name": "secret", "arguments": {"password": "hunter2", "query": "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"}});
    client.call(json!(1), "tools/call", params.clone()).await;
    client.close().await;
    let keys = store.list("").await.unwrap();
    let document = store.get(&keys[0]).await.unwrap().unwrap();
    let text = String::from_utf8(document.to_vec()).unwrap();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        !text.contains("sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"),
        "{text}"
    );
    assert!(!text.contains("tok-abcdef"), "{text}");
    let cassette = Cassette::from_document(&document).unwrap();
    assert!(cassette.meta.request_redacted);
    assert_eq!(cassette.meta.profile, "mcp");
    assert_eq!(cassette.target, "fake");
    assert_eq!(cassette.request.path, "tools/call");

    // The key is the original request's, so the same call still replays.
    let mut client = session(engine(Mode::Replay, &store), Arc::new(NoServer));
    let answer = client.call(json!(2), "tools/call", params).await;
    assert_eq!(answer[0]["result"]["content"][0]["text"], "ok");
    client.close().await;
}

#[tokio::test]
async fn two_servers_with_other_names_never_share_recordings() {
    let store = memory_store();
    record_session(&store, &FakeServer::default()).await;
    let other = McpRecorder::new(recorder(Mode::Replay, &store), "other", "stdio:x");
    let mut client = session(other, Arc::new(NoServer));
    let answer = client.call(json!(1), "tools/call", count("a")).await;
    assert_eq!(answer[0]["error"]["code"], -32090);
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// Real processes.
// ---------------------------------------------------------------------------------------------

fn sh(script: &str) -> Arc<ServerCommand> {
    Arc::new(ServerCommand::new("sh", vec!["-c".into(), script.into()]))
}

#[tokio::test]
async fn a_real_server_process_is_relayed_and_its_exit_status_reported() {
    let store = memory_store();
    // Answers one request with its id, then exits with status 3.
    let script = r#"read line; id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p'); printf '{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}\n' "$id"; exit 3"#;
    let mut client = session(engine(Mode::Record, &store), sh(script));
    let answer = client.call(json!(41), "tools/list", json!({})).await;
    assert_eq!(
        answer[0],
        json!({"jsonrpc": "2.0", "id": 41, "result": {"ok": true}})
    );
    let report = tokio::time::timeout(WAIT, client.session)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(report.ending, Ending::ServerExited);
    assert_eq!(report.server_exit_code, Some(3));
    assert_eq!(store.list("").await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_real_server_that_dies_mid_call_is_named_with_its_status() {
    let store = memory_store();
    let mut client = session(engine(Mode::Record, &store), sh("read line; exit 7"));
    let answer = client.call(json!(1), "tools/call", count("a")).await;
    let message = answer[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("exited with status 7"), "{message}");
    assert!(message.contains("sh -c"), "{message}");
    assert!(store.list("").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_server_that_ignores_its_closed_input_is_killed_after_the_grace() {
    let store = memory_store();
    let options = StdioOptions {
        shutdown_grace: Duration::from_millis(300),
        ..StdioOptions::default()
    };
    let client = session_with(
        engine(Mode::Record, &store),
        sh("trap '' TERM; sleep 60"),
        options,
    );
    let started = std::time::Instant::now();
    let report = client.close().await;
    assert_eq!(report.ending, Ending::ClientClosed);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_server_that_cannot_start_is_an_error_naming_the_command() {
    let store = memory_store();
    let launcher = Arc::new(ServerCommand::new(
        "/nonexistent/mcp-server",
        vec!["--x".into()],
    ));
    let (_to_engine, engine_in) = tokio::io::duplex(PIPE);
    let (engine_out, _from_engine) = tokio::io::duplex(PIPE);
    let err = stdio::serve(
        engine(Mode::Record, &store),
        launcher.clone(),
        engine_in,
        engine_out,
        StdioOptions::default(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("/nonexistent/mcp-server --x"), "{err}");

    // In auto mode the request that needed the server gets the error; the session goes on.
    let mut client = session(engine(Mode::Auto, &store), launcher);
    let answer = client.call(json!(1), "tools/call", count("a")).await;
    let message = answer[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("cannot start the MCP server"), "{message}");
    let pong = client.call(json!(2), "ping", json!({})).await;
    assert_eq!(pong[0]["result"], json!({}));
    client.close().await;
}

#[tokio::test]
async fn sequence_mode_answers_repeated_tool_calls_in_order() {
    let store = memory_store();
    let server = FakeServer::default();
    let in_sequence = |mode| {
        let config = RecorderConfig {
            repeats: cassette_recorder::Repeats::Sequence,
            ..RecorderConfig::default()
        };
        McpRecorder::new(
            recorder_with(mode, &store, config),
            "fake",
            "stdio:fake-server",
        )
    };
    let text = |answer: &[Value]| {
        answer.last().unwrap()["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    // The counter answers a new number each time: three identical calls, three answers.
    let mut client = session(in_sequence(Mode::Record), Arc::new(server.clone()));
    client.call(json!(1), "initialize", initialize()).await;
    let mut recorded = Vec::new();
    for id in 2..5 {
        recorded.push(text(
            &client.call(json!(id), "tools/call", count("a")).await,
        ));
    }
    client.close().await;
    assert_eq!(recorded, ["a: 1", "a: 2", "a: 3"]);
    assert_eq!(store.list("").await.unwrap().len(), 4);

    let replay = in_sequence(Mode::Replay);
    let mut client = session(replay, Arc::new(NoServer));
    client.call(json!(1), "initialize", initialize()).await;
    let mut replayed = Vec::new();
    for id in 2..5 {
        replayed.push(text(
            &client.call(json!(id), "tools/call", count("a")).await,
        ));
    }
    assert_eq!(replayed, recorded);
    let fourth = client.call(json!(5), "tools/call", count("a")).await;
    let error = &fourth.last().unwrap()["error"];
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("recorded 3 times, asked a 4th"), "{error}");
    assert_eq!(error["data"]["repeat"]["recorded"], 3);
    client.close().await;

    // Without sequence mode the same tapes answer every repeat with the first.
    let mut client = session(engine(Mode::Replay, &store), Arc::new(NoServer));
    client.call(json!(1), "initialize", initialize()).await;
    for id in 2..5 {
        let answer = client.call(json!(id), "tools/call", count("a")).await;
        assert_eq!(text(&answer), "a: 1");
    }
    client.close().await;
}

/// Issue 25, item 9: the server's command line is quoted in errors and logs, its URLs without
/// credentials.
#[test]
fn a_server_command_is_described_without_the_credentials_of_its_urls() {
    let command = ServerCommand::new(
        "npx",
        vec![
            "mcp-remote".into(),
            "https://user:hunter2pw@tools.example/mcp?token=tok-123".into(),
        ],
    );
    let described = command.describe();
    assert_eq!(
        described,
        "npx mcp-remote https://tools.example/mcp?token=[REDACTED]"
    );
}
