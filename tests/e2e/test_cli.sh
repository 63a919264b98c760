#!/usr/bin/env bash
# End-to-end tests of `dtrain train`, driving the real binary on tests/e2e/toy.
# usage: test_cli.sh DTRAIN_BINARY SOURCE_DIR
# Prints "N passed, M failed" and exits non-zero on any failure.
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-e2e.XXXXXX)
trap 'rm -rf "$W"' EXIT
. "$SRC/tests/e2e/check.sh"

TOY=$SRC/tests/e2e/toy
CFG=$TOY/const.yaml

# 1. a full run: metrics, checkpoints, latest pointer, TensorBoard files
"$DTRAIN" train "$CFG" "$TOY" --checkpoint-dir "$W/full" --metrics-out "$W/full.jsonl" --quiet \
    > "$W/out1" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "full run failed: $(tail -3 "$W/out1")"
check 'grep -q "\"kind\":\"training\"" "$W/full.jsonl"' "no training metrics"
check '[ "$(grep -c "\"kind\":\"validation\"" "$W/full.jsonl")" -eq 3 ]' "3 validations expected"
check '[ "$(cat "$W/full/latest")" = batch_30 ]' "latest should name batch_30"
check 'ls "$W"/full/tensorboard/events.out.tfevents.* > /dev/null 2>&1' "no TensorBoard event file"

# 2. the safetensors package reads the weights with the right names, shapes and values
"$PY" "$SRC/tests/e2e/st_read.py" "$W/full/batch_30" > "$W/st" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "safetensors client: $(cat "$W/st")"

# 3. stopped by max_length at 15, resumed to 30: the same weights as the full run
"$DTRAIN" train "$CFG" "$TOY" --checkpoint-dir "$W/half" --max-length 15b --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "half run failed"
"$DTRAIN" train "$CFG" "$TOY" --checkpoint-dir "$W/half" --resume latest --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "resume failed: $(tail -3 "$W/o")"
check 'cmp -s "$W/full/batch_30/model.safetensors" "$W/half/batch_30/model.safetensors"' \
    "max_length stop + resume differs from the full run"

# 4. stopped by SIGTERM inside batch 12 (the trial raises it), resumed: the same weights
sed 's/  lr: 0.01/  lr: 0.01\n  sigterm_at: 12/' "$CFG" > "$W/sig.yaml"
sed -i "s|entrypoint: model_def:ToyTrial|entrypoint: model_def:ToyTrial|" "$W/sig.yaml"
"$DTRAIN" train "$W/sig.yaml" "$TOY" --checkpoint-dir "$W/sig" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "SIGTERM run should exit 0 after checkpointing: $(tail -3 "$W/o")"
check '[ "$(cat "$W/sig/latest")" = batch_13 ]' "SIGTERM should checkpoint at batch 13, got $(cat "$W/sig/latest" 2>/dev/null)"
"$DTRAIN" train "$CFG" "$TOY" --checkpoint-dir "$W/sig" --resume latest --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "resume after SIGTERM failed: $(tail -3 "$W/o")"
check 'cmp -s "$W/full/batch_30/model.safetensors" "$W/sig/batch_30/model.safetensors"' \
    "SIGTERM stop + resume differs from the full run"

# 5. test mode: one batch of training and validation
"$DTRAIN" train "$CFG" "$TOY" --checkpoint-dir "$W/test" --test-mode --metrics-out "$W/t.jsonl" \
    --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "\"batches\":1," "$W/t.jsonl"' "test mode"

# 5b. two data-parallel slots through mpirun: trains to the end with one set of checkpoints
"$DTRAIN" train "$CFG" "$TOY" --checkpoint-dir "$W/slots" --slots 2 --metrics-out "$W/s.jsonl" \
    --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ "$(cat "$W/slots/latest")" = batch_30 ]' "--slots 2: $(tail -5 "$W/o")"
check '[ "$(grep -c "\"kind\":\"validation\"" "$W/s.jsonl")" -eq 3 ]' "--slots 2: one metrics stream (chief only)"

