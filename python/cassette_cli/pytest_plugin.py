"""The pytest plugin of cassette-cli (entry point `pytest11`: `cassette_cli`).

Where a project opted in (a `cassette.toml` found from the rootdir upward, `CASSETTE_CONFIG`, or
the `cassette_mode` ini key), a plain `pytest` runs every test against a `cassette proxy` in
replay mode: the proxy is started before conftest files and test modules are imported, and the
variables `cassette exec` sets (base URLs, placeholder keys, proxy variables) are applied to
`os.environ`. Each test is named to the proxy through its control endpoint, so every request,
miss, recording and bypass is counted for it; a test during which a request missed, a bypass
was refused or the proxy failed, fails with the proxy's explanation, whatever the application
did with the error. `--cassette=off`, or no opt-in, leaves pytest exactly as it was.
`--cassette=adopt` has the proxy answer misses from each test's own vcrpy tapes instead of a
vendor (`cassette proxy --adopt`), store them, and report the drift between tape and today's
requests; `_adopt.py` names each test's tapes.

Under pytest-xdist every worker starts its own proxy (in its own start-up, like a plain run):
a worker runs one test at a time, so the proxy's default scope is that test, and traffic that
bypassed the base URL, which carries no path to name a scope, is still counted for the right
test. The controller's proxy answers only the controller's own code (conftest files it imports);
it gathers the workers' counts. docs/pytest.md says more.

Names are our own (`--cassette`, ini `cassette_mode`, marker and fixture `cassette_cli`):
`--cassette-mode` and a `cassette` marker or fixture belong to other plugins.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from cassette_cli._failures import fail, failure, one_line, outside_tests
from cassette_cli._fixture import COUNTS, CassetteTest, Counts

__all__ = ["CassetteTest", "Counts"]

if TYPE_CHECKING:
    from collections.abc import Callable, Generator

    from cassette_cli._proxy import Proxy
    from cassette_cli._recording import Tape

MODES = ("replay", "record", "auto", "off")
# A session mode only (never a marker's): the proxy answers misses from each test's own vcrpy
# tapes and stores them as cassettes (`_adopt.py`).
ADOPT = "adopt"
SESSION_MODES = (*MODES, ADOPT)
ADOPT_REPORT = Path(".cassette") / "adopt-report.json"
# The modes that call the upstream: a test may ask for one only when the session records.
CALLING_MODES = ("record", "auto", "off")
NAME = "cassette_cli"
MARKER_KWARGS = ("mode", "sequence", "strict")
# The proxy's scope for requests whose path names none: with one proxy per process and one
# test at a time, the test running.
SCOPE = "default"
MODE_ENV = "CASSETTE_MODE"
# Set by `cassette exec` (and by this plugin for the tests): a proxy is already in front.
PROXY_URL_ENV = "CASSETTE_PROXY_URL"
CONFIG_ENV = "CASSETTE_CONFIG"
# Names the proxy this plugin started, so that a pytest-xdist worker tells its controller's
# variables from `cassette exec`'s.
OWN_PROXY_ENV = "CASSETTE_PYTEST_PROXY"
SETTINGS_FILE = "cassette.toml"


@dataclasses.dataclass
class _Session:
    """The plugin's state for one pytest process."""

    role: str  # "single", "worker" or "controller" (pytest-xdist's, which runs no test)
    mode: str | None  # as asked for (--cassette, ini, CASSETTE_MODE); None: cassette.toml decides
    origin: str  # where the opt-in and the mode came from, for the header
    proxy: Proxy | None = None
    startup_ms: float = 0.0
    env_before: dict[str, str | None] = dataclasses.field(default_factory=dict)
    # pytest-xdist's controller until its workers are started: the environment as the user had
    # it, real keys included (each worker's own proxy must read them, and the user's own
    # endpoints), and how the plugin changed it. Dropped by every other process at configure.
    spawn_env: tuple[dict[str, str | None], Callable[[], object]] | None = None
    began_any: bool = False
    # The tests that missed (node id, one line each) and the counts of every test.
    missed: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    totals: dict[str, int] = dataclasses.field(default_factory=dict)
    # Requests made outside any test (module-level code, session fixtures between tests).
    strays: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # Tests that ended without a request through cassette (the proxy says so on its pipe).
    idle: list[str] = dataclasses.field(default_factory=list)
    modes_seen: set[str] = dataclasses.field(default_factory=set)
    # Adopt: what each test's tape answered, by node id (gathered from workers' reports too).
    adopted: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    adopt_report: Path | None = None
    # Adopt: how each test that did not pass ended, until its teardown's report arrives.
    outcomes: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)

    @property
    def session_mode(self) -> str:
        if self.mode == ADOPT:
            return ADOPT
        if self.proxy is not None:
            return str(self.proxy.ready.get("mode", self.mode or "replay"))
        return self.mode or "replay"


