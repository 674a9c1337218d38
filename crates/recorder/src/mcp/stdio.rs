//! The stdio transport: `cassette mcp -- COMMAND [ARGS...]` stands between an MCP client (on
//! its stdin and stdout) and a stdio MCP server (a child process), one JSON-RPC message a line.
//!
//! * `replay`: the server is never started. Requests are answered from cassettes with the
//!   client's id; notifications are accepted; `ping` is answered locally; a miss is a JSON-RPC
//!   error explaining it.
//! * `record` and `off`: the server is started at once and every line is relayed verbatim in
//!   both directions; each answered request is stored (`record`) or not (`off`), with the
//!   server's notifications sent in the course of the call, before the client sees the answer.
//! * `auto`: hits are replayed; the server is started at the first miss, is given the client's
//!   `initialize` handshake first when the session had one, and the miss is recorded.
//!
//! Lines over the size limit are never buffered whole: a client's is refused with a JSON-RPC
//! error, a server's is passed to the client as it is read, and not recorded.

use super::engine::{Answer, McpCall, McpRecorder, Recording, Transcript};
use super::lines::{self, Read};
use super::message::{
    self, id_text, IdScan, Message, INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR,
};
use crate::error::{Error, Result};
use crate::mode::{Mode, Write};
use cassette_keying::Keyed;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

/// The id of the `initialize` request the engine sends a server it starts in the middle of a
/// session (mode `auto`), so its answer is not mistaken for one of the client's.
const HANDSHAKE_ID: &str = "cassette-handshake";

/// How long a server started mid-session may take to answer the replayed handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// A server's pipes, and the process when it is one.
pub struct ServerIo {
    /// Where the engine writes the client's messages.
    pub stdin: Pin<Box<dyn AsyncWrite + Send>>,
    /// Where the engine reads the server's messages.
    pub stdout: Pin<Box<dyn AsyncRead + Send>>,
    /// The process, for its exit status and to stop it (killed when dropped).
    pub child: Option<tokio::process::Child>,
}

/// Starts the server. Implemented by [`ServerCommand`]; tests start in-process servers.
pub trait ServerLauncher: Send + Sync {
    /// Starts a new server.
    fn launch(&self) -> std::io::Result<ServerIo>;
    /// The server as users know it, for messages (`python3 server.py`).
    fn describe(&self) -> String;
}

/// A server run as a command: its stdin and stdout are the transport, its stderr is ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCommand {
    program: OsString,
    args: Vec<OsString>,
}

impl ServerCommand {
    /// The command `program` with `args`.
    pub fn new(program: impl Into<OsString>, args: Vec<OsString>) -> ServerCommand {
        ServerCommand {
            program: program.into(),
            args,
        }
    }

    /// The file name of the program (`python3` for `/usr/bin/python3`): the server's identity
    /// in keys when it is given no name.
    pub fn file_name(&self) -> String {
        let program = std::path::Path::new(&self.program);
        program
            .file_name()
            .unwrap_or(program.as_os_str())
            .to_string_lossy()
            .into_owned()
    }
}

impl ServerLauncher for ServerCommand {
    fn launch(&self) -> std::io::Result<ServerIo> {
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(&self.args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true);
        // A group of its own, so the processes the server starts (an `npx` or `uv run` wrapper
        // starts the real server) are stopped with it.
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the server's pipes were not opened"));
        };
        Ok(ServerIo {
            stdin: Box::pin(stdin),
            stdout: Box::pin(stdout),
            child: Some(child),
        })
    }

    /// The command line, with every URL in it shown without credentials (`mcp-remote
    /// https://user:password@host`): it is quoted in errors and logs.
    fn describe(&self) -> String {
        let line = std::iter::once(&self.program)
            .chain(&self.args)
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        cassette_keying::shown_urls(&line).into_owned()
    }
}

/// Limits of the stdio relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdioOptions {
    /// The longest message (line) accepted from the client, and recorded from the server.
    pub max_message: usize,
    /// How long a server may take to exit after the client closed its input, before it is
    /// killed.
    pub shutdown_grace: Duration,
}

impl Default for StdioOptions {
    fn default() -> Self {
        StdioOptions {
            max_message: crate::config::DEFAULT_MAX_BODY,
            shutdown_grace: Duration::from_secs(2),
        }
    }
}

