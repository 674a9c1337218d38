"""The Vercel AI SDK (`ai` + `@ai-sdk/openai` + `@ai-sdk/anthropic` on Node) through
`cassette proxy`, configured only by OPENAI_BASE_URL and ANTHROPIC_BASE_URL as `cassette exec`
sets them: plain, streamed and two-step tool-loop calls record from the fake vendor and replay
with it stopped. ANTHROPIC_BASE_URL is `<proxy>/anthropic`, without the `/v1` this provider
expects: its `/anthropic/messages` must reach the vendor's `/v1/messages` and share tapes with
the official SDKs' `/anthropic/v1/messages`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import Proxy, fixture_json

APP = Path(__file__).parent / "node" / "vercel_app.mjs"
NODE_MODULES = Path(__file__).parent / "node" / "node_modules"
CLIENT_KEY = "sk-test-VERCELCLIENT0123456789abcdef"
SCENARIOS = [
    "openai-generate",
    "openai-stream",
    "openai-tools",
    "openai-responses-stream",
    "anthropic-generate",
    "anthropic-stream",
    "anthropic-tools",
]
ANTHROPIC = [name for name in SCENARIOS if name.startswith("anthropic-")]
# The tool loops send two requests each.
TOTAL_REQUESTS = len(SCENARIOS) + 2
ANTHROPIC_REQUESTS = len(ANTHROPIC) + 1


@pytest.fixture(scope="module")
def node():
    path = shutil.which("node")
    needed = ["ai", "@ai-sdk/openai", "@ai-sdk/anthropic"]
    if path is None or not all((NODE_MODULES / name).exists() for name in needed):
        pytest.fail("node and tests/sdk/node/node_modules are needed: run `npm ci --prefix tests/sdk/node`")
    return path


def run_app(node, url: str, anthropic_base: str | None = None, scenarios=SCENARIOS) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env.update(
        {
            "OPENAI_BASE_URL": f"{url}/v1",
            "ANTHROPIC_BASE_URL": anthropic_base or f"{url}/anthropic",
            "OPENAI_API_KEY": CLIENT_KEY,
            "ANTHROPIC_API_KEY": CLIENT_KEY,
        }
    )
    result = subprocess.run([node, str(APP), *scenarios], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    # The answer is the last line; anything before it is the SDK talking.
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def recorded(node, upstream, store_url):
    proxy = Proxy(
        ["--mode", "record", "--store", store_url, "--upstream", upstream.url, "--route", f"anthropic={upstream.url}"]
    )
    try:
        results = run_app(node, proxy.url)
        stats = proxy.stats()
    finally:
        stderr = proxy.stop()
    return {"results": results, "stats": stats, "stderr": stderr}


@pytest.fixture(scope="module")
def replayed(node, recorded, upstream, store_url):
    upstream.stop()
    before = upstream.connections
    proxy = Proxy(["--store", store_url])
    try:
        results = run_app(node, proxy.url)
        # The other spelling, `<proxy>/anthropic/v1` (what this provider documents): its
        # `/anthropic/v1/messages` finds the tapes `/anthropic/messages` recorded.
        with_v1 = run_app(node, proxy.url, anthropic_base=f"{proxy.url}/anthropic/v1", scenarios=ANTHROPIC)
        stats = proxy.stats()
    finally:
        proxy.stop()
    return {"results": results, "with_v1": with_v1, "stats": stats, "connections": upstream.connections - before}


def test_record_gives_the_vendor_answers(recorded):
    r = recorded["results"]
    # A record session asks the vendor each request once: a client sending what another one
    # already asked is answered from that recording (docs/proxy.md, "Answers").
    stats = recorded["stats"]
    assert stats["recorded"] + stats["hits"] == TOTAL_REQUESTS, recorded["stderr"]
    assert stats["upstream_requests"] == stats["recorded"] >= TOTAL_REQUESTS - 1, recorded["stderr"]
    for name in SCENARIOS:
        assert "error" not in r[name], (name, r[name])
    chat = fixture_json("openai_chat.response.json")["choices"][0]["message"]
    assert r["openai-generate"]["text"] == chat["content"]
    assert r["openai-generate"]["toolCalls"][0][:2] == [chat["tool_calls"][0]["id"], "lookup_order"]
    streamed = fixture_json("openai_chat_tool.final.json")["choices"][0]["message"]["tool_calls"]
    assert [c[1] for c in r["openai-stream"]["toolCalls"]] == [t["function"]["name"] for t in streamed]
    steps = r["openai-tools"]["steps"]
    assert len(steps) == 2 and steps[0]["toolResults"] == [
        [chat["tool_calls"][0]["id"], "order A-1042 shipped on Monday"]
    ]
    assert "remboursements" in r["openai-responses-stream"]["text"]
    message = fixture_json("anthropic.response.json")
    assert r["anthropic-generate"]["text"] == message["content"][0]["text"]
    assert r["anthropic-generate"]["toolCalls"][0][1] == "send_email"
    tool_use = fixture_json("anthropic_tool_use.final.json")
    assert r["anthropic-stream"]["text"] == tool_use["content"][0]["text"]
    assert len(r["anthropic-tools"]["steps"]) == 2


def test_the_anthropic_provider_reaches_v1_messages(recorded, upstream):
    anthropic_paths = {path for path, headers, _ in upstream.requests if "anthropic-version" in headers}
    assert anthropic_paths == {"/v1/messages"}, anthropic_paths


@pytest.mark.parametrize("name", SCENARIOS)
def test_replay_gives_the_same_results(recorded, replayed, name):
    assert replayed["results"][name] == recorded["results"][name]


@pytest.mark.parametrize("name", ANTHROPIC)
def test_the_other_anthropic_base_url_spelling_replays_the_same_tapes(recorded, replayed, name):
    assert replayed["with_v1"][name] == recorded["results"][name]


def test_replay_never_contacts_the_vendor(replayed):
    assert replayed["connections"] == 0
    stats = replayed["stats"]
    assert stats["hits"] == TOTAL_REQUESTS + ANTHROPIC_REQUESTS and stats["misses"] == 0, stats
