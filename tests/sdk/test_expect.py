"""Assertions inside ordinary tests (issue 26): a real pytest suite (expect_py/answers_suite.py)
and real vitest and jest suites (expect_node/) using cassette-cli's expect() and tool_calls(),
run under `cassette exec` against the fake vendor and a fake judge (fake_judge.py, PASS/FAIL by
a rule, so votes split). Recorded once; replayed with the vendor and the judge stopped (zero
connections to either); a changed criterion or vote count is a miss naming what changed, which
fails its test with the explanation."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, FakeUpstream, cassette_bin
from fake_judge import FakeJudge

SUITE = Path(__file__).parent / "expect_py" / "answers_suite.py"
NODE = Path(__file__).parent / "expect_node"
JUDGE_KEY = "judge-key-0123456789"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CASSETTE_", "UPSTREAM_", "OPENAI_", "ANTHROPIC_"))}
    env.update(
        PYTHONPATH=str(ROOT / "python"),
        CASSETTE_BINARY=cassette_bin(),
        CASSETTE_JUDGE_MODEL="judge-1",
        CASSETTE_JUDGE_ROUTE="judge",
        PYTHONDONTWRITEBYTECODE="1",
        # vitest colours its report even into a pipe; the messages are checked as text.
        NO_COLOR="1",
    )
    env.update(extra)
    return env


class Project:
    """A user's project folder: cassette.toml mounting the judge, and the cassettes."""

    def __init__(self, root: Path, vendor: FakeUpstream, judge: FakeJudge):
        self.root = root
        self.vendor = vendor
        self.judge = judge
        # The judge's key is read by the proxy `cassette exec` runs; the test processes (and the
        # `cassette grade` they start) see only the placeholder.
        (root / "cassette.toml").write_text(
            f'[routes.judge]\nupstream = "{judge.url}"\napi_key_env = "JUDGE_API_KEY"\n'
        )

    def exec_(self, mode: str, command: list[str], cwd: Path | None = None, **env: str):
        return subprocess.run(  # noqa: PLW1510 (the status is what is checked)
            [
                cassette_bin(),
                "exec",
                "--mode",
                mode,
                "--upstream",
                self.vendor.url,
                "--route",
                f"anthropic={self.vendor.url}",
                "--",
                *command,
            ],
            cwd=cwd or self.root,
            env=clean_env(
                CASSETTE_STORE=f"file://{self.root / 'cassettes'}",
                CASSETTE_CONFIG=str(self.root / "cassette.toml"),
                JUDGE_API_KEY=JUDGE_KEY,
                **env,
            ),
            capture_output=True,
            text=True,
            timeout=300,
        )

    def pytest(self, mode: str, **env: str):
        return self.exec_(
            mode,
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--confcutdir",
                str(SUITE.parent),
                "--rootdir",
                str(SUITE.parent),
                str(SUITE),
            ],
            **env,
        )


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    vendor = FakeUpstream()
    judge = FakeJudge()
    yield Project(tmp_path_factory.mktemp("project"), vendor, judge)
    vendor.close()
    judge.close()


def both(result) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def test_pytest_suite_records_then_replays_with_vendor_and_judge_stopped(project):
    recorded = project.pytest("record")
    assert recorded.returncode == 0, both(recorded)
    assert "8 passed" in recorded.stdout, both(recorded)
    # Every vote asked once: the judged expectations of the suite, each vote a question.
    asked = len(project.judge.questions)
    assert asked == 16, project.judge.questions
    assert len(set(project.judge.questions)) == asked, "each question asked once"
    # With the route's real key, which only the proxy in front holds.
    assert set(project.judge.credentials) == {f"Bearer {JUDGE_KEY}"}, project.judge.credentials
    assert JUDGE_KEY not in recorded.stdout + recorded.stderr
    assert not [
        p for p in (project.root / "cassettes").rglob("*") if p.is_file() and JUDGE_KEY in p.read_text(errors="replace")
    ]

    project.vendor.stop()
    project.judge.stop()
    vendor_before, judge_before = project.vendor.connections, project.judge.connections
    replayed = project.pytest("replay")
    assert replayed.returncode == 0, both(replayed)
    assert "8 passed" in replayed.stdout, both(replayed)
    assert project.vendor.connections == vendor_before
    assert project.judge.connections == judge_before

    # Another criterion: the judged test fails with the miss explained, naming what changed.
    edited = project.pytest("replay", EXPECT_CRITERION="[split] The reply is kind")
    # The test fails with the miss, and exec exits 2 for it as for any miss, naming the key.
    assert edited.returncode == 2, both(edited)
    assert "1 failed, 7 passed" in edited.stdout, both(edited)
    assert "1 distinct key missed" in edited.stderr, both(edited)
    assert "POST /v1/chat/completions (target judge, model judge-1)" in edited.stderr, both(edited)
    assert "ReplayMiss: replay miss: the judge's verdict is not recorded" in edited.stdout, both(edited)
    assert "[-polite-]{+kind+}" in edited.stdout, both(edited)
    assert "Record it with CASSETTE_MODE=record (or auto)" in edited.stdout, both(edited)
    # The store is named as it is: no placeholder key taken for a secret and redacted out of it.
    assert f"store:   file://{project.root / 'cassettes'} (read-only)" in edited.stdout, both(edited)
    # Another vote count asks other questions too.
    more_votes = project.pytest("replay", EXPECT_VOTES="5")
    assert more_votes.returncode == 2, both(more_votes)
    assert "ReplayMiss: replay miss" in more_votes.stdout, both(more_votes)
    # (the nearest recording may be a vote of another judged expectation, so only the new count)
    assert "(Vote 1 of [-" in more_votes.stdout and "-]{+5.)+}" in more_votes.stdout, both(more_votes)
    assert project.judge.connections == judge_before
    assert project.vendor.connections == vendor_before


