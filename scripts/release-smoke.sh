#!/usr/bin/env bash
# The test steps of each job of .github/workflows/release.yml, runnable here: install a built
# artifact offline into a fresh environment, then, from the installed copy only, check
# `cassette --version` says the workspace version, replay the committed example suite, and
# check a replay miss exits 2 with its explanation. scripts/package-test.sh runs it on the
# Linux x86_64 artifacts built on this machine; the release workflow on every platform's.
#
#   scripts/release-smoke.sh wheel WHEEL                 # fresh venv, pip install --no-index
#   scripts/release-smoke.sh npm MAIN_TGZ PLATFORM_TGZ   # fresh npm project, npm install --offline
#
# npm is installed twice: with scripts (the postinstall step puts the binary itself in place of
# the JavaScript shim, except on Windows) and with --ignore-scripts (the shim stays); both
# commands must pass, and both must honour CASSETTE_BINARY.
#
# PYTHON names the interpreter for the venv (default python3, else python). MAX_MB, when set,
# fails an artifact (the wheel, the npm platform package) larger than that many MB (10^6 bytes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-}
[ $# -ge 2 ] || { echo "usage: $0 wheel WHEEL | npm MAIN_TGZ PLATFORM_TGZ" >&2; exit 2; }
shift

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$root/Cargo.toml")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0

check() { # what, expected status, command...: runs it from the repository root
  local what=$1 expected=$2 status=0
  shift 2
  (cd "$root" && "$@") >"$work/out" 2>"$work/err" || status=$?
  if [ "$status" != "$expected" ]; then
    echo "release-smoke: FAILED $what: exit $status, expected $expected: $*" >&2
    cat "$work/out" "$work/err" >&2
    exit 1
  fi
  passed=$((passed + 1))
}

expect_in() { # file, text
  if ! grep -qF -- "$2" "$work/$1"; then
    echo "release-smoke: FAILED: $1 of the last command lacks \"$2\":" >&2
    cat "$work/out" "$work/err" >&2
    exit 1
  fi
}

check_size() { # artifact
  [ -n "${MAX_MB:-}" ] || return 0
  local bytes
  bytes=$(wc -c <"$1" | tr -d ' ')
  if [ "$bytes" -gt $((MAX_MB * 1000000)) ]; then
    echo "release-smoke: FAILED: $1 is $bytes bytes, over the $MAX_MB MB limit" >&2
    exit 1
  fi
  passed=$((passed + 1))
}

in_project() { cd "$work/project" && "$@"; }

is_shim() { [ "$(head -c 2 "$1")" = "#!" ]; }

smoke() { # the installed `cassette` command, as words
  check "--version" 0 "$@" --version
  expect_in out "cassette $version"
  check "replay of the example suite" 0 "$@" run examples/suite/suite.jsonl --store file://examples/suite/cassettes
  check "a replay miss exits 2" 2 "$@" run examples/triage/stale.jsonl --store file://examples/triage/cassettes
  expect_in err 'replay miss in case "capital"'
  expect_in err '- body.model: "gpt-4o-mini" -> "gpt-4o"'
}

case "$kind" in
  wheel)
    wheel=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    check_size "$wheel"
    python=${PYTHON:-$(command -v python3 || command -v python)}
    "$python" -m venv "$work/venv"
    bin="$work/venv/bin"
    [ -d "$bin" ] || bin="$work/venv/Scripts"
    "$bin/python" -m pip install --quiet --disable-pip-version-check --no-index "$wheel"
    smoke "$bin/cassette"
    smoke "$bin/python" -m cassette_cli
    ;;
  npm)
    [ $# -ge 2 ] || { echo "usage: $0 npm MAIN_TGZ PLATFORM_TGZ" >&2; exit 2; }
    main=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    platform=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
    check_size "$platform"
    for scripts in run ignore; do
      rm -rf "$work/project"
      mkdir "$work/project"
      ignore=false
      [ "$scripts" = run ] || ignore=true
      (cd "$work/project" && npm init -y >/dev/null &&
        npm install --offline --no-audit --no-fund --loglevel=error --save-dev --ignore-scripts="$ignore" "$platform" "$main" >/dev/null)
      command=$work/project/node_modules/cassette-cli/bin/cassette.js
      case "$scripts-$(uname -s)" in
        run-MINGW* | run-MSYS* | run-CYGWIN* | ignore-*)
          is_shim "$command" || { echo "release-smoke: FAILED: $command is not the JavaScript shim" >&2; exit 1; } ;;
        *)
          ! is_shim "$command" || { echo "release-smoke: FAILED: the postinstall step left the shim at $command" >&2; exit 1; } ;;
      esac
      passed=$((passed + 1))
      # npx runs the local install; `cassette-cli` names the package, its one bin is `cassette`.
      check "npx cassette-cli --version ($scripts scripts)" 0 in_project npx --offline cassette-cli --version
      expect_in out "cassette $version"
      # What package.json scripts and `npx cassette` run (npm's cmd-shim script on Windows).
      smoke "$work/project/node_modules/.bin/cassette"
      check "a wrong CASSETTE_BINARY is an error ($scripts scripts)" 2 \
        env CASSETTE_BINARY="$work/nonexistent" "$work/project/node_modules/.bin/cassette" --version
      expect_in err "CASSETTE_BINARY is set to"
    done
    ;;
  *)
    echo "usage: $0 wheel WHEEL | npm MAIN_TGZ PLATFORM_TGZ" >&2
    exit 2
    ;;
esac
echo "release-smoke: $kind: $passed passed, 0 failed"
