"""A `cassette proxy` child process for a test runner: started with `--ready json --control`,
read once it prints its ready line, asked about its test scopes over a keep-alive connection,
stopped with SIGTERM.

On POSIX it is also started with `--control-pipe`: a test's scope begins and ends with one line
written on the proxy's stdin, and the proxy writes a line on its stdout when a scope sees a
miss, an error or a refused bypass, so a test that went well costs two writes and one read that
finds nothing, not three round trips to the control endpoint. And with `--runner-pid` naming
this process, pipe or no pipe: a runner killed with SIGKILL leaves no proxy behind, even while
a child a test forked still holds the pipe's end.

The binary does the work (keys, replay, misses and their explanation, counts per test); this
module only starts it, reads its one JSON line and speaks to its control endpoint.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import IO, Any
from urllib.parse import urlsplit

from cassette_cli._find_cassette import find_cassette_bin

# How long the proxy may take to print its ready line (a cold disk, a large index to load).
READY_TIMEOUT = 30.0
# How long it may take to finish requests in flight and flush its index once asked to stop.
STOP_TIMEOUT = 30.0


class ProxyError(RuntimeError):
    """The proxy could not be started, or its control endpoint did not answer."""


class Proxy:
    """A running `cassette proxy --ready json --control` child."""

    def __init__(self, args: list[str], cwd: str, *, pipe: bool = True) -> None:
        binary = find_cassette_bin()
        pipe = pipe and sys.platform != "win32"
        # Its stderr goes to a file, never a pipe nobody reads: a chatty proxy (every miss is
        # logged there) must not block on a full pipe, and the text is there if it fails.
        self._log: IO[bytes] = tempfile.TemporaryFile(prefix="cassette-proxy-")  # noqa: SIM115 (closed with the proxy)
        command = [
            binary,
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--ready",
            "json",
            "--control",
            # Only this run's clients may send requests upstream through it: the base URLs of
            # the ready line carry the secret, another program of the machine lacks it.
            "--run-secret",
            *(["--control-pipe"] if pipe else []),
            *([] if sys.platform == "win32" else ["--runner-pid", str(os.getpid())]),
            *args,
        ]
        try:
            self.process = subprocess.Popen(
                command,
                cwd=cwd,
                stdin=subprocess.PIPE if pipe else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._log,
            )
        except OSError as error:
            raise ProxyError(f"cannot start {binary}: {error}") from error
        self.ready: dict[str, Any] = self._read_ready(command)
        self.url: str = self.ready["url"]
        # What every base URL begins with: the URL and the run secret's path. Never printed.
        self.base: str = self.ready.get("base", self.url)
        control = self.ready.get("control") or {}
        self._token: str = control.get("token", "")
        self._scopes_path: str = urlsplit(control.get("scopes", "")).path
        self.prefix: str = control.get("prefix", f"{self.url}/_scope")
        # The pipe's ends, when the proxy says it reads one.
        self.piped: bool = bool(control.get("pipe")) and self.process.stdin is not None
        # What the pipe said: tests that ended without a request, and a line not read whole yet.
        self.idle: list[str] = []
        self._unread = b""
        if self.piped:
            assert self.process.stdin is not None and self.process.stdout is not None
            self._pipe_in = self.process.stdin.fileno()
            self._pipe_out = self.process.stdout.fileno()
            os.set_blocking(self._pipe_out, False)
        address = urlsplit(self.url)
        self._host, self._port = address.hostname or "127.0.0.1", address.port or 80
        self._connection: http.client.HTTPConnection | None = None

    def _read_ready(self, command: list[str]) -> dict[str, Any]:
        stdout = self.process.stdout
        assert stdout is not None
        line = b""
        if sys.platform != "win32":
            import selectors

            with selectors.DefaultSelector() as selector:
                selector.register(stdout, selectors.EVENT_READ)
                if not selector.select(READY_TIMEOUT):
                    self.kill()
                    raise ProxyError(
                        f"cassette proxy printed no ready line in {READY_TIMEOUT:.0f} s\n"
                        + self.log_text()
                    )
        line = stdout.readline()
        if not line:
            self.process.wait(timeout=STOP_TIMEOUT)
            raise ProxyError(
                f"`{' '.join(command)}` exited with status {self.process.returncode} before it "
                f"was ready:\n{self.log_text()}"
            )
        try:
            ready: dict[str, Any] = json.loads(line)
        except ValueError as error:
            self.kill()
            raise ProxyError(
                f"cassette proxy's ready line is not JSON ({error}): {line!r}"
            ) from error
        return ready

    def log_text(self) -> str:
        """What the proxy wrote on stderr so far."""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace").strip()

    def env_changes(self) -> tuple[dict[str, str], list[str]]:
        """The variables a test process needs (what `cassette exec` sets), and those to remove."""
        return dict(self.ready.get("env") or {}), list(self.ready.get("unset") or [])

    def scoped_env(self, scope: str) -> dict[str, str]:
        """The variables with every base URL naming scope `scope` (`<base>/_scope/ID/...`); the
        proxy variables stay as they are (a forward proxy is addressed by host, not by path)."""
        env, _ = self.env_changes()
        own = self.base + "/"
        scoped = f"{self.prefix}/{scope}/"
        return {
            name: scoped + value[len(own) :] if value.startswith(own) else value
            for name, value in env.items()
        }

    def control(
        self, method: str, scope: str, body: dict[str, Any] | None = None, query: str = ""
    ) -> dict[str, Any]:
        """One request to the control endpoint; its JSON answer."""
        path = self._scopes_path + (f"/{scope}" if scope else "") + (f"?{query}" if query else "")
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"x-cassette-control": self._token, "content-type": "application/json"}
        for attempt in (1, 2):
            connection = self._connection
            if connection is None:
                connection = http.client.HTTPConnection(
                    self._host, self._port, timeout=STOP_TIMEOUT
                )
                self._connection = connection
            try:
                connection.request(method, path, body=payload, headers=headers)
                response = connection.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as error:
                # A keep-alive connection the proxy closed meanwhile: once more on a new one.
                connection.close()
                self._connection = None
                if attempt == 2 or self.process.poll() is not None:
                    raise ProxyError(
                        f"the cassette proxy at {self.url} did not answer {method} {path}: "
                        f"{error}\n"
                        f"{self.log_text()}"
                    ) from error
                continue
            if response.status != 200:
                raise ProxyError(
                    f"the cassette proxy refused {method} {path}: {response.status} "
                    f"{data.decode('utf-8', 'replace')}"
                )
            answer: dict[str, Any] = json.loads(data)
            return answer
        raise AssertionError("unreachable")

    def send(self, message: dict[str, Any]) -> None:
        """One message on the control pipe (`{"op": "begin", "scope": ..., "test": ...}`, or
        `"end"`): read by the proxy before any request sent after it."""
        data = memoryview((json.dumps(message, separators=(",", ":")) + "\n").encode())
        try:
            while data:
                data = data[os.write(self._pipe_in, data) :]
        except OSError as error:
            raise ProxyError(
                f"the cassette proxy at {self.url} stopped reading its control pipe: {error}\n"
                f"{self.log_text()}"
            ) from error

    def noticed(self) -> bool:
        """Whether the proxy wrote a notice since the last call (a scope saw a miss, an error
        or a refused bypass: its tally is worth reading), or is gone. A test that ended having
        sent nothing (`{"idle": TEST}`) is kept in `idle`, not a notice."""
        seen = False
        while True:
            try:
                chunk = os.read(self._pipe_out, 4096)
            except BlockingIOError:
                break
            except OSError:
                return True
            if not chunk:
                # It exited: asking the control endpoint says so.
                return True
            self._unread += chunk
        *lines, self._unread = self._unread.split(b"\n")
        for line in lines:
            try:
                said = json.loads(line)
            except ValueError:
                said = None
            if isinstance(said, dict) and isinstance(said.get("idle"), str) and len(said) == 1:
                self.idle.append(said["idle"])
            elif line.strip():
                seen = True
        return seen

    def ended(self) -> dict[str, Any]:
        """The counts of every test that ended, summed."""
        return self.control("GET", "")

    def get(self, path: str) -> dict[str, Any]:
        """A GET of one of the proxy's own paths (`/_cassette/stats`, `/healthz`)."""
        connection = http.client.HTTPConnection(self._host, self._port, timeout=STOP_TIMEOUT)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            answer: dict[str, Any] = json.loads(response.read())
            return answer
        except (OSError, http.client.HTTPException, ValueError) as error:
            raise ProxyError(
                f"the cassette proxy at {self.url} did not answer GET {path}: {error}"
            ) from error
        finally:
            connection.close()

    def stop(self) -> int:
        """SIGTERM (the proxy finishes requests in flight, flushes its index, prints its
        counters), then its exit status; killed if it does not stop in time."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self.process.poll() is None:
            self.process.send_signal(
                signal.SIGTERM if hasattr(signal, "SIGTERM") else signal.SIGINT
            )
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.process.stdin is not None:
            self.process.stdin.close()
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode

    def close(self) -> None:
        """Forgets what the proxy wrote (after `stop`)."""
        self._log.close()

    def kill(self) -> None:
        """Ends the proxy at once (it failed to start)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


