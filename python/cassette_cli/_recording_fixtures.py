"""pytest-recording's fixtures, registered as a plugin only while it is off (see
`_recording.py`): the same names, scopes and defaults, so a conftest that overrides or requests
them works unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from cassette_cli._recording import Tape, cassette_dir
from cassette_cli._recording import record_mode as vcr_record_mode


@pytest.fixture(scope="session")
def record_mode(request: pytest.FixtureRequest) -> str:
    """vcrpy's record mode for this run: `--record-mode`, else cassette's mode in vcrpy's terms
    (`none` in replay and adopt)."""
    from cassette_cli.pytest_plugin import session_mode

    return vcr_record_mode(request.config, session_mode(request.config))


@pytest.fixture(scope="session")
def disable_recording(request: pytest.FixtureRequest) -> bool:
    return bool(getattr(request.config.option, "disable_recording", False))


@pytest.fixture
def vcr_config() -> dict[str, Any]:
    """A shareable configuration for vcrpy's `use_cassette`: empty unless the suite says."""
    return {}


@pytest.fixture
def allowed_hosts(request: pytest.FixtureRequest) -> list[str] | None:
    marker = request.node.get_closest_marker("block_network")
    hosts = (marker.kwargs.get("allowed_hosts") if marker is not None else None) or getattr(
        request.config.option, "allowed_hosts", None
    )
    if isinstance(hosts, str):
        return hosts.split(",")
    return list(hosts) if hosts else None


@pytest.fixture
def vcr_markers(request: pytest.FixtureRequest) -> list[pytest.Mark]:
    return list(request.node.iter_markers(name="vcr"))


@pytest.fixture(scope="module")
def vcr_cassette_dir(request: pytest.FixtureRequest) -> str:
    """Each test module's tapes in `cassettes/<module>` beside it."""
    return cassette_dir(str(request.node.path))


@pytest.fixture
def default_cassette_name(request: pytest.FixtureRequest) -> str:
    from cassette_cli._adopt import default_cassette_name as name_of

    marker = request.node.get_closest_marker("default_cassette")
    if marker is not None:
        assert marker.args, "pass the tape's name to `pytest.mark.default_cassette`"
        return str(marker.args[0])
    return name_of(request.cls, request.node.name)


@pytest.fixture
def vcr(request: pytest.FixtureRequest, vcr_markers: list[pytest.Mark]) -> Tape | None:
    """vcrpy's cassette of a test with the `vcr` marker, answered from the proxy (`Tape`);
    None for an unmarked test, or when cassette is off, as pytest-recording gives."""
    from cassette_cli.pytest_plugin import tape_of

    if not vcr_markers:
        return None
    return tape_of(request)
