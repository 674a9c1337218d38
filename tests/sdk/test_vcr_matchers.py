"""Adopt applies a suite's own vcrpy matching: a matcher its `pytest_recording_configure`
registers, a `match_on` that hook sets on vcrpy's `VCR` (a default `vcr_config` overrides), and
a `before_record_request` that rewrote the tapes' requests before they were recorded. Those are
the suite's Python code: the test process's judge runs them on each request it sends (httpx,
requests and aiohttp alike) and names the interactions that match; the proxy answers from those.

Matched on the method and path alone, the tape's first interaction would answer the test's
first question (another model's answer), and the scrubbed body would match nothing. vcrpy
itself (pytest-recording, the network off) passes every test from the hand-written tapes; so
must adopt, and the plain replay after it with the tapes gone."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

from test_vcr_adopt import plugin_env, plugin_pytest
from test_vcr_import import clean_env, run

CHAT = "https://api.openai.com/v1/chat/completions"

CONFTEST = """
import json

import pytest


def _model(r1, r2):
    assert json.loads(r1.body)["model"] == json.loads(r2.body)["model"]


def _scrub(request):
    if request.body:
        data = json.loads(request.body)
        if "user" in data:
            data["user"] = "anonymous"
            request.body = json.dumps(data).encode()
    return request


def pytest_recording_configure(config, vcr):
    vcr.register_matcher("model", _model)
    vcr.match_on = ("method", "path", "model")


@pytest.fixture(scope="module")
def vcr_config():
    return {"filter_headers": ["authorization"], "before_record_request": _scrub}
"""

TESTS = """
import asyncio
import json

import aiohttp
import httpx
import pytest
import requests

CHAT = "https://api.openai.com/v1/chat/completions"
JSON = {"content-type": "application/json"}


def ask(model, user="alice", client=httpx):
    body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "user": user}
    answer = client.post(CHAT, json=body, headers={"authorization": "Bearer sk-none"})
    return answer.json()["answer"]


@pytest.mark.vcr
def test_models_in_another_order():
    assert ask("gpt-b") == "from b"
    assert ask("gpt-a") == "from a"


@pytest.mark.vcr
def test_through_requests():
    assert ask("gpt-b", client=requests) == "from b"


@pytest.mark.vcr
def test_through_aiohttp():
    async def go():
        body = {"model": "gpt-b", "messages": [{"role": "user", "content": "Hi"}], "user": "alice"}
        async with aiohttp.ClientSession() as session:
            sent = json.dumps(body)
            async with session.post(CHAT, data=sent, headers=JSON) as answer:
                return (await answer.json())["answer"]

    assert asyncio.run(go()) == "from b"


@pytest.mark.vcr(match_on=["method", "body"])
def test_scrubbed_body():
    assert ask("gpt-a") == "scrubbed"
"""


def interaction(model: str, user: str, answer: str) -> str:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Hi"}], "user": user})
    return textwrap.dedent(
        f"""\
        - request:
            body: '{body}'
            headers:
              Content-Type: [application/json]
            method: POST
            uri: {CHAT}
          response:
            body: {{string: '{{"answer": "{answer}"}}'}}
            headers:
              Content-Type: [application/json]
            status: {{code: 200, message: OK}}
        """
    )


def tape(*interactions: str) -> str:
    return "interactions:\n" + "".join(interactions) + "version: 1\n"


def hand_written(root: Path, module: str, tests: str, tapes: dict[str, str], passed: int, failed: int = 0) -> Path:
    """A pytest-recording suite at `root`: `tests/<module>.py` and its tapes by test name,
    which vcrpy itself (the network off) passes `passed` tests of (and fails `failed`); opted
    into cassette."""
    folder = root / "tests" / "cassettes" / module
    folder.mkdir(parents=True)
    (root / "tests" / f"{module}.py").write_text(tests)
    for name, text in tapes.items():
        (folder / f"{name}.yaml").write_text(text)
    vcr = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cassette_cli", "--record-mode=none"],
        root,
        clean_env(),
        expect=1 if failed else 0,
    )
    assert f"{passed} passed" in vcr.stdout, vcr.stdout
    assert not failed or f"{failed} failed" in vcr.stdout, vcr.stdout
    (root / "cassette.toml").write_text('store = "cassettes"\n')
    return root


def project(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "conftest.py").write_text(CONFTEST)
    (root / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers\nfilterwarnings = error\n")
    # Recorded in the order a, b; the first test asks b first.
    both = tape(interaction("gpt-a", "anonymous", "from a"), interaction("gpt-b", "anonymous", "from b"))
    tapes = {
        "test_models_in_another_order": both,
        "test_through_requests": both,
        "test_through_aiohttp": both,
        "test_scrubbed_body": tape(interaction("gpt-a", "anonymous", "scrubbed")),
    }
    # vcrpy alone, no network: the tapes pass as written.
    return hand_written(root, "test_models", TESTS, tapes, passed=4)


def test_adopt_applies_the_suites_own_matchers_and_before_record_request(tmp_path: Path) -> None:
    root = project(tmp_path / "project")
    adopt = run(plugin_pytest("adopt"), root, plugin_env("http://127.0.0.1:9"))
    assert "4 passed" in adopt.stdout, adopt.stdout
    assert "not honoured" not in adopt.stdout, adopt.stdout
    report = json.loads((root / ".cassette" / "adopt-report.json").read_text())["tests"]
    assert all(r["judged"] and not r["matchers_not_applied"] for r in report.values()), report
    ordered = report["tests/test_models.py::test_models_in_another_order"]["adopted"]
    assert [a["interaction"] for a in ordered] == [2, 1], ordered

    # The plain replay, the tapes gone: each test from its own cassettes.
    shutil.rmtree(root / "tests" / "cassettes")
    replay = run(plugin_pytest(None), root, plugin_env("http://127.0.0.1:9"))
    assert "4 passed" in replay.stdout, replay.stdout


OUTCOMES = """
import httpx
import pytest

