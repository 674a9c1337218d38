"""Adopt mode of the pytest plugin: the "tape server", a loopback HTTP server that stands in
for every vendor behind the plugin's `cassette proxy` (in `auto` mode: a miss is forwarded
here and stored create-only, keyed by the request actually sent) and answers each request from
the running test's own vcrpy tape, matched the way vcrpy matched it. It notes, per test, what
it answered, what it could not answer and how the tape's recorded request differs from today's
(the drift vcrpy's default matching never looked at). Nothing here opens a connection.

vcrpy itself is not imported (its tapes are plain YAML, and its serializer would need the
suite's own registrations); PyYAML, which vcrpy brings, reads them.
"""

from __future__ import annotations

import dataclasses
import difflib
import gzip
import json
import os
import re
import tempfile
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

# vcrpy's default `match_on`.
DEFAULT_MATCH_ON = ("method", "scheme", "host", "port", "path", "query")
# What the matchers this module knows compare; any other is named in the report, not applied.
KNOWN_MATCHERS = {"method", "scheme", "host", "port", "path", "query", "uri", "body", "raw_body"}
# Compared by name only, never by value, and left out of the header drift: credentials, and
# what the transport (or the proxy in front) sets.
AUTH_HEADERS = {
    "authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "cookie",
    "proxy-authorization",
}
TRANSPORT_HEADERS = {
    "host",
    "content-length",
    "connection",
    "transfer-encoding",
    "accept-encoding",
    "keep-alive",
    "te",
    "upgrade",
}
# The tape server's paths: /_r/<route>/<the vendor's path>.
ROUTE_PREFIX = "/_r/"
SECRET = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+\S+|AIza[0-9A-Za-z_\-]{20,})")
# Credential parameters of a query string (`?key=...`, `&api_key=...`).
SECRET_PARAM = re.compile(
    r"(?i)([?&](?:key|api[_-]?key|token|access[_-]?token|sig|signature|auth)=)[^&\s]+"
)
# Status of a request that bypassed the base URL and came here as to a forward proxy (not 409,
# which clients retry, nor a 5xx): the proxy never sees it, so it is never stored. A request the
# proxy forwards that no interaction of the tape matches gets no answer at all (see `_refuse`).
NO_MATCH_STATUS = 418


class AdoptError(RuntimeError):
    """A tape that cannot be read, or PyYAML missing."""


def redact(text: str) -> str:
    """Key-shaped strings replaced, for the report."""
    return SECRET_PARAM.sub(r"\1[REDACTED]", SECRET.sub("[REDACTED]", text))


@dataclasses.dataclass(frozen=True)
class Vendor:
    """The vendor a route stands for: what vcrpy saw as scheme, host and port."""

    scheme: str
    host: str
    port: int
    base_path: str

    @classmethod
    def parse(cls, url: str) -> Vendor:
        parts = urlsplit(url)
        scheme = parts.scheme or "https"
        port = parts.port or (443 if scheme == "https" else 80)
        return cls(scheme, (parts.hostname or "").lower(), port, parts.path.rstrip("/"))


@dataclasses.dataclass
class Interaction:
    method: str
    uri: str
    body: bytes
    headers: dict[str, list[str]]
    status: int
    reason: str
    response_headers: list[tuple[str, str]]
    response_body: bytes
    used: bool = False


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _bytes(value: object) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value).encode()
    return str(value).encode()


def _headers(raw: object) -> dict[str, list[str]]:
    headers: dict[str, list[str]] = {}
    if not isinstance(raw, dict):
        return headers
    for name, values in raw.items():
        if not isinstance(values, list):
            values = [values]
        headers.setdefault(str(name).lower(), []).extend(_text(v) for v in values)
    return headers


def _decoded(body: bytes, headers: dict[str, list[str]]) -> tuple[bytes, dict[str, list[str]]]:
    encoding = ",".join(headers.get("content-encoding", [])).strip().lower()
    try:
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        else:
            return body, headers
    except (OSError, zlib.error):
        return body, headers
    return body, {k: v for k, v in headers.items() if k != "content-encoding"}


