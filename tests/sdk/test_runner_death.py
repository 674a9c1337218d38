"""Issue 35 items 5 and 7: a proxy a test runner started ends when that runner does, however
it dies. Real runners are killed with SIGKILL mid-run (no teardown, no `exit` handler): pytest
with the plugin, with and without its control pipe, also while a child a test forked holds
the pipe's ends; Node with `startCassette()` and the vitest and jest global setups. The proxy
must be gone within seconds, not serve nobody until the end of time."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, cassette_bin
from test_vcr_adopt import plugin_env

# How long a proxy may outlive its runner: it looks at it about every 250 ms.
GONE_WITHIN = 10.0

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="finds the runner's proxy in /proc (Linux)"
)

SLEEPING_TEST = """
import json
import os
import pathlib
import time


def test_runs_until_killed():
    said = {"pid": os.getpid()}
    if os.environ.get("FORK_A_CHILD") == "1":
        # A child that keeps every descriptor pytest had, the control pipe's ends included.
        child = os.fork()
        if child == 0:
            time.sleep(60)
            os._exit(0)
        said["child"] = child
    running = pathlib.Path(os.environ["RUNNING_FILE"])
    running.with_suffix(".tmp").write_text(json.dumps(said))
    os.replace(running.with_suffix(".tmp"), running)
    time.sleep(60)
"""


def state(pid: int) -> str | None:
    """The process's state letter (`Z` for a zombie), None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def alive(pid: int) -> bool:
    # A zombie has ended: only its parent (PID 1 here, once its runner died) has yet to reap it.
    return state(pid) not in (None, "Z")


def proxies_of(pid: int) -> list[int]:
    """The `cassette proxy` processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid and len(command) > 1 and command[1] == b"proxy":
            found.append(int(entry.name))
    return found


def wait_for(what: str, check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def end(pids: list[int]) -> None:
    """Cleans up after a failed check: nothing this test started outlives it."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def kill_and_expect_the_proxy_gone(runner: subprocess.Popen, proxy: int, others: list[int]) -> None:
    assert alive(proxy), "the proxy did not run"
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=30)
    try:
        wait_for(
            f"the proxy {proxy} kept running after its runner was killed",
            lambda: not alive(proxy),
            GONE_WITHIN,
        )
    finally:
        end([proxy, *others])


@pytest.mark.parametrize(
    ("pipe", "fork"),
    [("off", False), ("off", True), ("on", True)],
    ids=["no-pipe", "no-pipe-forked-child", "pipe-held-by-a-forked-child"],
)
def test_a_killed_pytest_leaves_no_proxy_behind(tmp_path: Path, pipe: str, fork: bool) -> None:
    if sys.platform == "win32":
        pytest.skip("the runner is watched on Unix")
    folder = tmp_path / "project"
    (folder / "tests").mkdir(parents=True)
    (folder / "cassette.toml").write_text('store = "cassettes"\n')
    (folder / "tests" / "test_sleeps.py").write_text(SLEEPING_TEST)
    running = tmp_path / "running.json"
    env = plugin_env("http://127.0.0.1:9")
    env.update(
        CASSETTE_CONTROL_PIPE=pipe,
        FORK_A_CHILD="1" if fork else "0",
        RUNNING_FILE=str(running),
    )
    command = [sys.executable, "-m", "pytest", "-p", "no:recording", "-p", "cassette_cli.pytest_plugin"]
    command += ["-p", "no:cacheprovider", "-q", "--cassette=replay", "tests"]
    runner = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("the test did not start", running.exists, 60)
        said = json.loads(running.read_text())
        proxies = proxies_of(runner.pid)
        assert len(proxies) == 1, proxies
    except BaseException:
        runner.kill()
        runner.wait()
        raise
    child = said.get("child")
    try:
        kill_and_expect_the_proxy_gone(runner, proxies[0], [])
        if child:
            # The forked child lives on with its copies of pytest's descriptors: they did not
            # keep the proxy.
            assert alive(child), "the forked child ended before the proxy did"
    finally:
        end([child] if child else [])


NODE_RUNNERS = {
    # startCassette() itself, as a script or another runner uses it.
    "startCassette": """
const { startCassette } = await import(lib("start.js"));
await startCassette({ mode: "replay" });
""",
    # vitest's globalSetup, which runs in vitest's main process.
    "vitest": """
const setup = (await import(lib("vitest/global-setup.js"))).default;
await setup({ provide() {} });
""",
    # jest's globalSetup, which runs in jest's main process.
    "jest": """
const setup = (await import(lib("jest/global-setup.js"))).default;
await setup();
""",
}


@pytest.mark.parametrize("entry", list(NODE_RUNNERS))
def test_a_killed_node_runner_leaves_no_proxy_behind(tmp_path: Path, entry: str) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is needed")
    if sys.platform == "win32":
        pytest.skip("the runner is watched on Unix")
    (tmp_path / "cassette.toml").write_text('store = "cassettes"\n')
    lib = (ROOT / "npm" / "cassette-cli" / "lib").as_uri()
    script = (
        f"const lib = (name) => {json.dumps(lib)} + '/' + name;\n"
        + NODE_RUNNERS[entry]
        + "console.log('started');\nsetInterval(() => {}, 1 << 30);\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CASSETTE_", "UPSTREAM_", "OPENAI_", "ANTHROPIC_", "NODE_"))
    }
    env["CASSETTE_BINARY"] = cassette_bin()
    runner = subprocess.Popen(
        [node, "--input-type=module", "-e", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert runner.stdout is not None
        assert runner.stdout.readline().strip() == "started"
        proxies = proxies_of(runner.pid)
        assert len(proxies) == 1, proxies
    except BaseException:
        runner.kill()
        runner.wait()
        raise
    kill_and_expect_the_proxy_gone(runner, proxies[0], [])
    runner.stdout.close()
