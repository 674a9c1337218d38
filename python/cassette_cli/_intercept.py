"""In-process transports: every request of this process's HTTP clients goes to the cassette
proxy's channel (`cassette proxy --channel`, a Unix socket only its owner can open) with its
original URL, whatever base URL, proxy setting or transport the client was given.

The proxy alone decides what a request is: a host a route serves is keyed, replayed or recorded
there; a GET of a host no route serves is answered from its stored download (a file a vcrpy
tape held, stored by adopt or `cassette import`), and any other request to such a host is
refused (and counted for the running test); a host `[bypass] allow` lists, or one on this
machine, is "go direct" (421 with `x-cassette: direct`),
and then the client's own transport sends it unchanged. That verdict is asked once per origin
(`OPTIONS` with `x-cassette-probe: 1`) so that a request body is never sent twice. Requests to
the proxy's own HTTP address (clients following the base-URL variables) take the channel too,
in origin form, so they pay no loopback HTTP. Each request names the test that sent it
(`_test_context.py`), whichever thread or task of the test sent it.

Caught: httpx and its fork httpx2 (sync and async, at `HTTPTransport`, so clients built with
their own transport, `proxy=` or `trust_env=False` are caught), urllib3 (requests), aiohttp,
the standard library's urllib.request, and http.client used directly to a host a route serves.
Each is patched when it is first imported, so a process that never uses one pays nothing.
httpx's requests take the lean channel client of `_channel.py` (asyncio included; another event
loop library, httpx's own stack over the socket), and an httpx transport builds its own pool
and TLS context only when it first sends a request itself.
"""

# The libraries patched here are optional and imported only when the test code imports them, so
# their objects are typed as Any at the seams.
# ruff: noqa: ANN401

from __future__ import annotations

import http.client
import importlib.abc
import importlib.machinery
import os
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from cassette_cli import _channel, _test_context

CHANNEL_ENV = "CASSETTE_CHANNEL"
PROXY_URL_ENV = "CASSETTE_PROXY_URL"
URL_HEADER = "x-cassette-url"
ROUTED, DIRECT, REFUSED = "routed", "direct", "refused"


class _State:
    """The channel this process sends to, and what the proxy said of each origin."""

    def __init__(self, path: str, own: str | None) -> None:
        self.path = path
        self.verdicts: dict[tuple[str, str, int], str] = {}
        self.lock = threading.Lock()
        self.own = _origin(own if own is not None else os.environ.get(PROXY_URL_ENV, ""))


_STATE: _State | None = None
_UNDO: list[Callable[[], None]] = []


def _origin(url: str) -> tuple[str, str, int] | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return (
        parts.scheme,
        parts.hostname.lower(),
        parts.port or (443 if parts.scheme == "https" else 80),
    )


