#!/usr/bin/env bash
# The CLI and a hung master: a stand-in that accepts connections and never answers
# (tests/e2e/hung_master.py) makes `dtrain` exit 3 saying so, long before the client's 30 s
# call timeout — whether it is silent from the first request or answers the status check and
# then hangs. Also: no master gets started in its place.
# usage: test_hung_master.sh DTRAIN_BINARY SOURCE_DIR
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-hung.XXXXXX)
. "$SRC/tests/e2e/check.sh"
export DTRAIN_HOME=$W/home
SPID=
cleanup() {
  [ -n "$SPID" ] && kill -9 "$SPID" 2> /dev/null
  rm -rf "$W"
}
trap cleanup EXIT

# start_stub MODE: the stand-in on a free port; DTRAIN_MASTER points at it
start_stub() {
  [ -n "$SPID" ] && kill -9 "$SPID" 2> /dev/null && wait "$SPID" 2> /dev/null
  rm -f "$W/port"
  $PY "$SRC/tests/e2e/hung_master.py" "$1" "$W/port" &
  SPID=$!
  for _ in $(seq 100); do [ -s "$W/port" ] && break; sleep 0.1; done
  export DTRAIN_MASTER=http://127.0.0.1:$(cat "$W/port")
}

for mode in silent ping-once; do
  for verb in "experiment list" "trial describe 1"; do
    start_stub $mode
    HOSTPORT=${DTRAIN_MASTER#http://}
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout 60 "$DTRAIN" $verb > "$W/out" 2> "$W/err"
    rc=$?
    t1=$(date +%s)
    check '[ $rc -eq 3 ]' "$mode: dtrain $verb exited $rc, not 3: $(cat "$W/err")"
    check 'grep -q "master at $HOSTPORT accepted the connection but did not answer within 5 s; hint: " "$W/err"' \
      "$mode: dtrain $verb did not say the master is hung: $(cat "$W/err")"
    # the 30 s call timeout did not decide it (a loose bound: this is no timing test)
    check '[ $((t1 - t0)) -lt 25 ]' "$mode: dtrain $verb took $((t1 - t0)) s"
    check '[ ! -e "$DTRAIN_HOME/master.pid" ]' "$mode: a master was started beside the hung one"
  done
done
summary
