"""Issue 35 item 2: under CI a pytest config file in the repository (the ini key `cassette_mode`
in pytest.ini or pyproject.toml, `--cassette=record` in its `addopts`) never turns the replay job
into one that calls the vendor with the job's key; the job's own command line, PYTEST_ADDOPTS and
CASSETTE_MODE still do, and outside CI the file decides as before. Real pytest, the plugin, the
binary's proxy, and the fake vendor counting every connection."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FakeUpstream
from test_vcr_adopt import plugin_env

KEY = "sk-test-CIGUARDKEY0123456789abcdef"

ASKS = """
import json
import os
import urllib.request


def test_asks():
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi."}]}).encode(),
        headers={"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200
    except urllib.error.HTTPError as error:
        raise AssertionError(error.read().decode()) from error
"""


def project(tmp_path: Path, vendor: FakeUpstream, ini: dict[str, str]) -> Path:
    """A project whose cassette.toml sends the default route to the fake vendor, with the pytest
    config files `ini` names (file name to text)."""
    folder = tmp_path / "project"
    (folder / "tests").mkdir(parents=True)
    (folder / "cassette.toml").write_text(f'store = "cassettes"\n[routes.default]\nupstream = "{vendor.url}"\n')
    (folder / "tests" / "test_asks.py").write_text(ASKS)
    for name, text in ini.items():
        (folder / name).write_text(text)
    return folder


def pytest_run(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", "-p", "no:recording", "-p", "cassette_cli.pytest_plugin"]
    command += ["-p", "no:cacheprovider", *args, "tests"]
    full = plugin_env("http://127.0.0.1:9")
    full.update(OPENAI_API_KEY=KEY, **env)
    return subprocess.run(command, cwd=folder, env=full, capture_output=True, text=True, timeout=300, check=False)


def both(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


PYTEST_INI_MODE = {"pytest.ini": "[pytest]\ncassette_mode = record\n"}
PYPROJECT_MODE = {"pyproject.toml": '[tool.pytest.ini_options]\ncassette_mode = "auto"\n'}
ADDOPTS = {"pytest.ini": "[pytest]\naddopts = --cassette=record\n"}
ADDOPTS_OVERRIDE = {"pytest.ini": "[pytest]\naddopts = -o cassette_mode=record\n"}


@pytest.mark.parametrize(
    ("ini", "ci", "said"),
    [
        (PYTEST_INI_MODE, "true", "cassette_mode = 'record' in pytest.ini"),
        (PYPROJECT_MODE, "1", "cassette_mode = 'auto' in pyproject.toml"),
        (ADDOPTS, "true", "--cassette=record comes from addopts in pytest.ini"),
        # Any value but a spelling of no is CI, as the binary reads it.
        (ADDOPTS_OVERRIDE, "woodpecker", "cassette_mode = 'record' in pytest.ini"),
    ],
    ids=["pytest.ini", "pyproject.toml", "addopts", "addopts-override-ini"],
)
def test_under_ci_a_pytest_config_file_alone_never_calls_the_vendor(
    tmp_path: Path, ini: dict[str, str], ci: str, said: str
) -> None:
    vendor = FakeUpstream()
    try:
        folder = project(tmp_path, vendor, ini)
        refused = pytest_run(folder, CI=ci)
        assert refused.returncode == 4, both(refused)
        assert said in refused.stderr and "under CI (the CI variable is set)" in refused.stderr, both(refused)
        assert "--cassette=" in refused.stderr and "CASSETTE_MODE=" in refused.stderr, both(refused)
        assert vendor.connections == 0 and not vendor.requests, both(refused)
        assert not (folder / "cassettes").exists()

        # Outside CI the file decides, as it always did.
        recorded = pytest_run(folder, CI="false")
        assert recorded.returncode == 0, both(recorded)
        assert len(vendor.requests) == 1, both(recorded)
    finally:
        vendor.close()


@pytest.mark.parametrize(
    ("ini", "args", "env"),
    [
        ({}, ["--cassette=record"], {}),
        (ADDOPTS, ["--cassette=record"], {}),
        (ADDOPTS, [], {"PYTEST_ADDOPTS": "--cassette=record"}),
        (PYTEST_INI_MODE, [], {"CASSETTE_MODE": "record"}),
        (PYTEST_INI_MODE, ["-o", "cassette_mode=record"], {}),
    ],
    ids=["command-line", "command-line-over-addopts", "PYTEST_ADDOPTS", "CASSETTE_MODE", "override-ini"],
)
def test_under_ci_the_job_itself_still_records(
    tmp_path: Path, ini: dict[str, str], args: list[str], env: dict[str, str]
) -> None:
    vendor = FakeUpstream()
    try:
        folder = project(tmp_path, vendor, ini)
        result = pytest_run(folder, *args, CI="true", **env)
        assert result.returncode == 0, both(result)
        assert "cassette: record" in result.stdout, both(result)
        assert len(vendor.requests) == 1, both(result)
        assert list((folder / "cassettes").rglob("*.json")), both(result)
    finally:
        vendor.close()


def test_under_ci_a_file_may_still_turn_the_plugin_off_or_replay(tmp_path: Path) -> None:
    """Neither starts anything that calls a vendor: `off` leaves the run as if cassette were not
    installed (as taking cassette.toml out would), replay answers from the cassettes."""
    vendor = FakeUpstream()
    try:
        folder = project(tmp_path, vendor, {"pytest.ini": "[pytest]\naddopts = --cassette=replay\n"})
        replay = pytest_run(folder, CI="true")
        assert replay.returncode == 1 and "cassette: replay" in replay.stdout, both(replay)
        assert vendor.connections == 0, both(replay)
        (folder / "pytest.ini").write_text("[pytest]\ncassette_mode = off\n")
        off = pytest_run(folder, "--collect-only", CI="true")
        assert off.returncode == 0 and "cassette: off (cassette_mode in pytest.ini=off)" in off.stdout, both(off)
    finally:
        vendor.close()
