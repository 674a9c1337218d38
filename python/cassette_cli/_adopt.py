"""Adopt mode of the pytest plugin: what only pytest knows. The binary does the rest: the
plugin's `cassette proxy --adopt` reads each test's vcrpy tapes (the reader `cassette import`
uses), answers what it forwards from them as vcrpy's `match_on` matches, stores the answers as
cassettes through its one write path and redaction, and tells what each test's tapes answered
and how their requests drifted from today's (the test's tally, `adopt`). This module names a
test's tapes the way pytest-recording finds them (its layout or the suite's `vcr_cassette_dir`,
the `default_cassette` and `vcr` markers, `vcr_config`'s `match_on`), writes the adopt report
and prints its summary. It reads no tape: PyYAML is not needed.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

# vcrpy's default `match_on`.
DEFAULT_MATCH_ON = ("method", "scheme", "host", "port", "path", "query")


def default_cassette_name(cls: type | None, name: str) -> str:
    """pytest-recording's default tape name of a test."""
    full = f"{cls.__name__}.{name}" if cls is not None else name
    for ch in r"<>?%*:|\"'/\\":
        full = full.replace(ch, "-")
    return full


def _shown(path: Path, root: Path) -> str:
    """A tape's path as the proxy (started in the rootdir) opens it and the report names it:
    relative to the rootdir when it is inside it."""
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path.resolve())


def tapes_of(request: pytest.FixtureRequest) -> dict[str, list[str]]:
    """The `tapes` and `match_on` of the running test, for its scope's begin."""

    def fixture(name: str) -> object:
        try:
            return request.getfixturevalue(name)
        except pytest.FixtureLookupError:
            return None

    directory = fixture("vcr_cassette_dir")
    if directory is None:
        path = Path(str(request.node.path))
        directory = str(path.parent / "cassettes" / path.stem)
    named = request.node.get_closest_marker("default_cassette")
    default = str(named.args[0]) if named is not None and named.args else None
    name = default or default_cassette_name(request.cls, request.node.name)
    # pytest-recording adds `.yaml`; its extra tapes are taken as written, relative to the
    # tape directory.
    paths = [Path(str(directory)) / (name if name.endswith(".yaml") else f"{name}.yaml")]
    paths += [
        Path(str(directory)) / str(arg)
        for marker in request.node.iter_markers("vcr")
        for arg in marker.args
    ]
    marker = request.node.get_closest_marker("vcr")
    vcr_config = fixture("vcr_config")
    match_on: tuple[str, ...] = DEFAULT_MATCH_ON
    if isinstance(vcr_config, dict) and vcr_config.get("match_on"):
        match_on = tuple(str(m) for m in vcr_config["match_on"])
    if marker is not None and marker.kwargs.get("match_on"):
        match_on = tuple(str(m) for m in marker.kwargs["match_on"])
    root = request.config.rootpath
    return {"tapes": [_shown(p, root) for p in paths], "match_on": list(match_on)}


def refused(tally: dict[str, Any]) -> list[str]:
    """The bypasses of a test's tally the proxy refused, for the report."""
    return [
        f"{b.get('requests', 0)} request(s) to {b.get('host')} bypassed the base URL and were "
        "refused"
        for b in tally.get("bypassed") or []
        if b.get("refused")
    ]


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Written atomically: a temporary file beside it, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=2, sort_keys=True)
            out.write("\n")
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def summary(adopted: dict[str, dict[str, Any]], report: Path | None) -> list[str]:
    """The terminal summary of an adopt run: a line of counts, then per test what drifted or
    went unanswered (indented)."""
    answered = sum(len(r.get("adopted") or ()) for r in adopted.values())
    drifted = [n for n, r in adopted.items() if any(a["drift"] for a in r.get("adopted") or ())]
    unstored = sum(len(r.get("not_stored") or ()) for r in adopted.values())
    lines = [
        f"cassette adopt: {answered} answers from vcrpy tapes in {len(adopted)} tests, "
        f"{unstored} not stored, {len(drifted)} tests whose tapes drifted from today's requests"
        + (f"; report in {report}" if report else "")
    ]
    for nodeid, result in adopted.items():
        notes = [
            f"interaction {a['interaction']} of {a['tape']} ({a['request']}): {line}"
            for a in result.get("adopted") or ()
            for line in a["drift"]
        ]
        notes += [
            f"not answered: {why}"
            for why in (result.get("unmatched") or []) + (result.get("refused") or [])
        ]
        notes += [f"not read: {why}" for why in result.get("skipped") or ()]
        if result.get("from_cassettes"):
            notes.append(
                f"{result['from_cassettes']} request(s) answered by a cassette already stored, "
                "not by this test's tape (another test's recording of the same request?)"
            )
        if result.get("not_stored"):
            notes.append(
                f"{len(result['not_stored'])} answer(s) from the tape were not stored as "
                "cassettes (an error answer, or a stream ending in an error event, is never "
                "recorded live): replay will miss them; `cassette import` this tape, or keep the "
                "test on vcrpy"
            )
            notes += [f"  the recording of {why}" for why in result["not_stored"]]
        if result.get("matchers_not_applied"):
            notes.append("match_on not applied: " + ", ".join(result["matchers_not_applied"]))
        if notes:
            lines.append(f"  {nodeid}:")
            lines += [f"    {note}" for note in notes]
    return lines
