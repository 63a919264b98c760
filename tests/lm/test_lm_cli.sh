#!/usr/bin/env bash
# End-to-end: `dtrain lm tokenize | eval | generate` (the real binary) on every fixture model
# of tests/lm/fixtures/models/ against what transformers and tokenizers computed when the
# fixtures were made (expected.json): the eval text's ids exactly, its loss by the windowing
# rule to 1e-4 relative with the same count of predicted tokens; greedy generation keeps the
# prompt's ids, stops at the length or the EOS, and repeats itself; seeded sampling repeats
# itself; bad input exits 1 naming the problem. `lm finetune` on the GPT-2 and Llama fixtures:
# the loss falls, the export has the family's layout (test_lm_export's checks, beside this
# binary) and `lm eval` gives it a lower loss on the training text than the source model.
# usage: test_lm_cli.sh DTRAIN_BINARY SOURCE_DIR
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-lm-cli.XXXXXX)
trap 'rm -rf "$W"' EXIT
. "$SRC/tests/e2e/check.sh"
F=$SRC/tests/lm/fixtures/models

# expected.json's field by a Python expression over it (d)
want() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

for dir in "$F"/*/; do
  m=$(basename "$dir")
  exp=$dir/expected.json
  # tokenize: the whole eval text, exactly the library's ids
  "$DTRAIN" lm tokenize "$dir" "$dir/eval.txt" > "$W/ids" 2> "$W/e"
  rc=$?
  check '[ $rc -eq 0 ] && [ "$(cat "$W/ids")" = "$(want "$exp" "\" \".join(map(str, d[\"text\"][\"ids\"]))")" ]' \
    "$m: tokenize differs from tokenizers' ids: $(head -c 300 "$W/ids") $(cat "$W/e")"
  # eval --seq: transformers' loss over the same windows
  seq=$(want "$exp" 'd["text"]["seq"]')
  "$DTRAIN" lm eval "$dir" "$dir/eval.txt" --seq "$seq" --json > "$W/o" 2> "$W/e"
  rc=$?
  check '[ $rc -eq 0 ]' "$m: lm eval failed: $(cat "$W/e")"
  "$PY" - "$W/o" "$exp" > "$W/cmp" 2>&1 <<'EOF'
import json, sys
got = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
want = json.load(open(sys.argv[2]))["text"]
rel = abs(got["loss"] - want["loss"]) / abs(want["loss"])
ok = rel <= 1e-4 and got["tokens"] == want["predicted"]
print(f"loss {got['loss']} vs {want['loss']} (rel {rel:.2e}), tokens {got['tokens']} vs {want['predicted']}")
sys.exit(0 if ok else 1)
EOF
  rc=$?
  check '[ $rc -eq 0 ]' "$m: lm eval against transformers: $(cat "$W/cmp")"
done

# generate on the GPT-2 fixture: the prompt's ids first, at most K more, the same twice
g=$F/gpt2
"$DTRAIN" lm tokenize "$g" <(printf 'the quick brown fox') > "$W/pids" 2>/dev/null
"$DTRAIN" lm generate "$g" --prompt 'the quick brown fox' --max-new-tokens 12 --json > "$W/g1" 2> "$W/e"
rc=$?
check '[ $rc -eq 0 ]' "generate failed: $(cat "$W/e")"
"$DTRAIN" lm generate "$g" --prompt 'the quick brown fox' --max-new-tokens 12 --json > "$W/g2" 2>&1
"$PY" - "$W/g1" "$W/pids" "$g/config.json" > "$W/cmp" 2>&1 <<'EOF'
import json, sys
g = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
prompt = [int(x) for x in open(sys.argv[2]).read().split()]
eos = json.load(open(sys.argv[3])).get("eos_token_id")
ids, new = g["ids"], g["ids"][len(prompt):]
ok = ids[:len(prompt)] == prompt and 1 <= len(new) <= 12 and isinstance(g["text"], str)
ok = ok and (len(new) == 12 or new[-1] == eos) and eos not in new[:-1]
print(g, prompt, eos)
sys.exit(0 if ok else 1)
EOF
rc=$?
check '[ $rc -eq 0 ]' "generate --json: $(cat "$W/cmp")"
check 'cmp -s "$W/g1" "$W/g2"' "greedy generation differs between two runs"
for run in a b; do
  "$DTRAIN" lm generate "$g" --prompt 'the quick' --max-new-tokens 10 --temperature 0.9 \
      --top-k 50 --top-p 0.95 --seed 7 --json > "$W/sample_$run" 2>&1
done
check 'grep -q "\"ids\"" "$W/sample_a" && cmp -s "$W/sample_a" "$W/sample_b"' \
  "seeded sampling is not repeatable: $(cat "$W/sample_a")"

# bad input: exit 1 (2 for usage), a message naming what is wrong
"$DTRAIN" lm eval "$W/nowhere" "$g/eval.txt" > /dev/null 2> "$W/e"
rc=$?
check '[ $rc -eq 1 ] && grep -q "nowhere" "$W/e"' "a missing model dir: rc $rc: $(cat "$W/e")"
"$DTRAIN" lm eval "$g" "$W/none.txt" > /dev/null 2> "$W/e"
rc=$?
check '[ $rc -eq 1 ] && grep -q "none.txt" "$W/e"' "a missing text file: rc $rc: $(cat "$W/e")"
"$DTRAIN" lm generate "$g" --prompt x --max-new-tokens 0 > /dev/null 2> "$W/e"
rc=$?
check '[ $rc -eq 2 ] && grep -q "max-new-tokens" "$W/e"' "--max-new-tokens 0: rc $rc: $(cat "$W/e")"
"$DTRAIN" lm eval "$g" "$g/eval.txt" --seq 1 > /dev/null 2> "$W/e"
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--seq" "$W/e"' "--seq 1: rc $rc: $(cat "$W/e")"
printf 'caf\xe9 \xff\xfe bytes' > "$W/latin1.txt"
"$DTRAIN" lm eval "$g" "$W/latin1.txt" --json > "$W/o" 2> "$W/e"
rc=$?
check '[ $rc -eq 0 ] && grep -q "\"loss\"" "$W/o"' "text that is not UTF-8: rc $rc: $(cat "$W/e")"

# finetune: a few AdamW steps on a small text, f32 and bf16
printf '%s\n' "the quick brown fox jumps over the lazy dog." "a stitch in time saves nine." \
  "the early bird catches the worm, and the quick fox catches the bird." > "$W/train.txt"
lossof() { "$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])[sys.argv[2]])' "$1" "$2"; }
CHECKER=$(dirname "$DTRAIN")/test_lm_export
for m in gpt2 llama; do
  for dtype in f32 bf16; do
    out=$W/ft_${m}_$dtype
    "$DTRAIN" lm finetune "$F/$m" "$W/train.txt" --steps 8 --lr 0.003 --seq 16 --batch 2 \
        --dtype "$dtype" --out "$out" --json > "$W/ft" 2> "$W/e"
    rc=$?
    check '[ $rc -eq 0 ] && [ -s "$out/config.json" ] && [ -s "$out/model.safetensors" ] && [ -s "$out/tokenizer.json" ]' \
      "$m $dtype: finetune failed (rc $rc): $(tail -3 "$W/e")"
    [ $rc -eq 0 ] || continue
    check '"$PY" -c "import json,sys; j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); sys.exit(not (j[\"steps\"] == 8 and j[\"out\"] == sys.argv[2] and j[\"loss\"] < j[\"mean_loss\"]))" "$W/ft" "$out"' \
      "$m $dtype: the JSON line lacks steps/out or the loss did not fall: $(tail -1 "$W/ft")"
    "$DTRAIN" lm eval "$F/$m" "$W/train.txt" --seq 16 --json > "$W/before" 2>&1
    "$DTRAIN" lm eval "$out" "$W/train.txt" --seq 16 --json > "$W/after" 2>&1
    before=$(lossof "$W/before" loss); after=$(lossof "$W/after" loss)
    check 'awk -v a="$before" -v b="$after" "BEGIN { exit !(b < a - 0.5) }"' \
      "$m $dtype: eval loss on the training text $before -> $after did not fall"
    if [ -x "$CHECKER" ]; then
      if [ $m = gpt2 ]; then g2=1; else g2=; fi
      DT_LM_CHECK_DIR=$out DT_LM_CHECK_GPT2=$g2 "$CHECKER" > "$W/chk" 2>&1
      rc=$?
      check '[ $rc -eq 0 ]' "$m $dtype: the export's layout: $(cat "$W/chk")"
    fi
  done
done
# JSON lines: each line's text member is a document
printf '{"text": "the quick brown fox jumps over the lazy dog"}\n{"text": "a stitch in time saves nine"}\n' \
  > "$W/train.jsonl"
"$DTRAIN" lm finetune "$g" "$W/train.jsonl" --steps 2 --seq 8 --batch 2 --out "$W/ft_jsonl" \
  --json > "$W/ft" 2> "$W/e"
rc=$?
check '[ $rc -eq 0 ] && [ -s "$W/ft_jsonl/model.safetensors" ] && grep -q "\"steps\":2" "$W/ft"' \
  "finetune on JSON lines: rc $rc: $(tail -3 "$W/e")"
# finetune's bad input: exit 1 naming the problem
mkdir -p "$W/full" && : > "$W/full/x"
for bad in "$W/nowhere $W/train.txt --out $W/o1:nowhere" "$g $W/none.txt --out $W/o2:none.txt" \
    "$g $W/train.txt --seq 100000 --out $W/o3:positions" "$g $W/train.txt --out $W/full:not an empty"; do
  args=${bad%%:*}; want=${bad##*:}
  # shellcheck disable=SC2086
  "$DTRAIN" lm finetune $args --steps 2 > /dev/null 2> "$W/e"
  rc=$?
  check '[ $rc -eq 1 ] && grep -q "$want" "$W/e"' "finetune $args: rc $rc: $(cat "$W/e")"
done
check '[ ! -e "$W/o1" ] && [ ! -e "$W/o3" ]' "a refused finetune wrote its out dir"
summary
