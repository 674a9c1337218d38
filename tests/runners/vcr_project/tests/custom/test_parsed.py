"""Tapes written by the custom serializer: parsed_body, anthropic-version deleted."""

from __future__ import annotations

import anthropic
import pytest


@pytest.mark.vcr
def test_anthropic_parsed() -> None:
    client = anthropic.Anthropic()
    message = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=64,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
    )
    assert message.content[0].text.startswith("Paris")
