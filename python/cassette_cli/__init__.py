"""cassette for Python: the `cassette` binary this distribution installs, and where it is.

`pip install cassette-cli` puts `cassette` on the environment's PATH; `python -m cassette_cli`
runs the same binary, and `find_cassette_bin()` gives its path to code that starts it (the
pytest plugin, assertion helpers). `expect(answer)` and `tool_calls(response)` assert on what a
model answered, with the suite runner's graders and its recorded judge (`cassette grade`). The
binary does all the work; this package only finds it and talks to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cassette_cli._find_cassette import BINARY_ENV, find_cassette_bin

if TYPE_CHECKING:
    from cassette_cli._expect import Expectation, ReplayMiss, ToolCalls, expect, tool_calls
    from cassette_cli._grade import GradeError, GradeSession, on_miss, set_default_session

# Imported on first use, so that `python -m cassette_cli` starts no slower for them.
_LAZY = {
    "GradeError": "cassette_cli._grade",
    "GradeSession": "cassette_cli._grade",
    "on_miss": "cassette_cli._grade",
    "set_default_session": "cassette_cli._grade",
    "Expectation": "cassette_cli._expect",
    "ReplayMiss": "cassette_cli._expect",
    "ToolCalls": "cassette_cli._expect",
    "expect": "cassette_cli._expect",
    "tool_calls": "cassette_cli._expect",
}

__all__ = [
    "BINARY_ENV",
    "Expectation",
    "GradeError",
    "GradeSession",
    "ReplayMiss",
    "ToolCalls",
    "__version__",
    "expect",
    "find_cassette_bin",
    "on_miss",
    "set_default_session",
    "tool_calls",
]


def __getattr__(name: str) -> Any:  # noqa: ANN401 (a lazily imported name: a class or a function)
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    # Read on first use: importlib.metadata costs more than all of `python -m cassette_cli`.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("cassette-cli")
        except PackageNotFoundError:  # imported from a source checkout, not installed
            return "0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
