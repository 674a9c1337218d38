#!/usr/bin/env python3
"""Install benchmark (BENCHMARKS.md, "Install"): what a user waits for and downloads.

  python3 benches/install.py WHEEL MAIN_TGZ PLATFORM_TGZ [--runs N] [--calls N]

- the artifacts' sizes (the wheel, the npm platform package);
- fresh venv + `pip install --no-index WHEEL` + the first replayed test (the example suite),
  wall time, RUNS times, each from nothing (a new venv each time);
- the shims' overhead on `cassette --version`: the bare binary, `node_modules/.bin/cassette`
  installed by npm as usual (its postinstall step puts the binary in the JS shim's place) and
  with `--ignore-scripts` (the JS shim runs), `npx cassette`, and `python -m cassette_cli`, called in turn CALLS times in one loop (so the machine's load falls on each
  alike), medians compared with the bare binary's;
- a replay miss through the npm shim and `python -m cassette_cli` still exits 2 and prints the
  explanation (checked, not timed).

Run from the repository root; the artifacts come from `maturin build --profile dist` and
`scripts/npm-pack.sh`.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = ["run", "examples/suite/suite.jsonl", "--store", "file://examples/suite/cassettes"]
STALE = ["run", "examples/triage/stale.jsonl", "--store", "file://examples/triage/cassettes"]


def sh(args: list, cwd: Path = ROOT, expect: int = 0) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != expect:
        sys.exit(f"{args}: exit {result.returncode}, expected {expect}\n{result.stdout}{result.stderr}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("main_tgz", type=Path)
    parser.add_argument("platform_tgz", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cassette-install-bench-"))

    print("| artifact | bytes | MB |\n|---|---:|---:|")
    for path in (args.wheel, args.platform_tgz, args.main_tgz):
        size = path.stat().st_size
        print(f"| `{path.name}` | {size:,} | {size / 1e6:.1f} |")

    print("\nfresh venv + pip install --no-index + first replayed test (wall, s):")
    totals = []
    for run in range(args.runs):
        venv = work / f"venv{run}"
        start = time.perf_counter()
        sh([sys.executable, "-m", "venv", venv])
        made = time.perf_counter()
        sh(
            [
                venv / "bin" / "python",
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-index",
                args.wheel.resolve(),
            ]
        )
        installed = time.perf_counter()
        replay = sh([venv / "bin" / "cassette", *SUITE])
        done = time.perf_counter()
        assert "9 passed" in replay.stdout + replay.stderr
        totals.append(done - start)
        print(
            f"  run {run + 1}: venv {made - start:.2f} + pip install {installed - made:.2f} "
            f"+ replay {done - installed:.2f} = {done - start:.2f}"
        )
    print(f"  median {statistics.median(totals):.2f} s")

    # The venv's own pip is most of the above (ensurepip installs pip into every new venv);
    # the same install with the caller's pip (`pip --python`, pip 22.3+) shows what is ours.
    print("\nfresh venv without pip + `pip --python VENV install --no-index` + first replay (wall, s):")
    totals = []
    for run in range(args.runs):
        venv = work / f"bare{run}"
        start = time.perf_counter()
        sh([sys.executable, "-m", "venv", "--without-pip", venv])
        made = time.perf_counter()
        sh(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                venv / "bin" / "python",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-index",
                args.wheel.resolve(),
            ]
        )
        installed = time.perf_counter()
        replay = sh([venv / "bin" / "cassette", *SUITE])
        done = time.perf_counter()
        assert "9 passed" in replay.stdout + replay.stderr
        totals.append(done - start)
        print(
            f"  run {run + 1}: venv {made - start:.2f} + pip install {installed - made:.2f} "
            f"+ replay {done - installed:.2f} = {done - start:.2f}"
        )
    print(f"  median {statistics.median(totals):.2f} s")

    # Installed twice: as npm does by default (the postinstall step puts the platform binary in
    # the shim's place), and with `--ignore-scripts` (the JS shim stays).
    projects = {}
    for name, extra in (("project", []), ("project-no-scripts", ["--ignore-scripts"])):
        project = work / name
        project.mkdir()
        sh(["npm", "init", "-y"], cwd=project)
        sh(
            [
                "npm",
                "install",
                "--offline",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                *extra,
                args.platform_tgz.resolve(),
                args.main_tgz.resolve(),
            ],
            cwd=project,
        )
        projects[name] = project
    project = projects["project"]
    venv = work / "venv0"
    binary = project / "node_modules" / "cassette-cli-linux-x64" / "bin" / "cassette"
    swapped = "node_modules/.bin/cassette (postinstall: the binary in the shim's place)"
    shim = "node_modules/.bin/cassette (--ignore-scripts: the JS shim)"
    ways = {
        "bare binary": [binary],
        # Node's own start-up, the floor of any JS shim.
        "node -e 0 (no shim: Node alone)": ["node", "-e", "0"],
        swapped: [project / "node_modules" / ".bin" / "cassette"],
        shim: [projects["project-no-scripts"] / "node_modules" / ".bin" / "cassette"],
        "npx cassette": ["npx", "--offline", "cassette"],
        "python -m cassette_cli": [venv / "bin" / "python", "-m", "cassette_cli"],
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    cpu: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.calls):
        for name, command in ways.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            sh([*command] if name.startswith("node -e") else [*command, "--version"], cwd=project)
            times[name].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    bare = statistics.median(times["bare binary"])
    bare_cpu = statistics.median(cpu["bare binary"])
    # Wall time moves with the machine's load; CPU time (user + sys of the process tree) much
    # less, and is what an idle machine's wall time comes close to for a start-up like this.
    print(f"\n`cassette --version`, {args.calls} calls of each, alternated (medians, ms):")
    print("| way | wall | wall p90 | wall added | CPU (user + sys) | CPU added |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, samples in times.items():
        median = statistics.median(samples)
        p90 = statistics.quantiles(samples, n=10)[-1]
        used = statistics.median(cpu[name])
        print(
            f"| {name} | {median * 1e3:.1f} | {p90 * 1e3:.1f} | {(median - bare) * 1e3:+.1f} "
            f"| {used * 1e3:.1f} | {(used - bare_cpu) * 1e3:+.1f} |"
        )

    for name in (swapped, shim, "python -m cassette_cli"):
        miss = sh([*ways[name], *STALE], expect=2)
        assert 'replay miss in case "capital"' in miss.stderr, miss.stderr
        print(f"\na miss through {name}: exit 2, explained ({miss.stderr.count('replay miss in case')} misses named)")
    print(f"\nmachine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