def _shown(host: str) -> str:
    """`host` as a URL spells it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def _full_url(scheme: str, host: str, port: int | None, path: str) -> str:
    """The absolute URL a request for `path` at that origin had (its scheme's port left out)."""
    default = 443 if scheme == "https" else 80
    return f"{scheme}://{_shown(host)}{'' if port in (None, default) else f':{port}'}{path}"


def verdict(scheme: str, host: str, port: int | None) -> str:
    """Where the proxy sends this origin's requests: routed, direct or refused; `own` for the
    proxy's own address."""
    state = _STATE
    if state is None:
        return DIRECT
    origin = (scheme, host.lower().strip("[]"), port or (443 if scheme == "https" else 80))
    if origin == state.own:
        return "own"
    known = state.verdicts.get(origin)
    if known is not None:
        return known
    connection = _UnixHTTPConnection(state.path)
    try:
        shown = _shown(origin[1])
        connection.request(
            "OPTIONS",
            f"{scheme}://{shown}:{origin[2]}/",
            headers={"x-cassette-probe": "1", "host": shown},
        )
        answer = connection.getresponse()
        answer.read()
        said = answer.getheader("x-cassette") or REFUSED
    except OSError:
        # A proxy that is gone answers nothing; the request is refused rather than sent out.
        said = REFUSED
    finally:
        connection.close()
    with state.lock:
        state.verdicts[origin] = said
    return said


class _UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over the channel's Unix socket (for the probe)."""

    def __init__(self, path: str) -> None:
        super().__init__("cassette", timeout=30)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


# ------------------------------------------------------------------------------------------------
# httpx and httpx2


def _patch_httpx(module: ModuleType) -> None:
    sync_cls: Any = module.HTTPTransport
    async_cls: Any = module.AsyncHTTPTransport
    sync_send = sync_cls.handle_request
    async_send = async_cls.handle_async_request
    pools: dict[tuple[Any, ...], Any] = {}
    core_name = "httpcore2" if module.__name__ == "httpx2" else "httpcore"

    def mocked_below(is_async: bool) -> bool:
        # A mocking library that patched httpcore's pool (respx) answers the test's requests
        # itself, as it would without cassette; cassette only stands in for the network.
        name = "AsyncConnectionPool" if is_async else "ConnectionPool"
        pool = getattr(sys.modules.get(core_name), name, None)
        send = getattr(pool, "handle_async_request" if is_async else "handle_request", None)
        if send is None:
            return False  # not imported yet (nothing patched it), or a layout not known here
        return not str(getattr(send, "__module__", "")).startswith(core_name + ".")

    def sent_headers(request: Any, how: str, body: bytes | None) -> list[tuple[bytes, bytes]]:
        headers: list[tuple[bytes, bytes]] = list(request.headers.raw)
        # The whole request, for a judge of the test, where it goes to a vendor's URL.
        whole = body if how != "own" else None
        added = _test_context.headers(request.method, request.url, request.headers, whole)
        headers += [(k.encode(), v.encode()) for k, v in added.items()]
        if how != "own":
            headers.append((URL_HEADER.encode(), str(request.url).encode()))
        return headers

    def raised(error: _channel.ChannelError, request: Any) -> Exception:
        kinds = {
            "connect": module.ConnectError,
            "timeout": module.ReadTimeout,
            "protocol": module.RemoteProtocolError,
        }
        made: Exception = kinds[error.kind](str(error), request=request)
        return made

    def read_timeout(request: Any) -> float | None:
        timeout = (request.extensions.get("timeout") or {}).get("read")
        return float(timeout) if timeout is not None else None

    def channel_request(request: Any, how: str, body: bytes) -> tuple[Any, ...]:
        # What either pool's `send` takes for `request`, its body read.
        headers = sent_headers(request, how, body)
        return (request.method.encode(), request.url.raw_path, headers, body, read_timeout(request))

    def response(answer: _channel.Answer, stream: Any) -> Any:
        extensions = {"http_version": b"HTTP/1.1", "reason_phrase": answer.reason}
        return module.Response(
            answer.status, headers=answer.headers, stream=stream, extensions=extensions
        )

    sync_base: Any = module.SyncByteStream
    async_base: Any = module.AsyncByteStream

    class Stream(sync_base):  # type: ignore[misc]
        def __init__(self, answer: Any, pieces: Any, close: Any, request: Any) -> None:
            self._answer, self._pieces, self._close = answer, pieces, close
            self._request = request

        def __iter__(self) -> Any:
            try:
                yield from self._pieces
            except _channel.ChannelError as error:
                raise raised(error, self._request) from None

        def close(self) -> None:
            # The pieces' generator gives a connection back only when read to the end; one
            # never started holds it still.
            self._pieces.close()
            if not self._answer.released:
                self._close()

    class AsyncStream(async_base):  # type: ignore[misc]
        def __init__(self, answer: Any, pieces: Any, close: Any, request: Any) -> None:
            self._answer, self._pieces, self._close = answer, pieces, close
            self._request = request

        async def __aiter__(self) -> Any:
            try:
                async for piece in self._pieces:
                    yield piece
            except _channel.ChannelError as error:
                raise raised(error, self._request) from None

        async def aclose(self) -> None:
            await self._pieces.aclose()
            if not self._answer.released:
                self._close()

    def handle_request(self: Any, request: Any) -> Any:
        state = _STATE
        if state is None or mocked_below(False):
            return sync_send(self, request)
        how = DIRECT if getattr(self, "_cassette_channel", False) else _url_verdict(request.url)
        if how == DIRECT:
            return sync_send(self, request)
        pool = pools.get(("sync",))
        if pool is None or pool.path != state.path:
            pool = pools[("sync",)] = _channel.Pool(state.path)
        body = request.read()
        try:
            answer, pieces, close = pool.send(*channel_request(request, how, body))
        except _channel.ChannelError as error:
            raise raised(error, request) from None
        return response(answer, Stream(answer, pieces, close, request))

    async def handle_async_request(self: Any, request: Any) -> Any:
        state = _STATE
        if state is None or mocked_below(True):
            return await async_send(self, request)
        how = DIRECT if getattr(self, "_cassette_channel", False) else _url_verdict(request.url)
        if how == DIRECT:
            return await async_send(self, request)
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            # Another event loop library (trio): httpx's own stack over the channel's socket.
            transport = pools.get(("anyio", os.getpid()))
            if transport is None:
                transport = async_cls(uds=state.path)
                transport._cassette_channel = True
                pools[("anyio", os.getpid())] = transport
            headers = [(k.decode(), v.decode()) for k, v in sent_headers(request, how, None)]
            url = module.URL("http://cassette" + request.url.raw_path.decode("ascii"))
            sent = module.Request(
                request.method,
                url,
                headers=headers,
                stream=request.stream,
                extensions=request.extensions,
            )
            return await async_send(transport, sent)
        # An event loop's sockets are its own: one pool per loop (pytest-asyncio runs many).
        on_loop = ("asyncio", os.getpid(), id(loop))
        pool = pools.get(on_loop)
        if pool is None or pool.path != state.path:
            pool = pools[on_loop] = _channel.AsyncPool(state.path)
        body = await request.aread()
        try:
            answer, pieces, close = await pool.send(*channel_request(request, how, body))
        except _channel.ChannelError as error:
            raise raised(error, request) from None
        return response(answer, AsyncStream(answer, pieces, close, request))

    sync_cls.handle_request = handle_request
    async_cls.handle_async_request = handle_async_request
    _defer_pool(sync_cls, is_async=False)
    _defer_pool(async_cls, is_async=True)

    def undo() -> None:
        sync_cls.handle_request = sync_send
        async_cls.handle_async_request = async_send
        pools.clear()

    _UNDO.append(undo)


_BUILDING = threading.Lock()


def _defer_pool(cls: Any, *, is_async: bool) -> None:
    """While the channel is installed, a transport builds its connection pool (and with it a TLS
    context, about 18 ms of loading CA certificates) when it first sends a request itself, not
    when its client is made: a request the channel carries needs neither, and real suites build
    clients per test (two TLS contexts were half of an agent test's time). Installed once per
    class and inert without the channel, so uninstalling leaves no transport without a pool."""
    if cls.__dict__.get("_cassette_deferred"):
        return
    init = cls.__init__

    def deferred_init(self: Any, *args: Any, **kw: Any) -> None:
        if _STATE is None:
            init(self, *args, **kw)
        else:
            # A setting the pool would refuse (a CA file that is not there) is then refused at
            # the first request the transport sends itself.
            self.__dict__["_cassette_init"] = (args, kw)

    def built(self: Any) -> bool:
        return "_cassette_pool" in self.__dict__ or "_cassette_init" not in self.__dict__

    class Pool:
        def __get__(self, obj: Any, owner: Any = None) -> Any:
            if obj is None:
                return self
            held = obj.__dict__
            if "_cassette_pool" not in held and "_cassette_init" in held:
                with _BUILDING:
                    if "_cassette_pool" not in held:
                        args, kw = held["_cassette_init"]
                        init(obj, *args, **kw)
                        del held["_cassette_init"]
            if "_cassette_pool" in held:
                return held["_cassette_pool"]
            if "_pool" in held:  # made before the class was deferred
                return held["_pool"]
            raise AttributeError("_pool")

        def __set__(self, obj: Any, value: Any) -> None:
            obj.__dict__["_cassette_pool"] = value

    def guarded(name: str, idle: Any) -> None:
        # Entering, leaving or closing a transport that never built its pool has nothing to do;
        # building one only to close it would cost what the deferral saves.
        original = getattr(cls, name)

        def method(self: Any, *args: Any) -> Any:
            return original(self, *args) if built(self) else idle(self)

        async def async_method(self: Any, *args: Any) -> Any:
            return await original(self, *args) if built(self) else idle(self)

        setattr(cls, name, async_method if is_async else method)

    cls.__init__ = deferred_init
    cls._pool = Pool()
    enter, leave, close = (
        ("__aenter__", "__aexit__", "aclose") if is_async else ("__enter__", "__exit__", "close")
    )
    guarded(enter, lambda self: self)
    guarded(leave, lambda self: None)
    guarded(close, lambda self: None)
    cls._cassette_deferred = True


def _url_verdict(url: Any) -> str:
    return verdict(url.scheme, url.host, url.port)


# ------------------------------------------------------------------------------------------------
# urllib3 (requests)


def _patch_urllib3(module: ModuleType) -> None:
    import urllib3.connection
    import urllib3.connectionpool

    pool_cls: Any = urllib3.connectionpool.HTTPConnectionPool
    urlopen = pool_cls.urlopen

    class ChannelConnection(urllib3.connection.HTTPConnection):
        def _new_conn(self) -> socket.socket:
            assert _STATE is not None
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if isinstance(self.timeout, (int, float)):
                sock.settimeout(self.timeout)
            sock.connect(_STATE.path)
            return sock

    class ChannelPool(urllib3.connectionpool.HTTPConnectionPool):
        ConnectionCls = ChannelConnection

    pools: dict[int, Any] = {}

    def patched(
        self: Any,
        method: str,
        url: str,
        body: Any = None,
        headers: Any = None,
        *args: Any,
        **kw: Any,
    ) -> Any:
        if isinstance(self, ChannelPool) or _STATE is None:
            return urlopen(self, method, url, body, headers, *args, **kw)
        if url.startswith(("http://", "https://")):
            # A pool for a forward proxy: the URL is the request's whole target.
            parts = urlsplit(url)
            scheme, host, port = parts.scheme, parts.hostname or "", parts.port
            full = url
            path = parts.path + (f"?{parts.query}" if parts.query else "") or "/"
        else:
            scheme, host, port = self.scheme, self.host, self.port
            full = _full_url(scheme, host, port, url)
            path = url
        how = verdict(scheme, host, port)
        if how == DIRECT:
            return urlopen(self, method, url, body, headers, *args, **kw)
        pool = pools.get(os.getpid())
        if pool is None:
            pool = pools[os.getpid()] = ChannelPool("cassette", maxsize=10)
        sent = dict(headers or {})
        whole_known = body is None or isinstance(body, (bytes, str))
        if how != "own" and whole_known and _test_context.judged():
            # The whole request is known: a judge of the test may name what matches it.
            whole = body.encode() if isinstance(body, str) else body or b""
            sent.update(_test_context.headers(method, full, headers or {}, whole))
        else:
            sent.update(_test_context.headers())
        if how != "own":
            sent[URL_HEADER] = full
        kw["assert_same_host"] = False
        return urlopen(pool, method, path, body, sent, *args, **kw)

    pool_cls.urlopen = patched

    def undo() -> None:
        pool_cls.urlopen = urlopen
        for pool in pools.values():
            pool.close()
        pools.clear()

    _UNDO.append(undo)


# ------------------------------------------------------------------------------------------------
# aiohttp


def _aiohttp_body(
    session: Any, kw: dict[str, Any], headers: dict[str, str]
) -> tuple[bytes | None, dict[str, str]]:
    """The body a request of `session` sends and its headers, as aiohttp will write them, where
    the body is known before sending (none, bytes, text or `json=`; else None). For a judge of
    the test."""
    data, payload = kw.get("data"), kw.get("json")
    if data is None and payload is None:
        return b"", headers
    if data is None:
        if not any(name.lower() == "content-type" for name in headers):
            headers = {**headers, "Content-Type": "application/json"}
        return str(session._json_serialize(payload)).encode(), headers
    if isinstance(data, str):
        return data.encode(), headers
    return (bytes(data) if isinstance(data, (bytes, bytearray)) else None), headers


def _patch_aiohttp(module: ModuleType) -> None:
    import weakref

    session_cls: Any = module.ClientSession
    request = session_cls._request
    close = session_cls.close
    # The channel's session of each of the test's sessions: closed with it, on its event loop.
    via: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
    channels: weakref.WeakSet[Any] = weakref.WeakSet()

    async def patched(self: Any, method: str, str_or_url: Any, **kw: Any) -> Any:
        if self in channels or _STATE is None:
            return await request(self, method, str_or_url, **kw)
        text = str(str_or_url)
        if self._base_url is not None and not text.startswith(("http://", "https://")):
            text = str(self._base_url.join(module.client.URL(text)))
        parts = urlsplit(text)
        how = verdict(parts.scheme, parts.hostname or "", parts.port)
        if how == DIRECT:
            return await request(self, method, str_or_url, **kw)
        channel = via.get(self)
        if channel is None or channel.closed:
            channel = module.ClientSession(
                connector=module.UnixConnector(path=_STATE.path),
                auto_decompress=self.auto_decompress,
            )
            channels.add(channel)
            via[self] = channel
        headers = dict(self._default_headers)
        headers.update(dict(kw.pop("headers", None) or {}))
        judged = how != "own" and _test_context.judged()
        whole, seen = _aiohttp_body(self, kw, headers) if judged else (None, headers)
        headers.update(_test_context.headers(method, text, seen, whole))
        if how != "own":
            headers[URL_HEADER] = text
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return await request(channel, method, "http://cassette" + path, headers=headers, **kw)

    async def closing(self: Any) -> None:
        channel = via.pop(self, None)
        if channel is not None:
            await close(channel)
        await close(self)

    session_cls._request = patched
    session_cls.close = closing

    def undo() -> None:
        session_cls._request = request
        session_cls.close = close

    _UNDO.append(undo)


# ------------------------------------------------------------------------------------------------
# urllib.request (the standard library's client)


def _patch_urllib_request(module: ModuleType) -> None:
    handler_cls: Any = module.AbstractHTTPHandler
    do_open = handler_cls.do_open

    class ChannelConnection(_UnixHTTPConnection):
        # Made by `do_open` as it makes HTTP(S)Connection: `host` (the vendor's, or a forward
        # proxy's) and the TLS arguments mean nothing on the channel.
        def __init__(self, host: str, timeout: Any = None, **_: Any) -> None:
            assert _STATE is not None
            super().__init__(_STATE.path)
            # No timeout given (socket's global default): none, as urllib would wait.
            self.timeout = timeout if isinstance(timeout, (int, float)) else None

    def patched(self: Any, http_class: Any, req: Any, **kw: Any) -> Any:
        if _STATE is None:
            return do_open(self, http_class, req, **kw)
        # The request's own URL, whatever forward proxy ProxyHandler chose for it.
        full = req.full_url
        parts = urlsplit(full)
        how = verdict(parts.scheme, parts.hostname or "", parts.port)
        if how == DIRECT:
            return do_open(self, http_class, req, **kw)
        # Capitalized, as Request stores header names; set afresh each time it is sent.
        for name in (URL_HEADER, _test_context.SCOPE_HEADER):
            req.remove_header(name.capitalize())
        for name, value in _test_context.headers().items():
            req.add_unredirected_header(name.capitalize(), value)
        if how != "own":
            req.add_unredirected_header(URL_HEADER.capitalize(), full)
        # A tunnel through a forward proxy is not opened on the channel: the URL says it all.
        tunnel = getattr(req, "_tunnel_host", None)
        req._tunnel_host = None
        try:
            return do_open(self, ChannelConnection, req)
        finally:
            req._tunnel_host = tunnel

    handler_cls.do_open = patched

    def undo() -> None:
        handler_cls.do_open = do_open

    _UNDO.append(undo)


# ------------------------------------------------------------------------------------------------
# http.client used directly


def _patch_http_client(module: ModuleType) -> None:
    # Only connections whose host a route serves take the channel (a vendor's URL, which the
    # test process's base-URL variables name): every other host, and the proxy's own address,
    # keep http.client's own socket. Subclasses with a `connect` of their own (urllib3's, the
    # channel's) are left alone by it.
    plain: Any = module.HTTPConnection
    tls: Any = module.HTTPSConnection
    putrequest = plain.putrequest
    plain_connect = plain.connect
    tls_connect = tls.connect

    def requesting(self: Any, method: str, url: str, *args: Any, **kw: Any) -> None:
        if type(self).connect not in (connect_plain, connect_tls):
            putrequest(self, method, url, *args, **kw)
            return
        scheme = "https" if isinstance(self, tls) else "http"
        routed = (
            _STATE is not None
            and getattr(self, "_tunnel_host", None) is None
            and verdict(scheme, self.host, self.port) == ROUTED
        )
        self._cassette_url = None
        if routed and not url.startswith(("http://", "https://")):
            self._cassette_url = _full_url(scheme, self.host, self.port, url)
        putrequest(self, method, url, *args, **kw)
        if self._cassette_url:
            self.putheader(URL_HEADER, self._cassette_url)
            for name, value in _test_context.headers().items():
                self.putheader(name, value)

    def connecting(self: Any, original: Any) -> None:
        if getattr(self, "_cassette_url", None) and _STATE is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            timeout = self.timeout if isinstance(self.timeout, (int, float)) else None
            sock.settimeout(timeout)
            sock.connect(_STATE.path)
            self.sock = sock
            return
        original(self)

    def connect_plain(self: Any) -> None:
        connecting(self, plain_connect)

    def connect_tls(self: Any) -> None:
        connecting(self, tls_connect)

    plain.putrequest = requesting
    plain.connect = connect_plain
    tls.connect = connect_tls

    def undo() -> None:
        plain.putrequest = putrequest
        plain.connect = plain_connect
        tls.connect = tls_connect

    _UNDO.append(undo)


# ------------------------------------------------------------------------------------------------
# Installing


_PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "httpx": _patch_httpx,
    "httpx2": _patch_httpx,
    "urllib3": _patch_urllib3,
    "aiohttp": _patch_aiohttp,
    "urllib.request": _patch_urllib_request,
    "http.client": _patch_http_client,
}
_PATCHED: set[str] = set()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Patches a client library right after its first import."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _PATCHES or fullname in _PATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                continue
            loader: Any = spec.loader
            run = loader.exec_module

            def exec_module(module: ModuleType, run: Any = run) -> None:
                run(module)
                _patch(fullname, module)

            spec.loader = _Loader(loader, exec_module)
            return spec
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, run: Callable[[ModuleType], None]) -> None:
        self._inner = inner
        self._run = run

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self._inner.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        self._run(module)