def read_tape(path: Path) -> list[Interaction]:
    """The interactions of one vcrpy tape (default serializer, or one that stores JSON bodies
    as `parsed_body`), in order."""
    try:
        import yaml
    except ImportError as error:
        raise AdoptError(
            "adopt reads vcrpy tapes with PyYAML, which is not installed here: "
            "install vcrpy (it brings PyYAML) in this environment"
        ) from error
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as error:
        raise AdoptError(f"cannot read the vcrpy tape {path}: {error}") from error
    if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
        raise AdoptError(f"{path} is not a vcrpy tape (no `interactions` list)")
    interactions = []
    for number, item in enumerate(data["interactions"], 1):
        try:
            request, response = item["request"], item["response"]
            body = request.get("parsed_body", request.get("body"))
            if isinstance(body, dict) and "string" in body and "parsed_body" not in request:
                body = body["string"]
            answer = response.get("parsed_body")
            if answer is None:
                answer = (response.get("body") or {}).get("string")
            response_headers = _headers(response.get("headers"))
            response_body, response_headers = _decoded(_bytes(answer), response_headers)
            status = response.get("status") or {}
            interactions.append(
                Interaction(
                    method=str(request["method"]).upper(),
                    uri=str(request["uri"]),
                    body=_bytes(body),
                    headers=_headers(request.get("headers")),
                    status=int(status.get("code", 200)),
                    reason=str(status.get("message", "")),
                    response_headers=[
                        (k, v)
                        for k, vs in response_headers.items()
                        for v in vs
                        if k not in TRANSPORT_HEADERS
                    ],
                    response_body=response_body,
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise AdoptError(f"{path} interaction {number} cannot be read: {error!r}") from error
    return interactions


@dataclasses.dataclass(frozen=True)
class Sent:
    """Today's request, as the vendor would have seen it."""

    method: str
    scheme: str
    host: str
    port: int
    path: str
    query: str
    body: bytes
    headers: dict[str, list[str]]

    def describe(self) -> str:
        default = 443 if self.scheme == "https" else 80
        port = "" if self.port == default else f":{self.port}"
        query = f"?{self.query}" if self.query else ""
        return redact(f"{self.method} {self.scheme}://{self.host}{port}{self.path}{query}")


def _json_or_none(body: bytes) -> object:
    try:
        return json.loads(body)
    except ValueError:
        return None


def matches(matcher: str, sent: Sent, recorded: Interaction) -> bool:
    parts = urlsplit(recorded.uri)
    scheme = parts.scheme or "https"
    if matcher == "method":
        return sent.method == recorded.method
    if matcher == "scheme":
        return sent.scheme == scheme
    if matcher == "host":
        return sent.host == (parts.hostname or "").lower()
    if matcher == "port":
        return sent.port == (parts.port or (443 if scheme == "https" else 80))
    if matcher == "path":
        return sent.path == parts.path
    if matcher == "query":
        return sorted(parse_qsl(sent.query)) == sorted(parse_qsl(parts.query))
    if matcher == "uri":
        return all(matches(m, sent, recorded) for m in ("scheme", "host", "port", "path", "query"))
    if matcher in ("body", "raw_body"):
        if sent.body == recorded.body:
            return True
        mine, theirs = _json_or_none(sent.body), _json_or_none(recorded.body)
        return matcher == "body" and mine is not None and mine == theirs
    return True


def _flatten(value: object, path: str = "$") -> dict[str, object]:
    if isinstance(value, dict):
        flat: dict[str, object] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{path}.{key}"))
        return flat or {path: {}}
    if isinstance(value, list):
        flat = {}
        for index, item in enumerate(value):
            flat.update(_flatten(item, f"{path}[{index}]"))
        return flat or {path: []}
    return {path: value}


def _word_diff(old: str, new: str) -> str:
    a, b = old.split(), new.split()
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            words = a[i1:i2]
            out.append(" ".join(words) if len(words) <= 6 else f"{words[0]} ... {words[-1]}")
            continue
        if i2 > i1:
            out.append("[-" + " ".join(a[i1:i2]) + "-]")
        if j2 > j1:
            out.append("{+" + " ".join(b[j1:j2]) + "+}")
    return " ".join(out)


def drift(sent: Sent, recorded: Interaction) -> list[str]:
    """How the tape's recorded request differs from today's: body (JSON members, strings as a
    word diff) and header names added or removed; credentials never compared or shown."""
    lines: list[str] = []
    if sent.body != recorded.body:
        mine, theirs = _json_or_none(sent.body), _json_or_none(recorded.body)
        if mine is not None and theirs is not None:
            now, then = _flatten(mine), _flatten(theirs)
            for path in sorted(set(now) | set(then)):
                if path not in then:
                    lines.append(f"body {path} added: {json.dumps(now[path])[:200]}")
                elif path not in now:
                    lines.append(f"body {path} removed (was {json.dumps(then[path])[:200]})")
                elif now[path] != then[path]:
                    today, recorded_value = now[path], then[path]
                    if isinstance(today, str) and isinstance(recorded_value, str):
                        lines.append(f"body {path}: {_word_diff(recorded_value, today)}")
                    else:
                        lines.append(
                            f"body {path}: {json.dumps(then[path])[:100]} -> "
                            f"{json.dumps(now[path])[:100]}"
                        )
        else:
            lines.append(
                "body: " + _word_diff(_text(recorded.body)[:4000], _text(sent.body)[:4000])
            )
    skip = AUTH_HEADERS | TRANSPORT_HEADERS
    recorded_names = {n for n in recorded.headers if n not in skip}
    sent_names = {n for n in sent.headers if n not in skip and not n.startswith("x-cassette")}
    for name in sorted(sent_names - recorded_names):
        lines.append(f"header {name} added")
    for name in sorted(recorded_names - sent_names):
        lines.append(f"header {name} removed")
    return [redact(line) for line in lines]


@dataclasses.dataclass
class Tape:
    """The tapes of the running test, and what it asked of them."""

    test: str
    paths: list[Path]
    match_on: tuple[str, ...]
    root: Path | None = None
    interactions: list[Interaction] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    adopted: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    unmatched: list[str] = dataclasses.field(default_factory=list)
    refused: list[str] = dataclasses.field(default_factory=list)

    def load(self) -> None:
        for path in self.paths:
            if not path.is_file():
                continue
            try:
                self.interactions.extend(read_tape(path))
            except AdoptError as error:
                self.errors.append(str(error).replace(str(path), self.shown(path)))

    def shown(self, path: Path) -> str:
        """A tape's path, relative to the rootdir when it is inside it."""
        if self.root is not None:
            try:
                return str(path.resolve().relative_to(self.root.resolve()))
            except ValueError:
                pass
        return str(path)

    def names(self) -> str:
        return ", ".join(self.shown(p) for p in self.paths) or "(no tape)"

    def answer(self, sent: Sent) -> Interaction | None:
        for number, recorded in enumerate(self.interactions, 1):
            if recorded.used or not all(matches(m, sent, recorded) for m in self.match_on):
                continue
            recorded.used = True
            self.adopted.append(
                {"request": sent.describe(), "interaction": number, "drift": drift(sent, recorded)}
            )
            return recorded
        present = [p for p in self.paths if p.is_file()]
        why = (
            f"no unused interaction of {self.names()} matches {sent.describe()} "
            f"on {', '.join(self.match_on)}"
            if present
            else f"no vcrpy tape for this test ({self.names()} does not exist), "
            f"asked for {sent.describe()}"
        )
        # A client that retries what got no answer asks again: named once.
        if why not in self.unmatched:
            self.unmatched.append(why)
        return None

    def result(self) -> dict[str, Any]:
        unknown = sorted(set(self.match_on) - KNOWN_MATCHERS)
        return {
            "tapes": [self.shown(p) for p in self.paths],
            "match_on": list(self.match_on),
            "matchers_not_applied": unknown,
            "adopted": self.adopted,
            "unmatched": self.unmatched,
            "refused": self.refused,
            "errors": self.errors,
            "unused_interactions": sum(1 for i in self.interactions if not i.used),
        }


class TapeServer:
    """The loopback server every route of the adopting proxy points at."""

    def __init__(self, vendors: dict[str, Vendor]) -> None:
        self.vendors = vendors
        self.lock = threading.Lock()
        self.tape: Tape | None = None
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self.server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self.thread = threading.Thread(
            target=server.serve_forever, name="cassette-adopt", daemon=True
        )
        self.thread.start()

    def route_url(self, route: str) -> str:
        """The upstream the proxy gets for `route`: the vendor's base path kept, so the proxy
        joins it with the request path as it would join the vendor's."""
        return f"{self.url}{ROUTE_PREFIX}{route}{self.vendors[route].base_path}"

    def begin(self, tape: Tape) -> None:
        tape.load()
        with self.lock:
            self.tape = tape

    def end(self) -> dict[str, Any] | None:
        with self.lock:
            tape, self.tape = self.tape, None
        return tape.result() if tape is not None else None

    def peek(self) -> dict[str, Any] | None:
        with self.lock:
            return self.tape.result() if self.tape is not None else None

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(owner: TapeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _refuse(self, why: str, *, forwarded: bool = True) -> None:
            # A request the proxy forwarded: the connection is closed unanswered. The proxy
            # records error answers in adopt (a tape's 429 is the vendor's answer), and an
            # answer from here would be one; no answer is an upstream failure, which it never
            # records. A vendor can send no such signal that forges or hides a recording: not
            # answering is all it means. The plugin fails the test with `why` either way.
            if forwarded:
                self.close_connection = True
                return
            text = f"cassette adopt: {why}\n".encode()
            self._reply(NO_MATCH_STATUS, [("content-type", "text/plain; charset=utf-8")], text)

        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            with owner.lock:
                tape = owner.tape
                if not parts.path.startswith(ROUTE_PREFIX) or self.command == "CONNECT":
                    # A client that bypassed the base URL (the proxy variables point here):
                    # refused, never sent on.
                    target = self.path if self.command != "CONNECT" else f"CONNECT {self.path}"
                    why = f"a request bypassed the base URL ({redact(target)}) and was refused"
                    if tape is not None:
                        tape.refused.append(why)
                    self.close_connection = True
                    return self._refuse(why, forwarded=False)
                route, _, rest = parts.path[len(ROUTE_PREFIX) :].partition("/")
                vendor = owner.vendors.get(route)
                if vendor is None:
                    return self._refuse(f"unknown route {route!r}")
                sent = Sent(
                    method=self.command,
                    scheme=vendor.scheme,
                    host=vendor.host,
                    port=vendor.port,
                    path="/" + rest,
                    query=parts.query,
                    body=body,
                    headers=_headers({k: self.headers.get_all(k) for k in self.headers}),
                )
                if tape is None:
                    return self._refuse(f"{sent.describe()} was sent outside any test")
                recorded = tape.answer(sent)
            if recorded is None:
                return self._refuse("no interaction of the tape matches")
            self._reply(recorded.status, recorded.response_headers, recorded.response_body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle
        do_CONNECT = _handle

    return Handler


def tape_paths(directory: str, name: str) -> list[Path]:
    """The default tape of a test (pytest-recording adds `.yaml`)."""
    return [Path(directory) / (name if name.endswith(".yaml") else f"{name}.yaml")]


def default_cassette_name(cls: type | None, name: str) -> str:
    """pytest-recording's default tape name of a test."""
    full = f"{cls.__name__}.{name}" if cls is not None else name
    for ch in r"<>?%*:|\"'/\\":
        full = full.replace(ch, "-")
    return full


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
