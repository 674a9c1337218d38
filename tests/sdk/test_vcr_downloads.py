"""Issue 33, files the tape holds: a pytest-recording suite whose test downloads an image with
requests (a signed URL: `token=` and `X-Amz-Signature=` in its query) and hands it to the
OpenAI SDK is recorded with real vcrpy against a fake vendor and image host. Then, with the
vendor stopped and the image host unreachable, `pytest --cassette=adopt` stores the download as
a recording of the image host and passes; the plain replay after it (tapes removed) passes too,
the image's bytes identical each time; `cassette import` of the same tape stores the same keys;
and `[adopt] downloads = false` leaves the download refused as a bypass, named."""

from __future__ import annotations

import json
import shutil
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

from conftest import cassette_bin
from test_vcr_adopt import Counting, failed, plugin_env, plugin_pytest
from test_vcr_import import PROJECT, Vendor, clean_env, run

# Every byte value, behind a PNG signature: not text, not UTF-8.
IMAGE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
IMAGE_HOST = "https://upload.wikimedia.org"
SIGNED = "width=64&token=SIGNEDTOKEN0123456789&X-Amz-Signature=AMZSIG0123456789abcdef"
TEST = "tests/test_vision.py::test_describe_the_image"

CONFTEST = """
from __future__ import annotations

import os
from typing import Any

import pytest

VENDOR = os.environ.get("VENDOR_URL", "")
REAL = {"openai": "https://api.openai.com", "images": "https://upload.wikimedia.org"}


def _real_hosts(request: Any) -> Any:
    for name, real in REAL.items():
        prefix = f"{VENDOR}/{name}"
        if VENDOR and request.uri.startswith(prefix):
            request.uri = real + request.uri[len(prefix) :]
    return request


@pytest.fixture(scope="module")
def vcr_config() -> dict[str, Any]:
    return {"filter_headers": ["authorization"], "before_record_request": _real_hosts}
"""

VISION_TEST = f"""
import base64
import os
from pathlib import Path

import openai
import pytest
import requests


@pytest.mark.vcr
def test_describe_the_image() -> None:
    url = os.environ["IMAGE_URL"] + "/wikipedia/commons/a/a5/Cat.png?{SIGNED}"
    image = requests.get(url, timeout=10)
    assert image.status_code == 200, image.text
    assert image.headers["content-type"] == "image/png"
    Path(os.environ["IMAGE_OUT"]).write_bytes(image.content)
    data = base64.b64encode(image.content).decode()
    answer = openai.OpenAI(max_retries=0).chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {{
                "role": "user",
                "content": [
                    {{"type": "text", "text": "What is in this image?"}},
                    {{"type": "image_url", "image_url": {{"url": f"data:image/png;base64,{{data}}"}}}},
                ],
            }}
        ],
    )
    assert (answer.choices[0].message.content or "").startswith("answer")
"""


class ImageVendor(Vendor):
    """The fake vendor, also serving the image under /images."""

    def do_GET(self) -> None:
        if self.path.startswith("/images/wikipedia/commons/a/a5/Cat.png?"):
            return self.send(200, "image/png", IMAGE)
        super().do_GET()


def project_at(root: Path) -> Path:
    project = root / "project"
    (project / "tests").mkdir(parents=True)
    shutil.copy(PROJECT / "pytest.ini", project / "pytest.ini")
    (project / "tests" / "conftest.py").write_text(CONFTEST)
    (project / "tests" / "test_vision.py").write_text(VISION_TEST)
    return project