@dataclasses.dataclass
class _Test:
    """One test's scope on the proxy, and what of its tape server's notes was reported already
    (the proxy keeps track of what of its tally was)."""

    nodeid: str
    mode: str
    strict: bool
    sequence: bool
    tally: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Adopt: the scope's begin, sent once the test's tapes are known, and what of the tapes'
    # problems was reported already.
    begin: dict[str, Any] = dataclasses.field(default_factory=dict)
    adopt_unmatched: int = 0
    adopt_errors: int = 0
    # Adopt: what of the suite's vcrpy settings is not honoured, and its cost.
    not_honoured: list[str] = dataclasses.field(default_factory=list)


_SESSION = pytest.StashKey[_Session]()
# Whether this plugin stands in for pytest-recording (`_recording.py`).
_STANDS_IN = pytest.StashKey[bool]()
_TEST = pytest.StashKey[_Test]()


# ------------------------------------------------------------------------------------------------
# Options, and whether this run is ours


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    from cassette_cli import _recording

    if _recording.absent_for_good(pluginmanager):
        _recording.add_options(parser)
    group = parser.getgroup(NAME, "cassette (record and replay LLM API calls; cassette-cli)")
    group.addoption(
        "--cassette",
        dest="cassette_cli_mode",
        choices=SESSION_MODES,
        default=None,
        metavar="MODE",
        help="replay (the default where cassette.toml exists), record, auto, off (the plugin "
        "does nothing), or adopt (answer from each test's vcrpy tape, store cassettes, report "
        "drift; never calls a vendor). Wins over the ini key cassette_mode and CASSETTE_MODE.",
    )
    parser.addini(
        "cassette_mode",
        "cassette's mode for this suite (replay, record, auto, off); setting it turns the "
        "cassette-cli plugin on even without a cassette.toml",
        default="",
    )


def _asked_mode(config: pytest.Config) -> tuple[str | None, str]:
    """The mode asked for and where (--cassette > ini cassette_mode > CASSETTE_MODE)."""
    option = getattr(config.known_args_namespace, "cassette_cli_mode", None) or config.getoption(
        "cassette_cli_mode", None
    )
    if option:
        return str(option), "--cassette"
    ini = str(config.getini("cassette_mode") or "").strip()
    if ini:
        if ini not in SESSION_MODES:
            raise pytest.UsageError(
                f"cassette_mode = {ini!r} in {config.inipath}: expected one of "
                f"{', '.join(SESSION_MODES)}"
            )
        return ini, f"cassette_mode in {_ini_name(config)}"
    env = os.environ.get(MODE_ENV, "").strip()
    if env:
        if env not in SESSION_MODES:
            raise pytest.UsageError(
                f"{MODE_ENV}={env!r}: expected one of {', '.join(SESSION_MODES)}"
            )
        return env, MODE_ENV
    return None, ""


def _ini_name(config: pytest.Config) -> str:
    return config.inipath.name if config.inipath else "the ini file"


def _under_ci() -> bool:
    """Whether this runs under CI, as the binary reads it: `CI` set to anything but empty or a
    spelling of no (GitHub Actions, GitLab CI, CircleCI and Buildkite set it)."""
    from cassette_cli._proxy import FALSE

    value = os.environ.get("CI")
    return value is not None and value.strip().lower() not in FALSE


def _job_asks(config: pytest.Config) -> tuple[str | None, str | None]:
    """What the CI job itself asks for: the last `--cassette` and `-o cassette_mode=` of its
    command line and of PYTEST_ADDOPTS (both the job's), never the ini file's `addopts`, which
    pytest puts in front of them and `invocation_params.args` leaves out."""
    import shlex

    try:
        env_args = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    except ValueError:
        env_args = []
    args = [*env_args, *(str(a) for a in config.invocation_params.args)]
    option: str | None = None
    override: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        value: str | None = None
        if arg in ("--cassette", "-o", "--override-ini") and i + 1 < len(args):
            value, i = args[i + 1], i + 1
        elif arg.startswith(("--cassette=", "--override-ini=")):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-o") and not arg.startswith("--"):
            value = arg[2:].removeprefix("=")
        if value is not None:
            if arg.startswith("--cassette"):
                option = value.strip()
            else:
                name, _, ini = value.partition("=")
                if name.strip() == "cassette_mode":
                    override = ini.strip()
        i += 1
    return option, override


