"""The lean client of the proxy's channel: HTTP/1.1 over its Unix socket, a request written in
one `sendall` and its answer parsed here, with kept-alive connections per process (and per event
loop for asyncio).

Why not the clients' own HTTP stacks: httpx's (httpcore and h11) costs a test about as much as
loopback HTTP itself, so a channel request through it was no faster than the HTTP path
(BENCHMARKS.md, "In process"). The channel speaks to one server only, the proxy, which answers
every request with a status line, headers and a body framed by `content-length` or `chunked`,
so the little of HTTP it needs is parsed here without any protocol library; the framing stays
HTTP/1.1 so that the proxy serves the channel and its HTTP port alike.
"""

from __future__ import annotations

import os
import select
import socket
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

Headers = list[tuple[bytes, bytes]]

_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _UNTIL_CLOSE, _DONE = range(8)
_LONGEST_HEAD = 256 * 1024


class ChannelError(Exception):
    """The channel failed: `kind` is `connect` (the proxy is gone), `timeout`, or `protocol` (an
    answer that is not HTTP/1.1, or that ended early)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Answer:
    """A sans-IO reader of one HTTP/1.1 answer: fed the bytes the socket gives, it parses the
    head and hands back the body's pieces as they arrive."""

    def __init__(self, method: bytes) -> None:
        self._head_only = method == b"HEAD"
        self._buffer = bytearray()
        self._state = _HEAD
        self._left = 0
        self.status = 0
        self.reason = b""
        self.headers: Headers = []
        self.keep_alive = True
        # Set once the body's reader let go of its connection (given back, or closed).
        self.released = False

    @property
    def has_head(self) -> bool:
        return self._state != _HEAD

    @property
    def done(self) -> bool:
        return self._state == _DONE

    def feed(self, data: bytes) -> list[bytes]:
        """Takes what the socket gave (`b""`: it closed) and returns the body's pieces it
        completes."""
        if not data:
            if self._state == _UNTIL_CLOSE:
                self._state = _DONE
                self.keep_alive = False
                return []
            raise ChannelError("protocol", "the cassette proxy closed the channel mid-answer")
        self._buffer += data
        pieces: list[bytes] = []
        while True:
            state = self._state
            buffer = self._buffer
            if state == _HEAD:
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(buffer) > _LONGEST_HEAD:
                        raise ChannelError(
                            "protocol", "the cassette proxy's answer head is too long"
                        )
                    return pieces
                self._parse_head(bytes(buffer[:end]))
                del buffer[: end + 4]
            elif state in (_LENGTH, _UNTIL_CLOSE):
                if buffer:
                    if state == _LENGTH and len(buffer) >= self._left:
                        pieces.append(bytes(buffer[: self._left]))
                        del buffer[: self._left]
                        self._left = 0
                        self._state = _DONE
                    else:
                        pieces.append(bytes(buffer))
                        self._left -= len(buffer)
                        buffer.clear()
                return pieces
            elif state == _CHUNK_SIZE:
                end = buffer.find(b"\r\n")
                if end < 0:
                    return pieces
                try:
                    self._left = int(bytes(buffer[:end]).split(b";", 1)[0], 16)
                except ValueError as error:
                    raise ChannelError("protocol", f"a bad chunk size: {error}") from None
                del buffer[: end + 2]
                self._state = _CHUNK_DATA if self._left else _TRAILER
            elif state == _CHUNK_DATA:
                if not buffer:
                    return pieces
                taken = bytes(buffer[: self._left])
                del buffer[: len(taken)]
                pieces.append(taken)
                self._left -= len(taken)
                if not self._left:
                    self._state = _CHUNK_END
            elif state == _CHUNK_END:
                if len(buffer) < 2:
                    return pieces
                del buffer[:2]
                self._state = _CHUNK_SIZE
            elif state == _TRAILER:
                end = buffer.find(b"\r\n")
                if end < 0:
                    return pieces
                del buffer[: end + 2]
                if end == 0:
                    self._state = _DONE
            else:
                if buffer:
                    # Bytes after the answer: nothing to keep the connection for.
                    self.keep_alive = False
                return pieces

    def _parse_head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        code, _, self.reason = rest.partition(b" ")
        if version != b"HTTP/1.1" or not code.isdigit():
            raise ChannelError("protocol", f"not an HTTP/1.1 answer: {lines[0][:80]!r}")
        self.status = int(code)
        length: int | None = None
        chunked = False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            value = value.strip()
            self.headers.append((name, value))
            lower = name.lower()
            if lower == b"content-length":
                length = int(value)
            elif lower == b"transfer-encoding":
                chunked = value.lower().endswith(b"chunked")
            elif lower == b"connection" and value.lower() == b"close":
                self.keep_alive = False
        if self._head_only or self.status in (204, 304) or 100 <= self.status < 200:
            self._state = _DONE
        elif chunked:
            self._state = _CHUNK_SIZE
        elif length is not None:
            self._left = length
            self._state = _LENGTH if length else _DONE
        else:
            self._state = _UNTIL_CLOSE


def request_bytes(
    method: bytes, target: bytes, headers: Iterable[tuple[bytes, bytes]], body: bytes
) -> bytes:
    """One request, whole: its body framed by `content-length` (bodies are read first)."""
    lines = [method + b" " + target + b" HTTP/1.1"]
    host = False
    for name, value in headers:
        lower = name.lower()
        if lower in (b"content-length", b"transfer-encoding", b"connection"):
            continue
        host = host or lower == b"host"
        lines.append(name + b": " + value)
    if not host:
        lines.append(b"host: cassette")
    if body or method not in (b"GET", b"HEAD", b"OPTIONS", b"DELETE"):
        lines.append(b"content-length: " + str(len(body)).encode())
    head = b"\r\n".join(lines)
    # One check for every line: a name or value holding a line break would smuggle a header.
    if head.count(b"\n") != len(lines) - 1 or head.count(b"\r") != len(lines) - 1:
        raise ChannelError("protocol", "a request header holds a line break")
    return head + b"\r\n\r\n" + body


