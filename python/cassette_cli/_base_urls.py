"""The base-URL variables of a test process whose requests are caught in process (`_intercept.py`):
its Python code sees where each client goes without cassette (`OPENAI_BASE_URL` is
`https://api.openai.com/v1`, or the user's own endpoint the proxy took as the route's upstream),
so a client following them sends the vendor's URL, the channel routes that host, and a test
that snapshots a request URL sees what it saw under vcrpy. The proxy variables (`HTTPS_PROXY`,
`NO_PROXY`, ...) are as the user had them, most often unset: every request is caught before a
proxy setting is read, and httpx builds a transport with its own TLS context (about 20 ms of
loading CA certificates) for each proxy variable set, in every client a test makes. Its child
processes get the proxy's URLs instead: a child cassette does not catch in process (a Node 20
`fetch` ignores the proxy variables) must still reach the proxy, never the vendor.

Both at once: only Python's `os.environ` mapping names the vendors; the process's C environment
keeps the proxy's URLs (what `os.system`, `os.exec*` and C code's `getenv` read), and
`subprocess.Popen` gives a child the proxy's URL in each variable its environment holds as the
test process has it (`env=None`, `env=os.environ`, `env={**os.environ, ...}`); a value the test
set itself is the test's. Code that writes a variable's vendor URL back into `os.environ`
(monkeypatch's undo) writes the proxy's URL into the C environment (`os.putenv` wrapped).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cassette_cli._intercept import PROXY_URL_ENV

if TYPE_CHECKING:
    from _typeshed import StrOrBytesPath  # what os.putenv takes

# What `cassette exec` and the plugin give a Python process whose requests are caught in
# process: the base-URL variables as it should see them (the proxy's `in_process`), JSON.
IN_PROCESS_URLS_ENV = "CASSETTE_IN_PROCESS_URLS"

# `env` among Popen's positional parameters after `args`.
_ENV_AT = 9

_UNDO: list[Callable[[], None]] = []
# Each variable's value in Python's view (None: unset there) and the proxy's, a child's.
_VALUES: dict[str, tuple[str | None, str]] = {}
# The same as `os.environ` encodes them, for what `os.putenv` is given (pytest sets
# PYTEST_CURRENT_TEST three times a test): key to (Python's value, the proxy's).
_ENCODED: dict[Any, tuple[Any, Any]] = {}


def install(in_process: Mapping[str, str | None], children: Mapping[str, str]) -> None:
    """Has `os.environ` name `in_process`'s values, and children `children`'s (the proxy's) for
    the same variables; the variables hold `children`'s values when this is called."""
    # Here, not at the top: `cassette_cli.pth` imports this module in every Python process
    # that names a channel.
    import subprocess

    uninstall()
    _VALUES.update(
        {name: (value, children[name]) for name, value in in_process.items() if name in children}
    )
    encode, encode_value = os.environ.encodekey, os.environ.encodevalue
    _ENCODED.update(
        {
            encode(name): (encode_value(inside), encode_value(child))
            for name, (inside, child) in _VALUES.items()
            if inside is not None
        }
    )
    for name, (value, _) in _VALUES.items():
        _python_only(name, value)
    init: Callable[..., None] = subprocess.Popen.__init__

    def starting(self: object, args: object, *rest: object, **kwargs: object) -> None:
        if len(rest) > _ENV_AT:
            rest = (*rest[:_ENV_AT], _for_child(rest[_ENV_AT]), *rest[_ENV_AT + 1 :])
        else:
            kwargs["env"] = _for_child(kwargs.get("env"))
        init(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = starting  # type: ignore[method-assign]
    # `os.environ[name] = value` calls the os module's putenv, looked up when it runs.
    putenv = os.putenv

    def c_value(key: StrOrBytesPath, value: StrOrBytesPath) -> None:
        putenv(key, _c_value(key, value))

    os.putenv = c_value

    def undo() -> None:
        subprocess.Popen.__init__ = init  # type: ignore[method-assign]
        os.putenv = putenv

    _UNDO.append(undo)


def install_from_env() -> None:
    """In a Python process `cassette exec` (or a test the plugin runs) started with the channel:
    the variables CASSETTE_IN_PROCESS_URLS names (JSON) name the vendors in `os.environ`, where
    each still holds the proxy's URL (one the process was given otherwise is its own)."""
    text = os.environ.get(IN_PROCESS_URLS_ENV)
    proxy = os.environ.get(PROXY_URL_ENV)
    if not text or not proxy:
        return
    import json

    try:
        urls = json.loads(text)
    except ValueError:
        return  # not ours to judge: the proxy's URLs stay, the HTTP path
    if not isinstance(urls, dict):
        return
    from urllib.parse import urlsplit

    # The forward proxy's URL, in the proxy variables: the proxy's origin.
    parts = urlsplit(proxy)
    origin = f"{parts.scheme}://{parts.netloc}"

    def cassettes(value: str) -> bool:
        return value.startswith(proxy + "/") or value == origin

    children = {
        name: os.environ[name]
        for name, value in urls.items()
        if (value is None or isinstance(value, str)) and cassettes(os.environ.get(name, ""))
    }
    install({name: urls[name] for name in children}, children)


def http_path() -> None:
    """Python code too sees the proxy's URLs from now on: a client library cassette could not
    patch (`_intercept.py`) takes the HTTP path, through the base URLs, instead of the
    vendor's URL."""
    for name, (_, child) in _VALUES.items():
        os.environ[name] = child
    _VALUES.clear()
    _ENCODED.clear()


def uninstall() -> None:
    """Puts `subprocess.Popen` back; the variables are the plugin's to restore."""
    while _UNDO:
        _UNDO.pop()()
    _VALUES.clear()
    _ENCODED.clear()


def _python_only(name: str, value: str | None) -> None:
    """Sets `name` in `os.environ` (removes it: None) without touching the C environment."""
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        if value is None:
            data.pop(os.environ.encodekey(name), None)
        else:
            data[os.environ.encodekey(name)] = os.environ.encodevalue(value)
    # An `os.environ` without CPython's layout: left at the proxy's URL (the HTTP path).


def _c_value(key: StrOrBytesPath, value: StrOrBytesPath) -> StrOrBytesPath:
    """The value the C environment gets for `key` (as `os.environ` encodes both): the proxy's
    URL in place of a variable's vendor URL, which Python code alone may see."""
    known = _ENCODED.get(key)
    return known[1] if known is not None and value == known[0] else value


def _for_child(env: object) -> object:
    if not _VALUES or not (env is None or isinstance(env, Mapping)):
        return env
    source: Mapping[Any, Any] = os.environ if env is None else env
    given = dict(source)
    derived = PROXY_URL_ENV in given
    changed = {
        name: child
        for name, (value, child) in _VALUES.items()
        # A variable unset in Python's view goes back into an environment derived from
        # os.environ (it names the proxy), not into one the test built from nothing.
        if (given.get(name) == value if value is not None else derived and name not in given)
    }
    if not changed:
        return env
    given.update(changed)  # a copy: the caller's mapping stays as it was
    return given
