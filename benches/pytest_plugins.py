#!/usr/bin/env python3
"""Test-runner benchmark (BENCHMARKS.md, "Test runner plugins"): replaying one suite of N tests,
each making one OpenAI chat call with the official SDK, under

- cassette's pytest plugin (`pytest`, the plugin from the cassette-cli wheel: its in-process
  transports over the proxy's channel), and the same with them off (`CASSETTE_IN_PROCESS=off`:
  the SDK over loopback HTTP to the proxy),
- `cassette exec -- pytest` (the plugin stays out under exec),
- cassetter's pytest plugin (PyPI `cassetter`, `@pytest.mark.vcr`, `--record-mode=none`),
- pytest-recording (vcrpy; `@pytest.mark.vcr`, `--record-mode=none`),
- and two baselines without any tool: the SDK over real HTTP to a loopback server that
  answers the recorded answer from memory (what HTTP itself costs the SDK), and a floor no tool
  can go under: the SDK's HTTP client given an in-memory transport (no socket at all),

same test file, same answers (each tool records once from the fake vendor of tests/sdk, which
then stops). Each tool gets its own venv (cassetter and pytest-recording both add
`--record-mode` and cannot share one). Rounds alternate the tools so the machine's load falls on
each alike; medians are compared.

The test phase is pytest's run-test loop (from the first test's setup to the last test's
teardown: `pytest_runtestloop`, timed by the project's conftest), so interpreter start-up,
imports and collection, alike for all, stay out; the wall time of the whole command is shown
beside it. The plugin start-up (proxy spawned and ready, the plugin's own figure from its header)
is the time from spawning `cassette proxy` to reading its ready line.

  python3 benches/pytest_plugins.py WHEEL [--binary target/release/cassette] [--tests 300] [--rounds 7]
                                          [--work DIR]   # keeps the venvs there for the next run
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PINS = {
    "pytest": "pytest==9.2.0",
    "openai": "openai==3.57.0",
    "anthropic": "anthropic==2.14.0",
    "cassetter": "cassetter==0.16.1",
    "recording": ["pytest-recording==0.14.1", "vcrpy==9.4.2"],
}
SDKS = [PINS["pytest"], PINS["openai"], PINS["anthropic"]]

TEST_FILE = """
import openai
import pytest

client = openai.OpenAI(max_retries=0)


@pytest.mark.vcr
@pytest.mark.parametrize("n", range({tests}))
def test_chat(n):
    answer = client.chat.completions.create(
        model="gpt-4o-mini", temperature=0,
        messages=[{{"role": "user", "content": f"Question {{n}}: where is my refund?"}}],
    )
    assert answer.choices[0].message.content
"""

# `--suite agent`: what a real suite's agent tests do (issue 32's second target). Each test
# builds its clients afresh and runs two providers' tool loops: a streamed OpenAI turn whose
# tool calls are gathered from the chunks, the tools' results sent back for the answer, then the
# same with Anthropic (the SDK's stream helper), four requests a test, two of them streamed.
AGENT_FILE = """
import anthropic
import json
import openai
import pytest

SCHEMA = {{"type": "object", "properties": {{"city": {{"type": "string"}}}}}}
TOOLS = [{{"type": "function", "function": {{"name": "get_weather", "parameters": SCHEMA}}}}]
ANTHROPIC_TOOLS = [{{"name": "get_weather", "input_schema": SCHEMA}}]


def openai_turns(client, task):
    messages = [{{"role": "user", "content": task}}]
    calls = {{}}
    stream = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS, stream=True)
    for chunk in stream:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            got = calls.setdefault(call.index, {{"id": call.id, "name": "", "arguments": ""}})
            got["name"] += (call.function.name or "") if call.function else ""
            got["arguments"] += (call.function.arguments or "") if call.function else ""
    assert calls
    messages.append({{"role": "assistant", "tool_calls": [
        {{"id": c["id"], "type": "function", "function": {{"name": c["name"], "arguments": c["arguments"]}}}}
        for c in calls.values()
    ]}})
    for c in calls.values():
        messages.append({{"role": "tool", "tool_call_id": c["id"], "content": json.dumps({{"temp": 21}})}})
    answer = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    return answer.choices[0].message.content


