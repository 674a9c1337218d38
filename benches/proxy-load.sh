#!/usr/bin/env bash
# Load benchmark of `cassette proxy` replay hits (BENCHMARKS.md, section "Proxy").
#
# Builds the release binary and measures replay hits with wrk (a second process on loopback)
# at 1 and 32 connections, next to nginx serving the same response bytes as a static file, in
# the same run. Prints Markdown tables:
#
#   stores: cassette proxy with 100 and 100,000 cassettes in a file store (filled by recording
#           through the proxy from nginx standing in for the vendor), for the minimal and the
#           realistic request and for streaming hits (the minimal request with "stream": true,
#           SSE re-synthesized), each against nginx serving that answer's bytes to the same
#           load (wrk cycling through the same request bodies, so only the server differs); with
#           CASSETTE_TEST_S3 set (and the AWS_* environment of scripts/s3-server.sh), also S3
#           through the tiered cache (--cache sled://): a first pass fills the cache, then the
#           load is measured while benches/s3-count.py counts every request reaching the
#           bucket (the script fails unless that is zero);
#   peers:  cassette proxy, talkback (npm) and mitmproxy's `mitmdump --server-replay` (PyPI)
#           side by side with 1 and 1,000 recordings each, for a minimal request and for a
#           realistic one of about 8 KB (a system prompt and ten turns). The peers are
#           installed from their registries into $PEERS (under target/, never committed).
#
# Needs wrk, nginx, node/npm and python3 (Debian: apt-get install -y wrk nginx-light nodejs
# npm python3-venv). Knobs:
#   DURATION=10s  LARGE=100000  WORK=/tmp/cassette-proxy-bench  TABLES="stores peers"
#   KINDS="minimal realistic"  DISTINCT=10000 (distinct requests in a load: wrk keeps them in
#   memory)  S3_SIZES=100  PEER_SIZES="1 1000"  PEERS=target/bench-peers
# The scratch folder ($WORK, over a gigabyte with the large stores) is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

