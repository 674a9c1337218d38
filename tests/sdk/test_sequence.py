"""Sequence mode end to end with the official openai SDK under `cassette exec`: three identical
calls at temperature 1 get three different answers from the vendor when recording, the same
three in the same order on replay (vendor stopped), and a fourth is a miss whose message says
"recorded 3 times, asked a 4th"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

APP = textwrap.dedent(
    """
    import json, sys
    import openai
    client = openai.OpenAI()
    answers = []
    for _ in range(int(sys.argv[1])):
        try:
            r = client.chat.completions.create(
                model="gpt-4o-mini", temperature=1,
                messages=[{"role": "user", "content": "Name a colour."}],
            )
            answers.append(r.choices[0].message.content)
        except openai.ConflictError as e:
            answers.append({"miss": e.body["message"], "repeat": e.body.get("repeat")})
    print(json.dumps(answers))
    """
)


class Sampling(BaseHTTPRequestHandler):
    """A vendor sampling at temperature 1: a new colour on every call."""

    protocol_version = "HTTP/1.1"
    colours = ["teal", "amber", "violet", "ochre", "cyan"]
    calls = 0
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        with Sampling.lock:
            colour = Sampling.colours[Sampling.calls % len(Sampling.colours)]
            Sampling.calls += 1
        body = json.dumps(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o-mini",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": colour}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def vendor():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sampling)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def exec_(cassette, store_url, app, n, args=(), env=None):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("CASSETTE_", "UPSTREAM_", "OPENAI_"))}
    full.update(env or {})
    return subprocess.run(
        [cassette, "exec", "--store", store_url, *args, "--", sys.executable, app, str(n)],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
    )


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    path = tmp_path_factory.mktemp("sequence") / "app.py"
    path.write_text(APP)
    return str(path)


@pytest.fixture(scope="module")
def recorded(cassette, store_url, vendor, app):
    result = exec_(
        cassette,
        store_url,
        app,
        3,
        ["--repeats", "sequence"],
        {"CASSETTE_MODE": "record", "UPSTREAM_BASE": vendor, "OPENAI_API_KEY": "sk-test-seq"},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_three_identical_calls_record_three_answers(recorded):
    assert recorded == ["teal", "amber", "violet"]
    assert Sampling.calls == 3


def test_replay_gives_them_back_in_order_and_a_fourth_is_a_miss(cassette, store_url, app, recorded):
    calls = Sampling.calls
    result = exec_(cassette, store_url, app, 4, ["--repeats", "sequence"])
    assert result.returncode == 2, result.stderr
    answers = json.loads(result.stdout)
    assert answers[:3] == recorded
    miss = answers[3]
    assert "recorded 3 times, asked a 4th" in miss["miss"], miss
    assert miss["repeat"]["asked"] == 4 and miss["repeat"]["recorded"] == 3, miss
    assert "3 hits, 1 misses" in result.stderr
    assert Sampling.calls == calls, "replay never calls the vendor"


def test_without_sequence_mode_every_repeat_gets_the_first_answer(cassette, store_url, app, recorded):
    result = exec_(cassette, store_url, app, 4)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [recorded[0]] * 4


def test_the_setting_comes_from_cassette_toml_too(cassette, store_url, app, recorded, tmp_path):
    (tmp_path / "cassette.toml").write_text('repeats = "sequence"\n')
    full = {k: v for k, v in os.environ.items() if not k.startswith(("CASSETTE_", "UPSTREAM_", "OPENAI_"))}
    result = subprocess.run(
        [cassette, "exec", "--store", store_url, "--", sys.executable, app, "3"],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == recorded
