#!/usr/bin/env python3
"""Make tests/lm/fixtures/tok/qwen2_split.json and its cases in cases.json.

Qwen2's tokenizer.json splits with Llama 3's regex except for digits: one digit a piece
(\\p{N}) where Llama 3 takes up to three (\\p{N}{1,3}). The fixture is the committed
llama3.json with Qwen2's pattern and an NFC normalizer (as Qwen2 ships it); its expected ids
come from the `tokenizers` library. Run by hand (not in CI), after make_tokenizer_fixtures.py:

    /opt/tok-venv/bin/python tools/lm_fixtures/make_qwen2_split_fixture.py
"""
import json
import os
import sys

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tokenizer_fixtures as base  # noqa: E402  (TEXTS, INVALID, cases_for)

QWEN2_SPLIT = base.LLAMA3_SPLIT.replace(r"\p{N}{1,3}", r"\p{N}")
NAME = "qwen2_split.json"
DIGITS = ["12345 67", "2024-12-07: 3.14159, 1e10", "x1y22z333", "١٢٣ and ４５６"]


def main():
    assert QWEN2_SPLIT != base.LLAMA3_SPLIT
    with open(os.path.join(base.OUT, "llama3.json"), encoding="utf-8") as f:
        d = json.load(f)
    d["normalizer"] = {"type": "NFC"}
    # digit merges ("12", "123", "34"), so that one digit a piece and up to three give
    # different ids (the trained vocabulary has no digit pairs)
    vocab, merges = d["model"]["vocab"], d["model"]["merges"]
    for a, b in [("1", "2"), ("12", "3"), ("3", "4")]:
        vocab[a + b] = len(vocab)
        merges.append([a, b])
    split = d["pre_tokenizer"]["pretokenizers"][0]
    split["pattern"] = {"Regex": QWEN2_SPLIT}
    text = json.dumps(d, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(base.OUT, NAME), "w", encoding="utf-8") as f:
        f.write(text)
    tok = Tokenizer.from_str(text)
    base.TEXTS = list(base.TEXTS) + DIGITS
    new = base.cases_for(NAME, tok)
    path = os.path.join(base.OUT, "cases.json")
    with open(path) as f:
        old = json.load(f)
    cases = [c for c in old["cases"] if c["tokenizer"] != NAME] + new
    with open(path, "w") as f:  # one case a line
        f.write('{"made_with": "%s", "cases": [\n' % old["made_with"])
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n]}\n")
    print("wrote", len(new), "cases for", NAME)


if __name__ == "__main__":
    main()