DURATION=${DURATION:-10s}
LARGE=${LARGE:-100000}
SMALL=100
TABLES=${TABLES:-stores peers}
PEER_SIZES=${PEER_SIZES:-1 1000}
PEERS=${PEERS:-$root/target/bench-peers}
KINDS=${KINDS:-minimal realistic}
DISTINCT=${DISTINCT:-10000}
S3_SIZES=${S3_SIZES:-$SMALL}
TALKBACK_VERSION=4.2.0
MITMPROXY_VERSION=11.0.2
work=${WORK:-/tmp/cassette-proxy-bench}
tools="wrk nginx curl python3"
case " $TABLES " in *" peers "*) tools="$tools node npm" ;; esac
for tool in $tools; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install -y wrk nginx-light curl python3-venv nodejs npm)" >&2; exit 2; }
done
wants() { case " $TABLES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

echo "== building the release binary" >&2
cargo build --release --bin cassette >&2
cassette="$root/target/release/cassette"

rm -rf "$work"
mkdir -p "$work"/{nginx,static/v1/chat,tmp}
chmod -R a+rwX "$work"
pids=()
counter_pid=""
s3_prefixes=()
cleanup() {
  for pid in "${pids[@]}" $counter_pid; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${#s3_prefixes[@]}" -gt 0 ]; then remove_prefixes; fi
  rm -rf "$work"
}
trap cleanup EXIT
. "$root/benches/lib.sh"

# Waits for a TCP listener without sending a request, which a recording peer would record.
wait_port() {
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on port $1" >&2
  exit 1
}


# The vendor's answer: a realistic chat completion.
cp crates/wire/tests/fixtures/openai_chat.response.json "$work/static/v1/chat/completions"

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

# The requests: case I of a kind, the same bytes for recording (fill.py) and for the load
# (load-KIND-N.txt, read by replay.lua). "minimal" is one short user turn; "realistic" is a
# conversation of about 8 KB: a system prompt and ten turns.
cat >"$work/bodies.py" <<'EOF'
import json, sys
SYSTEM = ("You are the support assistant of an online shop that sells outdoor equipment. "
          "Answer in the customer's language, in at most three short paragraphs.\n"
          "Rules:\n" + "".join(f"- Rule {n}: never promise a refund before the order is found; "
          "quote the order number; be polite and concrete; point to the returns page when it "
          "helps.\n" for n in range(1, 13)))
TURNS = [
    "Hi, I ordered a tent three weeks ago and it still has not arrived. The tracking page has "
    "not changed for ten days and says the parcel is at the regional depot. Can you check?",
    "Thanks for reaching out. I found order 4711: it left our warehouse on the 3rd and the "
    "carrier reports a delay at the depot. I have opened an investigation with the carrier; "
    "they answer within two business days. You will get an email as soon as they do.",
]
def body(kind, i):
    if kind.endswith("-stream"):  # the same request asking for a stream: the same cassette
        b = json.loads(body(kind[:-len("-stream")], i))
        b["stream"] = True
        return json.dumps(b, separators=(",", ":"))
    if kind == "minimal":
        return ('{"model":"gpt-4o-mini","temperature":0,"messages":[{"role":"user",'
                '"content":"Where is my refund? case %d"}]}' % i)
    # Nine turns of history (the assistant's first), then the new question: ten turns.
    messages = [{"role": "system", "content": SYSTEM}]
    for turn in range(9):
        role = "assistant" if turn % 2 == 0 else "user"
        messages.append({"role": role, "content": (TURNS[role == "assistant"] + " ") * 3})
    messages.append({"role": "user", "content": "And where is my refund? case %d" % i})
    return json.dumps({"model": "gpt-4o-mini", "temperature": 0, "messages": messages},
                      separators=(",", ":"))
if __name__ == "__main__":  # bodies.py KIND COUNT > lines
    for i in range(int(sys.argv[2])):
        print(body(sys.argv[1], i))
EOF
# Fills a store by recording COUNT distinct requests through a recording server, from 8
# keep-alive connections (wrk cannot stop after an exact number of requests).
cat >"$work/fill.py" <<'EOF'
import http.client, sys, threading
sys.path.insert(0, sys.path[0])
from bodies import body
port, kind, count, conns = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), 8
failures = []
def worker(k):
    c = http.client.HTTPConnection("127.0.0.1", port)
    for i in range(k, count, conns):
        c.request("POST", "/v1/chat/completions", body(kind, i), {"content-type": "application/json"})
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
# The replay load cycles through the requests in $BODIES, one per line.
cat >"$work/replay.lua" <<'EOF'
local bodies, count, n = {}, 0, 0
for line in io.lines(os.getenv("BODIES")) do
  bodies[count] = line
  count = count + 1
end
wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.headers["content-type"] = "application/json"
request = function()
  n = n + 1
  return wrk.format(nil, nil, nil, bodies[n % count])
end
done = function(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout
  io.write(string.format("RESULT %.1f %.3f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, errors, summary.requests))
end
EOF
load_file() { # kind, count -> a file with the first COUNT requests of KIND
  local file="$work/load-$1-$2.txt"
  [ -f "$file" ] || python3 "$work/bodies.py" "$1" "$2" >"$file"
  echo "$file"
}

vendor_port=$(free_port)
start_nginx "$vendor_port" "$work/static" application/json 2

fill() { # store dir, count[, kind]
  local port
  port=$(free_port)
  start_proxy "$port" record "file://$1"
  python3 "$work/fill.py" "$port" "${3:-minimal}" "$2"
  stop_last
  echo "   $(find "$1" -type f | wc -l) cassette files in $1" >&2
}

# A replay proxy's answer to request 0 of KIND, kept as a static file that a new nginx serves:
# sets baseline_port (no subshell, so the nginx is in $pids).
baseline_for() { # kind, store
  local port dir="$work/baseline-$1"
  port=$(free_port)
  start_proxy "$port" replay "$2"
  mkdir -p "$dir/v1/chat"
  curl -s -H 'content-type: application/json' --data-binary "@$(load_file "$1" 1)" \
    "http://127.0.0.1:$port/v1/chat/completions" >"$dir/v1/chat/completions"
  stop_last
  baseline_port=$(free_port)
  start_nginx "$baseline_port" "$dir" application/json 2
}

measure() { # url, connections[, load file] -> "rps p50 p99 errors requests"
  local threads=$(( $2 < 2 ? 1 : 2 ))
  BODIES=${3:-$(load_file minimal "$SMALL")} wrk -t"$threads" -c"$2" -d"$DURATION" \
    -s "$work/replay.lua" "$1" | awk '/^RESULT/ { print $2, $3, $4, $5, $6 }'
}

# The replay proxies must have answered every request from the store.
check_counters() { # port
  local stats
  stats=$(curl -s "http://127.0.0.1:$1/_cassette/stats")
  case "$stats" in *'"misses":0'*'"upstream_requests":0'*) ;; *) echo "unexpected counters: $stats" >&2; exit 1 ;; esac
}

# S3 through the tiered cache: the requests reaching the bucket are counted by
# benches/s3-count.py, standing between the proxy and the S3 server.
s3=""
if wants stores && [ -n "${CASSETTE_TEST_S3:-}" ]; then
  : "${AWS_ENDPOINT_URL:?CASSETTE_TEST_S3 needs the AWS_* environment of scripts/s3-server.sh}"
  s3=$CASSETTE_TEST_S3
  python3 "$root/benches/s3-count.py" "$AWS_ENDPOINT_URL" "$work/counter.port" &
  counter_pid=$!
  for _ in $(seq 50); do [ -s "$work/counter.port" ] && break; sleep 0.1; done
  counter="http://127.0.0.1:$(cat "$work/counter.port")"
elif wants stores; then
  echo "== S3 not measured: CASSETTE_TEST_S3 is unset (see scripts/s3-server.sh)" >&2
fi
counts() { curl -s "$counter/__counts"; }
reset_counts() { curl -s -X POST "$counter/__counts/reset" >/dev/null; }
remove_prefixes() {
  # gc deletes the cassettes no usage log names, and refuses a log naming none of the store's
  # (the sign of another store's log): the log names one of them, which is left behind with
  # the index segments `cassette copy` wrote (a few KB; no cassette command deletes segments).
  for prefix in "${s3_prefixes[@]}"; do
    "$cassette" ls --json --store "$prefix" 2>/dev/null | head -1 |
      python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["key"])' >"$work/kept.log" || true
    "$cassette" gc --unused --usage-log "$work/kept.log" --store "$prefix" >/dev/null || true
  done
  s3_prefixes=()
}

if wants stores; then
  echo "== filling the stores" >&2
  for kind in $KINDS; do
    for size in "$SMALL" "$LARGE"; do
      fill "$work/store-$kind-$size" "$size" "$kind"
    done
  done
  echo "== stores: measuring ($DURATION per cell)" >&2
  declare -A result bytes
  # Each kind, then the minimal request asking for a stream (SSE re-synthesized from the same
  # cassettes), against nginx serving that kind's replayed bytes. A store of N cassettes is
  # loaded with min(N, DISTINCT) distinct requests.
  for kind in $KINDS minimal-stream; do
    base_kind=${kind%-stream}
    baseline_for "$kind" "file://$work/store-$base_kind-$SMALL"
    bytes[$kind]=$(wc -c <"$work/baseline-$kind/v1/chat/completions")
    for conns in 1 32; do
      for size in "$SMALL" "$LARGE"; do
        distinct=$(( size < DISTINCT ? size : DISTINCT ))
        # nginx gets the very load the proxy gets (wrk cycling through the same bodies), so
        # the two cells differ only in the server.
        result[$kind,nginx,$size,$conns]=$(measure "http://127.0.0.1:$baseline_port/v1/chat/completions" "$conns" "$(load_file "$kind" "$distinct")")
        port=$(free_port)
        start_proxy "$port" replay "file://$work/store-$base_kind-$size"
        result[$kind,$size,$conns]=$(measure "http://127.0.0.1:$port/v1/chat/completions" "$conns" "$(load_file "$kind" "$distinct")")
        check_counters "$port"
        stop_last
      done
    done
    stop_last # its nginx
  done
  if [ -n "$s3" ]; then
    for size in $S3_SIZES; do
      prefix="$s3/bench-proxy-load-$$-$size"
      s3_prefixes+=("$prefix")
      echo "== S3: copying $size cassettes to $prefix" >&2
      "$cassette" copy --jobs 32 "file://$work/store-minimal-$size" "$prefix" >&2
      distinct=$(( size < DISTINCT ? size : DISTINCT ))
      port=$(free_port)
      AWS_ENDPOINT_URL=$counter "$cassette" proxy --listen "127.0.0.1:$port" --mode replay \
        --store "$prefix" --cache "sled://$work/cache-$size" 2>"$work/proxy-$port.log" &
      pids+=($!)
      wait_http "http://127.0.0.1:$port/healthz"
      reset_counts
      # The first pass fills the local cache: one GET per cassette.
      python3 "$work/fill.py" "$port" minimal "$distinct"
      result[s3cold,$size]=$(counts)
      reset_counts
      for conns in 1 32; do
        result[s3,$size,$conns]=$(measure "http://127.0.0.1:$port/v1/chat/completions" "$conns" "$(load_file minimal "$distinct")")
      done
      result[s3warm,$size]=$(counts)
      check_counters "$port"
      stop_last
      rm -rf "$work/cache-$size"
      echo "   bucket requests: filling the cache ${result[s3cold,$size]}, measured load ${result[s3warm,$size]}" >&2
      [ "${result[s3warm,$size]}" = "{}" ] || { echo "FAIL: the warm replay read from the bucket" >&2; exit 1; }
    done
    remove_prefixes
  fi

  echo
  echo "| request | server | cassettes | distinct requests | connections | req/s | p50 ms | p99 ms | errors | req/s vs nginx |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  row() { # request, server, cassettes, distinct, conns, result, nginx req/s
    local rps p50 p99 err ratio
    read -r rps p50 p99 err _ <<<"$6"
    ratio=$(awk -v a="$rps" -v b="$7" 'BEGIN { printf "%.2f", a / b }')
    printf '| %s | %s | %s | %s | %s | %.0f | %.3f | %.3f | %s | %s |\n' "$1" "$2" "$3" "$4" "$5" "$rps" "$p50" "$p99" "$err" "$ratio"
  }
  for kind in $KINDS minimal-stream; do
    request="$kind ($(head -1 "$(load_file "$kind" 1)" | wc -c) B request, ${bytes[$kind]} B answer)"
    for conns in 1 32; do
      for size in "$SMALL" "$LARGE"; do
        distinct=$(( size < DISTINCT ? size : DISTINCT ))
        read -r base_rps _ <<<"${result[$kind,nginx,$size,$conns]}"
        row "$request" "nginx static file" - "$distinct" "$conns" "${result[$kind,nginx,$size,$conns]}" "$base_rps"
        row "$request" "cassette proxy, file store" "$size" "$distinct" "$conns" "${result[$kind,$size,$conns]}" "$base_rps"
        if [ "$kind" = minimal ] && [ -n "$s3" ]; then
          for s3_size in $S3_SIZES; do # beside the nginx cell of the same load
            [ "$(( s3_size < DISTINCT ? s3_size : DISTINCT ))" = "$distinct" ] || continue
            row "$request" "cassette proxy, S3 + sled cache (warm)" "$s3_size" "$distinct" "$conns" "${result[s3,$s3_size,$conns]}" "$base_rps"
          done
        fi
      done
    done
  done
  if [ -n "$s3" ]; then
    echo
    echo "| cassettes | bucket requests filling the cache (first pass) | bucket requests during the measured load (warm) |"
    echo "|---:|---|---|"
    for size in $S3_SIZES; do
      echo "| $size | ${result[s3cold,$size]} | ${result[s3warm,$size]} |"
    done
  fi