def anthropic_turns(client, task):
    messages = [{{"role": "user", "content": task}}]
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=512, messages=messages, tools=ANTHROPIC_TOOLS) as stream:
        first = stream.get_final_message()
    uses = [block for block in first.content if block.type == "tool_use"]
    assert uses
    messages.append({{"role": "assistant", "content": [block.model_dump() for block in first.content]}})
    messages.append({{"role": "user", "content": [
        {{"type": "tool_result", "tool_use_id": use.id, "content": "21 degrees"}} for use in uses
    ]}})
    answer = client.messages.create(model="claude-sonnet-4-5", max_tokens=512, messages=messages, tools=ANTHROPIC_TOOLS)
    return answer.content


@pytest.mark.vcr
@pytest.mark.parametrize("n", range({tests}))
def test_agent(n):
    task = f"Task {{n}}: the weather in Paris, then book a table."
    assert openai_turns(openai.OpenAI(max_retries=0), task) is not None
    assert anthropic_turns(anthropic.Anthropic(max_retries=0), task)
"""

# The agent suite's floor: both SDKs given an in-memory transport answering what the fake vendor
# answers (ANSWERS: path and whether streamed, to content type and body).
AGENT_FLOOR_HEAD = """
import importlib

import anthropic
import openai

ANSWERS = {answers!r}


def transport(sdk):
    httpx = importlib.import_module(sdk.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])

    def answer(request):
        stream = b'"stream":true' in request.content.replace(b" ", b"")
        content_type, body = ANSWERS[(request.url.path, stream)]
        return httpx.Response(200, content=body, headers={{"content-type": content_type}})

    return httpx.Client(transport=httpx.MockTransport(answer))


_openai, _anthropic = openai.OpenAI, anthropic.Anthropic
openai.OpenAI = lambda **kw: _openai(base_url="http://127.0.0.1:9/v1", http_client=transport(openai), **kw)
anthropic.Anthropic = lambda **kw: _anthropic(base_url="http://127.0.0.1:9", http_client=transport(anthropic), **kw)
"""

# The floor: the SDK's own cost, with an in-memory transport of its HTTP library (httpx, or
# the fork the SDK names) answering the recorded answer.
FLOOR_FILE = """
import importlib
import openai
import pytest

httpx = importlib.import_module(openai.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])
BODY = {body!r}


def answer(request):
    return httpx.Response(200, content=BODY, headers={{"content-type": "application/json"}})


client = openai.OpenAI(max_retries=0, base_url="http://127.0.0.1:9/v1",
                       http_client=httpx.Client(transport=httpx.MockTransport(answer)))


@pytest.mark.parametrize("n", range({tests}))
def test_chat(n):
    answer = client.chat.completions.create(
        model="gpt-4o-mini", temperature=0,
        messages=[{{"role": "user", "content": f"Question {{n}}: where is my refund?"}}],
    )
    assert answer.choices[0].message.content
"""

CONFTEST = """
import json, os, time
import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        with open(os.environ["BENCH_OUT"], "w") as out:
            json.dump({"loop_s": time.perf_counter() - start}, out)
