"""Popular LLM clients through `cassette proxy`, configured as an application would configure
them: litellm, langchain-openai, google-genai (Gemini, plain, streamed and a function-calling
round trip), the openai SDK's AzureOpenAI, and pydantic-ai's Gemini tool loop. Each records from
the fake vendor, then replays with the vendor stopped and gets the same parsed results.

The proxy holds the real Gemini and Azure keys (the clients send placeholders); the vendor must
see exactly those, and the store none of them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
from google import genai  # noqa: E402
from google.genai import types  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from openai import AzureOpenAI  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.models.google import GoogleModel  # noqa: E402
from pydantic_ai.providers.google import GoogleProvider  # noqa: E402

from conftest import Proxy, fixture_json  # noqa: E402

CLIENT_KEY = "sk-test-CLIENTSECRET0123456789abcdef"
GEMINI_KEY = "AIzaSyREALGEMINIKEY0123456789abcdefghij"
AZURE_KEY = "azure0123456789REALAZUREKEYabcdef"
PLACEHOLDER = "cassette"
AZURE_VERSION = "2024-10-21"
# Leave pydantic-ai's fresh `pyd_ai_<uuid>` tool-call ids out of the key (docs/settings.md).
IGNORE_CLIENT_IDS = [
    "--ignore-path",
    "$.contents[*].parts[*].functionCall.id",
    "--ignore-path",
    "$.contents[*].parts[*].functionResponse.id",
]

OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look an order up",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        },
    }
]
GEMINI_TOOL = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="get_weather",
            description="Current weather in a city",
            parameters=types.Schema(
                type="OBJECT",
                properties={"city": types.Schema(type="STRING"), "unit": types.Schema(type="STRING")},
            ),
        )
    ]
)


def user(text: str):
    return [{"role": "user", "content": text}]


def openai_calls(tool_calls):
    return [[t.id, t.function.name, json.loads(t.function.arguments)] for t in tool_calls or []]


# --- litellm ---


def litellm_plain(url):
    r = litellm.completion(
        model="openai/gpt-4o-mini",
        api_base=f"{url}/v1",
        api_key=CLIENT_KEY,
        messages=user("Where is my refund for order A-1042?"),
        tools=OPENAI_TOOLS,
    )
    m = r.choices[0].message
    return {"content": m.content, "tool_calls": openai_calls(m.tool_calls), "finish": r.choices[0].finish_reason}


def litellm_stream(url):
    chunks = litellm.completion(
        model="openai/gpt-4o",
        api_base=f"{url}/v1",
        api_key=CLIENT_KEY,
        messages=user("Weather and time in Paris?"),
        stream=True,
    )
    calls, finish = {}, None
    for chunk in chunks:
        choice = chunk.choices[0]
        for tc in choice.delta.tool_calls or []:
            entry = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            entry["id"] = tc.id or entry["id"]
            entry["name"] += tc.function.name or ""
            entry["arguments"] += tc.function.arguments or ""
        finish = choice.finish_reason or finish
    return {
        "tool_calls": [[c["id"], c["name"], json.loads(c["arguments"])] for _, c in sorted(calls.items())],
        "finish": finish,
    }


def litellm_gemini_tool_call(url):
    # litellm's own Gemini client: its path (`/models/M:generateContent`, no version) and its
    # snake_case parts; the call ids it makes up are its own, so they are left out here.
    r = litellm.completion(
        model="gemini/gemini-2.5-flash",
        api_base=f"{url}/gemini",
        api_key=PLACEHOLDER,
        messages=user("When did A-1042 ship?"),
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
    )
    m = r.choices[0].message
    return {
        "content": m.content,
        "tool_calls": [[t.function.name, json.loads(t.function.arguments)] for t in m.tool_calls or []],
        "finish": r.choices[0].finish_reason,
    }


# --- langchain-openai ---


def langchain_plain(url):
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=f"{url}/v1", api_key=CLIENT_KEY)
    r = llm.invoke("Where is my refund for order A-1042?")
    return {"content": r.content, "tool_calls": [[c["id"], c["name"], c["args"]] for c in r.tool_calls]}


def langchain_stream(url):
    llm = ChatOpenAI(model="gpt-4o", base_url=f"{url}/v1", api_key=CLIENT_KEY)
    merged = None
    for chunk in llm.stream("Weather and time in Paris?"):
        merged = chunk if merged is None else merged + chunk
    return {"content": merged.content, "tool_calls": [[c["id"], c["name"], c["args"]] for c in merged.tool_calls]}


def langchain_tools(url):
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=f"{url}/v1", api_key=CLIENT_KEY).bind_tools(OPENAI_TOOLS)
    r = llm.invoke("Where is order A-1042?")
    return {"tool_calls": [[c["id"], c["name"], c["args"]] for c in r.tool_calls]}


# --- google-genai, configured by GOOGLE_GEMINI_BASE_URL as under `cassette exec` ---


def gemini_client(url):
    previous = os.environ.get("GOOGLE_GEMINI_BASE_URL")
    os.environ["GOOGLE_GEMINI_BASE_URL"] = f"{url}/gemini"
    try:
        return genai.Client(api_key=PLACEHOLDER)
    finally:
        if previous is None:
            del os.environ["GOOGLE_GEMINI_BASE_URL"]
        else:
            os.environ["GOOGLE_GEMINI_BASE_URL"] = previous


def gemini_parts(candidate):
    text = "".join(p.text or "" for p in candidate.content.parts or [] if not p.thought)
    calls = [[p.function_call.name, p.function_call.args] for p in candidate.content.parts or [] if p.function_call]
    return text, calls


GEMINI_CONFIG = types.GenerateContentConfig(system_instruction="Be brief.", tools=[GEMINI_TOOL])


def genai_plain(url):
    # Keep the client: google-genai closes its HTTP client when the object goes away.
    client = gemini_client(url)
    r = client.models.generate_content(model="gemini-2.5-flash", contents="When did A-1042 ship?", config=GEMINI_CONFIG)
    text, calls = gemini_parts(r.candidates[0])
    return {
        "text": text,
        "calls": calls,
        "finish": str(r.candidates[0].finish_reason),
        "model": r.model_version,
        "total_tokens": r.usage_metadata.total_token_count,
    }


def genai_stream(url):
    text, calls, finish, total = "", [], None, None
    client = gemini_client(url)
    for chunk in client.models.generate_content_stream(
        model="gemini-2.5-flash", contents="Weather in Paris and Tokyo?", config=GEMINI_CONFIG
    ):
        t, c = gemini_parts(chunk.candidates[0])
        text += t
        calls += c
        finish = chunk.candidates[0].finish_reason or finish
        total = chunk.usage_metadata.total_token_count if chunk.usage_metadata else total
    return {"text": text, "calls": calls, "finish": str(finish), "total_tokens": total}


def genai_tool_round_trip(url):
    # The application runs the function the model asked for and sends its result back.
    client = gemini_client(url)
    contents = [types.Content(role="user", parts=[types.Part(text="Weather in Paris for the delivery?")])]
    first = client.models.generate_content(model="gemini-2.5-flash", contents=contents, config=GEMINI_CONFIG)
    call = first.function_calls[0]
    contents.append(first.candidates[0].content)
    contents.append(
        types.Content(
            role="user",
            parts=[
                types.Part.from_function_response(
                    name=call.name, response={"forecast": f"sunny in {call.args['city']}"}
                )
            ],
        )
    )
    second = client.models.generate_content(model="gemini-2.5-flash", contents=contents, config=GEMINI_CONFIG)
    return {"call": [call.name, call.args], "answer": gemini_parts(second.candidates[0])[0]}


# --- Azure OpenAI, through a route named `azure` ---


def azure_chat(url):
    client = AzureOpenAI(azure_endpoint=f"{url}/azure", api_key=PLACEHOLDER, api_version=AZURE_VERSION)
    r = client.chat.completions.create(model="gpt-4o-mini", messages=user("Where is my refund for order A-1042?"))
    m = r.choices[0].message
    return {"content": m.content, "tool_calls": openai_calls(m.tool_calls)}


# --- pydantic-ai with Gemini tools: a fresh tool-call id in every run ---


def pydantic_ai_tool_loop(url):
    model = GoogleModel("gemini-2.5-flash", provider=GoogleProvider(api_key=PLACEHOLDER, base_url=f"{url}/gemini"))
    agent = Agent(model, system_prompt="Be brief.")

    @agent.tool_plain
    def get_weather(city: str, unit: str) -> str:
        return f"sunny in {city}"

    result = agent.run_sync("Weather in Paris?")
    sent_ids = sorted(
        {
            part.tool_call_id
            for message in result.all_messages()
            for part in message.parts
            if getattr(part, "part_kind", "") in ("tool-call", "tool-return")
        }
    )
    return {"output": result.output, "tool_call_ids": sent_ids}


SCENARIOS = {
    f.__name__: f
    for f in [
        litellm_plain,
        litellm_stream,
        litellm_gemini_tool_call,
        langchain_plain,
        langchain_stream,
        langchain_tools,
        genai_plain,
        genai_stream,
        genai_tool_round_trip,
        azure_chat,
        pydantic_ai_tool_loop,
    ]
}
# Scenarios that send more than one request.
REQUESTS = {"genai_tool_round_trip": 2, "pydantic_ai_tool_loop": 2}
TOTAL_REQUESTS = sum(REQUESTS.get(name, 1) for name in SCENARIOS)


def run_all(url: str) -> dict:
    return {name: scenario(url) for name, scenario in SCENARIOS.items()}


@pytest.fixture(scope="module")
def recorded(upstream, store_url):
    proxy = Proxy(
        [
            "--mode",
            "record",
            "--store",
            store_url,
            "--upstream",
            upstream.url,
            "--route",
            f"gemini={upstream.url}",
            "--route",
            f"azure={upstream.url}",
            *IGNORE_CLIENT_IDS,
        ],
        env={"GEMINI_API_KEY": GEMINI_KEY, "AZURE_OPENAI_API_KEY": AZURE_KEY},
    )
    try:
        results = run_all(proxy.url)
        stats = proxy.stats()
    finally:
        stderr = proxy.stop()
    return {"results": results, "stats": stats, "stderr": stderr}


@pytest.fixture(scope="module")
def replay_proxy(recorded, upstream, store_url):
    upstream.stop()
    before = upstream.connections
    # The azure route needs a name to be mounted; replay never calls its upstream, but a route
    # named for the run replays only what was recorded from its origin (docs/keying.md, "The
    # upstream's origin"): the stopped fake's.
    proxy = Proxy(["--store", store_url, "--route", f"azure={upstream.url}", *IGNORE_CLIENT_IDS])
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


def test_record_gives_the_vendor_answers(recorded):
    r = recorded["results"]
    # A record session asks the vendor each request once: a client sending what another one
    # already asked is answered from that recording (docs/proxy.md, "Answers").
    stats = recorded["stats"]
    assert stats["recorded"] + stats["hits"] == TOTAL_REQUESTS, recorded["stderr"]
    assert stats["upstream_requests"] == stats["recorded"] >= TOTAL_REQUESTS - 1, recorded["stderr"]
    chat = fixture_json("openai_chat.response.json")["choices"][0]["message"]
    calls = [[t["id"], t["function"]["name"], json.loads(t["function"]["arguments"])] for t in chat["tool_calls"]]
    assert r["litellm_plain"] == {"content": chat["content"], "tool_calls": calls, "finish": "tool_calls"}
    assert r["langchain_plain"]["tool_calls"] == calls
    assert r["langchain_tools"]["tool_calls"] == calls
    assert r["azure_chat"] == {"content": chat["content"], "tool_calls": calls}
    streamed = fixture_json("openai_chat_tool.final.json")["choices"][0]["message"]["tool_calls"]
    streamed = [[t["id"], t["function"]["name"], json.loads(t["function"]["arguments"])] for t in streamed]
    assert r["litellm_stream"]["tool_calls"] == streamed
    assert r["langchain_stream"]["tool_calls"] == streamed

    gemini = fixture_json("gemini.response.json")
    parts = gemini["candidates"][0]["content"]["parts"]
    assert r["genai_plain"]["text"] == parts[0]["text"]
    assert r["genai_plain"]["calls"] == [["get_weather", {"city": "Paris", "unit": "celsius"}]]
    assert r["genai_plain"]["model"] == "gemini-2.5-flash"
    assert r["litellm_gemini_tool_call"]["tool_calls"] == [["get_weather", {"city": "Paris", "unit": "celsius"}]]
    tool = fixture_json("gemini_tool.final.json")["candidates"][0]["content"]["parts"]
    assert r["genai_stream"]["text"] == tool[0]["text"]
    assert r["genai_stream"]["calls"] == [["get_weather", p["functionCall"]["args"]] for p in tool[1:]]
    assert r["genai_stream"]["total_tokens"] == 93
    answer = fixture_json("gemini_text.final.json")["candidates"][0]["content"]["parts"][1]["text"]
    assert r["genai_tool_round_trip"]["answer"] == answer
    assert r["pydantic_ai_tool_loop"]["output"] == answer
    assert all(i.startswith("pyd_ai_") for i in r["pydantic_ai_tool_loop"]["tool_call_ids"])


def test_each_vendor_sees_its_real_key_and_the_store_none(recorded, upstream, store_url):
    seen_paths = set()
    for path, headers, _ in upstream.requests:
        seen_paths.add(path.split("?")[0])
        if ":generateContent" in path or ":streamGenerateContent" in path:
            # The client sent the placeholder; the gemini route sent its own key instead.
            assert headers.get("x-goog-api-key") == GEMINI_KEY, (path, headers)
            assert "key=" not in path and "authorization" not in headers
        elif path.startswith("/openai/deployments/"):
            assert headers.get("api-key") == AZURE_KEY, (path, headers)
            assert f"api-version={AZURE_VERSION}" in path
        else:
            assert headers.get("authorization") == f"Bearer {CLIENT_KEY}", (path, headers)
    assert "/openai/deployments/gpt-4o-mini/chat/completions" in seen_paths
    assert "/v1/models/gemini-2.5-flash:streamGenerateContent" in seen_paths
    assert "/models/gemini-2.5-flash:generateContent" in seen_paths  # litellm's spelling
    for file in Path(store_url.removeprefix("file://")).rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            for secret in (CLIENT_KEY, GEMINI_KEY, AZURE_KEY):
                assert secret.encode() not in data, file


def test_gemini_streams_are_stored_as_final_responses(recorded, store_url):
    documents = [json.loads(p.read_bytes()) for p in Path(store_url.removeprefix("file://")).rglob("*.json")]
    gemini = [d for d in documents if d["meta"]["profile"] == "gemini.generate"]
    assert len(gemini) == REQUESTS["genai_tool_round_trip"] + REQUESTS["pydantic_ai_tool_loop"] + 3
    streamed = [d for d in gemini if d["response"].get("stream")]
    assert [d["response"]["stream"] for d in streamed] == ["gemini.sse"]
    assert streamed[0]["response"]["body"]["json"] == fixture_json("gemini_tool.final.json")
    assert streamed[0]["meta"]["finish_reason"] == "STOP"
    assert streamed[0]["meta"]["requested_model"] == "gemini-2.5-flash"


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_replay_gives_the_same_parsed_results(recorded, replayed, name):
    got, expected = replayed["results"][name], recorded["results"][name]
    if name == "pydantic_ai_tool_loop":
        # A new run makes up new ids, which the ignore paths leave out of the key.
        assert got["tool_call_ids"] != expected["tool_call_ids"]
        got, expected = got["output"], expected["output"]
    assert got == expected


def test_replay_never_contacts_the_vendor(replayed):
    assert replayed["connections"] == 0
    stats = replayed["stats"]
    assert stats["hits"] == TOTAL_REQUESTS, stats
    assert stats["misses"] == 0 and stats["upstream_requests"] == 0


def test_without_the_ignore_paths_the_pydantic_ai_loop_misses_and_says_why(replayed, store_url):
    proxy = Proxy(["--store", store_url])
    try:
        with pytest.raises(Exception) as raised:
            pydantic_ai_tool_loop(proxy.url)
        stats = proxy.stats()
    finally:
        stderr = proxy.stop()
    # The first turn carries no id and replays; the second carries a fresh one and misses.
    assert stats["hits"] == 1 and stats["misses"] == 1, stats
    assert "409" in str(raised.value) or "cassette_miss" in str(raised.value), raised.value
    assert "recorded with ignore [$.contents[*].parts[*].functionCall.id" in stderr, stderr