def _calling_from_a_file(config: pytest.Config, mode: str, origin: str) -> None:
    """Under CI, refuses a mode that calls a vendor when a pytest config file alone chose it (the
    ini key `cassette_mode`, or `--cassette` in its `addopts`), as the binary refuses one from
    cassette.toml: a pull request could otherwise turn a replay job into one that sends the job's
    keys to the upstream its own cassette.toml names. The job's command line, PYTEST_ADDOPTS and
    CASSETTE_MODE still choose any mode. `off` and `adopt` start nothing that calls a vendor
    (`off` leaves the run as if cassette were not installed, as taking out cassette.toml would)."""
    calling = ("record", "auto")
    if mode not in calling or not _under_ci():
        return
    option, override = _job_asks(config)
    # A job that asks for either calling mode itself has agreed to send its keys.
    if any(asked in calling for asked in (option, override, os.environ.get(MODE_ENV, "").strip())):
        return
    where = (
        f"--cassette={mode} comes from addopts in {_ini_name(config)}"
        if origin == "--cassette"
        else f"cassette_mode = {mode!r} in {_ini_name(config)}"
    )
    raise pytest.UsageError(
        f"cassette: {where}, and under CI (the CI variable is set) a pytest config file alone "
        f"never turns replay into a mode that calls an upstream: pass --cassette={mode} on the "
        f"CI job's command line (or set {MODE_ENV}={mode} in the job) if it is meant to call "
        "one, or take it out of the file"
    )


def _settings_file(rootpath: Path) -> Path | None:
    """The cassette.toml the CLI will read when started in the rootdir."""
    named = os.environ.get(CONFIG_ENV)
    if named:
        return Path(named)
    for folder in (rootpath, *rootpath.parents):
        candidate = folder / SETTINGS_FILE
        if candidate.is_file():
            return candidate
    return None


def _wants(config: pytest.Config) -> _Session | None:
    """This run's session state, or None when the plugin stays out of it."""
    namespace = config.known_args_namespace
    if getattr(namespace, "help", False) or getattr(namespace, "version", False):
        return None
    mode, origin = _asked_mode(config)
    if mode == "off":
        return None
    outer = os.environ.get(PROXY_URL_ENV)
    if outer and outer != os.environ.get(OWN_PROXY_ENV):
        # Under `cassette exec`: its proxy is in front already, and a second one would take the
        # traffic it was started to see. (A pytest-xdist worker inherits its controller's
        # variables, which name the controller's proxy as this plugin's own.)
        return None
    if mode is not None:
        _calling_from_a_file(config, mode, origin)
    settings = _settings_file(config.rootpath)
    ini_set = bool(str(config.getini("cassette_mode") or "").strip())
    explicit = origin == "--cassette"
    if settings is None and not ini_set and not explicit:
        return None
    if settings is not None and not origin:
        origin = str(settings)
    elif settings is not None:
        origin = f"{origin}, {settings}"
    role = "single"
    if os.environ.get("PYTEST_XDIST_WORKER") and not hasattr(config, "workerinput"):
        role = "worker"
    return _Session(role=role, mode=mode, origin=origin)


def _distributing(config: pytest.Config) -> bool:
    """Whether this process is pytest-xdist's controller, which runs no test itself."""
    if hasattr(config, "workerinput") or os.environ.get("PYTEST_XDIST_WORKER"):
        return False
    option = config.option
    return getattr(option, "dist", "no") != "no" and bool(getattr(option, "tx", None))


# ------------------------------------------------------------------------------------------------
# Start and stop


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # Before conftest files are imported: a client a conftest builds at import time reads the
    # base URL then.
    session = _wants(early_config)
    if session is None:
        return
    early_config.stash[_SESSION] = session
    _LIVE.append(session)
    early_config.add_cleanup(lambda: _LIVE.remove(session))
    _start(early_config, session)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{NAME}(mode=None, sequence=False, strict=False): cassette for this test: its own mode "
        "(replay, record, auto, off; never one that calls the vendor in a replaying run), "
        "repeats of "
        "one request answered in sequence, and strict: fail when recordings of this test go unused",
    )
    if _asked_mode(config)[0] != "off":
        from cassette_cli._recording import stand_in

        # pytest-recording's hook, markers and fixtures while it is off: no conftest is edited.
        config.stash[_STANDS_IN] = stand_in(config)
    session = config.stash.get(_SESSION, None)
    if session is not None and session.mode == ADOPT:
        config.pluginmanager.register(_AdoptFixture(), "cassette_cli_adopt")
    if session is not None and _distributing(config):
        # Its proxy answers only what the controller's own code sends (a conftest that calls out
        # when imported); every worker starts one of its own.
        session.role = "controller"
    elif session is not None:
        session.spawn_env = None  # no copy of a real key where test code runs


