"""The test a request belongs to, wherever in the test process it is sent from: the pytest plugin
names the running test's alias here, and the in-process transports (`_intercept.py`) send it
with every request (`x-cassette-scope`), so that a request a test's background thread or task
sends after the test ended is charged to that test (a late request), never to the test running
then.

The alias lives in a `contextvars.ContextVar`: asyncio tasks copy their creator's context by
themselves. Threads do not (before Python 3.14), so while the plugin is active a thread started
with `threading.Thread.start` runs in a copy of its starter's context, and a
`concurrent.futures.ThreadPoolExecutor` task in a copy of its submitter's (a pool's worker is
started by whichever test submitted first, and then serves every test after it).

In adopt a test may also have a judge (`_suite_matchers.py`): the suite's own vcrpy matchers,
which only the test process can run, naming with each request the tape interactions that match
it (`x-cassette-adopt-allow`).
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import concurrent.futures

SCOPE_HEADER = "x-cassette-scope"
ALLOW_HEADER = "x-cassette-adopt-allow"
# A judge takes a request (method, URL, headers, body) and names the interactions that match
# it, or None where it has no verdict.
Judge = Callable[[str, str, Mapping[str, str], bytes], "str | None"]

_ALIAS: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "cassette_test_alias", default=None
)
_UNDO: list[Callable[[], None]] = []
_JUDGES: dict[str, Judge] = {}
# Aliases are unique in the process, so across the sessions of pytester's runs in process too.
_NUMBERS = itertools.count(1)


def next_alias() -> str:
    """A new test's alias: a scope id no other test of this process has."""
    return f"t{next(_NUMBERS)}"


def alias() -> str | None:
    """The alias of the test this code runs for, if any."""
    return _ALIAS.get()


def headers(
    method: str | None = None,
    url: object = None,
    sent: Mapping[str, str] | None = None,
    body: bytes | None = None,
) -> dict[str, str]:
    """What a transport adds to a request: the scope header, when a test is known, and the
    test's judge's verdict on the request, when the transport can give it the whole request
    (method, URL, headers and body as bytes)."""
    named = _ALIAS.get()
    if named is None:
        return {}
    out = {SCOPE_HEADER: named}
    judge = _JUDGES.get(named)
    if judge is not None and method is not None and url is not None and body is not None:
        allowed = judge(method, str(url), sent or {}, body)
        if allowed is not None:
            out[ALLOW_HEADER] = allowed
    return out


def judged() -> bool:
    """Whether the test this code runs for has a judge: a transport works out a request's whole
    body for it only then."""
    named = _ALIAS.get()
    return named is not None and named in _JUDGES


def judge(named: str, judging: Judge | None) -> None:
    """Gives the test `named` its judge (None: takes it away)."""
    if judging is None:
        _JUDGES.pop(named, None)
    else:
        _JUDGES[named] = judging


def enter(named: str | None) -> None:
    """Names the test now running in this context (None: no test)."""
    _ALIAS.set(named)


def install() -> None:
    """Has threads and thread-pool tasks inherit the test of the code that starts them;
    idempotent."""
    # Here, not at the top: the `.pth` file imports this module in every Python process.
    import concurrent.futures

    if _UNDO:
        return
    start = threading.Thread.start
    submit = concurrent.futures.ThreadPoolExecutor.submit

    def starting(self: threading.Thread) -> None:
        if _ALIAS.get() is not None:
            context = contextvars.copy_context()
            run = self.run
            # An instance attribute: `_bootstrap_inner` calls `self.run()`.
            self.run = lambda: context.run(run)  # type: ignore[method-assign]
        start(self)

    def submitting(
        self: concurrent.futures.ThreadPoolExecutor,
        fn: Callable[..., object],
        /,
        *args: object,
        **kwargs: object,
    ) -> concurrent.futures.Future[object]:
        context = contextvars.copy_context()

        def run() -> object:
            return context.run(fn, *args, **kwargs)

        return submit(self, run)

    threading.Thread.start = starting  # type: ignore[method-assign]
    concurrent.futures.ThreadPoolExecutor.submit = submitting  # type: ignore[method-assign,assignment]

    def undo() -> None:
        threading.Thread.start = start  # type: ignore[method-assign]
        concurrent.futures.ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]

    _UNDO.append(undo)


def uninstall() -> None:
    """Puts `Thread.start` and `ThreadPoolExecutor.submit` back, and forgets the test."""
    while _UNDO:
        _UNDO.pop()()
    _ALIAS.set(None)
    _JUDGES.clear()
