"""A stand-in for pytest-recording while it is turned off (`-p no:recording`, or not installed):
its hook specification (`pytest_recording_configure`), its markers (`vcr`, `block_network`,
`default_cassette`, `allowed_hosts`), its command-line options and its fixtures (`vcr`,
`vcr_config`, `vcr_cassette_dir`, `default_cassette_name`, `record_mode`, ...), as
pytest-recording defines them, so that a suite written for it collects unchanged under
`--strict-markers` and `filterwarnings = error` while cassette answers its requests.

The `vcr` fixture of a test with the `vcr` marker is a `Tape`: vcrpy's cassette attributes
that tests read (`requests`, `play_count`, `all_played`, `record_mode`, `len()`), answered from
the proxy's own record of the test's requests (asked when read, never copied beforehand).
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlparse

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from cassette_cli._proxy import Proxy

# pytest-recording's entry point name (`-p no:recording` turns it off).
PLUGIN = "recording"
NAME = "cassette_cli_recording"
MARKERS = (
    "vcr: a pytest-recording tape; cassette-cli stands in while pytest-recording is off",
    "block_network: pytest-recording's; cassette's proxy refuses what bypasses it",
    "default_cassette: pytest-recording's: overrides the default tape name",
    "allowed_hosts: pytest-recording's: hosts a blocked network still reaches",
)
# pytest-recording's record modes, and what cassette's modes stand for in vcrpy's terms.
RECORD_MODES = ("once", "new_episodes", "none", "all", "rewrite")
VCR_MODES = {"replay": "none", "adopt": "none", "record": "all", "auto": "new_episodes"}


class Hooks:
    """pytest-recording's hook specification (its `hooks.py`)."""

    @pytest.hookspec
    def pytest_recording_configure(self, config: pytest.Config, vcr: object) -> None:
        """Called with a vcrpy `VCR` (here, a `Registrations`) before a test's tape is used."""