def _start(config: pytest.Config, session: _Session) -> None:
    from cassette_cli._proxy import Proxy, ProxyError, apply_env, monotonic_ms

    args = ["--mode", session.mode] if session.mode else []
    started = time.perf_counter()
    if session.mode == ADOPT:
        args = _adopt_args()
    if _in_process():
        # The in-process transports' way in (cassette_cli._intercept): an owner-only socket. In
        # adopt too: a download of a host no route serves reaches the proxy only this way, to
        # be answered from the test's tape and stored.
        args = [*args, "--channel"]
    try:
        proxy = Proxy(args, cwd=str(config.rootpath), pipe=_wants_pipe(session))
    except (ProxyError, FileNotFoundError) as error:
        raise pytest.UsageError(f"cassette: {error}") from error
    session.startup_ms = monotonic_ms(started)
    session.proxy = proxy
    changes, unset = proxy.env_changes()
    changes[OWN_PROXY_ENV] = proxy.base
    channel = proxy.ready.get("channel")
    in_process: dict[str, str | None] = {}
    if channel:
        from cassette_cli import _base_urls, _intercept, _test_context

        # The test's subprocesses install the same transports (cassette_cli.pth), and a Python
        # one sees the vendors' URLs as the test process does.
        changes[_intercept.CHANNEL_ENV] = channel
        in_process = dict(proxy.ready.get("in_process") or {})
        changes[_base_urls.IN_PROCESS_URLS_ENV] = json.dumps(in_process)
        _intercept.install(channel, own=proxy.url)
        _test_context.install()

    def apply() -> dict[str, str | None]:
        before = apply_env(changes, unset)
        if in_process:
            # Python code sees the vendors' URLs (the channel routes them); children, the
            # proxy's.
            _base_urls.install(in_process, {n: changes[n] for n in in_process if n in changes})
        return before

    before = apply()
    session.spawn_env = (before, apply)
    # What is put back when the session ends, less every credential: a key variable the proxy
    # replaced with its placeholder, or had removed, keeps no copy of its real value where test
    # code could read it (the proxy alone holds it); it stays as the tests saw it.
    session.env_before = {
        name: value
        for name, value in before.items()
        if name not in unset and changes.get(name) != PLACEHOLDER_KEY
    }
    config.add_cleanup(lambda: _stop(session))


def _in_process() -> bool:
    """Whether this process's HTTP clients are caught in process (POSIX; unless
    CASSETTE_IN_PROCESS is `off`, which leaves only the base-URL variables and the HTTP path)."""
    from cassette_cli._proxy import env_flag

    try:
        asked = env_flag("CASSETTE_IN_PROCESS", True)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from error
    return asked and sys.platform != "win32"


def _wants_pipe(session: _Session) -> bool:
    """Whether tests begin and end on the proxy's control pipe: unless CASSETTE_CONTROL_PIPE is
    `off` (the control endpoint alone, what Windows gets), or in adopt, which reads every
    test's tally anyway."""
    from cassette_cli._proxy import env_flag

    try:
        asked = env_flag("CASSETTE_CONTROL_PIPE", True)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from error
    return asked and session.mode != ADOPT


def _adopt_args() -> list[str]:
    """The proxy's arguments in adopt: auto (a stored cassette is kept and replayed, a miss is
    answered from the test's vcrpy tapes and stored create-only), `--adopt` (the tapes stand for
    every route's upstream: nothing connects anywhere, bypasses are refused)."""
    # --mode: CASSETTE_MODE may say adopt, which only this plugin knows. --record-errors: a
    # tape's error answers (a 429 or 500 a test expects, a stream ending in an error event) are
    # the vendor's answers, stored like any. A request no interaction answers gets no answer,
    # never one that is stored. --exact-streams: a tape's stream is kept event for event, as
    # vcrpy replayed it (a test snapshotting chunks passes in the replay after), unless
    # CASSETTE_EXACT_STREAMS says no.
    from cassette_cli._proxy import env_flag

    try:
        exact = env_flag("CASSETTE_EXACT_STREAMS", True)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from error
    return ["--mode", "auto", "--record-errors", "--adopt", *(["--exact-streams"] if exact else [])]


def _stop(session: _Session) -> None:
    from cassette_cli import _base_urls, _intercept, _test_context
    from cassette_cli._proxy import restore_env

    proxy, session.proxy = session.proxy, None
    _base_urls.uninstall()
    _intercept.uninstall()
    _test_context.uninstall()
    restore_env(session.env_before)
    if proxy is None:
        return
    status = proxy.stop()
    # The proxy's own counters and bypass lines are in the summary already; what else it said
    # (an index it could not update, a recording that failed) is worth showing.
    worth = [
        line
        for line in proxy.log_text().splitlines()
        if "warning" in line.lower() or "failed" in line.lower()
    ]
    worth = [line for line in worth if "cassette miss" not in line and "stopped;" not in line]
    if status not in (0, None) or worth:
        print(f"cassette proxy (exit {status}):", *worth, sep="\n  ", file=sys.stderr)


@pytest.hookimpl(wrapper=True)
def pytest_sessionstart(session: pytest.Session) -> Generator[None, None, None]:
    # pytest-xdist's controller starts its workers here: each with the environment as the user
    # had it, so that each worker's own proxy reads the real keys and the user's own endpoints
    # (it read the controller's placeholders and proxy URLs before: a recording under `-n`
    # sent the key `cassette` to the vendor). The controller's own changes are put back after.
    state = session.config.stash.get(_SESSION, None)
    spawn = state.spawn_env if state is not None and state.role == "controller" else None
    if state is None or spawn is None:
        return (yield)
    from cassette_cli import _base_urls
    from cassette_cli._proxy import restore_env

    state.spawn_env = None
    original, apply = spawn
    _base_urls.uninstall()
    restore_env(original)
    try:
        return (yield)
    finally:
        apply()


