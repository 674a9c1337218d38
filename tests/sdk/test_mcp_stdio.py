"""`cassette mcp` with the official `mcp` Python SDK as the client and a small server written
with it (tests/sdk/mcp_counter_server.py, whose counter survives restarts, so a replayed answer
is told apart from a live one): record, replay with a server command that cannot start, misses
as JSON-RPC errors, and `cassette exec` exiting 2 on an MCP miss."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters

SERVER = Path(__file__).with_name("mcp_counter_server.py")
TIMEOUT = 60


def starts(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def cassettes(store: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in store.rglob("*.json")]


def through_cassette(cassette: str, command: list[str], env: dict, name: str = "counter"):
    """How an MCP client starts a server through cassette: the same command after `--`."""
    return StdioServerParameters(command=cassette, args=["mcp", "--name", name, "--", *command], env=env)


async def _session(params, mode: str, labels: list[str]) -> dict:
    out: dict = {"results": []}
    async with Client(params, mode=mode, read_timeout_seconds=TIMEOUT) as client:
        out["protocol"] = client.protocol_version
        out["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
        for label in labels:
            try:
                result = await client.call_tool("next_number", {"label": label})
                out["results"].append(result.content[0].text)
            except MCPError as e:
                out["results"].append({"error": e.error.code, "message": e.error.message})
    return out


def session(params, mode: str = "legacy", labels=("a", "b")) -> dict:
    return asyncio.run(asyncio.wait_for(_session(params, mode, list(labels)), TIMEOUT))


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mcp")


@pytest.fixture(scope="module")
def store(work) -> Path:
    return work / "cassettes"


@pytest.fixture(scope="module")
def recorded(cassette, work, store):
    env = {"CASSETTE_MODE": "record", "CASSETTE_STORE": f"file://{store}", "MCP_STARTS": str(work / "starts")}
    return session(through_cassette(cassette, [sys.executable, str(SERVER)], env))


def replay_env(store: Path) -> dict:
    return {"CASSETTE_STORE": f"file://{store}"}


def test_record_relays_the_live_server_and_stores_each_request(recorded, work, store):
    assert recorded["tools"] == ["next_number", "now"]
    assert recorded["results"] == ["a: 1", "b: 2"]
    assert starts(work / "starts") == 1
    stored = cassettes(store)
    methods = sorted(c["request"]["path"] for c in stored)
    assert methods == ["initialize", "tools/call", "tools/call", "tools/list"]
    assert {c["meta"]["profile"] for c in stored} == {"mcp"}
    assert {c["target"] for c in stored} == {"counter"}
    # The client's name and version are not stored as part of the key's material... but the
    # request is stored as sent (redacted); the key leaves clientInfo out.
    init = next(c for c in stored if c["request"]["path"] == "initialize")
    assert init["request"]["body"]["json"]["clientInfo"]["name"] == "mcp"


def test_replay_never_starts_the_server(cassette, recorded, work, store):
    params = through_cassette(cassette, ["/nonexistent/python", str(SERVER)], replay_env(store))
    replayed = session(params)
    assert replayed == recorded
    assert starts(work / "starts") == 1


def test_changed_arguments_get_an_error_naming_the_tool_and_the_argument(cassette, recorded, store):
    params = through_cassette(cassette, ["/nonexistent/python", str(SERVER)], replay_env(store))
    replayed = session(params, labels=["a", "changed"])
    assert replayed["results"][0] == "a: 1"
    miss = replayed["results"][1]
    assert miss["error"] == -32090
    assert "next_number" in miss["message"]
    assert (
        'params.arguments.label: "a" -> "changed"' in miss["message"]
        or 'params.arguments.label: "b" -> "changed"' in miss["message"]
    )


def test_another_server_name_misses(cassette, recorded, store):
    params = through_cassette(cassette, ["/nonexistent/python"], replay_env(store), name="other")
    with pytest.raises(Exception) as failure:
        session(params)
    assert "server `other`" in str(failure.value) or "other" in repr(failure.value)


def test_off_mode_calls_the_live_server_and_stores_nothing(cassette, recorded, work, store, tmp_path):
    off_store = tmp_path / "off"
    # Its own start count, the recording's counter.
    env = {
        "CASSETTE_MODE": "off",
        "CASSETTE_STORE": f"file://{off_store}",
        "MCP_STARTS": str(tmp_path / "starts"),
        "MCP_COUNTER": str(work / "starts.counter"),
    }
    live = session(through_cassette(cassette, [sys.executable, str(SERVER)], env))
    # The counter moved on: a live answer, unlike the replays above.
    assert live["results"] != recorded["results"]
    assert not off_store.exists() or not list(off_store.rglob("*.json"))
    assert starts(tmp_path / "starts") == 1


def test_the_2026_protocol_records_and_replays_too(cassette, tmp_path):
    store = tmp_path / "modern"
    env = {"CASSETTE_MODE": "record", "CASSETTE_STORE": f"file://{store}", "MCP_STARTS": str(tmp_path / "starts")}
    recorded = session(through_cassette(cassette, [sys.executable, str(SERVER)], env), mode="auto")
    assert recorded["protocol"] >= "2026"
    assert {c["request"]["path"] for c in cassettes(store)} >= {"server/discover", "tools/list", "tools/call"}
    replayed = session(through_cassette(cassette, ["/nonexistent/python"], replay_env(store)), mode="auto")
    assert replayed == recorded
    assert starts(tmp_path / "starts") == 1


def test_auto_records_only_what_is_missing(cassette, tmp_path):
    store = tmp_path / "auto"
    env = {"CASSETTE_MODE": "auto", "CASSETTE_STORE": f"file://{store}", "MCP_STARTS": str(tmp_path / "starts")}
    first = session(through_cassette(cassette, [sys.executable, str(SERVER)], env), labels=["a"])
    assert first["results"] == ["a: 1"]
    assert starts(tmp_path / "starts") == 1
    # Every request is recorded now: auto starts no server at all.
    again = session(through_cassette(cassette, [sys.executable, str(SERVER)], env), labels=["a"])
    assert again == first
    assert starts(tmp_path / "starts") == 1
    # One new request: the server starts (given the session's handshake) and answers it.
    more = session(through_cassette(cassette, [sys.executable, str(SERVER)], env), labels=["a", "new"])
    assert more["results"] == ["a: 1", "new: 2"]
    assert starts(tmp_path / "starts") == 2


# ---------------------------------------------------------------------------------------------
# Under `cassette exec`.
# ---------------------------------------------------------------------------------------------

APP = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from mcp import Client, MCPError, StdioServerParameters

    cassette, server, label = sys.argv[1], sys.argv[2], sys.argv[3]

    async def main():
        # No env of cassette's: the SDK starts servers with HOME, PATH and a few others only.
        params = StdioServerParameters(
            command=cassette, args=["mcp", "--name", "counter", "--", sys.executable, server],
            env={"MCP_STARTS": os.environ.get("MCP_STARTS", "")},
        )
        async with Client(params, mode="legacy") as client:
            try:
                result = await client.call_tool("next_number", {"label": label})
                print(json.dumps({"text": result.content[0].text}))
            except MCPError as e:
                print(json.dumps({"error": e.error.message}))

    asyncio.run(main())
    """
)


