"""Issue 32: a user's own endpoint is honoured, never redirected. With `OPENAI_BASE_URL` naming
the team's gateway and the gateway's key in `OPENAI_API_KEY`, and a cassette.toml that sets no
route, recording under the pytest plugin (record and auto) and under `cassette exec` sends the
request, with that key, to the gateway alone: the proxy's built-in default (api.openai.com)
never sees it, one line on stderr says where it went, and the replay afterwards needs neither."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FakeUpstream, cassette_bin
from test_vcr_adopt import plugin_env

GATEWAY_KEY = "gw-test-GATEWAYKEY0123456789abcdef"

APP = """import openai

def test_ask():
    client = openai.OpenAI(max_retries=0)
    answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi."}])
    assert answer.choices
"""

SCRIPT = """import openai
client = openai.OpenAI(max_retries=0)
print("ANSWER", client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi."}]).id)
"""


def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "cassette.toml").write_text('store = "cassettes"\n')
    (folder / "test_app.py").write_text(APP)
    (folder / "ask.py").write_text(SCRIPT)
    return folder


def both(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


@pytest.mark.parametrize("how", ["plugin-record", "plugin-auto", "plugin-record-xdist", "exec-record"])
def test_the_gateway_key_goes_to_the_gateway_only(tmp_path: Path, how: str) -> None:
    gateway = FakeUpstream()
    try:
        folder = project(tmp_path)
        env = plugin_env("http://127.0.0.1:9")
        env.update(OPENAI_BASE_URL=f"{gateway.url}/v1", OPENAI_API_KEY=GATEWAY_KEY)
        if how.startswith("plugin"):
            mode = how.split("-")[1]
            command = [sys.executable, "-m", "pytest", "-p", "no:recording"]
            command += ["-p", "cassette_cli.pytest_plugin", "-p", "no:cacheprovider", f"--cassette={mode}"]
            if how.endswith("xdist"):
                # Each worker's own proxy must see the gateway too (it saw the controller's
                # proxy URL, and sent the request to the vendor's host, before).
                command += ["-n", "2"]
        else:
            env["CASSETTE_MODE"] = "record"
            command = [cassette_bin(), "exec", "--", sys.executable, "ask.py"]
        result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, both(result)
        # The one request went to the gateway, with the gateway's key; nothing else was asked.
        assert [path for path, _, _ in gateway.requests] == ["/v1/chat/completions"], gateway.requests
        assert gateway.requests[0][1].get("authorization") == f"Bearer {GATEWAY_KEY}"
        said = result.stdout + result.stderr
        assert f"OPENAI_BASE_URL={gateway.url}/v1 is the `default` route's upstream" in said, both(result)
        assert GATEWAY_KEY not in said
        stored = "".join(p.read_text() for p in (folder / "cassettes").rglob("*.json"))
        assert GATEWAY_KEY not in stored and stored

        # Replay: the gateway stopped, the key gone; answered from the tape.
        gateway.stop()
        before = gateway.connections
        env.pop("OPENAI_API_KEY")
        env.pop("CASSETTE_MODE", None)
        replay = [
            c.replace("--cassette=auto", "--cassette=replay").replace("--cassette=record", "--cassette=replay")
            for c in command
        ]
        replayed = subprocess.run(replay, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert replayed.returncode == 0, both(replayed)
        assert gateway.connections == before
    finally:
        gateway.close()


def test_under_xdist_each_workers_proxy_records_with_the_real_key(tmp_path: Path) -> None:
    """Every pytest-xdist worker starts a proxy of its own, which must hold the route's real key:
    it read the controller's environment, whose key variables hold the placeholder, and sent
    `Bearer cassette` upstream (a recording under `-n` failed against a real vendor)."""
    vendor = FakeUpstream()
    try:
        folder = project(tmp_path)
        (folder / "cassette.toml").write_text(f'store = "cassettes"\n[routes.default]\nupstream = "{vendor.url}"\n')
        env = plugin_env("http://127.0.0.1:9")
        env["OPENAI_API_KEY"] = GATEWAY_KEY
        command = [sys.executable, "-m", "pytest", "-p", "no:recording", "-p", "cassette_cli.pytest_plugin"]
        command += ["-p", "no:cacheprovider", "--cassette=record", "-n", "2", "test_app.py"]
        result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, both(result)
        assert [h.get("authorization") for _, h, _ in vendor.requests] == [f"Bearer {GATEWAY_KEY}"], both(result)
        assert GATEWAY_KEY not in result.stdout + result.stderr
    finally:
        vendor.close()


OLLAMA_APP = """import json, os, urllib.request

def ask():
    # As the ollama clients read OLLAMA_HOST: a host, `http` and port 11434 unless it says.
    host = os.environ["OLLAMA_HOST"]
    url = (host if "://" in host else "http://" + host).rstrip("/") + "/api/chat"
    body = json.dumps({"model": "llama3.2", "messages": [{"role": "user", "content": "Hi."}], "stream": False})
    request = urllib.request.Request(url, data=body.encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        return json.load(answer)["message"]["content"]

def test_ask():
    assert ask()

if __name__ == "__main__":
    print("ANSWER", ask())
"""


@pytest.mark.parametrize("how", ["plugin-record", "exec-record"])
def test_an_ollama_host_of_the_users_is_the_ollama_routes_upstream(tmp_path: Path, how: str) -> None:
    """`OLLAMA_HOST=gpu-box:8080` (a host, as Ollama takes it) names the user's own Ollama: it is
    recorded there, not at Ollama's default address on this machine (where it went before)."""
    ollama = FakeUpstream()
    try:
        folder = project(tmp_path)
        (folder / "test_app.py").write_text(OLLAMA_APP)
        host = ollama.url.removeprefix("http://")
        env = plugin_env("http://127.0.0.1:9")
        env["OLLAMA_HOST"] = host
        if how.startswith("plugin"):
            command = [sys.executable, "-m", "pytest", "-p", "no:recording", "-p", "cassette_cli.pytest_plugin"]
            command += ["-p", "no:cacheprovider", "--cassette=record", "test_app.py"]
        else:
            env["CASSETTE_MODE"] = "record"
            command = [cassette_bin(), "exec", "--", sys.executable, "test_app.py"]
        result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, both(result)
        assert [path for path, _, _ in ollama.requests] == ["/api/chat"], both(result)
        assert f"OLLAMA_HOST={host} is the `ollama` route's upstream" in result.stdout + result.stderr, both(result)

        ollama.stop()
        before = ollama.connections
        env.pop("CASSETTE_MODE", None)
        replay = [c.replace("--cassette=record", "--cassette=replay") for c in command]
        replayed = subprocess.run(replay, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert replayed.returncode == 0, both(replayed)
        assert ollama.connections == before
    finally:
        ollama.close()
