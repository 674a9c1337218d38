"""Secrets and the official OpenAI Python SDK through `cassette proxy` (issue 10, items 10 to 13):
a multipart upload the SDK builds itself, a gateway's headers, and a miss whose 409 and log line
must not echo what the request carried."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import openai
import pytest

from conftest import Proxy

KEY = "sk-proj-7Fh2Kd9Lq3Wz8Xc1Vb6Nm4Tr0Yp5Ju2Ie8Ow3Aq"
CLIENT_KEY = "sk-test-CLIENTSECRET0123456789abcdef"

# What a gateway such as LiteLLM's proxy adds to a vendor's answer.
GATEWAY_HEADERS = [
    ("set-cookie", "__cf_bm=opaque-cookie-1; path=/; HttpOnly"),
    ("llm_provider-set-cookie", "_cfuvid=opaque-cookie-2; path=/"),
    ("llm_provider-openai-organization", "org-opaqueorganization"),
    ("x-litellm-model-api-base", "https://opaque-internal.example/v1"),
    ("x-request-id", "req_abc123"),
    ("x-ratelimit-remaining-tokens", "149000"),
]

CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Refunds take 5 days."},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14},
}


class _Gateway(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.bodies.append((self.path, self.headers.get("content-type", ""), raw))
        if self.path == "/v1/audio/transcriptions":
            answer = {"text": "hello from the recording"}
        else:
            answer = CHAT
        payload = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        for name, value in GATEWAY_HEADERS:
            self.send_header(name, value)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture(scope="module")
def gateway():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    server.daemon_threads = True
    server.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()
    server.server_close()


def stored_text(store_url: str) -> str:
    """Every stored byte, base64-stored bodies decoded too."""
    out = []
    for path in Path(store_url.removeprefix("file://")).rglob("*.json"):
        doc = json.loads(path.read_bytes())
        out.append(path.read_text())
        for part in ("request", "response"):
            body = doc[part].get("body")
            if isinstance(body, dict) and "base64" in body:
                out.append(base64.b64decode(body["base64"]).decode("latin-1"))
    return "\n".join(out)


@pytest.fixture(scope="module")
def recorded(gateway, tmp_path_factory):
    store_url = "file://" + str(tmp_path_factory.mktemp("redaction"))
    proxy = Proxy(["--mode", "record", "--store", store_url, "--upstream", gateway.url])
    try:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=CLIENT_KEY, max_retries=0)
        mp3 = b"\xff\xfb\x90\x64\x00ID3 comment " + KEY.encode() + b"\x00\xfe\x80"
        transcription = client.audio.transcriptions.create(
            model="whisper-1",
            file=("a.mp3", mp3, "audio/mpeg"),
            prompt=f"glossary: {KEY}",
            extra_body={"api_key": "opaque-multipart-field"},
        )
        chat = client.chat.completions.create(
            model="gpt-4o-mini",
            max_tokens=64,
            messages=[{"role": "user", "content": "Where is my refund? I forgot my password."}],
        )
    finally:
        stderr = proxy.stop()
    return {"store": store_url, "transcription": transcription, "chat": chat, "stderr": stderr}


def test_the_vendor_gets_the_upload_and_the_client_the_answer(recorded, gateway):
    assert recorded["transcription"].text == "hello from the recording"
    path, content_type, raw = next(b for b in gateway.bodies if b[0] == "/v1/audio/transcriptions")
    assert content_type.startswith("multipart/form-data; boundary=")
    assert KEY.encode() in raw and b"opaque-multipart-field" in raw, "redaction is about storage only"


def test_a_multipart_upload_and_gateway_headers_leave_no_secret_on_disk(recorded):
    stored = stored_text(recorded["store"])
    for secret in [KEY, CLIENT_KEY, "opaque", "org-"]:
        assert secret not in stored, secret
    # The rest survives: the model field, the prompt's words, limits and token counts.
    assert "whisper-1" in stored and "glossary: [REDACTED]" in stored
    assert "I forgot my password." in stored and '"max_tokens": 64' in stored
    assert '"total_tokens": 14' in stored and "req_abc123" in stored
    assert KEY not in recorded["stderr"]


def test_a_miss_echoes_nothing_the_request_carried(recorded):
    proxy = Proxy(["--store", recorded["store"]])
    try:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=CLIENT_KEY, max_retries=0)
        with pytest.raises(openai.ConflictError) as raised:
            client.chat.completions.create(
                model="gpt-4o-mini",
                max_tokens=64,
                messages=[{"role": "user", "content": f"Where is my refund? My key is {KEY}"}],
                extra_body={"api_key": "opaque-live-key"},
            )
    finally:
        stderr = proxy.stop()
    shown = f"{raised.value}\n{json.dumps(raised.value.body)}\n{stderr}"
    for secret in [KEY, KEY[:20], CLIENT_KEY, "opaque-live-key"]:
        assert secret not in shown, secret
    assert "body.messages[0].content" in shown
    assert raised.value.body["type"] == "cassette_miss"