_FINDER = _AfterImport()


def _patch(name: str, module: ModuleType) -> None:
    if name in _PATCHED:
        return
    _PATCHED.add(name)
    try:
        _PATCHES[name](module)
    except (AttributeError, ImportError) as error:
        # A version whose seams moved: said once, and the process takes the HTTP path (its
        # base-URL variables name the proxy again).
        from cassette_cli import _base_urls

        _base_urls.http_path()
        version = getattr(module, "__version__", "")
        print(f"cassette: cannot intercept {name} {version}: {error}", file=sys.stderr)


def install(path: str, own: str | None = None) -> None:
    """Sends every request of this process through the channel at `path`; idempotent. `own`
    is the proxy's HTTP address (default CASSETTE_PROXY_URL), whose requests take the channel
    in origin form."""
    global _STATE
    if _STATE is not None and _STATE.path == path:
        return
    uninstall()
    _STATE = _State(path, own)
    for name in _PATCHES:
        module = sys.modules.get(name)
        if module is not None:
            _patch(name, module)
    sys.meta_path.insert(0, _FINDER)


def uninstall() -> None:
    """Puts every patched library back as it was."""
    global _STATE
    _STATE = None
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    while _UNDO:
        _UNDO.pop()()
    _PATCHED.clear()


def installed() -> str | None:
    """The channel this process sends to, if any."""
    return _STATE.path if _STATE is not None else None


def install_from_env() -> None:
    """What the `.pth` file runs in every Python process: install when CASSETTE_CHANNEL names
    a channel (set by `cassette exec` and by the pytest plugin for a test's subprocesses)."""
    path = os.environ.get(CHANNEL_ENV)
    if path and sys.platform != "win32":
        install(path)
        from cassette_cli import _base_urls

        _base_urls.install_from_env()
