#!/usr/bin/env bash
# The full test suite: installs what the tests need when it is missing (SeaweedFS for the S3
# store; the official openai and anthropic SDKs for Python and the openai npm client for the
# proxy tests), starts the S3-compatible server, runs every Rust, Python and Node test, and
# stops the server again.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

echo "== building"
cargo build --workspace --all-targets
# End-to-end tests drive this binary instead of building their own copy.
export CASSETTE_BIN="$root/target/debug/cassette"

echo "== starting the S3-compatible server (SeaweedFS)"
eval "$(scripts/s3-server.sh start)"
trap 'scripts/s3-server.sh stop >/dev/null 2>&1 || true' EXIT

echo "== Rust tests"
cargo test --workspace

if [ -d tests/sdk ]; then
  echo "== Python SDK tests"
  venv="$root/.venv"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
  # The official openai npm client, for the Node test through `cassette exec`.
  npm ci --prefix tests/sdk/node --no-audit --no-fund --silent
  "$venv/bin/python" -m pytest -q tests/sdk
fi
echo "== all tests passed"
