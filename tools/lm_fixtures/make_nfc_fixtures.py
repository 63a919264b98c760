#!/usr/bin/env python3
"""Make the fixtures of tests/lm/test_tokenizer_nfc.c under tests/lm/fixtures/tok/nfc/.

Run by hand, never in CI, with a Python that has the `tokenizers` library:
    /opt/tok-venv/bin/python tools/lm_fixtures/make_nfc_fixtures.py

golden.json: [text, NFC(text), NFD(text)] rows from Python's unicodedata.normalize — every
kind of hard case (precomposed and decomposed letters, Hangul syllables and jamo sequences,
combining marks out of canonical order, singletons, composition exclusions, characters whose
decomposition starts with a mark) and random mixes of them.

nfc.json, nfd_sequence.json and nfc_between.json: the Qwen2 model fixture's byte-level BPE
with the normalizer {"type": "NFC"}, with a Sequence of NFD, a Replace of U+0301 by U+0300
(which shows the decomposition) and NFC, and with an NFC between two Replace stages;
cases.json: the ids `tokenizers` gives them for a set of texts (no
special tokens added). Only characters of Unicode 14 are used, so that any newer library
agrees with the tables.
"""
import json
import os
import random
import unicodedata

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
OUT = os.path.join(ROOT, "tests", "lm", "fixtures", "tok", "nfc")
QWEN2 = os.path.join(ROOT, "tests", "lm", "fixtures", "models", "qwen2", "tokenizer.json")

MARKS = ["\u0300", "\u0301", "\u0302", "\u0303", "\u0308", "\u030A", "\u0323", "\u0327",
         "\u0328", "\u031B", "\u0345", "\u05B0", "\u05BC", "\u093C", "\u0F71", "\u0F72",
         "\u3099", "\u309A", "\u0344", "\u0F73"]
BASES = ["a", "e", "o", "u", "A", "E", "O", "\u00E9", "\u00C5", "\u03B1", "\u03C9", "\u0391",
         "\u1F00", "\u0418", "\u0430", "\u304B", "\u30CF", "\u0928", "\u05D0", "\u0F40",
         "\u1100", "\u1161", "\u11A8", "\uAC00", "\uAC01", " ", "x", "\u212B", "\u2126",
         "\u0958", "\uFB1D", "\u2ADC", "\u0B47", "\u0B3E", "\u0DD9", "\u0DCF", "\u0DDF"]

HARD = [
    "", "plain ASCII text, already NFC.", "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m",
    "cafe\u0301 nai\u0308ve A\u030angstro\u0308m", "e\u0301", "E\u0301\u0301",
    "a\u0323\u0302", "a\u0302\u0323", "e\u0302\u0323\u0301", "e\u0301\u0323\u0302",
    "o\u031b\u0301\u0323", "o\u0323\u0301\u031b", "\u212b", "\u2126 \u212a \u2000\u2001",
    "\u0340\u0341\u0343\u0374\u037e\u0387", "\u1f71\u1f73\u1fbb", "\uf900\uf901\ufa10",
    "\u0958\u0959\u095a\u09dc\ufb1d\ufb2a\u2adc", "\u0344 \u0f73 \u0f75 \u0f81",
    "\u0301 starts with a mark", "\u0301\u0300\u0323", "\u1100\u1161", "\u1100\u1161\u11a8",
    "\uac00\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af", "\ud55c\uad6d\uc5b4",
    "\u1100\u1100\u1161\u1161", "\u11a8\u1161\u1100", "\uac01\u11a8", "\u1100\u0301\u1161",
    "\u304b\u3099 \u30cf\u309a \u304c \u30d1", "\u0b47\u0b3e \u0dd9\u0dcf\u0dca",
    "\u0915\u093c \u0958", "\u05d0\u05b7\u05bc", "\u05d0\u05bc\u05b7",
    "\u1e0b\u0323", "\u1e0d\u0307", "d\u0307\u0323", "\u01c4\u01c5 \ufb01",
    "\u00c7\u0301 \u1e08", "\u03b1\u0313\u0301\u0345", "\u1f84", "\u0391\u0345\u0313",
    "x\u0300\u0315\u0300", "\U0001d15e\U0001d160", "\U0001d157\U0001d165",
    "\U000110ab \U00011099\U000110ba", "\u2000\u2002",
]


def golden():
    rng = random.Random(14)
    rows = list(HARD)
    decomposable = [chr(c) for c in range(0xC0, 0x30000)
                    if unicodedata.decomposition(chr(c))
                    and not unicodedata.decomposition(chr(c)).startswith("<")]
    rows += rng.sample(decomposable, 150)
    rows += [unicodedata.normalize("NFD", c) for c in rng.sample(decomposable, 100)]
    rows += [chr(0xAC00 + rng.randrange(11172)) for _ in range(30)]
    rows += [unicodedata.normalize("NFD", chr(0xAC00 + rng.randrange(11172))) for _ in range(30)]
    for _ in range(200):
        rows.append("".join(rng.choice(BASES if rng.random() < 0.45 else MARKS)
                            for _ in range(rng.randrange(1, 9))))
    return [[t, unicodedata.normalize("NFC", t), unicodedata.normalize("NFD", t)] for t in rows]


def tokenizer_files():
    with open(QWEN2) as f:
        base = json.load(f)
    nfc = dict(base, normalizer={"type": "NFC"})
    seq = dict(base, normalizer={"type": "Sequence", "normalizers": [
        {"type": "NFD"},
        {"type": "Replace", "pattern": {"String": "\u0301"}, "content": "\u0300"},
        {"type": "NFC"}]})
    # NFC between two stages that write: for ASCII text it has nothing to do
    grow = dict(base, normalizer={"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "a"}, "content": "bb"},
        {"type": "NFC"},
        {"type": "Replace", "pattern": {"String": "b"}, "content": "c\u0327"}]})
    return {"nfc.json": nfc, "nfd_sequence.json": seq, "nfc_between.json": grow}


def main():
    os.makedirs(OUT, exist_ok=True)
    rows = golden()
    with open(os.path.join(OUT, "golden.json"), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    texts = HARD + [r[0] for r in rows[len(HARD):len(HARD) + 40]]
    cases = []
    for name, doc in tokenizer_files().items():
        path = os.path.join(OUT, name)
        with open(path, "w") as f:
            json.dump(doc, f, ensure_ascii=False)
        tok = Tokenizer.from_file(path)
        for t in texts:
            cases.append({"tokenizer": name, "text": t,
                          "ids": tok.encode(t, add_special_tokens=False).ids})
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(c) for c in cases) + "\n]\n")
    print("%d golden rows, %d tokenizer cases" % (len(rows), len(cases)))


if __name__ == "__main__":
    main()
