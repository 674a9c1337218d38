"""Retry storms on a miss: the Vercel AI SDK retries a 409 whatever `x-should-retry` says (three
requests and seconds of back-off per miss). By default the proxy answers its misses 424, which
it fails on at once; a miss status the user chooses (`--miss-status`, `miss_status` in
cassette.toml) answers every client. With the real `ai` and `@ai-sdk/openai` packages through
`cassette exec`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

APP = Path(__file__).parent / "node" / "ai_app.mjs"
PACKAGE = Path(__file__).parent / "node" / "node_modules" / "ai"


@pytest.fixture(scope="module")
def node():
    path = shutil.which("node")
    if path is None or not PACKAGE.exists():
        pytest.fail("node and tests/sdk/node/node_modules are needed: run `npm ci --prefix tests/sdk/node`")
    return path


def exec_(cassette, store_url, args, env=None, cwd=None):
    full = {
        k: v for k, v in os.environ.items() if not k.startswith(("CASSETTE_", "UPSTREAM_", "OPENAI_", "ANTHROPIC_"))
    }
    full.update(env or {})
    return subprocess.run(
        [cassette, "exec", "--store", store_url, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def recorded(cassette, store_url, upstream, node):
    env = {"CASSETTE_MODE": "record", "UPSTREAM_BASE": upstream.url, "OPENAI_API_KEY": "sk-test-ai-sdk"}
    result = exec_(cassette, store_url, ["--", node, str(APP), "Where is my refund?"], env)
    assert result.returncode == 0, result.stderr
    upstream.stop()
    return result


def test_the_ai_sdk_records_and_replays(cassette, store_url, recorded, node):
    assert json.loads(recorded.stdout)["text"].startswith("I'll look that up")
    replay = exec_(cassette, store_url, ["--", node, str(APP), "Where is my refund?"])
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout == recorded.stdout


def test_by_default_the_ai_sdk_fails_at_once(cassette, store_url, recorded, node):
    result = exec_(cassette, store_url, ["--", node, str(APP), "Never recorded"])
    assert result.returncode == 2, result.stderr
    out = json.loads(result.stdout)
    assert out["status"] == 424 and out["attempts"] == 1, out
    assert "1 requests: 0 hits, 1 misses" in result.stderr, result.stderr


def test_a_chosen_409_is_retried_by_the_ai_sdk(cassette, store_url, recorded, node):
    result = exec_(cassette, store_url, ["--miss-status", "409", "--", node, str(APP), "Never recorded"])
    assert result.returncode == 2, result.stderr
    out = json.loads(result.stdout)
    assert out["status"] == 409 and out["attempts"] == 3, out
    assert "3 requests: 0 hits, 3 misses" in result.stderr, result.stderr


def test_another_miss_status_makes_it_fail_at_once(cassette, store_url, recorded, node, tmp_path):
    result = exec_(cassette, store_url, ["--miss-status", "424", "--", node, str(APP), "Never recorded"])
    assert result.returncode == 2, result.stderr
    out = json.loads(result.stdout)
    assert out["status"] == 424 and out["attempts"] == 1, out
    assert "cassette miss" in out["message"], out
    assert out["ms"] < 2000, out
    assert "1 requests: 0 hits, 1 misses" in result.stderr, result.stderr

    # The same from the team's cassette.toml; a hit is unaffected.
    (tmp_path / "cassette.toml").write_text("miss_status = 424\n")
    result = exec_(cassette, store_url, ["--", node, str(APP), "Never recorded"], cwd=tmp_path)
    assert json.loads(result.stdout)["attempts"] == 1, result.stdout
    hit = exec_(cassette, store_url, ["--", node, str(APP), "Where is my refund?"], cwd=tmp_path)
    assert hit.returncode == 0 and hit.stdout == recorded.stdout, hit.stderr


def test_a_miss_status_that_is_no_error_is_refused_before_anything_runs(cassette, store_url, tmp_path):
    marker = tmp_path / "ran"
    result = exec_(cassette, store_url, ["--miss-status", "200", "--", "touch", str(marker)])
    assert result.returncode == 2
    assert "--miss-status" in result.stderr and "400 to 599" in result.stderr, result.stderr
    assert not marker.exists()
