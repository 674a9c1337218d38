"""`cassette exec` around a Node program using the official `openai` npm client: record, replay
with the vendor stopped (same output, zero vendor connections), and a miss that exits 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

APP = Path(__file__).parent / "node" / "app.mjs"
NODE_MODULES = Path(__file__).parent / "node" / "node_modules" / "openai"


@pytest.fixture(scope="module")
def node():
    path = shutil.which("node")
    if path is None or not NODE_MODULES.exists():
        pytest.fail("node and tests/sdk/node/node_modules are needed: run `npm ci --prefix tests/sdk/node`")
    return path


def exec_(cassette, store_url, args, env=None):
    full = {
        k: v for k, v in os.environ.items() if not k.startswith(("CASSETTE_", "UPSTREAM_", "OPENAI_", "ANTHROPIC_"))
    }
    full.update(env or {})
    return subprocess.run(
        [cassette, "exec", "--store", store_url, "--", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
    )


@pytest.fixture(scope="module")
def recorded(cassette, store_url, upstream, node):
    env = {"CASSETTE_MODE": "record", "UPSTREAM_BASE": upstream.url, "OPENAI_API_KEY": "sk-test-node-client"}
    plain = exec_(cassette, store_url, [node, str(APP), "Where is my refund?", "plain"], env)
    stream = exec_(cassette, store_url, [node, str(APP), "Weather in Paris?", "stream"], env)
    return plain, stream


def test_node_client_records_through_exec(recorded, upstream):
    plain, stream = recorded
    assert plain.returncode == 0, plain.stderr
    assert stream.returncode == 0, stream.stderr
    assert json.loads(plain.stdout)["content"]
    calls = json.loads(stream.stdout)["tool_calls"]
    assert [c["name"] for c in calls] == ["get_weather", "get_time"]
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris", "unit": "celsius"}
    assert len(upstream.requests) == 2


def test_node_client_replays_with_the_vendor_stopped(cassette, store_url, upstream, recorded, node):
    upstream.stop()
    before = upstream.connections
    plain, stream = recorded
    replay_plain = exec_(cassette, store_url, [node, str(APP), "Where is my refund?", "plain"])
    replay_stream = exec_(cassette, store_url, [node, str(APP), "Weather in Paris?", "stream"])
    assert replay_plain.returncode == 0, replay_plain.stderr
    assert replay_stream.returncode == 0, replay_stream.stderr
    assert replay_plain.stdout == plain.stdout
    assert replay_stream.stdout == stream.stdout
    assert upstream.connections == before

    miss = exec_(cassette, store_url, [node, str(APP), "Never recorded", "plain"])
    assert miss.returncode == 2, miss.stderr
    assert len(json.loads(miss.stdout)["miss"]) == 64
    assert upstream.connections == before
