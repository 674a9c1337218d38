#!/usr/bin/env python3
"""Prints the product lines of each crate and its share of the workspace's, and checks two
bounds of the architecture (ARCHITECTURE.md): the CLI is at most 30% of product lines, and the
pure crates (keying, wire, tape, vcr, grade, review) are at least 33%.

How lines are counted: every `.rs` file under `crates/*/src`, except files under a `tests/`
folder there; in each file, every line that is not blank, comments and doc comments included
(they are part of what a reader of the product reads), except the items under a `#[cfg(test)]`
or `#[cfg(all(test, ...))]` attribute (the unit-test modules), which are left out from the
attribute to the item's closing brace (braces inside strings, characters and comments do not
count). Tests in `crates/*/tests`, benches and examples are not under `src` and so not counted.

Exits 1 when a bound is not held, 0 otherwise. Run from the repository root:
`scripts/line-shares.py`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PURE = ("keying", "wire", "tape", "vcr", "grade", "review")
CLI = "cli"
MAX_CLI_SHARE = 0.30
MIN_PURE_SHARE = 0.33

TEST_ATTR = re.compile(r"^\s*#\[cfg\((test|all\(test\b.*)\)\]\s*$")


def item_end(text: str, start: int) -> int:
    """The offset just past the item that begins at `start`: its `;` at depth 0, or the brace
    that closes its first `{`. Strings, characters and comments are skipped."""
    depth = 0
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        raw = re.match(r'b?r(#*)"', text[i : i + 40])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = '"' + raw.group(1)
            end = text.find(close, i + raw.end())
            i = n if end < 0 else end + len(close)
            continue
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if c == "'":
            # A character literal ('a', '\n', '\u{1F600}'), not a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i : i + 12])
            if m:
                i += m.end()
                continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        elif c == ";" and depth == 0:
            return i + 1
        i += 1
    return n


def product_lines(path: Path) -> int:
    """The non-blank lines of a source file outside its `#[cfg(test)]` items."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    count = 0
    i = 0
    while i < len(lines):
        if TEST_ATTR.match(lines[i]):
            end = item_end(text, offsets[i + 1]) if i + 1 < len(lines) else len(text)
            while i < len(lines) and offsets[i] < end:
                i += 1
            continue
        if lines[i].strip():
            count += 1
        i += 1
    return count


def crate_lines(root: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for src in sorted(root.glob("crates/*/src")):
        total = 0
        for file in src.rglob("*.rs"):
            if "tests" in file.relative_to(src).parts[:-1]:
                continue
            total += product_lines(file)
        counts[src.parent.name] = total
    return counts


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    counts = crate_lines(root)
    total = sum(counts.values())
    if total == 0 or CLI not in counts:
        print("no product lines found under crates/*/src", file=sys.stderr)
        return 1
    for name, lines in sorted(counts.items(), key=lambda kv: -kv[1]):
        kind = "pure" if name in PURE else ""
        print(f"{name:<10} {lines:>7} {lines / total:6.1%}  {kind}")
    cli_share = counts[CLI] / total
    pure_share = sum(counts.get(name, 0) for name in PURE) / total
    print(f"{'total':<10} {total:>7}")
    print(
        f"cli {cli_share:.1%} (at most {MAX_CLI_SHARE:.0%}), pure crates {pure_share:.1%} (at least {MIN_PURE_SHARE:.0%})"
    )
    failed = False
    if cli_share > MAX_CLI_SHARE:
        print(
            f"the CLI is {cli_share:.1%} of product lines, over {MAX_CLI_SHARE:.0%}: move domain logic "
            "with no IO into a library crate",
            file=sys.stderr,
        )
        failed = True
    if pure_share < MIN_PURE_SHARE:
        print(
            f"the pure crates are {pure_share:.1%} of product lines, under {MIN_PURE_SHARE:.0%}",
            file=sys.stderr,
        )
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
