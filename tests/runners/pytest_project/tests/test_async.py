"""pytest-asyncio tests with the async OpenAI client."""

from __future__ import annotations

import os

import openai
import pytest

CHANGED = set(filter(None, os.environ.get("CHANGE", "").split(",")))


@pytest.mark.asyncio
@pytest.mark.parametrize("n", [0, 1])
async def test_async_chat(n: int) -> None:
    client = openai.AsyncOpenAI(max_retries=0)
    extra = " (changed)" if f"async-{n}" in CHANGED else ""
    answer = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": f"Async question {n}{extra}"}]
    )
    assert answer.choices[0].message.content
