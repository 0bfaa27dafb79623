#!/usr/bin/env python3
"""Module layering: fails if the library's modules depend on each other against the layer list.

The layers are the ```layers block of docs/architecture.md, highest layer first, one line each:
`name: module module ...`. A module is a top-level module of the library, `src/<m>.rs` or the
folder `src/<m>/` (every file in it belongs to `<m>`); `src/lib.rs`, `src/main.rs` and
`src/bin/` are exempt. A module uses another where its code (comments and string literals
stripped) names `crate::<other>` (plain, grouped `use crate::{a, b::{C, D}}`, or inline), a
`super::` path that leaves the module, or a name that lib.rs re-exports from another module.

Checked: every module is in exactly one layer and every listed module exists; no module uses
one in a higher layer (its own layer and lower ones are fine); the graph of uses has no cycle.
This keeps the layering written down in the architecture page true: pure verification stays
testable on its own, storage never learns about processors, processing never learns about HTTP
or Lambda events.

    python3 scripts/check-layers.py [--root DIR]   # DIR defaults to this repository
    python3 scripts/check-layers.py --self-test    # synthetic trees, good and bad, judged right
"""
import bisect
import contextlib
import io
import pathlib
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SPEC = "docs/architecture.md"

IDENT = r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*"
RAW_STRING = re.compile(r'b?r(#*)"')
CHAR_LITERAL = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)|[^\\'\n])'")
CRATE_PATH = re.compile(r"(?<![\w$])crate\s*::\s*")
SUPER_PATH = re.compile(r"(?<![\w$:])((?:super\s*::\s*)+)")
HEAD = re.compile(r"\s*(\{|\*|" + IDENT + ")")
MOD_BLOCK = re.compile(r"(?<![\w$])mod\s+" + IDENT + r"\s*\{")
USE_ITEM = re.compile(r"(?<![\w$])use\s+([^;]*);")
USE_TOKEN = re.compile(r"\s*(::|\{|\}|,|\*|" + IDENT + ")")


# ---------------------------------------------------------------------------------------------
# Reading Rust source


def strip(src):
    """The source with comments, string literals and char literals blanked (newlines kept)."""
    out = list(src)
    n = len(src)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    i = 0
    while i < n:
        c = src[i]
        ident_before = i > 0 and (src[i - 1].isalnum() or src[i - 1] == "_")
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
        elif c in "br" and not ident_before and RAW_STRING.match(src, i):
            m = RAW_STRING.match(src, i)
            close = '"' + m.group(1)
            j = src.find(close, m.end())
            j = n if j < 0 else j + len(close)
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
        elif c == "'" and CHAR_LITERAL.match(src, i):
            j = CHAR_LITERAL.match(src, i).end()
        else:
            i += 1
            continue
        blank(i, j)
        i = j
    return "".join(out)


def heads(code, pos):
    """The first path segments at `pos` (just after `crate::`): one name, or one per item of a
    `{...}` group, as (name, offset) pairs. `*` is returned as a name."""
    m = HEAD.match(code, pos)
    if not m:
        return []
    if m.group(1) != "{":
        return [(m.group(1).removeprefix("r#"), m.start(1))]
    found, depth, item_start = [], 1, m.end()
    i = m.end()
    while i < len(code) and depth:
        c = code[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if depth == 0 or (depth == 1 and c == ","):
            h = HEAD.match(code, item_start)
            if h and h.start(1) < i and h.group(1) != "{":
                found.append((h.group(1).removeprefix("r#"), h.start(1)))
            item_start = i + 1
        i += 1
    return found


def mod_depths(code):
    """Offsets where the depth of inline `mod x { ... }` blocks changes, and the depths."""
    opens = {m.end() - 1 for m in MOD_BLOCK.finditer(code)}
    stack, offsets, depths = [], [0], [0]
    for i, c in enumerate(code):
        if c == "{":
            stack.append(i in opens)
        elif c == "}" and stack:
            stack.pop()
        else:
            continue
        offsets.append(i)
        depths.append(sum(stack))
    return offsets, depths


def use_leaves(tree):
    """The leaves of a `use` tree as (path segments, name bound)."""
    toks, i = [], 0
    while True:
        m = USE_TOKEN.match(tree, i)
        if not m:
            break
        toks.append(m.group(1).removeprefix("r#"))
        i = m.end()
    toks.append("")
    leaves = []

    def parse(i, prefix):
        path = list(prefix)
        while True:
            t = toks[i]
            if t == "::":
                i += 1
            elif t == "{":
                i += 1
                while toks[i] not in ("}", ""):
                    i = parse(i, path)
                    if toks[i] == ",":
                        i += 1
                return i + 1
            elif t == "*":
                leaves.append((path + ["*"], "*"))
                return i + 1
            elif t and t not in "},":
                path.append(t)
                i += 1
                if toks[i] == "::":
                    continue
                bound = path[-2] if t == "self" and len(path) > 1 else t
                if toks[i] == "as":
                    bound, i = toks[i + 1], i + 2
                leaves.append((path, bound))
                return i
            else:
                return i

    parse(0, [])
    return leaves


def module_of(path):
    """`src/<m>.rs` or `src/<m>/...` -> `<m>`; None for exempt or non-Rust files."""
    parts = path.split("/")
    if len(parts) < 2 or parts[0] != "src" or not path.endswith(".rs"):
        return None
    if len(parts) == 2:
        return None if parts[1] in ("lib.rs", "main.rs") else parts[1][:-3]
    return None if parts[1] == "bin" else parts[1]


def file_depth(path):
    """How deep the file's module sits below the crate root: src/m.rs and src/m/mod.rs are 1."""
    parts = path.split("/")[1:]
    return len(parts) - 1 if parts[-1] == "mod.rs" else len(parts)


# ---------------------------------------------------------------------------------------------
# The check


def parse_layers(doc):
    """(layers as [(name, [modules])], errors) from the page's ```layers block."""
    lines = doc.splitlines()
    starts = [k for k, l in enumerate(lines) if re.fullmatch(r"\s*(`{3,}|~{3,})\s*layers\s*", l)]
    if not starts:
        return [], [f"spec: {SPEC} has no ```layers block"]
    errors = []
    if len(starts) > 1:
        errors.append(f"spec: {SPEC} has {len(starts)} ```layers blocks; keep one")
    fence = lines[starts[0]].strip()[0] * 3
    layers, seen = [], set()
    for number, line in enumerate(lines[starts[0] + 1 :], 1):
        if line.strip().startswith(fence):
            break
        if not line.strip() or line.strip().startswith("#"):
            continue
        m = re.fullmatch(r"\s*([\w-]+)\s*:\s*(.*?)\s*", line)
        if not m:
            errors.append(
                f"spec: line {number} of the layers block is not `name: module ...`: {line.strip()}"
            )
            continue
        if m.group(1) in seen:
            errors.append(f"spec: layer {m.group(1)} is listed twice")
        seen.add(m.group(1))
        layers.append((m.group(1), re.split(r"[\s,]+", m.group(2)) if m.group(2) else []))
    else:
        errors.append("spec: the layers block is not closed")
    return layers, errors


def find_edges(sources):
    """(modules found as {name: where}, edges as {(from, to): 'file:line'}, glob errors)."""
    modules = {}
    for path in sorted(sources):
        m = module_of(path)
        if m:
            modules.setdefault(m, f"src/{m}/" if path.count("/") > 1 else path)
    reexports = {}
    if "src/lib.rs" in sources:
        for use in USE_ITEM.finditer(strip(sources["src/lib.rs"])):
            for segments, bound in use_leaves(use.group(1)):
                segments = [s for s in segments if s not in ("crate", "self")]
                if segments and segments[0] in modules and bound not in ("*", segments[0]):
                    reexports[bound] = segments[0]
    edges, globs = {}, []
    for path in sorted(sources):
        src_module = module_of(path)
        if not src_module:
            continue
        code = strip(sources[path])
        targets = [h for m in CRATE_PATH.finditer(code) for h in heads(code, m.end())]
        offsets, depths = mod_depths(code)
        base = file_depth(path)
        for m in SUPER_PATH.finditer(code):
            ups = m.group(1).count("super")
            if ups == base + depths[bisect.bisect_right(offsets, m.start()) - 1]:
                targets += heads(code, m.end())
        for name, offset in targets:
            line = code.count("\n", 0, offset) + 1
            if name == "*":
                globs.append(
                    f"glob: {path}:{line} imports everything at the crate root, "
                    "which hides what it uses"
                )
                continue
            target = name if name in modules else reexports.get(name)
            if target and target != src_module:
                edges.setdefault((src_module, target), f"{path}:{line}")
    return modules, edges, globs


def cycles(nodes, edges):
    """One cycle per strongly connected group of modules, as (cycle, group)."""
    graph = {n: sorted(b for a, b in edges if a == n) for n in nodes}
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    found = []
    for group in sorted(groups):
        start, came_from, queue = group[0], {}, [group[0]]
        while queue and start not in came_from:
            v = queue.pop(0)
            for w in graph[v]:
                if w in group and w not in came_from:
                    came_from[w] = v
                    queue.append(w)
        path, v = [start], came_from[start]
        while v != start:
            path.append(v)
            v = came_from[v]
        found.append(([start] + path[:0:-1] + [start], group))
    return found


def check(doc, sources):
    """(report lines, violations) for a page's text and {path under the root: source text}."""
    layers, violations = parse_layers(doc)
    modules, edges, globs = find_edges(sources)
    rank, layer_of, twice = {}, {}, set()
    for number, (layer, listed) in enumerate(layers):
        for m in listed:
            if m in layer_of:
                violations.append(f"duplicate: {m} is listed in layers {layer_of[m]} and {layer}")
                twice.add(m)
                continue
            rank[m], layer_of[m] = number, layer
    for m in sorted(modules):
        if m not in layer_of:
            violations.append(f"unlisted: {m} ({modules[m]}) is in no layer")
    for m in sorted(layer_of, key=lambda m: (rank[m], m)):
        if m not in modules:
            violations.append(
                f"missing: {m} is listed in layer {layer_of[m]} "
                f"but there is no src/{m}.rs or src/{m}/"
            )
    upward = sorted(
        (e for e in edges if set(e) <= rank.keys() - twice and rank[e[1]] < rank[e[0]]),
        key=lambda e: (rank[e[0]], e[0], rank[e[1]], e[1]),
    )
    for a, b in upward:
        violations.append(f"upward: {a} ({layer_of[a]}) -> {b} ({layer_of[b]}) at {edges[(a, b)]}")
    for cycle, group in cycles(modules, edges):
        extra = ""
        if len(group) > len(cycle) - 1:
            extra = f" (all of {', '.join(group)} depend on each other)"
        violations.append("cycle: " + " -> ".join(cycle) + extra)
    violations += globs

    order = lambda m: (rank.get(m, len(layers)), m)
    rows = [(layer, m) for layer, listed in layers for m in listed if layer_of.get(m) == layer]
    rows += [("(unlisted)", m) for m in sorted(modules) if m not in layer_of]
    width_layer = max([len("layer")] + [len(r[0]) for r in rows])
    width_module = max([len("module")] + [len(r[1]) for r in rows])
    report = [f"{'layer':{width_layer}}  {'module':{width_module}}  uses"]
    previous = None
    for layer, m in rows:
        if m not in modules:
            uses = "(missing)"
        else:
            used = sorted((b for a, b in edges if a == m), key=order)
            uses = " ".join(b + ("^" if (m, b) in upward else "") for b in used) or "-"
        shown = layer if layer != previous else ""
        report.append(f"{shown:{width_layer}}  {m:{width_module}}  {uses}")
        previous = layer
    if upward:
        report.append("(^ marks a use of a higher layer)")
    summary = f"{len(modules)} modules, {len(edges)} edges"
    if violations:
        report.append(f"layers: FAILED, {len(violations)} violations ({summary})")
    else:
        report.append(f"layers: OK ({summary})")
    return report, violations


def run(root):
    root = pathlib.Path(root)
    page = root / SPEC
    doc = page.read_text() if page.is_file() else ""
    files = sorted((root / "src").rglob("*.rs"))
    sources = {p.relative_to(root).as_posix(): p.read_text() for p in files}
    report, violations = check(doc, sources)
    print("\n".join(report[:-1]))
    for v in violations:
        print(v)
    print(report[-1])
    return 1 if violations else 0


# ---------------------------------------------------------------------------------------------
# Self-test: synthetic trees, each of which the checker must judge right


LAYERS = """# Architecture

```layers
top:    app cli
middle: logic helper
bottom: base util
```
"""

CLEAN = {
    "src/lib.rs": (
        "//! The crate.\npub mod app;\npub mod base;\n"
        "pub use app::run;\npub use crate::util::{self as u, U};\n"
    ),
    "src/main.rs": "fn main() { crate::app::run(); }\n",
    "src/bin/tool.rs": "use hookclaim::app;\nfn main() { crate::app::run(); }\n",
    "src/app.rs": (
        "use crate::{logic::Thing,\n"
        "    helper,\n"
        "    base::{A, B as C}};\n"
        "pub fn run() { crate::util::x(); }\n"
    ),
    "src/cli.rs": "//! The command line. It uses nothing.\npub fn main() {}\n",
    "src/logic.rs": (
        "use crate::base::A; // crate::app is mentioned in a comment\n"
        "/// See [`crate::app::run`].\n"
        "/* a block comment: crate::app /* nested crate::cli */ crate::app */\n"
        'fn g() { let s = "http://example.org"; crate::helper::h(); }\n'
    ),
    "src/helper/mod.rs": "mod inner;\nuse self::inner::X;\nuse super::base::A;\npub fn h() {}\n",
    "src/helper/inner.rs": "use super::h;\nuse super::super::util::U;\npub struct X;\n",
    "src/base.rs": (
        "pub struct A;\npub struct B;\n"
        "#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::util::U;\n}\n"
    ),
    "src/util.rs": (
        "//! Lowest of all.\n"
        "// use crate::cli::main;\n"
        "pub fn x<'a>(s: &'a str) -> char { '\"' }\n"
        'pub const RAW: &str = r#"crate::cli " and crate::app"#;\n'
        'pub const PLAIN: &str = "crate::cli \\" crate::app";\n'
        "pub struct U;\n"
    ),
}

CLEAN_EDGES = {
    ("app", "logic"), ("app", "helper"), ("app", "base"), ("app", "util"),
    ("logic", "base"), ("logic", "helper"), ("helper", "base"), ("helper", "util"),
    ("base", "util"),
}


def changed(path, old, new, tree=CLEAN):
    assert old in tree[path], (path, old)
    return {**tree, path: tree[path].replace(old, new)}


CASES = [
    # (name, page, tree, violations expected: each the start of exactly one reported violation)
    ("a clean tree passes", LAYERS, CLEAN, []),
    (
        "an upward edge (the commented-out use, uncommented)",
        LAYERS,
        changed("src/util.rs", "// use crate::cli::main;", "use crate::cli::main;"),
        ["upward: util (bottom) -> cli (top) at src/util.rs:2"],
    ),
    (
        "a cycle within a layer",
        LAYERS,
        changed("src/helper/inner.rs", "pub struct X;", "pub struct X(crate::logic::Thing);"),
        ["cycle: helper -> logic -> helper"],
    ),
    (
        "an unlisted folder module",
        LAYERS,
        {**CLEAN, "src/stray/mod.rs": "mod deep;\n", "src/stray/deep.rs": "use crate::base::A;\n"},
        ["unlisted: stray (src/stray/) is in no layer"],
    ),
    (
        "a listed module that does not exist",
        LAYERS.replace("base util", "base util ghost"),
        CLEAN,
        ["missing: ghost is listed in layer bottom"],
    ),
    (
        "a module listed in two layers",
        LAYERS.replace("logic helper", "logic helper util"),
        CLEAN,
        ["duplicate: util is listed in layers middle and bottom"],
    ),
    (
        "a grouped multi-line use reaching up",
        LAYERS,
        changed(
            "src/base.rs",
            "pub struct A;",
            "use crate::{\n    util::U,\n    cli,\n    app::{\n"
            "        run,\n        Thing as T,\n    },\n};\npub struct A;",
        ),
        [
            "upward: base (bottom) -> app (top) at src/base.rs:4",
            "upward: base (bottom) -> cli (top) at src/base.rs:3",
            "cycle: app -> base -> app",
        ],
    ),
    (
        "a super:: path leaving the module",
        LAYERS,
        changed("src/logic.rs", "use crate::base::A;", "use super::cli::main;"),
        ["upward: logic (middle) -> cli (top) at src/logic.rs:1"],
    ),
    (
        "a name lib.rs re-exports",
        LAYERS,
        changed("src/helper/mod.rs", "pub fn h() {}", "pub fn h() { crate::run() }"),
        ["upward: helper (middle) -> app (top)", "cycle: app -> helper -> app"],
    ),
    (
        "a glob import of the crate root",
        LAYERS,
        changed("src/cli.rs", "pub fn main() {}", "use crate::*;\npub fn main() {}"),
        ["glob: src/cli.rs:2 imports everything"],
    ),
    (
        "a page without a layers block",
        "# Architecture\n",
        CLEAN,
        ["spec: docs/architecture.md has no ```layers block"]
        + [f"unlisted: {m}" for m in ("app", "base", "cli", "helper", "logic", "util")],
    ),
]


def judged_right(name, page, tree, expected):
    report, violations = check(page, tree)
    problems = []
    unmatched = list(violations)
    for e in expected:
        hits = [v for v in unmatched if v.startswith(e)]
        if len(hits) != 1:
            problems.append(f"expected one violation starting {e!r}, got {len(hits)}")
        else:
            unmatched.remove(hits[0])
    problems += [f"unexpected violation: {v}" for v in unmatched]
    if report[-1].startswith("layers: OK") != (not expected):
        problems.append(f"wrong summary: {report[-1]}")
    print(f"{'ok  ' if not problems else 'FAIL'} {name}")
    for p in problems:
        print(f"       {p}")
    return not problems


def self_test():
    results = [judged_right(*case) for case in CASES]
    _, edges, _ = find_edges(CLEAN)
    missing, extra = sorted(CLEAN_EDGES - set(edges)), sorted(set(edges) - CLEAN_EDGES)
    results.append(not missing and not extra)
    print(f"{'ok  ' if results[-1] else 'FAIL'} the clean tree's edges, exactly"
          + (f": missing {missing}, extra {extra}" if missing or extra else ""))
    # End to end, through files on disk and the exit status: 0 for the clean tree, 1 for a bad one.
    for name, tree, status in [("clean", CLEAN, 0), ("with an upward edge", CASES[1][2], 1)]:
        with tempfile.TemporaryDirectory() as d:
            for path, text in {**tree, SPEC: LAYERS}.items():
                (pathlib.Path(d) / path).parent.mkdir(parents=True, exist_ok=True)
                (pathlib.Path(d) / path).write_text(text)
            with contextlib.redirect_stdout(io.StringIO()) as out:
                got = run(d)
        results.append(got == status)
        verdict = "ok  " if got == status else "FAIL"
        print(f"{verdict} on disk, {name}: exit {got}, expected {status}")
    bad = sum(1 for case in CASES if case[3])
    print(f"self-test: {sum(results)} of {len(results)} checks passed; "
          f"{bad} bad trees must fail and did" if all(results) else "self-test: FAILED")
    return 0 if all(results) else 1


def main(argv):
    args = argv[1:]
    if args == ["--self-test"]:
        return self_test()
    if args and (args[0] != "--root" or len(args) != 2):
        print("usage: check-layers.py [--root DIR] [--self-test]", file=sys.stderr)
        return 2
    return run(args[1] if args else ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
