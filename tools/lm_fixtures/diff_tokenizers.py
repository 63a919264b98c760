#!/usr/bin/env python3
"""diff_tokenizers.py BUILD_DIR [--seed S] [--per-fixture N] — differential check of dtrain's
tokenizer against the `tokenizers` library on random pipelines. Run by hand, never in CI:

    /opt/tok-venv/bin/python tools/lm_fixtures/diff_tokenizers.py build

Each fixture under tests/lm/fixtures/tok/ gets N variants with random pre-tokenizer sequences
(Split on GPT-2's or Llama 3's pattern, Metaspace with any prepend scheme, ByteLevel), decoder
sequences, Prepend / Replace normalizers, added tokens with random flags, ignore_merges and
byte_fallback; the library labels
random texts (special tokens, spaces, newlines, emoji, digits) for each variant it accepts
without panicking, and BUILD_DIR/test_tokenizer checks them all, from a scratch copy of the
fixture tree. Exit status: test_tokenizer's."""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "..", "tests", "lm", "fixtures", "tok")
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PIECES = ["a", "b", "ab", " ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "é", "😀", "中", "1", "1234",
          "<s>", "</s>", "<|endoftext|>", "▁", "Ġ", "\u00a0", "<0x41>", "the", " the", "ing",
          "<unk>", "<pad>", "<mask>", "[W]", "<R>", "<|begin_of_text|>"]


def split(pattern):
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
            "invert": False}


def pre_tokenizer(r):
    meta = {"type": "Metaspace", "replacement": r.choice(["▁", "a", "é"]),
            "prepend_scheme": r.choice(["always", "first", "never"]), "split": r.random() < .5}
    seq = [r.choice([split(GPT2), split(LLAMA3), meta]) for _ in range(r.randrange(3))]
    if r.random() < .6:
        seq.append({"type": "ByteLevel", "add_prefix_space": r.random() < .5,
                    "trim_offsets": True, "use_regex": r.random() < .5})
    if not seq:
        return None
    return {"type": "Sequence", "pretokenizers": seq} if r.random() < .7 else seq[0]


def decoder(r):
    kinds = [
        lambda: {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                 "use_regex": True},
        lambda: {"type": "Metaspace", "replacement": "▁", "split": True,
                 "prepend_scheme": r.choice(["always", "first", "never"])},
        lambda: {"type": "Replace", "pattern": {"String": r.choice(["▁", "a", "é"])},
                 "content": r.choice([" ", "", "xx"])},
        lambda: {"type": "ByteFallback"},
        lambda: {"type": "Fuse"},
        lambda: {"type": "Strip", "content": r.choice([" ", "▁"]), "start": r.randrange(3),
                 "stop": r.randrange(3)},
    ]
    return {"type": "Sequence", "decoders": [r.choice(kinds)() for _ in range(r.randrange(1, 6))]}


def variant(base, r):
    d = json.loads(json.dumps(base))
    d["pre_tokenizer"], d["decoder"] = pre_tokenizer(r), decoder(r)
    if r.random() < .3:
        d["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": r.choice(["▁", "x"])},
            {"type": "Replace", "pattern": {"String": " "}, "content": r.choice(["▁", "", "  "])}]}
    for _ in range(r.randrange(3) if r.random() < .4 else 0):
        d["added_tokens"].append({
            "id": len(d["model"]["vocab"]) + len(d["added_tokens"]),
            "content": r.choice(["<x>", "ab", " ", "▁a", "é", "[W]", "\n", "the"]),
            "single_word": r.random() < .3, "lstrip": r.random() < .3, "rstrip": r.random() < .3,
            "normalized": r.random() < .5, "special": r.random() < .5})
    if r.random() < .3:
        d["model"]["ignore_merges"] = True
    if r.random() < .3:
        d["model"]["byte_fallback"] = not d["model"].get("byte_fallback")
    return d


def label(tok, name, r, cases):
    for _ in range(3):
        text = "".join(r.choice(PIECES) for _ in range(r.randrange(40)))
        try:
            ids = tok.encode(text, add_special_tokens=False).ids
            decoded = tok.decode(ids, skip_special_tokens=False)
        except BaseException:  # the library panics on some Strip settings
            continue
        case = {"tokenizer": name, "text_hex": text.encode().hex(), "ids": ids}
        if "\0" not in decoded:
            case["decoded_hex"] = decoded.encode().hex()
        cases.append(case)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--per-fixture", type=int, default=120)
    args = ap.parse_args()
    r = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="dtrain-tokdiff.")
    out = os.path.join(work, "tests", "lm", "fixtures", "tok")
    shutil.copytree(FIX, out)
    cases, n = [], 0
    for name in sorted(os.listdir(FIX)):
        if not name.endswith(".json") or name == "cases.json":
            continue
        with open(os.path.join(FIX, name), encoding="utf-8") as f:
            base = json.load(f)
        for _ in range(args.per_fixture):
            text = json.dumps(variant(base, r), ensure_ascii=False)
            try:
                tok = Tokenizer.from_str(text)
            except BaseException:
                continue
            vname = "v%05d.json" % n
            n += 1
            with open(os.path.join(out, vname), "w", encoding="utf-8") as f:
                f.write(text)
            label(tok, vname, r, cases)
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"cases": cases}, f)
    print("%d variants, %d cases in %s" % (n, len(cases), work))
    rc = subprocess.run([os.path.join(args.build, "test_tokenizer")],
                        env=dict(os.environ, DT_SOURCE_DIR=work)).returncode
    if rc == 0:
        shutil.rmtree(work)
    sys.exit(rc)


if __name__ == "__main__":
    main()
