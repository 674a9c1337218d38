"""Issue 35 item 6: a vendor that spells the route's key out across the deltas of a stream (a few
characters each) in record mode: the real OpenAI Python SDK, streaming through `cassette proxy`,
assembles `[REDACTED]` where the key was and never a run of it; the stream still parses."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import openai
import pytest

from conftest import Proxy

ROUTE_KEY = "sk-proj-Qw7Er9Ty2Ui4Op6As8Df0Gh1Jk3Lz5Xc7Vb9NmPl2"


def texts() -> list[str]:
    pieces = [ROUTE_KEY[at : at + 4] for at in range(0, len(ROUTE_KEY), 4)]
    return ["Your key is ", *pieces, ". Keep it safe."]


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for text in [*texts(), None]:
            delta = {"content": text} if text is not None else {}
            chunk = {
                "id": "c1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "gpt-4o-mini",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None if text is not None else "stop"}],
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


@pytest.fixture
def vendor() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_key_spelled_across_deltas_reaches_the_sdk_redacted(vendor: str, tmp_path: Path) -> None:
    proxy = Proxy(
        ["--mode", "record", "--store", f"file://{tmp_path}", "--upstream", f"{vendor}/v1"],
        env={"UPSTREAM_API_KEY": ROUTE_KEY},
    )
    try:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-cassette-placeholder", max_retries=0)
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "key?"}], stream=True
        )
        assembled = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    finally:
        proxy.stop()
    assert assembled == "Your key is [REDACTED]. Keep it safe."
    # Without the live pass the SDK assembled the key itself.
    assert "".join(texts()) == f"Your key is {ROUTE_KEY}. Keep it safe."
    for at in range(3, len(ROUTE_KEY) - 6):
        assert ROUTE_KEY[at : at + 6] not in assembled
