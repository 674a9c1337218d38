"""A test whose client makes an id afresh on every run (llm-gemini's `call_<uuid4 hex>` when the
model gave none) passes under vcrpy, whose default matching reads no body, and under adopt,
which answers it from its tape; the replay after adopt misses it, since no run sends that id
again. Adopt names such a test in its summary and report with the `[keying] ignore` path that
fixes it, and so does the replay's miss; with that setting and `cassette rekey`, the replay
passes. Found on a real suite
(simonw/llm-gemini's tool tests), where adopt had said nothing."""

from __future__ import annotations

import json
from pathlib import Path

from test_vcr_adopt import plugin_env, plugin_pytest
from test_vcr_import import clean_env, run
from test_vcr_matchers import hand_written

CHAT = "https://api.openai.com/v1/chat/completions"
IGNORE = "$.messages[*].tool_call_id"

TESTS = f"""
import uuid

import httpx
import pytest


@pytest.mark.vcr
def test_tool_result():
    body = {{
        "model": "gpt-4o-mini",
        "messages": [
            {{"role": "tool", "tool_call_id": f"call_{{uuid.uuid4().hex}}", "content": "42"}}
        ],
    }}
    answer = httpx.post("{CHAT}", json=body, headers={{"authorization": "Bearer sk-none"}})
    assert answer.json()["answer"] == "ok"
"""

RECORDED = json.dumps(
    {
        "model": "gpt-4o-mini",
        "messages": [{"role": "tool", "tool_call_id": "call_27db36357f594e73b557ec8f70da9e87", "content": "42"}],
    }
)

TAPE = f"""interactions:
- request:
    body: '{RECORDED}'
    headers:
      Content-Type: [application/json]
    method: POST
    uri: {CHAT}
  response:
    body: {{string: '{{"answer": "ok"}}'}}
    headers:
      Content-Type: [application/json]
    status: {{code: 200, message: OK}}
version: 1
"""


def test_adopt_names_ids_made_afresh_and_the_ignore_that_replays_them(tmp_path: Path) -> None:
    tapes = {"test_tool_result": TAPE}
    root = hand_written(tmp_path / "project", "test_tools", TESTS, tapes, passed=1)
    env = plugin_env("http://127.0.0.1:9")
    adopt = run(plugin_pytest("adopt"), root, env)
    assert "1 passed" in adopt.stdout, adopt.stdout
    assert "1 test sends values made afresh on every run (ids)" in adopt.stdout, adopt.stdout
    assert f'    ignore = ["{IGNORE}"]' in adopt.stdout, adopt.stdout
    report = json.loads((root / ".cassette" / "adopt-report.json").read_text())["tests"]
    (entry,) = report.values()
    assert entry["outcome"] == "passed" and entry["replay_will_miss"] == [IGNORE], entry

    # As said: the replay misses; with the ignore and a rekey, it passes.
    missed = run(plugin_pytest(None), root, env, expect=1)
    assert "1 failed" in missed.stdout, missed.stdout
    # The miss itself says what to do.
    assert f'leave them out of the key with `[keying] ignore = ["{IGNORE}"]`' in missed.stdout
    (root / "cassette.toml").write_text(f'store = "cassettes"\n[keying]\nignore = ["{IGNORE}"]\n')
    run([env["CASSETTE_BINARY"], "rekey"], root, clean_env())
    replay = run(plugin_pytest(None), root, env)
    assert "1 passed" in replay.stdout, replay.stdout
