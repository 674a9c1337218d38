"""Issue 35 item 9: inside a pytest run the tests see only the placeholder key; nothing the
plugin keeps that test code can reach (its module's globals, the session it keeps, what they
hold) carries the real key."""

from __future__ import annotations

from pathlib import Path

from conftest import FakeUpstream
from test_in_process import KEY, both, project, pytest_run

PROBE = """
import dataclasses
import os
import sys


def reachable(value, seen, depth=0):
    if id(value) in seen or depth > 8:
        return
    seen.add(id(value))
    yield value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from reachable(k, seen, depth + 1)
            yield from reachable(v, seen, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from reachable(v, seen, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        yield from reachable(vars(value), seen, depth + 1)


def test_no_real_key_is_within_reach():
    assert os.environ["OPENAI_API_KEY"] == "cassette"
    real = os.environ["REAL_KEY_TO_LOOK_FOR"]
    for name, module in list(sys.modules.items()):
        if not name.startswith("cassette_cli"):
            continue
        for value in reachable(vars(module), set()):
            assert not (isinstance(value, str) and real in value), name
"""


def test_the_plugin_keeps_no_copy_of_the_real_key(tmp_path: Path) -> None:
    vendor = FakeUpstream()
    try:
        folder = project(tmp_path, vendor)
        (folder / "tests" / "test_app.py").write_text(PROBE)
        result = pytest_run(folder, "replay", REAL_KEY_TO_LOOK_FOR=KEY)
        assert result.returncode == 0, both(result)
        assert "1 passed" in result.stdout, both(result)
    finally:
        vendor.close()
