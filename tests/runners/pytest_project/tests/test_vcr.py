"""pytest-recording's `vcr` marker in the same suite: a plain HTTP service (not an LLM, on
loopback, so never through cassette) recorded to YAML by vcrpy, replayed with the service
stopped."""

from __future__ import annotations

import os

import httpx
import pytest


@pytest.mark.vcr
def test_weather_service() -> None:
    answer = httpx.post(f"{os.environ['WEATHER_URL']}/weather", json={"city": "Paris"}, timeout=5)
    assert answer.status_code == 404  # the fake vendor knows no weather: any answer will do
    assert "not_found" in answer.text
