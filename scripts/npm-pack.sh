#!/usr/bin/env bash
# Packs the npm packages into OUT_DIR: the main package `cassette-cli` (the shim), and for each
# PLATFORM=BINARY pair the platform package npm/platforms/PLATFORM with BINARY as its only file.
# Each package is staged in a temporary copy, so the binary never lands in the work tree.
# The release workflow and scripts/package-test.sh both pack through this script.
#
#   scripts/npm-pack.sh OUT_DIR [PLATFORM=BINARY ...]
#   scripts/npm-pack.sh dist/npm linux-x64=target/x86_64-unknown-linux-gnu/dist/cassette
#
# Prints the path of each tarball written.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

if [ $# -lt 1 ]; then
  echo "usage: $0 OUT_DIR [PLATFORM=BINARY ...]" >&2
  exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
shift

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

pack() { # folder: prints the tarball's path
  local name
  name=$(cd "$1" && npm pack --silent --pack-destination "$out")
  echo "$out/$name"
}

cp -R "$root/npm/cassette-cli" "$stage/cassette-cli"
pack "$stage/cassette-cli"

for pair in "$@"; do
  platform=${pair%%=*}
  binary=${pair#*=}
  if [ "$platform" = "$pair" ] || [ ! -d "$root/npm/platforms/$platform" ]; then
    echo "npm-pack: $pair: expected PLATFORM=BINARY with PLATFORM one of: $(ls "$root/npm/platforms" | tr '\n' ' ')" >&2
    exit 2
  fi
  if [ ! -f "$binary" ]; then
    echo "npm-pack: $platform: no binary at $binary (build it first)" >&2
    exit 2
  fi
  exe=cassette
  case "$platform" in win32-*) exe=cassette.exe ;; esac
  cp -R "$root/npm/platforms/$platform" "$stage/$platform"
  mkdir -p "$stage/$platform/bin"
  cp "$binary" "$stage/$platform/bin/$exe"
  chmod 755 "$stage/$platform/bin/$exe"
  pack "$stage/$platform"
done
