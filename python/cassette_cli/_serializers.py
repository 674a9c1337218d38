"""Adopt: a suite's own vcrpy settings, as pytest-recording would hand them to vcrpy. The hook
`pytest_recording_configure(config, vcr)` is called with a stand-in `VCR` that keeps what it
registers; a tape written by a serializer the suite registered (or loaded by its persister) is
deserialized here with that serializer, and its document (vcrpy's dict shape: `interactions`
of `request` and `response`) is handed to the proxy, which reads it with the reader every
tape goes through. `vcr_config`'s `filter_headers` and `filter_query_parameters` are handed to
the proxy too, which applies them to today's request before matching, as vcrpy does. What is
not honoured is named, with what it costs.
"""

from __future__ import annotations

import base64
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

from cassette_cli._recording import Registrations

# vcrpy's own serializers: their tapes are YAML or JSON text, which the proxy reads itself.
BUILT_IN = ("yaml", "json")
# What the proxy is handed for bytes (JSON has none): read as YAML's `!!binary`.
BINARY = "!!binary"


def plain(value: object) -> object:
    """A deserialized tape as JSON can carry it: bytes as `{"!!binary": base64}`."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {BINARY: base64.b64encode(bytes(value)).decode()}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def filters(merged: dict[str, Any], notes: list[str]) -> dict[str, list[list[str | None]]]:
    """`filter_headers` and `filter_query_parameters` as `[name, replacement or None]` pairs
    (a replacement made by a function is not applied here, and named: the judge of
    `_suite_matchers.py`, where there is one, applies it)."""
    out: dict[str, list[list[str | None]]] = {}
    for option, kind in (("filter_headers", "headers"), ("filter_query_parameters", "query")):
        pairs: list[list[str | None]] = []
        for entry in merged.get(option) or ():
            name, replacement = (entry[0], entry[1]) if isinstance(entry, tuple) else (entry, None)
            if replacement is not None and not isinstance(replacement, str):
                notes.append(
                    f"{option} {name!r}: its replacement is a function, not applied to today's "
                    "request: a tape matched on it may not answer"
                )
                continue
            pairs.append([str(name), replacement])
        if pairs:
            out[kind] = pairs
    if merged.get("filter_post_data_parameters"):
        notes.append(
            "filter_post_data_parameters is not applied to today's request: the body matcher "
            "compares the body as sent with the tape's filtered one"
        )
    if callable(merged.get("before_record_request") or merged.get("before_record")):
        notes.append(
            "before_record_request is not applied to today's request (it is the suite's code; "
            "routes already send the vendor's URL): a tape matched only after its rewrite of "
            "a body or header may not answer"
        )
    return out


def registrations(config: pytest.Config, merged: dict[str, Any], directory: str) -> Registrations:
    """What the suite's `pytest_recording_configure` registers on vcrpy's `VCR`."""
    vcr = Registrations(str(merged.get("record_mode") or "none"), directory)
    hook = getattr(config.hook, "pytest_recording_configure", None)
    if hook is not None:
        hook(config=config, vcr=vcr)
    return vcr


def _builtin(name: str) -> ModuleType:
    """vcrpy's own serializer module of that name (vcrpy is installed where a persister is)."""
    import importlib

    return importlib.import_module(f"vcr.serializers.{name}serializer")


def documents(
    vcr: Registrations,
    merged: dict[str, Any],
    paths: list[Path],
    shown: list[str],
    notes: list[str],
) -> dict[str, Any]:
    """The documents of the tapes only the suite's serializer or persister reads (as it
    returns them), by the name the proxy knows each tape by; a string where one could not be
    read (why)."""
    name = str(merged.get("serializer") or "yaml")
    serializer = vcr.serializers.get(name)
    if serializer is None and vcr.persister is None:
        if name not in BUILT_IN:
            notes.append(f"serializer {name!r} is not registered: its tapes are read as YAML")
        return {}
    out: dict[str, Any] = {}
    for path, known_as in zip(paths, shown):
        try:
            document = _load(vcr, serializer or _builtin(name), path)
        except Exception as error:  # the suite's serializer: its error names the tape
            out[known_as] = f"the suite's serializer {name!r} cannot read it: {error!r}"
            continue
        if document is not None:
            out[known_as] = document
    return out


def _load(vcr: Registrations, serializer: object, path: Path) -> dict[str, Any] | None:
    """A tape's document as vcrpy's serializer returns it, through the suite's persister when
    it registered one; None when there is no such tape."""
    if vcr.persister is not None:
        try:
            persister = cast("Any", vcr.persister)
            requests, responses = persister.load_cassette(str(path), serializer=serializer)
        except (ValueError, OSError) as error:  # vcrpy's CassetteNotFoundError is a ValueError
            if type(error).__name__ == "CassetteNotFoundError" or isinstance(error, OSError):
                return None
            raise
        return {
            "interactions": [
                {"request": _request_dict(r), "response": s} for r, s in zip(requests, responses)
            ]
        }
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    document: dict[str, Any] = cast("Any", serializer).deserialize(text)
    return document


def _request_dict(request: object) -> dict[str, Any]:
    to_dict = getattr(request, "_to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    return dict(cast("Any", request))
