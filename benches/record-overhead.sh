#!/usr/bin/env bash
# Record overhead (BENCHMARKS.md, section "Record overhead"): the latency a recorded call adds
# over calling the upstream directly, for a small JSON answer and a 1 MiB stream.
#
# nginx stands in for the vendor (a static file answers every POST: a chat completion of about
# 800 bytes, or an OpenAI chat stream of 1 MiB as text/event-stream), so the upstream's own
# time is as small and steady as it gets and the difference is ours. wrk (one connection, one
# request at a time, --latency) measures, in the same run:
#
#   direct        the client calls nginx itself (the baseline);
#   forward only  through `cassette proxy --mode off`: proxying, nothing kept;
#   record, memory  `--mode record --store memory://`: plus keying, redaction and building the
#                 cassette document, kept in memory (no disk);
#   record, file  `--mode record --store file://`: plus writing it durably (temp file, fsync,
#                 rename), what users run.
#
# The requests cycle through 100 distinct bodies, so the store never holds more than 100
# cassettes (100 MiB for the stream) and every call is a real recording (record mode
# overwrites). Knobs: DURATION=10s WORK=/tmp/cassette-record-bench. Needs wrk, nginx, curl,
# python3 (apt-get install -y wrk nginx-light curl).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
DURATION=${DURATION:-10s}
work=${WORK:-/tmp/cassette-record-bench}
for tool in wrk nginx curl python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install -y wrk nginx-light curl)" >&2; exit 2; }
done

echo "== building the release binary" >&2
cargo build --release --bin cassette >&2
cassette="$root/target/release/cassette"

rm -rf "$work"
mkdir -p "$work"/{nginx,tmp,json/v1/chat,sse/v1/chat}
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
. "$root/benches/lib.sh"

# The answers: a chat completion, and a 1 MiB chat stream in OpenAI's chunk format.
cp crates/wire/tests/fixtures/openai_chat.response.json "$work/json/v1/chat/completions"
python3 - >"$work/sse/v1/chat/completions" <<'EOF'
import json
head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1753961234,
        "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_bench"}
def chunk(delta, finish=None):
    return "data: " + json.dumps({**head, "choices": [{"index": 0, "delta": delta,
        "logprobs": None, "finish_reason": finish}]}, separators=(",", ":")) + "\n\n"
out = [chunk({"role": "assistant", "content": ""})]
size, n = len(out[0]), 0
while size < (1 << 20) - 400:
    piece = chunk({"content": f" word{n % 1000}"})
    out.append(piece); size += len(piece); n += 1
out.append(chunk({}, "stop"))
out.append("data: [DONE]\n\n")
print("".join(out), end="")
EOF
echo "== stream answer: $(wc -c <"$work/sse/v1/chat/completions") bytes" >&2

cat >"$work/record.lua" <<'EOF'
local stream, n = os.getenv("STREAM") == "1", 0
wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.headers["content-type"] = "application/json"
request = function()
  n = n + 1
  local body = string.format('{"model":"gpt-4o-mini","temperature":0,"stream":%s,"messages":[{"role":"user","content":"Record overhead, request %d"}]}',
    stream and "true" or "false", n % 100)
  return wrk.format(nil, nil, nil, body)
end
done = function(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout
  io.write(string.format("RESULT %.1f %.3f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, errors, summary.requests))
end
EOF

measure() { # url, stream(0/1) -> "req/s p50 p99 errors requests"
  STREAM=$2 wrk -t1 -c1 -d"$DURATION" --latency -s "$work/record.lua" "$1" | awk '/^RESULT/ {print $2, $3, $4, $5, $6}'
}

rows="$work/rows.txt"
: >"$rows"
for answer in json sse; do
  vendor=$(free_port)
  case $answer in
    json) start_nginx "$vendor" "$work/json" application/json 1; stream=0; label="small JSON (800 B)" ;;
    sse) start_nginx "$vendor" "$work/sse" text/event-stream 1; stream=1; label="1 MiB stream" ;;
  esac
  echo "== $label: direct" >&2
  echo "$label|direct to the upstream (baseline)|$(measure "http://127.0.0.1:$vendor" $stream)" >>"$rows"
  for setup in "off memory://" "record memory://" "record file://$work/store-$answer"; do
    read -r mode store <<<"$setup"
    port=$(free_port)
    "$cassette" proxy --listen "127.0.0.1:$port" --mode "$mode" --store "$store" \
      --upstream "http://127.0.0.1:$vendor" 2>"$work/proxy-$port.log" &
    pids+=($!)
    wait_http "http://127.0.0.1:$port/healthz"
    case "$mode $store" in
      off*) what="forward only (--mode off)" ;;
      *memory*) what="record into memory:// (no disk)" ;;
      *) what="record into file:// (fsync)" ;;
    esac
    echo "== $label: $what" >&2
    result=$(measure "http://127.0.0.1:$port" $stream)
    stats=$(curl -s "http://127.0.0.1:$port/_cassette/stats")
    echo "   $result; $stats" >&2
    echo "$label|$what|$result" >>"$rows"
    kill -INT "${pids[-1]}"; wait "${pids[-1]}" || true; unset 'pids[-1]'
  done
  rm -rf "$work/store-$answer"
done

python3 - "$rows" <<'EOF'
import sys
rows = [line.rstrip("\n").split("|") for line in open(sys.argv[1])]
print("| answer | path | req/s | p50 ms | p99 ms | p50 added ms | p99 added ms | errors |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
base = {}
for answer, what, result in rows:
    rps, p50, p99, errors, requests = result.split()
    p50, p99 = float(p50), float(p99)
    if what.startswith("direct"):
        base[answer] = (p50, p99)
        added = ("", "")
    else:
        added = (f"+{p50 - base[answer][0]:.3f}", f"+{p99 - base[answer][1]:.3f}")
    print(f"| {answer} | {what} | {float(rps):,.0f} | {p50:.3f} | {p99:.3f} | {added[0]} | {added[1]} | {errors} |")
EOF
