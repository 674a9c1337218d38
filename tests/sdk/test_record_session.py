"""Issue 34 item 10: two tests sending one request in one `--cassette=record` run get one
answer, the one their replay gives them, so a clean record run is followed by a clean replay.
Real pytest, the plugin, the binary's proxy, and a stand-in vendor whose verdict changes from
one call to the next (as a sampled judge's does)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from test_plugin_ci import pytest_run

JUDGED = """
import json
import os
import urllib.request


def verdict():
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Is 'Hi.' polite?"}]}).encode(),
        headers={"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["choices"][0]["message"]["content"]


def test_greeting_is_polite():
    assert verdict() == "PASS"


def test_reply_is_polite():
    assert verdict() == "PASS"
"""


class Judge(ThreadingHTTPServer):
    """A vendor that says PASS to the first request and FAIL to every later one."""

    daemon_threads = True
    asked = 0


class _Handler(BaseHTTPRequestHandler):
    server: Judge

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.asked += 1
        content = "PASS" if self.server.asked == 1 else "FAIL"
        body = json.dumps(
            {
                "id": f"chatcmpl-{self.server.asked}",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o-mini",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def judge() -> Iterator[Judge]:
    server = Judge(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_record_run_asks_the_vendor_each_request_once_and_its_replay_agrees(tmp_path: Path, judge: Judge) -> None:
    folder = tmp_path / "project"
    (folder / "tests").mkdir(parents=True)
    port = judge.server_address[1]
    (folder / "cassette.toml").write_text(
        f'store = "cassettes"\n[routes.default]\nupstream = "http://127.0.0.1:{port}"\n'
    )
    (folder / "tests" / "test_judged.py").write_text(JUDGED)

    recorded = pytest_run(folder, "--cassette=record")
    out = recorded.stdout + recorded.stderr
    # Before: the second test asked again, got FAIL and failed the record run.
    assert recorded.returncode == 0, out
    assert judge.asked == 1, out
    assert "2 passed" in recorded.stdout, out
    assert len(list((folder / "cassettes").rglob("*.json"))) == 1, out

    judge.shutdown()
    replayed = pytest_run(folder, "--cassette=replay")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "2 passed" in replayed.stdout
    assert judge.asked == 1
