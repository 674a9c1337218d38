"""Issue 23, adopt: the pytest-recording suite of tests/runners/vcr_project is recorded with real
vcrpy against the fake vendor of test_vcr_import.py, one tape's recorded prompt is edited (the
code moved on, vcrpy's default matching never noticed), the vendor is stopped and counted, and
`pytest --cassette=adopt` answers each test from its own tape through the plugin's proxy: the
tests pass, cassettes are stored, the edited test's drift is reported as a word diff, and
nothing connects to the vendor. A plain replay with the tapes moved away then passes the same
tests. A test whose tape has no matching interaction fails naming the tape."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

from conftest import cassette_bin
from test_vcr_import import PROJECT, ROOT, Vendor, clean_env, run

# vcrpy passes them all. The fixture download, asked of the file host its tape names, is
# answered from the tape and stored as a recording of that host (served on replay); asked of
# this machine instead (FILES_URL on a loopback port nothing listens on, which the client reaches
# directly), it fails, and the report names the tape's unused download. The second of two tests
# sending one request with another answer gets its own, stored under its test-scoped key; the
# stream ending in an error event is stored as the vendor's error answer it is.
NOT_ADOPTED = ["tests/test_chat.py::test_download"]
PAIR = ("tests/test_chat.py::test_same_request_first", "tests/test_chat.py::test_same_request_second")
# The edited prompt's drift, in the key's terms (cassette_keying::diff, as a miss explains it).
DRIFT = 'body.messages[0].content: "Name a city." -> "Name a capital."'


class Counting(Vendor):
    """Where the vendor was: answers nothing, counts every connection."""

    connections = 0

    def setup(self) -> None:
        Counting.connections += 1
        super().setup()

    def do_GET(self) -> None:
        self.send(503, "text/plain", b"the vendor is stopped")

    do_POST = do_GET


def record_with_vcrpy(project: Path, passed: int, key_tag: str, files: bool = False) -> str:
    """Records `project` with pytest-recording against a fresh fake vendor (answers numbered
    from 1), checks `passed` tests passed; the vendor's URL. The keys carry `key_tag`, for the
    caller to look for in the tapes."""
    Vendor.calls = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Vendor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    vendor = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        extra = {"FILES_URL": f"{vendor}/files"} if files else {}
        env = clean_env(
            VENDOR_URL=vendor,
            OPENAI_BASE_URL=f"{vendor}/openai/v1",
            ANTHROPIC_BASE_URL=f"{vendor}/anthropic",
            OPENAI_API_KEY=f"sk-test-{key_tag}0123456789abcdef",
            ANTHROPIC_API_KEY=f"sk-ant-api03-{key_tag}0123456789abcdef",
            **extra,
        )
        out = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cassette_cli", "--record-mode=once"], project, env)
        assert f"{passed} passed" in out.stdout, out.stdout
    finally:
        server.shutdown()
        server.server_close()
        Vendor.calls = 0
    return vendor


def record(project: Path) -> str:
    # The suite expects the vendor's answers numbered from 1 (and test_vcr_import's run after).
    return record_with_vcrpy(project, 9, "VCRRECORDKEY", files=True)


def plugin_env(files_url: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT / "python"), os.environ.get("PYTHONPATH")]))
    return clean_env(PYTHONPATH=path, CASSETTE_BINARY=cassette_bin(), FILES_URL=files_url)


def plugin_pytest(mode: str | None, *more: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:recording",
        "-p",
        "cassette_cli.pytest_plugin",
        "-rf",
        *([f"--cassette={mode}"] if mode else []),
        *more,
    ]


def failed(out: str) -> list[str]:
    return sorted(line.split()[1] for line in out.splitlines() if line.startswith("FAILED "))


def test_adopt_turns_the_tapes_into_cassettes_and_reports_drift(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    vendor = record(project)
    tape = project / "tests" / "cassettes" / "test_chat" / "test_plain.yaml"
    text = tape.read_text()
    assert "Name a capital." in text, text
    tape.write_text(text.replace("Name a capital.", "Name a city."))  # drift: the code moved on

    # The vendor is gone; a server on its port answers nothing and counts any connection. The
    # fixture download goes to the file host its tape names, which nothing here reaches.
    port = int(vendor.rsplit(":", 1)[1])
    stopped = ThreadingHTTPServer(("127.0.0.1", port), Counting)
    threading.Thread(target=stopped.serve_forever, daemon=True).start()
    files = "https://files.example.com"
    (project / "cassette.toml").write_text('store = "cassettes"\nrepeats = "sequence"\n')
    try:
        adopt = run(plugin_pytest("adopt"), project, plugin_env(files))
        out = adopt.stdout
        assert "9 passed" in out and "failed" not in out, out
        assert "1 download(s) stored as recordings of files.example.com" in out, out
        assert "cassette adopt:" in out and "report in" in out, out
        # The edited prompt, named for its test, as a miss explanation names a difference.
        assert "tests/test_chat.py::test_plain:" in out, out
        assert DRIFT in out, out
        report = json.loads((project / ".cassette" / "adopt-report.json").read_text())
        plain = report["tests"]["tests/test_chat.py::test_plain"]
        assert plain["adopted"][0]["drift"] == [DRIFT], plain
        assert plain["recorded"] == 1, plain
        assert len(report["tests"]["tests/test_chat.py::test_repeats"]["adopted"]) == 3, report
        # The download is named in the report, answered by its tape and stored.
        download = report["tests"]["tests/test_chat.py::test_download"]
        assert download["downloads"] == ["https://files.example.com/cat.txt"], download
        assert download["recorded"] == 1 and download["unused_interactions"] == 0, download
        # Never answered by the other test's cassette: its own tape answered, and was stored.
        second = report["tests"][PAIR[1]]
        assert second["from_cassettes"] == 0 and second["recorded"] == 1, second
        assert report["tests"]["tests/test_chat.py::test_error_stream"]["recorded"] == 1, report
        assert all(not r["not_stored"] for r in report["tests"].values()), report
        assert "not stored as cassettes" not in out, out
        documents = [json.loads(p.read_text()) for p in (project / "cassettes").rglob("*.json")]
        scoped = [d for d in documents if d.get("test_scope")]
        assert [d["test_scope"]["test"] for d in scoped] == [PAIR[1]], scoped
        assert scoped[0]["format"] == 3 and scoped[0]["meta"]["test"] == PAIR[1], scoped[0]
        plain = [d for d in documents if d["key"] == scoped[0]["test_scope"]["plain_key"]]
        assert [d["meta"]["test"] for d in plain] == [PAIR[0]], plain
        errors = [d for d in documents if d["meta"].get("test") == "tests/test_chat.py::test_error_stream"]
        assert len(errors) == 1 and "overloaded_error" in json.dumps(errors[0]["response"]), errors
        # The maintenance commands know a test-scoped cassette for what it is.
        verify = run([cassette_bin(), "verify"], project, plugin_env(files))  # exit 0: no problem
        assert "keys to" not in verify.stdout + verify.stderr, verify.stdout
        listed = run([cassette_bin(), "ls"], project, plugin_env(files)).stdout
        assert sum("(test-scoped)" in line for line in listed.splitlines()) == 1, listed
        shown = run([cassette_bin(), "show", scoped[0]["key"]], project, plugin_env(files)).stdout
        assert f"yes, for {PAIR[1]}" in shown, shown
        # The custom serializer deleted vendor headers: today's request has them, the report says so.
        parsed = report["tests"]["tests/custom/test_parsed.py::test_anthropic_parsed"]["adopted"][0]["drift"]
        assert [line.split(":")[0] for line in parsed] == ["headers.anthropic-version"], parsed
        assert parsed[0].startswith("headers.anthropic-version: added "), parsed
        assert not [line for line in out.splitlines() if "x-api-key" in line.lower() or "authorization" in line.lower()]
        stored = "".join(p.read_text() for p in (project / "cassettes").rglob("*.json"))
        assert "VCRRECORDKEY" not in stored and "VCRRECORDKEY" not in json.dumps(report)
        assert "tests/test_chat.py::test_plain" in stored  # the node id in meta
        assert Counting.connections == 0

        # Replay alone: the tapes moved away, pytest-recording off, no vendor.
        shutil.move(project / "tests" / "cassettes", tmp_path / "tapes-away")
        shutil.move(project / "tests" / "custom" / "cassettes", tmp_path / "custom-tapes-away")
        replay = run(plugin_pytest("replay"), project, plugin_env(files))
        assert "9 passed" in replay.stdout and "failed" not in replay.stdout, replay.stdout
        assert Counting.connections == 0
    finally:
        stopped.shutdown()
        stopped.server_close()


BYPASS_TEST = """
import httpx
import pytest


