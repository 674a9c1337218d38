"""Replay is provably hermetic: under `cassette exec`, a client whose URL bypasses the proxy
(hard-coded to the vendor) still sends its traffic to the proxy, through the proxy variables
exec sets. Replay refuses it without connecting anywhere, names the host and the variable to
set, and exits 2 whatever the command returned. In record the same traffic is tunnelled
unrecorded, with a warning, carrying only the client's own credential. Loopback stays direct.

Clients: the official openai SDK built with `base_url="https://api.openai.com/v1"`, and plain
`requests` and `httpx` calls. Stand-ins for other hosts listen on 127.0.0.2, which is not in
NO_PROXY, so clients send their requests for it through the proxy as they would for a vendor.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import FakeUpstream

HARDCODED_OPENAI = textwrap.dedent(
    """
    import json
    import openai
    # The URL is hard-coded: OPENAI_BASE_URL, which exec sets, is never read.
    client = openai.OpenAI(base_url="https://api.openai.com/v1")
    try:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        print(json.dumps({"answered": True}))
    except openai.APIConnectionError as e:
        print(json.dumps({"error": type(e).__name__}))
    """
)

PLAIN_CLIENTS = textwrap.dedent(
    """
    import json, os, sys
    import httpx, requests
    stand_in = sys.argv[1]
    out = {}
    # requests, plain HTTP: an absolute-form request through HTTP_PROXY.
    r = requests.post(f"{stand_in}/v1/chat/completions",
                      headers={"authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"},
                      json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    out["requests"] = r.status_code
    out["requests_error"] = r.json().get("error", {}).get("type")
    # httpx, HTTPS: a CONNECT through HTTPS_PROXY.
    try:
        out["httpx"] = httpx.get("https://api.anthropic.com/v1/models").status_code
    except httpx.HTTPError as e:
        out["httpx"] = type(e).__name__
    print(json.dumps(out))
    """
)

TUNNEL_CLIENT = textwrap.dedent(
    """
    import http.client, json, os, sys
    from urllib.parse import urlsplit
    host, port = sys.argv[1], int(sys.argv[2])
    proxy = urlsplit(os.environ["HTTPS_PROXY"])
    # What an HTTPS client does through HTTPS_PROXY (CONNECT, then its protocol inside the
    # tunnel), with plain HTTP inside instead of TLS: the tunnel passes bytes either way.
    conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=30)
    conn.set_tunnel(host, port)
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    conn.request("POST", "/v1/chat/completions", body=body, headers={
        "content-type": "application/json",
        "authorization": f"Bearer {os.environ['OPENAI_API_KEY']}",
    })
    r = conn.getresponse()
    print(json.dumps({"status": r.status, "content": json.loads(r.read())["choices"][0]["message"]["content"]}))
    """
)

LOOPBACK_CLIENTS = textwrap.dedent(
    """
    import json, sys
    import httpx, requests
    port = sys.argv[1]
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    a = requests.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body).status_code
    b = httpx.post(f"http://localhost:{port}/v1/chat/completions", json=body).status_code
    print(json.dumps({"requests": a, "httpx": b}))
    """
)


def script(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def clean_env(extra=None):
    prefixes = ("CASSETTE_", "UPSTREAM_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_")
    proxies = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes) and k.upper() not in proxies}
    env.update(extra or {})
    return env


def exec_(cassette, store_url, args, env=None, prefix=()):
    return subprocess.run(
        [*prefix, cassette, "exec", "--store", store_url, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(env),
    )


def bypass_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "bypassed the base URL and" in line]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture
def stand_in():
    """A stand-in for another host, on an address that is not in NO_PROXY."""
    fake = FakeUpstream(host="127.0.0.2")
    yield fake
    fake.close()


def test_a_hard_coded_vendor_url_is_refused_in_replay_and_exits_2(cassette, store_url, tmp_path):
    app = script(tmp_path, "hardcoded.py", HARDCODED_OPENAI)
    result = exec_(cassette, store_url, ["--", sys.executable, app])
    # The app handled the error and exited 0; the run still fails: exit 2, not 0.
    assert json.loads(result.stdout) == {"error": "APIConnectionError"}, result.stderr
    assert result.returncode == 2, result.stderr
    line = bypass_line(result.stderr)
    assert re.search(r"cassette exec: \d+ requests? bypassed the base URL and (was|were) refused", line), line
    # exec set the variable; the client (its URL hard-coded) went around it, and is told so.
    assert "api.openai.com:443 (exec set OPENAI_BASE_URL=http://127.0.0.1:" in line, line
    assert "given its base URL in code" in line, line
    summary = [line for line in result.stderr.splitlines() if line.startswith("cassette exec (replay")]
    assert (
        len(summary) == 1 and "bypassed the base URL (requests bypassed the base URL in replay: exit 2)" in summary[0]
    ), result.stderr


def test_plain_requests_and_httpx_calls_are_caught_without_any_connection(cassette, store_url, tmp_path, stand_in):
    app = script(tmp_path, "plain.py", PLAIN_CLIENTS)
    result = exec_(cassette, store_url, ["--", sys.executable, app, stand_in.url])
    assert result.returncode == 2, result.stderr
    out = json.loads(result.stdout)
    assert out == {"requests": 403, "requests_error": "cassette_bypass", "httpx": "ProxyError"}, out
    assert stand_in.connections == 0, "replay connected to the host"
    line = bypass_line(result.stderr)
    assert "2 requests bypassed the base URL and were refused" in line, line
    assert "api.anthropic.com:443 (exec set ANTHROPIC_BASE_URL=" in line, line
    assert f"127.0.0.2:{stand_in.port} (point its client at the proxy with a route" in line, line


def test_record_tunnels_to_the_host_unrecorded_with_the_clients_own_credential(cassette, tmp_path, stand_in):
    store = "file://" + str(tmp_path / "tapes")
    app = script(tmp_path, "tunnel.py", TUNNEL_CLIENT)
    plain = script(tmp_path, "plain.py", PLAIN_CLIENTS)
    env = {"CASSETTE_MODE": "record", "OPENAI_API_KEY": "sk-real-route-key-0123456789"}
    result = exec_(cassette, store, ["--", sys.executable, app, "127.0.0.2", str(stand_in.port)], env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["content"].startswith("I'll look that up"), result.stdout
    line = bypass_line(result.stderr)
    assert line.startswith(
        "cassette exec: WARNING: 1 request bypassed the base URL and was tunnelled unrecorded: replay will refuse it"
    ), line
    assert f"127.0.0.2:{stand_in.port}" in line
    # A plain-HTTP request is relayed the same way.
    result = exec_(cassette, store, ["--", sys.executable, plain, stand_in.url], env)
    assert json.loads(result.stdout)["requests"] == 200, result.stderr
    # The host got the client's placeholder, never the key the proxy holds for its routes.
    assert len(stand_in.requests) == 2
    for lines in stand_in.header_lines:
        assert ("authorization", "Bearer cassette") in lines, lines
    assert "sk-real-route-key" not in json.dumps(stand_in.header_lines)
    assert "0 recorded" in result.stderr
    assert not os.path.exists(tmp_path / "tapes") or not any(os.scandir(tmp_path / "tapes"))


def test_loopback_stays_direct(cassette, store_url, tmp_path):
    local = FakeUpstream()
    try:
        app = script(tmp_path, "loopback.py", LOOPBACK_CLIENTS)
        result = exec_(cassette, store_url, ["--", sys.executable, app, str(local.port)])
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == {"requests": 200, "httpx": 200}
        assert len(local.requests) == 2
        assert "bypassed" not in result.stderr
        # Nothing went through the proxy: the summary says so.
        assert "no request went through the proxy" in result.stderr, result.stderr
    finally:
        local.close()


def test_allowed_hosts_are_reached_directly_and_never_counted(cassette, store_url, tmp_path, stand_in):
    app = script(tmp_path, "plain.py", PLAIN_CLIENTS)
    result = exec_(
        cassette,
        store_url,
        ["--allow-host", "127.0.0.2", "--allow-host", "*.example.com", "--", sys.executable, app, stand_in.url],
    )
    out = json.loads(result.stdout)
    # The allowed stand-in answered, directly; the other host is still caught.
    assert out == {"requests": 200, "requests_error": None, "httpx": "ProxyError"}, result.stderr
    assert stand_in.connections == 1
    line = bypass_line(result.stderr)
    assert "1 request bypassed the base URL" in line and "127.0.0.2" not in line, line
    assert result.returncode == 2, result.stderr


def test_the_catch_can_be_switched_off(cassette, store_url, tmp_path, stand_in):
    app = script(tmp_path, "hardcoded.py", HARDCODED_OPENAI)
    (tmp_path / "cassette.toml").write_text("[bypass]\ncatch = false\n")
    result = subprocess.run(
        [cassette, "exec", "--store", store_url, "--", sys.executable, app],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=clean_env({"HTTPS_PROXY": stand_in.url}),
    )
    # Without the catch the command keeps its own proxy variables (here a stand-in that
    # cannot tunnel), and nothing is counted.
    assert "bypassed" not in result.stderr, result.stderr
    assert stand_in.connections >= 1
    assert result.returncode == 0, result.stderr


def unshare_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(["unshare", "-rn", "sh", "-c", "ip link set lo up"], capture_output=True)
    return probe.returncode == 0


OFFLINE = ("unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "offline")


def test_the_ci_recipe_replays_with_the_network_off(cassette, tmp_path, upstream):
    """docs/proxy.md, "Hermetic replay in CI": replay in a network namespace of its own."""
    if not unshare_works():
        pytest.skip("this machine cannot create a network namespace (unshare -rn)")
    store = "file://" + str(tmp_path / "tapes")
    app = script(
        tmp_path,
        "app.py",
        textwrap.dedent(
            """
        import json, openai
        r = openai.OpenAI().chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Where is my refund?"}])
        print(json.dumps({"content": r.choices[0].message.content}))
        """
        ),
    )
    recorded = exec_(
        cassette,
        store,
        ["--", sys.executable, app],
        {"CASSETTE_MODE": "record", "UPSTREAM_BASE": upstream.url, "OPENAI_API_KEY": "sk-x"},
    )
    assert recorded.returncode == 0, recorded.stderr
    replayed = exec_(cassette, store, ["--", sys.executable, app], prefix=OFFLINE)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    hardcoded = script(tmp_path, "hardcoded.py", HARDCODED_OPENAI)
    offline = exec_(cassette, store, ["--", sys.executable, hardcoded], prefix=OFFLINE)
    assert offline.returncode == 2, offline.stderr
    assert "api.openai.com:443 (exec set OPENAI_BASE_URL=" in offline.stderr
