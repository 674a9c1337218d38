"""The lean channel client (cassette_cli/_channel.py) and the httpx transports over it, against a
scripted Unix socket server that answers as the proxy may (content-length, chunked in odd pieces,
close-delimited, cut short, never), so that framing, connection reuse and failures are pinned
where the real proxy would never show them on purpose."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

# The package's source, not an installed copy (the package tests cover the installed one).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from cassette_cli import _channel, _intercept  # noqa: E402

# What the server writes for a request path: pieces written one by one (a float sleeps), and
# whether the connection is closed after them.
Script = Callable[[str], tuple[list[bytes | float], bool]]


class Server:
    """A Unix socket server speaking just enough HTTP/1.1: it reads each request's head and
    `content-length` body and plays the script for its path; OPTIONS probes are "routed"."""

    def __init__(self, script: Script) -> None:
        self.dir = tempfile.mkdtemp(prefix="cassette-channel-test-")
        self.path = os.path.join(self.dir, "channel.sock")
        self.script = script
        self.connections = 0
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket.bind(self.path)
        self.socket.listen(16)
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                peer, _ = self.socket.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(peer)
            threading.Thread(target=self._serve, args=(peer,), daemon=True).start()

    def _serve(self, peer: socket.socket) -> None:
        buffer = b""
        with peer:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = peer.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, target, _ = lines[0].split(" ")
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                while len(buffer) < length:
                    buffer += peer.recv(65536)
                body, buffer = buffer[:length], buffer[length:]
                if method == "OPTIONS" and headers.get("x-cassette-probe"):
                    peer.sendall(b"HTTP/1.1 200 OK\r\nx-cassette: routed\r\ncontent-length: 0\r\n\r\n")
                    continue
                self.requests.append((target, headers, body))
                pieces, close = self.script(target)
                try:
                    for piece in pieces:
                        if isinstance(piece, float):
                            time.sleep(piece)
                        else:
                            peer.sendall(piece)
                except OSError:
                    return
                if close:
                    return

    def drop_idle(self) -> None:
        """Closes every connection from the server's side (as the proxy does to an idle one)."""
        for peer in self.open:
            try:
                peer.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.open.clear()

    def close(self) -> None:
        self.socket.close()
        self.drop_idle()
        Path(self.path).unlink(missing_ok=True)
        os.rmdir(self.dir)


