#!/usr/bin/env python3
"""Make the tiny Hugging Face model fixtures under tests/lm/fixtures/models/ (run by hand).

    python3 -m venv /opt/lm-venv
    /opt/lm-venv/bin/pip install torch transformers tokenizers safetensors numpy
    /opt/lm-venv/bin/python tools/lm_fixtures/make_model_fixtures.py            # write fixtures
    /opt/lm-venv/bin/python tools/lm_fixtures/make_model_fixtures.py \
        --check-export EXPORTED_DIR FIXTURE_NAME                                # round trip

Each model directory holds config.json, its weights (one file or shards with an index), a
byte-level BPE tokenizer.json trained here, and expected.json: the values transformers computes
for it (logits of a fixed id sequence, the eval loss by dtrain's windowing rule, greedy
generations). The C tests in tests/lm/ compare against these numbers; CI never runs this.

--check-export loads a directory dtrain exported with from_pretrained and checks that it gives
the fixture's eval losses (the export half of the round trip; docs/lm.md records it).
"""
import argparse
import json
import os
import shutil
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file, load_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(ROOT, "tests", "lm", "fixtures", "models")
VOCAB = 320
MAXPOS = 64

TRAIN_TEXT = """\
A training run reads its data in batches, computes a loss, and moves every weight a little
against its gradient. The optimizer keeps two running moments per weight and divides one by
the square root of the other. When the loss stops falling, the learning rate is lowered, and
the run goes on until the budget is spent or the validation metric says it is good enough.
Checkpoints are written now and then so that a run that stops can start again where it was.
Language models predict the next token from the tokens before it. The text is cut into
windows; each window is fed to the model, which gives a score for every token of the
vocabulary at every position. The cross-entropy of the true next token is the loss.
Generation feeds the model its own output, one token at a time, keeping the keys and values
of the tokens it has already seen so that each new step only computes the newest position.
"""

EVAL_TEXT = """\
The model reads a window of text and predicts each token from the ones before it. A lower
loss means the model is less surprised by the text. Fine-tuning moves the weights so that the
loss on new text falls, and the model is then saved again for the tools that made it.
"""


def train_tokenizer(specials):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, processors
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([TRAIN_TEXT] * 4, trainer=trainer)
    return tok


def make_model(kind, **kw):
    import transformers as tf
    torch.manual_seed(kw.pop("seed"))
    if kind == "gpt2":
        cfg = tf.GPT2Config(vocab_size=VOCAB, n_positions=MAXPOS, n_embd=32, n_layer=2,
                            n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                            bos_token_id=0, eos_token_id=0, initializer_range=0.3, **kw)
        return tf.GPT2LMHeadModel(cfg).eval()
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=MAXPOS,
                  bos_token_id=1, eos_token_id=2, initializer_range=0.3, rms_norm_eps=1e-5)
    common.update(kw)
    cls = {"llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
           "mistral": (tf.MistralConfig, tf.MistralForCausalLM),
           "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM)}[kind]
    model = cls[1](cls[0](**common)).eval()
    with torch.no_grad():  # random non-zero norms and biases, so a mix-up shows
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                p.add_(0.2 * torch.randn_like(p))
    return model


def window_loss(model, ids, seq):
    seq = seq or model.config.max_position_embeddings  # GPT-2's n_positions under that name
    total, count = 0.0, 0
    for s in range(0, len(ids), seq):
        w = ids[s:s + seq]
        if len(w) < 2:
            continue
        with torch.no_grad():
            logits = model(torch.tensor([w])).logits[0].float()
        total += F.cross_entropy(logits[:-1], torch.tensor(w[1:]), reduction="sum").double().item()
        count += len(w) - 1
    return total / count, count


def greedy(model, prompt, n, eos):
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=n,
                             eos_token_id=eos, pad_token_id=eos, attention_mask=None)
        # smallest top-1 / top-2 gap along the greedy path: near-ties would make the check
        # depend on rounding
        ids = out[0].tolist()
        logits = model(torch.tensor([ids])).logits[0]
        top = logits[len(prompt) - 1:-1].topk(2, dim=-1).values
        gap = (top[:, 0] - top[:, 1]).min().item()
    return ids, gap


def expected(model, tok, seq):
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, VOCAB, (40,), generator=g).tolist()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    picks = [[t, v] for t, v in [(0, 0), (5, 17), (17, 101), (39, 319), (39, 3)]]
    long_ids = torch.randint(3, VOCAB, (150,), generator=g).tolist()
    evals = []
    for s in (seq, 0, 7):
        loss, n = window_loss(model, long_ids, s)
        evals.append({"seq": s, "loss": loss, "predicted": n})
    text_ids = tok.encode(EVAL_TEXT).ids
    tloss, tn = window_loss(model, text_ids, seq)
    eos = model.config.eos_token_id
    prompt = ids[:6]
    gen, gap = greedy(model, prompt, 24, eos)
    return {
        "ids": ids,
        "logits_sum": logits.sum().item(),
        "logits_abs_sum": logits.abs().sum().item(),
        "logits_argmax": logits.argmax(-1).tolist(),
        "logits_picks": [[t, v, logits[t, v].item()] for t, v in picks],
        "eval_ids": long_ids,
        "eval": evals,
        "text": {"file": "eval.txt", "ids": text_ids, "seq": seq, "loss": tloss, "predicted": tn},
        "generate": {"prompt": prompt, "max_new_tokens": 24, "eos_id": eos, "ids": gen,
                     "min_top2_gap": gap},
    }


