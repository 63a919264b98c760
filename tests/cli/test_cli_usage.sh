#!/usr/bin/env bash
# The usage errors of the dtrain command's verbs, driving the real binary, no master and no
# model needed (every case fails before either is reached): for each verb an unknown option
# and an option without its value exit 2 naming the option, with the verb's usage on stderr;
# values out of range name the range; `--help` exits 0 and its text lists every option the
# verb's table takes, and each option it lists is one the parser knows (never "unknown").
# usage: test_cli_usage.sh DTRAIN_BINARY
# Prints "N passed, M failed" and exits non-zero on any failure.
set -u
DTRAIN=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d /tmp/dtrain-usage.XXXXXX)
trap 'rm -rf "$W"' EXIT
. "$SRC/tests/e2e/check.sh"
# every case is a usage error, found before any master is asked (a home of its own all the same)
export DTRAIN_HOME=$W/home DTRAIN_MASTER=http://127.0.0.1:9

# expect RC GREP -- ARGS...: the exit code and a line of stderr (fixed text)
expect() {
  local want=$1 grep=$2
  shift 3
  "$DTRAIN" "$@" > "$W/out" 2> "$W/err"
  local rc=$?
  check '[ $rc -eq $want ] && grep -qF -- "$grep" "$W/err"' \
    "dtrain $*: want rc $want and '$grep', got rc $rc: $(head -3 "$W/err")"
}
# usage_follows ARGS...: after a usage error the verb's usage is on stderr
usage_follows() {
  "$DTRAIN" "$@" > /dev/null 2> "$W/err"
  check 'grep -q "^usage: dtrain" "$W/err"' "dtrain $*: no usage after the error: $(cat "$W/err")"
}

M=/nonexistent/model
# ---- a bad option and a missing value, per verb ----
expect 2 "unknown option '--bogus'" -- lm tokenize $M t.txt --bogus
expect 2 "missing TEXT_FILE" -- lm tokenize $M
expect 2 "unknown option '--sq'" -- lm eval $M t.txt --sq 3
expect 2 "--seq needs a value" -- lm eval $M t.txt --seq
expect 2 "--seq must be an integer >= 2, got '1'" -- lm eval $M t.txt --seq 1
expect 2 "unknown option '--top_k'" -- lm generate $M --prompt hi --max-new-tokens 2 --top_k 3
expect 2 "--prompt needs a value" -- lm generate $M --prompt
expect 2 "--top-p must be a number in [0, 1], got '2'" -- lm generate $M --prompt a --max-new-tokens 2 --top-p 2
expect 2 "--max-new-tokens must be an integer >= 1, got '0'" -- lm generate $M --prompt a --max-new-tokens 0
expect 2 "needs --prompt TEXT and --max-new-tokens K" -- lm generate $M --prompt a
expect 2 "--seed given twice" -- lm generate $M --prompt a --max-new-tokens 1 --seed 1 --seed 2
expect 2 "unknown option '--epochs'" -- lm finetune $M t.txt --steps 2 --out o --epochs 1
expect 2 "--out needs a value" -- lm finetune $M t.txt --steps 2 --out
expect 2 "--dtype must be f32 or bf16, got 'f16'" -- lm finetune $M t.txt --steps 2 --out o --dtype f16
expect 2 "--lr must be a number in [0, 10], got 'x'" -- lm finetune $M t.txt --steps 2 --out o --lr x
expect 2 "needs MODEL_DIR TEXT_FILE --steps S --out OUT_DIR" -- lm finetune $M t.txt --out o
usage_follows lm eval $M t.txt --bogus
expect 2 "unknown option '--max-trial'" -- dsat binary c.yaml $M --max-trial 3
expect 2 "--max-trials needs a value" -- dsat binary c.yaml $M --max-trials
expect 2 "--max-trials must be an integer in [1, 100000], got 'x'" -- dsat binary c.yaml $M --max-trials x
expect 2 "--divisor is a flag of dtrain dsat asha, not random" -- dsat random c.yaml $M --divisor 3
expect 2 "--zero-stages needs a value" -- dsat asha c.yaml $M --zero-stages
expect 2 "--zero-stages names stage 2 twice" -- dsat asha c.yaml $M --zero-stages 2 1 2
expect 2 "--search-range-factor must be a number > 0, got '0'" -- dsat asha c.yaml $M --search-range-factor 0
expect 2 "unexpected argument 'extra'" -- dsat asha c.yaml $M --zero-stages 1 2 extra
usage_follows dsat binary c.yaml $M --bogus
expect 2 "unknown option '--json'" -- trial logs 3 --json
expect 2 "--kind needs a value" -- trial metrics 3 --kind
expect 2 "--kind must be training, validation or profiler, got 'x'" -- trial metrics 3 --kind x
expect 2 "unknown verb 'show'" -- trial show 3
expect 2 "missing the verb" -- trial
usage_follows trial list 1 --bogus
expect 2 "unknown option '--slot'" -- worker --slot 2
expect 2 "--hostfile needs a value" -- worker --hostfile
expect 2 "--slots must be an integer in [1, 2147483647], got '0'" -- worker --slots 0
expect 2 "unknown option '--json'" -- config check c.yaml --json
expect 2 "unexpected argument 'c'" -- config check a b c
expect 2 "unexpected argument 'x'" -- master token x
expect 2 "unknown verb 'show'" -- model show
expect 2 "unknown option '--step'" -- bench train --model mlp --step 3
expect 2 "--steps needs a value" -- bench train --model mlp --steps
expect 2 "--steps must be an integer in [1, 2147483647], got '0'" -- bench train --model mlp --steps 0
expect 2 "--zero-stage takes 0, 1, 2 or 3, got '4'" -- bench train --model mlp --zero-stage 4
usage_follows bench gemm --bogus

