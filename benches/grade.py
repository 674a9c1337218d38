#!/usr/bin/env python3
"""What a judged expectation costs inside a test, replayed from a cassette (issue 26: under
5 ms each, over 200 expectations).

Records N distinct judged expectations (`expect(text).contains_intent(...)`) against the fake
judge of tests/sdk/fake_judge.py, stops the judge, then times in one run, alternating rounds:

- judged, long-lived: the N judged expectations replayed through one `cassette grade --jsonl`
  process (what the Python and Node helpers do), from Python's `expect()`;
- baseline, deterministic: N `contains` expectations through the same process (the pipe round
  trip and JSON without the store);
- judged, behind a proxy: the same N through one `cassette grade --jsonl` process whose votes
  go through a `cassette proxy` in replay (what happens under `cassette exec -- pytest` and the
  pytest plugin: CASSETTE_PROXY_URL is set, the proxy answers from the store);
- baseline, a process each: a sample of the judged expectations, one `cassette grade` process
  per expectation.

Usage: benches/grade.py [--n 200] [--rounds 5] [--binary target/release/cassette]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "tests" / "sdk")]

# Imported from the two folders just put on the path.
from cassette_cli import GradeSession, expect  # noqa: E402
from fake_judge import FakeJudge  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sample", type=int, default=20, help="expectations timed one process each")
    parser.add_argument("--binary", default=str(ROOT / "target" / "release" / "cassette"))
    args = parser.parse_args()

    judge = FakeJudge()
    work = Path(tempfile.mkdtemp(prefix="grade-bench-"))
    (work / "cassette.toml").write_text(f'[routes.judge]\nupstream = "{judge.url}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CASSETTE_", "UPSTREAM_"))}
    env.update(
        CASSETTE_CONFIG=str(work / "cassette.toml"),
        CASSETTE_STORE=f"file://{work / 'cassettes'}",
        CASSETTE_JUDGE_ROUTE="judge",
        CASSETTE_JUDGE_MODEL="judge-1",
    )
    texts = [f"Answer {i}: I'm sorry, your refund {i} is on its way." for i in range(args.n)]

    recorder = GradeSession(["--mode", "record"], env=env, binary=args.binary)
    for text in texts:
        expect(text, session=recorder).contains_intent("apology")
    recorder.close()
    judge.stop()
    asked = judge.connections

    replay = GradeSession(["--mode", "replay"], env=env, binary=args.binary)
    expect("warm", session=replay).contains("warm")
    proxy = subprocess.Popen(
        [args.binary, "proxy", "--mode", "replay", "--listen", "127.0.0.1:0", "--ready", "json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proxy.stdout is not None
    proxy_url = json.loads(proxy.stdout.readline())["url"]
    relayed = GradeSession(["--mode", "replay"], env={**env, "CASSETTE_PROXY_URL": proxy_url}, binary=args.binary)
    expect(texts[0], session=relayed).contains_intent("apology")
    judged: list[float] = []
    behind_proxy: list[float] = []
    plain: list[float] = []
    spawned: list[float] = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        for text in texts:
            expect(text, session=replay).contains_intent("apology")
        judged.append((time.perf_counter() - started) / args.n)

        started = time.perf_counter()
        for text in texts:
            expect(text, session=relayed).contains_intent("apology")
        behind_proxy.append((time.perf_counter() - started) / args.n)

        started = time.perf_counter()
        for text in texts:
            expect(text, session=replay).contains("sorry")
        plain.append((time.perf_counter() - started) / args.n)

        started = time.perf_counter()
        for text in texts[: args.sample]:
            request = json.dumps({"text": text, "grader": "contains_intent", "expect": {"intent": "apology"}})
            done = subprocess.run(
                [args.binary, "grade", "--mode", "replay"],
                input=request,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            assert done.returncode == 0, done.stderr
        spawned.append((time.perf_counter() - started) / args.sample)
    replay.close()
    relayed.close()
    proxy.terminate()
    proxy.wait(timeout=30)
    assert judge.connections == asked, "the replay reached for the judge"
    judge.close()

    def row(name: str, times: list[float]) -> str:
        ms = [t * 1000 for t in times]
        return f"| {name} | {statistics.mean(ms):.3f} ms | {min(ms):.3f} ms | {max(ms):.3f} ms |"

    print(f"{args.n} expectations, {args.rounds} rounds; judge connections during replay: {judge.connections - asked}")
    print("| per expectation | mean of rounds | best round | worst round |")
    print("|---|---:|---:|---:|")
    print(row("judged, replayed, one `grade --jsonl` process", judged))
    print(row("judged, replayed, one `grade --jsonl` process behind a `cassette proxy`", behind_proxy))
    print(row("baseline: `contains`, same process", plain))
    print(row(f"baseline: judged, a `cassette grade` process each ({args.sample} a round)", spawned))
    print(
        f"judged / contains: {statistics.mean(judged) / statistics.mean(plain):.2f}x; "
        f"behind a proxy / contains: {statistics.mean(behind_proxy) / statistics.mean(plain):.2f}x; "
        f"a process each / long-lived: {statistics.mean(spawned) / statistics.mean(judged):.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
