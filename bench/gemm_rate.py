#!/usr/bin/env python3
"""The GPT benchmark's compute rate against this machine's sgemm rate, measured alternately.

Each round runs `dtrain bench gemm --backend openblas` (OpenBLAS's cblas_sgemm, the reference
rate), `dtrain bench gemm` (dt_matmul, the GEMM every dtrain op goes through),
`dtrain bench train --model gpt` (fp32) and OpenBLAS again, all at the same thread count. The
machine's speed drifts by several percent within seconds, so each round's GPT rate is set
against the mean of the OpenBLAS rates measured just before and just after it, each the median
of --gemm-reps products (about a second each), and the summary gives the medians of the
per-round ratios, their spread, and the ratio of the rates' medians.

usage: bench/gemm_rate.py [--dtrain build/dtrain] [--rounds 5] [--size 1024] [--threads 2]
                          [--gemm-reps 150]
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
    ap.add_argument("--gemm-reps", type=int, default=150)
    a = ap.parse_args()
    t = ["--threads", str(a.threads)]
    rows = []
    gemm = ["--size", str(a.size), "--reps", str(a.gemm_reps), "--json"] + t
    for r in range(a.rounds):
        ob0 = run([a.dtrain, "bench", "gemm", "--backend", "openblas"] + gemm)
        dg = run([a.dtrain, "bench", "gemm"] + gemm)
        gpt = run([a.dtrain, "bench", "train", "--model", "gpt", "--steps", str(a.steps),
                   "--json"] + t)
        ob1 = run([a.dtrain, "bench", "gemm", "--backend", "openblas"] + gemm)
        ob = {"gflops": round((ob0["gflops"] + ob1["gflops"]) / 2, 2)}
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
                      "gpt_over_openblas_min": min(ratios), "gpt_over_openblas_max": max(ratios),
                      "gpt_median_over_openblas_median":
                          round(med("gpt_gflops") / med("openblas_gflops"), 4)}))


if __name__ == "__main__":
    main()