/// Counters of one stdio session (hits, misses and recordings are the recorder's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct StdioStats {
    /// Requests received from the client.
    pub requests: u64,
    /// Notifications received from the client.
    pub notifications: u64,
    /// Times the server was started.
    pub server_starts: u64,
    /// Requests answered with an error by cassette itself (other than misses): the server
    /// died, a message was too long or malformed, the store failed.
    pub errors: u64,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// The client closed its input (the normal end).
    ClientClosed,
    /// The server closed its output or exited while the client was still there.
    ServerExited,
}

/// How a session went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StdioReport {
    /// Why it ended.
    pub ending: Ending,
    /// The server's exit code, when it ran and exited with one.
    pub server_exit_code: Option<i32>,
    /// The session's counters.
    pub stats: StdioStats,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    notifications: AtomicU64,
    server_starts: AtomicU64,
    errors: AtomicU64,
}

/// The client's side of the pipe: one writer, one message at a time.
struct ClientOut {
    writer: tokio::sync::Mutex<Pin<Box<dyn AsyncWrite + Send>>>,
    gone: AtomicBool,
}

impl ClientOut {
    async fn send(&self, line: &[u8]) {
        let mut writer = self.writer.lock().await;
        self.write(&mut writer, &[line, b"\n"]).await;
    }

    async fn write(&self, writer: &mut Pin<Box<dyn AsyncWrite + Send>>, pieces: &[&[u8]]) {
        if self.gone.load(Ordering::Relaxed) {
            return;
        }
        let mut result = Ok(());
        for piece in pieces {
            result = result.and(writer.write_all(piece).await);
        }
        if let Err(err) = result.and(writer.flush().await) {
            tracing::warn!("cannot write to the MCP client ({err}); its answers are dropped");
            self.gone.store(true, Ordering::Relaxed);
        }
    }
}

/// A request forwarded to the server and not answered yet.
struct Pending {
    call: McpCall,
    keyed: Keyed,
    started: Instant,
    token: Option<String>,
    notifications: Vec<Value>,
    write: Write,
}

/// What the client loop and the server reader share.
struct Shared {
    engine: McpRecorder,
    describe: String,
    client: ClientOut,
    pending: Mutex<HashMap<String, Pending>>,
    handshake_done: Mutex<Option<oneshot::Sender<()>>>,
    counters: Counters,
    max_message: usize,
}

/// A running server. Dropping it kills the server's process group.
struct Server {
    to_server: Option<mpsc::Sender<Vec<u8>>>,
    reader: JoinHandle<()>,
    exit: watch::Receiver<Option<Option<i32>>>,
    waiter: JoinHandle<()>,
    group: Option<u32>,
}

impl Server {
    /// Kills the server and every process of its group.
    fn kill(&mut self) {
        #[cfg(unix)]
        if let Some(group) = self.group.take().and_then(|g| i32::try_from(g).ok()) {
            // SAFETY: kill(2) on the process group the server leads (it was spawned with a
            // group of its own, so the group holds only it and its descendants).
            unsafe {
                libc::kill(-group, libc::SIGKILL);
            }
        }
        // Dropping the child kills it where process groups are not available.
        self.waiter.abort();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        self.reader.abort();
    }
}

/// The first messages of the session, given again to a server started in its middle.
#[derive(Default)]
struct Handshake {
    initialize: Option<Value>,
    initialized: Option<Vec<u8>>,
}

struct Session {
    shared: Arc<Shared>,
    launcher: Arc<dyn ServerLauncher>,
    server: Option<Server>,
    handshake: Handshake,
}

