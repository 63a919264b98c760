#!/usr/bin/env python3
"""Make the tokenizer fixtures under tests/lm/fixtures/tok/ with the real `tokenizers` library.

Run by hand, never in CI:
    python3 -m venv /opt/tok-venv && /opt/tok-venv/bin/pip install tokenizers
    /opt/tok-venv/bin/python tools/lm_fixtures/make_tokenizer_fixtures.py

It trains small tokenizers (a GPT-2-style byte-level BPE, a Llama-style BPE with byte fallback
and a Metaspace pre-tokenizer, and the Prepend + Replace normalizer variant) on the licence
texts Debian ships, writes each as a tokenizer.json, and writes cases.json: for a set of hard
texts, the ids `tokenizers` gives (no special tokens added) and its decoding of them. Texts
are stored as hex so that bytes which are not UTF-8 survive JSON.

Text that is not UTF-8 cannot reach `tokenizers` (it takes str). dtrain encodes each byte that
does not start a valid UTF-8 sequence as a character of its own, of the "other" class (neither
letter, number nor space); the expected ids for those texts are made by putting a private-use
character in each such byte's place, running the library's normalizer, pre-tokenizer and BPE
model on that, and mapping the placeholder back to its byte (its byte-level character, or its
<0xNN> byte-fallback token).

GPT-2's real vocabulary is checked by bench/tokenizer_speed.sh (gpt2_tokenizer_json.py).
"""
import argparse
import glob
import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "lm", "fixtures", "tok")

EXTRA = [
    "Un café à Paris, naïve résumé, Ångström, Ærø, façade, jalapeño, Straße.",
    "中文字符 日本語のテキスト 한국어 텍스트 Русский текст Ελληνικά",
    "emoji 😀 🎉 👍🏽 ✨ and symbols © ® ™ € £ ¥ ½ ² ٣",
    "I'm sure they'll say we'd done it; you're right, it's what we've seen.",
    "numbers 12345 67890 3.14159 1,000,000 2024-01-31 v1.2.3",
    "code: def f(x):\n\treturn x ** 2  # tabs\tand   spaces\n",
]

TEXTS = [
    "Hello world",
    "Hello, world! How's it going? I've been... fine.",
    "they'll we'd I'm you're it's we've 's 've 'S 'LL don't",
    "''s quoted 'word' \"double\" ``back``",
    "numbers 12345 and 3.14159 and 1,000,000 and 2024-01-31",
    "multiple   spaces    here",
    "  leading and trailing  ",
    "new\nlines\n\nand\r\nCRLF\n",
    "tabs\tand\t\tmore\t",
    "emoji 😀🎉👍🏽 and CJK 中文字符 日本語",
    "accents: café naïve résumé Ångström e\u0301",
    "mixed ½ ² ٣ ⅷ numbers",
    "non-breaking\u00a0space\u2003em\u3000ideographic",
    "",
    " ",
    "\n",
    "a" * 300,
    "supercalifragilisticexpialidocious" * 12,
    "The GNU General Public License is a free, copyleft license for software and other kinds "
    "of works.",
    "THIS PROGRAM IS PROVIDED \"AS IS\" WITHOUT WARRANTY OF ANY KIND, EITHER EXPRESSED OR IMPLIED",
    "special <|endoftext|> inside<|endoftext|>text<|endoftext|>",
    "<s>Hello</s> world <unk> and <s> again",
    "a  b   c\n \n  d",
    "fill <mask> here  <mask>, [W] alone, not[W]glued, <R>   right, x <pad> y<pad>",
    "<s>starts with a special token",
    "HELLO'S I'M WE'LL THEY'RE it'S 1234567 12 1 x1y22z333",
    "hello\n\n\nworld  \n x\r\n\r\n y \t\n\tz",
    "(paren) ,comma\ttab ...\n\n!!\n next\u00a0word",
    "edges a\x1cb\x1f c\x85d \u180e e\u200bf \ufeffg \u2029h \x0b\x0ci  \u3000 j\x00k",
    "letters and marks: \u02b0\u0345\u0903 \u2160\u2161 \u3007 \U0001d7d8 \u0e51 \u00aa\u00b5\u00ba",
]

GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

INVALID = [
    b"caf\xe9 au lait",
    b"\xff\xfe bytes \x80 end",
    b"valid \xe4\xb8 truncated \xe4\xb8\xad ok",
    b"\xc0\xaf overlong and \xed\xa0\x80 surrogate",
    b"word\xffword \xff\xff",
]


