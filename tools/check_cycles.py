#!/usr/bin/env python3
"""check_cycles.py BUILD_DIR — no circle of calls between source files.

A file calls another when its object file uses a symbol the other defines (nm). Files that call
each other, directly or round a loop, form a circle: a reader of one has to read the others to
follow it. Circles are allowed only inside ALLOWED (the tensor core and its kernels, which are
one unit). Prints each circle as its files, then "N passed, M failed"; exits 1 on any.
"""
import os
import subprocess
import sys

ALLOWED = ("src/tensor/",)


def objects(build):
    root = os.path.join(build, "CMakeFiles", "dtrain_obj.dir")
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".c.o"):
                path = os.path.join(d, f)
                src = os.path.relpath(path, root)[: -len(".o")]
                if src.startswith("src/"):
                    yield src, path


def symbols(obj):
    out = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True, text=True).stdout
    defined = {l.split()[-1] for l in out.splitlines() if len(l.split()) == 3}
    out = subprocess.run(["nm", "-u", obj], capture_output=True, text=True).stdout
    used = {l.split()[-1] for l in out.splitlines() if l.split()}
    return defined, used


def sccs(nodes, edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    owner, uses = {}, {}
    for src, obj in objects(build):
        d, u = symbols(obj)
        for s in d:
            owner[s] = src
        uses[src] = u
    if not uses:
        print(f"no objects under {build}/CMakeFiles/dtrain_obj.dir; hint: build first")
        return 2
    edges = {f: {owner[s] for s in u if s in owner and owner[s] != f} for f, u in uses.items()}
    bad = 0
    for comp in sccs(uses.keys(), edges):
        if len(comp) < 2 or all(c.startswith(ALLOWED) for c in comp):
            continue
        bad += 1
        print("circle: " + " <-> ".join(comp))
    print(f"{len(uses) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