@pytest.mark.vcr
def test_bypass() -> None:
    # A client with a hard-coded vendor URL, its error swallowed: adopt must still fail it, and
    # nothing may leave the machine (the proxy would tunnel it in auto mode).
    try:
        httpx.post("https://api.mistral.ai/v1/chat/completions?key=sk-BYPASSKEY0123456789", json={}, timeout=5)
    except httpx.HTTPError:
        pass


@pytest.mark.vcr
def test_no_tape() -> None:
    import openai

    try:
        openai.OpenAI(max_retries=0).models.list()
    except openai.APIStatusError:
        pass
"""


def test_adopt_fails_a_test_its_tape_cannot_answer(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    record(project)
    tape = project / "tests" / "cassettes" / "test_chat" / "test_plain.yaml"
    # The path recorded no longer matches what the code calls (vcrpy would fail it too).
    tape.write_text(tape.read_text().replace("/v1/chat/completions", "/v1/completions"))
    (project / "tests" / "test_hostile.py").write_text(BYPASS_TEST)
    broken = project / "tests" / "cassettes" / "test_chat" / "test_stream.yaml"
    broken.write_text("interactions: [" * 5000)  # a hostile tape: deep nesting, never closed
    (project / "cassette.toml").write_text('store = "cassettes"\n')
    # Asked for by the variable this time (which the binary itself does not know as a mode).
    out = run(
        plugin_pytest(
            None, "tests/test_chat.py::test_plain", "tests/test_chat.py::test_stream", "tests/test_hostile.py"
        ),
        project,
        {**plugin_env("http://127.0.0.1:9"), "CASSETTE_MODE": "adopt"},
        expect=1,
    ).stdout
    assert "cassette (adopt):" in out, out
    assert failed(out) == [
        "tests/test_chat.py::test_plain",
        "tests/test_chat.py::test_stream",
        "tests/test_hostile.py::test_bypass",
        "tests/test_hostile.py::test_no_tape",
    ], out
    assert "cassette adopt: no unused interaction of tests/cassettes/test_chat/test_plain.yaml matches" in out, out
    assert (
        "tests/cassettes/test_chat/test_plain.yaml matches POST https://api.openai.com/v1/chat/completions "
        "on method, scheme, host, port, path, query"
    ) in out, out
    assert "cassette adopt: cannot read the vcrpy tape" in out and "test_stream.yaml" in out, out
    assert "1 request(s) to api.mistral.ai:443 bypassed the base URL and were refused" in out, out
    assert "no vcrpy tape for this test" in out and "tests/cassettes/test_hostile/test_no_tape.yaml" in out, out
    assert "BYPASSKEY" not in out
    # What the tape server could not answer got no answer (never one the proxy might store):
    # the tape's note says why, the proxy's "unreachable" for it (once per retry) is not repeated.
    assert "cassette error: upstream" not in out, out
    assert "tests/test_chat.py::test_plain: cassette adopt: no unused interaction" in out, out
    # The tape server's refusals are never stored as cassettes.
    assert not list(project.glob("cassettes/**/*.json")), list(project.glob("cassettes/**/*"))
    report = (project / ".cassette" / "adopt-report.json").read_text()
    assert "BYPASSKEY" not in report and "test_no_tape" in report


def test_adopt_under_xdist_gives_each_worker_its_tape_server(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    record(project)
    tape = project / "tests" / "cassettes" / "test_chat" / "test_plain.yaml"
    tape.write_text(tape.read_text().replace("Name a capital.", "Name a city."))
    (project / "cassette.toml").write_text('store = "cassettes"\nrepeats = "sequence"\n')
    out = run(
        plugin_pytest("adopt", "-n", "2", "-p", "xdist"), project, plugin_env("http://127.0.0.1:9"), expect=1
    ).stdout
    assert "bringing up nodes" in out, out  # distributed: the tests ran in the workers
    assert "8 passed" in out and "1 failed" in out, out
    # Two workers share the store: whichever of the two tests sending one request runs second
    # (or at once) finds the other's cassette and stores its own answer apart, never served the
    # other's.
    assert failed(out) == NOT_ADOPTED, out
    assert DRIFT in out, out
    report = json.loads((project / ".cassette" / "adopt-report.json").read_text())
    assert len(report["tests"]) == 9, report
    assert report["tests"]["tests/test_chat.py::test_plain"]["recorded"] == 1, report
    assert [report["tests"][t]["from_cassettes"] for t in PAIR] == [0, 0], report
    assert [report["tests"][t]["recorded"] for t in PAIR] == [1, 1], report
    replay = run(plugin_pytest("replay", "-p", "no:xdist"), project, plugin_env("http://127.0.0.1:9"), expect=1)
    assert failed(replay.stdout) == NOT_ADOPTED, replay.stdout


SHAPES_TEST = """
import openai
import pytest


