"""Issue 32: the pytest plugin catches the requests of the test process in process
(cassette_cli/_intercept.py over the proxy's channel), whatever URL, transport or proxy setting
the client was given. Each client below is hard-coded to its vendor's real URL (no base-URL
variable read, `trust_env=False` where the client has it): recorded against the fake vendor the
routes name, then replayed with the fake vendor stopped and, where this machine can make one, in
a network namespace with no network at all. A host no route serves fails exactly its test,
naming the host; with the transports off (CASSETTE_IN_PROCESS=off) the same suite does not
replay, which is what the transports add."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FakeUpstream
from test_vcr_adopt import plugin_env

KEY = "sk-test-INPROCESSKEY0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-test-INPROCESSKEY0123456789"

APP = """
import asyncio
import os

import aiohttp
import anthropic
import httpx
import openai
import requests

MESSAGES = [{"role": "user", "content": "Say hello."}]
CHAT = "https://api.openai.com/v1/chat/completions"
AUTH = {"authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}


def openai_client():
    return openai.OpenAI(
        base_url="https://api.openai.com/v1",
        api_key=os.environ["OPENAI_API_KEY"],
        http_client=openai.DefaultHttpxClient(trust_env=False),
        max_retries=0,
    )


def test_openai_hard_coded():
    answer = openai_client().chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert answer.choices[0].message is not None


def test_openai_streamed():
    chunks = list(
        openai_client().chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
    )
    assert len(chunks) > 1


def test_async_openai():
    async def main():
        client = openai.AsyncOpenAI(
            base_url="https://api.openai.com/v1",
            api_key=os.environ["OPENAI_API_KEY"],
            http_client=openai.DefaultAsyncHttpxClient(trust_env=False),
            max_retries=0,
        )
        answer = await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
        assert answer.choices

    asyncio.run(main())


def test_anthropic_hard_coded():
    client = anthropic.Anthropic(
        base_url="https://api.anthropic.com", api_key=os.environ["ANTHROPIC_API_KEY"], max_retries=0
    )
    answer = client.messages.create(model="claude-x", max_tokens=16, messages=MESSAGES)
    assert answer.content


def test_requests_hard_coded():
    answer = requests.post(CHAT, json={"model": "gpt-4o-mini", "messages": MESSAGES}, headers=AUTH)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"]


def test_urllib_request_hard_coded():
    import json
    import urllib.request

    body = json.dumps({"model": "gpt-4o-mini", "messages": MESSAGES, "n": 4}).encode()
    sent = urllib.request.Request(CHAT, data=body, headers={**AUTH, "content-type": "application/json"})
    with urllib.request.urlopen(sent, timeout=30) as answer:
        assert answer.status == 200
        assert json.loads(answer.read())["choices"]


def test_http_client_hard_coded():
    import http.client
    import json

    connection = http.client.HTTPSConnection("api.openai.com", timeout=30)
    body = json.dumps({"model": "gpt-4o-mini", "messages": MESSAGES, "n": 5})
    connection.request("POST", "/v1/chat/completions", body, {**AUTH, "content-type": "application/json"})
    answer = connection.getresponse()
    assert answer.status == 200, answer.read()
    assert json.loads(answer.read())["choices"]
    connection.close()


def test_httpx_with_its_own_transport():
    with httpx.Client(transport=httpx.HTTPTransport(retries=0), trust_env=False) as client:
        answer = client.post(CHAT, json={"model": "gpt-4o-mini", "messages": MESSAGES, "n": 2}, headers=AUTH)
    assert answer.status_code == 200, answer.text


def test_aiohttp_hard_coded():
    async def main():
        async with aiohttp.ClientSession() as session:
            body = {"model": "gpt-4o-mini", "messages": MESSAGES, "n": 3}
            async with session.post(CHAT, json=body, headers=AUTH) as answer:
                assert answer.status == 200, await answer.text()
                assert (await answer.json())["choices"]

    asyncio.run(main())


def test_groq_hard_coded():
    import groq

    client = groq.Groq(base_url="https://api.groq.com", api_key="gsk-test-client", max_retries=0)
    assert client.chat.completions.create(model="llama-3.1-8b-instant", messages=MESSAGES).choices


def test_cohere_hard_coded():
    import cohere

    client = cohere.ClientV2(api_key="co-test-client", base_url="https://api.cohere.com")
    assert client.chat(model="command-a-03-2025", messages=MESSAGES).message


def test_mistral_hard_coded():
    from mistralai.client import Mistral

    client = Mistral(api_key="mistral-test-client", retry_config=None)
    assert client.chat.complete(model="mistral-small-latest", messages=MESSAGES).choices


def test_gemini_hard_coded():
    from google import genai

    client = genai.Client(api_key="gemini-test-client")
    assert client.models.generate_content(model="gemini-2.0-flash", contents="Say hello.").candidates


def test_litellm_hard_coded():
    import litellm

    answer = litellm.completion(
        model="openai/gpt-4o-mini",
        api_base="https://api.openai.com/v1",
        api_key=os.environ["OPENAI_API_KEY"],
        messages=[{"role": "user", "content": "From litellm."}],
    )
    assert answer.choices


def test_langchain_openai_hard_coded():
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        model="gpt-4o-mini", base_url="https://api.openai.com/v1", api_key=os.environ["OPENAI_API_KEY"], max_retries=0
    )
    assert llm.invoke("From langchain.").content is not None


