"""Issue 23 end to end with real vcrpy: the pytest-recording suite of tests/runners/vcr_project
is recorded against a fake vendor (default serializer and a custom parsed_body serializer that
deletes vendor headers; a stream, repeats with different answers, two tests with one request
and different answers, a binary header, a fixture download, an error stream), replayed by
vcrpy with the vendor stopped (the baseline: every test passes), imported with `cassette
import`, and replayed by the cassette pytest plugin with the vendor stopped: every test passes,
the fixture download served from the recording the import stored of its host (the second of
two tests with one request and different answers gets its own, kept apart under its
test-scoped key), and nothing connects to the vendor."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from conftest import cassette_bin

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "runners" / "vcr_project"


class Vendor(BaseHTTPRequestHandler):
    """OpenAI, Anthropic and a file host under /openai, /anthropic and /files; chat answers are
    numbered by call, as sampling at temperature 1 would differ."""

    protocol_version = "HTTP/1.1"
    calls = 0
    lock = threading.Lock()

    def log_message(self, *args: object) -> None:
        pass

    def send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.send_header("anthropic-organization-id", "org-1")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/files/cat.txt":
            return self.send(200, "text/plain", b"a cat")
        self.send(404, "text/plain", b"no")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if self.path == "/openai/v1/chat/completions":
            if body.get("stream"):
                events = [
                    {
                        "id": "c",
                        "object": "chat.completion.chunk",
                        "created": 1,
                        "model": "gpt-4o-mini",
                        "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                    }
                    for piece in ["one", " two", " three"]
                ]
                events.append(
                    {
                        "id": "c",
                        "object": "chat.completion.chunk",
                        "created": 1,
                        "model": "gpt-4o-mini",
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    }
                )
                text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
                return self.send(200, "text/event-stream", text.encode())
            with Vendor.lock:
                Vendor.calls += 1
                n = Vendor.calls
            answer = {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o-mini",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": f"answer {n}"}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
            }
            return self.send(200, "application/json", json.dumps(answer).encode())
        if self.path == "/anthropic/v1/messages":
            if body.get("stream"):
                start = {
                    "type": "message_start",
                    "message": {
                        "id": "msg_2",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-sonnet-4-5",
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 5, "output_tokens": 1},
                    },
                }
                error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
                text = f"event: message_start\ndata: {json.dumps(start)}\n\nevent: error\ndata: {json.dumps(error)}\n\n"
                return self.send(200, "text/event-stream", text.encode())
            answer = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "Paris."}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 2},
            }
            return self.send(200, "application/json", json.dumps(answer).encode())
        self.send(404, "text/plain", b"no")


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            (
                "CASSETTE_",
                "OPENAI_",
                "ANTHROPIC_",
                "PYTEST",
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "http_proxy",
                "https_proxy",
                "ALL_PROXY",
                "all_proxy",
                "NO_PROXY",
                "no_proxy",
            )
        )
    }
    env.update(extra)
    return env


def run(args: list, cwd: Path, env: dict[str, str], expect: int | None = 0) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    if expect is not None:
        assert result.returncode == expect, f"{args}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def test_a_pytest_recording_suite_imports_and_replays_under_cassette(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Vendor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    vendor = f"http://127.0.0.1:{server.server_address[1]}"
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cassette_cli"]
    try:
        record_env = clean_env(
            VENDOR_URL=vendor,
            OPENAI_BASE_URL=f"{vendor}/openai/v1",
            ANTHROPIC_BASE_URL=f"{vendor}/anthropic",
            FILES_URL=f"{vendor}/files",
            OPENAI_API_KEY="sk-test-VCRRECORDKEY0123456789abcdef",
            ANTHROPIC_API_KEY="sk-ant-api03-VCRRECORDKEY0123456789abcdef",
        )
        recorded = run([*pytest_cmd, "--record-mode=once"], project, record_env)
        assert "9 passed" in recorded.stdout, recorded.stdout
    finally:
        server.shutdown()
        server.server_close()
    tapes = project / "tests" / "cassettes"
    parsed = (project / "tests" / "custom" / "cassettes" / "test_parsed" / "test_anthropic_parsed.yaml").read_text()
    assert "parsed_body:" in parsed and "anthropic-version" not in parsed, parsed
    assert "!!binary" in (tapes / "test_chat" / "test_binary_header.yaml").read_text()

    # The baseline: vcrpy replays its own tapes, the vendor stopped.
    replayed = run([*pytest_cmd, "--record-mode=none"], project, record_env)
    assert "9 passed" in replayed.stdout, replayed.stdout

    # The serializer deleted anthropic-version, which is keyed: filled in with the version this
    # SDK sends (a miss names the one it sends otherwise).
    import anthropic

    version = anthropic.Anthropic(api_key="x").default_headers["anthropic-version"]
    imported = run(
        [cassette_bin(), "import", "tests", "--restore-header", f"anthropic:anthropic-version={version}"],
        project,
        clean_env(),
    )
    report = imported.stdout + imported.stderr
    assert "imported 10, kept 0 already stored, failed 0, 0 conflict(s)" in report, report
    assert (
        "2 repeat(s) numbered for sequence mode, 1 kept apart for their test, 1 download(s) stored "
        "(from https://files.example.com), 0 download(s) not imported"
    ) in report, report
    assert (
        "for test tests/test_chat.py::test_same_request_second only (POST /v1/chat/completions): "
        "tests/cassettes/test_chat/test_same_request_first.yaml interaction 1 "
        "(test tests/test_chat.py::test_same_request_first) answers the same request differently"
    ) in report, report
    assert (
        "(GET https://files.example.com/cat.txt: a download of https://files.example.com, served on replay)" in report
    ), report
    assert "restored tests/custom/cassettes/test_parsed/test_anthropic_parsed.yaml interaction 1" in report, report
    stored = "".join(p.read_text() for p in (project / "cassettes").rglob("*.json"))
    assert "VCRRECORDKEY" not in stored

    # Replay under the cassette plugin (from this checkout), pytest-recording off, no vendor.
    (project / "cassette.toml").write_text('store = "cassettes"\nrepeats = "sequence"\n')
    # The download goes to the file host the tape names, which is never reached: the proxy
    # serves it from the recording the import stored.
    env = clean_env(
        PYTHONPATH=str(ROOT / "python"), CASSETTE_BINARY=cassette_bin(), FILES_URL="https://files.example.com"
    )
    replay = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:recording", "-p", "cassette_cli.pytest_plugin", "-rf"],
        project,
        env,
    )
    out = replay.stdout
    assert "9 passed" in out and "failed" not in out, out
    assert " 0 misses" in out, out
