"""How the pytest plugin fails a test for cassette: the proxy's rendered explanation put on the
test's report, first, where pytest's summary line and JUnit's message look."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    import pytest
    from _pytest._code.code import TerminalRepr


def failure(tally: dict[str, Any]) -> list[str]:
    """What in the tally fails the test, one line each, as the proxy rendered it."""
    return [str(line) for line in tally.get("failure") or []]


def one_line(tally: dict[str, Any], problems: list[str]) -> str:
    return str(tally.get("headline") or problems[0])


def outside_tests(strays: list[dict[str, Any]]) -> dict[str, Any]:
    """What was sent outside any test, every stray tally merged into one: counts summed, each
    failure line once. A download a library makes when imported (litellm's price list, when
    LITELLM_LOCAL_MODEL_COST_MAP is set to False) is sent once per process that imports it, so
    pytest-xdist's workers each send it, and the summary names it once."""
    merged: dict[str, Any] = {
        "requests": 0,
        "misses": 0,
        "errors": 0,
        "bypassed": [],
        "failure": [],
    }
    for tally in strays:
        for name in ("requests", "misses", "errors"):
            merged[name] += int(tally.get(name, 0))
        merged["bypassed"] += tally.get("bypassed") or []
        merged["failure"] += [line for line in failure(tally) if line not in merged["failure"]]
    return merged


class _Writer(Protocol):
    def line(self, s: str = "", **markup: bool) -> None: ...


class _Explanation:
    """A failure made of cassette's explanation: what pytest prints and JUnit's message."""

    def __init__(self, text: str) -> None:
        self.text = text

    def toterminal(self, tw: _Writer) -> None:
        for line in self.text.splitlines():
            tw.line(line, red=True, bold=line.startswith("cassette"))

    def __str__(self) -> str:
        return self.text

    @property
    def reprcrash(self) -> _Crash:
        # The summary line (`FAILED test - ...`) and JUnit's message attribute read this.
        return _Crash(self.text)


@dataclasses.dataclass
class _Crash:
    message: str
    path: str = ""
    lineno: int = 0


def fail(report: pytest.TestReport, problems: list[str]) -> None:
    text = "\n".join(problems)
    longrepr = report.longrepr
    if report.failed and longrepr is not None:
        # The test failed already (often of the miss itself): keep its traceback, and put the
        # explanation first, where the summary line and JUnit's message look.
        crash = getattr(longrepr, "reprcrash", None)
        add_section = getattr(longrepr, "addsection", None)
        if crash is not None and add_section is not None:
            add_section("cassette", text)
            crash.message = f"{text}\n{crash.message}"
            return
        report.longrepr = cast("TerminalRepr", _Explanation(f"{text}\n\n{longrepr}"))
        return
    report.outcome = "failed"
    report.longrepr = cast("TerminalRepr", _Explanation(text))
