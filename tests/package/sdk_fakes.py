"""The fake vendor of the SDK tests (tests/sdk/conftest.py) for the package tests.

Loaded once, under its own name, so that it is not a second `conftest` module; each test file
imports `FakeUpstream` from here (pytest puts this folder on `sys.path` for its test files).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "cassette_sdk_fakes", Path(__file__).resolve().parents[1] / "sdk" / "conftest.py"
)
assert _SPEC is not None and _SPEC.loader is not None
_MODULE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MODULE)

FakeUpstream = _MODULE.FakeUpstream
