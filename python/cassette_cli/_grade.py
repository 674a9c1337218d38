"""One `cassette grade --jsonl` process per test session, asked one JSON line per expectation.

The binary does the grading (the suite runner's own graders, and the judge recorded and
replayed through its recorder); this module only keeps the process and its pipes. The process
is started on the first expectation with the environment of that moment (`CASSETTE_MODE`,
`CASSETTE_STORE`, `CASSETTE_JUDGE_MODEL`, ... as under `cassette exec`), answers in order, and
ends when its stdin closes: at interpreter exit, or `close()`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cassette_cli._find_cassette import find_cassette_bin

JsonObject = dict[str, Any]


class GradeError(RuntimeError):
    """The grade process could not grade: a bad expectation, no judge model, a dead process."""


class GradeSession:
    """A `cassette grade --jsonl` process, started on first use and reused for every grade."""

    def __init__(
        self,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        binary: str | None = None,
    ) -> None:
        self._args = list(args)
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._binary = binary
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def grade(self, request: Mapping[str, Any]) -> JsonObject:
        """Sends one grade request and returns its answer."""
        line = json.dumps(request, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(line + "\n")
                process.stdin.flush()
                answer = process.stdout.readline()
            except (BrokenPipeError, OSError) as error:
                raise self._died() from error
            if not answer:
                raise self._died()
        parsed: JsonObject = json.loads(answer)
        return parsed

    def close(self) -> None:
        """Ends the process (it exits when its stdin closes) and waits for it."""
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def _started(self) -> subprocess.Popen[str]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        binary = self._binary or find_cassette_bin()
        self._process = subprocess.Popen(
            [binary, "grade", "--jsonl", *self._args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Warnings and the index notice reach the test's own stderr.
            stderr=None,
            env=self._env if self._env is not None else dict(os.environ),
            cwd=self._cwd,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        return self._process

    def _died(self) -> GradeError:
        process, self._process = self._process, None
        status = None if process is None else process.wait()
        return GradeError(
            f"the cassette grade process ended (exit status {status}) before it answered; "
            "its error is on stderr above"
        )


_default: GradeSession | None = None
_default_lock = threading.Lock()


def default_session() -> GradeSession:
    """The session `expect()` and `tool_calls()` use unless given one: started once per process."""
    global _default
    with _default_lock:
        if _default is None:
            _default = GradeSession()
            atexit.register(_default.close)
        return _default


def set_default_session(session: GradeSession | None) -> GradeSession | None:
    """Replaces the default session (a test runner plugin configures its own); returns the old
    one."""
    global _default
    with _default_lock:
        old, _default = _default, session
        if session is not None:
            atexit.register(session.close)
        return old


MissListener = Callable[[JsonObject], None]
_miss_listeners: list[MissListener] = []


def on_miss(listener: MissListener) -> Callable[[], None]:
    """Calls `listener` with every judge miss's answer before the miss is raised, so a test
    runner plugin can attribute it to the running test as it does the proxy's misses. Returns a
    function that removes the listener."""
    _miss_listeners.append(listener)

    def remove() -> None:
        if listener in _miss_listeners:
            _miss_listeners.remove(listener)

    return remove


def notify_miss(answer: JsonObject) -> None:
    for listener in list(_miss_listeners):
        listener(answer)