fi

# Peers, installed from their registries into $PEERS (reused by later runs).
install_peers() {
  talkback_module="$PEERS/talkback-$TALKBACK_VERSION/node_modules/talkback"
  if [ ! -f "$talkback_module/package.json" ]; then
    echo "== installing talkback $TALKBACK_VERSION from npm into $PEERS" >&2
    npm install --prefix "$PEERS/talkback-$TALKBACK_VERSION" --no-audit --no-fund --loglevel=error \
      "talkback@$TALKBACK_VERSION" >&2
  fi
  mitmdump="$PEERS/mitmproxy-$MITMPROXY_VERSION/bin/mitmdump"
  if [ ! -x "$mitmdump" ]; then
    echo "== installing mitmproxy $MITMPROXY_VERSION from PyPI into $PEERS" >&2
    python3 -m venv "$PEERS/mitmproxy-$MITMPROXY_VERSION"
    "$PEERS/mitmproxy-$MITMPROXY_VERSION/bin/pip" install -q "mitmproxy==$MITMPROXY_VERSION" >&2
  fi
}

# talkback as a standalone server. Requests match on method, URL, JSON body and content-type
# (the recording client and wrk send different incidental headers).
cat >"$work/talkback.cjs" <<'JS'
const [modulePath, port, mode, tapes, upstream] = process.argv.slice(2);
const talkback = require(modulePath);
const server = talkback({
  host: upstream,
  port: Number(port),
  path: tapes,
  record: mode === "record" ? talkback.Options.RecordMode.NEW : talkback.Options.RecordMode.DISABLED,
  fallbackMode: talkback.Options.FallbackMode.NOT_FOUND,
  allowHeaders: ["content-type"],
  silent: true,
  summary: false,
});
server.start();
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(0));
JS

