"""Issue 33: Gemini's resumable upload (google-genai `client.files.upload`) under the pytest
plugin. The start is answered with `x-goog-upload-url` (where the bytes go) and the client sends
the bytes to that URL as it is: cassette stores the header and hands the client a URL that
leads through the proxy, so the upload itself is keyed, recorded and replayed like any call.
Recorded against the fake vendor (conftest's, which speaks the resumable protocol) and replayed
with it stopped, in process and over the base-URL path (CASSETTE_IN_PROCESS=off); and adopted
from a vcrpy tape that holds the two interactions (and imported from it), then replayed from the
cassettes alone."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import FakeUpstream, cassette_bin
from test_in_process import both, pytest_run
from test_vcr_adopt import plugin_env, plugin_pytest, write_tape
from test_vcr_import import PROJECT, clean_env, run

APP = """
from pathlib import Path

import pytest
from google import genai

NOTES = Path(__file__).with_name("notes.txt")


def upload(client):
    file = client.files.upload(file=str(NOTES), config={"display_name": "notes"})
    assert file.display_name == "notes", file
    assert file.size_bytes == len(NOTES.read_bytes()), file
    assert file.state == "ACTIVE" and file.name.startswith("files/"), file
    return file


@pytest.mark.vcr
def test_upload():
    # Its base URL from GOOGLE_GEMINI_BASE_URL, as the plugin sets it (the vendor's without).
    upload(genai.Client(api_key="gemini-test-client"))


def test_upload_hard_coded():
    client = genai.Client(
        api_key="gemini-test-client",
        http_options={"base_url": "https://generativelanguage.googleapis.com"},
    )
    upload(client)