RUNNERS = {
    "vitest": [
        "node",
        str(NODE / "node_modules" / "vitest" / "vitest.mjs"),
        "run",
        "--root",
        str(NODE),
        "answers.vitest.test.mjs",
    ],
    "jest": [
        "node",
        "--experimental-vm-modules",
        str(NODE / "node_modules" / "jest" / "bin" / "jest.js"),
        "--rootDir",
        str(NODE),
        "answers.jest.test.mjs",
    ],
}


@pytest.fixture(params=sorted(RUNNERS))
def node_project(request, tmp_path_factory):
    if shutil.which("node") is None or not (NODE / "node_modules" / "vitest").exists():
        pytest.fail(
            "node and tests/sdk/expect_node/node_modules are needed: run `npm ci --prefix tests/sdk/expect_node`"
        )
    vendor = FakeUpstream()
    judge = FakeJudge()
    yield request.param, Project(tmp_path_factory.mktemp(request.param), vendor, judge)
    vendor.close()
    judge.close()


def test_node_suites_record_then_replay_with_vendor_and_judge_stopped(node_project):
    runner, project = node_project
    command = RUNNERS[runner]
    recorded = project.exec_("record", command, cwd=NODE)
    assert recorded.returncode == 0, both(recorded)
    asked = len(project.judge.questions)
    assert asked == 8, project.judge.questions
    assert len(set(project.judge.questions)) == asked, "each question asked once"
    assert set(project.judge.credentials) == {f"Bearer {JUDGE_KEY}"}, project.judge.credentials

    project.vendor.stop()
    project.judge.stop()
    vendor_before, judge_before = project.vendor.connections, project.judge.connections
    replayed = project.exec_("replay", command, cwd=NODE)
    assert replayed.returncode == 0, both(replayed)
    assert project.judge.connections == judge_before
    assert project.vendor.connections == vendor_before

    edited = project.exec_("replay", command, cwd=NODE, EXPECT_CRITERION="[split] The reply is kind")
    assert edited.returncode == 2, both(edited)
    output = edited.stdout + edited.stderr
    assert "ReplayMiss: replay miss: the judge's verdict is not recorded" in output, both(edited)
    assert "[-polite-]{+kind+}" in output, both(edited)
    assert project.judge.connections == judge_before
    assert project.vendor.connections == vendor_before


