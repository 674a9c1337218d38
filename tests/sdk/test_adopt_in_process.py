"""Adopt in process (issues 32 and 33): a vcrpy suite whose client is hard-coded to the vendor's
URL (`base_url="https://api.openai.com/v1"`, `trust_env=False`) and snapshots the URL it sent
to. The adopt run catches the request in process and answers it from the test's tape, the client
seeing its own URL; the plain replay after it, tapes removed, does the same, with nothing
reaching the network. A client configured from the environment sees the vendor's URL too (the
test process's OPENAI_BASE_URL names the vendor), as it did under vcrpy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from test_vcr_adopt import failed, plugin_env, plugin_pytest
from test_vcr_import import run

TEST = """
import httpx
import openai
import pytest


@pytest.mark.vcr
def test_hard_coded():
    client = openai.OpenAI(
        api_key="sk-test-hardcoded0123456789", base_url="https://api.openai.com/v1",
        http_client=httpx.Client(trust_env=False), max_retries=0,
    )
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Name a capital."}],
    )
    # A snapshot of where the request went, as suites keep them.
    assert str(raw.http_request.url) == "https://api.openai.com/v1/chat/completions"
    assert raw.parse().choices[0].message.content == "Paris"


@pytest.mark.vcr
def test_env_following():
    # Configured from the environment, as most suites are: under vcrpy OPENAI_BASE_URL was unset
    # and the SDK used the vendor's URL, which the snapshot pins.
    client = openai.OpenAI(max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Name a capital."}],
    )
    assert str(raw.http_request.url) == "https://api.openai.com/v1/chat/completions"
    assert str(client.base_url) == "https://api.openai.com/v1/"
    assert raw.parse().choices[0].message.content == "Paris"
"""

ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Paris"},
            "finish_reason": "stop",
        }
    ],
}

# The tape as vcrpy writes it when recording against the vendor itself.
TAPE = f"""interactions:
- request:
    body: '{{"messages":[{{"role":"user","content":"Name a capital."}}],"model":"gpt-4o-mini"}}'
    headers:
      Content-Type:
      - application/json
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body:
      string: '{json.dumps(ANSWER, separators=(",", ":"))}'
    headers:
      Content-Type:
      - application/json
    status:
      code: 200
      message: OK
version: 1
"""


def test_adopt_answers_a_hard_coded_vendor_url_in_process(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "tests" / "cassettes" / "test_hard").mkdir(parents=True)
    (project / "pytest.ini").write_text(
        "[pytest]\ntestpaths = tests\naddopts = -p no:cacheprovider\nmarkers =\n    vcr: a pytest-recording tape\n"
    )
    (project / "tests" / "test_hard.py").write_text(TEST)
    for name in ("test_hard_coded", "test_env_following"):
        (project / "tests" / "cassettes" / "test_hard" / f"{name}.yaml").write_text(TAPE)
    (project / "cassette.toml").write_text('store = "cassettes"\n')
    env = plugin_env("http://127.0.0.1:9/files")

    adopt = run(plugin_pytest("adopt"), project, env, expect=None)
    assert adopt.returncode == 0 and "2 passed" in adopt.stdout, adopt.stdout + adopt.stderr
    report = json.loads((project / ".cassette" / "adopt-report.json").read_text())
    for name in ("test_hard_coded", "test_env_following"):
        test = report["tests"][f"tests/test_hard.py::{name}"]
        assert len(test["adopted"]) == 1, test
    assert list((project / "cassettes").rglob("*.json")), "adopt stored no cassette"

    shutil.rmtree(project / "tests" / "cassettes")
    replay = run(plugin_pytest(None), project, env, expect=None)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "2 passed" in replay.stdout and failed(replay.stdout) == [], replay.stdout
    assert "sk-test-hardcoded" not in "".join(p.read_text() for p in (project / "cassettes").rglob("*.json"))