CHAT = "https://api.openai.com/v1/chat/completions"


def ask():
    body = {"model": "gpt-a", "messages": [{"role": "user", "content": "Hi"}], "user": "alice"}
    return httpx.post(CHAT, json=body).json()["answer"]


@pytest.mark.vcr
def test_passes():
    assert ask() == "from a"


@pytest.mark.vcr
def test_fails_on_its_own():
    secret = "sk-proj-OWNASSERTION0123456789abcdef"
    assert ask() == secret


@pytest.mark.vcr
def test_has_no_tape():
    ask()


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass
"""


def test_the_adopt_report_names_every_test_that_did_not_pass_with_its_reason(
    tmp_path: Path,
) -> None:
    answer = tape(interaction("gpt-a", "alice", "from a"))
    tapes = {"test_passes": answer, "test_fails_on_its_own": answer}
    root = hand_written(tmp_path / "project", "test_outcomes", OUTCOMES, tapes, passed=1, failed=2)
    adopt = run(plugin_pytest("adopt"), root, plugin_env("http://127.0.0.1:9"), expect=1)
    assert "2 failed, 1 passed, 1 skipped" in adopt.stdout, adopt.stdout
    assert "3 tests did not pass (each named in the report, with its reason)" in adopt.stdout
    text = (root / ".cassette" / "adopt-report.json").read_text()
    report = json.loads(text)["tests"]
    ended = {n.split("::")[1]: (r["outcome"], r.get("reason", "")) for n, r in report.items()}
    assert ended["test_passes"] == ("passed", ""), ended
    line = OUTCOMES.splitlines().index("    assert ask() == secret") + 1
    assert ended["test_fails_on_its_own"] == (
        "failed",
        f"AssertionError at tests/test_outcomes.py:{line}",
    ), ended
    outcome, reason = ended["test_has_no_tape"]
    assert outcome == "failed" and reason.startswith("cassette adopt: "), ended
    assert "no vcrpy tape for this test" in reason, ended
    assert ended["test_skipped"] == ("skipped", "Skipped: not today"), ended
    # What the test's own assertion held stays in pytest's output, off the disk.
    assert "OWNASSERTION" not in text


REDACTING = """
import pytest


def _redact(request):
    request.uri = "**REDACTED**"
    request.headers = {}
    return request


@pytest.fixture(scope="module")
def vcr_config():
    return {
        "before_record_request": _redact,
        "match_on": ["method", "body"],
        "allow_playback_repeats": True,
    }
"""

REDACTED_TESTS = f"""
import httpx
import pytest


@pytest.mark.vcr
def test_redacted_url():
    body = {{"model": "gpt-a", "messages": [{{"role": "user", "content": "Hi"}}], "user": "alice"}}
    for _ in range(3):  # one interaction, played again (allow_playback_repeats)
        assert httpx.post("{CHAT}", json=body).json()["answer"] == "from a"
"""


def test_a_tape_whose_url_the_suite_replaced_adopts_and_replays(tmp_path: Path) -> None:
    # LangChain's partner suites: before_record_request replaces every tape's URL (and
    # headers) with "**REDACTED**" and match_on reads the method and body only. vcrpy applies
    # the same function to today's request, so it matches; the judge does too, and the proxy
    # keeps such an interaction for a judged test (it skipped it as unreadable before).
    root = tmp_path / "project"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "conftest.py").write_text(REDACTING)
    # As the tape holds it: headers gone, the body as httpx wrote it (compact JSON).
    sent = {"model": "gpt-a", "messages": [{"role": "user", "content": "Hi"}], "user": "alice"}
    compact = json.dumps(sent, separators=(",", ":"))
    answer = tape(
        "- request:\n"
        f"    body: '{compact}'\n"
        "    headers: {}\n"
        "    method: POST\n"
        "    uri: '**REDACTED**'\n"
        "  response:\n"
        """    body: {string: '{"answer": "from a"}'}\n"""
        "    headers: {Content-Type: [application/json]}\n"
        "    status: {code: 200, message: OK}\n"
    )
    tapes = {"test_redacted_url": answer}
    hand_written(root, "test_redacted", REDACTED_TESTS, tapes, passed=1)
    adopt = run(plugin_pytest("adopt"), root, plugin_env(""))
    assert "1 passed" in adopt.stdout, adopt.stdout
    # The default repeats answer the repeats from one recording, as vcrpy's option does; the
    # option itself is named (under sequence mode it would not hold).
    assert "not honoured (1 tests): allow_playback_repeats" in adopt.stdout, adopt.stdout
    (entry,) = json.loads((root / ".cassette" / "adopt-report.json").read_text())["tests"].values()
    assert entry["judged"] and not entry["skipped"], entry
    assert [a["interaction"] for a in entry["adopted"]] == [1], entry
    # Import cannot place it at any route, and says so.
    imported = run([plugin_env("")["CASSETTE_BINARY"], "import", "tests/", "--dry-run"], root, clean_env(), expect=2)
    assert "the tape's URL was replaced" in imported.stdout + imported.stderr, imported
    shutil.rmtree(root / "tests" / "cassettes")
    replay = run(plugin_pytest(None), root, plugin_env(""))
    assert "1 passed" in replay.stdout, replay.stdout