def pytest_report_header(config: pytest.Config) -> str | list[str] | None:
    session = config.stash.get(_SESSION, None)
    if session is None:
        return _why_off(config)
    if session.proxy is None:
        return None
    # A user's own endpoint the proxy took as a route's upstream is said where it is seen (every
    # worker's proxy takes the same).
    own = [line for line in session.proxy.log_text().splitlines() if "(your own endpoint" in line]
    if session.role == "controller":
        return [
            f"cassette: {session.session_mode}, one proxy per pytest-xdist worker "
            f"(the controller's ready in {session.startup_ms:.0f} ms; {session.origin})",
            *own,
        ]
    from cassette_cli import _intercept

    through = "" if session.proxy.piped else ", control endpoint only"
    caught = (
        "every request caught in process, base URLs at the vendors"
        if _intercept.installed()
        else "clients that read the base-URL variables"
    )
    return [
        f"cassette: {session.session_mode}, {caught}, proxy {session.proxy.url} "
        f"(ready in {session.startup_ms:.0f} ms{through}; {session.origin})",
        *own,
    ]


def _why_off(config: pytest.Config) -> str | None:
    """The header of a run cassette stays out of, saying why: a project without settings is
    otherwise silently live."""
    if hasattr(config, "workerinput"):
        return None
    mode, origin = _asked_mode(config)
    if mode == "off":
        return f"cassette: off ({origin}=off)"
    outer = os.environ.get(PROXY_URL_ENV)
    if outer and outer != os.environ.get(OWN_PROXY_ENV):
        # Its URL without the run secret's path, which is never printed.
        shown = outer.split("/_run/", 1)[0]
        return f"cassette: the proxy of `cassette exec` at {shown} answers this run"
    return (
        f"cassette: off, no {SETTINGS_FILE} found in {config.rootpath} or above "
        "(add one, or pass --cassette=MODE): requests go to the network"
    )


# ------------------------------------------------------------------------------------------------
# One test


def _marker(item: pytest.Item, session_mode: str) -> tuple[str | None, bool, bool]:
    """The marker's mode (None: the session's), sequence and strict."""
    marker = item.get_closest_marker(NAME)
    if marker is None:
        return None, False, False
    if marker.args:
        pytest.fail(
            f"@pytest.mark.{NAME} takes keywords only ({', '.join(MARKER_KWARGS)})", pytrace=False
        )
    unknown = sorted(set(marker.kwargs) - set(MARKER_KWARGS))
    if unknown:
        pytest.fail(
            f"@pytest.mark.{NAME}: unknown keyword {', '.join(unknown)}; "
            f"it takes {', '.join(MARKER_KWARGS)}",
            pytrace=False,
        )
    mode = marker.kwargs.get("mode")
    if mode is not None and mode not in MODES:
        pytest.fail(
            f"@pytest.mark.{NAME}(mode={mode!r}): expected one of {', '.join(MODES)}", pytrace=False
        )
    return (
        mode,
        bool(marker.kwargs.get("sequence", False)),
        bool(marker.kwargs.get("strict", False)),
    )


def _test_id(item: pytest.Item) -> str:
    """The test's node id as a serial run spells it: pytest-xdist's `--dist loadgroup` appends
    `@GROUP` to the ids of `xdist_group` tests, and the cassettes' provenance (`meta.test`, the
    nearest recording of the same test) must not change with how the suite was scheduled."""
    nodeid = item.nodeid
    marker = item.get_closest_marker("xdist_group")
    if marker is not None:
        group = marker.args[0] if marker.args else marker.kwargs.get("name", "")
        suffix = f"@{group}"
        if group and nodeid.endswith(suffix):
            return nodeid[: -len(suffix)]
    return nodeid