def record(project: Path, out: Path) -> int:
    """Records the suite with vcrpy against the fake (then checks vcrpy replays it alone);
    the port the vendor listened on."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), ImageVendor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    vendor = f"http://127.0.0.1:{server.server_address[1]}"
    env = clean_env(
        VENDOR_URL=vendor,
        OPENAI_BASE_URL=f"{vendor}/openai/v1",
        OPENAI_API_KEY="sk-test-VCRRECORDKEY0123456789abcdef",
        IMAGE_URL=f"{vendor}/images",
        IMAGE_OUT=str(out),
    )
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cassette_cli"]
    try:
        recorded = run([*pytest_cmd, "--record-mode=once"], project, env)
        assert "1 passed" in recorded.stdout, recorded.stdout
    finally:
        server.shutdown()
        server.server_close()
        # The suites of test_vcr_import.py expect the vendor's answers numbered from 1.
        Vendor.calls = 0
    assert out.read_bytes() == IMAGE
    out.unlink()
    # The baseline: vcrpy answers the download and the call from its tape, the vendor gone.
    replayed = run([*pytest_cmd, "--record-mode=none"], project, env)
    assert "1 passed" in replayed.stdout, replayed.stdout
    assert out.read_bytes() == IMAGE
    out.unlink()
    return int(vendor.rsplit(":", 1)[1])


def env_for(out: Path) -> dict[str, str]:
    return {**plugin_env("http://127.0.0.1:9"), "IMAGE_URL": IMAGE_HOST, "IMAGE_OUT": str(out)}


def documents(store: Path) -> dict[str, dict]:
    return {d["key"]: d for d in (json.loads(p.read_text()) for p in store.rglob("*.json"))}


def test_adopt_and_import_store_the_download_the_tape_holds_and_replay_serves_it(tmp_path: Path) -> None:
    project = project_at(tmp_path)
    out = tmp_path / "image.out"
    port = record(project, out)
    tape = project / "tests" / "cassettes" / "test_vision" / "test_describe_the_image.yaml"
    text = tape.read_text()
    assert f"uri: {IMAGE_HOST}/wikipedia/commons/a/a5/Cat.png?" in text and "!!binary" in text, text

    # The vendor is gone (a server on its port counts connections); the image host is a name
    # on the internet, which nothing here may reach.
    stopped = ThreadingHTTPServer(("127.0.0.1", port), Counting)
    threading.Thread(target=stopped.serve_forever, daemon=True).start()
    Counting.connections = 0
    (project / "cassette.toml").write_text('store = "cassettes"\n')
    try:
        adopt = run(plugin_pytest("adopt"), project, env_for(out))
        assert "1 passed" in adopt.stdout, adopt.stdout
        assert out.read_bytes() == IMAGE
        out.unlink()
        line = next(x for x in adopt.stdout.splitlines() if x.startswith("cassette adopt:"))
        assert "1 download(s) stored as recordings of upload.wikimedia.org" in line, line
        report = json.loads((project / ".cassette" / "adopt-report.json").read_text())["tests"][TEST]
        assert report["recorded"] == 2 and report["unused_interactions"] == 0, report
        assert [d.split("?")[0] for d in report["downloads"]] == [f"{IMAGE_HOST}/wikipedia/commons/a/a5/Cat.png"]
        stored = documents(project / "cassettes")
        downloads = [d for d in stored.values() if d["meta"]["profile"] == "download"]
        assert len(downloads) == 1 and len(stored) == 2, stored
        download = downloads[0]
        assert download["target"] == IMAGE_HOST and download["request"]["method"] == "GET", download
        assert download["response"]["body"].keys() == {"base64"}, download["response"]
        assert download["response"]["headers"]["content-type"] == "image/png"
        # The stored URL keeps no credential, and still names the file.
        assert download["request"]["query"].startswith("width=64"), download["request"]
        everything = "".join(p.read_text() for p in (project / "cassettes").rglob("*.json"))
        everything += (project / ".cassette" / "adopt-report.json").read_text() + adopt.stdout
        for secret in ("SIGNEDTOKEN", "AMZSIG", "VCRRECORDKEY"):
            assert secret not in everything, secret
        # `cassette verify` keys the stored download back to its key.
        verify = run([cassette_bin(), "verify"], project, env_for(out))
        assert "keys to" not in verify.stdout + verify.stderr, verify.stdout

        # The same tape imported: the same keys, the same file.
        imported = run([cassette_bin(), "import", "tests", "--store", "file://imported"], project, clean_env())
        said = imported.stdout + imported.stderr
        assert f"1 download(s) stored (from {IMAGE_HOST})" in said, said
        assert "not an API call" not in said, said
        again = documents(project / "imported")
        assert set(again) == set(stored), (sorted(again), sorted(stored))
        assert again[download["key"]]["response"]["body"] == download["response"]["body"]

        # Replay alone: the tapes moved away, no vendor, no image host.
        shutil.move(project / "tests" / "cassettes", tmp_path / "tapes-away")
        replay = run(plugin_pytest("replay"), project, env_for(out))
        assert "1 passed" in replay.stdout, replay.stdout
        assert out.read_bytes() == IMAGE
        out.unlink()
        # So is record mode: a stored download is served, never fetched.
        rerun = run(plugin_pytest("auto"), project, env_for(out))
        assert "1 passed" in rerun.stdout, rerun.stdout
        assert Counting.connections == 0

        # Another file of the host has no recording: refused, the URL named.
        shutil.move(tmp_path / "tapes-away", project / "tests" / "cassettes")
        (project / "tests" / "test_vision.py").write_text(VISION_TEST.replace("Cat.png", "Dog.png"))
        other = run(plugin_pytest("replay"), project, env_for(out), expect=1)
        assert failed(other.stdout) == [TEST], other.stdout
        assert f"refused {IMAGE_HOST}/wikipedia/commons/a/a5/Dog.png" in other.stdout, other.stdout
    finally:
        stopped.shutdown()
        stopped.server_close()


def test_the_opt_out_leaves_downloads_refused_and_named(tmp_path: Path) -> None:
    project = project_at(tmp_path)
    out = tmp_path / "image.out"
    record(project, out)
    (project / "cassette.toml").write_text('store = "cassettes"\n\n[adopt]\ndownloads = false\n')
    shown = run([cassette_bin(), "config"], project, clean_env()).stdout
    assert any(line.split()[:3] == ["adopt.downloads", "false", "(file)"] for line in shown.splitlines()), shown
    adopt = run(plugin_pytest("adopt"), project, env_for(out), expect=1)
    assert failed(adopt.stdout) == [TEST], adopt.stdout
    assert "1 request(s) to upload.wikimedia.org:443 bypassed the base URL and were refused" in adopt.stdout
    assert "download(s) stored" not in adopt.stdout, adopt.stdout
    assert not [d for d in documents(project / "cassettes").values() if d["meta"]["profile"] == "download"]
    imported = run([cassette_bin(), "import", "tests", "--store", "file://imported"], project, clean_env(), expect=0)
    said = imported.stdout + imported.stderr
    assert "0 download(s) stored, 1 download(s) not imported" in said, said
    assert f"GET {IMAGE_HOST}/wikipedia/commons/a/a5/Cat.png is not an API call" in said, said
    assert "[adopt] downloads = false" in said, said
    # The setting is typed and its table strict.
    (project / "cassette.toml").write_text('[adopt]\ndownloads = "no"\n')
    bad = run([cassette_bin(), "config"], project, clean_env(), expect=2)
    assert "cassette.toml:2" in bad.stderr, bad.stderr
    (project / "cassette.toml").write_text("[adopt]\ndownload = false\n")
    unknown = run([cassette_bin(), "config"], project, clean_env(), expect=2)
    assert "unknown field `download`" in unknown.stderr, unknown.stderr