def test_unrouted_host():
    # The answer is a refusal; the plugin fails this test for it.
    requests.get("https://unrouted.example/data")
"""

PASSING = 15
OTHER_KEYS = {
    "GROQ_API_KEY": "gsk-test-INPROCESSKEY0123456789",
    "CO_API_KEY": "co-test-INPROCESSKEY0123456789",
    "GEMINI_API_KEY": "gemini-test-INPROCESSKEY0123456789",
    "MISTRAL_API_KEY": "mistral-test-INPROCESSKEY0123456789",
}


def project(tmp_path: Path, vendor: FakeUpstream) -> Path:
    folder = tmp_path / "project"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_app.py").write_text(APP)
    (folder / "cassette.toml").write_text(
        'store = "cassettes"\n'
        f'[routes.default]\nupstream = "{vendor.url}"\n'
        f'[routes.anthropic]\nupstream = "{vendor.url}"\n'
        f'[routes.groq]\nupstream = "{vendor.url}"\n'
        f'[routes.cohere]\nupstream = "{vendor.url}"\n'
        f'[routes.gemini]\nupstream = "{vendor.url}"\n'
        f'[routes.mistral]\nupstream = "{vendor.url}"\napi_key_env = "MISTRAL_API_KEY"\n'
    )
    return folder


def small_project(tmp_path: Path, vendor: FakeUpstream, name: str, text: str) -> Path:
    """A project with one test file and the default route pointing at the fake vendor."""
    folder = tmp_path / "project"
    (folder / "tests").mkdir(parents=True)
    (folder / "cassette.toml").write_text(f'store = "cassettes"\n[routes.default]\nupstream = "{vendor.url}"\n')
    (folder / "tests" / name).write_text(text)
    return folder


def pytest_run(
    folder: Path, mode: str, *more: str, network: bool = True, unset: tuple[str, ...] = (), **extra: str
) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", "-p", "no:recording", "-p", "cassette_cli.pytest_plugin"]
    command += ["-p", "no:cacheprovider", "-rf", f"--cassette={mode}", *(more or ["-q"]), "tests"]
    env = plugin_env("http://127.0.0.1:9")
    env.update(OPENAI_API_KEY=KEY, ANTHROPIC_API_KEY=ANTHROPIC_KEY, **OTHER_KEYS, **extra)
    for name in unset:
        env.pop(name, None)
    if not network:
        command = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)


def both(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def can_unshare() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, check=False, timeout=30
    )
    return probe.returncode == 0


def test_hard_coded_vendor_urls_record_and_replay_in_process(tmp_path: Path) -> None:
    if sys.platform == "win32":
        pytest.skip("the channel is a Unix socket; Windows takes the HTTP path")
    vendor = FakeUpstream()
    try:
        folder = project(tmp_path, vendor)
        recorded = pytest_run(folder, "record")
        assert f"1 failed, {PASSING} passed" in recorded.stdout, both(recorded)
        # Exactly the test that asked an unrouted host fails, naming it and what to do.
        failed = [line for line in recorded.stdout.splitlines() if line.startswith("FAILED")]
        assert len(failed) == 1 and "test_unrouted_host" in failed[0], both(recorded)
        assert "unrouted.example" in recorded.stdout, both(recorded)
        # ... with exec's words for a host that is no LLM API (issue 34, item 9).
        assert "[bypass] allow in cassette.toml" in recorded.stdout, both(recorded)
        # Every routed request reached the fake vendor the routes name, with the route's key.
        # A record session asks each request once: a test sending what an earlier one asked is
        # answered from that recording (docs/proxy.md, "Answers"), so the vendor saw each
        # distinct request once, and every passing test's request was recorded or replayed.
        tally = re.search(r"(\d+) hits, \d+ misses, (\d+) recorded", recorded.stdout)
        assert tally, both(recorded)
        hits, recorded_count = int(tally[1]), int(tally[2])
        assert hits + recorded_count == PASSING, both(recorded)
        assert len(vendor.requests) == recorded_count, vendor.requests
        asked = [(path, json.dumps(body, sort_keys=True)) for path, _, body in vendor.requests]
        assert len(set(asked)) == len(asked), asked
        sent = json.dumps([headers for _, headers, _ in vendor.requests])
        for key in (KEY, ANTHROPIC_KEY, *OTHER_KEYS.values()):
            assert key in sent, (key, sent)
        stored = "".join(p.read_text() for p in (folder / "cassettes").rglob("*.json"))
        for key in (KEY, ANTHROPIC_KEY, *OTHER_KEYS.values()):
            assert key not in stored

        vendor.stop()
        before = vendor.connections
        replayed = pytest_run(folder, "replay")
        assert f"1 failed, {PASSING} passed" in replayed.stdout, both(replayed)
        assert vendor.connections == before, "replay opened a connection to the vendor"

        if can_unshare():
            offline = pytest_run(folder, "replay", network=False)
            assert f"1 failed, {PASSING} passed" in offline.stdout, both(offline)

        # What the transports add: without them the hard-coded URLs are not answered from tape.
        outside = pytest_run(folder, "replay", CASSETTE_IN_PROCESS="off")
        assert f"{PASSING} passed" not in outside.stdout, both(outside)
        assert vendor.connections == before
    finally:
        vendor.close()


def recorded_then_replayed(
    tmp_path: Path, name: str, text: str, passed: int
) -> tuple[Path, FakeUpstream, subprocess.CompletedProcess]:
    """Records the one-file project `text` against a fake vendor, then replays it with the
    vendor stopped: `passed` tests pass both times and the replay opens no connection to it."""
    if sys.platform == "win32":
        pytest.skip("the channel is a Unix socket")
    vendor = FakeUpstream()
    try:
        folder = small_project(tmp_path, vendor, name, text)
        recorded = pytest_run(folder, "record")
        assert f"{passed} passed" in recorded.stdout, both(recorded)
        vendor.stop()
        before = vendor.connections
        replayed = pytest_run(folder, "replay")
        assert f"{passed} passed" in replayed.stdout, both(replayed)
        assert vendor.connections == before, "replay opened a connection to the vendor"
    finally:
        vendor.close()
    return folder, vendor, replayed


def test_env_following_clients_take_the_channel_too(tmp_path: Path) -> None:
    """A client that reads OPENAI_BASE_URL (the vendor's URL in process) is carried over the
    channel: replayed as before, its miss counted for its test."""
    folder, _, _ = recorded_then_replayed(
        tmp_path,
        "test_env.py",
        "import openai\n\n"
        "def test_env():\n"
        "    client = openai.OpenAI(max_retries=0)\n"
        "    assert client.chat.completions.create(model='m', messages=[{'role': 'user', 'content': 'hi'}])\n",
        1,
    )
    app = folder / "tests" / "test_env.py"
    app.write_text(app.read_text().replace("'hi'", "'changed'"))
    missed = pytest_run(folder, "replay")
    assert "1 failed" in missed.stdout and "cassette miss" in missed.stdout, both(missed)


CLIENTS_PER_TEST_APP = """
import asyncio
import http.server
import os
import ssl
import threading

import httpx
import openai

# Loading CA certificates is what a TLS context costs (about 18 ms): counted here.
LOADS = []
_load = ssl.SSLContext.load_verify_locations


def counting(self, *args, **kw):
    LOADS.append(args or kw)
    return _load(self, *args, **kw)


ssl.SSLContext.load_verify_locations = counting
MESSAGES = [{"role": "user", "content": "hi"}]


def test_clients_made_per_test_load_no_certificates():
    LOADS.clear()
    for n in range(3):
        http_client = httpx.Client(trust_env=False)
        with openai.OpenAI(base_url="https://api.openai.com/v1", http_client=http_client, max_retries=0) as c:
            assert c.chat.completions.create(model="m", messages=MESSAGES)
    async def go():
        async with openai.AsyncOpenAI(base_url="https://api.openai.com/v1", max_retries=0) as c:
            return await c.chat.completions.create(model="m", messages=MESSAGES)
    assert asyncio.run(go())
    assert LOADS == []


class Local(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("content-length", "5")
        self.end_headers()
        self.wfile.write(b"local")

    def log_message(self, *args):
        pass


def test_a_request_the_client_sends_itself_builds_its_pool_then():
    LOADS.clear()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Local)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/"
    try:
        with httpx.Client(trust_env=False) as c:
            assert c.get(url).text == "local"
        async def go():
            async with httpx.AsyncClient(trust_env=False) as c:
                return (await c.get(url)).text
        assert asyncio.run(go()) == "local"
    finally:
        server.shutdown()
    assert len(LOADS) == 2, LOADS
"""


def test_a_client_builds_no_tls_context_for_requests_the_channel_carries(tmp_path: Path) -> None:
    """Real suites build clients per test; each httpx client's transport made a TLS context
    (about 18 ms) that a request over the channel never uses. It is made when the transport
    first sends a request itself (a host on this machine here), not before."""
    recorded_then_replayed(tmp_path, "test_clients.py", CLIENTS_PER_TEST_APP, 2)


TRIO_APP = """
import os

import httpx
import openai
import trio

MESSAGES = [{"role": "user", "content": "hi from trio"}]


def test_httpx_under_trio():
    async def main():
        async with httpx.AsyncClient(trust_env=False) as client:
            answer = await client.post(
                "https://api.openai.com/v1/chat/completions",
                json={"model": "m", "messages": MESSAGES},
                headers={"authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
            )
        assert answer.status_code == 200, answer.text
        return answer.json()

    assert trio.run(main)["choices"]


def test_openai_under_trio():
    async def chunks():
        async with openai.AsyncOpenAI(base_url="https://api.openai.com/v1", max_retries=0) as client:
            streamed = [{"role": "user", "content": "hi from trio, streamed"}]
            stream = await client.chat.completions.create(model="m", messages=streamed, stream=True)
            return [chunk async for chunk in stream]

    assert len(trio.run(chunks)) > 1
"""


def test_trio_clients_take_httpxs_own_stack_over_the_channel(tmp_path: Path) -> None:
    """Under an event loop that is not asyncio (trio), httpx's requests go over httpx's own stack
    to the channel's socket: recorded, replayed with the vendor stopped, and a changed request
    is its test's miss."""
    folder, vendor, _ = recorded_then_replayed(tmp_path, "test_trio.py", TRIO_APP, 2)
    assert len(vendor.requests) == 2, vendor.requests
    app = folder / "tests" / "test_trio.py"
    app.write_text(app.read_text().replace("hi from trio", "changed"))
    missed = pytest_run(folder, "replay")
    assert "2 failed" in missed.stdout and "cassette miss" in missed.stdout, both(missed)


RESPX_APP = """
import asyncio
import os

import httpx
import respx

CHAT = "https://api.openai.com/v1/chat/completions"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi past respx"}]}


@respx.mock
def test_respx_answers_a_host_no_route_serves():
    respx.get("https://users.internal/1").mock(return_value=httpx.Response(200, json={"name": "Ada"}))
    with httpx.Client(trust_env=False) as client:
        assert client.get("https://users.internal/1").json() == {"name": "Ada"}


def test_respx_answers_a_vendors_url():
    with respx.mock:
        respx.post(CHAT).mock(return_value=httpx.Response(200, json={"mocked": True}))
        assert httpx.post(CHAT, json=BODY).json() == {"mocked": True}


def test_respx_async():
    async def main():
        async with respx.mock:
            respx.post(CHAT).mock(return_value=httpx.Response(200, json={"mocked": "async"}))
            async with httpx.AsyncClient() as client:
                return (await client.post(CHAT, json=BODY)).json()

    assert asyncio.run(main()) == {"mocked": "async"}


def test_without_respx_cassette_answers():
    auth = {"authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
    answer = httpx.post(CHAT, json=BODY, headers=auth)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"]
"""


def test_a_mocking_library_below_the_seam_answers_its_own_routes(tmp_path: Path) -> None:
    """respx patches httpcore's pool, below the transport cassette catches: while it is active
    its routes answer (a vendor's URL too, as without cassette), and cassette answers the rest
    of the suite from the tape."""
    _, vendor, replayed = recorded_then_replayed(tmp_path, "test_respx.py", RESPX_APP, 4)
    assert len(vendor.requests) == 1, vendor.requests
    assert "1 requests in tests: 1 hits" in replayed.stdout, both(replayed)


VENDOR_URLS_APP = """
import os
import subprocess
import sys

import openai

SHOW = "import os; print(os.environ.get('OPENAI_BASE_URL'))"


def test_a_snapshot_of_the_request_url_sees_the_vendor():
    # What a suite recorded under vcrpy pins: the vendor's URL, not the proxy's port and secret.
    assert os.environ["OPENAI_BASE_URL"] == "https://api.openai.com/v1"
    assert os.environ["ANTHROPIC_BASE_URL"] == "https://api.anthropic.com"
    client = openai.OpenAI(max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": "hi"}]
    )
    assert str(raw.http_request.url) == "https://api.openai.com/v1/chat/completions"
    assert raw.parse().choices
    # The proxy variables as the user had them (none here): every request is caught before
    # they are read, and httpx makes a TLS context for each one set, in every client.
    assert not {"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"} & {n.upper() for n in os.environ}
    assert list(client._client._mounts.values()) == []


def shown(**how):
    return subprocess.run(
        [sys.executable, "-c", SHOW], capture_output=True, text=True, check=True, **how
    ).stdout.strip()


def test_children_reach_the_proxy():
    # A child cassette may not catch in process (a Node 20 fetch ignores the proxy variables)
    # gets the proxy's URL: inherited, copied, or through the shell.
    proxy = os.environ["CASSETTE_PROXY_URL"]
    assert shown().startswith(proxy + "/")
    assert shown(env={**os.environ, "EXTRA": "1"}).startswith(proxy + "/")
    assert shown(env=os.environ).startswith(proxy + "/")
    # A value the test chose is the test's.
    assert shown(env={**os.environ, "OPENAI_BASE_URL": "https://mine.example/v1"}) == "https://mine.example/v1"
    # The proxy variables too: inherited and in a copy, not in an environment built anew.
    proxies = "import os; print(os.environ.get('HTTPS_PROXY'), os.environ.get('NO_PROXY') is not None)"
    forward = proxy.split("/_run/")[0]
    for how in ({}, {"env": {**os.environ, "EXTRA": "1"}}):
        out = subprocess.run([sys.executable, "-c", proxies], capture_output=True, text=True, check=True, **how)
        assert out.stdout.split() == [forward, "True"], (how, out.stdout)
    bare = {"PATH": os.environ["PATH"]}
    out = subprocess.run([sys.executable, "-c", proxies], capture_output=True, text=True, check=True, env=bare)
    assert out.stdout.split() == ["None", "False"]
    assert os.system(f'test "$HTTPS_PROXY" = {forward}') == 0
    script = 'case "$OPENAI_BASE_URL" in "$CASSETTE_PROXY_URL"/*) exit 0;; *) exit 1;; esac'
    assert os.system(script) == 0


def test_a_variable_monkeypatch_put_back_still_reaches_the_proxy_in_a_shell(monkeypatch):
    # monkeypatch's undo writes the value it saw (the vendor's URL) with putenv, the C
    # environment os.system's shell reads: it must get the proxy's URL back, not the vendor's.
    before = os.environ["OPENAI_BASE_URL"]
    monkeypatch.setenv("OPENAI_BASE_URL", "https://mine.example/v1")
    assert os.system('test "$OPENAI_BASE_URL" = https://mine.example/v1') == 0
    monkeypatch.undo()
    assert os.environ["OPENAI_BASE_URL"] == before
    script = 'case "$OPENAI_BASE_URL" in "$CASSETTE_PROXY_URL"/*) exit 0;; *) exit 1;; esac'
    assert os.system(script) == 0
"""


def test_the_test_process_sees_the_vendors_urls_and_its_children_the_proxys(tmp_path: Path) -> None:
    """Issue 33: in process the base-URL variables name the vendors (the channel routes their
    hosts), so an env-following client's request URL is the vendor's, in record and in replay;
    every child process still gets the proxy's URLs."""
    if sys.platform == "win32":
        pytest.skip("the channel is a Unix socket")
    vendor = FakeUpstream()
    try:
        folder = small_project(tmp_path, vendor, "test_urls.py", VENDOR_URLS_APP)
        recorded = pytest_run(folder, "record")
        assert "3 passed" in recorded.stdout, both(recorded)
        assert [path for path, _, _ in vendor.requests] == ["/v1/chat/completions"], vendor.requests
        vendor.stop()
        before = vendor.connections
        replayed = pytest_run(folder, "replay")
        assert "3 passed" in replayed.stdout, both(replayed)
        assert vendor.connections == before
        # The HTTP path keeps the proxy's URLs in the test process (nothing would catch the
        # vendor's there).
        outside = pytest_run(folder, "replay", CASSETTE_IN_PROCESS="off")
        assert "test_a_snapshot_of_the_request_url_sees_the_vendor FAILED" in outside.stdout or (
            "1 failed, 2 passed" in outside.stdout
        ), both(outside)
    finally:
        vendor.close()


def test_the_header_says_whether_cassette_is_on_and_why(tmp_path: Path) -> None:
    vendor = FakeUpstream()
    try:
        folder = project(tmp_path, vendor)
        on = pytest_run(folder, "replay", "--collect-only")
        assert "cassette: replay, every request caught in process" in on.stdout, both(on)
        (folder / "cassette.toml").unlink()
        command = [sys.executable, "-m", "pytest", "-p", "cassette_cli.pytest_plugin", "--collect-only", "tests"]
        env = plugin_env("http://127.0.0.1:9")
        off = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert "cassette: off, no cassette.toml found in" in off.stdout, both(off)
    finally:
        vendor.close()


def test_install_is_undone(tmp_path: Path) -> None:
    """install() patches each library once, and uninstall() puts every seam back."""
    code = (
        "import httpx, urllib3.connectionpool as p, cassette_cli._intercept as i\n"
        "before = (httpx.HTTPTransport.handle_request, p.HTTPConnectionPool.urlopen)\n"
        f"i.install({json.dumps(str(tmp_path / 'none.sock'))}); i.install({json.dumps(str(tmp_path / 'none.sock'))})\n"
        "during = (httpx.HTTPTransport.handle_request, p.HTTPConnectionPool.urlopen)\n"
        "i.uninstall()\n"
        "after = (httpx.HTTPTransport.handle_request, p.HTTPConnectionPool.urlopen)\n"
        "print(before == after, before != during, during[0].__qualname__)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "_patch_httpx.<locals>.handle_request"], out


def test_a_test_that_reached_nothing_is_named(tmp_path: Path) -> None:
    """In a run where other tests reached cassette, the summary names a test that sent nothing
    through it (a client it cannot see, a mock left in place)."""
    vendor = FakeUpstream()
    try:
        folder = small_project(
            tmp_path,
            vendor,
            "test_two.py",
            "import openai\n\n"
            "def test_asks():\n"
            "    client = openai.OpenAI(max_retries=0)\n"
            "    assert client.chat.completions.create(model='m', messages=[{'role': 'user', 'content': 'hi'}])\n\n"
            "def test_quiet():\n"
            "    assert 1 + 1 == 2\n",
        )
        recorded = pytest_run(folder, "record")
        assert "2 passed" in recorded.stdout, both(recorded)
        assert "1 tests made no request through cassette (others did): tests/test_two.py::test_quiet" in (
            recorded.stdout
        ), both(recorded)
    finally:
        vendor.close()


OLLAMA_APP = """
import httpx
import requests

CHAT = "http://127.0.0.1:11434/api/chat"
MESSAGES = [{"role": "user", "content": "Hello, local model."}]


def test_ollama_default_port_plain():
    answer = requests.post(CHAT, json={"model": "llama3.2", "messages": MESSAGES, "stream": False}, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json()["message"]["content"]


def test_ollama_default_port_streamed():
    with httpx.Client(trust_env=False) as client:
        question = [{"role": "user", "content": "Stream it, local model."}]
        with client.stream("POST", CHAT, json={"model": "llama3.2", "messages": question}) as answer:
            assert answer.status_code == 200
            lines = [line for line in answer.iter_lines() if line]
    assert len(lines) > 1
"""


class _LocalOllama:
    """A listener on Ollama's default port that counts the connections it is offered (a local
    Ollama a replay must not reach); None where the port is taken."""

    def __init__(self) -> None:
        import socket
        import threading

        self.connections = 0
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 11434))
        self._sock.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._sock.close()


def test_a_client_hard_coded_to_ollamas_default_port_replays_in_process(tmp_path: Path) -> None:
    """Issue 32: `127.0.0.1:11434` is the ollama route's host, so a client hard-coded to a local
    Ollama is recorded and replayed like a vendor's; a local Ollama running beside the replay is
    never asked (before, a replay with one running passed live)."""
    if sys.platform == "win32":
        pytest.skip("the channel is a Unix socket")
    vendor = FakeUpstream()
    try:
        folder = small_project(tmp_path, vendor, "test_ollama.py", OLLAMA_APP)
        with (folder / "cassette.toml").open("a") as settings:
            settings.write(f'[routes.ollama]\nupstream = "{vendor.url}"\n')
        recorded = pytest_run(folder, "record")
        assert "2 passed" in recorded.stdout, both(recorded)
        assert [path for path, _, _ in vendor.requests] == ["/api/chat", "/api/chat"], both(recorded)
        vendor.stop()
        try:
            local: _LocalOllama | None = _LocalOllama()
        except OSError:
            local = None  # a real Ollama holds the port: it must not be asked either
        try:
            replayed = pytest_run(folder, "replay")
            assert "2 passed" in replayed.stdout, both(replayed)
            assert "2 hits" in replayed.stdout, both(replayed)
            if local is not None:
                assert local.connections == 0, "the replay reached the local Ollama"
                # Without the transports the same replay goes to the local Ollama.
                outside = pytest_run(folder, "replay", CASSETTE_IN_PROCESS="off")
                assert "2 passed" not in outside.stdout, both(outside)
                assert local.connections > 0, both(outside)
        finally:
            if local is not None:
                local.close()
    finally:
        vendor.close()


# litellm's own downloads (issue 32): its price list when imported, its Anthropic beta-header
# table the first time a request needs it, both from raw.githubusercontent.com, a host no route
# serves. It ships a copy of each.
LITELLM_DOWNLOADS = ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS")
PRICE_LIST = "https://raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json"
LITELLM_SUITE = """
import litellm
from litellm.anthropic_beta_headers_manager import get_unsupported_headers


def test_{name}():
    # What litellm's Anthropic request path asks (hosted MCP, a provider's beta filter).
    assert isinstance(get_unsupported_headers("anthropic"), list)
    assert litellm.model_cost["gpt-4o-mini"]
"""


def litellm_project(tmp_path: Path, vendor: FakeUpstream) -> Path:
    folder = small_project(tmp_path, vendor, "test_a.py", LITELLM_SUITE.format(name="a"))
    (folder / "tests" / "test_b.py").write_text(LITELLM_SUITE.format(name="b"))
    return folder


def test_litellm_works_offline_from_its_own_copies(tmp_path: Path) -> None:
    """The plugin sets LITELLM_LOCAL_MODEL_COST_MAP and LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS
    (unless the user did), so litellm reads the copies it ships and sends nothing: before the
    second, the beta-header table's download was refused inside the test and failed it."""
    vendor = FakeUpstream()
    try:
        folder = litellm_project(tmp_path, vendor)
        result = pytest_run(folder, "replay", "-q", "-W", "ignore", unset=LITELLM_DOWNLOADS)
        assert result.returncode == 0, both(result)
        assert "2 passed" in result.stdout, both(result)
        assert "raw.githubusercontent.com" not in result.stdout + result.stderr, both(result)
        assert "outside any test" not in result.stdout, both(result)
    finally:
        vendor.close()


def test_a_download_sent_at_import_is_named_once_and_charged_to_no_test(tmp_path: Path) -> None:
    """A user who asks litellm for its remote price list (LITELLM_LOCAL_MODEL_COST_MAP=False):
    the download, sent when a test module is imported, is refused (replay never connects), is
    charged to no test, and fails the session as a refused request outside any test does;
    litellm falls back to its own copy. Under pytest-xdist every worker imports the modules and
    sends it: the summary names it once (it was named once per worker before)."""
    vendor = FakeUpstream()
    try:
        folder = litellm_project(tmp_path, vendor)
        # Only the price list is asked for: the beta-header table is read from litellm's copy.
        downloads = {"LITELLM_LOCAL_MODEL_COST_MAP": "False", "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True"}
        result = pytest_run(folder, "replay", "-q", "-W", "ignore", "-n", "2", **downloads)
        out = result.stdout
        assert result.returncode == 1, both(result)
        assert "2 passed" in out and "failed on cassette's account" not in out, both(result)
        assert out.count("outside any test") == 1, both(result)
        assert out.count(f"refused {PRICE_LIST}") == 1, both(result)
        assert "outside any test (module-level code, fixtures between tests): 2 requests" in out, both(result)
    finally:
        vendor.close()