# ------------------------------------------------------------------------------------------------
# Blocking


class Connection:
    """One blocking connection to the channel."""

    def __init__(self, path: str, timeout: float | None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError as error:
            self.sock.close()
            raise ChannelError(
                "connect", f"cannot reach the cassette proxy's channel {path}: {error}"
            ) from None

    def stale(self) -> bool:
        return _readable(self.sock)

    def close(self) -> None:
        self.sock.close()


class Pool:
    """Kept-alive connections of this process: one is taken per request and given back once its
    answer was read to the end."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._idle: list[Connection] = []
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def _take(self, timeout: float | None) -> Connection:
        with self._lock:
            if self._pid != os.getpid():
                # A forked child shares its parent's sockets: never use them.
                self._idle = []
                self._pid = os.getpid()
            while self._idle:
                connection = self._idle.pop()
                if connection.stale():
                    connection.close()
                    continue
                connection.sock.settimeout(timeout)
                return connection
        return Connection(self.path, timeout)

    def _give_back(self, connection: Connection) -> None:
        with self._lock:
            if self._pid == os.getpid() and len(self._idle) < 16:
                self._idle.append(connection)
                return
        connection.close()

    def send(
        self,
        method: bytes,
        target: bytes,
        headers: Iterable[tuple[bytes, bytes]],
        body: bytes,
        timeout: float | None,
    ) -> tuple[Answer, Iterator[bytes], Any]:
        """Sends one request; its answer's head, an iterator of its body's pieces, and a
        function that closes its connection: for a body closed before it was read at all (its
        iterator never started, so it cannot let go of the connection itself; `Answer.released`
        says whether it did)."""
        data = request_bytes(method, target, headers, body)
        connection = self._take(timeout)
        answer = Answer(method)
        first: list[bytes] = []
        try:
            connection.sock.sendall(data)
            while not answer.has_head:
                first += answer.feed(connection.sock.recv(65536))
        except BaseException as error:
            connection.close()
            raise _mapped(error) from None
        return answer, self._body(connection, answer, first), connection.close

    def _body(self, connection: Connection, answer: Answer, first: list[bytes]) -> Iterator[bytes]:
        finished = False
        try:
            yield from first
            while not answer.done:
                yield from answer.feed(connection.sock.recv(65536))
            finished = True
        except (OSError, ChannelError) as error:
            raise _mapped(error) from None
        finally:
            answer.released = True
            if finished and answer.keep_alive:
                self._give_back(connection)
            else:
                connection.close()


def _readable(sock: socket.socket) -> bool:
    """Whether a kept connection is readable while idle: the proxy closed it meanwhile (poll, not
    select, which refuses descriptors past 1024)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def _mapped(error: BaseException) -> BaseException:
    if isinstance(error, ChannelError):
        return error
    if isinstance(error, (TimeoutError, socket.timeout)) or type(error).__name__ == "TimeoutError":
        return ChannelError("timeout", "the cassette proxy did not answer in time")
    if isinstance(error, OSError):
        return ChannelError("protocol", f"the cassette proxy's channel failed: {error}")
    return error


# ------------------------------------------------------------------------------------------------
# asyncio


class AsyncPool:
    """Kept-alive connections of one event loop."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._idle: list[socket.socket] = []

    async def send(
        self,
        method: bytes,
        target: bytes,
        headers: Iterable[tuple[bytes, bytes]],
        body: bytes,
        timeout: float | None,
    ) -> tuple[Answer, AsyncIterator[bytes], Any]:
        import asyncio

        loop = asyncio.get_running_loop()
        sock: socket.socket | None = None
        while self._idle:
            kept = self._idle.pop()
            if _readable(kept):
                kept.close()
                continue
            sock = kept
            break
        if sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                await asyncio.wait_for(loop.sock_connect(sock, self.path), timeout)
            except (OSError, TimeoutError) as error:
                sock.close()
                raise ChannelError(
                    "connect", f"cannot reach the cassette proxy's channel {self.path}: {error}"
                ) from None
        answer = Answer(method)
        first: list[bytes] = []
        try:
            await asyncio.wait_for(
                loop.sock_sendall(sock, request_bytes(method, target, headers, body)), timeout
            )
            while not answer.has_head:
                first += answer.feed(await asyncio.wait_for(loop.sock_recv(sock, 65536), timeout))
        except BaseException as error:
            sock.close()
            raise _mapped(error) from None
        return answer, self._body(sock, answer, first, timeout), sock.close

    async def _body(
        self, sock: socket.socket, answer: Answer, first: list[bytes], timeout: float | None
    ) -> AsyncIterator[bytes]:
        import asyncio

        loop = asyncio.get_running_loop()
        finished = False
        try:
            for piece in first:
                yield piece
            while not answer.done:
                for piece in answer.feed(
                    await asyncio.wait_for(loop.sock_recv(sock, 65536), timeout)
                ):
                    yield piece
            finished = True
        except (OSError, ChannelError) as error:
            raise _mapped(error) from None
        finally:
            answer.released = True
            if finished and answer.keep_alive and len(self._idle) < 16:
                self._idle.append(sock)
            else:
                sock.close()
