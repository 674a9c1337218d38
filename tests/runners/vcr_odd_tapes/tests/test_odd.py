"""Tapes with the odd values real suites hold (hand-written, as recorded from the vendors): a
brotli answer vcrpy kept compressed, a tape with one interaction nothing can decode, and AWS
response headers kept as `!!binary`, one of them not UTF-8. `cassette import` and the adopt run
read them with one reader: each keeps every interaction that can be kept and names the rest."""

from __future__ import annotations

import openai
import pytest


def create(question: str) -> openai.types.chat.ChatCompletion:
    return openai.OpenAI(max_retries=0).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question}]
    )


@pytest.mark.vcr
def test_brotli() -> None:
    assert create("Squeeze it.").choices[0].message.content == "brotli ok"


@pytest.mark.vcr
def test_broken() -> None:
    # The tape's second interaction (an answer in an encoding nothing decodes) is never asked for.
    assert create("Still there?").choices[0].message.content == "kept ok"


@pytest.mark.vcr
def test_binary_header() -> None:
    raw = openai.OpenAI(max_retries=0).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Who am I?"}]
    )
    # The UTF-8 one is text; the other cannot be, and is all that is lost.
    assert raw.headers.get("x-amz-request-id") == "req-123"
    assert "x-amz-id-2" not in raw.headers
    assert raw.parse().choices[0].message.content == "binary ok"
