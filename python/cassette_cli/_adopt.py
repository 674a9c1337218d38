"""Adopt mode of the pytest plugin: what only pytest knows. The binary does the rest: the
plugin's `cassette proxy --adopt` reads each test's vcrpy tapes (the reader `cassette import`
uses), answers what it forwards from them as vcrpy's `match_on` matches, stores the answers as
cassettes through its one write path and redaction, and tells what each test's tapes answered
and how their requests drifted from today's (the test's tally, `adopt`). This module names a
test's tapes the way pytest-recording finds them (its layout or the suite's `vcr_cassette_dir`,
the `default_cassette` and `vcr` markers, `vcr_config`'s `match_on`, what the suite's
`pytest_recording_configure` sets on vcrpy), writes the adopt report and prints its summary.
It reads no tape unless the suite's own code must (its serializer, persister or matchers;
`_serializers.py`, `_suite_matchers.py`): PyYAML is not needed otherwise.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from cassette_cli._recording import Registrations
    from cassette_cli._test_context import Judge

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


def _merged(request: pytest.FixtureRequest, fixture: Callable[[str], object]) -> dict[str, Any]:
    """`vcr_config` with the `vcr` markers' keywords over it, the closest marker last, as
    pytest-recording merges them."""
    vcr_config = fixture("vcr_config")
    merged = dict(vcr_config) if isinstance(vcr_config, dict) else {}
    for marker in reversed(list(request.node.iter_markers("vcr"))):
        merged.update(marker.kwargs)
    return merged


def _tape_path(directory: str, name: str, merged: dict[str, Any]) -> Path:
    """Where vcrpy opens a test's tape: its `path_transformer` over `cassette_library_dir`
    and the name, else the name with the serializer's suffix (`.yaml`)."""
    folder = str(merged.get("cassette_library_dir") or directory)
    joined = os.path.join(folder, name)
    transform = merged.get("path_transformer")
    if callable(transform):
        return Path(str(transform(joined)))
    suffix = f".{merged.get('serializer') or 'yaml'}"
    return Path(joined if joined.endswith(suffix) else joined + suffix)


def tapes_of(request: pytest.FixtureRequest) -> tuple[dict[str, Any], list[str], Judge | None]:
    """The running test's scope begin (`tapes`, `match_on`, `filters`, the documents of tapes
    only the suite's serializer or persister reads, and whether a judge names what matches),
    what of the suite's vcrpy settings is not honoured, with what it costs, for the report,
    and the test's judge (`_suite_matchers.py`) where its settings need one."""

    def fixture(name: str) -> object:
        try:
            return request.getfixturevalue(name)
        except pytest.FixtureLookupError:
            return None

    from cassette_cli._recording import cassette_dir

    directory = str(fixture("vcr_cassette_dir") or cassette_dir(str(request.node.path)))
    name = fixture("default_cassette_name")
    if not isinstance(name, str):
        named = request.node.get_closest_marker("default_cassette")
        name = str(named.args[0]) if named is not None and named.args else None
        name = name or default_cassette_name(request.cls, request.node.name)
    merged = _merged(request, fixture)
    # pytest-recording's extra tapes are taken as written, relative to the tape directory.
    paths = [_tape_path(directory, name, merged)]
    markers = request.node.iter_markers("vcr")
    paths += [Path(directory) / str(arg) for marker in markers for arg in marker.args]
    from cassette_cli import _serializers, _suite_matchers

    notes: list[str] = []
    vcr: Registrations | None = None
    try:
        vcr = _serializers.registrations(request.config, merged, directory)
    except Exception as error:  # the suite's code: whatever it raises is named, not fatal
        notes.append(f"pytest_recording_configure failed ({error!r}): tapes read as YAML")
    # What the hook set on vcrpy's `VCR` is the default that `vcr_config` overrides, as
    # `VCR.use_cassette` merges them; the tapes' paths are pytest-recording's, from `merged`.
    settings = {**(vcr.defaults() if vcr is not None else {}), **merged}
    match_on = tuple(str(m) for m in settings.get("match_on") or DEFAULT_MATCH_ON)
    root = request.config.rootpath
    shown = [_shown(p, root) for p in paths]
    begin: dict[str, Any] = {"tapes": shown, "match_on": list(match_on)}
    # What the proxy cannot apply is named, unless a judge applies it in the test process.
    unapplied: list[str] = []
    filters = _serializers.filters(settings, unapplied)
    if filters:
        begin["filters"] = filters
    documents = _serializers.documents(vcr, settings, paths, shown, notes) if vcr else {}
    if documents:
        begin["documents"] = {
            k: _serializers.plain(v) if isinstance(v, dict) else v for k, v in documents.items()
        }
    tapes = [(p, documents.get(known_as)) for p, known_as in zip(paths, shown)]
    if settings.get("allow_playback_repeats"):
        # Repeats are the recorder's setting, one for the run: named, since sequence mode asks
        # the tape anew for each repeat, which vcrpy's option answers from one interaction.
        notes.append(
            'allow_playback_repeats is not applied: with repeats = "same" (the default) every '
            "repeat of a request is answered by its one recording as vcrpy would; with "
            'repeats = "sequence" each repeat needs an interaction of its own'
        )
    judge = _suite_matchers.judge(vcr, settings, match_on, tapes, notes)
    if judge is not None:
        begin["judged"] = True
    else:
        # No judge: nothing of the suite's own to apply, or (named by `judge`) none can be made.
        notes += unapplied
    return begin, notes, judge


