#!/usr/bin/env python3
"""dtrain's GEMM against OpenBLAS's sgemm on the built-in models' own products, alternately.

The mlp (batch 128, 784-512-512-10) and gpt (8 x 128 tokens, width 256, MLP 1024) run their
linear layers as three products each: the forward x · wᵀ (NT), the input gradient dy · w (NN)
and the weight gradient dyᵀ · x (TN). For every such shape each round times
`dtrain bench gemm --shape MxNxK --trans T` (dt_matmul_t, what the ops call) and
`--backend openblas` (cblas_sgemm, the same product) back to back, in a rotated order. Per
shape it prints the median of the per-round ratios (dtrain rate / OpenBLAS rate); per model,
the ratio of the summed median times, each shape weighted by how often a step runs it. It
first prints the CPU model and the ISA dtrain ran; set DTRAIN_ISA, OPENBLAS_CORETYPE and
ONEDNN_MAX_CPU_ISA to hold both sides to a lower level.

usage: bench/gemm_shapes.py [--dtrain build/dtrain] [--rounds 5] [--threads 2] [--reps 40]
                            [--models mlp,gpt]
"""
import argparse
import json
import os
import statistics

from gemm_rate import run
from side_by_side import cpu_model

# (m, n, k, trans, uses a step) for each model; m is the rows (batch x tokens).
SHAPES = {
    "mlp": [(128, 512, 784, "NT", 1), (128, 512, 512, "NT", 1), (128, 10, 512, "NT", 1),
            (128, 512, 512, "NN", 1), (128, 512, 10, "NN", 1),
            (512, 784, 128, "TN", 1), (512, 512, 128, "TN", 1), (10, 512, 128, "TN", 1)],
    # per block: qkv 256->768, attention out 256->256, MLP 256->1024->256; the head 256->256
    "gpt": [(1024, 768, 256, "NT", 4), (1024, 256, 256, "NT", 5), (1024, 1024, 256, "NT", 4),
            (1024, 256, 1024, "NT", 4),
            (1024, 256, 768, "NN", 4), (1024, 256, 256, "NN", 5), (1024, 256, 1024, "NN", 4),
            (1024, 1024, 256, "NN", 4),
            (768, 256, 1024, "TN", 4), (256, 256, 1024, "TN", 5), (1024, 256, 1024, "TN", 4),
            (256, 1024, 1024, "TN", 4)],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtrain", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                     "dtrain"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--models", default="mlp,gpt")
    a = ap.parse_args()
    print(json.dumps(cpu_model()), flush=True)
    summary = []
    for model in a.models.split(","):
        per_shape = []
        for m, n, k, trans, uses in SHAPES[model]:
            base = [a.dtrain, "bench", "gemm", "--shape", f"{m}x{n}x{k}", "--trans", trans,
                    "--threads", str(a.threads), "--reps", str(a.reps), "--json"]
            ratios, ms = [], {"dtrain": [], "openblas": []}
            for r in range(a.rounds):
                sides = ["dtrain", "openblas"] if r % 2 == 0 else ["openblas", "dtrain"]
                got = {s: run(base + (["--backend", "openblas"] if s == "openblas" else []))
                       for s in sides}
                for s in sides:
                    ms[s].append(got[s]["ms_median"])
                ratios.append(got["openblas"]["ms_median"] / got["dtrain"]["ms_median"])
            row = {"model": model, "shape": f"{m}x{n}x{k}", "trans": trans, "uses": uses,
                   "dtrain_ms": statistics.median(ms["dtrain"]),
                   "openblas_ms": statistics.median(ms["openblas"]),
                   "dtrain_over_openblas": round(statistics.median(ratios), 4),
                   "isa": got["dtrain"]["isa"], "matmul": got["dtrain"]["matmul"]}
            print(json.dumps(row), flush=True)
            per_shape.append(row)
        t_d = sum(x["dtrain_ms"] * x["uses"] for x in per_shape)
        t_o = sum(x["openblas_ms"] * x["uses"] for x in per_shape)
        summary.append({"model": model, "threads": a.threads, "shapes": len(per_shape),
                        "weighted_dtrain_over_openblas": round(t_o / t_d, 4),
                        "worst_shape": min(per_shape, key=lambda x: x["dtrain_over_openblas"])
                        ["shape"],
                        "worst": min(x["dtrain_over_openblas"] for x in per_shape),
                        "cpu": cpu_model()["cpu"]})
    for s in summary:
        print(json.dumps(s))


if __name__ == "__main__":
    main()
