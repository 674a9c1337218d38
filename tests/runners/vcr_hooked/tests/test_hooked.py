"""Tests as a suite with its own serializer writes them: body matching, an extra tape, a
stream, a header filtered with a replacement, and tests reading vcrpy's cassette object."""

from __future__ import annotations

import json
import os
import uuid

import anthropic
import openai
import pytest
import requests


def ask(question: str) -> str:
    r = openai.OpenAI(max_retries=0).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question}]
    )
    return r.choices[0].message.content or ""


@pytest.mark.vcr
def test_body_matched() -> None:
    # Two requests to one URL: vcr_config's match_on pairs each with its own answer by the body.
    first, second = ask("First question."), ask("Second question.")
    assert first.startswith("answer") and second.startswith("answer") and first != second


@pytest.mark.vcr("shared.jsonbody")
def test_extra_tape() -> None:
    # The second answer is on the extra tape (moved there after recording).
    assert ask("Own question.").startswith("answer")
    assert ask("Shared question.").startswith("answer")


@pytest.mark.vcr
def test_stream() -> None:
    stream = openai.OpenAI(max_retries=0).chat.completions.create(
        model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "Count to three."}]
    )
    pieces = [chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices]
    assert pieces == ["one", " two", " three", ""], pieces


@pytest.mark.vcr(match_on=["method", "path", "headers"])
def test_filtered_header() -> None:
    # A fresh trace id every run: the tape holds vcr_config's replacement, matched as vcrpy does.
    base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
    r = requests.post(
        f"{base}/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Trace me."}]},
        headers={"x-trace-id": uuid.uuid4().hex, "authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"},
        timeout=10,
    )
    assert r.json()["choices"][0]["message"]["content"].startswith("answer")


@pytest.mark.vcr
def test_reads_the_cassette(vcr: object) -> None:
    anthropic.Anthropic(max_retries=0).messages.create(
        model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "Hello?"}]
    )
    replaying = vcr.record_mode == "none"  # type: ignore[attr-defined]
    assert vcr.play_count == (1 if replaying else 0)  # type: ignore[attr-defined]
    sent = vcr.requests[0]  # type: ignore[attr-defined]
    assert (sent.method, sent.uri) == ("POST", "https://api.anthropic.com/v1/messages"), sent
    assert json.loads(sent.body)["messages"][0]["content"] == "Hello?"
    assert sent.headers["content-type"] == "application/json"


def test_unmarked(vcr: object) -> None:
    assert vcr is None
