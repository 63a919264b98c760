#!/usr/bin/env python3
"""api.py — a small client of the master's REST API (docs/api.md) for the end-to-end scripts.

  api.py get PATH [EXPR]          GET PATH; print EXPR evaluated with r = the answer (default:
                                  the answer as JSON)
  api.py post PATH [BODY] [EXPR]  POST a JSON body ({} by default)
  api.py create CONFIG MODEL_DIR [KEY=VALUE ...]   create an experiment, print its id
  api.py create-timed CONFIG MODEL_DIR             the same, printing "ID TIME" (TIME: when
                                                   the answer came, seconds since the epoch)
  api.py wait EXP TIMEOUT_S       wait for a terminal state, print it (exit 1 on timeout)
  api.py until PATH EXPR TIMEOUT_S  poll GET PATH until EXPR is true (exit 1 on timeout)

The master is $DTRAIN_MASTER (with the token of $DTRAIN_TOKEN when set). An error answer prints its status and message to stderr and
exits 1.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request

URL = os.environ.get("DTRAIN_MASTER", "http://127.0.0.1:8080")
TERMINAL = {"COMPLETED", "CANCELED", "ERROR"}


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if os.environ.get("DTRAIN_TOKEN"):
        headers["Authorization"] = "Bearer " + os.environ["DTRAIN_TOKEN"]
        headers["X-Dtrain-Csrf"] = "1"
    req = urllib.request.Request(URL + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as f:
            text = f.read()
            return json.loads(text) if text else {}
    except urllib.error.HTTPError as e:
        print(f"HTTP {e.code}: {e.read().decode()}", file=sys.stderr)
        sys.exit(1)


def show(r, expr):
    v = eval(expr, {"r": r}) if expr else r
    print(v if isinstance(v, (str, int, float)) else json.dumps(v))


def main(a):
    if a[0] == "get":
        show(call("GET", a[1]), a[2] if len(a) > 2 else None)
    elif a[0] == "post":
        body = json.loads(a[2]) if len(a) > 2 and a[2] else {}
        show(call("POST", a[1], body), a[3] if len(a) > 3 else None)
    elif a[0] == "delete":
        show(call("DELETE", a[1]), None)
    elif a[0] in ("create", "create-timed"):
        body = {"config_text": open(a[1]).read(), "model_dir": os.path.abspath(a[2]),
                "overrides": a[3:]}
        eid = call("POST", "/api/v1/experiments", body)["id"]
        print(eid if a[0] == "create" else f"{eid} {time.time():.6f}")
    elif a[0] == "wait":
        end = time.time() + float(a[2])
        while time.time() < end:
            s = call("GET", f"/api/v1/experiments/{a[1]}")["experiment"]["state"]
            if s in TERMINAL:
                print(s)
                return
            time.sleep(0.2)
        print(f"experiment {a[1]} still {s} after {a[2]} s", file=sys.stderr)
        sys.exit(1)
    elif a[0] == "until":
        end = time.time() + float(a[3])
        while time.time() < end:
            try:
                if eval(a[2], {"r": call("GET", a[1])}):
                    return
            except (KeyError, IndexError, TypeError):
                pass
            time.sleep(0.1)
        print(f"timed out waiting for {a[2]} on {a[1]}", file=sys.stderr)
        sys.exit(1)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
