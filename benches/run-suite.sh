#!/usr/bin/env bash
# Suite-runner benchmark: `cassette run` over a generated 1,000-case suite, in replay (from a
# file:// store) and in record (against the local fake upstream, examples/fake_upstream.rs),
# release build, measured with hyperfine. Numbers go to BENCHMARKS.md, section "Suite runner".
#
#   benches/run-suite.sh [CASES]        # default 1000
#
# Needs hyperfine (apt-get install -y hyperfine). Everything runs on loopback; the fake
# upstream is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-1000}

command -v hyperfine >/dev/null || { echo "hyperfine is not installed: apt-get install -y hyperfine" >&2; exit 2; }

echo "== building (release)" >&2
cargo build -q --release --bin cassette
cargo build -q --release --example fake_upstream
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin="$target_dir/release/cassette"
fake="$target_dir/release/examples/fake_upstream"

work=$(mktemp -d)
fake_pid=""
cleanup() {
  if [ -n "$fake_pid" ]; then kill "$fake_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== generating a $cases-case suite" >&2
python3 - "$cases" > "$work/suite.jsonl" <<'PY'
import json, sys
graders = [
    ("contains", {"needle": "said"}),
    ("regex", {"pattern": "^You said: "}),
    ("not_contains", {"needle": "sorry"}),
]
for i in range(int(sys.argv[1])):
    grader, expect = graders[i % len(graders)]
    print(json.dumps({
        "id": f"case-{i:05}",
        "prompt": f"Repeat after me: benchmark case number {i}.",
        "params": {"model": "gpt-4o-mini", "temperature": 0, "max_tokens": 64},
        "grader": grader,
        "expect": expect,
    }))
PY

"$fake" > "$work/fake.url" &
fake_pid=$!
for _ in $(seq 50); do [ -s "$work/fake.url" ] && break; sleep 0.1; done
url=$(cat "$work/fake.url")
echo "== fake upstream at $url" >&2

store="file://$work/cassettes"
# One recording first, so replay has every cassette (and the output is checked once).
"$bin" run "$work/suite.jsonl" --mode record --store "$store" --upstream "$url" > "$work/out.jsonl"
test "$(grep -c '"verdict":"pass"' "$work/out.jsonl")" -eq "$cases"

cd "$work"
hyperfine --warmup 3 --runs 20 --export-markdown "$work/replay.md" \
  -n "replay, $cases cases (file store)" \
  "$bin run suite.jsonl --store $store > /dev/null 2>&1"
hyperfine --warmup 1 --runs 10 --export-markdown "$work/record.md" \
  -n "record, $cases cases (fake upstream on loopback)" \
  "$bin run suite.jsonl --mode record --store $store --upstream $url > /dev/null 2>&1"
cat "$work/replay.md" "$work/record.md"
