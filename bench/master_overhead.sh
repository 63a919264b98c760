#!/usr/bin/env bash
# master_overhead.sh [DTRAIN] — what the master costs around short trials, on this machine:
#   slot utilisation   a 32-trial random search of short toy trials (tests/e2e/toy, 1000
#                      batches) on 2 slots: the sum of the runs' wall times (launch to exit,
#                      as the master logs them) over the experiment's wall time x slots
#                      (target >= 0.95);
#   start latency      launch to the first trained batch of each run, as the master logs it
#                      (target <= 300 ms; the model directory is compiled once before);
# Prints one JSON line. Needs python3 (tests/e2e/api.py). Starts its own master on a free
# loopback port with a temporary DTRAIN_HOME and stops it.
set -eu
DTRAIN=${1:-./build/dtrain}
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-bench.XXXXXX)
. "$SRC/tests/e2e/master_env.sh"
trap 'kill "$MPID" 2> /dev/null; wait "$MPID" 2> /dev/null; rm -rf "$W"' EXIT
start_master 2
cat > "$W/rand.yaml" << 'YAML'
name: overhead
entrypoint: model_def:ToyTrial
hyperparameters:
  global_batch_size: 16
  lr: {type: log, base: 10, minval: -3, maxval: -1}
searcher:
  name: random
  metric: validation_loss
  max_trials: 32
  max_concurrent_trials: 2
  max_length: {batches: 1000}
scheduling_unit: 10
YAML
# t0: when create answered (the model directory is built by then; no trial starts before)
read -r E t0 < <($API create-timed "$W/rand.yaml" "$SRC/tests/e2e/toy")
$API until "/api/v1/experiments/$E" 'r["experiment"]["state"] in ("COMPLETED", "ERROR", "CANCELED")' 600
# the experiment's end as the master recorded it (polling would add its own interval)
t1=$($API get "/api/v1/experiments/$E" 'r["experiment"]["end_time"]')
t1=$($PY -c 'import sys, datetime; print(datetime.datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00")).timestamp())' "$t1")
$API get "/api/v1/experiments/$E/logs?limit=100000" > "$W/logs.json"
$PY - "$W/logs.json" "$t0" "$t1" "$E" << 'PY'
import json, re, sys, platform
logs = json.load(open(sys.argv[1]))["logs"]
wall = float(sys.argv[3]) - float(sys.argv[2])
runs = [float(m.group(1)) for l in logs if (m := re.search(r"ended with exit code 0 after ([0-9.]+) s", l["line"]))]
first = sorted(float(m.group(1)) for l in logs if (m := re.search(r"first batch ([0-9.]+) ms after launch", l["line"])))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
print(json.dumps({"bench": "master_overhead", "cpu": cpu, "trials": len(runs), "slots": 2,
                  "experiment_s": round(wall, 3), "run_s_sum": round(sum(runs), 3),
                  "slot_utilisation": round(sum(runs) / (2 * wall), 4),
                  "start_latency_ms_median": first[len(first) // 2] if first else None,
                  "start_latency_ms_max": first[-1] if first else None}))
PY
