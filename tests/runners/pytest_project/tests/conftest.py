"""A client built when this conftest is imported, before any test module: the plugin must be in
place by then (its transports, or on the HTTP path its base URL)."""

from __future__ import annotations

import openai
import pytest

EARLY_CLIENT = openai.OpenAI(max_retries=0)


@pytest.fixture
def early_client() -> openai.OpenAI:
    return EARLY_CLIENT