TRUE = ("1", "yes", "y", "on", "true", "t")
FALSE = ("0", "no", "n", "off", "false", "f", "")


def env_flag(name: str, default: bool) -> bool:
    """A yes-or-no variable in any of its usual spellings, in any case (1/0, yes/no, on/off,
    true/false), as the binary reads them; `default` when unset. ValueError names it else."""
    value = os.environ.get(name)
    if value is None:
        return default
    spelled = value.strip().lower()
    if spelled in TRUE:
        return True
    if spelled in FALSE:
        return False
    raise ValueError(f"{name}={value!r} is not yes or no: use 1/0, yes/no, on/off or true/false")


def apply_env(changes: dict[str, str], unset: list[str]) -> dict[str, str | None]:
    """Sets and removes variables in this process; returns what they were before."""
    before: dict[str, str | None] = {}
    for name in [*changes, *unset]:
        before.setdefault(name, os.environ.get(name))
    for name in unset:
        os.environ.pop(name, None)
    os.environ.update(changes)
    return before


def restore_env(before: dict[str, str | None]) -> None:
    """Puts back the variables `apply_env` changed."""
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
            # Also where Python's view had it removed already (cassette_cli._base_urls).
            os.unsetenv(name)
        else:
            os.environ[name] = value


def monotonic_ms(start: float) -> float:
    """Milliseconds since `start` (a `time.perf_counter()` reading)."""
    return (time.perf_counter() - start) * 1000