def pytest_runtest_setup(item: pytest.Item) -> None:
    session = item.config.stash.get(_SESSION, None)
    if session is None or session.proxy is None:
        return
    from cassette_cli._proxy import ProxyError

    proxy = session.proxy
    mode, sequence, strict = _marker(item, session.session_mode)
    test_id = _test_id(item)
    from cassette_cli import _test_context

    # The test's own name for its requests, which its threads and tasks send too.
    begin: dict[str, Any] = {"test": test_id, "alias": _test_context.next_alias()}
    _test_context.enter(begin["alias"])
    if mode is not None:
        begin["mode"] = mode
    if sequence:
        begin["repeats"] = "sequence"
    if item.config.stash.get(_STANDS_IN, False) and "vcr" in getattr(item, "fixturenames", ()):
        # The `vcr` fixture reads the requests the test sent from the proxy.
        begin["keep_requests"] = True
    test = _Test(
        nodeid=test_id, mode=mode or session.session_mode, strict=strict, sequence=sequence
    )
    if session.mode == ADOPT:
        # Begun by the `_cassette_cli_adopt` fixture, once the test's tapes are known. A cassette
        # another test stored answers this test only when its tape answers the same; otherwise
        # this test's answer is stored under its test-scoped key.
        test.begin = {**begin, "sharing": "own"}
        item.stash[_TEST] = test
        return
    try:
        if not session.began_any:
            session.began_any = True
            _note_strays(session, proxy.control("GET", SCOPE))
            if _piped(session):
                proxy.noticed()  # the strays' notices: read with their tally just now
        if _piped(session):
            proxy.send({"op": "begin", "scope": SCOPE, **begin})
        else:
            proxy.control("PUT", SCOPE, begin)
    except ProxyError as error:
        pytest.fail(f"cassette error: {error}", pytrace=False)
    item.stash[_TEST] = test


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, Any]:
    report = yield
    session = item.config.stash.get(_SESSION, None)
    test = item.stash.get(_TEST, None)
    if session is None or session.proxy is None or test is None:
        return report
    if call.when == "teardown":
        from cassette_cli import _test_context

        _test_context.enter(None)
    if call.when == "setup" and not report.failed:
        return report
    from cassette_cli._proxy import ProxyError

    strict = test.strict and call.when == "call" and test.mode == "replay"
    # The failure text is what no earlier phase of the test reported (the proxy keeps track).
    query = "report=true&unused=true" if strict else "report=true"
    try:
        if _piped(session) and not strict and not session.proxy.noticed():
            # No miss, error or refused bypass since the tally was last read: nothing to read.
            if call.when == "teardown":
                del item.stash[_TEST]
                session.proxy.send({"op": "end", "scope": SCOPE})
            return report
        if call.when == "teardown":
            del item.stash[_TEST]
            tally = session.proxy.control("DELETE", SCOPE, query=query)
        else:
            tally = session.proxy.control("GET", SCOPE, query=query)
    except ProxyError as error:
        # The proxy is gone or refuses: this test cannot be vouched for.
        fail(report, [f"cassette error: {error}"])
        return report
    test.tally = tally
    problems = failure(tally)
    adopted = tally.get("adopt") if session.mode == ADOPT else None
    if adopted is not None:
        from cassette_cli._adopt import refused

        # What the tapes could not answer first.
        problems = _adopt_problems(test, adopted) + problems
        if call.when == "teardown":
            adopted["refused"] = refused(tally)
            adopted["from_cassettes"] = int(tally.get("hits", 0))
            adopted["recorded"] = int(tally.get("recorded", 0))
            adopted["not_stored"] = _not_stored(session.proxy, tally)
            adopted["keys"] = list(tally.get("keys") or ())
            adopted["not_honoured"] = test.not_honoured
            report.cassette_cli_adopt = adopted
    if problems:
        fail(report, problems)
        report.cassette_cli_missed = one_line(tally, problems)
    return report


def _piped(session: _Session) -> bool:
    """Whether tests begin and end on the proxy's control pipe (see `_wants_pipe`)."""
    return session.proxy is not None and session.proxy.piped


# ------------------------------------------------------------------------------------------------
# The fixture


@pytest.fixture(name=NAME)
def cassette_cli_fixture(request: pytest.FixtureRequest) -> CassetteTest:
    """This test's cassette: `.mode`, `.url`, `.base_url`, `.env`, `.counts()`, `.hits`, ..."""
    session = request.config.stash.get(_SESSION, None)
    test = request.node.stash.get(_TEST, None)
    if session is None or session.proxy is None or test is None:
        pytest.skip(
            "cassette is off for this run "
            "(--cassette=off, no cassette.toml, or under cassette exec)"
        )
    return CassetteTest(session.proxy, SCOPE, test.nodeid, test.mode, test.sequence)


def session_mode(config: pytest.Config) -> str | None:
    """This run's mode (`replay`, `record`, `auto`, `adopt`), None when cassette is off."""
    session = config.stash.get(_SESSION, None)
    return None if session is None or session.proxy is None else session.session_mode


def tape_of(request: pytest.FixtureRequest) -> Tape | None:
    """The `vcr` fixture's stand-in for vcrpy's cassette (see `_recording.py`), None when
    cassette is off for this test."""
    from cassette_cli._recording import Tape, record_mode

    session = request.config.stash.get(_SESSION, None)
    test = request.node.stash.get(_TEST, None)
    if session is None or session.proxy is None or test is None:
        return None
    return Tape(session.proxy, SCOPE, record_mode(request.config, test.mode), test.nodeid)


