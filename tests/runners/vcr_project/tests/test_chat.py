"""Default serializer: plain calls, a stream, repeats with different answers, two tests with one
request, a binary header, a fixture download, an error stream."""

from __future__ import annotations

import os

import anthropic
import httpx
import openai
import pytest
import requests


def ask(question: str) -> str:
    client = openai.OpenAI()
    r = client.chat.completions.create(
        model="gpt-4o-mini", temperature=1, messages=[{"role": "user", "content": question}]
    )
    return r.choices[0].message.content or ""


@pytest.mark.vcr
def test_plain() -> None:
    assert ask("Name a capital.").startswith("answer")


@pytest.mark.vcr
def test_stream() -> None:
    client = openai.OpenAI()
    stream = client.chat.completions.create(
        model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "Count to three."}]
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "one two three"


@pytest.mark.vcr
def test_repeats() -> None:
    answers = [ask("Name a colour.") for _ in range(3)]
    assert len(set(answers)) == 3, answers


@pytest.mark.vcr
def test_same_request_first() -> None:
    assert ask("Pick a number.") == "answer 5"


@pytest.mark.vcr
def test_same_request_second() -> None:
    assert ask("Pick a number.") == "answer 6"


@pytest.mark.vcr
def test_binary_header() -> None:
    base = os.environ["OPENAI_BASE_URL"].rstrip("/")
    r = requests.post(
        f"{base}/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Trace me."}]},
        headers={"x-trace-id": b"trace-42", "authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"},
        timeout=10,
    )
    assert r.json()["choices"][0]["message"]["content"].startswith("answer")


@pytest.mark.vcr
def test_download() -> None:
    assert httpx.get(os.environ["FILES_URL"] + "/cat.txt").text == "a cat"


@pytest.mark.vcr
def test_error_stream() -> None:
    client = anthropic.Anthropic()
    with (
        pytest.raises(anthropic.APIStatusError) as raised,
        client.messages.stream(
            model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "Tell a long story."}]
        ) as stream,
    ):
        for _ in stream.text_stream:
            pass
    assert "overloaded" in str(raised.value).lower()
