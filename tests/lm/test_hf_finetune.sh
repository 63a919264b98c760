#!/usr/bin/env bash
# End-to-end: examples/hf_finetune under `dtrain train` (the real binary): a Hugging Face
# GPT-2 directory fine-tuned with AdamW on a token file, every checkpoint holding the model in
# Hugging Face format under hf/, out_dir written at the end, a resumed run going on from the
# checkpoint; the trained weights differ from the source's and the validation loss falls. Then
# the engine-based trial on 2 slots with ZeRO stage 3: its checkpoint's hf/ is made from the
# consolidated weights.
# usage: test_hf_finetune.sh DTRAIN_BINARY SOURCE_DIR
set -u
DTRAIN=$1
SRC=$2
W=$(mktemp -d /tmp/dtrain-hf-finetune.XXXXXX)
trap 'rm -rf "$W"' EXIT
. "$SRC/tests/e2e/check.sh"

EX=$SRC/examples/hf_finetune
sed "s|  out_dir: .*|  out_dir: $W/out|" "$EX/const.yaml" > "$W/const.yaml"
"$DTRAIN" train "$W/const.yaml" "$EX" --max-length 12b --checkpoint-dir "$W/ckpt" \
    --metrics-out "$W/m1.jsonl" --quiet > "$W/log1" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "the fine-tuning run failed: $(tail -5 "$W/log1")"
for f in config.json model.safetensors tokenizer.json; do
    check '[ -s "$W/out/$f" ]' "out_dir has no $f"
    check '[ -s "$W/ckpt/batch_12/hf/$f" ]' "the checkpoint has no hf/$f"
done
check '! cmp -s "$W/out/model.safetensors" "$SRC/tests/lm/fixtures/models/gpt2/model.safetensors"' \
    "the exported weights are the source's"
check 'cmp -s "$W/out/model.safetensors" "$W/ckpt/batch_12/hf/model.safetensors"' \
    "the final export and the last checkpoint's differ"
# data/val.u16 is the fixture's eval text: its loss before training is expected.json's last
# "loss" (the text's, by transformers); 12 AdamW steps bring it well down
before=$(grep '"loss"' "$SRC/tests/lm/fixtures/models/gpt2/expected.json" | tail -1 |
    sed 's/.*"loss": *\([0-9.e+-]*\).*/\1/')
after=$(sed -n 's/.*"validation_loss": *\([0-9.e+-]*\).*/\1/p' "$W/m1.jsonl" | tail -1)
check 'awk -v a="$before" -v b="$after" "BEGIN { exit !(b < a - 0.3) }"' \
    "validation loss $before -> $after did not fall"

"$DTRAIN" train "$W/const.yaml" "$EX" --max-length 16b --checkpoint-dir "$W/ckpt" \
    --resume latest --quiet > "$W/log2" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "the resumed run failed: $(tail -5 "$W/log2")"
check '[ -s "$W/ckpt/batch_16/hf/model.safetensors" ]' "the resumed run wrote no checkpoint"
check '! cmp -s "$W/out/model.safetensors" "$W/ckpt/batch_12/hf/model.safetensors"' \
    "the resumed run did not write out_dir again"
"$DTRAIN" train "$EX/zero.yaml" "$EX" --max-length 6b --checkpoint-dir "$W/zero" --slots 2 \
    --quiet > "$W/log3" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "the ZeRO-3 run failed: $(tail -5 "$W/log3")"
check '[ -s "$W/zero/batch_6/model0/model.safetensors" ]' "no consolidated engine weights"
check '[ -s "$W/zero/batch_6/hf/model.safetensors" ] && [ -s "$W/zero/batch_6/hf/config.json" ]' \
    "the ZeRO-3 checkpoint has no hf/ export"
check '! cmp -s "$W/zero/batch_6/hf/model.safetensors" "$W/zero/batch_6/model0/model.safetensors"' \
    "the hf/ export is the engine's file, not the Hugging Face layout"
check '! cmp -s "$W/zero/batch_6/hf/model.safetensors" \
    "$SRC/tests/lm/fixtures/models/gpt2/model.safetensors"' "the ZeRO-3 export is untrained"
summary
