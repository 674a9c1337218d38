#!/usr/bin/env bash
# The full test suite: first the formatters and linters every developer runs by hand, then
# installs what the tests need when it is missing (SeaweedFS for the S3
# store; the official SDKs and the popular clients for Python, tests/sdk/requirements.txt, and
# the openai npm client and the Vercel AI SDK, tests/sdk/node/package.json, for the proxy
# tests; Debian's Chromium and playwright-core, tests/browser/package.json, for the HTML
# reviews), starts the S3-compatible server, runs every Rust, Python, Node and browser test,
# builds the pip wheel and the npm packages and tests them installed offline
# (scripts/package-test.sh),
# and stops the server again.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# What every developer runs by hand before a commit, first, so that a run fails fast on it:
# Rust formatting and clippy; ruff (lint and format) over the Python, mypy --strict over the
# shipped package (pinned in tests/lint/requirements.txt, installed into the venv the SDK tests
# use); tsc --checkJs --strict over the npm package's JavaScript (pinned in
# tests/lint/package.json, which is not the package's own).
# A CI run starts from a fresh clone: incremental caches would only take disk (they doubled
# target/ and a CI machine ran out of space), never time.
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL=0
fi

echo "== formatting and lints (cargo fmt, clippy, ruff, mypy, tsc)"
cargo fmt --all --check
cargo clippy -q --all-targets -- -D warnings
venv="$root/.venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/lint/requirements.txt
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
"$venv/bin/mypy" --strict python/cassette_cli
npm ci --prefix tests/lint --no-audit --no-fund --silent
tests/lint/node_modules/.bin/tsc -p tests/lint

echo "== starting the S3-compatible server (SeaweedFS)"
eval "$(scripts/s3-server.sh start)"
if [ "$CASSETTE_S3_STARTED" = 1 ]; then
  trap 'scripts/s3-server.sh stop >/dev/null 2>&1 || true' EXIT
fi

echo "== Rust tests (every crate of the workspace, the cassette binary built on the way)"
cargo test
# The SDK tests below drive the binary `cargo test` just built.
export CASSETTE_BIN="$root/target/debug/cassette"

echo "== the store and the binary build with each optional backend alone"
cargo check -q -p cassette-store --no-default-features
cargo check -q -p cassette-store --no-default-features --features s3
cargo check -q -p cassette-store --no-default-features --features sled
cargo check -q --bin cassette --no-default-features

echo "== the pure crates build without IO crates, no crate has an import circle of three files, and the line shares hold"
for crate in cassette-keying cassette-wire cassette-tape cassette-vcr cassette-grade cassette-review; do
  # Normal dependencies only (-e normal): dev-dependencies may use anything.
  if cargo tree -q -p "$crate" -e normal --prefix none | grep -E '^(tokio|reqwest|axum|hyper|hyper-util|futures|object_store|sled|cassette-store|cassette-recorder|tracing|chrono) '; then
    echo "$crate is pure but its dependency tree holds the crates above" >&2
    exit 1
  fi
done
python3 scripts/module-cycles.py
# The CLI at most 30% of product lines, the pure crates at least 33% (ARCHITECTURE.md).
python3 scripts/line-shares.py
RUSTDOCFLAGS="-D warnings" cargo doc -q --no-deps --workspace

if [ -d tests/sdk ]; then
  echo "== Python SDK tests"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
  # The openai npm client and the Vercel AI SDK, for the Node tests.
  npm ci --prefix tests/sdk/node --no-audit --no-fund --silent
  # vitest and jest, for the suites using cassette-cli's expect() (tests/sdk/test_expect.py).
  npm ci --prefix tests/sdk/expect_node --no-audit --no-fund --silent
  # Node 18 and 22 beside the machine's 20, for the Node preload's tests (test_node_exec.py).
  CASSETTE_TEST_NODES="$(scripts/node-versions.sh)"
  export CASSETTE_TEST_NODES
  "$venv/bin/python" -m pytest -q tests/sdk

  echo "== the pip and npm packages, built from target/debug and installed offline"
  VENV="$venv" scripts/package-test.sh
fi

if [ -d tests/browser ]; then
  echo "== HTML reviews in headless Chromium (tests/browser)"
  # Debian's Chromium, driven by playwright-core from npm (no browser download).
  if [ -z "${CHROMIUM:-}" ] && ! [ -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
      sudo apt-get update -qq
      sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    fi
  fi
  npm ci --prefix tests/browser --no-audit --no-fund --silent
  node --test tests/browser/review.test.mjs
fi
echo "== all tests passed"
