#!/usr/bin/env bash
# dsat_quality.sh [DTRAIN] — how well `dtrain dsat` searches, on this machine (docs/dsat.md):
# the benchmark gpt (3.3 M parameters; tests/e2e/dsat_toy with model: gpt) on 2 slots (one trial of 2 ranks at
# a time) with a device budget (DT_DEVICE_MEMORY, 200 MiB per slot by default) that makes
# micro-batches above about 9 run out of memory. An exhaustive grid over ZeRO stage 1, 2, 3 x
# micro-batch 1..12, run as dsat trials (the same trial code and metric, FLOPS_per_gpu), against
# `dtrain dsat asha` and `dtrain dsat binary` (same seed, --max-trials 10, the profiles
# included). Prints one JSON line per method: the best metric found over the grid's best
# (target >= 0.95), the trials used over the grid's (target <= 0.30), the configurations
# launched that the memory model predicted to exceed the budget (target 0), OOM trials, and
# the CPU model. 3 to 7 minutes on 2 cores. Starts its own master on a free loopback port with
# a temporary DTRAIN_HOME and stops it.
#   env: BUDGET (200M), MAX_MBS (12), MAX_TRIALS (10), SEED (42)
set -eu
DTRAIN=${1:-./build/dtrain}
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-bench.XXXXXX)
MODEL=$SRC/tests/e2e/dsat_toy
BUDGET=${BUDGET:-200M} MAX_MBS=${MAX_MBS:-12} MAX_TRIALS=${MAX_TRIALS:-10} SEED=${SEED:-42}
. "$SRC/tests/e2e/master_env.sh"
export DT_DEVICE_MEMORY=$BUDGET OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
trap 'kill "$MPID" 2> /dev/null; wait "$MPID" 2> /dev/null; rm -rf "$W"' EXIT
start_master 2
cat > "$W/gpt.yaml" << 'YAML'
name: dsat_quality_gpt
entrypoint: model_def:DsatToyTrial
hyperparameters:
  model: gpt
  deepspeed_config: ds_config.json
searcher:
  name: single
  metric: validation_loss
  max_length: {batches: 20}
resources: {slots_per_trial: 2}
reproducibility: {experiment_seed: 3}
YAML

# the grid: each point is a dsat trial of the knob set {stage, micro-batch} (the user's other
# settings), train_batch_size = mbs x 2 slots, as dt_dsat_ds_config writes it
$PY - "$MAX_MBS" > "$W/grid.yaml" << 'PY'
import json, sys
pts = [{"zero_optimization": {"stage": s}, "train_micro_batch_size_per_gpu": m,
        "train_batch_size": 2 * m} for s in (1, 2, 3) for m in range(1, int(sys.argv[1]) + 1)]
print("""name: dsat_quality_grid
entrypoint: model_def:DsatToyTrial
hyperparameters:
  model: gpt
  deepspeed_config: ds_config.json
  dsat: {type: const, val: {mode: trial, start_profile_step: 3, end_profile_step: 5}}
  overwrite_deepspeed_args: {type: categorical, vals: %s}
searcher:
  name: grid
  metric: FLOPS_per_gpu
  smaller_is_better: false
  max_concurrent_trials: 1
  max_length: {batches: 5}
max_restarts: 0
resources: {slots_per_trial: 2}
reproducibility: {experiment_seed: 3}""" % json.dumps(pts))
PY
G=$($API create "$W/grid.yaml" "$MODEL")
$API wait "$G" 3600 > /dev/null
$API get "/api/v1/experiments/$G/trials" '[t["id"] for t in r["trials"]]' > "$W/grid_ids.json"
for t in $($PY -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1])))))' "$W/grid_ids.json"); do
  $API get "/api/v1/trials/$t" 'r["trial"]["hparams"]["overwrite_deepspeed_args"]' > "$W/grid_$t.hp"
  $API get "/api/v1/trials/$t/metrics?kind=validation" '[m["metrics"] for m in r["metrics"]]' > "$W/grid_$t.m"
done

# dsat asha and binary, the same seed
for method in asha binary; do
  "$DTRAIN" dsat $method "$W/gpt.yaml" "$MODEL" --max-trials "$MAX_TRIALS" \
    --max-concurrent-trials 1 --random-seed "$SEED" > "$W/$method.out" 2>&1 || true
  E=$(sed -n 's/^created experiment \([0-9]*\)$/\1/p' "$W/$method.out" | head -1)
  D=$($API get "/api/v1/experiments/$E" 'r["experiment"]["checkpoint_dir"]')
  cp "$D/dsat_summary.json" "$W/$method.json"
  grep -o 'device memory [0-9]*' "$D/dsat.log" | head -1 | awk '{print $3}' > "$W/$method.budget"
done

$PY - "$W" "$MAX_MBS" "$BUDGET" << 'PY'
import glob, json, math, os, re, sys
w, max_mbs, budget_s = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
grid, n_grid, oom_grid = {}, 0, 0
for hp in glob.glob(f"{w}/grid_*.hp"):
    o = json.load(open(hp))
    ms = json.load(open(hp[:-3] + ".m"))
    n_grid += 1
    m = ms[-1] if ms else {}
    if m.get("oom"):
        oom_grid += 1
    v = m.get("FLOPS_per_gpu")
    if v is not None and math.isfinite(v) and not m.get("oom"):
        grid[(o["zero_optimization"]["stage"], o["train_micro_batch_size_per_gpu"])] = v
best_key = max(grid, key=grid.get)
gbest = grid[best_key]
print(json.dumps({"method": "grid", "metric": "FLOPS_per_gpu", "best": gbest,
                  "best_config": {"stage": best_key[0], "mbs": best_key[1]}, "trials": n_grid,
                  "oom_trials": oom_grid, "budget": budget_s, "cpu": cpu,
                  "by_stage_mbs": {f"{s}": [round(grid[(s, m)] / 1e9, 2) if (s, m) in grid else None
                                           for m in range(1, max_mbs + 1)] for s in (1, 2, 3)}}))
for method in ("asha", "binary"):
    s = json.load(open(f"{w}/{method}.json"))
    budget = int(open(f"{w}/{method}.budget").read().strip() or 0)
    tr = s["trials"]
    ok = [t for t in tr if t["kind"] == "trial" and t["result"] == "ok" and t["metric"] is not None]
    best = max((t["metric"] for t in ok), default=0.0)
    bt = max(ok, key=lambda t: t["metric"]) if ok else None
    launched_over = sum(t["kind"] == "trial" and t["predicted_bytes"] > budget for t in tr)
    print(json.dumps({
        "method": method, "metric": "FLOPS_per_gpu", "best": best,
        "best_config": bt and {"stage": bt["knobs"]["zero_stage"], "mbs": bt["knobs"]["mbs"]},
        "best_over_grid_best": round(best / gbest, 4), "target_best": 0.95,
        "trials": len(tr), "trials_over_grid_trials": round(len(tr) / n_grid, 4),
        "target_trials": 0.30, "predicted_oom_launched": launched_over,
        "oom_trials": sum(t["result"] == "oom" for t in tr), "done": s["done"],
        "reason": s.get("reason"), "cpu": cpu}))
PY
