#!/usr/bin/env python3
"""Lists the import circles between the source files of each crate (product code only).

A file's edges are the other files of its crate it names through `crate::...` or `super::...`
paths (in `use` items or inline), items followed through `pub use` re-exports to the file that
defines them; comments and `#[cfg(test)]` modules at the end of a file are left out.
Prints each strongly connected component of more than one file and exits 1 when one has more
than `--max` files (default 2). Run from the repository root: `scripts/module-cycles.py`.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)::\{([^;]*)\};", re.S)


def module_of(src: Path, file: Path) -> tuple[str, ...]:
    rel = file.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return tuple(parts)


def product_text(file: Path) -> str:
    text = file.read_text()
    cut = text.find("#[cfg(test)]\nmod tests")
    text = text if cut < 0 else text[:cut]
    # Comments (doc links included) name no dependency, nor does a visibility (`pub(in crate::x)`).
    text = "\n".join(line.split("//", 1)[0] for line in text.splitlines())
    return re.sub(r"\bpub\(in [^)]*\)", "pub", text)


def resolve(modules: dict[tuple[str, ...], Path], path: tuple[str, ...]) -> tuple[str, ...] | None:
    for n in range(len(path), -1, -1):
        if path[:n] in modules:
            return path[:n]
    return None


def crate_cycles(src: Path) -> list[list[str]]:
    files = [f for f in src.rglob("*.rs")]
    modules = {module_of(src, f): f for f in files}
    texts = {m: product_text(f) for m, f in modules.items()}
    # Items a module re-exports from another (`pub use child::Item;`): a path through the
    # facade leads to the file that defines the item, and the re-export itself is no edge.
    reexports: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = {m: {} for m in modules}
    for module, text in texts.items():
        for m in re.finditer(r"\bpub(?:\([a-z]+\))?\s+use\s+([^;]+);", text):
            spec = m.group(1).strip()
            head, _, tail = spec.partition("::{")
            items = tail.rstrip("}").split(",") if tail else [spec.rsplit("::", 1)[-1]]
            head = head if tail else spec.rsplit("::", 1)[0]
            source = head.split("::")
            if source[0] in ("crate", "super", "self") or "::" not in spec:
                continue
            target = resolve(modules, module + tuple(source))
            if target is None:
                continue
            for item in items:
                name = item.strip().split(" as ")[-1].strip()
                if name:
                    reexports[module][name] = target

    def follow(path: tuple[str, ...]) -> tuple[str, ...] | None:
        target = resolve(modules, path)
        seen = 0
        while target is not None and len(path) > len(target) and seen < 8:
            nxt = reexports[target].get(path[len(target)])
            if nxt is None:
                break
            target, seen = nxt, seen + 1
        return target

    edges: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in modules}
    for module, file in modules.items():
        # `self::` and a bare `use child::` name the module itself, `super::` its parent,
        # whether the module is a `mod.rs` or a file of its own.
        parent = module
        text = re.sub(r"\bpub(?:\([a-z]+\))?\s+use\s+[^;]+;", "", texts[module])
        paths: list[tuple[str, list[str]]] = []
        for m in USE_GROUP.finditer(text):
            for item in re.split(r",", re.sub(r"\{[^{}]*\}", "", m.group(2))):
                item = item.strip().split(" as ")[0].strip()
                if item and item != "self":
                    paths.append((m.group(1), item.split("::")))
        for m in PATH.finditer(text):
            rest = [p for p in m.group(2).split("::") if p and p != "{"]
            paths.append((m.group(1), rest))
        # `use child::...` in a module file names one of its own child modules.
        for m in re.finditer(
            r"\buse\s+([a-z_][a-z0-9_]*)::((?:[A-Za-z_][A-Za-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*)?", text
        ):
            if parent + (m.group(1),) in modules:
                rest = [m.group(1)] + ([x for x in (m.group(2) or "").split("::") if x])
                paths.append(("self", rest))
        for root, rest in paths:
            if root == "crate":
                base: tuple[str, ...] = ()
            elif root == "super":
                base = parent[:-1]
                while rest and rest[0] == "super":
                    base, rest = base[:-1], rest[1:]
            else:
                base = parent
            target = follow(base + tuple(rest))
            if target is not None and target != module and target != ():
                edges[module].add(target)
    # Tarjan's strongly connected components.
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(str(modules[c].relative_to(src)) for c in comp))

    sys.setrecursionlimit(10000)
    for v in modules:
        if v not in index:
            visit(v)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max", type=int, default=2)
    args = parser.parse_args()
    worst = 0
    for src in sorted(Path("crates").glob("*/src")):
        for comp in crate_cycles(src):
            worst = max(worst, len(comp))
            print(f"{src.parent.name}: {len(comp)} files: {', '.join(comp)}")
    return 1 if worst > args.max else 0


if __name__ == "__main__":
    sys.exit(main())
