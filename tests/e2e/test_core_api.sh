#!/usr/bin/env bash
# The Core API example (examples/core_api), built by its Makefile against this build and run
# without a master (the local fallback): a full run, a run stopped early and resumed to the
# same length (the same validation loss to the last digit), and SIGTERM honoured as
# preemption (a checkpoint, exit 0, resumable).
# usage: test_core_api.sh BUILD_DIR SOURCE_DIR
set -u
BUILD=$1
SRC=$2
W=$(mktemp -d /tmp/dtrain-core-api.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$W"' EXIT
. "$SRC/tests/e2e/check.sh"

cp "$SRC/examples/core_api/train.c" "$SRC/examples/core_api/Makefile" "$W/"
make -s -C "$W" DTRAIN_INCLUDE="$SRC/include" DTRAIN_LIBDIR="$BUILD" LDFLAGS="${EXAMPLE_LDFLAGS:-}" > "$W/build.log" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "the example does not build: $(tail -5 "$W/build.log")"
cd "$W" || exit 1
env -u DTRAIN_TRIAL_ID ./train --max-batches 100 --checkpoint-dir "$W/full" > "$W/o1" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "full run failed: $(tail -3 "$W/o1")"
full=$(grep "final validation_loss" "$W/o1" | tail -1 | cut -d' ' -f3)
check '[ -n "$full" ] && [ -s "$W/full/latest" ]' "no validation or no latest checkpoint"
check 'ls "$W"/full/tensorboard/events.out.tfevents.* > /dev/null 2>&1' "no TensorBoard file"
uuid=$(cat "$W/full/latest")
check '[ -f "$W/full/$uuid/metadata.json" ] && [ -f "$W/full/$uuid/model.safetensors" ] && [ -f "$W/full/$uuid/optimizer.safetensors" ]' \
    "the latest checkpoint lacks metadata.json, model.safetensors or optimizer.safetensors"

# stopped at 60, resumed to 100: the same validation loss as the full run
./train --max-batches 60 --checkpoint-dir "$W/half" > "$W/o2" 2>&1
./train --max-batches 100 --checkpoint-dir "$W/half" --resume > "$W/o3" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "resume failed: $(tail -3 "$W/o3")"
check 'grep -q "resumed at batch 60" "$W/o3"' "did not resume at batch 60: $(head -3 "$W/o3")"
half=$(grep "final validation_loss" "$W/o3" | tail -1 | cut -d' ' -f3)
check '[ "$full" = "$half" ]' "resumed run gives $half, the full run $full"

# SIGTERM: checkpoint and exit 0, then resume from there
./train --max-batches 1000000 --checkpoint-dir "$W/pre" > "$W/o4" 2>&1 &
pid=$!
for _ in $(seq 1 100); do grep -q "batch 50 " "$W/o4" 2>/dev/null && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
check '[ $rc -eq 0 ]' "preempted run exit $rc: $(tail -3 "$W/o4")"
check 'grep -q "stopped at batch" "$W/o4"' "no stop note: $(tail -3 "$W/o4")"
check '[ -s "$W/pre/latest" ]' "no checkpoint after SIGTERM"
./train --max-batches 1 --checkpoint-dir "$W/pre" --resume > "$W/o5" 2>&1
check 'grep -q "resumed at batch" "$W/o5"' "cannot resume the preempted run: $(tail -3 "$W/o5")"
summary