# ---- --help: exit 0, every option of the verb's table listed and known to the parser ----
# help_lists "VERB" "ARGS" "OPTIONS...": `dtrain VERB --help` lists each option, and
# `dtrain VERB ARGS OPTION --zz --zz` does not call OPTION unknown (the option takes the first
# --zz as its value or is a flag; a --zz is then refused, so nothing runs)
help_lists() {
  local verb=$1 args=$2 opt
  # shellcheck disable=SC2086
  "$DTRAIN" $verb --help > "$W/help" 2> "$W/err"
  local rc=$?
  check '[ $rc -eq 0 ] && [ ! -s "$W/err" ]' "dtrain $verb --help: rc $rc, stderr $(cat "$W/err")"
  for opt in $3; do
    check 'grep -qF -- "$opt" "$W/help"' "dtrain $verb --help does not list $opt"
    # shellcheck disable=SC2086
    "$DTRAIN" $verb $args $opt --zz --zz > /dev/null 2> "$W/err"
    rc=$?
    check '[ $rc -eq 2 ] && ! grep -qF "unknown option '"'"'$opt'"'"'" "$W/err"' \
      "dtrain $verb lists $opt but refuses it (rc $rc): $(cat "$W/err")"
  done
}
help_lists "lm tokenize" "$M t.txt" ""
help_lists "lm" "" ""
help_lists "lm eval" "$M t.txt" "--seq --json"
help_lists "lm generate" "$M" "--prompt --max-new-tokens --temperature --top-k --top-p --seed --json"
help_lists "lm finetune" "$M t.txt" "--steps --out --lr --seq --batch --dtype --weight-decay --seed --json"
help_lists "dsat asha" "c.yaml $M" "--max-trials --max-concurrent-trials --max-slots --metric
  --zero-stages --start-profile-step --end-profile-step --random-seed --run-full-experiment
  --include --json --max-rungs --min-binary-search-trials --asha-early-stopping --divisor
  --search-range-factor --trials-per-random-config --early-stopping"
help_lists "trial metrics" "3" "--kind --csv --json"
help_lists "trial logs" "3" "--follow"
help_lists "worker" "" "--slots --hostfile"
help_lists "bench train" "" "--model --batch --layers --hidden --d-model --heads --seq --vocab
  --steps --warmup --threads --dtype --profile --json --slots --zero-stage --offload --nvme-path
  --gas --pipeline-stages --micro-batches --ds-config"
help_lists "bench gemm" "" "--size --shape --trans --threads --dtype --reps --backend --json"
help_lists "config check" "" ""
help_lists "master token" "" ""
summary
