"""Fixtures for driving LLM clients (the official SDKs and the popular wrappers) through
`cassette proxy`.

A fake upstream (a threaded HTTP server) stands in for the vendors: it answers with the
realistic provider bodies under crates/wire/tests/fixtures/, sends streams in irregular chunks, and
counts the connections it accepts. "Stopping" it closes the HTTP server and leaves a bare
listener on the same port that only counts and drops connections, so a replay that tried to
reach the upstream would be seen, not merely fail.

The cassette binary comes from CASSETTE_BIN (scripts/test.sh sets it to target/debug/cassette).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STREAMS = ROOT / "crates" / "wire" / "tests" / "fixtures"

# Sizes the fake cuts streamed bodies into, cycled: single bytes split UTF-8 characters and
# `data:` lines, larger pieces carry several events at once.
PIECES = [1, 17, 5, 240, 3, 64, 1, 1024, 9]


def fixture_bytes(name: str) -> bytes:
    return (STREAMS / name).read_bytes()


def fixture_json(name: str):
    return json.loads(fixture_bytes(name))


def cassette_bin() -> str:
    path = os.environ.get("CASSETTE_BIN") or str(ROOT / "target" / "debug" / "cassette")
    if not os.path.exists(path):
        pytest.fail(f"cassette binary not found at {path}; build it or set CASSETTE_BIN")
    return path


# A Cohere v2 chat answer, as its API documents it.
COHERE_CHAT = {
    "id": "c14c80c3-18eb-4519-9460-6c92edd8cfb4",
    "finish_reason": "COMPLETE",
    "message": {
        "role": "assistant",
        "content": [{"type": "text", "text": "The refund takes 5-7 business days."}],
    },
    "usage": {
        "billed_units": {"input_tokens": 5, "output_tokens": 9},
        "tokens": {"input_tokens": 71, "output_tokens": 9},
    },
}


def _gemini_answer(method: str, query: str, body: dict) -> tuple[str, bytes]:
    """Gemini: a function call, or, once the conversation holds a function's result, the
    answer; as one JSON document, an event stream (`alt=sse`) or a JSON-array stream."""
    answered = any(
        "functionResponse" in part or "function_response" in part
        for content in body.get("contents") or []
        for part in content.get("parts") or []
    )
    if method == "generateContent":
        return "application/json", fixture_bytes("gemini_text.final.json" if answered else "gemini.response.json")
    if "alt=sse" in query.split("&"):
        return "text/event-stream", fixture_bytes("gemini_text.sse" if answered else "gemini_tool.sse")
    return "application/json", fixture_bytes("gemini_tool.stream.json")


def _answer_for(path: str, body: dict) -> tuple[str, bytes]:
    """The content type and body the fake vendor answers `path` with."""
    path, _, query = path.partition("?")
    stream = bool(body.get("stream"))
    if "/models/" in path and ":" in path.rsplit("/", 1)[-1]:
        method = path.rsplit(":", 1)[1]
        if method in ("generateContent", "streamGenerateContent"):
            return _gemini_answer(method, query, body)
    if path.startswith("/openai/deployments/") and path.endswith("/chat/completions"):
        path = "/v1/chat/completions"
    # groq's OpenAI-compatible API lives under /openai/v1.
    if path.startswith("/openai/v1/"):
        path = path[len("/openai") :]
    if path == "/v1/audio/transcriptions":
        return "application/json", json.dumps({"text": "Hello from the recording."}).encode()
    if path == "/v2/chat":
        return "application/json", json.dumps(COHERE_CHAT).encode()
    if path == "/v1/chat/completions":
        if stream:
            return "text/event-stream", fixture_bytes("openai_chat_tool.sse")
        return "application/json", fixture_bytes("openai_chat.response.json")
    if path == "/v1/responses":
        if stream:
            return "text/event-stream", fixture_bytes("openai_responses.sse")
        return "application/json", fixture_bytes("openai_responses.response.json")
    if path == "/api/chat":
        # Ollama's chat API: NDJSON when streamed, which it is unless the body says false.
        if body.get("stream", True):
            return "application/x-ndjson", fixture_bytes("ollama_chat.ndjson")
        return "application/json", fixture_bytes("ollama_chat.response.json")
    if path == "/v1/messages":
        if stream:
            return "text/event-stream", fixture_bytes("anthropic_tool_use.sse")
        return "application/json", fixture_bytes("anthropic.response.json")
    return "", b""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_FakeServer"

    def log_message(self, *args):  # keep pytest output readable
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        self.server.owner.record(self.path, list(self.headers.items()), body)
        if re.fullmatch(UPLOAD_PATH, self.path.partition("?")[0]):
            return self._resumable_upload(body, raw)
        content_type, answer = _answer_for(self.path, body)
        if not content_type:
            self.send_response(404)
            self.send_header("content-type", "application/json")
            payload = json.dumps({"error": {"type": "not_found", "message": self.path}}).encode()
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("content-type", content_type)
        if content_type == "text/event-stream":
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            offset, i = 0, 0
            while offset < len(answer):
                piece = answer[offset : offset + PIECES[i % len(PIECES)]]
                offset += len(piece)
                i += 1
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        else:
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    def _resumable_upload(self, body: dict, raw: bytes) -> None:
        """Google's resumable upload (the Gemini Files API): the start answers where the bytes
        go (this server, under an upload id), the upload that finalizes answers the file."""
        command = (self.headers.get("x-goog-upload-command") or "").replace(" ", "")
        owner = self.server.owner
        if command == "start":
            file = body.get("file") or {}
            upload_id = owner.start_upload(file.get("displayName") or file.get("display_name") or "")
            self.send_response(200)
            path = self.path.partition("?")[0]
            url = f"{owner.url}{path}?upload_id={upload_id}&upload_protocol=resumable"
            self.send_header("x-goog-upload-url", url)
            self.send_header("x-goog-upload-status", "active")
            self.send_header("x-goog-upload-chunk-granularity", "8388608")
            self.send_header("content-type", "text/plain; charset=utf-8")
            self.send_header("content-length", "0")
            self.end_headers()
            return
        query = dict(part.partition("=")[::2] for part in self.path.partition("?")[2].split("&"))
        name = owner.uploads.get(query.get("upload_id", ""))
        if command != "upload,finalize" or name is None:
            self.send_response(400)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        file = {
            "file": {
                "name": f"files/{query['upload_id'].lower()}",
                "displayName": name,
                "mimeType": "text/plain",
                "sizeBytes": str(len(raw)),
                "state": "ACTIVE",
                "uri": f"https://generativelanguage.googleapis.com/v1beta/files/{query['upload_id'].lower()}",
            }
        }
        payload = json.dumps(file).encode()
        self.send_response(200)
        self.send_header("x-goog-upload-status", "final")
        self.send_header("content-type", "application/json; charset=UTF-8")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


# Where Gemini's resumable uploads start, and go on under an upload id (google-genai asks `v1`).
UPLOAD_PATH = r"/upload/v1(beta)?/files"


class _FakeServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: "FakeUpstream", port: int, host: str = "127.0.0.1"):
        self.owner = owner
        super().__init__((host, port), _Handler)

    def get_request(self):
        conn = super().get_request()
        self.owner.count_connection()
        return conn


class FakeUpstream:
    """The stand-in vendor. `connections` counts every TCP connection accepted, served or not."""

    def __init__(self, host: str = "127.0.0.1"):
        self._lock = threading.Lock()
        self.connections = 0
        self.requests: list[tuple[str, dict, dict]] = []
        # Every header line of each request, names lowercased, repeats kept.
        self.header_lines: list[list[tuple[str, str]]] = []
        self._server = _FakeServer(self, 0, host)
        self.port = self._server.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self._sink_thread: threading.Thread | None = None
        # Resumable uploads begun: upload id -> the file's display name.
        self.uploads: dict[str, str] = {}

    def start_upload(self, display_name: str) -> str:
        with self._lock:
            upload_id = f"ABpAqW-{len(self.uploads) + 1}"
            self.uploads[upload_id] = display_name
            return upload_id

    def count_connection(self):
        with self._lock:
            self.connections += 1

    def record(self, path: str, header_lines: list, body: dict):
        with self._lock:
            headers = {name.lower(): value for name, value in header_lines}
            self.requests.append((path, headers, body))
            self.header_lines.append([(name.lower(), value) for name, value in header_lines])

    def stop(self):
        """Stops serving HTTP; keeps counting (and dropping) connections to the port.

        The listening socket itself is kept (no rebinding, so no race with connections still
        closing): only the HTTP loop stops, and a bare accept loop takes over."""
        if self._sink_thread is not None:
            return
        self._server.shutdown()
        self._thread.join()
        listener = self._server.socket

        def drop():
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                self.count_connection()
                conn.close()

        self._sink_thread = threading.Thread(target=drop, daemon=True)
        self._sink_thread.start()

    def close(self):
        if self._sink_thread is None:
            self._server.shutdown()
        else:
            # Wake the blocked accept() before closing: a thread left blocked on a closed
            # descriptor could later accept on whatever socket reuses that number (the next
            # test module's server) and drop its connections.
            try:
                self._server.socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sink_thread.join(timeout=10)
        self._server.server_close()


class Proxy:
    """A `cassette proxy` process on a free loopback port."""

    def __init__(self, args: list[str], env: dict | None = None, cwd: str | None = None):
        self.args = args
        full_env = dict(os.environ)
        for name in (
            "CASSETTE_MODE",
            "CASSETTE_STORE",
            "CASSETTE_DIR",
            "CASSETTE_CACHE",
            "CASSETTE_CONFIG",
            "UPSTREAM_BASE",
            "UPSTREAM_API_KEY",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "AZURE_OPENAI_API_KEY",
            "PORT",
        ):
            full_env.pop(name, None)
        full_env.update(env or {})
        self.process = subprocess.Popen(
            [cassette_bin(), "proxy", "--listen", "127.0.0.1:0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=cwd,
            text=True,
        )
        self.stderr: list[str] = []
        self.url = None
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            if "listening on " in line:
                self.url = line.split("listening on ", 1)[1].split()[0]
                break
        if self.url is None:
            self.process.wait(timeout=10)
            raise RuntimeError(f"cassette proxy did not start: {''.join(self.stderr)}")
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _read_rest(self):
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)

    def stats(self) -> dict:
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/_cassette/stats", timeout=10) as response:
            return json.loads(response.read())

    def stop(self) -> str:
        """SIGINT, wait for the graceful exit, return everything it wrote on stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=30)
            self._drain.join(timeout=10)
        return "".join(self.stderr)


@pytest.fixture(scope="module")
def upstream():
    fake = FakeUpstream()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def store_url(tmp_path_factory) -> str:
    return "file://" + str(tmp_path_factory.mktemp("cassettes"))


@pytest.fixture(scope="session")
def cassette():
    return cassette_bin()