/// Serves one MCP session over stdio: reads the client's messages from `client_in`, answers
/// on `client_out`, and starts the server with `launcher` when the mode calls for it. Returns
/// when the client closes its input or the server exits.
///
/// In mode `record` or `off` a server that cannot start is an error, before any message is
/// read; in mode `auto` it is a JSON-RPC error for the request that needed it.
pub async fn serve<R, W>(
    engine: McpRecorder,
    launcher: Arc<dyn ServerLauncher>,
    client_in: R,
    client_out: W,
    options: StdioOptions,
) -> Result<StdioReport>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + 'static,
{
    let mode = engine.mode();
    let shared = Arc::new(Shared {
        describe: launcher.describe(),
        engine,
        client: ClientOut {
            writer: tokio::sync::Mutex::new(Box::pin(client_out)),
            gone: AtomicBool::new(false),
        },
        pending: Mutex::new(HashMap::new()),
        handshake_done: Mutex::new(None),
        counters: Counters::default(),
        max_message: options.max_message.max(1),
    });
    let mut session = Session {
        shared,
        launcher,
        server: None,
        handshake: Handshake::default(),
    };
    if matches!(mode, Mode::Record | Mode::Off) {
        session.start_server()?;
    }

    let mut client_in = BufReader::new(client_in);
    let ending = loop {
        let server_gone = async {
            match &mut session.server {
                Some(server) => {
                    let _ = (&mut server.reader).await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            read = lines::read_line(&mut client_in, session.shared.max_message) => match read {
                Ok(Read::Line(line)) => session.on_client_line(line).await,
                Ok(Read::TooLong(prefix)) => {
                    let rest = lines::finish_line(
                        &mut client_in,
                        None::<&mut tokio::io::Sink>,
                        &mut |_| {},
                    )
                    .await
                    .unwrap_or(0);
                    session.on_oversized_client_line(&prefix, rest).await;
                }
                Ok(Read::Eof) => break Ending::ClientClosed,
                Err(err) => {
                    tracing::warn!("cannot read from the MCP client ({err}); ending the session");
                    break Ending::ClientClosed;
                }
            },
            _ = server_gone => break Ending::ServerExited,
        }
    };
    let server_exit_code = session.stop_server(ending, options.shutdown_grace).await;
    let c = &session.shared.counters;
    Ok(StdioReport {
        ending,
        server_exit_code,
        stats: StdioStats {
            requests: c.requests.load(Ordering::Relaxed),
            notifications: c.notifications.load(Ordering::Relaxed),
            server_starts: c.server_starts.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
        },
    })
}

impl Session {
    fn mode(&self) -> Mode {
        self.shared.engine.mode()
    }

    async fn on_client_line(&mut self, line: Vec<u8>) {
        let parsed: std::result::Result<Value, _> = serde_json::from_slice(&line);
        let value = match parsed {
            Ok(value) => value,
            Err(err) => {
                let reason = format!("the client sent a line that is not JSON ({err})");
                return self
                    .refuse_or_forward(line, Value::Null, PARSE_ERROR, reason)
                    .await;
            }
        };
        match Message::classify(&value) {
            Ok(Message::Request { id, method, params }) => {
                self.shared
                    .counters
                    .requests
                    .fetch_add(1, Ordering::Relaxed);
                let call = McpCall { id, method, params };
                self.on_request(line, value, call).await;
            }
            Ok(Message::Notification { method, .. }) => {
                let counters = &self.shared.counters;
                counters.notifications.fetch_add(1, Ordering::Relaxed);
                self.on_notification(line, &method).await;
            }
            Ok(Message::Response { .. }) => {
                // The client's answer to a server's request: only a running server asked.
                self.forward(line).await;
            }
            Err(reason) => {
                let id = value.get("id").cloned().unwrap_or(Value::Null);
                let reason = format!("the client sent an invalid message: {reason}");
                self.refuse_or_forward(line, id, INVALID_REQUEST, reason)
                    .await;
            }
        }
    }

    /// A running server gets whatever the client sends, and answers it in its own way; without
    /// one, cassette answers with a JSON-RPC error.
    async fn refuse_or_forward(&mut self, line: Vec<u8>, id: Value, code: i64, reason: String) {
        if self.server.is_some() {
            tracing::warn!("{reason}; passed to the server as it is");
            self.forward(line).await;
        } else {
            self.answer_error(&id, code, &reason).await;
        }
    }

    async fn on_oversized_client_line(&mut self, prefix: &[u8], rest: u64) {
        let size = prefix.len() as u64 + rest;
        let reason = format!(
            "the client sent a message of {size} bytes, over the limit of {} bytes; it was \
             dropped (raise the body size limit if this is intended)",
            self.shared.max_message
        );
        self.answer_error(&Value::Null, INTERNAL_ERROR, &reason)
            .await;
    }

    async fn answer_error(&self, id: &Value, code: i64, reason: &str) {
        tracing::warn!("cassette mcp: {reason}");
        self.shared.counters.errors.fetch_add(1, Ordering::Relaxed);
        let line = message::error_line(id, code, &format!("cassette: {reason}"), None);
        self.shared.client.send(line.as_bytes()).await;
    }

    async fn on_request(&mut self, line: Vec<u8>, value: Value, call: McpCall) {
        let mode = self.mode();
        if call.method == "initialize" {
            self.handshake.initialize = Some(value);
        }
        if call.method == "ping" && !matches!(mode, Mode::Record | Mode::Off) {
            // Liveness, not a question: answered here, never recorded.
            let answer = message::response_line(&call.id, json!({}));
            return self.shared.client.send(answer.as_bytes()).await;
        }
        let engine = self.shared.engine.clone();
        // Keyed once per request: in sequence mode this counts the occurrence.
        let keyed = engine.key_in_session(&call);
        match engine.answer(&call, &keyed).await {
            Ok(Answer::Replay(messages)) => {
                for message in messages {
                    self.shared
                        .client
                        .send(message.to_string().as_bytes())
                        .await;
                }
            }
            Ok(Answer::Miss(miss)) => {
                tracing::warn!("{miss}");
                self.shared
                    .client
                    .send(miss.error_line(&call.id).as_bytes())
                    .await;
            }
            Ok(Answer::Forward(write)) => match self.ensure_server().await {
                Ok(()) => self.forward_call(line, call, keyed, write).await,
                Err(reason) => self.answer_error(&call.id, INTERNAL_ERROR, &reason).await,
            },
            Err(err) => {
                let reason = format!("cannot answer {} from the store: {err}", call.method);
                self.answer_error(&call.id, INTERNAL_ERROR, &reason).await;
            }
        }
    }

    async fn on_notification(&mut self, line: Vec<u8>, method: &str) {
        if self.server.is_some() {
            return self.forward(line).await;
        }
        if method == "notifications/initialized" {
            self.handshake.initialized = Some(line);
        }
        // Without a server, notifications (initialized, cancelled, roots changed, progress of
        // the client's own work) are accepted: nothing answers a notification.
    }

    async fn forward_call(&mut self, line: Vec<u8>, call: McpCall, keyed: Keyed, write: Write) {
        let token = message::progress_token(call.params.as_ref()).map(id_text);
        // `ping` is relayed (the live server's liveness is the question) but never recorded.
        let write = if call.method == "ping" {
            Write::Nothing
        } else {
            write
        };
        let pending = Pending {
            call: call.clone(),
            keyed,
            started: Instant::now(),
            token,
            notifications: Vec::new(),
            write,
        };
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id_text(&call.id), pending);
        self.forward(line).await;
    }

    async fn forward(&mut self, line: Vec<u8>) {
        if let Some(to_server) = self.server.as_ref().and_then(|s| s.to_server.as_ref()) {
            // A closed channel means the server is gone; the reader answers what is pending.
            let _ = to_server.send(line).await;
        }
    }

    fn start_server(&mut self) -> Result<()> {
        let io = self
            .launcher
            .launch()
            .map_err(|err| Error::McpServerStart {
                command: self.shared.describe.clone(),
                reason: err.to_string(),
            })?;
        let counters = &self.shared.counters;
        counters.server_starts.fetch_add(1, Ordering::Relaxed);

        let (to_server, mut from_client) = mpsc::channel::<Vec<u8>>(64);
        let mut stdin = io.stdin;
        let describe = self.shared.describe.clone();
        tokio::spawn(async move {
            while let Some(line) = from_client.recv().await {
                let written = async {
                    stdin.write_all(&line).await?;
                    stdin.write_all(b"\n").await?;
                    stdin.flush().await
                };
                if let Err(err) = written.await {
                    tracing::warn!("cannot write to the MCP server `{describe}`: {err}");
                    return;
                }
            }
            // Every sender is gone: closing stdin asks the server to exit.
            let _ = stdin.shutdown().await;
        });

        let (exit_tx, exit) = watch::channel(None);
        let group = io.child.as_ref().and_then(|c| c.id());
        let waiter = match io.child {
            Some(mut child) => tokio::spawn(async move {
                let code = child.wait().await.ok().and_then(|s| exit_code(&s));
                let _ = exit_tx.send(Some(code));
            }),
            None => tokio::spawn(async move {
                // An in-process server: its end is the end of its output.
                let _ = exit_tx.send(Some(None));
                std::future::pending::<()>().await
            }),
        };
        let reader = tokio::spawn(read_server(self.shared.clone(), io.stdout, exit.clone()));
        self.server = Some(Server {
            to_server: Some(to_server),
            reader,
            exit,
            waiter,
            group,
        });
        Ok(())
    }

    /// Starts the server in the middle of a session (mode `auto`) and gives it the session's
    /// handshake, so it is in the state the client believes it is in.
    async fn ensure_server(&mut self) -> std::result::Result<(), String> {
        if self.server.is_some() {
            return Ok(());
        }
        self.start_server().map_err(|e| e.to_string())?;
        let Some(mut initialize) = self.handshake.initialize.clone() else {
            return Ok(());
        };
        initialize["id"] = Value::from(HANDSHAKE_ID);
        let (done_tx, done_rx) = oneshot::channel();
        *self
            .shared
            .handshake_done
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(done_tx);
        self.forward(initialize.to_string().into_bytes()).await;
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, done_rx).await {
            Ok(Ok(())) => {}
            _ => {
                return Err(format!(
                    "the MCP server `{}` did not answer the session's initialize request",
                    self.shared.describe
                ))
            }
        }
        if let Some(initialized) = self.handshake.initialized.clone() {
            self.forward(initialized).await;
        }
        Ok(())
    }

    /// Ends the server: after the client closed its input, closes the server's and gives it
    /// `grace` to exit before killing its process group. Returns its exit code.
    async fn stop_server(&mut self, ending: Ending, grace: Duration) -> Option<i32> {
        let mut server = self.server.take()?;
        // Closing the server's input asks it to exit (the MCP stdio shutdown).
        server.to_server = None;
        if ending == Ending::ClientClosed
            && tokio::time::timeout(grace, &mut server.reader)
                .await
                .is_err()
        {
            tracing::warn!(
                "the MCP server `{}` did not exit within {}s of its input closing; killing it",
                self.shared.describe,
                grace.as_secs_f32()
            );
            server.kill();
            // Its output closes with it, unless a process outside its group holds it open.
            let _ = tokio::time::timeout(grace, &mut server.reader).await;
            return None;
        }
        let code = exit_code_within(&mut server.exit, grace).await;
        // Leftover processes of the server's group go with it.
        server.kill();
        code
    }
}

