#!/usr/bin/env bash
# Regression check of the replay hit path (BENCHMARKS.md, section "Regression check").
#
# Criterion keeps named baselines of every benchmark under target/criterion. `save` measures
# the hit-path benchmarks and stores them under NAME; `check` measures them again, compares
# with NAME and fails (exit 1) naming every benchmark that criterion finds slower beyond the
# noise threshold. Both print criterion's medians for keying as ratios to SHA-256 of the same
# bytes, and `check` also fails when keying a 1 MiB request costs more than MAX_KEYING_RATIO
# times hashing it: a ratio measured in one run, so it holds on any machine.
#
#   benches/regression.sh save  [NAME]   # before a change, e.g. on main (NAME defaults to main)
#   benches/regression.sh check [NAME]   # after it, on the same machine
#
# Benchmarks: cassette-keying's `keying` group (hit_key, key and SHA-256 at 2 KiB and 1 MiB)
# and cassette-recorder's replay hit with its Store::get baseline. Knobs:
#   NOISE=0.10  criterion's --noise-threshold (smaller changes are noise on a shared machine)
#   MAX_KEYING_RATIO=2.0
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
name=${2:-main}
noise=${NOISE:-0.10}
max_ratio=${MAX_KEYING_RATIO:-2.0}
case "$mode" in
  save) baseline=(--save-baseline "$name") ;;
  check) baseline=(--baseline "$name") ;;
  *) echo "usage: $0 save|check [NAME]" >&2; exit 2 ;;
esac

log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() { # package, bench, filter
  echo "== cargo bench -p $1 --bench $2 -- '$3' ${baseline[*]}" >&2
  cargo bench -p "$1" --bench "$2" -- "$3" "${baseline[@]}" --noise-threshold "$noise" 2>&1 | tee -a "$log"
}
run cassette-keying keying 'keying/'
run cassette-recorder replay 'replay_10k/(baseline_store_get|hit)$'

# Criterion's medians of this run (target/criterion/GROUP/BENCH/new/estimates.json).
ratios=$(python3 - "$max_ratio" <<'EOF'
import json, pathlib, sys
root = pathlib.Path("target/criterion/keying")
def median(bench, size):
    estimates = json.loads((root / bench / size / "new" / "estimates.json").read_text())
    return estimates["median"]["point_estimate"] / 1e3  # ns -> µs
worst = 0.0
for size in ("2KiB", "1MiB"):
    sha = median("sha256", size)
    for bench in ("hit_key", "key"):
        ratio = median(bench, size) / sha
        print(f"keying {size}: {bench} {median(bench, size):.1f} µs, sha256 {sha:.1f} µs, ratio {ratio:.2f}")
        if bench == "hit_key" and size == "1MiB":
            worst = ratio
print("OVER" if worst > float(sys.argv[1]) else "OK")
EOF
)
echo "$ratios" | grep -v '^OVER$\|^OK$'

[ "$mode" = check ] || exit 0
regressed=$(awk '/^[A-Za-z0-9_]+\/[^ ]+/ { id = $1 } /Performance has regressed/ { print id }' "$log")
status=0
if [ -n "$regressed" ]; then
  echo "slower than baseline '$name' (beyond ${noise} noise):" $regressed >&2
  status=1
fi
if [ "$(echo "$ratios" | tail -1)" = OVER ]; then
  echo "hit_key of 1 MiB costs more than ${max_ratio}x SHA-256 of the same bytes" >&2
  status=1
fi
[ "$status" = 0 ] && echo "no regression against baseline '$name'" >&2
exit "$status"
