#!/usr/bin/env python3
"""Fails when the library's top-level modules use each other in a cycle.

Reads every src/**/*.rs file (the binaries in src/bin/ are not modules of the library), finds the
paths it names (`crate::x…`, `use crate::{x, y::z}`, `super::…` resolved against the file's own
module, and names the crate root re-exports, such as `crate::Error`, resolved to the module that
defines them) and draws one edge per pair of top-level modules. Inline test modules are left out:
a test may use whatever it tests with. Prints the graph's strongly connected components of more
than one module, with the edges that close each cycle, and exits 1 if there is any; otherwise
prints the modules in layers (each uses only modules of lower layers) and exits 0.

    scripts/check-layers.py            # check src/ of this checkout
    scripts/check-layers.py --root DIR # check another checkout (e.g. a `git worktree`)
"""

import argparse
import pathlib
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text):
    """The source without comments, string literals' contents and inline test modules."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == '"' or (c == "r" and re.match(r'r#*"', text[i:i + 10])):
            m = re.match(r'r(#*)"', text[i:])
            if m:
                end = text.find('"' + m.group(1), i + len(m.group(0)))
                i = n if end < 0 else end + 1 + len(m.group(1))
            else:
                i += 1
                while i < n and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
                i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            # A char literal (not a lifetime): '"' must not open a string.
            i += len(re.match(r"'(\\.|[^\\'])'", text[i:]).group(0))
            out.append("' '")
        else:
            out.append(c)
            i += 1
    code = "".join(out)
    # `#[cfg(test)] mod tests { … }`: cut from its start to its closing brace.
    m = re.search(r"#\[cfg\(test\)\]\s*mod\s+" + IDENT + r"\s*\{", code)
    while m:
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        code = code[: m.start()] + code[j:]
        m = re.search(r"#\[cfg\(test\)\]\s*mod\s+" + IDENT + r"\s*\{", code)
    return code


def module_of(src, path):
    """The module path of a file: src/a/b.rs and src/a/b/mod.rs are ["a", "b"]."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "mod":
        parts.pop()
    return [] if parts == ["lib"] else parts


def group_heads(text, start):
    """The first segment of each path in the `{…}` group that opens at `start`."""
    depth, j, heads, item = 0, start, [], ""
    while j < len(text):
        ch = text[j]
        if ch == "{":
            depth += 1
            if depth == 1:
                item = ""
                j += 1
                continue
        elif ch == "}":
            depth -= 1
            if depth == 0:
                heads.append(item)
                break
        elif ch == "," and depth == 1:
            heads.append(item)
            item = ""
            j += 1
            continue
        if depth == 1:
            item += ch
        j += 1
    names = []
    for h in heads:
        m = re.match(r"\s*(" + IDENT + ")", h)
        if m:
            names.append(m.group(1))
    return names


def root_exports(code):
    """Names the crate root re-exports, mapped to the top-level module they come from."""
    exports = {}
    for m in re.finditer(r"\bpub\s+use\s+(" + IDENT + r")::", code):
        module, rest = m.group(1), code[m.end():]
        if rest.startswith("{"):
            for item in re.split(r",", rest[1:rest.find("}")]):
                names = re.findall(IDENT, item)
                if names:
                    exports[names[-1]] = module
        else:
            names = re.findall(IDENT, rest[: rest.find(";")])
            if names:
                exports[names[-1]] = module
    return exports


def referenced(code, module, tops, exports):
    """Top-level modules the code of `module` (a module path) names."""
    found = set()

    def add(head):
        if head in tops:
            found.add(head)
        elif head in exports:
            found.add(exports[head])

    for m in re.finditer(r"(?<![\w$])crate::", code):
        rest = code[m.end():]
        if rest.startswith("{"):
            for head in group_heads(code, m.end()):
                add(head)
        else:
            h = re.match(IDENT, rest)
            if h:
                add(h.group(0))
    for m in re.finditer(r"(?<![\w:$])((?:super::)+)", code):
        up = m.group(1).count("super::")
        base = module[: len(module) - up] if up <= len(module) else []
        rest = code[m.end():]
        if base:
            # Still inside the same top-level module.
            continue
        if rest.startswith("{"):
            for head in group_heads(code, m.end()):
                add(head)
        else:
            h = re.match(IDENT, rest)
            if h:
                add(h.group(0))
    found.discard(module[0] if module else None)
    return found


def sccs(graph):
    """Tarjan's strongly connected components."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
            out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layers(graph):
    """Modules grouped by depth: layer 0 uses nothing, layer k uses only layers below k."""
    depth = {}

    def d(v, seen=()):
        if v not in depth:
            depth[v] = 1 + max((d(w, seen + (v,)) for w in graph[v]), default=-1)
        return depth[v]

    for v in graph:
        d(v)
    by = {}
    for v, k in depth.items():
        by.setdefault(k, []).append(v)
    return [sorted(by[k]) for k in sorted(by)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=pathlib.Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    src = pathlib.Path(args.root) / "src"
    files = [p for p in src.rglob("*.rs") if "bin" not in p.relative_to(src).parts[:1]]
    codes = {p: strip(p.read_text()) for p in files}
    modules = {p: module_of(src, p) for p in files}
    tops = {m[0] for m in modules.values() if m}
    exports = {
        name: module
        for name, module in root_exports(codes[src / "lib.rs"]).items()
        if module in tops
    }
    graph = {t: set() for t in tops}
    for p, module in modules.items():
        if module:
            graph[module[0]] |= referenced(codes[p], module, tops, exports)
    cycles = [c for c in sccs(graph) if len(c) > 1]
    edges = sum(len(v) for v in graph.values())
    print(f"{len(tops)} top-level modules in src/, {edges} uses between them")
    if cycles:
        for comp in cycles:
            inside = sorted((a, b) for a in comp for b in graph[a] if b in comp)
            print(f"cycle among {', '.join(comp)}:")
            for a, b in inside:
                print(f"  {a} -> {b}")
        print(f"FAILED: {len(cycles)} cycle(s) between top-level modules")
        return 1
    for k, layer in enumerate(layers(graph)):
        print(f"layer {k}: {', '.join(layer)}")
    print("ok: no cycle between top-level modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
