"""Issue 34 item 7: a timeout or a connection reset from the vendor, recorded with
`--record-errors`, replays as the same failure to the real OpenAI Python SDK (no retries): a
connection error for a reset, a read timeout for a stall the client does not wait out, and no
upstream connection in replay; and under the pytest plugin a test that expects the failure
passes (a replayed failure is no cassette error)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from conftest import Proxy
from test_plugin_ci import pytest_run


class FailingUpstream:
    """A vendor that reads each request, then closes the connection (`reset`) or holds it open
    without a word (`stall`); counts its connections."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.recv(65536)
            if self.how == "reset":
                conn.close()
            else:
                self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture(params=["reset", "stall"])
def recorded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, FailingUpstream]]:
    upstream = FailingUpstream(request.param)
    store_url = f"file://{tmp_path}"
    proxy = Proxy(
        ["--mode", "record", "--store", store_url, "--upstream", f"{upstream.url}/v1", "--record-errors"]
        + ["--upstream-timeout", "1"]
    )
    try:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test-failures", max_retries=0)
        # Recording: the proxy's own error for the failure, as without --record-errors.
        with pytest.raises(openai.APIStatusError) as raised:
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        assert raised.value.status_code == (502 if request.param == "reset" else 504)
        assert proxy.stats()["recorded"] == 1
    finally:
        proxy.stop()
    yield request.param, store_url, upstream
    upstream.close()


def test_the_recorded_failure_replays_without_the_vendor(recorded: tuple[str, str, FailingUpstream]) -> None:
    how, store_url, upstream = recorded
    before = upstream.connections
    proxy = Proxy(["--store", store_url])
    try:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test-failures", max_retries=0)
        messages = [{"role": "user", "content": "hi"}]
        started = time.monotonic()
        with pytest.raises(openai.APIConnectionError) as raised:
            client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        assert not isinstance(raised.value, openai.APITimeoutError)
        if how == "stall":
            # The recorded wait (the upstream timeout, 1 s), then a connection closed unanswered.
            assert time.monotonic() - started >= 0.9
            impatient = client.with_options(timeout=0.3)
            with pytest.raises(openai.APITimeoutError):
                impatient.chat.completions.create(model="gpt-4o-mini", messages=messages)
        stats = proxy.stats()
        assert stats["failures_replayed"] == (1 if how == "reset" else 2)
        assert stats["hits"] == 0 and stats["misses"] == 0 and stats["upstream_requests"] == 0
    finally:
        proxy.stop()
    assert upstream.connections == before, "replay called the vendor"


RETRY_PATH = """
import openai
import pytest


def test_the_retry_path_sees_the_failure():
    client = openai.OpenAI(max_retries=0)
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
"""


def test_a_test_of_its_retry_path_passes_on_the_replayed_failure(
    recorded: tuple[str, str, FailingUpstream], tmp_path: Path
) -> None:
    how, store_url, upstream = recorded
    folder = tmp_path / "project"
    (folder / "tests").mkdir(parents=True)
    (folder / "cassette.toml").write_text(f'[routes.default]\nupstream = "{upstream.url}/v1"\n')
    (folder / "tests" / "test_retry.py").write_text(RETRY_PATH)
    before = upstream.connections
    replayed = pytest_run(folder, "--cassette=replay", CASSETTE_STORE=store_url)
    out = replayed.stdout + replayed.stderr
    # Before: the plugin failed the test with "cassette error: replayed the recorded upstream failure".
    assert replayed.returncode == 0, out
    assert "1 passed" in replayed.stdout, out
    assert upstream.connections == before, out