"""


def load_fakes():
    spec = importlib.util.spec_from_file_location("fakes", ROOT / "tests" / "sdk" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sh(args: list, cwd: Path, env: dict, expect: int = 0) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if result.returncode != expect:
        sys.exit(f"{args}: exit {result.returncode}\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return result


def make_venv(folder: Path, packages: list[str]) -> Path:
    if (folder / "bin" / "python").exists():
        # A kept venv (--work): only the wheel of this checkout is installed again.
        wheels = [p for p in packages if p.endswith(".whl")]
        if wheels:
            subprocess.run(
                [
                    str(folder / "bin" / "pip"),
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    "--force-reinstall",
                    "--no-deps",
                    *wheels,
                ],
                check=True,
            )
        return folder / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    subprocess.run([str(folder / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *packages], check=True)
    return folder / "bin" / "python"


def make_project(folder: Path, test_file: str, ours: bool) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_chat.py").write_text(test_file)
    (folder / "tests" / "conftest.py").write_text(CONFTEST)
    ini = "[pytest]\ntestpaths = tests\naddopts = -p no:cacheprovider\n"
    if ours:
        ini += "markers =\n    vcr: pytest-recording's, unused here\n"
        (folder / "cassette.toml").write_text('store = "cassettes"\n')
    (folder / "pytest.ini").write_text(ini)
    return folder


class Canned(socketserver.StreamRequestHandler):
    """A keep-alive HTTP/1.1 server answering every request with one answer from memory: the
    least an HTTP upstream can cost (its latency, not ours, is in the figure)."""

    answer = b""

    def handle(self) -> None:
        while True:
            length = 0
            line = self.rfile.readline()
            if not line:
                return
            while line not in (b"\r\n", b"\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
                line = self.rfile.readline()
            self.rfile.read(length)
            self.wfile.write(self.answer)


def canned_server(body: bytes) -> socketserver.ThreadingTCPServer:
    Canned.answer = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Canned)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def base_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CASSETTE_", "OPENAI_", "UPSTREAM_", "PYTEST", "VIRTUAL_ENV", "PYTHON"))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--binary", type=Path, default=ROOT / "target" / "release" / "cassette")
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--work", type=Path, help="a folder to keep the venvs in between runs")
    parser.add_argument(
        "--suite",
        choices=["one-call", "agent"],
        default="one-call",
        help="one OpenAI call a test, or four (two providers' tool loops, two streamed)",
    )
    args = parser.parse_args()
    agent = args.suite == "agent"
    test_file = (AGENT_FILE if agent else TEST_FILE).format(tests=args.tests)
    per_test = 4 if agent else 1

    fakes = load_fakes()
    work = args.work.resolve() if args.work else Path(tempfile.mkdtemp(prefix="bench-runners-"))
    for old in work.glob("p-*"):
        shutil.rmtree(old)
    print(f"# venvs and projects in {work}", file=sys.stderr)
    pythons = {
        "cassette": make_venv(work / "v-cassette", [*SDKS, str(args.wheel.resolve())]),
        "cassetter": make_venv(work / "v-cassetter", [*SDKS, PINS["cassetter"]]),
        "recording": make_venv(work / "v-recording", [*SDKS, *PINS["recording"]]),
    }
    binary = str(args.binary.resolve())
    projects = {name: make_project(work / f"p-{name}", test_file, name == "cassette") for name in pythons}

    upstream = fakes.FakeUpstream()
    (projects["cassette"] / "cassette.toml").write_text(
        f'store = "cassettes"\n[routes.anthropic]\nupstream = "{upstream.url}"\n'
    )
    env = base_env()
    ours_env = {**env, "CASSETTE_BINARY": binary}
    sh(
        [pythons["cassette"], "-m", "pytest", "-q", "--cassette=record"],
        projects["cassette"],
        {**ours_env, "UPSTREAM_BASE": upstream.url, "OPENAI_API_KEY": "sk-bench", "BENCH_OUT": str(work / "x.json")},
    )
    for name in ("cassetter", "recording"):
        sh(
            [pythons[name], "-m", "pytest", "-q", "--record-mode=once"],
            projects[name],
            {
                **env,
                "OPENAI_BASE_URL": f"{upstream.url}/v1",
                "OPENAI_API_KEY": "sk-bench",
                "ANTHROPIC_BASE_URL": upstream.url,
                "ANTHROPIC_API_KEY": "sk-ant-bench",
                "BENCH_OUT": str(work / "x.json"),
            },
        )
    # The floor answers what the first test's cassette holds (the agent suite's, what the fake
    # vendor answers).
    first = next((projects["cassette"] / "cassettes").rglob("*.json"))
    body = json.dumps(json.loads(first.read_text())["response"]["body"]["json"]).encode()
    unmarked = test_file.replace("@pytest.mark.vcr\n", "")
    if agent:
        answers = {
            (path, stream): fakes._answer_for(path, {"stream": stream})
            for path in ("/v1/chat/completions", "/v1/messages")
            for stream in (True, False)
        }
        floor = make_project(work / "p-floor", AGENT_FLOOR_HEAD.format(answers=answers) + unmarked, False)
    else:
        floor = make_project(work / "p-floor", FLOOR_FILE.format(body=body, tests=args.tests), False)
    direct = make_project(work / "p-direct", unmarked, False)
    canned = canned_server(body)
    canned_url = f"http://127.0.0.1:{canned.server_address[1]}/v1"
    recorded = len(upstream.requests)
    assert recorded == 3 * per_test * args.tests, recorded
    upstream.stop()
    connections = upstream.connections

    vendor_env = {
        "OPENAI_BASE_URL": f"{upstream.url}/v1",
        "OPENAI_API_KEY": "sk-bench",
        "ANTHROPIC_BASE_URL": upstream.url,
        "ANTHROPIC_API_KEY": "sk-ant-bench",
    }
    commands = {
        "cassette plugin": ([pythons["cassette"], "-m", "pytest", "-q"], projects["cassette"], ours_env),
        # The same without the in-process transports: the SDK over loopback HTTP to the proxy.
        "plugin, HTTP path": (
            [pythons["cassette"], "-m", "pytest", "-q"],
            projects["cassette"],
            {**ours_env, "CASSETTE_IN_PROCESS": "off"},
        ),
        "cassette exec": (
            [binary, "exec", "--", pythons["cassette"], "-m", "pytest", "-q"],
            projects["cassette"],
            ours_env,
        ),
        "cassetter": (
            [pythons["cassetter"], "-m", "pytest", "-q", "--record-mode=none"],
            projects["cassetter"],
            {**env, **vendor_env},
        ),
        "pytest-recording": (
            [pythons["recording"], "-m", "pytest", "-q", "--record-mode=none"],
            projects["recording"],
            {**env, **vendor_env},
        ),
        # One canned answer for every request: the one-call suite only.
        "no tool, HTTP": (
            [pythons["cassette"], "-m", "pytest", "-q", "-p", "no:cassette_cli"],
            direct,
            {**env, "OPENAI_BASE_URL": canned_url, "OPENAI_API_KEY": "sk-bench"},
        ),
        "floor (no HTTP)": (
            [pythons["cassette"], "-m", "pytest", "-q", "-p", "no:cassette_cli"],
            floor,
            {**env, "OPENAI_API_KEY": "sk-bench", "ANTHROPIC_API_KEY": "sk-ant-bench"},
        ),
    }
    if agent:
        del commands["no tool, HTTP"]
    loops: dict[str, list[float]] = {name: [] for name in commands}
    walls: dict[str, list[float]] = {name: [] for name in commands}
    startups: list[float] = []
    for round_ in range(args.rounds):
        order = list(commands)
        order = order[round_ % len(order) :] + order[: round_ % len(order)]
        for name in order:
            command, cwd, command_env = commands[name]
            out = work / "loop.json"
            start = time.perf_counter()
            result = sh(command, cwd, {**command_env, "BENCH_OUT": str(out)})
            walls[name].append(time.perf_counter() - start)
            assert f"{args.tests} passed" in result.stdout, result.stdout[-2000:]
            loops[name].append(json.loads(out.read_text())["loop_s"])
            if name == "cassette plugin":
                found = re.search(r"proxy ready in (\d+) ms", result.stdout)
                assert found, result.stdout[-2000:]
                startups.append(float(found.group(1)))
    assert upstream.connections == connections, "a replay connected to the vendor"
    upstream.close()
    canned.shutdown()

    base = {name: statistics.median(values) for name, values in loops.items()}
    what = "an OpenAI and an Anthropic tool loop (4 requests, 2 streamed)" if agent else "one OpenAI chat call"
    print(f"{args.tests} tests, {what} each, replayed; {args.rounds} rounds, medians")
    print(f"{'tool':<18} {'test phase':>11} {'min':>8} {'wall':>8}   ratio to cassetter / pytest-recording")
    for name in commands:
        print(
            f"{name:<18} {base[name]:>10.3f}s {min(loops[name]):>7.3f}s {statistics.median(walls[name]):>7.2f}s"
            f"   {base[name] / base['cassetter']:.2f}x / {base[name] / base['pytest-recording']:.2f}x"
        )
    print(
        f"plugin start-up (proxy spawned and ready): median {statistics.median(startups):.0f} ms, "
        f"min {min(startups):.0f} ms, max {max(startups):.0f} ms over {len(startups)} runs"
    )


if __name__ == "__main__":
    main()