def ask(question: str) -> str:
    r = openai.OpenAI(max_retries=0).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question}]
    )
    return r.choices[0].message.content or ""


@pytest.mark.vcr
def test_folded() -> None:
    # The suite's serializer folded typographic characters to ASCII in the recorded body.
    assert ask("It\u2019s \u201cquoted\u201d \u2014 really\u2026") == "folded ok"


@pytest.mark.vcr
def test_gzip() -> None:
    assert ask("Zip it.") == "gzip ok"


@pytest.mark.vcr("shared.yaml")
def test_extra_tape() -> None:
    assert ask("Only in the shared tape.") == "shared ok"
"""

MATCH_TEST = """
from typing import Any

import pytest
from test_shapes import ask


@pytest.fixture(scope="module")
def vcr_config() -> dict[str, Any]:
    return {"match_on": ["method", "path", "body"]}


@pytest.mark.vcr
def test_match_on_body() -> None:
    # Asked in the reverse of the tape's order: only matching on the body pairs them right.
    assert ask("Second?") == "answer two"
    assert ask("First?") == "answer one"
"""


def tape_interaction(question: str, answer: str, gzipped: bool = False) -> dict:
    body = json.dumps({"messages": [{"role": "user", "content": question}], "model": "gpt-4o-mini"})
    answer_body: bytes | str = json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )
    headers = {"Content-Type": ["application/json"]}
    if gzipped:
        answer_body = gzip.compress(answer_body.encode())
        headers["Content-Encoding"] = ["gzip"]
    return {
        "request": {
            "body": body,
            "headers": {"Content-Type": ["application/json"]},
            "method": "POST",
            "uri": "https://api.openai.com/v1/chat/completions",
        },
        "response": {"body": {"string": answer_body}, "headers": headers, "status": {"code": 200, "message": "OK"}},
    }


def write_tape(path: Path, *interactions: dict) -> None:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"interactions": list(interactions), "version": 1}))


def test_adopt_reads_folded_bodies_gzip_answers_extra_tapes_and_match_on(tmp_path: Path) -> None:
    project = tmp_path / "project"
    tests = project / "tests"
    tests.mkdir(parents=True)
    shutil.copy(PROJECT / "pytest.ini", project / "pytest.ini")
    (tests / "test_shapes.py").write_text(SHAPES_TEST)
    (tests / "test_match.py").write_text(MATCH_TEST)
    tapes = tests / "cassettes"
    write_tape(tapes / "test_shapes" / "test_folded.yaml", tape_interaction('It\'s "quoted" - really...', "folded ok"))
    write_tape(tapes / "test_shapes" / "test_gzip.yaml", tape_interaction("Zip it.", "gzip ok", gzipped=True))
    assert "!!binary" in (tapes / "test_shapes" / "test_gzip.yaml").read_text()
    write_tape(tapes / "test_shapes" / "shared.yaml", tape_interaction("Only in the shared tape.", "shared ok"))
    write_tape(
        tapes / "test_match" / "test_match_on_body.yaml",
        tape_interaction("First?", "answer one"),
        tape_interaction("Second?", "answer two"),
    )
    # vcrpy passes them all, offline (its own playback: nothing recorded, nothing sent).
    vcr = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cassette_cli", "--record-mode=none"],
        project,
        clean_env(OPENAI_API_KEY="sk-test-VCRPLAYKEY0123456789abcdef"),
    )
    assert "4 passed" in vcr.stdout, vcr.stdout

    (project / "cassette.toml").write_text('store = "cassettes"\n')
    adopt = run(plugin_pytest("adopt"), project, plugin_env("http://127.0.0.1:9"))
    assert "4 passed" in adopt.stdout, adopt.stdout
    report = json.loads((project / ".cassette" / "adopt-report.json").read_text())["tests"]
    folded = report["tests/test_shapes.py::test_folded"]["adopted"][0]["drift"]
    # (The hand-written tape holds no headers; the key reads none of an OpenAI chat request.)
    assert folded == [
        (
            'body.messages[0].content: "It\'s \\"quoted\\" - really..." -> '
            '"It\u2019s \u201cquoted\u201d \u2014 really\u2026"'
        )
    ], folded
    assert report["tests/test_shapes.py::test_extra_tape"]["tapes"][-1] == "tests/cassettes/test_shapes/shared.yaml"
    match = report["tests/test_match.py::test_match_on_body"]
    assert match["match_on"] == ["method", "path", "body"], match
    assert [a["interaction"] for a in match["adopted"]] == [2, 1], match
    assert all(r["recorded"] == len(r["adopted"]) for r in report.values()), report
    stored = [json.loads(p.read_text()) for p in (project / "cassettes").rglob("*.json")]
    # The gzip answer is stored decoded, never compressed bytes.
    gz = [d for d in stored if d["meta"].get("test") == "tests/test_shapes.py::test_gzip"]
    assert len(gz) == 1 and gz[0]["response"]["body"]["json"]["choices"][0]["message"]["content"] == "gzip ok", gz
    assert "content-encoding" not in gz[0]["response"]["headers"], gz[0]["response"]["headers"]

    shutil.move(tapes, tmp_path / "tapes-away")
    replay = run(plugin_pytest("replay"), project, plugin_env("http://127.0.0.1:9"))
    assert "4 passed" in replay.stdout, replay.stdout


ODD = ROOT / "tests" / "runners" / "vcr_odd_tapes"


def stored_answers(store: Path) -> dict[str, tuple]:
    """Each cassette of a file store by its test: key, status, answer, response headers."""
    out = {}
    for path in store.rglob("*.json"):
        doc = json.loads(path.read_text())
        headers = {k: v for k, v in doc["response"]["headers"].items() if k.startswith("x-amz")}
        out[doc["meta"]["test"]] = (doc["key"], doc["response"]["status"], doc["response"]["body"], headers)
    return out


def test_import_and_adopt_read_odd_tapes_the_same_way_without_pyyaml(tmp_path: Path) -> None:
    # One reader (cassette-vcr) behind both: a brotli answer, a tape with one interaction
    # nothing decodes, and `!!binary` AWS headers (one not UTF-8) give the same cassettes and
    # name the same losses through `cassette import` and through adopt. The adopt run has no
    # PyYAML to import: the binary reads the tapes.
    project = tmp_path / "project"
    shutil.copytree(ODD, project)
    imported = run([cassette_bin(), "import", "tests", "--store", "file://imported"], project, clean_env(), expect=2)
    said = imported.stdout + imported.stderr
    assert "imported 3, kept 0 already stored, failed 1" in said, said

    blocked = tmp_path / "no-pyyaml" / "yaml"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text('raise ImportError("PyYAML is not installed here")\n')
    env = plugin_env("http://127.0.0.1:9")
    env["PYTHONPATH"] = os.pathsep.join([str(blocked.parent), env["PYTHONPATH"]])
    no_yaml = run([sys.executable, "-c", "import yaml"], project, env, expect=1)
    assert "PyYAML is not installed here" in no_yaml.stderr, no_yaml.stderr
    (project / "cassette.toml").write_text('store = "cassettes"\n')
    adopt = run(plugin_pytest("adopt"), project, env)
    assert "3 passed" in adopt.stdout, adopt.stdout

    assert stored_answers(project / "cassettes") == stored_answers(project / "imported")
    answers = stored_answers(project / "cassettes")
    assert set(answers) == {f"tests/test_odd.py::{t}" for t in ("test_brotli", "test_broken", "test_binary_header")}
    assert answers["tests/test_odd.py::test_binary_header"][3] == {"x-amz-request-id": "req-123"}
    report = json.loads((project / ".cassette" / "adopt-report.json").read_text())["tests"]
    # What import named, the adopt report names too, and says in its summary.
    broken = report["tests/test_odd.py::test_broken"]
    assert broken["unused_interactions"] == 0 and broken["unmatched"] == [], broken
    assert broken["skipped"] == [
        (
            "tests/cassettes/test_odd/test_broken.yaml interaction 2 cannot be read: the answer is zstd-encoded, "
            "which cannot be decoded here; re-record it with vcrpy's decode_compressed_response=True; skipped it"
        )
    ], broken
    assert (
        "cannot import tests/cassettes/test_odd/test_broken.yaml interaction 2: the answer is zstd-encoded, "
        "which cannot be decoded here"
    ) in said, said
    header = report["tests/test_odd.py::test_binary_header"]["skipped"]
    assert header == [
        (
            "tests/cassettes/test_odd/test_binary_header.yaml interaction 1: response header x-amz-id-2: "
            "its !!binary value is not UTF-8 text; left out"
        )
    ], header
    assert (
        "note tests/cassettes/test_odd/test_binary_header.yaml interaction 1: response header x-amz-id-2: its "
        "!!binary value is not UTF-8 text; left out"
    ) in said, said
    assert "not read: tests/cassettes/test_odd/test_broken.yaml interaction 2 cannot be read" in adopt.stdout

    shutil.move(project / "tests" / "cassettes", tmp_path / "tapes-away")
    replay = run(plugin_pytest("replay"), project, env)
    assert "3 passed" in replay.stdout, replay.stdout
