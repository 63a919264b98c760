#!/usr/bin/env bash
# snapshot_create.sh DTRAIN_BINARY SOURCE_DIR [REPS] — what keeping the model definition costs
# `dtrain experiment create` (docs/experiments.md): for the largest example under examples/,
# the kept tar's size and the create latency (pack, store, unpack, compile; created paused, so
# no trial runs), median of REPS (default 5); then the same with a 90 MiB file added by
# --include, whose extra latency is the packing, storing and unpacking of 90 MiB.
# Runs its own master on a free loopback port with its own DTRAIN_HOME; prints a table and the
# CPU.
set -eu
DTRAIN=$(realpath "$1")
SRC=$(realpath "$2")
REPS=${3:-5}
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-snapbench.XXXXXX)
export DTRAIN_HOME=$W/home
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export DTRAIN_MASTER=http://127.0.0.1:$PORT
trap '"$DTRAIN" master stop > /dev/null 2>&1; rm -rf "$W"' EXIT

EX=$(du -sb "$SRC"/examples/*/ | sort -n | tail -1 | cut -f2)
EX=${EX%/}
CONFIG=$EX/const.yaml
"$DTRAIN" experiment list > /dev/null 2>&1 # starts the master
head -c $((90 << 20)) /dev/urandom > "$W/weights.bin"

now() { "$PY" -c 'import time; print(time.time())'; }
# run LABEL [create args...]: REPS creates, the median latency and the last one's tar size
run() {
  local label=$1 times=() id
  shift
  for _ in $(seq "$REPS"); do
    t0=$(now)
    id=$("$DTRAIN" experiment create "$CONFIG" "$EX" --paused "$@" 2> /dev/null |
      sed -n 's/^created experiment \([0-9]*\)$/\1/p')
    t1=$(now)
    [ -n "$id" ] || { echo "create failed: $label" >&2; exit 1; }
    times+=("$("$PY" -c "print(($t1 - $t0) * 1000)")")
  done
  bytes=$(DTRAIN_MASTER=$DTRAIN_MASTER "$PY" "$SRC/tests/e2e/api.py" get \
    "/api/v1/experiments/$id/model_def" 'r["bytes"]')
  med=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '%-34s %12s %14.1f\n' "$label" "$bytes" "$med"
}

echo "largest example: ${EX#"$SRC"/} ($(du -sb "$EX" | cut -f1) bytes on disk), $REPS creates each"
printf '%-34s %12s %14s\n' "case" "tar bytes" "create ms (med)"
run "$(basename "$EX")"
run "$(basename "$EX") + 90 MiB --include" --include "$W/weights.bin"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
