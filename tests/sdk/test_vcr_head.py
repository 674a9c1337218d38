"""A test that asks a file's host about it first (`httpx.head`, as the llm CLI does for a URL
attachment's type) and then fetches it: vcrpy kept both on the tape. Adopt stores each as a
recording of that host (the `download` profile keys the method, so the two never answer each
other) and the plain replay after it, the tapes gone, serves both; nothing connects anywhere.
`cassette import` of the tape stores the same two. Before, a HEAD of a host no route serves was
refused as a bypass of the base URL, in adopt and replay alike, and import did not store it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from test_vcr_adopt import plugin_env, plugin_pytest
from test_vcr_import import clean_env, run
from test_vcr_matchers import hand_written

URL = "https://static.example.org/static/pelican.jpg"

TESTS = f"""
import httpx
import pytest

URL = "{URL}"


@pytest.mark.vcr
def test_asks_then_fetches():
    head = httpx.head(URL)
    assert head.status_code == 200
    assert head.headers["content-type"] == "image/jpeg"
    assert head.content == b""
    image = httpx.get(URL)
    assert image.content == b"JPEG"
"""

TAPE = f"""interactions:
- request:
    body: ''
    headers: {{}}
    method: HEAD
    uri: {URL}
  response:
    body: {{string: ''}}
    headers:
      Content-Type: [image/jpeg]
      Content-Length: ['4']
    status: {{code: 200, message: OK}}
- request:
    body: ''
    headers: {{}}
    method: GET
    uri: {URL}
  response:
    body: {{string: JPEG}}
    headers:
      Content-Type: [image/jpeg]
    status: {{code: 200, message: OK}}
version: 1
"""


def test_a_head_of_a_file_adopts_and_replays_as_a_download(tmp_path: Path) -> None:
    tapes = {"test_asks_then_fetches": TAPE}
    root = hand_written(tmp_path / "project", "test_files", TESTS, tapes, passed=1)
    # `cassette import` of the same tape, in a copy: the same two recordings.
    copy = tmp_path / "imported"
    shutil.copytree(root, copy)
    binary = plugin_env("")["CASSETTE_BINARY"]
    imported = run([binary, "import", "tests/"], copy, clean_env())
    assert "2 download(s) stored" in imported.stdout + imported.stderr, imported
    adopt = run(plugin_pytest("adopt"), root, plugin_env("http://127.0.0.1:9"))
    assert "1 passed" in adopt.stdout, adopt.stdout
    report = json.loads((root / ".cassette" / "adopt-report.json").read_text())["tests"]
    (entry,) = report.values()
    assert entry["downloads"] == [URL, URL] and entry["unused_interactions"] == 0, entry
    assert len(entry["keys"]) == 2, entry
    assert sorted(entry["keys"]) == sorted(p.stem for p in (copy / "cassettes").rglob("*.json")), entry

    shutil.rmtree(root / "tests" / "cassettes")
    replay = run(plugin_pytest(None), root, plugin_env("http://127.0.0.1:9"))
    assert "1 passed" in replay.stdout, replay.stdout
    listed = run([binary, "ls"], root, clean_env()).stdout
    assert f"HEAD {URL}" in listed and listed.count(URL) == 2, listed
