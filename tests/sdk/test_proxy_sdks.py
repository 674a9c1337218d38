"""The official OpenAI and Anthropic Python SDKs through `cassette proxy`: record from a fake
vendor, then replay with the vendor stopped and get the same parsed results."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anthropic
import openai
import pytest

from conftest import Proxy, fixture_bytes, fixture_json

# A credential the client sends; it must reach the upstream and never the store.
CLIENT_KEY = "sk-test-CLIENTSECRET0123456789abcdef"

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
# The `.stream()` helper only accepts strict function tools.
STRICT_TOOLS = [
    {"type": "function", "function": {**WEATHER_TOOL["function"], "strict": True}},
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Local time in a timezone",
            "parameters": {
                "type": "object",
                "properties": {"timezone": {"type": "string"}},
                "required": ["timezone"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    },
]
ANTHROPIC_TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather in a city",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    }
]


def clients(url: str):
    oa = openai.OpenAI(base_url=f"{url}/v1", api_key=CLIENT_KEY)
    an = anthropic.Anthropic(base_url=f"{url}/anthropic", api_key=CLIENT_KEY)
    return oa, an


def user(text: str):
    return [{"role": "user", "content": text}]


# Each scenario runs the SDK the way an application would and returns what the application
# would look at, normalized to plain data so record and replay can be compared.


def chat_nonstream(oa, an):
    r = oa.chat.completions.create(
        model="gpt-4o-mini", messages=user("Where is my refund for order A-1042?"), tools=[WEATHER_TOOL]
    )
    m = r.choices[0].message
    return {
        "content": m.content,
        "tool_calls": [[t.id, t.function.name, json.loads(t.function.arguments)] for t in m.tool_calls or []],
        "finish_reason": r.choices[0].finish_reason,
        "model": r.model,
        "total_tokens": r.usage.total_tokens,
    }


def chat_raw(oa, an):
    # A test that snapshots the raw answer (docs/cassette-format.md, "Replay").
    raw = oa.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=user("Show me the raw answer for order A-1042.")
    )
    return {"text": raw.text, "content": raw.parse().choices[0].message.content}


def chat_stream(oa, an):
    stream = oa.chat.completions.create(
        model="gpt-4o", messages=user("Weather and time in Paris?"), tools=[WEATHER_TOOL], stream=True
    )
    content, calls, finish, model = "", {}, None, None
    for chunk in stream:
        model = chunk.model
        for choice in chunk.choices:
            delta = choice.delta
            content += delta.content or ""
            for tc in delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = tc.id or entry["id"]
                if tc.function is not None:
                    entry["name"] += tc.function.name or ""
                    entry["arguments"] += tc.function.arguments or ""
            finish = choice.finish_reason or finish
    return {
        "content": content or None,
        "tool_calls": [[c["id"], c["name"], json.loads(c["arguments"])] for _, c in sorted(calls.items())],
        "finish_reason": finish,
        "model": model,
    }


def chat_stream_helper(oa, an):
    done = []
    with oa.chat.completions.stream(
        model="gpt-4o", messages=user("Weather and local time in Paris, please."), tools=STRICT_TOOLS
    ) as stream:
        for event in stream:
            if event.type == "tool_calls.function.arguments.done":
                done.append([event.name, event.parsed_arguments])
        final = stream.get_final_completion()
    m = final.choices[0].message
    return {
        "done_events": done,
        "tool_calls": [[t.id, t.function.name, t.function.parsed_arguments] for t in m.tool_calls or []],
        "finish_reason": final.choices[0].finish_reason,
    }


def responses_stream(oa, an):
    deltas = ""
    with oa.responses.stream(model="gpt-4.1-mini", input="How long do refunds take? Answer in French.") as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas += event.delta
        final = stream.get_final_response()
    return {
        "deltas": deltas,
        "output_text": final.output_text,
        "status": final.status,
        "model": final.model,
        "total_tokens": final.usage.total_tokens if final.usage else None,
    }


def blocks(message):
    out = []
    for block in message.content:
        if block.type == "text":
            out.append(["text", block.text])
        elif block.type == "tool_use":
            out.append(["tool_use", block.id, block.name, block.input])
        else:
            out.append([block.type])
    return out


def anthropic_nonstream(oa, an):
    m = an.messages.create(
        model="claude-3-5-haiku-latest",
        max_tokens=512,
        messages=user("Email Ana about her refund."),
        tools=ANTHROPIC_TOOLS,
    )
    return {"blocks": blocks(m), "stop_reason": m.stop_reason, "model": m.model, "output_tokens": m.usage.output_tokens}


def anthropic_stream(oa, an):
    with an.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=512,
        messages=user("What's the weather in Paris?"),
        tools=ANTHROPIC_TOOLS,
    ) as stream:
        text = "".join(stream.text_stream)
        m = stream.get_final_message()
    return {
        "text_stream": text,
        "blocks": blocks(m),
        "stop_reason": m.stop_reason,
        "model": m.model,
        "output_tokens": m.usage.output_tokens,
    }


SCENARIOS = {
    f.__name__: f
    for f in [
        chat_nonstream,
        chat_raw,
        chat_stream,
        chat_stream_helper,
        responses_stream,
        anthropic_nonstream,
        anthropic_stream,
    ]
}


def run_all(url: str) -> dict:
    oa, an = clients(url)
    return {name: scenario(oa, an) for name, scenario in SCENARIOS.items()}


@pytest.fixture(scope="module")
def recorded(upstream, store_url):
    proxy = Proxy(
        ["--mode", "record", "--store", store_url, "--upstream", upstream.url, "--route", f"anthropic={upstream.url}"]
    )
    try:
        results = run_all(proxy.url)
        stats = proxy.stats()
    finally:
        stderr = proxy.stop()
    return {"results": results, "stats": stats, "stderr": stderr, "exit": proxy.process.returncode}


@pytest.fixture(scope="module")
def replay_proxy(recorded, upstream, store_url):
    upstream.stop()
    before = upstream.connections
    # No upstream flags at all: replay needs none, and the built-in routes mount /anthropic.
    proxy = Proxy(["--store", store_url])
    proxy.connections_before = before
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def replayed(replay_proxy, upstream):
    results = run_all(replay_proxy.url)
    return {
        "results": results,
        "stats": replay_proxy.stats(),
        "connections": upstream.connections - replay_proxy.connections_before,
    }


# --- recording: the SDKs parse what the vendor sent, through the proxy ---


def test_record_gives_the_vendor_answers(recorded):
    r = recorded["results"]
    chat = fixture_json("openai_chat.response.json")["choices"][0]
    assert r["chat_nonstream"]["content"] == chat["message"]["content"]
    assert r["chat_nonstream"]["tool_calls"] == [
        [t["id"], t["function"]["name"], json.loads(t["function"]["arguments"])] for t in chat["message"]["tool_calls"]
    ]
    assert r["chat_nonstream"]["finish_reason"] == "tool_calls"

    tool_final = fixture_json("openai_chat_tool.final.json")["choices"][0]
    expected_calls = [
        [t["id"], t["function"]["name"], json.loads(t["function"]["arguments"])]
        for t in tool_final["message"]["tool_calls"]
    ]
    assert r["chat_stream"]["tool_calls"] == expected_calls
    assert r["chat_stream"]["finish_reason"] == "tool_calls"
    assert r["chat_stream_helper"]["tool_calls"] == expected_calls
    assert r["chat_stream_helper"]["done_events"] == [[c[1], c[2]] for c in expected_calls]

    responses_final = fixture_json("openai_responses.final.json")
    expected_text = "".join(
        c["text"]
        for item in responses_final["output"]
        if item["type"] == "message"
        for c in item["content"]
        if c["type"] == "output_text"
    )
    assert r["responses_stream"]["output_text"] == expected_text
    assert r["responses_stream"]["deltas"] == expected_text
    assert r["responses_stream"]["status"] == "completed"

    message = fixture_json("anthropic.response.json")
    assert r["anthropic_nonstream"]["stop_reason"] == "tool_use"
    assert r["anthropic_nonstream"]["blocks"][1] == [
        "tool_use",
        message["content"][1]["id"],
        "send_email",
        message["content"][1]["input"],
    ]

    tool_use = fixture_json("anthropic_tool_use.final.json")
    assert r["anthropic_stream"]["stop_reason"] == "tool_use"
    assert r["anthropic_stream"]["blocks"] == [
        ["text", tool_use["content"][0]["text"]],
        ["tool_use", tool_use["content"][1]["id"], "get_weather", {"city": "Paris", "unit": "celsius"}],
    ]
    assert r["anthropic_stream"]["text_stream"] == tool_use["content"][0]["text"]


def test_record_gives_the_vendor_bytes_and_replay_the_same(recorded, replayed):
    vendor = fixture_bytes("openai_chat.response.json").decode()
    assert recorded["results"]["chat_raw"]["text"] == vendor
    assert replayed["results"]["chat_raw"]["text"] == vendor


def test_record_stores_one_cassette_per_request_and_stops_gracefully(recorded, upstream, store_url):
    stats = recorded["stats"]
    assert stats["recorded"] == len(SCENARIOS), (stats, recorded["stderr"])
    assert stats["upstream_requests"] == len(SCENARIOS), (stats, recorded["stderr"])
    assert stats["hits"] == 0 and stats["misses"] == 0
    files = [p for p in Path(store_url.removeprefix("file://")).rglob("*") if p.is_file()]
    assert len(files) >= len(SCENARIOS)
    # SIGINT: graceful stop, exit 0, the counters printed.
    assert recorded["exit"] == 0
    assert f"{len(SCENARIOS)} recorded" in recorded["stderr"], recorded["stderr"]


def test_paths_reach_the_vendor_unchanged(recorded, upstream):
    paths = sorted({path for path, _, _ in upstream.requests})
    assert paths == ["/v1/chat/completions", "/v1/messages", "/v1/responses"]


def test_client_credentials_reach_the_vendor_but_never_the_store(recorded, upstream, store_url):
    for path, headers, _ in upstream.requests:
        h = {k.lower(): v for k, v in headers.items()}
        # Anthropic SDKs send `x-api-key` or, in newer versions, a bearer token.
        assert h.get("authorization") == f"Bearer {CLIENT_KEY}" or h.get("x-api-key") == CLIENT_KEY, (path, h)
    for path in Path(store_url.removeprefix("file://")).rglob("*"):
        if path.is_file():
            assert CLIENT_KEY.encode() not in path.read_bytes(), path


# --- replay: the vendor is stopped ---


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_replay_gives_the_same_parsed_results(recorded, replayed, name):
    assert replayed["results"][name] == recorded["results"][name]


def test_replay_never_contacts_the_upstream(replayed):
    assert replayed["connections"] == 0
    stats = replayed["stats"]
    assert stats["hits"] == len(SCENARIOS)
    assert stats["upstream_requests"] == 0
    assert stats["misses"] == 0


def test_openai_miss_raises_conflict_on_the_first_attempt(replayed, replay_proxy):
    oa, _ = clients(replay_proxy.url)
    before = replay_proxy.stats()
    with pytest.raises(openai.ConflictError) as raised:
        oa.chat.completions.create(model="gpt-4o-mini", messages=user("A question nobody recorded"))
    after = replay_proxy.stats()
    assert after["requests"] - before["requests"] == 1, "the SDK retried the 409"
    assert after["misses"] - before["misses"] == 1
    error = raised.value.body
    key = error["key"]
    assert len(key) == 64 and key in str(raised.value)
    assert error["type"] == "cassette_miss"
    assert raised.value.response.headers["x-should-retry"] == "false"


def test_anthropic_streaming_miss_raises_conflict_before_any_event(replayed, replay_proxy):
    _, an = clients(replay_proxy.url)
    before = replay_proxy.stats()
    events = []
    with pytest.raises(anthropic.ConflictError) as raised:
        with an.messages.stream(model="claude-sonnet-4-5", max_tokens=64, messages=user("Unrecorded")) as stream:
            for event in stream:
                events.append(event)
    assert events == []
    after = replay_proxy.stats()
    assert after["requests"] - before["requests"] == 1
    assert after["misses"] - before["misses"] == 1
    assert "cassette_miss" in str(raised.value)
    key = raised.value.body["error"]["key"]
    assert key in str(raised.value)


def test_healthz_names_mode_and_store(replay_proxy, store_url):
    import urllib.request

    with urllib.request.urlopen(f"{replay_proxy.url}/healthz", timeout=10) as response:
        health = json.loads(response.read())
    assert health["mode"] == "replay"
    assert store_url.removeprefix("file://") in health["store"]


def test_non_loopback_listen_needs_allow_remote(cassette, tmp_path):
    import subprocess

    refused = subprocess.run(
        [cassette, "proxy", "--listen", "0.0.0.0:0", "--store", f"file://{tmp_path}"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "CASSETTE_MODE": "replay"},
    )
    assert refused.returncode == 2
    assert "--allow-remote" in refused.stderr


def test_invalid_settings_are_reported_before_starting(cassette, tmp_path):
    import subprocess

    for args, needle in [
        (["--mode", "replays"], "replays"),
        (["--route", "anthropic"], "NAME=URL"),
        (["--route", "x=ftp://h"], "http"),
        (["--max-body", "lots"], "lots"),
    ]:
        result = subprocess.run(
            [cassette, "proxy", "--listen", "127.0.0.1:0", "--store", f"file://{tmp_path}", *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 2, (args, result.stderr)
        assert needle in result.stderr, (args, result.stderr)
        assert "panicked" not in result.stderr
