#!/usr/bin/env python3
"""Checks that every published package says the workspace's version, and that the npm
packages agree with each other: the Cargo workspace version (the one source: the binary's
`--version` and the wheel, through maturin, take it from there), the npm main package, its
optionalDependencies pins, every platform package, and the platform table of the shim
(npm/cassette-cli/lib/binary.js). With `--tag vX.Y.Z` (the release workflow), also the tag.
npm has no way to read another file's version, so a release bumps Cargo.toml's and runs this
with `--write`, which sets every npm version and pin to it.

Exit 0 when all agree, 1 naming each disagreement.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", help="the release tag, e.g. v0.1.0")
    parser.add_argument(
        "--write", action="store_true", help="set every npm package's version and pins to the Cargo workspace's first"
    )
    args = parser.parse_args()

    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    version = cargo["workspace"]["package"]["version"]
    if args.write:
        write_npm_versions(version)
    problems: list[str] = []

    if cargo["package"]["version"] != {"workspace": True}:
        problems.append("Cargo.toml: the cassette package must take `version.workspace = true`")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    if "version" in pyproject["project"] or "version" not in pyproject["project"].get("dynamic", []):
        problems.append("pyproject.toml: the version must be dynamic (maturin reads Cargo's)")

    main_path = ROOT / "npm" / "cassette-cli" / "package.json"
    main = json.loads(main_path.read_text())
    if main["version"] != version:
        problems.append(f"{main_path.relative_to(ROOT)}: version {main['version']}, Cargo says {version}")
    pins = main.get("optionalDependencies", {})
    platform_dirs = sorted((ROOT / "npm" / "platforms").iterdir())
    names = set()
    for directory in platform_dirs:
        path = directory / "package.json"
        package = json.loads(path.read_text())
        names.add(package["name"])
        if package["version"] != version:
            problems.append(f"{path.relative_to(ROOT)}: version {package['version']}, Cargo says {version}")
        if package["name"] != f"cassette-cli-{directory.name}":
            problems.append(
                f"{path.relative_to(ROOT)}: named {package['name']}, its folder says cassette-cli-{directory.name}"
            )
        if pins.get(package["name"]) != version:
            problems.append(
                f"{main_path.relative_to(ROOT)}: optionalDependencies pin {package['name']} "
                f"at {pins.get(package['name'])!r}, not {version!r}"
            )
    for name in sorted(set(pins) - names):
        problems.append(f"{main_path.relative_to(ROOT)}: optional dependency {name} has no folder under npm/platforms")

    shim = (ROOT / "npm" / "cassette-cli" / "lib" / "binary.js").read_text()
    in_shim = set(re.findall(r'"(cassette-cli-[a-z0-9-]+)"', shim))
    for name in sorted(names ^ in_shim):
        where = "npm/platforms" if name in names else "lib/binary.js"
        problems.append(f"npm/cassette-cli/lib/binary.js: platform package {name} is only in {where}")

    if args.tag is not None and args.tag != f"v{version}":
        problems.append(f"the tag {args.tag} is not v{version}, the version Cargo.toml says")

    for problem in problems:
        print(f"check-versions: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check-versions: cassette {version} everywhere (Cargo, PyPI, {len(names) + 1} npm packages)")
    return 0


def write_npm_versions(version: str) -> None:
    paths = [
        ROOT / "npm" / "cassette-cli" / "package.json",
        *sorted((ROOT / "npm" / "platforms").glob("*/package.json")),
    ]
    for path in paths:
        package = json.loads(path.read_text())
        package["version"] = version
        for name in package.get("optionalDependencies", {}):
            package["optionalDependencies"][name] = version
        path.write_text(json.dumps(package, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    sys.exit(main())
