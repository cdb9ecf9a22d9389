#!/usr/bin/env python3
"""The floors figures of ARCHITECTURE.md, from the sources of `host/src`.

    scripts/floors.py [--json] [--list]

- import circles: strongly connected components (more than one file) of the graph whose
  edges are the `crate::…` paths a file names (in `use` lines and inline paths);
- upward arrows: a file of one floor naming a module of a higher floor (the floor order
  is FLOORS below, the table of ARCHITECTURE.md bottom-up);
- public items of the library (`pub` fn/struct/enum/trait/type/const/static outside
  `cli/` and `main.rs`) and how many of them `unstable` makes reachable;
- `unsafe` blocks outside `sandbox/`;
- lines of `host/src`.

`--list` prints each circle and each upward arrow. The last line is one JSON object.
"""

import json
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host", "src")

# Bottom-up. A module may name modules on its own floor or below. The binary (cli, main)
# is above everything.
FLOORS = [
    ["vocab", "text"],
    ["ids", "paths", "process", "child", "redact", "tls", "fs", "backoff"],
    ["sandbox", "batch"],
    ["event"],
    ["store"],
    ["schedule"],
    ["provider"],
    ["tool", "worktree"],
    ["trust"],
    ["plugin"],
    ["team"],
    ["mcp"],
    ["config"],
    ["agent"],
    ["engine"],
    ["remote"],
    ["control"],
    ["observe"],
    ["repository", "replay", "lib"],
    ["cli", "main"],
]
RANK = {m: i for i, floor in enumerate(FLOORS) for m in floor}
# `mcp/serve/` is a front end like the CLI's (it opens repositories and drives runs);
# the rest of `mcp/` sits below the engine. The tracing spans are words every floor
# that runs something records, so they sit with the events.
SUB_RANK = {("mcp", "serve"): RANK["repository"], ("observe", "spans"): RANK["event"]}
# The pure parts of `schedule/` (specs and next-fire computation) are words the store
# keeps; the daemon's loop above them drives the store.
for pure in ("spec", "next_fire", "cron_check"):
    SUB_RANK[("schedule", pure)] = RANK["batch"]


def files():
    for dirpath, _, names in os.walk(ROOT):
        for n in sorted(names):
            if n.endswith(".rs"):
                full = os.path.join(dirpath, n)
                yield os.path.relpath(full, ROOT).replace(os.sep, "/"), full


def module_path(rel):
    """`agent/runner.rs` -> ("agent", "runner"); `agent/mod.rs` -> ("agent",)."""
    parts = rel[:-3].split("/")
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts == ["lib"]:
        return ()
    return tuple(parts)


def strip_comments(src):
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    out = []
    for line in src.splitlines():
        # Drop `//` comments (doc comments included); good enough outside string literals.
        i = line.find("//")
        if i >= 0 and line[:i].count('"') % 2 == 0:
            line = line[:i]
        out.append(line)
    return "\n".join(out)


def expand_use(tree):
    """`a::{b::c, d}` -> ["a::b::c", "a::d"]."""
    tree = re.sub(r"\s+", "", tree)
    depth, start, parts = 0, None, []
    i = tree.find("{")
    if i < 0:
        return [tree]
    prefix, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    start = 0
    for j, ch in enumerate(body):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:j])
            start = j + 1
    parts.append(body[start:])
    out = []
    for p in parts:
        if p:
            out.extend(prefix + q for q in expand_use(p))
    return out


def crate_paths(src):
    paths = []
    for m in re.finditer(r"\buse\s+(crate::[^;]*);", src):
        paths.extend(expand_use(m.group(1)))
    no_use = re.sub(r"\buse\s+crate::[^;]*;", "", src)
    paths.extend(m.group(0) for m in re.finditer(r"\bcrate(?:::\w+)+", no_use))
    return [p[len("crate::") :] for p in paths if p.startswith("crate::")]


def resolve(path, modules):
    """The longest module (file) a `crate::` path names."""
    segs = [s for s in path.split("::") if s and s not in ("self", "*")]
    for n in range(len(segs), 0, -1):
        if tuple(segs[:n]) in modules:
            return tuple(segs[:n])
    # A type the crate root re-exports (`crate::Repository`) is the root's.
    if segs and segs[0][:1].isupper():
        return ()
    return None


def rank(mod):
    if not mod:
        return RANK["lib"]
    if tuple(mod[:2]) in SUB_RANK:
        return SUB_RANK[tuple(mod[:2])]
    return RANK.get(mod[0], RANK["lib"])


def sccs(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    as_list = "--list" in sys.argv
    sources = {}
    for rel, full in files():
        with open(full, encoding="utf-8") as f:
            sources[module_path(rel)] = (rel, f.read())
    modules = set(sources)
    graph, upward = {}, []
    lines = unsafe_outside = public = 0
    public_by_module = {}
    for mod, (rel, raw) in sources.items():
        lines += raw.count("\n")
        src = strip_comments(raw)
        if not rel.startswith("sandbox/"):
            unsafe_outside += len(re.findall(r"\bunsafe\s*\{", src))
        items = len(
            re.findall(
                r"^\s*pub\s+(?:async\s+)?(?:unsafe\s+)?(?:fn|struct|enum|trait|type|const|static)\b",
                src,
                flags=re.M,
            )
        )
        if mod[:1] not in (("cli",), ("main",)):
            public += items
            public_by_module[mod] = items
        targets = set()
        for p in crate_paths(src):
            t = resolve(p, modules)
            if t is not None and t != mod:
                targets.add(t)
        graph[mod] = targets
        for t in sorted(targets):
            if mod[:1] != t[:1] and rank(t) > rank(mod):
                upward.append(("/".join(mod) or "lib", "/".join(t)))
    circles = sccs(graph)
    with open(os.path.join(ROOT, "lib.rs"), encoding="utf-8") as f:
        lib = strip_comments(f.read())
    unstable = re.search(r"pub mod unstable\s*\{(.*?)\n\}", lib, flags=re.S)
    # Items reachable through `unstable`: every public item beneath a glob-re-exported
    # module, plus each name re-exported by name.
    unstable_items = 0
    for tree in re.findall(r"\bpub\s+use\s+(crate::[^;]*);", unstable.group(1) if unstable else ""):
        for p in expand_use(tree):
            segs = tuple(p[len("crate::") :].split("::"))
            if segs[-1] == "*":
                prefix = segs[:-1]
                unstable_items += sum(
                    n for m, n in public_by_module.items() if m[: len(prefix)] == prefix
                )
            elif segs in modules:
                unstable_items += sum(
                    n for m, n in public_by_module.items() if m[: len(segs)] == segs
                )
            else:
                unstable_items += 1
    if as_list:
        for c in circles:
            print("circle:", " -> ".join("/".join(m) or "lib" for m in c))
        for a, b in upward:
            print(f"upward: {a} -> {b}")
    print(
        json.dumps(
            {
                "import_circles": len(circles),
                "largest_circle_files": max((len(c) for c in circles), default=0),
                "upward_arrows": len(upward),
                "public_items": public,
                "unstable_items": unstable_items,
                "unsafe_outside_sandbox": unsafe_outside,
                "host_src_lines": lines,
            }
        )
    )


if __name__ == "__main__":
    main()
