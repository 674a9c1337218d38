"""The Node helpers of cassette-cli as users get them: the npm tarballs scripts/package-test.sh
packed (the shim package and the linux-x64 binary package), laid into a fresh project beside
vitest 3, jest 29 and jest 30 from the registry (tests/runners/node, pinned) and driving the
suite of tests/runners/node_project (the OpenAI Node SDK and the Vercel AI SDK, clients built at
import time from the environment) against the fake vendor of tests/sdk:

- recorded with CASSETTE_MODE=record (each cassette names its test file and test in meta.test),
  replayed with the vendor stopped (not one connection);
- one changed prompt fails exactly its test with the explanation, also when the Vercel AI SDK's
  streamText swallowed the error; a hard-coded vendor URL fails exactly its test; so does one
  sent by a test's child process (`node child.mjs`), whose hit is counted for that test too;
- startCassette() on its own: URL, environment, control endpoint, stop.

Inputs: CASSETTE_NPM_DIR (scripts/package-test.sh); tests/runners/node/node_modules (`npm ci
--prefix tests/runners/node`, which scripts/package-test.sh runs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tomllib
from pathlib import Path

import pytest
from sdk_fakes import FakeUpstream

ROOT = Path(__file__).resolve().parents[2]
RUNNERS = ROOT / "tests" / "runners"
MODULES = RUNNERS / "node" / "node_modules"
VERSION = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
SECRET = "sk-test-NODERECORDKEY0123456789abcdef"
RUNNER_COMMANDS = {
    "vitest3": [
        "node_modules/vitest/vitest.mjs",
        "run",
        "--reporter=default",
        "--reporter=json",
        "--outputFile.json=results.json",
    ],
    "jest29": ["node_modules/jest29/bin/jest.js", "--json", "--outputFile=results.json"],
    "jest30": ["node_modules/jest30/bin/jest.js", "--json", "--outputFile=results.json"],
}
# Each runner's files and tests (vitest's ESM files, jest's CommonJS ones; the same tests).
EXTENSION = {"vitest3": "js", "jest29": "cjs", "jest30": "cjs"}


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            (
                "CASSETTE_",
                "UPSTREAM_",
                "OPENAI_",
                "ANTHROPIC_",
                "GEMINI_",
                "GOOGLE_",
                "NODE_",
                "npm_",
                "VITEST",
                "JEST",
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


def run(args: list, cwd: Path, env: dict, expect: int | None = 0, timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(a) for a in args], check=False, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )
    if expect is not None:
        assert result.returncode == expect, (
            f"{args}: exit {result.returncode}, expected {expect}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
    return result


@pytest.fixture(scope="session")
def tarballs() -> dict[str, Path]:
    folder = os.environ.get("CASSETTE_NPM_DIR")
    if not folder or not Path(folder).is_dir():
        pytest.fail("CASSETTE_NPM_DIR must name the folder of the packed tarballs: run scripts/package-test.sh")
    found = {
        "cassette-cli": Path(folder) / f"cassette-cli-{VERSION}.tgz",
        "cassette-cli-linux-x64": Path(folder) / f"cassette-cli-linux-x64-{VERSION}.tgz",
    }
    for path in found.values():
        assert path.is_file(), path
    if shutil.which("node") is None or not (MODULES / "vitest").is_dir():
        pytest.fail("node and tests/runners/node/node_modules are needed: run `npm ci --prefix tests/runners/node`")
    return found


def make_project(folder: Path, tarballs: dict[str, Path]) -> Path:
    """tests/runners/node_project with the runners and SDKs linked in and cassette-cli unpacked
    from its tarballs, as npm lays a package out (`package/` is the package's folder)."""
    shutil.copytree(RUNNERS / "node_project", folder)
    modules = folder / "node_modules"
    modules.mkdir()
    for entry in MODULES.iterdir():
        if not entry.name.startswith(".") and not entry.name.startswith("cassette-cli"):
            (modules / entry.name).symlink_to(entry)
    for name, tarball in tarballs.items():
        target = modules / name
        with tarfile.open(tarball) as archive:
            for member in archive.getmembers():
                member.name = member.name.removeprefix("package/")
            archive.extractall(target, filter="tar")
    return folder


def results(project: Path) -> dict[str, tuple[str, str]]:
    """Each test (`file > full name`) with its status and failure messages (jest's JSON, which
    vitest's json reporter writes too)."""
    data = json.loads((project / "results.json").read_text())
    out = {}
    for suite in data["testResults"]:
        file = Path(suite["name"]).name
        for case in suite["assertionResults"]:
            name = " > ".join([*case.get("ancestorTitles", []), case["title"]])
            status = "pending" if case["status"] in ("skipped", "pending", "todo") else case["status"]
            out[f"{file} > {name}"] = (status, "\n".join(case.get("failureMessages") or []))
    return out


@pytest.mark.parametrize("runner", list(RUNNER_COMMANDS))
def test_record_replay_and_a_miss_fails_exactly_its_test(runner, tarballs, tmp_path):
    project = make_project(tmp_path / "project", tarballs)
    ext = EXTENSION[runner]
    command = ["node", *RUNNER_COMMANDS[runner]]
    cassette = project / "node_modules" / "cassette-cli-linux-x64" / "bin" / "cassette"
    upstream = FakeUpstream()
    try:
        env = clean_env()
        run(
            command,
            project,
            {**env, "CASSETTE_MODE": "record", "UPSTREAM_BASE": upstream.url, "OPENAI_API_KEY": SECRET},
        )
        recorded = results(project)
        # Eight tests call the vendor; "base URLs" and "child environment" check what the test
        # and its children see.
        assert sorted(status for status, _ in recorded.values()) == ["passed"] * 10 + ["pending"], recorded
        assert len(upstream.requests) == 8, upstream.requests
        rows = [json.loads(line) for line in run([cassette, "ls", "--json"], project, env).stdout.splitlines()]
        sep = " " if runner.startswith("jest") else " > "  # jest names a test by its titles and spaces
        assert sorted(str(row.get("test")) for row in rows) == sorted(
            [
                f"tests/chat.test.{ext} > openai{sep}plain 0",
                f"tests/chat.test.{ext} > openai{sep}plain 1",
                f"tests/chat.test.{ext} > openai{sep}plain 2",
                f"tests/chat.test.{ext} > openai{sep}node:https hard-coded",
                # A test's child process is charged to the test that started it.
                f"tests/chat.test.{ext} > openai{sep}child process",
                f"tests/vercel.test.{ext} > generate",
                f"tests/vercel.test.{ext} > swallowed stream",
                f"tests/vercel.test.{ext} > hard-coded vendor URL",
            ]
        ), rows
        assert SECRET not in "".join(p.read_text() for p in (project / "cassettes").rglob("*.json"))

        upstream.stop()
        before = upstream.connections
        # The hard-coded vendor URLs (fetch and node:https) replay like the rest (issue 32):
        # the helpers load the preload into every worker, which hands them to the channel.
        run(command, project, env)
        assert sorted(status for status, _ in results(project).values()) == ["passed"] * 10 + ["pending"]
        assert upstream.connections == before

        changed = "plain-1,vercel-swallowed,https-hardcoded,child"
        broken = run(command, project, {**env, "CHANGE": changed, "UNROUTED": "1"}, expect=1)
        assert upstream.connections == before
        outcome = results(project)
        failed = {name for name, (status, _) in outcome.items() if status == "failed"}
        # Each miss is charged to the test whose worker sent it, over HTTP and over the channel.
        assert failed == {
            f"chat.test.{ext} > openai > plain 1",
            f"chat.test.{ext} > openai > node:https hard-coded",
            f"chat.test.{ext} > openai > child process",
            f"vercel.test.{ext} > swallowed stream",
            f"vercel.test.{ext} > unrouted host",
        }, outcome
        assert len(outcome) == 11
        plain = outcome[f"chat.test.{ext} > openai > plain 1"][1]
        assert "CassetteMiss: cassette: tests/chat.test." in plain, plain
        assert "cassette miss: no recording for POST /v1/chat/completions" in plain, plain
        assert (
            '"Question 1: where is my refund?" -> "Question 1: where is my refund? Answer in French instead."' in plain
        )
        swallowed = outcome[f"vercel.test.{ext} > swallowed stream"][1]
        assert "cassette miss" in swallowed and "Summarise the ticket. Answer in French instead." in swallowed
        over_https = outcome[f"chat.test.{ext} > openai > node:https hard-coded"][1]
        assert "cassette miss" in over_https and "Answer in French instead." in over_https, over_https
        # The child swallowed its miss and printed a fallback: only cassette failed the test.
        in_child = outcome[f"chat.test.{ext} > openai > child process"][1]
        assert "cassette miss" in in_child and "From a child process, where is my order? Answer in French" in in_child
        unrouted = outcome[f"vercel.test.{ext} > unrouted host"][1]
        assert "unrouted.example:443" in unrouted, unrouted
        # Without the channel (Windows, CASSETTE_IN_PROCESS=off) a hard-coded URL is refused
        # instead of replayed, and fails its test: what the preload adds.
        # (Only vercel.test's file: node:https would go to the network without the preload.)
        outside = run([*command, "vercel.test"], project, {**env, "CASSETTE_IN_PROCESS": "off"}, expect=1)
        assert upstream.connections == before
        outcome = results(project)
        failed = {name for name, (status, _) in outcome.items() if status == "failed"}
        assert f"vercel.test.{ext} > hard-coded vendor URL" in failed, outside.stdout
        # A child still gets cassette's variables, under jest too (it got the real key before).
        status, why = outcome[f"vercel.test.{ext} > child environment"]
        assert status == "passed", why
        # The proxy's own counters, printed by the teardown.
        assert "cassette proxy: stopped; " in broken.stdout + broken.stderr
    finally:
        upstream.close()


def test_start_cassette_on_its_own(tarballs, tmp_path):
    project = make_project(tmp_path / "project", tarballs)
    script = project / "start.mjs"
    script.write_text(
        'import { startCassette, scopedEnv } from "cassette-cli";\n'
        'const cassette = await startCassette({ mode: "replay", args: ["--store", "memory://"] });\n'
        "const health = await (await fetch(`${cassette.url}/healthz`)).json();\n"
        'const headers = { "x-cassette-control": cassette.control.token };\n'
        'const put = await fetch(`${cassette.control.scopes}/s1`, { method: "PUT", headers, body: JSON.stringify({ test: "t" }) });\n'
        "const stranger = await fetch(`${cassette.control.scopes}/s1`);\n"
        'const env = scopedEnv(cassette, "s1");\n'
        "const stopped = await cassette.stop();\n"
        "console.log(JSON.stringify({ url: cassette.url, run: cassette.base, mode: health.mode, base: cassette.env.OPENAI_BASE_URL,\n"
        "  scoped: env.OPENAI_BASE_URL, proxy: env.HTTPS_PROXY, put: put.status, stranger: stranger.status,\n"
        "  status: stopped.status, log: stopped.log }));\n"
    )
    result = run(["node", script], project, clean_env())
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    url = answer["url"]
    assert url.startswith("http://127.0.0.1:")
    # The base URLs carry the run secret (only the run's clients may record through it).
    run_base = answer["run"]
    assert run_base.startswith(f"{url}/_run/") and len(run_base) >= len(url) + 6 + 16, run_base
    assert (answer["mode"], answer["base"]) == ("replay", f"{run_base}/v1")
    assert answer["scoped"] == f"{run_base}/_scope/s1/v1"
    assert answer["proxy"] == url  # the proxy variables name the proxy, never a scope
    assert (answer["put"], answer["stranger"], answer["status"]) == (200, 403, 0)
    assert "cassette proxy: stopped;" in answer["log"]

    # A proxy that cannot start is an error with its own words, not a hang.
    failing = project / "fail.mjs"
    failing.write_text(
        'import { startCassette } from "cassette-cli";\n'
        'try { await startCassette({ args: ["--store", "nope://x"] }); }\n'
        'catch (error) { console.log(error.name + ": " + error.message); }\n'
    )
    result = run(["node", failing], project, clean_env())
    assert "CassetteError: " in result.stdout and "nope" in result.stdout, result.stdout


def test_stop_returns_the_whole_log(tarballs, tmp_path):
    """stop() waits for the proxy's stderr to close, not merely for the process to exit: what the
    proxy wrote last (its `stopped;` summary, which the vitest and jest teardowns print) can
    arrive after the exit event. The stand-in binary leaves that line to a child holding its
    stderr, so an exit-only wait misses it every time."""
    project = make_project(tmp_path / "project", tarballs)
    fake = tmp_path / "fake-cassette"
    fake.write_text(
        "#!/bin/sh\n"
        'echo \'{"url":"http://127.0.0.1:9","pid":1,"mode":"replay","env":{},"unset":[],"control":null}\'\n'
        "trap '(sleep 0.3; echo \"cassette proxy: stopped; 0 requests\" >&2) & exit 0' TERM\n"
        "while :; do sleep 0.05; done\n"
    )
    fake.chmod(0o755)
    script = project / "stop.mjs"
    script.write_text(
        'import { startCassette } from "cassette-cli";\n'
        f"const cassette = await startCassette({{ binary: {json.dumps(str(fake))} }});\n"
        "const stopped = await cassette.stop();\n"
        "console.log(JSON.stringify(stopped));\n"
    )
    result = run(["node", script], project, clean_env())
    stopped = json.loads(result.stdout.strip().splitlines()[-1])
    assert stopped["status"] == 0, stopped
    assert "cassette proxy: stopped; 0 requests" in stopped["log"], stopped