# 6. bad input: each a clear error and a non-zero exit
printf 'name: x\nentrypoint: model_def:ToyTrial\nhyperparameters: {global_batch_size: 16\n' > "$W/bad.yaml"
"$DTRAIN" train "$W/bad.yaml" "$TOY" --checkpoint-dir "$W/x" > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "bad.yaml:[0-9]*:[0-9]*" "$W/o"' "malformed YAML: $(cat "$W/o")"

sed 's/  lr: 0.01/  lr: {type: double, minval: 0.001, maxval: 0.1}/' "$CFG" > "$W/search.yaml"
"$DTRAIN" train "$W/search.yaml" "$TOY" --checkpoint-dir "$W/x" > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -qi "lr" "$W/o" && grep -qi "search" "$W/o"' "non-const hparam: $(cat "$W/o")"

sed 's/ToyTrial/NoSuchTrial/' "$CFG" > "$W/nosym.yaml"
"$DTRAIN" train "$W/nosym.yaml" "$TOY" --checkpoint-dir "$W/x" > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "NoSuchTrial" "$W/o"' "missing symbol: $(cat "$W/o")"

"$DTRAIN" train "$CFG" "$SRC/tests/e2e/broken" --checkpoint-dir "$W/x" > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "model_def.c:5" "$W/o"' "compile error location: $(cat "$W/o")"

touch "$W/afile"
"$DTRAIN" train "$CFG" "$TOY" --checkpoint-dir "$W/afile/sub" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "afile" "$W/o"' "unwritable checkpoint dir: $(cat "$W/o")"

# 7. a corrupted checkpoint is refused on resume, and nothing on disk changes
cp -r "$W/full" "$W/corrupt"
printf 'X' | dd of="$W/corrupt/batch_30/model.safetensors" bs=1 seek=200 conv=notrunc 2> /dev/null
before=$(cd "$W/corrupt" && find . -type f | sort | xargs md5sum)
"$DTRAIN" train "$CFG" "$TOY" --checkpoint-dir "$W/corrupt" --resume latest --max-length 40b \
    > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "model.safetensors" "$W/o"' "corrupted checkpoint: $(cat "$W/o")"
after=$(cd "$W/corrupt" && find . -type f | sort | xargs md5sum)
check '[ "$before" = "$after" ]' "files changed after a refused resume"

"$DTRAIN" train "$CFG" "$TOY" --checkpoint-dir "$W/none" --resume latest > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "no checkpoint" "$W/o"' "resume without a checkpoint: $(cat "$W/o")"

# 8. an engine-based trial (examples/fashion_mnist_ds: the CNN on Fashion-MNIST through the
# DeepSpeed-style engine, deepspeed_config relative to the model directory): briefly at one
# slot, then at two slots (one checkpoint holding both slots' optimizer shards), resumed there
DS=$SRC/examples/fashion_mnist_ds
"$DTRAIN" train "$DS/const.yaml" "$DS" --max-length 3b --checkpoint-dir "$W/ds1" \
    --metrics-out "$W/ds1.jsonl" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ "$(cat "$W/ds1/latest")" = batch_3 ]' "engine trial: $(tail -3 "$W/o")"
check 'grep -q "\"batches\":3,.*\"records\":192," "$W/ds1.jsonl"' \
    "engine trial: 3 global batches of 64 records: $(cat "$W/ds1.jsonl")"
check '[ -f "$W/ds1/batch_3/model0/optim_shard_0_of_1.safetensors" ] &&
    grep -q "model0/engine_state.json" "$W/ds1/batch_3/metadata.json"' \
    "engine trial: the engine checkpoint inside the trial checkpoint"
"$DTRAIN" train "$DS/const.yaml" "$DS" --max-length 2b --checkpoint-dir "$W/ds2" --slots 2 \
    --metrics-out "$W/ds2.jsonl" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ "$(cat "$W/ds2/latest")" = batch_2 ]' "engine trial --slots 2: $(tail -5 "$W/o")"
check '[ -f "$W/ds2/batch_2/model0/optim_shard_0_of_2.safetensors" ] &&
    [ -f "$W/ds2/batch_2/model0/optim_shard_1_of_2.safetensors" ]' \
    "engine trial --slots 2: both slots' shards in the checkpoint"
