"""`cassette exec` around a Node program using the official `openai` npm client: record, replay
with the vendor stopped (same output, zero vendor connections), and a miss that exits 2."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import FakeUpstream

APP = Path(__file__).parent / "node" / "app.mjs"
NODE_MODULES = Path(__file__).parent / "node" / "node_modules" / "openai"


def _nodes() -> list[str]:
    """The machine's `node` and the other releases scripts/node-versions.sh fetched (Node 18
    and 22 beside the machine's 20): every test here runs on each."""
    extra = [p for p in os.environ.get("CASSETTE_TEST_NODES", "").split(":") if p]
    if not extra and os.environ.get("CI") and platform.system() == "Linux" and platform.machine() == "x86_64":
        # Under CI the other releases are part of the suite: their absence is a failure, not a skip.
        extra = ["CASSETTE_TEST_NODES is not set: scripts/test.sh sets it from scripts/node-versions.sh"]
    return [shutil.which("node") or "node", *extra]


@pytest.fixture(scope="module", params=_nodes(), ids=lambda p: Path(p).parts[-4] if "/nodes/" in p else "machine")
def node(request):
    path = request.param
    if not Path(path).is_file() and shutil.which(path) is None:
        pytest.fail(f"no Node.js at {path}")
    if not NODE_MODULES.exists():
        pytest.fail("tests/sdk/node/node_modules is needed: run `npm ci --prefix tests/sdk/node`")
    return path


@pytest.fixture(scope="module")
def upstream(node):
    # One vendor and one store per Node release: the replay test stops its vendor.
    fake = FakeUpstream()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def store_url(node, tmp_path_factory) -> str:
    return "file://" + str(tmp_path_factory.mktemp("node-cassettes"))


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


# Issue 32, the Node preload: clients hard-coded to the vendor, which read no variable, reach
# cassette only through cassette-cli/register (CASSETTE_NODE_REGISTER, which the npm shim sets).
HARDCODED = Path(__file__).parent / "node" / "hardcoded_app.mjs"
REGISTER = Path(__file__).parents[2] / "npm" / "cassette-cli" / "lib" / "register.js"


@pytest.fixture
def vendor():
    fake = FakeUpstream()
    yield fake
    fake.close()


def test_hardcoded_vendor_urls_record_and_replay_through_the_preload(cassette, tmp_path, vendor, node):
    upstream = vendor
    store = "file://" + str(tmp_path / "tapes")
    preload = {"CASSETTE_NODE_REGISTER": str(REGISTER)}
    runs = [("What is cassette?", "openai"), ("Weather in Paris?", "stream"), ("Over node:https?", "https")]
    record = {**preload, "CASSETTE_MODE": "record", "UPSTREAM_BASE": upstream.url}
    recorded = [exec_(cassette, store, [node, str(HARDCODED), q, c], record) for q, c in runs]
    for run in recorded:
        assert run.returncode == 0, run.stderr
    assert json.loads(recorded[1].stdout)["tool_calls"] == ["get_weather", "get_time"]

    before = upstream.connections
    for (question, client), first in zip(runs, recorded):
        replay = exec_(cassette, store, [node, str(HARDCODED), question, client], preload)
        assert replay.returncode == 0, replay.stderr
        assert replay.stdout == first.stdout
    assert upstream.connections == before
    # The vendor stopped: a replay still answers from the tape.
    upstream.stop()
    again = exec_(cassette, store, [node, str(HARDCODED), *runs[0]], preload)
    assert again.returncode == 0, again.stderr
    assert again.stdout == recorded[0].stdout


def test_an_unrouted_host_is_refused_through_the_preload_and_fails_the_run(cassette, tmp_path, node):
    store = "file://" + str(tmp_path / "tapes")
    run = exec_(
        cassette,
        store,
        [node, str(HARDCODED), "hi", "https://example.invalid/v1/chat"],
        {"CASSETTE_NODE_REGISTER": str(REGISTER)},
    )
    # The client saw the proxy's refusal (without the preload: a DNS failure, no 403).
    assert run.returncode != 0, run.stdout
    assert "status 403" in run.stderr and "cassette_unrouted" in run.stderr, run.stderr
    assert "no cassette route serves example.invalid:443" in run.stderr, run.stderr