/// Reads the server's messages until its output ends: records answers, relays everything to
/// the client, and finally answers the calls still pending with an error.
async fn read_server(
    shared: Arc<Shared>,
    stdout: Pin<Box<dyn AsyncRead + Send>>,
    mut exit: watch::Receiver<Option<Option<i32>>>,
) {
    let mut stdout = BufReader::new(stdout);
    loop {
        match lines::read_line(&mut stdout, shared.max_message).await {
            Ok(Read::Line(line)) => on_server_line(&shared, line).await,
            Ok(Read::TooLong(prefix)) => pass_oversized(&shared, &mut stdout, &prefix).await,
            Ok(Read::Eof) => break,
            Err(err) => {
                tracing::warn!(
                    "cannot read from the MCP server `{}`: {err}",
                    shared.describe
                );
                break;
            }
        }
    }
    let code = exit_code_within(&mut exit, Duration::from_secs(2)).await;
    let pending: Vec<Pending> = shared
        .pending
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain()
        .map(|(_, p)| p)
        .collect();
    let status = match code {
        Some(code) => format!("exited with status {code}"),
        None => "closed its output".to_owned(),
    };
    for p in pending {
        let reason = format!(
            "the MCP server `{}` {status} before answering {} (id {}); nothing was recorded",
            shared.describe, p.call.method, p.call.id
        );
        tracing::warn!("cassette mcp: {reason}");
        shared.counters.errors.fetch_add(1, Ordering::Relaxed);
        let line = message::error_line(
            &p.call.id,
            INTERNAL_ERROR,
            &format!("cassette: {reason}"),
            None,
        );
        shared.client.send(line.as_bytes()).await;
    }
}