def refused(tally: dict[str, Any]) -> list[str]:
    """The bypasses of a test's tally the proxy refused, for the report."""
    return [
        f"{b.get('requests', 0)} request(s) to {b.get('host')} bypassed the base URL and were "
        "refused"
        for b in tally.get("bypassed") or []
        if b.get("refused")
    ]


def outcome(report: pytest.TestReport) -> dict[str, str]:
    """How a test that did not pass ended, for the report: cassette's own failure where cassette
    failed it (its text is the proxy's, redacted), else the exception's type and where it was
    raised (its message may hold any value the test had: it stays in pytest's output, off the
    disk), or a skip's reason."""
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
        return {"outcome": "skipped", "reason": str(reason)[:300]}
    ended = "failed" if report.when == "call" else f"error in {report.when}"
    missed = getattr(report, "cassette_cli_missed", None)
    if missed:
        return {"outcome": ended, "reason": str(missed)}
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is None:
        return {"outcome": ended, "reason": "see pytest's output"}
    kind = str(crash.message).split(":", 1)[0].strip()
    if not kind.replace(".", "").replace("_", "").isalnum():
        kind = "AssertionError" if str(crash.message).startswith("assert") else "an exception"
    try:
        where = os.path.relpath(crash.path)
    except ValueError:  # another drive
        where = str(crash.path)
    return {"outcome": ended, "reason": f"{kind} at {where}:{crash.lineno}"}


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


def made_afresh(result: dict[str, Any]) -> list[str]:
    """The `[keying] ignore` paths of what a test's requests hold that the client makes afresh
    on every run (ids, as the proxy judged the drift): adopt answered it from the tape, and the
    replay after it misses until the key leaves them out."""
    paths = {p for a in result.get("adopted") or () for p in a.get("made_afresh") or ()}
    return sorted(paths)


def _tests(count: int) -> str:
    return "1 test" if count == 1 else f"{count} tests"


def _header_drift(line: str) -> bool:
    """Whether a drift line is of a header (`headers.anthropic-version: added ...`)."""
    return line.startswith("headers.")


def summary(adopted: dict[str, dict[str, Any]], report: Path | None) -> list[str]:
    """The terminal summary of an adopt run: a line of counts, then per test what drifted or
    went unanswered (indented)."""
    answered = sum(len(r.get("adopted") or ()) for r in adopted.values())

    def drift(result: dict[str, Any], headers: bool) -> list[str]:
        # Header drift is most often a serializer that stripped headers, not the code moving
        # on: counted apart, and listed in the report only.
        lines = [line for a in result.get("adopted") or () for line in a["drift"]]
        return [line for line in lines if _header_drift(line) == headers]

    drifted = [n for n, r in adopted.items() if drift(r, headers=False)]
    headers_only = [n for n, r in adopted.items() if drift(r, headers=True) and n not in drifted]
    unstored = sum(len(r.get("not_stored") or ()) for r in adopted.values())
    downloads = [url for r in adopted.values() for url in r.get("downloads") or ()]
    unpassed = [n for n, r in adopted.items() if r.get("outcome", "passed") != "passed"]
    hosts = sorted({urlsplit(url).netloc for url in downloads})
    lines = [
        f"cassette adopt: {answered} answers from vcrpy tapes in {len(adopted)} tests, "
        f"{unstored} not stored, {len(drifted)} tests whose tapes drifted from today's requests"
        + (f", {len(headers_only)} in headers only" if headers_only else "")
        + (
            f", {len(downloads)} download(s) stored as recordings of {', '.join(hosts)} "
            "(served on replay)"
            if downloads
            else ""
        )
        + (
            f", {_tests(len(unpassed))} did not pass (each named in the report, with its reason)"
            if unpassed
            else ""
        )
        + (f"; report in {report}" if report else "")
    ]
    afresh = {n: made_afresh(r) for n, r in adopted.items() if made_afresh(r)}
    if afresh:
        paths = sorted({p for ps in afresh.values() for p in ps})
        lines += [
            f"  {_tests(len(afresh))} {'sends' if len(afresh) == 1 else 'send'} values made afresh "
            "on every run (ids): the replay after "
            "this run misses them until the key leaves them out. In cassette.toml:",
            "    [keying]",
            f"    ignore = [{', '.join(json.dumps(p) for p in paths)}]",
            "  then `cassette rekey` moves what this run stored to the new keys.",
        ]
    # The suite's vcrpy settings not honoured: the same for most tests, so named once each.
    honoured: dict[str, int] = {}
    for result in adopted.values():
        for why in result.get("not_honoured") or ():
            honoured[why] = honoured.get(why, 0) + 1
    lines += [f"  not honoured ({n} tests): {why}" for why, n in honoured.items()]
    for nodeid, result in adopted.items():
        notes = [
            f"interaction {a['interaction']} of {a['tape']} ({a['request']}): {line}"
            for a in result.get("adopted") or ()
            for line in a["drift"]
            if not _header_drift(line)
        ]
        notes += [
            f"replay will miss: {path} is made afresh on every run ([keying] ignore it)"
            for path in afresh.get(nodeid, ())
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
            notes.append(
                "match_on not applied: "
                + ", ".join(result["matchers_not_applied"])
                + " (matched on the others: an interaction it would have refused may answer)"
            )
        if notes:
            lines.append(f"  {nodeid}:")
            lines += [f"    {note}" for note in notes]
    return lines