def sized(body: bytes, *extra: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n" + b"".join(e + b"\r\n" for e in extra)
    return head + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body


def chunked(*chunks: bytes) -> bytes:
    framed = b"".join(f"{len(c):x}\r\n".encode() + c + b"\r\n" for c in chunks)
    return b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + framed + b"0\r\n\r\n"


@pytest.fixture
def serve() -> Iterator[Callable[[Script], Server]]:
    made: list[Server] = []

    def start(script: Script) -> Server:
        server = Server(script)
        made.append(server)
        return server

    yield start
    _intercept.uninstall()
    for server in made:
        server.close()


def body_of(pool: _channel.Pool, path: bytes = b"/a") -> tuple[_channel.Answer, bytes]:
    answer, pieces, _ = pool.send(b"GET", path, [(b"host", b"example.test")], b"", 5)
    return answer, b"".join(pieces)


def test_a_chunked_answer_in_odd_pieces_is_read_whole_and_its_connection_kept(serve) -> None:
    whole = chunked(b"data: one\n\n", b"data: two\n\n")
    # Every byte in its own write: a chunk size, a CRLF or the head split anywhere.
    server = serve(lambda _: ([whole[i : i + 1] for i in range(len(whole))], False))
    pool = _channel.Pool(server.path)
    for _ in range(3):
        answer, body = body_of(pool)
        assert answer.status == 200
        assert body == b"data: one\n\ndata: two\n\n"
    assert server.connections == 1


def test_length_and_close_framed_answers(serve) -> None:
    answers = {
        "/sized": ([sized(b"hello")], False),
        "/closing": ([sized(b"bye", b"connection: close")], False),
        "/until-close": ([b"HTTP/1.1 200 OK\r\n\r\n", b"to the ", 0.05, b"end"], True),
        "/empty": ([b"HTTP/1.1 204 No Content\r\n\r\n"], False),
    }
    server = serve(lambda path: answers[path])
    pool = _channel.Pool(server.path)
    assert body_of(pool, b"/sized")[1] == b"hello"
    assert body_of(pool, b"/sized")[1] == b"hello"
    assert server.connections == 1
    # `connection: close` and a close-delimited body are never reused.
    assert body_of(pool, b"/closing")[1] == b"bye"
    assert body_of(pool, b"/until-close")[1] == b"to the end"
    answer, body = body_of(pool, b"/empty")
    assert (answer.status, body) == (204, b"")
    assert server.connections == 3


def test_an_answer_cut_short_fails_and_is_never_mixed_with_the_next(serve) -> None:
    answers = {
        "/cut": ([b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf"], True),
        "/next": ([sized(b"second")], False),
    }
    server = serve(lambda path: answers[path])
    pool = _channel.Pool(server.path)
    with pytest.raises(_channel.ChannelError) as error:
        body_of(pool, b"/cut")
    assert error.value.kind == "protocol"
    assert body_of(pool, b"/next")[1] == b"second"


def test_a_stream_left_unread_closes_its_connection(serve) -> None:
    # The first answer's rest must never be read as the second's answer.
    answers = {
        "/stream": ([chunked(b"first\n", b"rest of the first\n")], False),
        "/other": ([sized(b"other")], False),
    }
    server = serve(lambda path: answers[path])
    pool = _channel.Pool(server.path)
    _, pieces, _ = pool.send(b"GET", b"/stream", [], b"", 5)
    assert next(iter(pieces)) == b"first\n"
    pieces.close()  # type: ignore[attr-defined]
    assert body_of(pool, b"/other")[1] == b"other"
    assert server.connections == 2


def test_a_connection_the_proxy_closed_while_idle_is_not_reused(serve) -> None:
    server = serve(lambda _: ([sized(b"fine")], False))
    pool = _channel.Pool(server.path)
    assert body_of(pool)[1] == b"fine"
    server.drop_idle()
    time.sleep(0.05)
    assert body_of(pool)[1] == b"fine"
    assert server.connections == 2


def test_a_header_holding_a_line_break_is_refused_before_anything_is_sent(serve) -> None:
    server = serve(lambda _: ([sized(b"no")], False))
    pool = _channel.Pool(server.path)
    for name, value in ((b"x-ok", b"a\r\nx-smuggled: 1"), (b"x-bad\nname", b"v")):
        with pytest.raises(_channel.ChannelError):
            pool.send(b"GET", b"/", [(name, value)], b"", 5)
    assert server.requests == []


def test_httpx_over_the_channel_keeps_the_url_streams_and_times_out(serve) -> None:
    answers = {
        "/v1/stream": ([chunked(b"data: a\n\n", b"data: b\n\n")], False),
        "/v1/slow": ([5.0], True),
        "/v1/post": ([sized(b'{"ok": true}', b"content-type: application/json")], False),
    }
    server = serve(lambda path: answers[path])
    _intercept.install(server.path, own="http://127.0.0.1:9")
    with httpx.Client(trust_env=False) as client:
        answer = client.post("https://api.openai.com/v1/post", json={"q": 1})
        assert answer.json() == {"ok": True}
        target, headers, body = server.requests[-1]
        assert (target, headers["x-cassette-url"]) == ("/v1/post", "https://api.openai.com/v1/post")
        assert (headers["host"], body) == ("api.openai.com", b'{"q":1}')
        with client.stream("GET", "https://api.openai.com/v1/stream") as streamed:
            assert list(streamed.iter_lines()) == ["data: a", "", "data: b", ""]
        with pytest.raises(httpx.ReadTimeout):
            client.get("https://api.openai.com/v1/slow", timeout=0.3)


def test_async_httpx_over_the_channel(serve) -> None:
    answers = {
        "/v1/stream": ([chunked(b"data: a\n\n", b"data: b\n\n")], False),
        "/v1/cut": ([b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nhal"], True),
    }
    server = serve(lambda path: answers[path])
    _intercept.install(server.path, own="http://127.0.0.1:9")

    async def main() -> list[str]:
        async with httpx.AsyncClient(trust_env=False) as client:
            lines = []
            for _ in range(2):
                async with client.stream("GET", "https://api.openai.com/v1/stream") as streamed:
                    lines += [line async for line in streamed.aiter_lines()]
            with pytest.raises(httpx.RemoteProtocolError):
                await client.get("https://api.openai.com/v1/cut")
            return lines

    assert asyncio.run(main()) == ["data: a", "", "data: b", ""] * 2
    # Both streams on one kept connection, the cut answer on its own.
    assert server.connections == 2


def test_a_response_closed_unread_closes_its_connection_without_a_warning(serve) -> None:
    # A suite run with `filterwarnings = error` fails on an unclosed socket's ResourceWarning.
    answers = {
        "/v1/stream": ([chunked(b"data: a\n\n", b"data: b\n\n")], False),
        "/v1/post": ([sized(b"{}", b"content-type: application/json")], False),
    }
    server = serve(lambda path: answers[path])
    _intercept.install(server.path, own="http://127.0.0.1:9")

    async def unread_async(client: httpx.AsyncClient) -> None:
        async with client.stream("GET", "https://api.openai.com/v1/stream"):
            pass
        assert (await client.post("https://api.openai.com/v1/post")).json() == {}

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with httpx.Client(trust_env=False) as client:
            with client.stream("GET", "https://api.openai.com/v1/stream"):
                pass  # closed without reading a byte of its body
            assert client.post("https://api.openai.com/v1/post").json() == {}

        async def main() -> None:
            async with httpx.AsyncClient(trust_env=False) as client:
                await unread_async(client)

        asyncio.run(main())
        gc.collect()
    unclosed = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == [], [str(w.message) for w in unclosed]
    # Each unread stream's connection was closed, the request after it on a new one (and one
    # connection asked the origin's verdict).
    assert server.connections == 5