async fn on_server_line(shared: &Shared, line: Vec<u8>) {
    let value: Value = match serde_json::from_slice(&line) {
        Ok(value) => value,
        Err(err) => {
            tracing::warn!(
                "the MCP server `{}` sent a line that is not JSON ({err}); passed on, not recorded",
                shared.describe
            );
            return shared.client.send(&line).await;
        }
    };
    match Message::classify(&value) {
        Ok(Message::Response { id, .. }) => {
            if id.as_str() == Some(HANDSHAKE_ID) {
                let done = shared
                    .handshake_done
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                if let Some(done) = done {
                    let _ = done.send(());
                }
                return;
            }
            let pending = shared
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id_text(&id));
            if let Some(p) = pending {
                record(shared, p, value).await;
            }
        }
        Ok(Message::Notification { .. }) => attribute(shared, &value),
        Ok(Message::Request { .. }) => {
            // Sampling, elicitation, roots: relayed to the client, whose answer is relayed back.
        }
        Err(reason) => tracing::warn!(
            "the MCP server `{}` sent an invalid message ({reason}); passed on, not recorded",
            shared.describe
        ),
    }
    shared.client.send(&line).await;
}

/// Stores an answered call before the client sees the answer, so a client that has its answer
/// can replay it at once.
async fn record(shared: &Shared, pending: Pending, response: Value) {
    let recording = Recording {
        notifications: pending.notifications,
        response,
    };
    let transcript = Transcript {
        status: 200,
        latency_ms: pending.started.elapsed().as_millis() as u64,
        ..Transcript::default()
    };
    shared
        .engine
        .store_or_log(
            &pending.call,
            &pending.keyed,
            &recording,
            &transcript,
            pending.write,
        )
        .await;
}

