#!/usr/bin/env bash
# master_ingest.sh [DTRAIN] — the master's metric ingestion rate: 8 trials at once (a master
# with 8 slots), each posting 20 000 training-metric rows in batches of 500 over the REST API
# (bench/ingest/, a command entrypoint), every batch answered once it is in the store. Prints
# one JSON line: all rows over the time from the first trial's first post to the last one's
# last answer (target >= 50 000 rows/s), and the rows the store holds afterwards. Needs
# python3. Starts its own master on a free loopback port with a temporary DTRAIN_HOME.
set -eu
DTRAIN=${1:-./build/dtrain}
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-ingest.XXXXXX)
. "$SRC/tests/e2e/master_env.sh"
trap 'kill "$MPID" 2> /dev/null; wait "$MPID" 2> /dev/null; rm -rf "$W"; rm -f "$SRC/bench/ingest/ingest"' EXIT
start_master 8
E=$($API create "$SRC/bench/ingest/ingest.yaml" "$SRC/bench/ingest")
$API until "/api/v1/experiments/$E" 'r["experiment"]["state"] in ("COMPLETED", "ERROR", "CANCELED")' 600
$API get "/api/v1/experiments/$E/logs?limit=100000" > "$W/logs.json"
$API get "/api/v1/experiments/$E/trials" '[t["id"] for t in r["trials"]]' > "$W/trials"
stored=0
for t in $($PY -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1])))))' "$W/trials"); do
  n=$($API get "/api/v1/trials/$t/metrics?kind=training" 'len(r["metrics"])')
  stored=$((stored + n))
done
$PY - "$W/logs.json" "$stored" << 'PY'
import json, sys
runs = [json.loads(l["line"])["ingest"] for l in json.load(open(sys.argv[1]))["logs"]
        if l["line"].startswith('{"ingest"')]
rows = sum(r["rows"] for r in runs)
span = max(r["t1"] for r in runs) - min(r["t0"] for r in runs)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(json.dumps({"bench": "master_ingest", "cpu": cpu, "trials": len(runs), "rows": rows,
                  "batch": runs[0]["batch"] if runs else None, "seconds": round(span, 3),
                  "rows_per_s": round(rows / span) if span > 0 else None,
                  "rows_stored": int(sys.argv[2])}))
PY
