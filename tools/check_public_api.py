#!/usr/bin/env python3
"""Every public function is used from outside the library through the public headers alone.

A function declared DT_API in include/dtrain/*.h passes when its name appears in an example
(examples/), a doc (docs/*.md, README.md), or a test or benchmark source that includes only
public headers (<dtrain/...>), system headers and local helpers that do the same. A function
that nothing outside uses that way is either an internal (declare it beside its sources) or
untested public API (use it in a test or an example). Exit 1 listing them.

usage: check_public_api.py [ROOT]
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
DECL = re.compile(r"DT_API\b[^;{]*?\b(dt_[a-z0-9_]+)\s*\(", re.S)
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
WORD = re.compile(r"\bdt_[a-z0-9_]+")


def public_functions():
    out = {}
    inc = os.path.join(ROOT, "include", "dtrain")
    for name in sorted(os.listdir(inc)):
        if name.endswith(".h"):
            for m in DECL.finditer(open(os.path.join(inc, name)).read()):
                out[m.group(1)] = name
    return out


def local_helper(path, inc):
    """A quoted include found beside the file or in a test folder above it (tests/test.h)."""
    d = os.path.dirname(path)
    while True:
        cand = os.path.join(d, inc)
        if os.path.exists(cand):
            return cand
        if os.path.samefile(d, ROOT) or os.path.dirname(d) == d:
            return None
        d = os.path.dirname(d)
        if os.path.samefile(d, ROOT):
            return None


def public_only(path, seen=None):
    """True when path includes nothing but public, system and public-only local headers."""
    seen = seen if seen is not None else set()
    if path in seen:
        return True
    seen.add(path)
    for kind, inc in INCLUDE.findall(open(path, errors="replace").read()):
        if inc.startswith("dtrain/"):
            continue
        if kind == "<" and not os.path.exists(os.path.join(ROOT, "src", inc)):
            continue  # a system header
        helper = local_helper(path, inc) if kind == '"' else None
        if not helper or not public_only(helper, seen):
            return False
    return True


def used_names():
    used = set()
    for top in ("examples", "docs", "tests", "bench"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                p = os.path.join(d, f)
                if top in ("examples", "docs") or f.endswith((".md",)):
                    if not f.endswith((".c", ".h", ".md")):
                        continue
                elif not f.endswith((".c", ".h")) or not public_only(p):
                    continue
                used.update(WORD.findall(open(p, errors="replace").read()))
    used.update(WORD.findall(open(os.path.join(ROOT, "README.md")).read()))
    return used


def main():
    funcs = public_functions()
    used = used_names()
    unused = sorted((h, f) for f, h in funcs.items() if f not in used)
    for h, f in unused:
        print(f"include/dtrain/{h}: {f} is used by no example, doc or public-only test; "
              "hint: use it in a test through <dtrain/...> or move it beside its sources")
    print(f"{len(funcs)} public functions, {len(funcs) - len(unused)} used from outside")
    return 1 if unused else 0


if __name__ == "__main__":
    sys.exit(main())