def absent_for_good(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Whether pytest-recording will not be loaded in this run: turned off, or not installed
    (known when this plugin's options are added: `-p` was read before entry points)."""
    if pluginmanager.is_blocked(PLUGIN):
        return True
    if pluginmanager.has_plugin(PLUGIN):
        return False
    return importlib.util.find_spec("pytest_recording") is None


def add_options(parser: pytest.Parser) -> None:
    """pytest-recording's options, so that `addopts = --record-mode=none` still parses."""
    group = parser.getgroup(PLUGIN)
    group.addoption("--record-mode", action="store", default=None, choices=RECORD_MODES)
    group.addoption("--block-network", action="store_true", default=False)
    group.addoption("--allowed-hosts", action="store", default=None)
    group.addoption("--disable-recording", action="store_true", default=False)


def stand_in(config: pytest.Config) -> bool:
    """Stands in when pytest-recording (or pytest-vcr, which owns the same names) is not
    active: its hook specification, markers and fixtures. Returns whether it did."""
    manager = config.pluginmanager
    if manager.has_plugin(PLUGIN) or manager.has_plugin("vcr"):
        return False
    caller = getattr(manager.hook, "pytest_recording_configure", None)
    if caller is None or caller.spec is None:
        # A conftest implementing the hook is checked against it after collection.
        manager.add_hookspecs(Hooks)
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    if not manager.has_plugin(NAME):
        import cassette_cli._recording_fixtures as fixtures

        manager.register(fixtures, NAME)
    return True


# vcrpy's `VCR` settings a hook may set on the instance it is given (`vcr.match_on = [...]`):
# vcrpy takes them as defaults that `vcr_config` and the `vcr` marker override.
SETTINGS = (
    "serializer",
    "match_on",
    "before_record_request",
    "before_record",
    "filter_headers",
    "filter_query_parameters",
    "filter_post_data_parameters",
    "ignore_hosts",
    "ignore_localhost",
    "decode_compressed_response",
)


class Registrations:
    """What `pytest_recording_configure(config, vcr)` registers on vcrpy's `VCR`: serializers,
    matchers and a persister, kept for the adopt run; any other attribute is kept as set, and
    vcrpy's settings among them (`SETTINGS`) are the suite's defaults (`defaults`)."""

    def __init__(self, record_mode: str, cassette_library_dir: str) -> None:
        self.record_mode = record_mode
        self.cassette_library_dir = cassette_library_dir
        self.serializers: dict[str, object] = {}
        self.matchers: dict[str, Callable[..., Any]] = {}
        self.persister: Any = None

    def register_serializer(self, name: str, serializer: object) -> None:
        self.serializers[name] = serializer

    def register_matcher(self, name: str, matcher: Callable[..., Any]) -> None:
        self.matchers[name] = matcher

    def register_persister(self, persister: object) -> None:
        self.persister = persister

    def defaults(self) -> dict[str, Any]:
        """vcrpy's settings the hook set on the instance, which `vcr_config` overrides."""
        return {name: value for name, value in vars(self).items() if name in SETTINGS}


class Headers(dict[str, str]):
    """vcrpy's request headers: one value a name, looked up in any case."""

    def __getitem__(self, name: str) -> str:
        for key, value in self.items():
            if key.lower() == name.lower():
                return value
        raise KeyError(name)

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None


class Request:
    """A request the test sent, as vcrpy's `Request` has it: `method`, `uri` (the vendor's
    URL), `headers`, `body` (bytes), and `scheme`, `host`, `port`, `path`, `query`, `url`."""

    def __init__(self, method: str, uri: str, headers: dict[str, str], body: bytes) -> None:
        self.method = method
        self.uri = uri
        self.headers = Headers(headers)
        self.body = body

    @property
    def url(self) -> str:
        return self.uri

    @property
    def scheme(self) -> str:
        return urlparse(self.uri).scheme

    @property
    def host(self) -> str | None:
        return urlparse(self.uri).hostname

    @property
    def port(self) -> int | None:
        parsed = urlparse(self.uri)
        return parsed.port or {"https": 443, "http": 80}.get(parsed.scheme)

    @property
    def path(self) -> str:
        return urlparse(self.uri).path

    @property
    def query(self) -> list[tuple[str, str]]:
        return sorted(parse_qsl(urlparse(self.uri).query))

    def __repr__(self) -> str:
        return f"<Request ({self.method}) {self.uri}>"


class Tape:
    """The `vcr` fixture of a marked test: vcrpy's cassette, as far as tests read it, from the
    proxy's record of this test's requests (each read asks the proxy)."""

    def __init__(self, proxy: Proxy, scope: str, record_mode: str, path: str) -> None:
        self._proxy = proxy
        self._scope = scope
        self.record_mode = record_mode
        self.path = path

    def _seen(self) -> dict[str, Any]:
        return self._proxy.control("GET", self._scope, query="requests=true")

    @property
    def requests(self) -> list[Request]:
        """The requests this test sent, in order, as the vendor would have seen them (without
        credentials)."""
        import base64

        return [
            Request(
                str(r["method"]),
                str(r["uri"]),
                {str(k): str(v) for k, v in (r.get("headers") or {}).items()},
                base64.b64decode(str(r.get("body") or "")),
            )
            for r in self._seen().get("sent") or []
        ]

    @property
    def play_count(self) -> int:
        """How many of its requests were answered from a recording (a tape, in adopt)."""
        tally = self._seen()
        return int(tally.get("hits", 0)) + len((tally.get("adopt") or {}).get("adopted") or ())

    @property
    def all_played(self) -> bool:
        """Whether every recording it made in an earlier run was asked for (in adopt: every
        interaction of its tapes)."""
        tally = self._proxy.control("GET", self._scope, query="unused=true")
        adopt = tally.get("adopt")
        if adopt is not None:
            return not int(adopt.get("unused_interactions", 0))
        return not tally.get("unused")

    def __len__(self) -> int:
        return len(self._seen().get("sent") or [])

    def __repr__(self) -> str:
        return f"<cassette stand-in for vcrpy's cassette {self.path}>"


def record_mode(config: pytest.Config, session_mode: str | None) -> str:
    """`--record-mode` when given, else what cassette's mode stands for in vcrpy's terms."""
    asked = getattr(config.option, "record_mode", None)
    if asked:
        return str(asked)
    return VCR_MODES.get(session_mode or "", "none")


def cassette_dir(node_path: str) -> str:
    """pytest-recording's `vcr_cassette_dir`: `cassettes/<module>` beside the test module."""
    folder, name = os.path.split(node_path)
    return os.path.join(folder, "cassettes", os.path.splitext(name)[0])