check 'grep -q "\"batches\":2,.*\"records\":256," "$W/ds2.jsonl"' \
    "engine trial --slots 2: 2 global batches of 128 records: $(cat "$W/ds2.jsonl")"
"$DTRAIN" train "$DS/const.yaml" "$DS" --max-length 3b --checkpoint-dir "$W/ds2" --slots 2 \
    --resume latest --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ "$(cat "$W/ds2/latest")" = batch_3 ]' "engine trial --slots 2 resume: $(tail -5 "$W/o")"

# 9. a model directory with its own Makefile: built with it (DTRAIN_INCLUDE / DTRAIN_LIBDIR
# given), the same weights as the plain build; make's failures come out with the compiler's
# file:line, and a Makefile without the entrypoint's target is a clear error
mkdir -p "$W/mk"
cp "$TOY/model_def.c" "$W/mk/toy_impl.c"
printf 'model_def.so: toy_impl.c\n\t$(CC) -shared -fPIC -O2 -I$(DTRAIN_INCLUDE) -o $@ toy_impl.c -L$(DTRAIN_LIBDIR) -ldtrain\n' \
    > "$W/mk/Makefile"
"$DTRAIN" train "$CFG" "$W/mk" --checkpoint-dir "$W/mkck" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ -f "$W/mk/model_def.so" ]' "Makefile build: $(tail -5 "$W/o")"
check 'cmp -s "$W/full/batch_30/model.safetensors" "$W/mkck/batch_30/model.safetensors"' \
    "Makefile build trains the same weights as the plain build"
cp -r "$W/mk" "$W/mkbad"
rm -f "$W/mkbad/model_def.so"
printf 'int broken(void) { return undeclared_name; }\n' >> "$W/mkbad/toy_impl.c"
"$DTRAIN" train "$CFG" "$W/mkbad" --checkpoint-dir "$W/mkbadck" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "toy_impl.c:[0-9]*:[0-9]*: error" "$W/o" &&
    grep -q "Makefile failed" "$W/o"' "Makefile compile error: $(cat "$W/o")"
mkdir -p "$W/mknone"
cp "$TOY/model_def.c" "$W/mknone/"
printf 'other.so:\n\ttouch other.so\nmodel_def.so:\n\t@true\n' > "$W/mknone/Makefile"
"$DTRAIN" train "$CFG" "$W/mknone" --checkpoint-dir "$W/mknoneck" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "did not produce" "$W/o"' "Makefile without the target: $(cat "$W/o")"

# 10. a pipeline-parallel engine trial (examples/char_gpt_pipe: a character-level GPT cut into 2
# stages): a few global batches at --slots 2, each of micro x gas = 32 sequences, validated; the
# pipeline checkpoint (every stage's engine) is inside the trial checkpoint
PP=$SRC/examples/char_gpt_pipe
"$DTRAIN" train "$PP/const.yaml" "$PP" --max-length 3b --slots 2 --checkpoint-dir "$W/pp" \
    --metrics-out "$W/pp.jsonl" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ "$(cat "$W/pp/latest")" = batch_3 ]' "pipeline trial --slots 2: $(tail -5 "$W/o")"
check 'grep -q "\"kind\":\"training\",\"batches\":3,.*\"records\":96,.*\"loss\"" "$W/pp.jsonl" &&
    grep -q "\"kind\":\"validation\".*\"validation_loss\"" "$W/pp.jsonl"' \
    "pipeline trial: 3 global batches of 32 sequences, validated: $(cat "$W/pp.jsonl" 2>/dev/null)"
check '[ -f "$W/pp/batch_3/model0/model.safetensors" ] &&
    grep -q "model0/stage_0/engine/engine_state.json" "$W/pp/batch_3/metadata.json" &&
    grep -q "model0/stage_1/engine/engine_state.json" "$W/pp/batch_3/metadata.json"' \
    "pipeline trial: both stages' engines in the trial checkpoint"