def test_under_the_pytest_plugin_a_judge_miss_fails_its_own_test(tmp_path):
    """No `cassette exec`: the pytest plugin's proxy is in front, so the votes go through it (its
    key, its store), and an unrecorded verdict fails the test it was asked in, by the plugin's
    per-test attribution, with the proxy's explanation."""
    vendor, judge = FakeUpstream(), FakeJudge()
    try:
        config = tmp_path / "cassette.toml"
        config.write_text(
            'store = "cassettes"\n'
            f'[routes.judge]\nupstream = "{judge.url}"\napi_key_env = "JUDGE_API_KEY"\n'
            f'[routes.anthropic]\nupstream = "{vendor.url}"\n'
        )

        def pytest_run(mode: str, **extra: str):
            return subprocess.run(  # noqa: PLW1510 (the status is what is checked)
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "-p",
                    "cassette_cli.pytest_plugin",
                    f"--cassette={mode}",
                    "--confcutdir",
                    str(SUITE.parent),
                    "--rootdir",
                    str(SUITE.parent),
                    str(SUITE),
                ],
                cwd=tmp_path,
                env=clean_env(CASSETTE_CONFIG=str(config), UPSTREAM_BASE=vendor.url, JUDGE_API_KEY=JUDGE_KEY, **extra),
                capture_output=True,
                text=True,
                timeout=300,
            )

        recorded = pytest_run("record")
        assert recorded.returncode == 0, both(recorded)
        assert "8 passed" in recorded.stdout, both(recorded)
        assert len(judge.questions) == 16, judge.questions
        assert set(judge.credentials) == {f"Bearer {JUDGE_KEY}"}, judge.credentials
        assert list((tmp_path / "cassettes").rglob("*.json")), "the verdicts are in the plugin's store"

        vendor.stop()
        judge.stop()
        before = vendor.connections, judge.connections
        replayed = pytest_run("replay")
        assert replayed.returncode == 0, both(replayed)
        assert "8 passed" in replayed.stdout, both(replayed)

        edited = pytest_run("replay", EXPECT_CRITERION="[split] The reply is kind")
        assert edited.returncode == 1, both(edited)
        assert "1 failed, 7 passed" in edited.stdout, both(edited)
        # The plugin counts the miss for the test that asked, with the proxy's explanation.
        assert "1 tests failed on cassette's account" in edited.stdout, both(edited)
        assert (
            "answers_suite.py::test_votes_split_and_a_majority_decides: POST /v1/chat/completions "
            "(target judge, model judge-1)"
        ) in edited.stdout, both(edited)
        assert "ReplayMiss: replay miss: the judge's verdict is not recorded" in edited.stdout, both(edited)
        assert "[-polite-]{+kind+}" in edited.stdout, both(edited)
        assert (vendor.connections, judge.connections) == before
    finally:
        vendor.close()
        judge.close()


def test_under_the_vitest_helper_votes_go_through_its_proxy(tmp_path):
    """No `cassette exec`: cassette-cli's vitest globalSetup starts the proxy; the judge's votes go
    through it with the route's key, replay with the vendor and judge stopped, and an unrecorded
    verdict fails the test that asked."""
    if shutil.which("node") is None or not (NODE / "node_modules" / "vitest").exists():
        pytest.fail(
            "node and tests/sdk/expect_node/node_modules are needed: run `npm ci --prefix tests/sdk/expect_node`"
        )
    vendor, judge = FakeUpstream(), FakeJudge()
    try:
        config = tmp_path / "cassette.toml"
        config.write_text(
            f'store = "{tmp_path / "cassettes"}"\n'
            f'[routes.judge]\nupstream = "{judge.url}"\napi_key_env = "JUDGE_API_KEY"\n'
            f'[routes.anthropic]\nupstream = "{vendor.url}"\n'
        )
        command = [
            "node",
            str(NODE / "node_modules" / "vitest" / "vitest.mjs"),
            "run",
            "--root",
            str(NODE),
            "--config",
            str(NODE / "vitest.helper.config.mjs"),
        ]

        def vitest(mode: str, **extra: str):
            return subprocess.run(  # noqa: PLW1510 (the status is what is checked)
                command,
                cwd=NODE,
                env=clean_env(
                    CASSETTE_CONFIG=str(config),
                    CASSETTE_MODE=mode,
                    UPSTREAM_BASE=vendor.url,
                    JUDGE_API_KEY=JUDGE_KEY,
                    **extra,
                ),
                capture_output=True,
                text=True,
                timeout=300,
            )

        recorded = vitest("record")
        assert recorded.returncode == 0, both(recorded)
        assert len(judge.questions) == 8, judge.questions
        assert set(judge.credentials) == {f"Bearer {JUDGE_KEY}"}, judge.credentials

        vendor.stop()
        judge.stop()
        before = vendor.connections, judge.connections
        replayed = vitest("replay")
        assert replayed.returncode == 0, both(replayed)
        assert "5 passed" in replayed.stdout, both(replayed)

        edited = vitest("replay", EXPECT_CRITERION="[split] The reply is kind")
        assert edited.returncode == 1, both(edited)
        assert "1 failed | 4 passed" in edited.stdout, both(edited)
        assert "1 misses" in edited.stdout, both(edited)  # counted by the helper's proxy
        assert "FAIL  answers.vitest.test.mjs > votes split and a majority decides" in edited.stderr, both(edited)
        assert "ReplayMiss: replay miss: the judge's verdict is not recorded" in edited.stderr, both(edited)
        assert "[-polite-]{+kind+}" in edited.stderr, both(edited)
        assert (vendor.connections, judge.connections) == before
    finally:
        vendor.close()
        judge.close()
