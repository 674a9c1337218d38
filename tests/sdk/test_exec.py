"""`cassette exec` around a small Python program that uses the OpenAI SDK with no configuration
of its own: record, then replay with the vendor stopped, and the exit statuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

APP = textwrap.dedent(
    """
    import json, os, signal, sys
    import openai

    question, code = sys.argv[1], int(sys.argv[2])
    client = openai.OpenAI()  # base URL and key come from the environment cassette exec sets
    try:
        r = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": question}]
        )
        print(json.dumps({"content": r.choices[0].message.content}))
    except openai.ConflictError as e:
        print(json.dumps({"miss": e.body["key"]}))
    sys.stdout.flush()
    if code < 0:
        os.kill(os.getpid(), -code)
    sys.exit(code)
    """
)

ENV_PROBE = textwrap.dedent(
    """
    import json, os
    names = ["CASSETTE_PROXY_URL", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OLLAMA_HOST",
             "OPENAI_API_BASE", "OLLAMA_API_BASE", "GOOGLE_GEMINI_BASE_URL", "AZURE_OPENAI_ENDPOINT",
             "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
             "NO_PROXY", "no_proxy", "LITELLM_LOCAL_MODEL_COST_MAP",
             "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
             "UPSTREAM_API_KEY", "MISTRAL_API_KEY"]
    print(json.dumps({n: os.environ.get(n) for n in names}))
    """
)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    path = tmp_path_factory.mktemp("app") / "app.py"
    path.write_text(APP)
    return str(path)


def exec_(cassette, store_url, args, env=None):
    full = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CASSETTE_", "UPSTREAM_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))
    }
    full.update(env or {})
    return subprocess.run(
        [cassette, "exec", "--store", store_url, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
    )


@pytest.fixture(scope="module")
def recorded(cassette, store_url, upstream, app):
    result = exec_(
        cassette,
        store_url,
        ["--", sys.executable, app, "Where is my refund?", "0"],
        env={"CASSETTE_MODE": "record", "UPSTREAM_BASE": upstream.url, "OPENAI_API_KEY": "sk-test-exec"},
    )
    return result


def test_record_runs_the_command_and_records(recorded, upstream):
    assert recorded.returncode == 0, recorded.stderr
    assert json.loads(recorded.stdout) == {"content": "I'll look that up: the refund takes 5–7 business days."}
    assert "1 recorded" in recorded.stderr
    assert len(upstream.requests) == 1
    # The summary is one line.
    summary = [line for line in recorded.stderr.splitlines() if line.startswith("cassette exec (")]
    assert len(summary) == 1, recorded.stderr


@pytest.fixture(scope="module")
def stopped(recorded, upstream):
    upstream.stop()
    return upstream.connections


def test_replay_answers_with_the_vendor_stopped_and_no_key(cassette, store_url, app, recorded, upstream, stopped):
    result = exec_(cassette, store_url, ["--", sys.executable, app, "Where is my refund?", "0"])
    assert result.returncode == 0, result.stderr
    assert result.stdout == recorded.stdout
    assert "1 hits, 0 misses" in result.stderr
    assert upstream.connections == stopped


@pytest.mark.parametrize("code", [1, 3])
def test_replay_passes_the_command_status_through(cassette, store_url, app, stopped, code):
    result = exec_(cassette, store_url, ["--", sys.executable, app, "Where is my refund?", str(code)])
    assert result.returncode == code, result.stderr


def test_a_signal_ends_with_128_plus_n(cassette, store_url, app, stopped):
    result = exec_(cassette, store_url, ["--", sys.executable, app, "Where is my refund?", "-15"])
    assert result.returncode == 128 + 15, result.stderr


def test_any_miss_exits_2_even_when_the_command_succeeds(cassette, store_url, app, upstream, stopped):
    result = exec_(cassette, store_url, ["--", sys.executable, app, "Something never recorded", "0"])
    assert result.returncode == 2, result.stderr
    miss = json.loads(result.stdout)["miss"]
    assert len(miss) == 64
    assert "1 misses" in result.stderr
    # The proxy's log names the key too, so the miss is visible whatever the app prints.
    assert miss in result.stderr
    assert upstream.connections == stopped


def test_every_distinct_missed_key_is_listed_once_with_its_explanation(cassette, store_url, app, stopped):
    # Two distinct misses, one of them twice; the recorded prompt reworded, so the nearest
    # recording is named.
    script = (
        f'"{sys.executable}" "{app}" "Where is my refund now?" 0; '
        f'"{sys.executable}" "{app}" "Where is my refund now?" 0; '
        f'"{sys.executable}" "{app}" "Something never recorded" 0'
    )
    result = exec_(cassette, store_url, ["--", "sh", "-c", script])
    assert result.returncode == 2, result.stderr
    keys = [json.loads(line)["miss"] for line in result.stdout.splitlines()]
    assert keys[0] == keys[1] != keys[2]
    lines = result.stderr.splitlines()
    start = lines.index("cassette exec: 2 distinct keys missed:")
    listed = lines[start + 1 : start + 3]
    assert listed[0].startswith(
        f"  {keys[0]} POST /v1/chat/completions (target default, model gpt-4o-mini): The nearest recording"
    ), listed
    assert '"Where is my refund?" -> "Where is my refund now?"' in listed[0], listed
    assert listed[1].startswith(f"  {keys[2]} POST /v1/chat/completions"), listed
    assert "3 misses" in result.stderr


def test_the_command_sees_every_base_url_and_placeholder_keys(cassette, store_url, tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(ENV_PROBE)
    result = exec_(cassette, store_url, ["--", sys.executable, str(probe)])
    assert result.returncode == 0, result.stderr
    env = json.loads(result.stdout)
    url = env["CASSETTE_PROXY_URL"]
    assert url.startswith("http://127.0.0.1:")
    # Every base URL carries the run's secret (only the command's clients may record); the
    # proxy variables name the proxy itself, as a forward proxy is addressed by host.
    origin, secret = url.split("/_run/")
    assert len(secret) >= 16, url
    assert env["OPENAI_BASE_URL"] == f"{url}/v1"
    assert env["ANTHROPIC_BASE_URL"] == f"{url}/anthropic"
    assert env["OLLAMA_HOST"] == f"{url}/ollama"
    # What llama-index, litellm's ollama provider and google-genai read.
    assert env["OPENAI_API_BASE"] == f"{url}/v1"
    assert env["OLLAMA_API_BASE"] == f"{url}/ollama"
    assert env["GOOGLE_GEMINI_BASE_URL"] == f"{url}/gemini"
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    # No azure route configured: no Azure endpoint invented.
    assert env["AZURE_OPENAI_ENDPOINT"] is None
    # Traffic that bypasses the base URL comes to the proxy too; loopback stays direct.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        assert env[name] == origin, (name, env)
    assert env["NO_PROXY"] == env["no_proxy"] == "localhost,127.0.0.1,::1"
    # Every client constructs: a placeholder key for each, in every mode.
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        assert env[name] == "cassette", (name, env)

    # Keys the proxy holds never reach the command, in any mode; a key no route reads does.
    real = {
        "OPENAI_API_KEY": "sk-real-openai-0123456789",
        "UPSTREAM_API_KEY": "sk-real-upstream-987",
        "ANTHROPIC_API_KEY": "sk-ant-real-0123456789",
        "GEMINI_API_KEY": "AIza-real-gemini-0123",
        "MISTRAL_API_KEY": "the-users-own-mistral",
    }
    for mode in ("replay", "record", "auto", "off"):
        result = exec_(cassette, store_url, ["--", sys.executable, str(probe)], env={**real, "CASSETTE_MODE": mode})
        assert result.returncode == 0, result.stderr
        env = json.loads(result.stdout)
        assert env["OPENAI_API_KEY"] == "cassette" and env["ANTHROPIC_API_KEY"] == "cassette", (mode, env)
        assert env["UPSTREAM_API_KEY"] is None, (mode, env)
        # The built-in gemini route holds GEMINI_API_KEY: the client gets the placeholder.
        assert env["GEMINI_API_KEY"] == env["GOOGLE_API_KEY"] == "cassette", (mode, env)
        assert env["MISTRAL_API_KEY"] == "the-users-own-mistral", (mode, env)
        for secret in ("sk-real", "sk-ant-real", "AIza-real"):
            assert secret not in result.stdout + result.stderr
        if mode != "replay":
            assert (
                "keys held for default (UPSTREAM_API_KEY), anthropic (ANTHROPIC_API_KEY), gemini (GEMINI_API_KEY)"
                in result.stderr
            ), result.stderr


def test_a_command_that_cannot_start_is_an_error(cassette, store_url):
    result = exec_(cassette, store_url, ["--", "/nonexistent/command"])
    assert result.returncode == 2
    assert "/nonexistent/command" in result.stderr


FIXED_URL_APP = textwrap.dedent(
    """
    import json, sys
    import openai
    # Configured with a fixed URL, as some tools are: no variable is read.
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{sys.argv[1]}/v1", api_key="cassette")
    r = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Where is my refund?"}]
    )
    print(json.dumps({"content": r.choices[0].message.content}))
    """
)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_listen_serves_clients_configured_with_a_fixed_url(cassette, store_url, recorded, stopped, tmp_path):
    app = tmp_path / "fixed.py"
    app.write_text(FIXED_URL_APP)
    port = free_port()
    result = exec_(cassette, store_url, ["--listen", f"127.0.0.1:{port}", "--", sys.executable, str(app), str(port)])
    assert result.returncode == 0, result.stderr
    assert result.stdout == recorded.stdout
    assert "1 hits" in result.stderr

    refused = exec_(cassette, store_url, ["--listen", "0.0.0.0:0", "--", sys.executable, str(app), "1"])
    assert refused.returncode == 2
    assert "loopback" in refused.stderr, refused.stderr
