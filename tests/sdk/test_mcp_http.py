"""A Streamable HTTP MCP server (tests/sdk/mcp_counter_server.py over HTTP) recorded and replayed
through `cassette proxy --mcp-route`, with the official `mcp` Python SDK as the client: the
handshake-era protocol (sessions, answers as server-sent events) and the 2026 one (no session,
JSON answers); replay with the server stopped, misses as JSON-RPC errors, `cassette exec`
exiting 2."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import Proxy
from mcp import Client, MCPError

SERVER = Path(__file__).with_name("mcp_counter_server.py")
TIMEOUT = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServer:
    """The counter server over Streamable HTTP on a free loopback port."""

    def __init__(self, work: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.starts = work / "http-starts"
        env = dict(os.environ, MCP_STARTS=str(self.starts))
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), "--http", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the MCP server did not start")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


async def _session(url: str, mode: str, labels: list[str]) -> dict:
    out: dict = {"results": []}
    async with Client(url, mode=mode, read_timeout_seconds=TIMEOUT, cache=None) as client:
        out["protocol"] = client.protocol_version
        out["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
        for label in labels:
            try:
                result = await client.call_tool("next_number", {"label": label})
                out["results"].append(result.content[0].text)
            except MCPError as e:
                out["results"].append({"error": e.error.code, "message": e.error.message})
    return out


def session(url: str, mode: str = "legacy", labels=("a", "b")) -> dict:
    return asyncio.run(asyncio.wait_for(_session(url, mode, list(labels)), TIMEOUT))


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mcp-http")


@pytest.fixture(scope="module")
def server(work):
    server = HttpServer(work)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def recorded(server, store_url):
    proxy = Proxy(
        ["--mcp-route", f"counter={server.url}"], env={"CASSETTE_MODE": "record", "CASSETTE_STORE": store_url}
    )
    try:
        legacy = session(f"{proxy.url}/counter/mcp", mode="legacy")
        modern = session(f"{proxy.url}/counter/mcp", mode="auto", labels=["m"])
    finally:
        log = proxy.stop()
    return {"legacy": legacy, "modern": modern, "log": log}


@pytest.fixture(scope="module")
def stopped(recorded, server):
    server.stop()
    return server


def test_record_goes_through_to_the_live_server(recorded, server):
    assert recorded["legacy"]["tools"] == ["next_number", "now"]
    assert recorded["legacy"]["results"] == ["a: 1", "b: 2"]
    assert recorded["modern"]["protocol"] >= "2026"
    assert recorded["modern"]["results"] == ["m: 3"]
    assert "0 misses" in recorded["log"]
    assert len(server.starts.read_text().splitlines()) == 1


def test_replay_answers_with_the_server_stopped(recorded, stopped, store_url):
    proxy = Proxy(["--mcp-route", f"counter={stopped.url}"], env={"CASSETTE_STORE": store_url})
    try:
        legacy = session(f"{proxy.url}/counter/mcp", mode="legacy")
        modern = session(f"{proxy.url}/counter/mcp", mode="auto", labels=["m"])
        stats = proxy.stats()
    finally:
        proxy.stop()
    assert legacy == recorded["legacy"]
    assert modern == recorded["modern"]
    assert stats["misses"] == 0 and stats["upstream_requests"] == 0


def test_changed_arguments_get_an_error_naming_the_tool_and_the_argument(recorded, stopped, store_url):
    proxy = Proxy(["--mcp-route", f"counter={stopped.url}"], env={"CASSETTE_STORE": store_url})
    try:
        replayed = session(f"{proxy.url}/counter/mcp", labels=["a", "changed"])
        stats = proxy.stats()
    finally:
        log = proxy.stop()
    assert replayed["results"][0] == "a: 1"
    miss = replayed["results"][1]
    assert miss["error"] == -32090
    assert "next_number" in miss["message"] and "params.arguments.label" in miss["message"]
    assert stats["misses"] == 1
    assert "cassette miss" in log


APP = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from mcp import Client, MCPError

    async def main():
        url = os.environ["CASSETTE_PROXY_URL"] + "/counter/mcp"
        async with Client(url, mode="legacy", cache=None) as client:
            try:
                result = await client.call_tool("next_number", {"label": sys.argv[1]})
                print(json.dumps({"text": result.content[0].text}))
            except MCPError as e:
                print(json.dumps({"error": e.error.message}))

    asyncio.run(main())
    """
)


def test_exec_exits_2_on_a_miss_of_an_http_mcp_server(cassette, recorded, stopped, store_url, tmp_path):
    app = tmp_path / "app.py"
    app.write_text(APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CASSETTE_", "UPSTREAM_"))}

    def run(label):
        return subprocess.run(
            [
                cassette,
                "exec",
                "--store",
                store_url,
                "--mcp-route",
                f"counter={stopped.url}",
                "--",
                sys.executable,
                str(app),
                label,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )

    hit = run("a")
    assert hit.returncode == 0, hit.stderr
    assert json.loads(hit.stdout) == {"text": "a: 1"}
    miss = run("never recorded")
    assert miss.returncode == 2, miss.stderr
    assert "next_number" in json.loads(miss.stdout)["error"]
    assert "1 misses" in miss.stderr
