#!/usr/bin/env bash
# The fit loop's cost over `dtrain bench train` for the same model and batch. Each round runs
# the benchmark, then trains the Fashion-MNIST MLP / CNN example with `dtrain train` (real data
# loading, metrics, no validation inside the measured windows), and reports:
#   fit_overhead_pct   the fit's wall time per batch (mean over its training windows) over
#                      the benchmark's mean step time, minus 1: the whole difference, across
#                      two processes. Both sides are means, outlier steps included (a median
#                      on one side only would flatter that side);
#   loop_overhead_pct  inside the fit process: wall time per batch of its windows over the
#                      time inside train_batch (the training lines' train_batch_ms), minus 1:
#                      data loading, metrics and the loop's bookkeeping;
#   data_ms            mean time to get a batch from the loader (the lines' data_ms);
#   train_vs_bench_pct train_batch time over the benchmark's mean step, minus 1.
# The two processes of a round run seconds apart, and this machine's speed drifts by several
# percent over that time, so the cross-process figures are noisy round by round: the summary
# line gives the medians over the rounds. loop_overhead_pct is measured within one process.
# usage: bench/fit_overhead.sh [DTRAIN] [ROUNDS_MLP] [ROUNDS_CNN]
set -eu
D=${1:-build/dtrain}
ROUNDS_MLP=${2:-15}
ROUNDS_CNN=${3:-5}
SRC=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
for model in mlp cnn; do
  ex=$([ $model = mlp ] && echo fashion_mnist || echo fashion_mnist_cnn)
  rounds=$([ $model = mlp ] && echo "$ROUNDS_MLP" || echo "$ROUNDS_CNN")
  sed 's/global_batch_size: 64/global_batch_size: 128/; s/epochs: 1$/batches: 100000/' \
      "$SRC/examples/$ex/const.yaml" > "$W/$model.yaml"
  : > "$W/$model.rounds"
  for r in $(seq "$rounds"); do
    "$D" bench train --model $model --batch 128 --steps 400 --json > "$W/bench.json"
    rm -rf "$W/ck"
    "$D" train "$W/$model.yaml" "$SRC/examples/$ex" --max-length 400b --checkpoint-dir "$W/ck" \
        --metrics-out "$W/m.jsonl" --quiet > /dev/null
    python3 - "$W/bench.json" "$W/m.jsonl" "$model" "$r" <<'PY' | tee -a "$W/$model.rounds"
import json, statistics, sys
bench = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
windows = [l for l in lines if l["kind"] == "training" and l["batches"] > 100]
fit_rate = statistics.median(w["records_per_s"] for w in windows)
batch = bench["batch"]
wall_ms = statistics.mean(batch / w["records_per_s"] * 1e3 for w in windows)
train_ms = statistics.mean(w["train_batch_ms"] for w in windows)
print(json.dumps({
    "model": sys.argv[3], "round": int(sys.argv[4]),
    "bench_samples_per_s": bench["samples_per_s"], "fit_records_per_s": fit_rate,
    "fit_overhead_pct": round(100 * (wall_ms / bench["step_ms_mean"] - 1), 2),
    "loop_overhead_pct": round(100 * (wall_ms / train_ms - 1), 2),
    "data_ms": round(statistics.mean(w["data_ms"] for w in windows), 4),
    "train_vs_bench_pct": round(100 * (train_ms / bench["step_ms_mean"] - 1), 2)}))
PY
  done
  python3 - "$W/$model.rounds" "$model" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda k: round(statistics.median(r[k] for r in rows), 4)
print(json.dumps({"model": sys.argv[2], "rounds": len(rows),
                  **{k + "_median": med(k) for k in ("fit_overhead_pct", "loop_overhead_pct",
                                                     "data_ms", "train_vs_bench_pct",
                                                     "bench_samples_per_s", "fit_records_per_s")}}))
PY
done
