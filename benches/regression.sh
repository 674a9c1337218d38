#!/usr/bin/env bash
# Regression check of the replay hit path (BENCHMARKS.md, section "Regression check").
#
# Criterion keeps named baselines of every benchmark under target/criterion. `save` measures
# the hit-path benchmarks and stores them under NAME; `check` measures them again and compares
# with NAME. On a shared machine absolute times move with the load, so the verdict compares
# each hit-path time as a ratio to a reference measured in the same run (SHA-256 of the same
# bytes for keying, the fastest of each measured alternately in one loop; `Store::get` of the
# same cassette for a replay hit, likewise alternated in one loop) with the same ratio in the
# baseline: `check` fails (exit 1) naming every benchmark whose ratio grew by more than NOISE
# (REPLAY_NOISE for the replay hits), and when keying a 1 MiB request costs more than
# MAX_KEYING_RATIO times hashing it (the target of issue 14). Criterion's own absolute
# comparisons are printed too.
#
#   benches/regression.sh save  [NAME]   # before a change, e.g. on main (NAME defaults to main)
#   benches/regression.sh check [NAME]   # after it, on the same machine
#
# Benchmarks: cassette-keying's `keying` and `keying_vs_sha256` groups (hit_key, key and
# SHA-256 at 2 KiB and 1 MiB) and cassette-recorder's `replay_vs_store_get` group (a replay hit
# from the hit cache, one parsing and rendering its cassette, and one from the hit cache through
# a tiered store with a warm file cache, each in units of Store::get of the same cassette).
# Knobs:
#   NOISE=0.10
#   REPLAY_NOISE=0.10  (the interleaved replay ratios repeat to about 1%)
#   MAX_KEYING_RATIO=2.0
#   PROFILE=bench      (the cargo profile; PROFILE=dist measures the released binary's build)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
name=${2:-main}
noise=${NOISE:-0.10}
replay_noise=${REPLAY_NOISE:-0.10}
max_ratio=${MAX_KEYING_RATIO:-2.0}
profile=${PROFILE:-bench}
case "$mode" in
  save) baseline=(--save-baseline "$name") ;;
  check) baseline=(--baseline "$name") ;;
  *) echo "usage: $0 save|check [NAME]" >&2; exit 2 ;;
esac

run() { # package, bench, filter
  echo "== cargo bench --profile $profile -p $1 --bench $2 -- '$3' ${baseline[*]}" >&2
  cargo bench --profile "$profile" -p "$1" --bench "$2" -- "$3" "${baseline[@]}" --noise-threshold "$noise"
}
run cassette-keying keying 'keying'
run cassette-recorder replay 'replay_vs_store_get/'

# Criterion's medians: `save` wrote them under NAME, `check` under `new` (NAME is the baseline).
python3 - "$mode" "$name" "$noise" "$max_ratio" "$replay_noise" <<'EOF_PY'
import json, pathlib, sys
mode, name, noise, max_ratio = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
replay_noise = float(sys.argv[5])
current = name if mode == "save" else "new"
def median(bench, run):
    path = pathlib.Path("target/criterion", bench, run, "estimates.json")
    return json.loads(path.read_text())["median"]["point_estimate"] / 1e3  # ns -> µs
# keying_vs_sha256 alternates SHA-256 and keying in one loop; its "time" is the ratio, 1 ms = 1x.
ratios = [(f"keying/{f}/{size}", "SHA-256 of the same bytes, interleaved", noise,
           lambda run, f=f, size=size: median(f"keying_vs_sha256/{f}/{size}", run) / 1e3)
          for size in ("1MiB", "2KiB") for f in ("hit_key", "key")]
# Replay hits alternated with Store::get of the same cassette in one loop, the same way.
ratios += [(f"replay_vs_store_get/{f}", "Store::get of the same cassette, interleaved", replay_noise,
            lambda run, f=f: median(f"replay_vs_store_get/{f}", run) / 1e3)
           for f in ("hit", "hit_no_cache", "hit_tiered")]
failures = []
print(f"\n| benchmark | median | ratio to | ratio | baseline {name} |")
print("|---|---:|---|---:|---:|")
for bench, reference, tolerance, ratio_in in ratios:
    ratio = ratio_in(current)
    was = ""
    if mode == "check":
        baseline = ratio_in(name)
        was = f"{baseline:.2f}x"
        if ratio > baseline * (1 + tolerance):
            failures.append(f"{bench}: {ratio:.2f}x, was {baseline:.2f}x")
    # The interleaved groups report ratios; absolute medians come from the keying group.
    absolute = f"{median(bench, current):,.1f} µs" if bench.startswith("keying/") else "-"
    print(f"| {bench} | {absolute} | {reference} | {ratio:.2f}x | {was} |")
    if bench == "keying/hit_key/1MiB" and mode == "check" and ratio > max_ratio:
        failures.append(f"{bench}: {ratio:.2f}x SHA-256 of the same bytes, over {max_ratio}x")
if mode == "check":
    for failure in failures:
        print("REGRESSED", failure, file=sys.stderr)
    print(f"{'regression' if failures else 'no regression'} against baseline '{name}'", file=sys.stderr)
    sys.exit(1 if failures else 0)
EOF_PY