# 11. the benchmark commands: one JSON object each; `bench gemm` measures dt_matmul or
# OpenBLAS's cblas_sgemm (the reference rate of the GPT benchmark's target); `bench train
# --profile` adds the step's phases and per-op times; the profiling section of a config gives
# per-batch profiler lines with the data-loading time
for be in dtrain openblas; do
  "$DTRAIN" bench gemm --size 96 --reps 3 --threads 1 --backend $be --json > "$W/g" 2> "$W/o"
  rc=$?
  check '[ $rc -eq 0 ] && "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"backend\"] == sys.argv[2] and d[\"gflops\"] > 0 and d[\"size\"] == 96" "$W/g" $be' \
      "bench gemm --backend $be: $(cat "$W/g" "$W/o")"
done
# a model's product, B stored transposed as in a linear layer's forward
for be in dtrain openblas; do
  "$DTRAIN" bench gemm --shape 40x24x56 --trans NT --reps 3 --threads 1 --backend $be --json > "$W/g" 2> "$W/o"
  rc=$?
  check '[ $rc -eq 0 ] && "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); assert (d[\"m\"], d[\"n\"], d[\"k\"], d[\"trans\"], d[\"size\"]) == (40, 24, 56, \"NT\", 0) and d[\"gflops\"] > 0" "$W/g"' \
      "bench gemm --shape --trans --backend $be: $(cat "$W/g" "$W/o")"
done
for bad in "--shape 40x24" "--shape 0x1x1" "--trans NX" "--size 8 --shape 8x8x9"; do
  "$DTRAIN" bench gemm $bad > "$W/o" 2>&1
  rc=$?
  check '[ $rc -eq 2 ] && grep -Eq "takes MxNxK|takes NN, NT|use one" "$W/o"' "bench gemm $bad: $(cat "$W/o")"
done
"$DTRAIN" bench gemm --backend cublas > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "backend takes dtrain" "$W/o"' "bench gemm --backend cublas: $(cat "$W/o")"
"$DTRAIN" bench train --model mlp --hidden 32 --steps 3 --warmup 1 --threads 1 --json > "$W/b" 2> "$W/o"
rc=$?
check '[ $rc -eq 0 ] && "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"step_ms_mean\"] > 0 and d[\"samples_per_s\"] > 0" "$W/b"' \
    "bench train mlp: $(cat "$W/b" "$W/o")"
"$DTRAIN" bench train --model mlp --hidden 32 --steps 3 --warmup 1 --threads 1 --profile --json > "$W/b" 2> "$W/o"
rc=$?
check '[ $rc -eq 0 ] && "$PY" -c "import json,sys; p=json.load(open(sys.argv[1]))[\"profile\"]; ops={o[\"op\"]: o for o in p[\"ops\"]}; assert p[\"forward_ms\"] > 0 and p[\"optimizer_ms\"] > 0 and ops[\"linear_relu\"][\"fwd_calls\"] == 2 and ops[\"linear\"][\"bwd_calls\"] == 1 and ops[\"cross_entropy\"][\"fwd_ms\"] > 0" "$W/b"' \
    "bench train --profile: phases and per-op rows: $(cat "$W/b" "$W/o")"
"$DTRAIN" bench train --model mlp --steps 1 --profile --zero-stage 1 > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "plain steps only" "$W/o"' "bench train --profile in engine mode: $(cat "$W/o")"
{ cat "$CFG"; printf 'profiling:\n  enabled: true\n  begin_on_batch: 2\n  end_after_batch: 4\n'; } > "$W/prof.yaml"
"$DTRAIN" train "$W/prof.yaml" "$TOY" --max-length 6b --checkpoint-dir "$W/profck" \
    --metrics-out "$W/prof.jsonl" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ "$(grep -c "\"kind\":\"profiler\"" "$W/prof.jsonl")" -eq 3 ] &&
    grep -q "\"kind\":\"profiler\",\"batches\":3,.*\"data_ms\"" "$W/prof.jsonl"' \
    "profiling section: 3 profiler lines (batches 2..4, 0-based) with data_ms: $(cat "$W/o" "$W/prof.jsonl" 2>/dev/null)"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
