"""Issue 33: adopt on a suite shaped like the real ones. tests/runners/vcr_hooked implements
pytest-recording's hook without `optionalhook` and registers its own serializer there (tapes
in a JSON format of its own), runs under `--strict-markers` and `filterwarnings = error`, sets
`vcr_config` (`match_on`, `filter_headers` with a replacement, `before_record_request`), names
an extra tape in a `vcr` marker and reads vcrpy's cassette object (`vcr.requests`,
`vcr.play_count`). Recorded with real pytest-recording against the fake vendor, the vendor
stopped: vcrpy passes every test; the documented adopt command (`pytest -p no:recording
--cassette=adopt`) passes the same with no edit to the suite; a plain replay with the tapes
removed passes them too, each from its own cassettes; and the same under pytest-xdist."""

from __future__ import annotations

import json
import shutil
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

from test_vcr_adopt import Counting, plugin_env, plugin_pytest, record_with_vcrpy
from test_vcr_import import ROOT, clean_env, run

PROJECT = ROOT / "tests" / "runners" / "vcr_hooked"
TESTS = 6
TAPES = Path("tests") / "cassettes" / "test_hooked"


def record(project: Path) -> int:
    """Records the suite with pytest-recording; the port the vendor listened on."""
    vendor = record_with_vcrpy(project, TESTS, "HOOKRECORDKEY")
    # The shared answer moves to the extra tape the marker names (pytest-recording writes only
    # a test's own tape).
    own = project / TAPES / "test_extra_tape.jsonbody"
    entries = json.loads(own.read_text())["recorded"]
    shared = [e for e in entries if "Shared question." in json.dumps(e["ask"]["body"])]
    assert len(shared) == 1 and len(entries) == 2, entries
    own.write_text(json.dumps({"recorded": [e for e in entries if e not in shared]}))
    (project / TAPES / "shared.jsonbody").write_text(json.dumps({"recorded": shared}))
    text = "".join(p.read_text() for p in (project / TAPES).iterdir())
    assert "HOOKRECORDKEY" not in text and '"TRACE"' in text, text
    return int(vendor.rsplit(":", 1)[1])


def adopt_and_replay(tmp_path: Path, *more: str) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    port = record(project)
    stopped = ThreadingHTTPServer(("127.0.0.1", port), Counting)
    threading.Thread(target=stopped.serve_forever, daemon=True).start()
    Counting.connections = 0
    try:
        # vcrpy alone, the vendor stopped: every test passes from its tapes.
        vcr = run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cassette_cli", "--record-mode=none"],
            project,
            clean_env(OPENAI_API_KEY="sk-test-x", ANTHROPIC_API_KEY="sk-ant-x"),
        )
        assert f"{TESTS} passed" in vcr.stdout, vcr.stdout

        # The documented command, no edit to the suite.
        (project / "cassette.toml").write_text('store = "cassettes"\n')
        adopt = run(plugin_pytest("adopt", *more), project, plugin_env("http://127.0.0.1:9"))
        assert f"{TESTS} passed" in adopt.stdout, adopt.stdout
        report = json.loads((project / ".cassette" / "adopt-report.json").read_text())["tests"]
        assert len(report) == TESTS, report
        extra = report["tests/test_hooked.py::test_extra_tape"]
        assert [a["tape"].rsplit("/", 1)[-1] for a in extra["adopted"]] == [
            "test_extra_tape.jsonbody",
            "shared.jsonbody",
        ], extra
        assert all(r["recorded"] == len(r["adopted"]) and not r["errors"] for r in report.values()), report
        # before_record_request is the suite's code: applied in the test process, by its judge.
        assert "not honoured" not in adopt.stdout, adopt.stdout
        assert all(r["judged"] for r in report.values()), report
        assert "HOOKRECORDKEY" not in adopt.stdout + json.dumps(report)
        stored = "".join(p.read_text() for p in (project / "cassettes").rglob("*.json"))
        assert "HOOKRECORDKEY" not in stored and "sk-test-x" not in stored
        assert Counting.connections == 0

        # Replay alone: the tapes removed, no vendor.
        shutil.rmtree(project / TAPES)
        replay = run(plugin_pytest("replay", *more), project, plugin_env("http://127.0.0.1:9"))
        assert f"{TESTS} passed" in replay.stdout, replay.stdout
        assert Counting.connections == 0
    finally:
        stopped.shutdown()
        stopped.server_close()


def test_a_suite_with_its_own_serializer_and_hooks_adopts_without_an_edit(tmp_path: Path) -> None:
    adopt_and_replay(tmp_path)


def test_the_same_under_xdist(tmp_path: Path) -> None:
    adopt_and_replay(tmp_path, "-n", "2", "-p", "xdist")
