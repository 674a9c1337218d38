"""Adopt: a suite's own vcrpy matching, run where the suite's code runs. Matchers it registered
(`register_matcher`), its `before_record_request` and filters made by functions are Python,
which the proxy cannot run; for a test whose settings have any, the judge built here is handed
each request the test process sends in process (`_test_context.headers`), rewrites it as vcrpy
would (`before_record_request` and the filters), and names the interactions of the test's
tapes that vcrpy, set up as the suite sets it up, finds alike: `TAPE:NUMBER`, the tape its
place among the test's tapes from 0, the interaction its place on the tape from 1, as the proxy
numbers them. The proxy answers the first unplayed of those, and matches a request the judge
never saw (another process's) itself, naming what it could not apply.

Only such suites need vcrpy here, and they have it (their hook or `vcr_config` imports it).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cassette_cli._recording import Registrations
    from cassette_cli._test_context import Judge

# vcrpy's own matchers, which the proxy applies itself (unless the suite registered its own
# function under one of these names).
BUILT_IN = frozenset(
    (
        "method",
        "uri",
        "url",
        "scheme",
        "host",
        "port",
        "path",
        "query",
        "headers",
        "raw_body",
        "body",
    )
)


def _rewrites(settings: dict[str, Any]) -> bool:
    """Whether vcrpy rewrites a request before matching in a way only the suite's code (or
    vcrpy itself) can: `before_record_request`, or filters the proxy does not apply."""
    if callable(settings.get("before_record_request") or settings.get("before_record")):
        return True
    if settings.get("filter_post_data_parameters"):
        return True
    return any(
        isinstance(entry, tuple) and len(entry) > 1 and callable(entry[1])
        for option in ("filter_headers", "filter_query_parameters")
        for entry in settings.get(option) or ()
    )


def own_matchers(vcr: Registrations | None, match_on: tuple[str, ...]) -> list[str]:
    """The names of `match_on` whose matcher is the suite's own: registered by it, or not
    vcrpy's."""
    registered = vcr.matchers if vcr is not None else {}
    return [name for name in match_on if name in registered or name not in BUILT_IN]


def judge(
    vcr: Registrations | None,
    settings: dict[str, Any],
    match_on: tuple[str, ...],
    tapes: list[tuple[Path, Any]],
    notes: list[str],
) -> Judge | None:
    """The judge of a test whose vcrpy settings need one (`tapes`: each tape's path and the
    document the suite's serializer read from it, None where the file is read here), or None:
    nothing to judge, or it cannot be (why is added to `notes`)."""
    own = own_matchers(vcr, match_on)
    if not own and not _rewrites(settings):
        return None
    what = f"matcher(s) {', '.join(own)}" if own else "before_record_request and filters"
    try:
        # vcrpy has no type information: its modules are taken as they come.
        vcrpy: Any = importlib.import_module("vcr")
        requests_match = importlib.import_module("vcr.matchers").requests_match
        Request = importlib.import_module("vcr.request").Request
        deserialize = importlib.import_module("vcr.serialize").deserialize
    except ImportError:
        notes.append(
            f"the suite's {what} not applied: vcrpy is not installed, so its tapes are matched "
            "on the other matchers of match_on (an interaction it would have refused may answer)"
        )
        return None
    real: Any = vcrpy.VCR()
    if vcr is not None:
        for name, matcher in vcr.matchers.items():
            real.register_matcher(name, matcher)
        for name, serializer in vcr.serializers.items():
            real.register_serializer(name, serializer)
    try:
        matchers = real._get_matchers(match_on)
        before = real._build_before_record_request(settings)
        serializer = real._get_serializer(str(settings.get("serializer") or "yaml"))
    except KeyError as error:
        notes.append(f"the suite's {what} not applied: {error}")
        return None
    recorded: list[list[Any]] = []
    for path, document in tapes:
        try:
            if isinstance(document, dict):
                interactions = document.get("interactions") or ()
                recorded.append([Request._from_dict(i["request"]) for i in interactions])
            elif document is not None:
                recorded.append([])  # the suite's serializer could not read it: named already
            elif path.is_file():
                requests, _ = deserialize(path.read_text(encoding="utf-8"), serializer)
                recorded.append(list(requests))
            else:
                recorded.append([])
        except Exception as error:  # a tape vcrpy cannot read either
            # The error's type only: a parser's message quotes the tape, which may hold a secret.
            notes.append(
                f"the suite's {what} not applied: vcrpy cannot read {path} "
                f"({type(error).__name__}), so its tapes are matched on the other matchers of "
                "match_on"
            )
            return None

    def judging(method: str, url: str, headers: Mapping[str, str], body: bytes) -> str | None:
        # vcrpy's own steps for a request it plays (`Cassette.play_response`): rewritten as it
        # was before recording, then every matcher of match_on against each interaction. What
        # the suite's code raises reaches the test, as under vcrpy.
        today = before(Request(method, url, body, dict(headers)))
        if today is None:
            return None  # vcrpy would not play it (an ignored host): the proxy decides
        return ",".join(
            f"{tape}:{number}"
            for tape, requests in enumerate(recorded)
            for number, stored in enumerate(requests, 1)
            if requests_match(today, stored, matchers)
        )

    return cast("Judge", judging)