def test_a_refusal_the_client_swallows_still_fails_a_replay(cassette, tmp_path, node):
    # fetch does not throw on a 403: the program exits 0, the run must not.
    script = 'const r = await fetch("https://example.invalid/v1/chat"); console.log(r.status);'
    run = exec_(
        cassette,
        "file://" + str(tmp_path / "tapes"),
        [node, "--input-type=module", "-e", script],
        {"CASSETTE_NODE_REGISTER": str(REGISTER)},
    )
    assert run.stdout.strip() == "403", run.stderr
    assert run.returncode == 2, run.stderr
    assert "example.invalid:443" in run.stderr, run.stderr


def test_a_loopback_service_is_reached_directly_through_the_preload(cassette, tmp_path, vendor, node):
    # The proxy answers a loopback host "go direct" (421): fetch and node:http then send the
    # request, body and all, as the program asked, and nothing is recorded or refused.
    url = f"{vendor.url}/v1/chat/completions"
    body = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"local?"}]}'
    script = f"""
import http from "node:http";
const headers = {{ "content-type": "application/json" }};
const f = await fetch({url!r}, {{ method: "POST", headers, body: {body!r} }});
const viaHttp = await new Promise((resolve, reject) => {{
  const req = http.request({url!r}, {{ method: "POST", headers }}, (res) => {{ res.resume(); resolve(res.statusCode); }});
  req.on("error", reject);
  req.end({body!r});
}});
console.log(JSON.stringify([f.status, viaHttp]));
"""
    run = exec_(
        cassette,
        "file://" + str(tmp_path / "tapes"),
        [node, "--input-type=module", "-e", script],
        {"CASSETTE_NODE_REGISTER": str(REGISTER), "CASSETTE_MODE": "record"},
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [200, 200], run.stderr
    assert len(vendor.requests) == 2


BASE_URLS = Path(__file__).parent / "node" / "base_urls_app.mjs"


def test_under_the_preload_the_process_sees_the_vendors_url_and_its_children_the_proxys(
    cassette, tmp_path, vendor, node
):
    # A Node program (and a test snapshotting a request URL) sees the base URLs it would see
    # without cassette once the preload catches it; a child the preload does not catch (a
    # shell, curl) still reaches the proxy, never the vendor; a Node child catches again.
    store = "file://" + str(tmp_path / "tapes")
    preload = {"CASSETTE_NODE_REGISTER": str(REGISTER), "OPENAI_API_KEY": "sk-test-node-client"}
    record = exec_(
        cassette,
        store,
        [node, str(BASE_URLS), "Where is my refund?"],
        {**preload, "CASSETTE_MODE": "record", "UPSTREAM_BASE": vendor.url},
    )
    assert record.returncode == 0, record.stderr
    seen = json.loads(record.stdout)
    vendor_url = "https://api.openai.com/v1"
    assert seen["process"] == vendor_url and seen["client"] == vendor_url and seen["node"] == vendor_url, seen
    for child in ("inherited", "copied"):
        assert seen[child].startswith(seen["proxy"] + "/"), seen
    assert seen["own"] == "https://mine.example/v1", seen
    assert len(vendor.requests) == 1 and vendor.requests[0][0] == "/v1/chat/completions", vendor.requests

    vendor.stop()
    before = vendor.connections
    replay = exec_(cassette, store, [node, str(BASE_URLS), "Where is my refund?"], preload)
    assert replay.returncode == 0, replay.stderr
    again = json.loads(replay.stdout)
    assert again["content"] == seen["content"] and again["process"] == vendor_url, again
    assert vendor.connections == before
