"""A pytest-recording suite as real ones are configured: its own serializer registered in
pytest-recording's hook (a plain implementation, no `optionalhook`), `vcr_config` with
`match_on`, `filter_headers` and `before_record_request`; recorded against the fake vendor of
tests/sdk/test_vcr_import.py with the vendor's real hosts written to the tapes."""

from __future__ import annotations

import os
from typing import Any

import pytest

from . import jsonbody

VENDOR = os.environ.get("VENDOR_URL", "")
REAL = {"openai": "https://api.openai.com", "anthropic": "https://api.anthropic.com"}


def _real_hosts(request: Any) -> Any:
    for name, real in REAL.items():
        prefix = f"{VENDOR}/{name}"
        if VENDOR and request.uri.startswith(prefix):
            request.uri = real + request.uri[len(prefix) :]
    return request


def pytest_recording_configure(config: pytest.Config, vcr: Any) -> None:
    vcr.register_serializer("jsonbody", jsonbody)


@pytest.fixture(scope="module")
def vcr_config() -> dict[str, Any]:
    return {
        "serializer": "jsonbody",
        "match_on": ["method", "host", "path", "body"],
        "filter_headers": ["authorization", "x-api-key", ("x-trace-id", "TRACE")],
        "before_record_request": _real_hosts,
        "decode_compressed_response": True,
    }
