#!/usr/bin/env python3
"""Load a checkpoint's model.safetensors with the safetensors package (a real client of our
format) and compare names, shapes and values with probe.json, which the trial's save hook
wrote from its live parameters. Usage: st_read.py CHECKPOINT_DIR"""
import json
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:
    print(f"FAIL: {e}: this test needs the Python packages 'safetensors' and 'numpy'; "
          "hint: run `make test-deps` (it sets up build/venv with them)", file=sys.stderr)
    sys.exit(1)

ckpt = sys.argv[1]
tensors = load_file(f"{ckpt}/model.safetensors")
probe = json.load(open(f"{ckpt}/probe.json"))
fails = 0
if sorted(tensors) != sorted(probe):
    print(f"FAIL: names {sorted(tensors)} != {sorted(probe)}", file=sys.stderr)
    fails += 1
for name, want in probe.items():
    t = tensors.get(name)
    if t is None:
        continue
    if list(t.shape) != want["shape"] or t.dtype != np.float32:
        print(f"FAIL: {name}: {t.dtype}{list(t.shape)} != float32{want['shape']}", file=sys.stderr)
        fails += 1
    elif not np.array_equal(t.reshape(-1)[:3], np.array(want["first"], dtype=np.float32)):
        print(f"FAIL: {name}: {t.reshape(-1)[:3]} != {want['first']}", file=sys.stderr)
        fails += 1
n = len(probe)
print(f"{n - fails} passed, {fails} failed")
sys.exit(1 if fails else 0)