def corpus():
    lines = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path) and os.path.getsize(path) < 40000:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines.extend(f.read().splitlines(keepends=True))
    return lines + EXTRA * 20


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def train_bytelevel(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=520, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(lines, trainer)
    return tok


def train_llama3(lines):
    """Llama 3's layout: a Split on its regex, then ByteLevel without its own regex."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=520,
                                  special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(lines, trainer)
    d = json.loads(tok.to_str())
    d["model"]["ignore_merges"] = True
    return d


def with_byte_tokens(tok):
    """Llama's layout: <unk> <s> </s>, then <0x00>..<0xFF>, then the learnt vocabulary."""
    d = json.loads(tok.to_str())
    old = sorted(d["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for k, _ in old:
        if k not in vocab:
            vocab[k] = len(vocab)
    d["model"]["vocab"] = vocab
    for t in d["added_tokens"]:
        t["id"] = vocab[t["content"]]
    return d


def train_llama(lines, metaspace):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if metaspace:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    else:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                               normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=70, show_progress=False)
    # train on words split at spaces even for the normalizer variant (as SentencePiece does)
    saved = tok.pre_tokenizer
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    if not metaspace:
        tok.normalizer = None
    tok.train_from_iterator(lines, trainer)
    tok.pre_tokenizer = saved
    d = with_byte_tokens(tok)
    if not metaspace:
        d["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
        d["pre_tokenizer"] = None
        # merges in the older "a b" string form
        d["model"]["merges"] = [" ".join(m) for m in d["model"]["merges"]]
    return d


def expected_invalid(tok, data):
    """Ids for bytes that are not UTF-8: see the module comment."""
    s = data.decode("utf-8", errors="surrogateescape")
    s = "".join(chr(0xE000 + ord(c) - 0xDC00) if 0xDC80 <= ord(c) <= 0xDCFF else c for c in s)
    b2u = bytes_to_unicode()
    if "ByteLevel" not in json.dumps(json.loads(tok.to_str())["pre_tokenizer"]):
        # the whole pipeline on the placeholders; each placeholder's three byte-fallback tokens
        # (byte tokens never merge) become the one byte it stands for
        ids, out = tok.encode(s, add_special_tokens=False).ids, []
        byte_id = {tok.token_to_id("<0x%02X>" % b): b for b in range(256)}
        i = 0
        while i < len(ids):
            tri = [byte_id.get(x) for x in ids[i:i + 3]]
            if len(tri) == 3 and None not in tri:
                c = bytes(tri).decode("utf-8", errors="replace")
                if len(c) == 1 and 0xE080 <= ord(c) <= 0xE0FF:
                    out.append(tok.token_to_id("<0x%02X>" % (ord(c) - 0xE000)))
                    i += 3
                    continue
            out.append(ids[i])
            i += 1
        return out
    # byte-level: the pieces of the library's normalizer and pre-tokenizer, each placeholder's
    # three byte characters put back to its byte's character before the BPE model
    if tok.normalizer is not None:
        s = tok.normalizer.normalize_str(s)
    ids = []
    for p, _ in tok.pre_tokenizer.pre_tokenize_str(s):
        for b in range(0x80, 0x100):
            mapped = "".join(b2u[x] for x in chr(0xE000 + b).encode())
            p = p.replace(mapped, b2u[b])
        ids.extend(t.id for t in tok.model.tokenize(p))
    return ids


def cases_for(name, tok):
    out = []
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False).ids
        out.append({"tokenizer": name, "text_hex": text.encode().hex(), "ids": ids,
                    "decoded_hex": tok.decode(ids, skip_special_tokens=False).encode().hex()})
    for data in INVALID:
        ids = expected_invalid(tok, data)
        out.append({"tokenizer": name, "text_hex": data.hex(), "ids": ids,
                    "decoded_hex": tok.decode(ids, skip_special_tokens=False).encode().hex()})
    return out


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    os.makedirs(OUT, exist_ok=True)
    lines = corpus()
    toks = {}
    bl = train_bytelevel(lines)
    toks["bytelevel.json"] = json.loads(bl.to_str())
    pre = json.loads(bl.to_str())
    pre["pre_tokenizer"]["add_prefix_space"] = True
    pre["model"]["ignore_merges"] = True
    for i, (content, sw, ls, rs) in enumerate([("<mask>", False, True, False),
                                               ("[W]", True, False, False),
                                               ("<R>", False, False, True)]):
        pre["added_tokens"].append({"id": len(pre["model"]["vocab"]) + i, "content": content,
                                    "single_word": sw, "lstrip": ls, "rstrip": rs,
                                    "normalized": False, "special": True})
    toks["bytelevel_prefix.json"] = pre
    toks["llama_metaspace.json"] = train_llama(lines, metaspace=True)
    first = json.loads(json.dumps(toks["llama_metaspace.json"]))
    first["pre_tokenizer"].update(prepend_scheme="first", split=False)
    first["decoder"].update(prepend_scheme="first", split=False)
    toks["llama_first.json"] = first
    # a prepended character keeps the first character's offset 0, so Metaspace's "first"
    # scheme prepends to every piece that starts there
    odd = json.loads(json.dumps(first))
    odd["normalizer"] = {"type": "Prepend", "prepend": "x"}
    odd["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": GPT2_SPLIT}, "behavior": "Isolated",
         "invert": False},
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
         "split": True}]}
    toks["llama_prepend_first.json"] = odd
    norm = train_llama(lines, metaspace=False)
    norm["added_tokens"].append({"id": len(norm["model"]["vocab"]), "content": "<pad>",
                                 "single_word": False, "lstrip": False, "rstrip": False,
                                 "normalized": True, "special": False})
    toks["llama_normalizer.json"] = norm
    toks["llama3.json"] = train_llama3(lines)
    cases = []
    for name, d in toks.items():
        text = json.dumps(d, ensure_ascii=False, separators=(",", ":"))
        with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
            f.write(text)
        cases += cases_for(name, Tokenizer.from_str(text))
    with open(os.path.join(OUT, "cases.json"), "w") as f:  # one case a line
        f.write('{"made_with": "tokenizers %s", "cases": [\n' % __import__("tokenizers").__version__)
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n]}\n")
    print("wrote", len(cases), "cases to", OUT)


if __name__ == "__main__":
    main()
