#!/usr/bin/env python3
"""Two runs of one trial agree: every tensor of every .safetensors file in their latest
checkpoints (weights, optimizer state, engine shards) within TOL, and every metric of their
JSON-lines metrics files within TOL. Read with the safetensors package, a real client of the
format. Usage: compare_runs.py TOL CKPT_DIR_A METRICS_A CKPT_DIR_B METRICS_B"""
import json
import os
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:
    print(f"FAIL: {e}: this test needs the Python packages 'safetensors' and 'numpy'; "
          "hint: run `make test-deps` (it sets up build/venv with them)", file=sys.stderr)
    sys.exit(1)

tol = float(sys.argv[1])
a_dir, a_m, b_dir, b_m = sys.argv[2:6]
fails = []


def latest(d):
    return os.path.join(d, open(os.path.join(d, "latest")).read().strip())


def files(d):
    out = {}
    for root, _, names in os.walk(d):
        for n in names:
            if n.endswith(".safetensors"):
                out[os.path.relpath(os.path.join(root, n), d)] = os.path.join(root, n)
    return out


fa, fb = files(latest(a_dir)), files(latest(b_dir))
if sorted(fa) != sorted(fb) or not fa:
    fails.append(f"checkpoint files differ: {sorted(fa)} vs {sorted(fb)}")
worst, n = 0.0, 0
for rel in sorted(set(fa) & set(fb)):
    ta, tb = load_file(fa[rel]), load_file(fb[rel])
    if sorted(ta) != sorted(tb):
        fails.append(f"{rel}: tensor names differ")
        continue
    for k in ta:
        if ta[k].shape != tb[k].shape:
            fails.append(f"{rel}:{k}: shape {ta[k].shape} vs {tb[k].shape}")
            continue
        d = float(np.max(np.abs(ta[k].astype(np.float64) - tb[k].astype(np.float64)), initial=0))
        worst, n = max(worst, d), n + 1
        if not d <= tol:
            fails.append(f"{rel}:{k}: max difference {d} > {tol}")


def metrics(p):
    return [(r["kind"], r["batches"], r["metrics"]) for r in map(json.loads, open(p))]


ma, mb = metrics(a_m), metrics(b_m)
if [m[:2] for m in ma] != [m[:2] for m in mb] or not ma:
    fails.append(f"metrics rows differ: {[m[:2] for m in ma]} vs {[m[:2] for m in mb]}")
for (k, b, x), (_, _, y) in zip(ma, mb):
    for name in x:
        if not abs(x[name] - y.get(name, float("inf"))) <= tol:
            fails.append(f"{k} metric {name} at batch {b}: {x[name]} vs {y.get(name)}")
for f in fails:
    print("FAIL:", f, file=sys.stderr)
print(f"{n} tensors in {len(fa)} files, largest difference {worst}; {len(ma)} metrics rows")
sys.exit(1 if fails else 0)