"""

NOTES = "Meeting notes: ship A-1042 on Friday.\n"


def project(tmp_path: Path, vendor_url: str) -> Path:
    folder = tmp_path / "project"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_upload.py").write_text(APP)
    (folder / "tests" / "notes.txt").write_text(NOTES)
    (folder / "cassette.toml").write_text(f'store = "cassettes"\n[routes.gemini]\nupstream = "{vendor_url}"\n')
    return folder


def stored(folder: Path) -> str:
    return "".join(p.read_text() for p in (folder / "cassettes").rglob("*.json"))


@pytest.mark.parametrize("in_process", ["on", "off"])
def test_a_resumable_upload_records_and_replays(tmp_path: Path, in_process: str) -> None:
    if in_process == "on" and sys.platform == "win32":
        pytest.skip("the channel is a Unix socket")
    vendor = FakeUpstream()
    try:
        folder = project(tmp_path, vendor.url)
        # Over the base URL only the client that reads it can be caught.
        tests = ["-q"] if in_process == "on" else ["-q", "-k", "not hard_coded"]
        passing = 2 if in_process == "on" else 1
        env = {"CASSETTE_IN_PROCESS": in_process}
        recorded = pytest_run(folder, "record", *tests, **env)
        assert f"{passing} passed" in recorded.stdout and "failed" not in recorded.stdout, both(recorded)
        # Both steps reached the vendor through the proxy: the start, then the bytes at the
        # URL it answered, under its upload id.
        paths = [path for path, _, _ in vendor.requests]
        assert paths[:2] == [
            "/upload/v1/files",
            "/upload/v1/files?upload_id=ABpAqW-1&upload_protocol=resumable",
        ], paths
        documents = [json.loads(p.read_text()) for p in (folder / "cassettes").rglob("*.json")]
        starts = [d for d in documents if "x-goog-upload-url" in d["response"]["headers"]]
        assert starts, documents
        # The tape keeps the vendor's URL and status; never the proxy's run secret or address.
        assert starts[0]["response"]["headers"]["x-goog-upload-url"] == (
            f"{vendor.url}/upload/v1/files?upload_id=ABpAqW-1&upload_protocol=resumable"
        )
        assert starts[0]["response"]["headers"]["x-goog-upload-status"] == "active"
        assert "_run" not in stored(folder) and "_scope" not in stored(folder)

        vendor.stop()
        before = vendor.connections
        replayed = pytest_run(folder, "replay", *tests, **env)
        assert f"{passing} passed" in replayed.stdout and "failed" not in replayed.stdout, both(replayed)
        assert vendor.connections == before, "replay opened a connection to the vendor"
    finally:
        vendor.close()


GEMINI = "https://generativelanguage.googleapis.com"
UPLOAD_URL = f"{GEMINI}/upload/v1/files?upload_id=ABpAqW-tape&upload_protocol=resumable"


def upload_interactions() -> list[dict]:
    """The two interactions of a google-genai upload as vcrpy records them."""
    # As google-genai sends it, so that `cassette import` keys it as the client asks it.
    start_body = {"file": {"display_name": "notes", "mime_type": "text/plain", "size_bytes": len(NOTES)}}
    file = {
        "file": {
            "name": "files/abc123",
            "displayName": "notes",
            "mimeType": "text/plain",
            "sizeBytes": str(len(NOTES)),
            "state": "ACTIVE",
            "uri": f"{GEMINI}/v1beta/files/abc123",
        }
    }
    return [
        {
            "request": {
                "body": json.dumps(start_body),
                "headers": {"Content-Type": ["application/json"], "X-Goog-Upload-Command": ["start"]},
                "method": "POST",
                "uri": f"{GEMINI}/upload/v1/files",
            },
            "response": {
                "body": {"string": ""},
                "headers": {
                    "X-Goog-Upload-URL": [UPLOAD_URL],
                    "X-Goog-Upload-Status": ["active"],
                    "X-Goog-Upload-Chunk-Granularity": ["8388608"],
                    "Content-Type": ["text/plain; charset=utf-8"],
                    "Content-Length": ["0"],
                },
                "status": {"code": 200, "message": "OK"},
            },
        },
        {
            "request": {
                "body": NOTES,
                "headers": {"X-Goog-Upload-Command": ["upload, finalize"], "X-Goog-Upload-Offset": ["0"]},
                "method": "POST",
                "uri": UPLOAD_URL,
            },
            "response": {
                "body": {"string": json.dumps(file)},
                "headers": {"X-Goog-Upload-Status": ["final"], "Content-Type": ["application/json; charset=UTF-8"]},
                "status": {"code": 200, "message": "OK"},
            },
        },
    ]


def test_adopt_answers_an_upload_from_its_tape(tmp_path: Path) -> None:
    folder = project(tmp_path, GEMINI)
    (folder / "cassette.toml").write_text('store = "cassettes"\n')
    shutil.copy(PROJECT / "pytest.ini", folder / "pytest.ini")
    tapes = folder / "tests" / "cassettes"
    write_tape(tapes / "test_upload" / "test_upload.yaml", *upload_interactions())
    # vcrpy plays the tape back, offline.
    vcr = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cassette_cli", "--record-mode=none", "-k", "not hard_coded"],
        folder,
        clean_env(),
    )
    assert "1 passed" in vcr.stdout, vcr.stdout

    for in_process in ("on", "off"):
        shutil.rmtree(folder / "cassettes", ignore_errors=True)
        env = {**plugin_env("http://127.0.0.1:9"), "CASSETTE_IN_PROCESS": in_process}
        adopt = run(plugin_pytest("adopt", "-k", "not hard_coded"), folder, env)
        assert "1 passed" in adopt.stdout, adopt.stdout
        assert "bypassed the base URL" not in adopt.stdout, adopt.stdout
        report = json.loads((folder / ".cassette" / "adopt-report.json").read_text())["tests"]
        adopted = report["tests/test_upload.py::test_upload"]
        assert [a["interaction"] for a in adopted["adopted"]] == [1, 2], adopted
        assert adopted["recorded"] == 2, adopted
        assert UPLOAD_URL in stored(folder), stored(folder)

        away = tmp_path / f"tapes-away-{in_process}"
        shutil.move(tapes, away)
        replay = run(plugin_pytest("replay", "-k", "not hard_coded"), folder, env)
        assert "1 passed" in replay.stdout, replay.stdout
        shutil.move(away, tapes)

    # `cassette import` reads the tape the same way: the start keeps its upload URL.
    shutil.rmtree(folder / "cassettes")
    imported = run([cassette_bin(), "import", "tests"], folder, plugin_env("http://127.0.0.1:9"))
    assert "imported 2, kept 0 already stored, failed 0" in imported.stdout + imported.stderr, imported
    assert UPLOAD_URL in stored(folder), stored(folder)
    shutil.move(tapes, tmp_path / "tapes-away")
    for in_process in ("on", "off"):
        env = {**plugin_env("http://127.0.0.1:9"), "CASSETTE_IN_PROCESS": in_process}
        replay = run(plugin_pytest("replay", "-k", "not hard_coded"), folder, env)
        assert "1 passed" in replay.stdout, replay.stdout
