"""The pytest plugin of cassette-cli as users get it: the wheel scripts/package-test.sh built,
installed into fresh venvs with pytest 8 and pytest 9 from the registry (pytest-xdist,
pytest-asyncio, pytest-recording and the OpenAI SDK beside it, tests/runners/requirements-*.txt),
driving the suite of tests/runners/pytest_project against the fake vendor of tests/sdk:

- recorded with `--cassette=record` (each cassette names its test in meta.test, `cassette ls`
  shows it), then replayed by a plain `pytest` with the vendor stopped (not one connection);
- one changed prompt fails exactly its test with the explanation (key, nearest recording, word
  diff), also when the application swallowed the error, a hard-coded vendor URL fails exactly
  its test, an unused recording fails the `strict` test; in the terminal summary and in JUnit's
  failure message;
- all of it with and without `-n 2` (pytest-xdist), with pytest-asyncio tests and a
  pytest-recording `vcr` test in the same suite.

Inputs: CASSETTE_WHEEL_DIR (scripts/package-test.sh).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from sdk_fakes import FakeUpstream

ROOT = Path(__file__).resolve().parents[2]
RUNNERS = ROOT / "tests" / "runners"
PROJECT = RUNNERS / "pytest_project"
SECRET = "sk-test-PLUGINRECORDKEY0123456789abcdef"


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that would point cassette or pytest elsewhere."""
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
                "PYTHON",
                "VIRTUAL_ENV",
                "PYTEST",
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
def wheel() -> Path:
    folder = os.environ.get("CASSETTE_WHEEL_DIR")
    if not folder or not Path(folder).is_dir():
        pytest.fail("CASSETTE_WHEEL_DIR must name the folder of the built wheel: run scripts/package-test.sh")
    wheels = sorted(Path(folder).glob("cassette_cli-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="session", params=["8", "9"], ids=["pytest8", "pytest9"])
def venv(request, wheel, tmp_path_factory) -> Path:
    """A fresh venv with pytest N, its plugins, the OpenAI SDK and the cassette-cli wheel."""
    folder = tmp_path_factory.mktemp(f"pytest{request.param}") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    requirements = RUNNERS / f"requirements-pytest{request.param}.txt"
    subprocess.run(
        [
            str(folder / "bin" / "pip"),
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(requirements),
            str(wheel),
        ],
        check=True,
        timeout=900,
    )
    return folder


def pytest_in(venv: Path) -> list:
    return [venv / "bin" / "python", "-m", "pytest", "-p", "no:cacheprovider"]


def junit_failures(path: Path) -> dict[str, str]:
    """Failed test names (`file::name`) and their failure (or error) messages."""
    failed = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        for kind in ("failure", "error"):
            element = case.find(kind)
            if element is not None:
                name = f"{case.get('classname', '').rsplit('.', 1)[-1]}.py::{case.get('name')}"
                failed[name] = (element.get("message") or "") + "\n" + (element.text or "")
    return failed


@pytest.mark.parametrize("workers", [None, 2], ids=["serial", "xdist2"])
def test_record_replay_and_a_miss_fails_exactly_its_test(venv, workers, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    # loadgroup: the tests of one xdist_group share a worker, in file order.
    xdist = ["-n", str(workers), "--dist", "loadgroup"] if workers else []
    upstream = FakeUpstream()
    # A service of the application's own, not the LLM vendor's host: reached directly.
    weather = FakeUpstream()
    try:
        env = clean_env(WEATHER_URL=weather.url)

        # test_replay_marker replays test_counts' tape even in a recording run; under -n 2 no
        # schedule promises test_counts runs first, so its tape is recorded once beforehand.
        run(
            [*pytest_in(venv), "--cassette=record", "-k", "test_counts"],
            project,
            {**env, "UPSTREAM_BASE": upstream.url, "OPENAI_API_KEY": SECRET},
        )
        first = len(upstream.requests)

        # Record: the real key stays with the proxy; pytest-recording records its own call.
        recorded = run(
            [*pytest_in(venv), "--cassette=record", "--record-mode=once", *xdist],
            project,
            {**env, "UPSTREAM_BASE": upstream.url, "OPENAI_API_KEY": SECRET},
        )
        assert "12 passed, 1 skipped" in recorded.stdout, recorded.stdout
        assert "cassette (record): 15 requests in tests" in recorded.stdout, recorded.stdout
        # 13 chat calls reach the vendor (test_replay_marker replays test_counts' tape, and
        # test_counts' repeat is answered from the recording it just made: a session asks each
        # request once), plus vcr's.
        chat_calls = [path for path, _, _ in upstream.requests[first:] if path == "/v1/chat/completions"]
        assert len(chat_calls) == 13, upstream.requests
        listing = run([venv / "bin" / "cassette", "ls", "--json"], project, env)
        rows = [json.loads(line) for line in listing.stdout.splitlines()]
        tests = sorted(row["test"] for row in rows)
        assert tests == sorted(
            [
                "tests/test_async.py::test_async_chat[0]",
                "tests/test_async.py::test_async_chat[1]",
                "tests/test_chat.py::test_conftest_client",
                "tests/test_chat.py::test_counts",
                "tests/test_chat.py::test_plain[0]",
                "tests/test_chat.py::test_plain[1]",
                "tests/test_chat.py::test_plain[2]",
                *["tests/test_chat.py::test_sequence"] * 3,
                "tests/test_chat.py::test_strict",
                "tests/test_chat.py::test_strict",
                "tests/test_chat.py::test_swallowed",
            ]
        ), tests
        table = run([venv / "bin" / "cassette", "ls"], project, env).stdout
        assert "tests/test_chat.py::test_sequence" in table, table
        stored = "".join(p.read_text() for p in (project / "cassettes").rglob("*.json"))
        assert SECRET not in stored
        assert list((project / "tests" / "cassettes").rglob("*.yaml")), "pytest-recording recorded nothing"

        # Replay: a plain pytest, the vendor stopped; nothing connects to it.
        upstream.stop()
        before = upstream.connections
        replayed = run([*pytest_in(venv), *xdist], project, env)
        assert "12 passed, 1 skipped" in replayed.stdout, replayed.stdout
        assert "cassette (replay): 15 requests in tests: 15 hits, 0 misses" in replayed.stdout, replayed.stdout
        assert upstream.connections == before

        # One prompt changed in a test that lets the error through, one in a test that swallows
        # it, one in an async test; a hard-coded vendor URL; a recording left unused.
        junit = tmp_path / "junit.xml"
        broken = run(
            [*pytest_in(venv), *xdist, f"--junitxml={junit}"],
            project,
            {**env, "CHANGE": "plain-1,swallowed,async-1", "HARDCODE": "1", "STRICT_SKIP": "1"},
            expect=1,
        )
        assert upstream.connections == before
        failures = junit_failures(junit)
        assert set(failures) == {
            "test_chat.py::test_plain[1]",
            "test_chat.py::test_swallowed",
            "test_async.py::test_async_chat[1]",
            "test_chat.py::test_hardcoded_vendor_url",
            "test_chat.py::test_strict",
        }, failures
        assert "8 passed" in broken.stdout and "5 failed" in broken.stdout, broken.stdout
        plain = failures["test_chat.py::test_plain[1]"]
        assert plain.startswith("cassette miss: no recording for POST /v1/chat/completions"), plain
        # The nearest recording is the test's own, and the word diff shows what changed late in
        # a long prompt.
        assert "where is my refund?{+ Answer in French instead.+}" in plain, plain
        own = next(row["key"] for row in rows if row["test"] == "tests/test_chat.py::test_plain[1]")
        assert f"The nearest recording, {own[:16]}, differs in" in plain, plain
        swallowed = failures["test_chat.py::test_swallowed"]
        assert swallowed.startswith("cassette miss"), swallowed
        assert '"Summarise the ticket." -> "Summarise the ticket. Answer in French instead."' in swallowed
        # Caught in process, a hard-coded vendor URL is answered like any other: never
        # recorded, it misses (with the transports off it is a refused bypass, below).
        hardcoded = failures["test_chat.py::test_hardcoded_vendor_url"]
        assert hardcoded.startswith("cassette miss: no recording for POST /v1/chat/completions"), hardcoded
        assert failures["test_chat.py::test_strict"].startswith("cassette strict: 1 recording(s)")
        assert "5 tests failed on cassette's account" in broken.stdout, broken.stdout
        for name in ("test_plain[1]", "test_swallowed", "test_hardcoded_vendor_url", "test_strict"):
            assert f"tests/test_chat.py::{name}: " in broken.stdout, broken.stdout

        if not workers:
            # The control endpoint alone (what Windows gets: no control pipe) fails the same
            # tests with the same explanations.
            junit_endpoint = tmp_path / "junit-endpoint.xml"
            endpoint = run(
                [*pytest_in(venv), f"--junitxml={junit_endpoint}"],
                project,
                {
                    **env,
                    "CHANGE": "plain-1,swallowed,async-1",
                    "HARDCODE": "1",
                    "STRICT_SKIP": "1",
                    "CASSETTE_CONTROL_PIPE": "off",
                },
                expect=1,
            )

            # The cassette part of each failure (the traceback below it names objects by address).
            def cassette_part(found: dict[str, str]) -> dict[str, list[str]]:
                return {name: text.split("\n")[:3] for name, text in found.items()}

            assert "control endpoint only" in endpoint.stdout and "control endpoint only" not in broken.stdout
            assert cassette_part(junit_failures(junit_endpoint)) == cassette_part(failures), endpoint.stdout
            assert upstream.connections == before

            # The transports off: the base-URL variables alone, and the hard-coded URL is a
            # refused bypass.
            outside = run(
                [*pytest_in(venv)],
                project,
                {**env, "HARDCODE": "1", "CASSETTE_IN_PROCESS": "off"},
                expect=1,
            )
            assert "api.openai.com:443 bypassed the base URL and were refused" in outside.stdout, outside.stdout
            assert upstream.connections == before
    finally:
        upstream.close()
        weather.close()


def write_project(folder: Path, ini: str = "", toml: str | None = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if toml is not None:
        (folder / "cassette.toml").write_text(toml)
    (folder / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    (folder / "test_env.py").write_text(
        "import os\n\ndef test_env():\n    print('BASE', os.environ.get('OPENAI_BASE_URL'))\n"
    )
    return folder


def header_mode(result: subprocess.CompletedProcess) -> str | None:
    for line in result.stdout.splitlines():
        if line.startswith("cassette: "):
            return line.split()[1].rstrip(",")
    return None


def test_who_decides_the_mode_and_when_the_plugin_stays_out(venv, tmp_path):
    if "pytest8" in str(venv):
        pytest.skip("the same code under both pytest versions: checked once")
    env = clean_env()
    base = [*pytest_in(venv), "-s"]

    opted = write_project(tmp_path / "opted")
    assert header_mode(run(base, opted, env)) == "replay"
    assert header_mode(run(base, opted, {**env, "CASSETTE_MODE": "auto"})) == "auto"
    assert header_mode(run([*base, "--cassette=replay"], opted, {**env, "CASSETTE_MODE": "auto"})) == "replay"
    ini = write_project(tmp_path / "ini", ini="cassette_mode = auto", toml=None)
    assert header_mode(run(base, ini, {**env, "CASSETTE_MODE": "record"})) == "auto"
    assert header_mode(run([*base, "--cassette=replay"], ini, env)) == "replay"

    # Off, or no opt-in at all: nothing started, nothing changed, and the header says why.
    plain = write_project(tmp_path / "plain", toml=None)
    for folder, args, why in ((opted, ["--cassette=off"], "(--cassette=off)"), (plain, [], "no cassette.toml found")):
        result = run([*base, *args], folder, env)
        assert header_mode(result) == "off" and why in result.stdout, result.stdout
        assert "BASE None" in result.stdout, result.stdout
        assert "cassette (" not in result.stdout, result.stdout

    # Under `cassette exec` the plugin leaves it to exec's proxy.
    result = run([venv / "bin" / "cassette", "exec", "--", *base], opted, env)
    assert "cassette: the proxy of `cassette exec` at http://127.0.0.1:" in result.stdout, result.stdout
    # ... whose channel this Python process catches its requests over: its base URLs name the
    # vendors (docs/proxy.md, "Python processes: caught in process").
    assert "BASE https://api.openai.com/v1" in result.stdout, result.stdout

    # A bad mode is a usage error naming where it came from.
    bad = write_project(tmp_path / "bad", ini="cassette_mode = rewind", toml=None)
    result = run(base, bad, env, expect=4)
    assert "cassette_mode = 'rewind'" in result.stderr and "expected one of replay" in result.stderr, result.stderr


def test_a_marker_cannot_make_a_replaying_run_call_the_vendor(venv, tmp_path):
    if "pytest8" in str(venv):
        pytest.skip("the same code under both pytest versions: checked once")
    project = write_project(tmp_path / "marker")
    (project / "test_marker.py").write_text(
        "import openai, pytest\n\n"
        "@pytest.mark.cassette_cli(mode='record')\n"
        "def test_wants_to_record():\n"
        "    try:\n"
        "        openai.OpenAI(max_retries=0).chat.completions.create(\n"
        "            model='m', messages=[{'role': 'user', 'content': 'hi'}])\n"
        "    except openai.APIError:\n"
        "        pass\n\n"
        "@pytest.mark.cassette_cli(speed='fast')\n"
        "def test_unknown_keyword():\n"
        "    pass\n"
    )
    junit = tmp_path / "junit.xml"
    result = run([*pytest_in(venv), f"--junitxml={junit}"], project, clean_env(), expect=1)
    failures = junit_failures(junit)
    assert set(failures) == {"test_marker.py::test_wants_to_record", "test_marker.py::test_unknown_keyword"}, (
        result.stdout
    )
    assert "cassette error: " in failures["test_marker.py::test_wants_to_record"], failures
    assert "record" in failures["test_marker.py::test_wants_to_record"]
    assert "unknown keyword speed" in failures["test_marker.py::test_unknown_keyword"], failures


ASK = """import openai
client = openai.OpenAI(
    base_url="https://api.openai.com/v1",
    api_key="sk-test-hardcoded",
    http_client=openai.DefaultHttpxClient(trust_env=False),
    max_retries=0,
)
answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "From a child."}])
print("ANSWER", answer.id)
"""

# Configured from the environment: what it sees of its base URL, and where its request went.
ENV_ASK = """import os
import openai
client = openai.OpenAI(max_retries=0)
raw = client.chat.completions.with_raw_response.create(
    model="m", messages=[{"role": "user", "content": "From the environment."}]
)
print("URL", raw.http_request.url, "BASE", os.environ["OPENAI_BASE_URL"], "ANSWER", raw.parse().id)
"""
VENDOR_SEEN = "URL https://api.openai.com/v1/chat/completions BASE https://api.openai.com/v1 ANSWER"


def test_a_test_subprocess_and_exec_children_are_caught_by_the_pth_file(venv, tmp_path):
    """The wheel's cassette_cli.pth installs the in-process transports in any Python process whose
    CASSETTE_CHANNEL names a channel: a test's subprocess under the plugin and a script under
    `cassette exec`, both hard-coded to the vendor's URL, record and then replay with the vendor
    stopped; with no channel named the same script goes to the network (is not answered)."""
    if "pytest8" in str(venv):
        pytest.skip("the same code under both pytest versions: checked once")
    vendor = FakeUpstream()
    try:
        project = tmp_path / "project"
        project.mkdir()
        (project / "cassette.toml").write_text(f'store = "cassettes"\n[routes.default]\nupstream = "{vendor.url}"\n')
        (project / "ask.py").write_text(ASK)
        (project / "env_ask.py").write_text(ENV_ASK)
        (project / "test_child.py").write_text(
            "import subprocess, sys\n\n"
            "def test_child():\n"
            "    out = subprocess.run([sys.executable, 'ask.py'], capture_output=True, text=True)\n"
            "    assert 'ANSWER' in out.stdout, out.stdout + out.stderr\n\n"
            "def test_env_child():\n"
            "    # A Python child sees the vendor's URL too, as the test process does.\n"
            "    out = subprocess.run([sys.executable, 'env_ask.py'], capture_output=True, text=True)\n"
            f"    assert {VENDOR_SEEN!r} in out.stdout, out.stdout + out.stderr\n"
        )
        env = clean_env(OPENAI_API_KEY="sk-test-routekey")
        recorded = run([*pytest_in(venv), "-q", "--cassette=record"], project, env)
        assert "2 passed" in recorded.stdout, recorded.stdout
        assert len(vendor.requests) == 2, vendor.requests

        vendor.stop()
        before = vendor.connections
        replayed = run([*pytest_in(venv), "-q", "--cassette=replay"], project, env)
        assert "2 passed" in replayed.stdout, replayed.stdout
        under_exec = run([venv / "bin" / "cassette", "exec", "--", venv / "bin" / "python", "ask.py"], project, env)
        assert "ANSWER" in under_exec.stdout, under_exec.stdout + under_exec.stderr
        # Under exec too, a Python process catching in process sees the vendor's URL.
        under_exec = run([venv / "bin" / "cassette", "exec", "--", venv / "bin" / "python", "env_ask.py"], project, env)
        assert VENDOR_SEEN in under_exec.stdout, under_exec.stdout + under_exec.stderr
        assert vendor.connections == before

        # No channel named: the hook does nothing and the hard-coded URL is not answered here.
        alone = run(
            [venv / "bin" / "python", "-c", "import sys; print(sorted(m for m in sys.modules if 'cassette' in m))"],
            project,
            env,
        )
        assert alone.stdout.strip() == "[]", alone.stdout
    finally:
        vendor.close()
