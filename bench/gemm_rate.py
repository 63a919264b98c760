#!/usr/bin/env python3
"""The GPT benchmark's compute rate against this machine's sgemm rate, measured alternately.

Each round runs `dtrain bench gemm --backend openblas` (OpenBLAS's cblas_sgemm, the reference
rate), `dtrain bench gemm` (dt_matmul, the GEMM every dtrain op goes through) and
`dtrain bench train --model gpt` (fp32), all at the same thread count. The machine's speed
drifts by several percent within minutes, so the ratios are taken within each round and the
summary gives their medians.

usage: bench/gemm_rate.py [--dtrain build/dtrain] [--rounds 5] [--size 1024] [--threads 2]
"""
import argparse
import json
import statistics
import subprocess


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtrain", default="build/dtrain")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    t = ["--threads", str(a.threads)]
    rows = []
    for r in range(a.rounds):
        ob = run([a.dtrain, "bench", "gemm", "--backend", "openblas", "--size", str(a.size),
                  "--reps", "20", "--json"] + t)
        dg = run([a.dtrain, "bench", "gemm", "--size", str(a.size), "--reps", "20", "--json"] + t)
        gpt = run([a.dtrain, "bench", "train", "--model", "gpt", "--steps", str(a.steps),
                   "--json"] + t)
        row = {"round": r + 1, "openblas_gflops": ob["gflops"], "dtrain_gemm_gflops": dg["gflops"],
               "gpt_gflops": gpt["gflops"],
               "gpt_over_openblas": round(gpt["gflops"] / ob["gflops"], 4),
               "dtrain_gemm_over_openblas": round(dg["gflops"] / ob["gflops"], 4)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    med = lambda k: round(statistics.median(x[k] for x in rows), 4)
    ratios = [x["gpt_over_openblas"] for x in rows]
    print(json.dumps({"rounds": len(rows), "threads": a.threads, "size": a.size,
                      **{k + "_median": med(k) for k in ("openblas_gflops", "dtrain_gemm_gflops",
                                                         "gpt_gflops", "gpt_over_openblas",
                                                         "dtrain_gemm_over_openblas")},
                      "gpt_over_openblas_min": min(ratios), "gpt_over_openblas_max": max(ratios)}))


if __name__ == "__main__":
    main()
