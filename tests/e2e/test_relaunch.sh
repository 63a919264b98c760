#!/usr/bin/env bash
# End-to-end: a relaunch never races the run it replaces (tests/e2e/toy, the real binary).
# 1. `dtrain train --slots 2` checkpointing every 2 batches; kill -9 its mpirun while it trains;
#    at once `--resume latest` (again on 2 slots) succeeds. Several times, at varied moments.
# 2. After such a kill the ranks are gone and the checkpoint directory does not change.
# 3. A second `dtrain train` on the checkpoint directory of a running one stops with an error
#    naming the first run's pid and host; the first run finishes unharmed.
# usage: test_relaunch.sh DTRAIN_BINARY SOURCE_DIR
# Prints "N passed, M failed" and exits non-zero on any failure.
set -u
DTRAIN=$1
SRC=$2
W=$(mktemp -d /tmp/dtrain-relaunch.XXXXXX)
BG=()
cleanup() {
    for p in "${BG[@]}"; do kill -9 "$p" 2> /dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT
. "$SRC/tests/e2e/check.sh"

TOY=$SRC/tests/e2e/toy
CFG=$W/long.yaml
sed 's/    batches: 30/    batches: 400/' "$TOY/const.yaml" > "$CFG"
printf 'min_checkpoint_period:\n  batches: 2\n' >> "$CFG"

# The batch number in DIR/latest (0 when there is none yet).
latest_batch() {
    local n
    n=$(sed -n 's/^batch_\([0-9]*\)$/\1/p' "$1/latest" 2> /dev/null)
    echo "${n:-0}"
}

# Wait (up to 120 s) until DIR/latest names batch MIN or later; false if it never does or the
# run PID ended first.
wait_batch() {
    local dir=$1 min=$2 pid=$3
    for _ in $(seq 1 2400); do
        [ "$(latest_batch "$dir")" -ge "$min" ] && return 0
        kill -0 "$pid" 2> /dev/null || return 1
        sleep 0.05
    done
    return 1
}

# Start a 2-slot run on DIR in the background; its pid (mpirun's, after exec) in $RUN.
start_slots() {
    "$DTRAIN" train "$CFG" "$TOY" --checkpoint-dir "$1" --slots 2 --quiet > "$1.out" 2>&1 &
    RUN=$!
    BG+=("$RUN")
}

# 1. kill -9 of mpirun, then an immediate resume; at varied moments
for i in 1 2 3 4; do
    D=$W/race$i
    start_slots "$D"
    if ! wait_batch "$D" $((4 + 4 * i)) "$RUN"; then
        check 'false' "run $i never checkpointed: $(tail -3 "$D.out")"
        continue
    fi
    sleep "0.$((i * 2))"
    kill -9 "$RUN"
    wait "$RUN" 2> /dev/null
    n=$(latest_batch "$D")
    "$DTRAIN" train "$CFG" "$TOY" --checkpoint-dir "$D" --slots 2 --resume latest \
        --max-length $((n + 6))b --quiet > "$W/o" 2>&1
    rc=$?
    check '[ $rc -eq 0 ]' "resume $i right after kill -9 of mpirun (latest batch_$n): $(tail -4 "$W/o")"
    check '[ "$(latest_batch "$D")" -eq $((n + 6)) ]' \
        "resume $i should end at batch_$((n + 6)), latest is $(cat "$D/latest" 2> /dev/null)"
done

# 2. after the kill no rank lives on and nothing in the checkpoint directory changes
D=$W/still
start_slots "$D"
if wait_batch "$D" 10 "$RUN"; then
    kill -9 "$RUN"
    wait "$RUN" 2> /dev/null
    before=$(ls "$D"; cat "$D/latest")
    sleep 1.5
    after=$(ls "$D"; cat "$D/latest")
    check '[ "$before" = "$after" ]' "checkpoints changed after mpirun was killed: $before / $after"
    check '! pgrep -f -- "--checkpoint-dir $D " > /dev/null' "ranks outlived mpirun: $(pgrep -af -- "$D")"
else
    check 'false' "run never checkpointed: $(tail -3 "$D.out")"
fi

# 3. a second run on a checkpoint directory in use: a clear error; the first run (long enough
# to outlast the second's start and its grace for a dying holder) unharmed
D=$W/lock
sed 's/  lr: 0.01/  lr: 0.01\n  batch_ms: 20/' "$CFG" > "$W/slow.yaml"
"$DTRAIN" train "$W/slow.yaml" "$TOY" --checkpoint-dir "$D" --quiet > "$D.out" 2>&1 &
FIRST=$!
BG+=("$FIRST")
if wait_batch "$D" 2 "$FIRST"; then
    "$DTRAIN" train "$CFG" "$TOY" --checkpoint-dir "$D" --quiet > "$W/o" 2>&1
    rc=$?
    check '[ $rc -ne 0 ] && grep -q "checkpoint directory .* is in use by pid $FIRST on host" "$W/o"' \
        "second run on a locked directory (rc $rc): $(cat "$W/o")"
    check 'grep -q "hint:" "$W/o"' "the lock error has no hint: $(cat "$W/o")"
    check 'kill -0 $FIRST' "the first run died"
    wait "$FIRST"
    rc=$?
    check '[ $rc -eq 0 ] && [ "$(latest_batch "$D")" -eq 400 ]' \
        "first run (rc $rc, latest $(cat "$D/latest" 2> /dev/null)): $(tail -3 "$D.out")"
    check '[ ! -e "$D/.lock" ]' "the lock file outlived its run"
else
    check 'false' "first run never checkpointed: $(tail -3 "$D.out")"
fi

summary