start_talkback() { # port, record|replay, tapes dir, upstream
  node "$work/talkback.cjs" "$talkback_module" "$1" "$2" "$3" "$4" 2>"$work/talkback-$1.log" &
  pids+=($!)
  wait_port "$1"
}

# mitmproxy as a reverse proxy: recording writes a flow file; replaying serves it with
# `--server-replay`, every flow reusable, anything unmatched killed (never forwarded), and
# no connection opened before a request needs one.
start_mitmdump() { # port, record|replay, flow file, upstream
  local args=(--mode "reverse:$4" --listen-host 127.0.0.1 --listen-port "$1" -q
    --set connection_strategy=lazy)
  if [ "$2" = record ]; then
    args+=(-w "$3")
  else
    args+=(--server-replay "$3" --set server_replay_reuse=true --set server_replay_extra=kill
      --set server_replay_ignore_host=true --set server_replay_ignore_port=true)
  fi
  "$mitmdump" "${args[@]}" >"$work/mitmdump-$1.log" 2>&1 &
  pids+=($!)
  wait_port "$1"
}

record_into() { # start function, store, kind, count
  local port
  port=$(free_port)
  "$1" "$port" record "$2" "http://127.0.0.1:$vendor_port"
  python3 "$work/fill.py" "$port" "$3" "$4"
  stop_last
}

