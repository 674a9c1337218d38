"""A pytest-recording suite as real ones are written, recorded against the fake vendor of
tests/sdk/test_vcr_import.py: tapes name the real vendor hosts (the fake's address is
rewritten before recording, as it would be by recording against the vendor itself), and
credentials are filtered as the suites filter them."""

from __future__ import annotations

import os
from typing import Any

import pytest

from . import parsed_serializer

VENDOR = os.environ.get("VENDOR_URL", "")
REAL = {
    "openai": "https://api.openai.com",
    "anthropic": "https://api.anthropic.com",
    "files": "https://files.example.com",
}


def _real_hosts(request: Any) -> Any:
    for name, real in REAL.items():
        prefix = f"{VENDOR}/{name}"
        if VENDOR and request.uri.startswith(prefix):
            request.uri = real + request.uri[len(prefix) :]
    return request


@pytest.fixture(scope="module")
def vcr_config() -> dict[str, Any]:
    return {
        "filter_headers": ["authorization", "x-api-key"],
        "before_record_request": _real_hosts,
        "decode_compressed_response": True,
    }


# Optional: the hook is pytest-recording's, and the suite also runs with it turned off.
@pytest.hookimpl(optionalhook=True)
def pytest_recording_configure(config: pytest.Config, vcr: Any) -> None:
    vcr.register_serializer("parsed", parsed_serializer)