def rewrite_weights(d, fn, dtype=None):
    """Rewrite model.safetensors in d: names mapped by fn (None drops), optional dtype."""
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    out = {}
    for k, v in sd.items():
        k2 = fn(k)
        if k2 is not None:
            out[k2] = (v.to(dtype) if dtype is not None else v).contiguous()
    return out, path


def save(name, model, tok, seq=32, shard=None, dtype=None, post=None):
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    if dtype is not None:
        model = model.to(dtype)
    kw = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(d, safe_serialization=True, **kw)
    if post:
        post(d)
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "eval.txt"), "w") as f:
        f.write(EVAL_TEXT)
    # expected values of the directory as written: reloaded in f32 by transformers
    import transformers as tf
    ref = tf.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    exp = expected(ref, tok, seq)
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
    for junk in ("generation_config.json",):
        p = os.path.join(d, junk)
        if os.path.exists(p):
            os.remove(p)
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print(f"{name}: {size // 1024} KiB, gen gap {exp['generate']['min_top2_gap']:.4f}, "
          f"loss {exp['eval'][0]['loss']:.5f}")


def legacy_gpt2(d):
    """Old GPT-2 files: no `transformer.` prefix, with the attn.bias / masked_bias buffers."""
    sd, path = rewrite_weights(d, lambda k: k[len("transformer."):] if k.startswith(
        "transformer.") else k, torch.float16)
    for i in range(2):
        sd[f"h.{i}.attn.bias"] = torch.tril(torch.ones(MAXPOS, MAXPOS)).view(1, 1, MAXPOS, MAXPOS)
        sd[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(sd, path, metadata={"format": "pt"})


def main():
    gpt_tok = train_tokenizer(["<|endoftext|>"])
    llama_tok = train_tokenizer(["<unk>", "<s>", "</s>"])
    save("gpt2", make_model("gpt2", seed=1), gpt_tok)
    save("gpt2_legacy_fp16", make_model("gpt2", seed=2), gpt_tok, post=legacy_gpt2)
    save("gpt2_sharded_bf16", make_model("gpt2", seed=3), gpt_tok, shard="40KB",
         dtype=torch.bfloat16)
    save("llama", make_model("llama", seed=4, rope_theta=500.0, tie_word_embeddings=False),
         llama_tok, dtype=torch.float16)
    save("llama_tied_bias_bf16", make_model("llama", seed=5, rope_theta=10000.0,
                                            tie_word_embeddings=True, attention_bias=True,
                                            mlp_bias=True), llama_tok, dtype=torch.bfloat16)
    save("mistral", make_model("mistral", seed=6, rope_theta=2000.0, sliding_window=None),
         llama_tok, dtype=torch.float16)
    save("qwen2", make_model("qwen2", seed=7, rope_theta=1000.0, tie_word_embeddings=True),
         llama_tok, dtype=torch.float16)
    example_tokens()


def example_tokens():
    """Token files for examples/hf_finetune (the gpt2 fixture's tokenizer, u16 little-endian)."""
    import numpy as np
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(OUT, "gpt2", "tokenizer.json"))
    d = os.path.join(ROOT, "examples", "hf_finetune", "data")
    os.makedirs(d, exist_ok=True)
    for name, text in (("train.u16", TRAIN_TEXT * 2), ("val.u16", EVAL_TEXT)):
        np.array(tok.encode(text).ids, dtype="<u2").tofile(os.path.join(d, name))
    print(f"wrote {d}")


def check_export(export_dir, name):
    import transformers as tf
    with open(os.path.join(OUT, name, "expected.json")) as f:
        exp = json.load(f)
    model = tf.AutoModelForCausalLM.from_pretrained(export_dir, dtype=torch.float32).eval()
    worst = 0.0
    for e in exp["eval"]:
        loss, n = window_loss(model, exp["eval_ids"], e["seq"])
        rel = abs(loss - e["loss"]) / abs(e["loss"])
        worst = max(worst, rel)
        print(json.dumps({"fixture": name, "seq": e["seq"], "expected": e["loss"], "got": loss,
                          "rel": rel, "predicted": n}))
    ok = worst <= 1e-4
    print(json.dumps({"fixture": name, "export": export_dir, "ok": ok, "worst_rel": worst,
                      "transformers": tf.__version__, "torch": torch.__version__}))
    return 0 if ok else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--check-export", nargs=2, metavar=("DIR", "FIXTURE"))
    ap.add_argument("--example-tokens", action="store_true",
                    help="only write examples/hf_finetune/data/*.u16")
    a = ap.parse_args()
    if a.example_tokens:
        sys.exit(example_tokens())
    sys.exit(check_export(*a.check_export) if a.check_export else main())
