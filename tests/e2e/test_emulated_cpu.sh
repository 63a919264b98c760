#!/usr/bin/env bash
# The portable binary on CPUs other than this machine's, emulated by qemu-user (its CPUID and
# its instruction decoder are the emulated CPU's: a stray AVX-512 instruction is SIGILL there).
#   - Haswell (AVX2 + FMA, no AVX-512): the kernel and golden-file tests pass; `dtrain bench`
#     reports the avx2 level (and bf16 autocast's f32 fallback); training the toy gives the same bits as this machine forced to
#     AVX2 (DTRAIN_ISA=avx2 ...), the set-up the AVX2 benchmarks use.
#   - Nehalem (below x86-64-v3): `dtrain` refuses with a message, not SIGILL.
# usage: test_emulated_cpu.sh DTRAIN_BINARY SOURCE_DIR TEST_BINARY...
set -u
DTRAIN=$1
SRC=$2
shift 2
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-emu.XXXXXX)
trap 'rm -rf "$W"' EXIT
. "$SRC/tests/e2e/check.sh"
export DTRAIN_HOME=$W/home
haswell() { qemu-x86_64 -cpu Haswell "$@"; }

# 1. below the baseline: a message and status 1
qemu-x86_64 -cpu Nehalem "$DTRAIN" --version > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "needs an x86-64-v3 CPU" "$W/o" && grep -q "hint: build for this CPU" "$W/o"' \
    "Nehalem: $(grep -v TCG "$W/o")"

# 2. the level and matmul path dtrain picks on an AVX2-only CPU
haswell "$DTRAIN" bench train --model mlp --hidden 64 --steps 2 --warmup 1 --threads 1 --json \
    > "$W/b" 2> "$W/o"
rc=$?
check '[ $rc -eq 0 ] && "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"isa\"] == \"avx2\" and d[\"matmul\"] == \"f32-openblas\", d" "$W/b"' \
    "Haswell bench: $(cat "$W/b") $(grep -v TCG "$W/o" | tail -3)"

haswell "$DTRAIN" bench train --model mlp --hidden 64 --steps 2 --warmup 1 --threads 1 \
    --dtype bf16 --json > "$W/b" 2> "$W/o"
rc=$?
check '[ $rc -eq 0 ] && "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"isa\"] == \"avx2\" and d[\"bf16\"] == \"f32-fallback\", d" "$W/b"' \
    "Haswell bench bf16: $(cat "$W/b") $(grep -v TCG "$W/o" | tail -3)"

# 3. the toy trained on the emulated CPU and here forced to AVX2: the same weights
haswell "$DTRAIN" train "$SRC/tests/e2e/toy/const.yaml" "$SRC/tests/e2e/toy" \
    --checkpoint-dir "$W/emu" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "Haswell train: $(grep -v TCG "$W/o" | tail -3)"
DTRAIN_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell "$DTRAIN" train \
    "$SRC/tests/e2e/toy/const.yaml" "$SRC/tests/e2e/toy" --checkpoint-dir "$W/forced" --quiet \
    > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && cmp -s "$W/emu/batch_30/model.safetensors" "$W/forced/batch_30/model.safetensors"' \
    "emulated Haswell and forced avx2 trained different weights"

# 4. the kernel and golden-file tests on the emulated CPU
for t in "$@"; do
  haswell "$t" > "$W/t" 2>&1
  rc=$?
  check '[ $rc -eq 0 ] && grep -q " passed, 0 failed" "$W/t"' \
      "Haswell $(basename "$t"): $(grep -v TCG "$W/t" | grep -E "FAIL|passed|signal" | head -5)"
  if [ "$(basename "$t")" = test_isa_variants ]; then
    check 'grep -q "CPU level avx2: variants generic..avx2" "$W/t"' \
        "test_isa_variants on Haswell should compare generic and avx2: $(head -1 "$W/t")"
  fi
done
summary
