#!/usr/bin/env bash
# run_corpus.sh DTRAIN CORPUS_DIR — every config of the corpus through `dtrain config check`.
#
# Each NAME.expect beside NAME.yaml (an experiment config) or NAME.json (a DeepSpeed config,
# checked through a generated experiment whose hyperparameters.deepspeed_config names it, in a
# model directory with a C source) says what must happen:
#   verdict: ok | refused
#   warning: TEXT   one line per warning the check must print (TEXT a part of it); the check
#                   must print no other warning, so a key that has no effect is never silent
#   error: TEXT     a part of the refusal, which must start with the config's file name
#   plan: TEXT      a part of the searcher's plan
#   dir: NAME       check with the model directory tests/configs/dirs/NAME
# Every message must name the file: a refusal starts with it, a warning is "warning: FILE:LINE:
# ..." (a DeepSpeed config's warnings name that file).
# The summary counts valid configs refused, keys dropped in silence and invalid configs
# accepted (all three must be 0), and messages that do not name the file.
set -u
dtrain=$1
dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
total=0 valid_refused=0 invalid_accepted=0 silent=0 unexpected=0 wrong=0 unnamed=0
fail() { echo "FAIL $name: $*"; }
for expect in "$dir"/*.expect; do
  name=$(basename "$expect" .expect)
  total=$((total + 1))
  verdict=$(sed -n 's/^verdict: //p' "$expect")
  mdir=$(sed -n 's/^dir: //p' "$expect")
  [ -n "$mdir" ] && mdir="$dir/dirs/$mdir"
  if [ -f "$dir/$name.json" ]; then
    mdir="$tmp/$name"
    mkdir -p "$mdir"
    printf 'int x;\n' >"$mdir/model_def.c"
    cp "$dir/$name.json" "$mdir/ds_config.json"
    printf 'entrypoint: model_def:Trial\nhyperparameters:\n  deepspeed_config: ds_config.json\n'\
'searcher: {name: single, metric: loss, max_length: 100}\n' >"$mdir/exp.yaml"
    cfg="$mdir/exp.yaml"
  else
    cfg="$dir/$name.yaml"
  fi
  out=$("$dtrain" config check "$cfg" ${mdir:+"$mdir"} 2>"$tmp/err")
  rc=$?
  err=$(cat "$tmp/err")
  if [ "$verdict" = ok ] && [ $rc -ne 0 ]; then
    valid_refused=$((valid_refused + 1)); fail "refused: $err"; continue
  fi
  if [ "$verdict" = refused ] && [ $rc -ne 1 ]; then
    invalid_accepted=$((invalid_accepted + 1)); fail "accepted (rc $rc): $out"; continue
  fi
  if [ "$verdict" = refused ]; then
    case "$err" in "$cfg"*|"$mdir"*) ;; *) unnamed=$((unnamed + 1)); fail "message does not name the file: $err" ;; esac
    while IFS= read -r want; do
      case "$err" in *"$want"*) ;; *) wrong=$((wrong + 1)); fail "error lacks '$want': $err" ;; esac
    done < <(sed -n 's/^error: //p' "$expect")
    continue
  fi
  # every warning names the file (and the line, for an experiment config's own keys)
  while IFS= read -r line; do
    case "$line" in "warning: $cfg:"[0-9]*": "*|"warning: $mdir/"*) ;;
      *) unnamed=$((unnamed + 1)); fail "warning does not name FILE:LINE: $line" ;; esac
  done < <(printf '%s\n' "$out" | grep '^warning: ')
  got=$(printf '%s\n' "$out" | grep -c '^warning: ')
  want_n=$(grep -c '^warning: ' "$expect")
  while IFS= read -r want; do
    printf '%s\n' "$out" | grep '^warning: ' | grep -qF -- "$want" ||
      { silent=$((silent + 1)); fail "no warning '$want'"; }
  done < <(sed -n 's/^warning: //p' "$expect")
  if [ "$got" -ne "$want_n" ]; then
    unexpected=$((unexpected + 1)); fail "$got warnings, $want_n expected: $out"
  fi
  while IFS= read -r want; do
    printf '%s\n' "$out" | grep -qF -- "$want" || { wrong=$((wrong + 1)); fail "plan lacks '$want': $out"; }
  done < <(sed -n 's/^plan: //p' "$expect")
done
# the command's own contract: usage errors exit 2, an unreadable file is named, exit 1
name=cli
"$dtrain" config >/dev/null 2>&1; [ $? -eq 2 ] || { wrong=$((wrong + 1)); fail "config: exit not 2"; }
"$dtrain" config check >/dev/null 2>&1; [ $? -eq 2 ] || { wrong=$((wrong + 1)); fail "no CONFIG: exit not 2"; }
"$dtrain" config check "$tmp/none.yaml" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -qF "$tmp/none.yaml" "$tmp/err" || { wrong=$((wrong + 1)); fail "missing file: rc $rc"; }
echo "corpus: $total configs; valid refused $valid_refused, keys dropped in silence $silent," \
     "invalid accepted $invalid_accepted; other mismatches: $unexpected warning counts," \
     "$wrong messages, $unnamed not naming the file"
[ $((valid_refused + silent + invalid_accepted + unexpected + wrong + unnamed)) -eq 0 ] && [ "$total" -ge 150 ]
