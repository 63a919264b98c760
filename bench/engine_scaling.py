#!/usr/bin/env python3
"""The engine's benchmark targets on the gpt model, measured in one run with the configurations
alternating (so load changes hit them alike):

  - 2 ranks x 1 thread against 1 rank x 1 thread (throughput ratio, target >= 1.7);
  - ZeRO-1, -2, -3 against ZeRO-0 at 2 ranks (step-time cost, targets <= 10%, 10%, 30%); ZeRO-3
    also with a prefetch bucket of 1e5 elements (the default 5e7 gathers this model at once);
  - the offloads (cpu, nvme) at 2 ranks, reported.

usage: bench/engine_scaling.py [--dtrain build/dtrain] [--rounds 3] [--steps 12]
Prints one JSON line per measurement, then one summary line with the medians and ratios."""
import argparse
import json
import statistics
import subprocess
import tempfile

p = argparse.ArgumentParser()
p.add_argument("--dtrain", default="build/dtrain")
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--steps", type=int, default=12)
a = p.parse_args()

nvme = tempfile.mkdtemp(prefix="dtrain_nvme_")
configs = {
    "1x1_z0": ["--threads", "1", "--zero-stage", "0"],
    "2x1_z0": ["--slots", "2", "--zero-stage", "0"],
    "2x1_z1": ["--slots", "2", "--zero-stage", "1"],
    "2x1_z2": ["--slots", "2", "--zero-stage", "2"],
    "2x1_z3": ["--slots", "2", "--zero-stage", "3"],
    "2x1_z3_pf1e5": ["--slots", "2", "--zero-stage", "3", "--ds-config",
                     '{"zero_optimization": {"stage3_prefetch_bucket_size": 100000}}'],
    "2x1_z2_cpu": ["--slots", "2", "--zero-stage", "2", "--offload", "cpu"],
    "2x1_z3_nvme": ["--slots", "2", "--zero-stage", "3", "--offload", "nvme", "--nvme-path", nvme],
}
tps = {k: [] for k in configs}
ms = {k: [] for k in configs}
for r in range(a.rounds):
    for name, args in configs.items():
        out = subprocess.run([a.dtrain, "bench", "train", "--model", "gpt", "--steps", str(a.steps),
                              "--warmup", "2", "--json"] + args, check=True, capture_output=True,
                             text=True).stdout
        d = json.loads(out.strip().splitlines()[-1])
        tps[name].append(d["tokens_per_s"])
        ms[name].append(d["step_ms_median"])
        r0 = d["ranks"][0]
        print(json.dumps({"config": name, "round": r, "step_ms": d["step_ms_median"],
                          "tokens_per_s": d["tokens_per_s"],
                          "rank0_device_current": r0["device_current_bytes"],
                          "rank0_ms_per_step": r0["ms_per_step"]}), flush=True)
med = {k: statistics.median(v) for k, v in ms.items()}
tok = {k: statistics.median(v) for k, v in tps.items()}
summary = {
    "step_ms_median": med,
    "tokens_per_s_median": tok,
    "throughput_2x1_over_1x1": round(tok["2x1_z0"] / tok["1x1_z0"], 3),
    "zero1_cost_pct": round(100 * (med["2x1_z1"] / med["2x1_z0"] - 1), 2),
    "zero2_cost_pct": round(100 * (med["2x1_z2"] / med["2x1_z0"] - 1), 2),
    "zero3_cost_pct": round(100 * (med["2x1_z3"] / med["2x1_z0"] - 1), 2),
    "zero3_prefetch_1e5_cost_pct": round(100 * (med["2x1_z3_pf1e5"] / med["2x1_z0"] - 1), 2),
    "zero2_cpu_offload_cost_pct": round(100 * (med["2x1_z2_cpu"] / med["2x1_z0"] - 1), 2),
    "zero3_nvme_offload_cost_pct": round(100 * (med["2x1_z3_nvme"] / med["2x1_z0"] - 1), 2),
}
print(json.dumps(summary))
subprocess.run(["rm", "-rf", nvme])