/// Keeps a server notification with the call it belongs to: the one whose progress token it
/// carries, else the only call in flight. With several calls in flight, a notification that
/// names none of them is relayed but kept with none.
fn attribute(shared: &Shared, notification: &Value) {
    let token = notification
        .get("params")
        .and_then(|p| p.get("progressToken"))
        .map(id_text);
    let mut pending = shared.pending.lock().unwrap_or_else(|p| p.into_inner());
    let target = match token {
        Some(token) => pending
            .values_mut()
            .find(|p| p.token.as_deref() == Some(token.as_str())),
        None if pending.len() == 1 => pending.values_mut().next(),
        None => None,
    };
    if let Some(p) = target {
        p.notifications.push(notification.clone());
    }
}

/// Passes a server message over the size limit on to the client as it reads it, without
/// recording it. When it is the response to a call in flight, that call is answered by it: it
/// is no longer pending (or the end of the session would answer it a second time), and its
/// recording is counted as failed.
async fn pass_oversized<R>(shared: &Shared, stdout: &mut BufReader<R>, prefix: &[u8])
where
    R: AsyncRead + Unpin,
{
    let mut scan = IdScan::default();
    scan.push(prefix);
    let mut inspect = |piece: &[u8]| scan.push(piece);
    {
        // The client's writer stays locked for the whole line, so nothing is written into it.
        let mut writer = shared.client.writer.lock().await;
        if shared.client.gone.load(Ordering::Relaxed) {
            let _ = lines::finish_line(stdout, None::<&mut tokio::io::Sink>, &mut inspect).await;
        } else {
            shared.client.write(&mut writer, &[prefix]).await;
            let passed = lines::finish_line(stdout, Some(&mut *writer), &mut inspect).await;
            if let Err(err) = passed.and(writer.flush().await.map(|_| 0)) {
                tracing::warn!("cannot pass a long message to the MCP client ({err})");
                shared.client.gone.store(true, Ordering::Relaxed);
            }
        }
    }
    let answered = scan.response_id().and_then(|id| {
        let mut pending = shared.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.remove(&id_text(&id))
    });
    let reason = format!(
        "the MCP server `{}` sent a message over the limit of {} bytes; passed on, not recorded \
         (raise the body size limit if this is intended)",
        shared.describe, shared.max_message
    );
    match answered {
        Some(p) if p.write != Write::Nothing => {
            let reason = format!(
                "{reason} (the answer to {} id {})",
                p.call.method, p.call.id
            );
            shared
                .engine
                .recorder()
                .record_failure(&p.keyed.key, reason);
        }
        _ => tracing::warn!("{reason}"),
    }
}

/// The server's exit code, waiting at most `limit` for the process to be reaped.
async fn exit_code_within(
    exit: &mut watch::Receiver<Option<Option<i32>>>,
    limit: Duration,
) -> Option<i32> {
    match tokio::time::timeout(limit, exit.wait_for(Option::is_some)).await {
        Ok(Ok(value)) => value.flatten(),
        _ => None,
    }
}

fn exit_code(status: &std::process::ExitStatus) -> Option<i32> {
    if let Some(code) = status.code() {
        return Some(code);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        status.signal().map(|s| 128 + s)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

impl fmt::Debug for ServerIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerIo")
            .field("child", &self.child)
            .finish_non_exhaustive()
    }
}