class _AdoptFixture:
    """Registered in adopt only: an autouse fixture costs every test of every other run its
    setup and teardown."""

    @pytest.fixture(autouse=True)
    def _cassette_cli_adopt(self, request: pytest.FixtureRequest) -> Generator[None, None, None]:
        """Adopt: begins this test's scope with its vcrpy tapes (pytest-recording's layout, or the
        suite's `vcr_cassette_dir`, and the `vcr` marker's extra tapes) and its `match_on`
        (`vcr_config`'s, else vcrpy's default), which the proxy reads and answers from; the
        suite's own matching, where it has any, is the judge of the test's requests while it
        runs."""
        session = request.config.stash.get(_SESSION, None)
        test = request.node.stash.get(_TEST, None)
        if session is None or session.mode != ADOPT or session.proxy is None or test is None:
            yield
            return
        from cassette_cli import _test_context
        from cassette_cli._adopt import tapes_of
        from cassette_cli._proxy import ProxyError

        try:
            # What was sent outside any test since the last one ended (a module's fixtures): the
            # begin starts the scope afresh.
            _note_strays(session, session.proxy.control("GET", SCOPE))
            begin, test.not_honoured, judge = tapes_of(request)
            session.proxy.control("PUT", SCOPE, {**test.begin, **begin})
        except ProxyError as error:
            pytest.fail(f"cassette error: {error}", pytrace=False)
        alias = str(test.begin["alias"])
        _test_context.judge(alias, judge)
        try:
            yield
        finally:
            _test_context.judge(alias, None)


def _not_stored(proxy: Proxy, tally: dict[str, Any]) -> list[str]:
    """The recordings of this test's requests the proxy logged as failed (a stream is counted as
    recorded while it is being stored, so the tally alone cannot say); the proxy's log names no
    credential."""
    keys = set(tally.get("keys") or ())
    lines = []
    for line in proxy.log_text().splitlines():
        words = line.split("the recording of ", 1)
        if len(words) == 2 and words[1].split(" ", 1)[0] in keys and " failed" in words[1]:
            lines.append(words[1][:500])
    return lines


def _adopt_problems(test: _Test, result: dict[str, Any]) -> list[str]:
    """What in the test's adopt report fails the test and was not reported yet: requests its
    tapes did not answer, tapes that could not be read."""
    unmatched, errors = result.get("unmatched") or [], result.get("errors") or []
    lines = [f"cassette adopt: {why}" for why in unmatched[test.adopt_unmatched :]]
    lines += [f"cassette adopt: {why}" for why in errors[test.adopt_errors :]]
    test.adopt_unmatched, test.adopt_errors = len(unmatched), len(errors)
    return lines


# ------------------------------------------------------------------------------------------------
# The summary


def _note_strays(session: _Session, tally: dict[str, Any]) -> None:
    if int(tally.get("requests", 0)) or tally.get("bypassed"):
        session.strays.append(tally)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # In the process that reports: a plain run, or pytest-xdist's controller (a worker's report
    # arrives with the attributes its makereport set).
    session = _LIVE[-1] if _LIVE else None
    if session is None:
        return
    missed = getattr(report, "cassette_cli_missed", None)
    if missed:
        session.missed.append((report.nodeid, str(missed)))
    if session.mode != ADOPT:
        return
    if (report.failed or report.skipped) and report.nodeid not in session.outcomes:
        from cassette_cli._adopt import outcome

        session.outcomes[report.nodeid] = outcome(report)
    adopted = getattr(report, "cassette_cli_adopt", None)
    if report.when != "teardown":
        return
    # Every test's entry says how it ended (the aim of a migration is every test passing); a test
    # that ended before its tapes were named (skipped, a fixture failing) gets one too.
    ended = session.outcomes.pop(report.nodeid, None)
    if adopted or ended:
        entry = session.adopted.setdefault(report.nodeid, adopted or {})
        entry.update(ended or {"outcome": "passed"})
        from cassette_cli._adopt import made_afresh

        # A test that passes here and will miss in replay is named too.
        if made_afresh(entry):
            entry["replay_will_miss"] = made_afresh(entry)


# The session of the run in progress (pytest_runtest_logreport is given no config); a stack,
# for pytester's runs in process.
_LIVE: list[_Session] = []