@pytest.fixture(scope="module")
def app(work) -> Path:
    path = work / "app.py"
    path.write_text(APP)
    return path


def exec_(cassette, store: Path, args: list[str], env: dict | None = None):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("CASSETTE_", "UPSTREAM_"))}
    full.update(env or {})
    return subprocess.run(
        [cassette, "exec", "--store", f"file://{store}", "--", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
    )


def test_exec_hands_its_mode_and_store_to_cassette_mcp_and_replays(cassette, app, recorded, work, store):
    result = exec_(
        cassette,
        store,
        [sys.executable, str(app), cassette, str(SERVER), "a"],
        env={"MCP_STARTS": str(work / "starts")},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"text": "a: 1"}
    # initialize, tools/list (the SDK lists tools before its first call) and the call.
    assert "mcp: 1 sessions, 3 requests: 3 hits, 0 misses" in result.stderr
    assert starts(work / "starts") == 1


def test_exec_exits_2_on_an_mcp_miss(cassette, app, recorded, work, store):
    result = exec_(
        cassette,
        store,
        [sys.executable, str(app), cassette, str(SERVER), "never recorded"],
        env={"MCP_STARTS": str(work / "starts")},
    )
    assert result.returncode == 2, result.stderr
    error = json.loads(result.stdout)["error"]
    assert "next_number" in error and "params.arguments.label" in error
    # exec lists the distinct missed key with the request and the explanation's summary.
    assert "cassette exec: 1 distinct key missed:" in result.stderr
    assert (
        " tools/call `next_number` on MCP server `counter`: The nearest recording" in result.stderr
        and '-> "never recorded".' in result.stderr
    ), result.stderr
    assert "1 misses" in result.stderr
    assert starts(work / "starts") == 1


def test_exec_in_record_mode_records_through_cassette_mcp(cassette, app, tmp_path):
    store = tmp_path / "exec-record"
    env = {"CASSETTE_MODE": "record", "MCP_STARTS": str(tmp_path / "starts")}
    result = exec_(cassette, store, [sys.executable, str(app), cassette, str(SERVER), "x"], env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"text": "x: 1"}
    assert starts(tmp_path / "starts") == 1
    assert sorted(c["request"]["path"] for c in cassettes(store)) == ["initialize", "tools/call", "tools/list"]
    replay = exec_(cassette, store, [sys.executable, str(app), cassette, "/nonexistent", "x"])
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout) == {"text": "x: 1"}
    assert starts(tmp_path / "starts") == 1
