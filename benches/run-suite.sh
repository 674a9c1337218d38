#!/usr/bin/env bash
# Suite-runner benchmark: `cassette run` over generated suites, whole process, release build,
# measured with hyperfine. Numbers go to BENCHMARKS.md, section "Suite runner".
#
#   benches/run-suite.sh [CASES...]        # default: 100 10000
#
# For each size: record every case against the local fake upstream (examples/fake_upstream.rs)
# into a file:// store, then measure
#   - replay from the file store;
#   - record (overwrite, each cassette fsynced) against the fake upstream;
#   - with CASSETTE_TEST_S3 set (and the AWS_* environment of scripts/s3-server.sh): replay
#     from S3 through the tiered cache (--cache sled://), a cold first run and warm later ones,
#     with every request that reaches the bucket counted by benches/s3-count.py standing
#     between cassette and the S3 server. The warm runs must read nothing from the bucket: the
#     script fails if they do.
#
# Knobs: RECORD_RUNS=3 REPLAY_RUNS=10 WORK=$(mktemp -d). Needs hyperfine and python3
# (apt-get install -y hyperfine). Everything runs on loopback; the fake upstream and the
# counter are stopped, and the scratch folder and bucket prefixes removed, on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
sizes=("${@:-100 10000}")
read -r -a sizes <<<"${sizes[*]}"
RECORD_RUNS=${RECORD_RUNS:-3}
REPLAY_RUNS=${REPLAY_RUNS:-10}

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
counter_pid=""
prefixes=()
cleanup() {
  if [ -n "$fake_pid" ]; then kill "$fake_pid" 2>/dev/null || true; fi
  if [ -n "$counter_pid" ]; then kill "$counter_pid" 2>/dev/null || true; fi
  # gc refuses an empty usage log; one naming a key nobody has makes every cassette unused.
  # (The index segments `cassette copy` wrote under the prefix, a few KB, are left behind:
  # no cassette command deletes segments.)
  printf '%064d\n' 0 >"$work/none.log"
  for prefix in "${prefixes[@]}"; do
    "$bin" gc --unused --usage-log "$work/none.log" --store "$prefix" >&2 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

"$fake" > "$work/fake.url" &
fake_pid=$!
for _ in $(seq 50); do [ -s "$work/fake.url" ] && break; sleep 0.1; done
url=$(cat "$work/fake.url")
echo "== fake upstream at $url" >&2

s3=${CASSETTE_TEST_S3:-}
if [ -n "$s3" ]; then
  : "${AWS_ENDPOINT_URL:?CASSETTE_TEST_S3 needs the AWS_* environment of scripts/s3-server.sh}"
  python3 "$root/benches/s3-count.py" "$AWS_ENDPOINT_URL" "$work/counter.port" &
  counter_pid=$!
  for _ in $(seq 50); do [ -s "$work/counter.port" ] && break; sleep 0.1; done
  counter="http://127.0.0.1:$(cat "$work/counter.port")"
  echo "== counting S3 requests at $counter (forwarding to $AWS_ENDPOINT_URL)" >&2
else
  echo "== S3 not measured: CASSETTE_TEST_S3 is unset (see scripts/s3-server.sh)" >&2
fi
counts() { curl -s "$counter/__counts"; }
reset_counts() { curl -s -X POST "$counter/__counts/reset" >/dev/null; }

rows="$work/rows.md"
: >"$rows"
row() { # size, what, hyperfine json, bucket requests
  python3 - "$@" >>"$rows" <<'PY'
import json, sys
size, what, path, bucket = sys.argv[1:5]
r = json.load(open(path))["results"][0]
ms = lambda s: f"{s * 1000:,.1f} ms"
sd = f" ± {ms(r['stddev'])}" if r.get("stddev") else ""
print(f"| {int(size):,} | {what} | {ms(r['mean'])}{sd} | {ms(r['min'])} | {ms(r['max'])} | {len(r['times'])} | {bucket} |")
PY
}

for cases in "${sizes[@]}"; do
  dir="$work/$cases"
  mkdir -p "$dir"
  echo "== $cases cases: generating the suite" >&2
  python3 - "$cases" > "$dir/suite.jsonl" <<'PY'
import json, sys
graders = [
    ("contains", {"needle": "said"}),
    ("regex", {"pattern": "^You said: "}),
    ("not_contains", {"needle": "sorry"}),
]
for i in range(int(sys.argv[1])):
    grader, expect = graders[i % len(graders)]
    print(json.dumps({
        "id": f"case-{i:06}",
        "prompt": f"Repeat after me: benchmark case number {i}.",
        "params": {"model": "gpt-4o-mini", "temperature": 0, "max_tokens": 64},
        "grader": grader,
        "expect": expect,
    }))
PY
  store="file://$dir/cassettes"
  # One recording first, so replay has every cassette (and the output is checked once).
  "$bin" run "$dir/suite.jsonl" --mode record --store "$store" --upstream "$url" > "$dir/out.jsonl"
  test "$(grep -c '"verdict":"pass"' "$dir/out.jsonl")" -eq "$cases"

  cd "$dir"
  echo "== $cases cases: replay from the file store" >&2
  hyperfine --warmup 2 --runs "$REPLAY_RUNS" --export-json "$dir/replay.json" \
    -n "replay, $cases cases (file store)" \
    "$bin run suite.jsonl --store $store > /dev/null 2>&1"
  row "$cases" "replay, file store" "$dir/replay.json" "–"

  echo "== $cases cases: record against the fake upstream" >&2
  hyperfine --warmup 0 --runs "$RECORD_RUNS" --export-json "$dir/record.json" \
    -n "record, $cases cases (fake upstream on loopback)" \
    "$bin run suite.jsonl --mode record --store $store --upstream $url > /dev/null 2>&1"
  row "$cases" "record, file store (fake upstream on loopback)" "$dir/record.json" "–"

  if [ -n "$s3" ]; then
    prefix="$s3/bench-run-suite-$$-$cases"
    prefixes+=("$prefix")
    echo "== $cases cases: copying the cassettes to $prefix" >&2
    "$bin" copy --jobs 32 "$store" "$prefix" >&2
    cache="sled://$dir/cache"
    via_counter=(env AWS_ENDPOINT_URL="$counter")
    # A cold run fills the cache, so it runs once per cache: once straight to the server for
    # its time, once through the counter (which adds its own latency) for its requests.
    hyperfine --runs 1 --export-json "$dir/cold.json" -n "replay, $cases cases (S3, cold cache)" \
      "$bin run suite.jsonl --store $prefix --cache $cache > /dev/null 2>&1"
    reset_counts
    "${via_counter[@]}" "$bin" run suite.jsonl --store "$prefix" --cache "sled://$dir/cache-counted" > /dev/null 2>&1
    cold=$(counts)
    rm -rf "$dir/cache-counted"
    reset_counts
    hyperfine --warmup 1 --runs "$REPLAY_RUNS" --export-json "$dir/warm.json" \
      -n "replay, $cases cases (S3, warm cache)" \
      "${via_counter[*]} $bin run suite.jsonl --store $prefix --cache $cache > /dev/null 2>&1"
    warm=$(counts)
    echo "   bucket requests: cold run $cold, all warm runs $warm" >&2
    row "$cases" "replay, S3 through a sled cache, first run (cold cache)" "$dir/cold.json" \
      "$(python3 -c 'import json,sys; c=json.loads(sys.argv[1]); print(", ".join(f"{v:,} {k}" for k, v in sorted(c.items()) if k != "requests") or "0")' "$cold")"
    row "$cases" "replay, S3 through a sled cache, later runs (warm cache)" "$dir/warm.json" \
      "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("requests", 0))' "$warm")"
    if [ "$warm" != "{}" ]; then
      echo "FAIL: the warm runs read from the bucket: $warm" >&2
      exit 1
    fi
  fi
  cd "$root"
  rm -rf "$dir/cassettes" "$dir/cache"
done

echo
echo "| cases | run | mean (± σ) | min | max | runs | bucket requests |"
echo "|---:|---|---:|---:|---:|---:|---:|"
cat "$rows"
