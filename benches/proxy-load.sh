#!/usr/bin/env bash
# Load benchmark of `cassette proxy` replay hits (BENCHMARKS.md, section "Proxy").
#
# Builds the release binary, fills two file stores (100 and 100,000 cassettes) by recording
# through the proxy from nginx standing in for the vendor, then measures replay hits with wrk
# (a second process on loopback) at 1 and 32 connections, next to nginx serving the same
# response bytes as a static file, in the same run. Prints a Markdown table.
#
# Needs wrk and nginx (Debian: apt-get install -y wrk nginx-light). Knobs:
#   DURATION=10s  LARGE=100000  WORK=/tmp/cassette-proxy-bench
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

DURATION=${DURATION:-10s}
LARGE=${LARGE:-100000}
SMALL=100
work=${WORK:-/tmp/cassette-proxy-bench}
for tool in wrk nginx curl; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install -y wrk nginx-light curl)" >&2; exit 2; }
done

echo "== building the release binary" >&2
cargo build --release --bin cassette >&2
cassette="$root/target/release/cassette"

rm -rf "$work"
mkdir -p "$work"/{nginx,static/v1/chat,tmp}
chmod -R a+rwX "$work"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# nginx answers POSTs with a static file (the 405 for POST on a static file is turned into
# 200 with the file): once as the fake vendor while recording, once as the baseline.
start_nginx() { # port, root
  local conf="$work/nginx/$1.conf"
  cat >"$conf" <<EOF
worker_processes 2;
daemon off;
pid $work/nginx/$1.pid;
error_log $work/nginx/$1.err warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/tmp;
  proxy_temp_path $work/tmp;
  fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp;
  scgi_temp_path $work/tmp;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$1;
    root $2;
    default_type application/json;
    error_page 405 =200 \$uri;
  }
}
EOF
  nginx -c "$conf" &
  pids+=($!)
  wait_http "http://127.0.0.1:$1/"
}

wait_http() {
  for _ in $(seq 100); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.1
  done
  echo "nothing answers at $1" >&2
  exit 1
}

# The vendor's answer: a realistic chat completion.
cp tests/fixtures/streams/openai_chat.response.json "$work/static/v1/chat/completions"

start_proxy() { # port, mode, store
  "$cassette" proxy --listen "127.0.0.1:$1" --mode "$2" --store "$3" --upstream "http://127.0.0.1:$vendor_port" \
    2>"$work/proxy-$1.log" &
  pids+=($!)
  wait_http "http://127.0.0.1:$1/healthz"
}

stop_last() {
  local pid=${pids[-1]}
  kill -INT "$pid"
  wait "$pid" || true
  unset 'pids[-1]'
}

# Fills a store by recording COUNT distinct prompts through a record-mode proxy, from 8
# keep-alive connections (wrk cannot stop after an exact number of requests).
cat >"$work/fill.py" <<'EOF'
import http.client, sys, threading
port, count, conns = int(sys.argv[1]), int(sys.argv[2]), 8
failures = []
def worker(k):
    c = http.client.HTTPConnection("127.0.0.1", port)
    for i in range(k, count, conns):
        body = '{"model":"gpt-4o-mini","temperature":0,"messages":[{"role":"user","content":"Where is my refund? case %d"}]}' % i
        c.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
        r = c.getresponse()
        r.read()
        if r.status != 200:
            failures.append(r.status)
threads = [threading.Thread(target=worker, args=(k,)) for k in range(conns)]
for t in threads: t.start()
for t in threads: t.join()
if failures:
    sys.exit(f"{len(failures)} recordings failed: {failures[:5]}")
EOF
# The replay load cycles through the first 100 recorded prompts (present in both stores).
cat >"$work/replay.lua" <<'EOF'
local bodies, n = {}, 0
for i = 0, 99 do
  bodies[i] = '{"model":"gpt-4o-mini","temperature":0,"messages":[{"role":"user","content":"Where is my refund? case ' .. i .. '"}]}'
end
wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.headers["content-type"] = "application/json"
request = function()
  n = n + 1
  return wrk.format(nil, nil, nil, bodies[n % 100])
end
done = function(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout
  io.write(string.format("RESULT %.1f %.3f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, errors, summary.requests))
end
EOF

vendor_port=$(free_port)
start_nginx "$vendor_port" "$work/static"

fill() { # store dir, count
  local port
  port=$(free_port)
  start_proxy "$port" record "file://$1"
  python3 "$work/fill.py" "$port" "$2"
  stop_last
  echo "   $(find "$1" -type f | wc -l) cassette files in $1" >&2
}

echo "== filling the stores" >&2
fill "$work/store-$SMALL" "$SMALL"
fill "$work/store-$LARGE" "$LARGE"

# The baseline serves exactly the bytes a replay hit returns.
bench_port=$(free_port)
start_proxy "$bench_port" replay "file://$work/store-$SMALL"
mkdir -p "$work/baseline/v1/chat"
curl -s -H 'content-type: application/json' \
  -d '{"model":"gpt-4o-mini","temperature":0,"messages":[{"role":"user","content":"Where is my refund? case 0"}]}' \
  "http://127.0.0.1:$bench_port/v1/chat/completions" >"$work/baseline/v1/chat/completions"
stop_last
bytes=$(wc -c <"$work/baseline/v1/chat/completions")
baseline_port=$(free_port)
start_nginx "$baseline_port" "$work/baseline"

measure() { # url, connections -> "rps p50 p99 errors requests"
  local threads=$(( $2 < 2 ? 1 : 2 ))
  wrk -t"$threads" -c"$2" -d"$DURATION" -s "$work/replay.lua" "$1" | awk '/^RESULT/ { print $2, $3, $4, $5, $6 }'
}

echo "== measuring ($DURATION per cell, response $bytes bytes)" >&2
declare -A result
for conns in 1 32; do
  result[nginx,$conns]=$(measure "http://127.0.0.1:$baseline_port/v1/chat/completions" "$conns")
  for size in "$SMALL" "$LARGE"; do
    port=$(free_port)
    start_proxy "$port" replay "file://$work/store-$size"
    result[$size,$conns]=$(measure "http://127.0.0.1:$port/v1/chat/completions" "$conns")
    stats=$(curl -s "http://127.0.0.1:$port/_cassette/stats")
    stop_last
    case "$stats" in *'"misses":0'*'"upstream_requests":0'*) ;; *) echo "unexpected counters: $stats" >&2; exit 1 ;; esac
  done
done

echo
echo "| server | connections | req/s | p50 ms | p99 ms | errors | req/s vs nginx |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for conns in 1 32; do
  read -r base_rps base_p50 base_p99 base_err _ <<<"${result[nginx,$conns]}"
  printf '| nginx static file (%s bytes) | %s | %.0f | %.3f | %.3f | %s | 1.00 |\n' "$bytes" "$conns" "$base_rps" "$base_p50" "$base_p99" "$base_err"
  for size in "$SMALL" "$LARGE"; do
    read -r rps p50 p99 err _ <<<"${result[$size,$conns]}"
    ratio=$(awk -v a="$rps" -v b="$base_rps" 'BEGIN { printf "%.2f", a / b }')
    printf '| cassette proxy, replay, %s cassettes | %s | %.0f | %.3f | %.3f | %s | %s |\n' "$size" "$conns" "$rps" "$p50" "$p99" "$err" "$ratio"
  done
done
