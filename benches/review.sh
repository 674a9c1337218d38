#!/usr/bin/env bash
# Review benchmark: `cassette diff A B --html FILE` on a re-record of N cassettes (default
# 1,000), against the same `cassette diff A B` writing its text report only (the baseline,
# measured in the same hyperfine run), release build. Numbers go to BENCHMARKS.md, section
# "Review of a re-record".
#
#   benches/review.sh [N]
#
# The re-record: every case recorded against the local fake upstream (examples/fake_upstream.rs)
# with the system prompt "Be brief.", then again with "Be brief and kind." (so every key moves
# and every old cassette must be paired with its new one by the nearest-recording rule); in the
# new set every other answer gets reworded and every 50th is cut short (finish reason `length`).
# Prompts are one to four paragraphs long. Prints the hyperfine table, the size of the HTML
# file and of the text report, and the verdict counts.
#
# Knobs: RUNS=10 WORK=$(mktemp -d). Needs hyperfine and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
RUNS=${RUNS:-10}
command -v hyperfine >/dev/null || { echo "hyperfine is not installed: apt-get install -y hyperfine" >&2; exit 2; }

echo "== building (release)" >&2
cargo build -q --release --bin cassette
cargo build -q --release --example fake_upstream
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin="$target_dir/release/cassette"
fake="$target_dir/release/examples/fake_upstream"

work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
fake_pid=""
cleanup() {
  if [ -n "$fake_pid" ]; then kill "$fake_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
"$fake" > "$work/fake.url" &
fake_pid=$!
for _ in $(seq 50); do [ -s "$work/fake.url" ] && break; sleep 0.1; done
url=$(cat "$work/fake.url")

python3 - "$n" "$work" <<'PY'
import json, sys
n, work = int(sys.argv[1]), sys.argv[2]
words = "the quarterly report lists revenue costs margins and the outlook for each region".split()
for name, system in [("before", "Be brief."), ("after", "Be brief and kind.")]:
    with open(f"{work}/{name}.jsonl", "w") as f:
        for i in range(n):
            paragraphs = 1 + i % 4
            text = " ".join(" ".join(words[(i + k) % len(words)] for k in range(40)) for _ in range(paragraphs))
            prompt = f"Case {i}: summarise this. {text}"
            f.write(json.dumps({"id": f"c{i}", "prompt": prompt,
                                "params": {"model": "gpt-4o-mini", "system": system},
                                "grader": "contains", "expect": {"needle": "said"}}) + "\n")
PY
run() { "$bin" run "$work/$1.jsonl" --mode record --store "file://$work/$2" --upstream "$url" --runs-dir "$work/runs" >/dev/null 2>&1; }
echo "== recording $n cases twice" >&2
run before a
run after b
python3 - "$work/b" <<'PY'
import json, os, sys
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(sys.argv[1]) for f in fs if f.endswith(".json"))
for i, path in enumerate(files):
    doc = json.load(open(path))
    choice = doc["response"]["body"]["json"]["choices"][0]
    if i % 2:
        choice["message"]["content"] += " Indeed, that is the gist of it."
    if i % 50 == 0:
        choice["finish_reason"] = "length"
        choice["message"]["content"] = choice["message"]["content"][:40]
    json.dump(doc, open(path, "w"), indent=2)
PY

cd "$work"
echo "== $n cassettes on each side" >&2
hyperfine -N -i --warmup 2 --runs "$RUNS" --export-markdown "$work/table.md" \
  -n "diff, text report (baseline)" "$bin diff file://a file://b" \
  -n "diff --html review.html" "$bin diff file://a file://b --html review.html" \
  -n "diff --summary" "$bin diff file://a file://b --summary" >&2
cat "$work/table.md"
"$bin" diff file://a file://b > text.txt 2>/dev/null || true
"$bin" diff file://a file://b --summary 2>/dev/null | head -3 || true
echo "HTML review: $(stat -c %s review.html) bytes ($(du -h review.html | cut -f1)); text report: $(stat -c %s text.txt) bytes; store b: $(du -sh b | cut -f1)"