if wants peers; then
  install_peers
  # Replaying peers get an upstream where nothing listens: a request they forwarded would fail.
  dead_upstream="http://127.0.0.1:$(free_port)"
  servers="cassette talkback mitmdump"
  declare -A peer
  for kind in minimal realistic; do
    for n in $PEER_SIZES; do
      dir="$work/peers/$kind-$n"
      mkdir -p "$dir"
      echo "== peers: recording $n $kind requests into each server" >&2
      fill "$dir/cassette" "$n" "$kind"
      record_into start_talkback "$dir/tapes" "$kind" "$n"
      record_into start_mitmdump "$dir/flows" "$kind" "$n"
      echo "   $(find "$dir/tapes" -type f | wc -l) talkback tapes, $(wc -c <"$dir/flows") bytes of mitmproxy flows" >&2
      load=$(load_file "$kind" "$n")
      echo "== peers: measuring $kind at $n recordings ($DURATION per cell)" >&2
      for conns in 1 32; do
        port=$(free_port)
        start_proxy "$port" replay "file://$dir/cassette"
        peer[$kind,$n,cassette,$conns]=$(measure "http://127.0.0.1:$port/v1/chat/completions" "$conns" "$load")
        check_counters "$port"
        stop_last
        port=$(free_port)
        start_talkback "$port" replay "$dir/tapes" "$dead_upstream"
        peer[$kind,$n,talkback,$conns]=$(measure "http://127.0.0.1:$port/v1/chat/completions" "$conns" "$load")
        stop_last
        port=$(free_port)
        start_mitmdump "$port" replay "$dir/flows" "$dead_upstream"
        peer[$kind,$n,mitmdump,$conns]=$(measure "http://127.0.0.1:$port/v1/chat/completions" "$conns" "$load")
        stop_last
      done
    done
    baseline_for "$kind" "file://$dir/cassette"
    for conns in 1 32; do
      peer[$kind,nginx,$conns]=$(measure "http://127.0.0.1:$baseline_port/v1/chat/completions" "$conns" "$(load_file "$kind" 1)")
    done
    stop_last # its nginx
  done

  echo
  echo "| request | recordings | connections | server | req/s | p50 ms | p99 ms | errors | req/s vs nginx | cassette ÷ server |"
  echo "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"
  for kind in minimal realistic; do
    request="$kind ($(head -1 "$(load_file "$kind" 1)" | wc -c) bytes)"
    for conns in 1 32; do
      read -r base_rps base_p50 base_p99 base_err _ <<<"${peer[$kind,nginx,$conns]}"
      printf '| %s | - | %s | nginx static file | %.0f | %.3f | %.3f | %s | 1.00 | |\n' \
        "$request" "$conns" "$base_rps" "$base_p50" "$base_p99" "$base_err"
      for n in $PEER_SIZES; do
        read -r ours _ <<<"${peer[$kind,$n,cassette,$conns]}"
        for server in $servers; do
          read -r rps p50 p99 err _ <<<"${peer[$kind,$n,$server,$conns]}"
          [ "$err" = 0 ] || echo "warning: $server, $kind, $n recordings, $conns connections: $err errors" >&2
          ratio=$(awk -v a="$rps" -v b="$base_rps" 'BEGIN { printf "%.2f", a / b }')
          ahead=$(awk -v a="$ours" -v b="$rps" 'BEGIN { printf "%.1f", a / b }')
          printf '| %s | %s | %s | %s | %.0f | %.3f | %.3f | %s | %s | %s |\n' \
            "$request" "$n" "$conns" "$server" "$rps" "$p50" "$p99" "$err" "$ratio" "$ahead"
        done
      done
    done
  done
fi