# The value the proxy gives a test process's key variables (cassette's PLACEHOLDER_API_KEY).
PLACEHOLDER_KEY = "cassette"


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    # pytest-xdist's controller: what each worker saw outside its tests, and in which mode.
    config = cast("pytest.Config", getattr(node, "config"))  # noqa: B009 (no type to import)
    session = config.stash.get(_SESSION, None)
    output = getattr(node, "workeroutput", None) or {}
    if session is None:
        return
    session.strays.extend(output.get("cassette_cli_strays", []))
    for name, value in (output.get("cassette_cli_totals") or {}).items():
        session.totals[name] = session.totals.get(name, 0) + int(value)
    for nodeid, lines in (output.get("cassette_cli_not_stored") or {}).items():
        if nodeid in session.adopted:
            session.adopted[nodeid]["not_stored"] = lines
    session.idle.extend(output.get("cassette_cli_idle") or [])
    if output.get("cassette_cli_mode"):
        session.modes_seen.add(str(output["cassette_cli_mode"]))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(_SESSION, None)
    if state is None:
        return
    if state.proxy is not None:
        from cassette_cli._proxy import ProxyError

        try:
            _note_strays(state, state.proxy.control("GET", SCOPE))
            if _piped(state):
                state.proxy.noticed()  # the last tests' idle lines
                state.idle.extend(state.proxy.idle)
            answer = state.proxy.ended()
            ended = answer.get("ended") or {}
            # What tests' threads and tasks sent after their test ended: failing the run.
            state.strays.extend({**tally, "late": True} for tally in answer.get("late") or [])
            totals = {name: int(ended.get(name, 0)) for name in COUNTS}
        except ProxyError as error:
            message = f"cassette error: {error}"
            state.strays.append({"errors": 1, "failed": [str(error)], "failure": [message]})
            totals = {}
        state.modes_seen.add(state.session_mode)
        output = getattr(session.config, "workeroutput", None)
        if output is not None:
            output["cassette_cli_strays"] = state.strays
            output["cassette_cli_totals"] = totals
            output["cassette_cli_mode"] = state.session_mode
            output["cassette_cli_idle"] = state.idle
        else:
            # xdist's controller has its workers' totals already (pytest_testnodedown).
            for name, value in totals.items():
                state.totals[name] = state.totals.get(name, 0) + value
        if state.mode == ADOPT:
            # A stream's recording may fail after its test's teardown read the log: once more,
            # now that every test is done.
            late = {}
            for nodeid, result in state.adopted.items():
                lines = _not_stored(state.proxy, {"keys": result.get("keys") or []})
                if lines != result.get("not_stored"):
                    result["not_stored"] = late[nodeid] = lines
            if output is not None:
                output["cassette_cli_not_stored"] = late
    if state.mode == ADOPT and state.role != "worker":
        from cassette_cli._adopt import write_report

        state.adopt_report = session.config.rootpath / ADOPT_REPORT
        write_report(state.adopt_report, {"tests": state.adopted})
    if (
        state.role != "worker"
        and any(_stray_fails(t) for t in state.strays)
        and session.exitstatus == 0
    ):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _stray_fails(tally: dict[str, Any]) -> bool:
    return bool(
        int(tally.get("misses", 0))
        or int(tally.get("errors", 0))
        or any(b.get("refused") for b in tally.get("bypassed") or [])
    )


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None or session.role == "worker":
        return
    totals = session.totals
    mode = "/".join(sorted(session.modes_seen)) or session.session_mode
    terminalreporter.section("cassette")
    terminalreporter.write_line(
        f"cassette ({mode}): {totals.get('requests', 0)} requests in tests: "
        f"{totals.get('hits', 0)} hits, "
        f"{totals.get('misses', 0)} misses, {totals.get('recorded', 0)} recorded, "
        f"{totals.get('passed_through', 0)} {_passed_through(session)}, "
        f"{totals.get('errors', 0)} errors"
        + (f"; proxy ready in {session.startup_ms:.0f} ms" if session.startup_ms else "")
    )
    if session.missed:
        terminalreporter.write_line(
            f"{len(session.missed)} tests failed on cassette's account (a miss, a refused bypass, "
            "an "
            "error, an unused recording):",
            red=True,
        )
        for nodeid, line in session.missed:
            terminalreporter.write_line(f"  {nodeid}: {line}")
    if session.idle and totals.get("requests", 0):
        # In a run where other tests reached cassette, a test that sent nothing may be talking
        # to something cassette does not see (a client it cannot catch, a mock left in place).
        shown = sorted(session.idle)
        terminalreporter.write_line(
            f"{len(shown)} tests made no request through cassette (others did): "
            + ", ".join(shown[:10])
            + (f", and {len(shown) - 10} more" if len(shown) > 10 else "")
        )
    if session.mode == ADOPT:
        _adopt_summary(terminalreporter, session)
    late = [tally for tally in session.strays if tally.get("late")]
    outside = outside_tests([tally for tally in session.strays if not tally.get("late")])
    for tally in [outside, *late]:
        if not _stray_fails(tally) and not int(tally.get("requests", 0)):
            continue
        problems = failure(tally)
        where = "outside any test (module-level code, fixtures between tests)"
        if tally.get("late"):
            where = f"late, after {tally.get('test')} ended (a thread or task it started)"
        terminalreporter.write_line(
            f"{where}: {tally.get('requests', 0)} requests, {tally.get('misses', 0)} misses",
            red=_stray_fails(tally),
        )
        for line in problems:
            terminalreporter.write_line(f"  {line}")


def _passed_through(session: _Session) -> str:
    """What an answer not stored is: in adopt, a tape's answer another test stored already."""
    if session.mode == ADOPT:
        return "answered by another test's identical stored answer"
    return "passed through"


def _adopt_summary(terminalreporter: pytest.TerminalReporter, session: _Session) -> None:
    from cassette_cli._adopt import summary

    for line in summary(session.adopted, session.adopt_report):
        terminalreporter.write_line(line)
