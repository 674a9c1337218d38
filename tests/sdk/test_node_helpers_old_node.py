"""The vitest and jest helpers on a Node without `--import` in NODE_OPTIONS (before 18.18):
startCassette() asks the proxy for no channel, so no worker is handed a preload it could not
start with, and the base URLs alone lead in (as `cassette exec` does for such a Node); a Node
that takes it gets the channel."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import cassette_bin

ROOT = Path(__file__).resolve().parents[2]
START = ROOT / "npm" / "cassette-cli" / "lib" / "start.js"

SCRIPT = """
import { startCassette } from %s;
const pretend = process.argv[2];
// What an older Node reports; the rest of this Node runs the helper as it would.
if (pretend) Object.defineProperty(process.versions, "node", { value: pretend });
const cassette = await startCassette({ binary: process.env.CASSETTE_BIN, cwd: process.argv[3], mode: "replay" });
const seen = { channel: cassette.channel, nodeOptions: process.env.NODE_OPTIONS ?? null };
await cassette.stop();
console.log(JSON.stringify(seen));
"""


@pytest.mark.parametrize(("version", "caught"), [("18.17.1", False), ("16.20.2", False), ("18.18.0", True), ("", True)])
def test_the_helpers_ask_for_a_channel_only_where_node_takes_import(tmp_path: Path, version: str, caught: bool) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is needed for the Node helpers' tests")
    script = tmp_path / "start.mjs"
    script.write_text(SCRIPT % json.dumps(START.as_uri()))
    (tmp_path / "cassette.toml").write_text('store = "cassettes"\n')
    env = {"PATH": "/usr/bin:/bin", "CASSETTE_BIN": cassette_bin(), "HOME": str(tmp_path)}
    out = subprocess.run(
        [node, str(script), version, str(tmp_path)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert (seen["channel"] is not None) == caught, seen
    # startCassette itself never puts the preload in NODE_OPTIONS: a worker's setup does.
    assert seen["nodeOptions"] is None, seen
