"""Issue 35 item 8: a request a test's background thread (or thread-pool task) sends is charged to
that test, not to whichever test runs when it arrives: after its test ended, it is a late request
of that test, named in the session summary, and fails the run; the test running then passes. A
pool's worker serves each task for the test that submitted it. Real pytest, the plugin, a real
OpenAI client over the in-process transports, the binary's proxy in replay (an empty store:
every request misses)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import FakeUpstream
from test_in_process import both, pytest_run, small_project

CLIENT = """
import threading
import time

import openai

B_RUNNING = threading.Event()


def ask(words):
    client = openai.OpenAI(max_retries=0)
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": words}])
    except openai.APIStatusError:
        pass
"""

THREAD = (
    CLIENT
    + """

def late():
    B_RUNNING.wait(30)
    ask("asked from test_a's thread")


def test_a():
    global WORKER
    WORKER = threading.Thread(target=late, daemon=True)
    WORKER.start()


def test_b():
    B_RUNNING.set()
    WORKER.join(30)
    assert not WORKER.is_alive()
"""
)

POOL = (
    CLIENT
    + """
import concurrent.futures

POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1)


def late():
    B_RUNNING.wait(30)
    ask("asked from test_a's task")


def test_a():
    global LATE
    LATE = POOL.submit(late)


def test_b():
    B_RUNNING.set()
    LATE.result(30)


def test_c():
    # The pool's one worker was started by test_a: this task is test_c's all the same.
    POOL.submit(ask, "asked from test_c's task").result(30)
"""
)


def run(tmp_path: Path, text: str) -> tuple[str, str]:
    vendor = FakeUpstream()
    try:
        folder = small_project(tmp_path, vendor, "test_late.py", text)
        result = pytest_run(folder, "replay", "-v")
        return result.stdout, both(result)
    finally:
        vendor.close()


@pytest.mark.skipif(sys.platform == "win32", reason="the channel is a Unix socket")
def test_a_threads_late_miss_is_its_tests_and_fails_the_run(tmp_path: Path) -> None:
    out, shown = run(tmp_path, THREAD)
    assert "test_late.py::test_a PASSED" in out, shown
    assert "test_late.py::test_b PASSED" in out, shown
    assert "late, after tests/test_late.py::test_a ended (a thread or task it started): 1 requests, 1 misses" in (
        out
    ), shown
    assert "cassette miss" in out.split("late, after", 1)[1], shown
    assert "exit 1" in shown, shown


@pytest.mark.skipif(sys.platform == "win32", reason="the channel is a Unix socket")
def test_a_pool_task_is_the_submitting_tests(tmp_path: Path) -> None:
    out, shown = run(tmp_path, POOL)
    assert "test_late.py::test_a PASSED" in out, shown
    assert "test_late.py::test_b PASSED" in out, shown
    assert "test_late.py::test_c FAILED" in out, shown
    assert "late, after tests/test_late.py::test_a ended (a thread or task it started): 1 requests, 1 misses" in (
        out
    ), shown
    assert "exit 1" in shown, shown
