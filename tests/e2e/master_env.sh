# master_env.sh — a master of its own for a script (sourced by tests/e2e/test_master.sh and the
# bench/master_*.sh benchmarks). Needs SRC (the source tree), DTRAIN (the binary), PY and W (a
# scratch directory). Sets DTRAIN_HOME=$W/home and DTRAIN_MASTER to a free loopback port, and
# API (tests/e2e/api.py with the right Python).
#   start_master [SLOTS]   start `dtrain master --slots SLOTS` (default 2; log: $W/master.log),
#                          MPID its pid; waits until it answers (status 1 if it never does)
#   note_pgid TRIAL        remember a trial's process group (in $W/pgids) ...
#   stop_master_runs       ... so that this kills it, whatever happened, and then the master
API="$PY $SRC/tests/e2e/api.py"
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export DTRAIN_HOME=$W/home DTRAIN_MASTER=http://127.0.0.1:$PORT
MPID=

start_master() {
  "$DTRAIN" master --port "$PORT" --slots "${1:-2}" >> "$W/master.log" 2>&1 &
  MPID=$!
  for _ in $(seq 100); do
    $API get /api/v1/master 'r["pid"]' > /dev/null 2>&1 && return 0
    kill -0 "$MPID" 2> /dev/null || break
    sleep 0.1
  done
  echo "master did not start: $(tail -5 "$W/master.log")" >&2
  return 1
}

note_pgid() { $API get "/api/v1/trials/$1" 'r["trial"].get("pgid") or ""' >> "$W/pgids" 2> /dev/null; }

stop_master_runs() {
  [ -n "$MPID" ] && kill -9 "$MPID" 2> /dev/null
  # only a real group: `kill -- -0` would be this script's own group, and ctest's with it
  for g in $(cat "$W"/pgids 2> /dev/null); do [ "$g" -gt 1 ] && kill -9 -- "-$g" 2> /dev/null; done
}
