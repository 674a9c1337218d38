"""Issue 35 item 1: a recording proxy that the pytest plugin or `cassette exec` started serves
only its own run. The run's real client (the openai SDK, with the base URL it was given)
records; a request from another program of the machine (plain urllib to the proxy's port,
without the run secret) is refused with 403, never reaches the vendor and is not recorded; and
the secret is printed nowhere. Real pytest, the plugin, the binary, the fake vendor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FakeUpstream
from test_plugin_ci import pytest_run

# What the run's own client does, then what a stranger who knows the port does; the base URL is
# written to base.txt so the test can look for the secret in what was printed and stored.
CLIENT = """
import http.client
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import openai


def client_and_stranger():
    # The proxy's base URL (in process OPENAI_BASE_URL names the vendor, which the channel routes).
    base = os.environ["CASSETTE_PROXY_URL"] + "/v1"
    Path("base.txt").write_text(base)
    answer = openai.OpenAI().chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Where is my refund?"}]
    )
    # Another program knowing the port: a plain socket client (http.client), which nothing in
    # this process catches, as the test process's own clients are (urllib.request included).
    netloc = urlsplit(base).netloc
    stranger = http.client.HTTPConnection(netloc.rsplit(":", 1)[0], int(netloc.rsplit(":", 1)[1]), timeout=30)
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "OTHER-PROGRAM-ASKS"}]}
    stranger.request("POST", "/v1/chat/completions", json.dumps(body), {"content-type": "application/json"})
    served = stranger.getresponse()
    refused = {"status": served.status, "body": served.read().decode()}
    stranger.close()
    return answer.choices[0].message.content, refused
"""

PLUGIN_TEST = (
    CLIENT
    + """

def test_the_runs_client_records_and_a_stranger_is_refused():
    content, refused = client_and_stranger()
    assert content
    assert refused["status"] == 403, refused
    assert "run secret" in refused["body"], refused
"""
)

EXEC_APP = (
    CLIENT
    + """

content, refused = client_and_stranger()
print(json.dumps({"content": content, "refused": refused}))
"""
)


@pytest.fixture
def vendor() -> Iterator[FakeUpstream]:
    server = FakeUpstream()
    yield server
    server.close()


def secret_of(folder: Path) -> str:
    base = (folder / "base.txt").read_text()
    assert "/_run/" in base, base
    secret = base.split("/_run/", 1)[1].split("/", 1)[0]
    assert len(secret) >= 16, base
    return secret


def stored_text(folder: Path) -> str:
    return "".join(p.read_text() for p in (folder / "cassettes").rglob("*.json"))


def check_only_the_run_went_upstream(vendor: FakeUpstream, folder: Path, printed: str) -> None:
    sent = [json.dumps(body) for _, _, body in vendor.requests]
    assert len(sent) == 1, sent
    assert "Where is my refund?" in sent[0]
    secret = secret_of(folder)
    assert secret not in printed, printed
    stored = stored_text(folder)
    assert "Where is my refund?" in stored and "OTHER-PROGRAM-ASKS" not in stored
    assert secret not in stored
    for path, headers, _ in vendor.requests:
        assert secret not in path and secret not in json.dumps(headers)


def test_under_the_pytest_plugin_recording_serves_only_the_runs_clients(tmp_path: Path, vendor: FakeUpstream) -> None:
    folder = tmp_path / "project"
    (folder / "tests").mkdir(parents=True)
    (folder / "cassette.toml").write_text(f'store = "cassettes"\n[routes.default]\nupstream = "{vendor.url}"\n')
    (folder / "tests" / "test_client.py").write_text(PLUGIN_TEST)
    result = pytest_run(folder, "--cassette=record")
    printed = result.stdout + result.stderr
    assert result.returncode == 0, printed
    assert "1 passed" in result.stdout, printed
    check_only_the_run_went_upstream(vendor, folder, printed)


def test_under_exec_recording_serves_only_the_command(tmp_path: Path, vendor: FakeUpstream, cassette: str) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    app = folder / "app.py"
    app.write_text(EXEC_APP)
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CASSETTE_", "UPSTREAM_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))
    }
    env.update(OPENAI_API_KEY="sk-test-run-secret-0123456789")
    result = subprocess.run(
        [cassette, "exec", "--mode", "record", "--store", "file://cassettes", "--upstream", vendor.url, "--"]
        + [sys.executable, str(app)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    printed = result.stdout + result.stderr
    assert result.returncode == 0, printed
    said = json.loads(result.stdout)
    assert said["content"], said
    assert said["refused"]["status"] == 403, said
    assert "run secret" in said["refused"]["body"], said
    check_only_the_run_went_upstream(vendor, folder, result.stderr + json.dumps(said["refused"]))
