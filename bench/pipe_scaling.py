#!/usr/bin/env python3
"""Pipeline benchmark on the gpt model, alternating in one run: 2 stages x 1 thread with M
micro-batches (1F1B) against one rank with one thread on the same global batch (the engine with
gradient_accumulation_steps = M). Target: >= 1.5x the throughput. Reports each stage's measured
waiting fraction next to the 1F1B ideal bubble (S-1)/(M+S-1).

usage: bench/pipe_scaling.py [--dtrain build/dtrain] [--rounds 3] [--steps 6] [--micro 8]"""
import argparse
import json
import statistics
import subprocess

p = argparse.ArgumentParser()
p.add_argument("--dtrain", default="build/dtrain")
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--micro", type=int, default=8)
a = p.parse_args()

def run(args):
    out = subprocess.run([a.dtrain, "bench", "train", "--model", "gpt", "--steps", str(a.steps),
                          "--warmup", "1", "--json"] + args, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])

single, pipe, waits = [], [], []
for r in range(a.rounds):
    d1 = run(["--threads", "1", "--zero-stage", "0", "--gas", str(a.micro)])
    d2 = run(["--slots", "2", "--pipeline-stages", "2", "--micro-batches", str(a.micro)])
    single.append(d1["tokens_per_s"])
    pipe.append(d2["tokens_per_s"])
    waits.append(d2["wait_fraction_per_rank"])
    print(json.dumps({"round": r, "one_rank_tokens_per_s": d1["tokens_per_s"],
                      "pipeline": d2}), flush=True)
s, q = statistics.median(single), statistics.median(pipe)
print(json.dumps({"micro_batches": a.micro, "one_rank_1_thread_tokens_per_s": s,
                  "pipeline_2_stages_tokens_per_s": q, "speedup": round(q / s, 3),
                  "ideal_bubble": round(1 / (a.micro + 1), 4),
                  "wait_fraction_per_stage_median": [round(statistics.median(w[i] for w in waits), 4)
                                                     for i in range(len(waits[0]))]}))
