/*
 * dtrain/tokenizer.h — Hugging Face tokenizer.json read and run in C (the lm layer).
 *
 * A tokenizer is the pipeline tokenizer.json spells: added tokens split out first, then the
 * normalizer, the pre-tokenizer and the BPE model; decoding runs the decoder. Supported: the
 * byte-level BPE of GPT-2 (ByteLevel pre-tokenizer and decoder) and the SentencePiece-style
 * BPE of Llama (Metaspace pre-tokenizer or the Prepend + Replace normalizer, byte fallback,
 * the Replace / ByteFallback / Fuse / Strip decoders). The ids are those the `tokenizers`
 * library gives with add_special_tokens=False. Anything else is refused at load with a message
 * naming the part (docs/lm.md, "Tokenizers").
 */
#ifndef DT_TOKENIZER_H
#define DT_TOKENIZER_H

#include "dtrain/base.h"
#include "dtrain/data.h"

#include <stddef.h>
#include <stdint.h>

typedef struct dt_tokenizer dt_tokenizer;

/* Read a tokenizer.json (and the tokenizer_config.json beside it, if any, for the BOS / EOS
 * tokens). DT_ERR_IO (cannot read), DT_ERR_FORMAT (not JSON, a malformed part, or a part that is
 * not supported: the message names the file and the part). *out is NULL on error. */
DT_API dt_status dt_tokenizer_load(dt_tokenizer **out, const char *tokenizer_json_path);
DT_API void dt_tokenizer_free(dt_tokenizer *t);

/* Encode len bytes of text (need not be UTF-8 nor NUL-terminated; bytes that are not UTF-8
 * are encoded one by one as byte-level BPE does). *ids (malloc'd; the caller frees it with
 * free(), NULL when *n is 0) gets *n ids; no BOS/EOS is added. Keeps a per-word cache in t, so
 * one tokenizer must not encode on two threads at once. DT_ERR_OOM. */
DT_API dt_status dt_tokenizer_encode(dt_tokenizer *t, const char *text, size_t len, int32_t **ids,
                                     size_t *n);
/* Decode n ids to a NUL-terminated string (*text malloc'd, the caller frees it), special tokens
 * kept, as `tokenizers`' decode(ids, skip_special_tokens=False); ids the tokenizer does not know
 * are skipped as it skips them (a decoded NUL byte ends the string early). DT_ERR_OOM. */
DT_API dt_status dt_tokenizer_decode(const dt_tokenizer *t, const int32_t *ids, size_t n,
                                     char **text);

/* One past the largest id of the vocabulary and the added tokens (an embedding's row count). */
DT_API int32_t dt_tokenizer_vocab_size(const dt_tokenizer *t);
/* The end / beginning of sequence token: tokenizer_config.json's eos_token / bos_token, else
 * the first added special token among </s>, <|endoftext|>, <|end_of_text|> (EOS) or <s>,
 * <|begin_of_text|>, <|endoftext|> (BOS); -1 if none. */
DT_API int32_t dt_tokenizer_eos(const dt_tokenizer *t);
DT_API int32_t dt_tokenizer_bos(const dt_tokenizer *t);
/* The id of a token's exact text (an added token or the model's vocabulary); -1 if none. */
DT_API int32_t dt_tokenizer_token_id(const dt_tokenizer *t, const char *token);

/* ---- text datasets -------------------------------------------------------------------------- */

/* How dt_dataset_text reads its file. Zero-initialise, then set what differs. */
typedef struct dt_text_dataset_opts {
    const char *jsonl_field; /* NULL: the file is plain text, one document; else the file is
                                JSON lines and each line's string member of this name is a
                                document ("text" is the usual one) */
    const char *cache_dir;   /* where the token file is cached (NULL: beside the text file) */
    int64_t block_size;      /* T of dt_dataset_tokens (> 0) */
    int64_t stride;          /* S of dt_dataset_tokens (<= 0: T) */
    double begin, end;       /* the part of the tokens used, as fractions of their count:
                                [begin, end) (both 0: all), e.g. [0, 0.9) and [0.9, 1) for a
                                training and a validation split */
} dt_text_dataset_opts;

/* A dt_dataset_tokens dataset ("x", "y" i64 (T)) over the text of text_path tokenized with
 * tok, the EOS token (if the tokenizer has one) after every document. tok NULL: the bytes are
 * the tokens (vocabulary 256, a character-level model's), read into memory, nothing cached;
 * text_path may then be a directory, whose regular files (not symlinks) are read one after
 * another in name order. The tokens are written
 * once to cache_dir/<name>.<key>.tok.i32 (key: a hash of the text file's size and mtime, the
 * field, the bytes of the tokenizer.json, and the format version) and reused by later
 * calls (processes that build it at once each write their own temporary, renamed into place
 * atomically). NULL with DT_ERR_IO (cannot read or write), DT_ERR_FORMAT (a JSON line that is not
 * an object with a string member `jsonl_field`: the message names the file and line), or the errors
 * of dt_dataset_tokens (too few tokens for T). */
DT_API dt_dataset *dt_dataset_text(const char *text_path, dt_tokenizer *tok,
                                   const dt_text_dataset_opts *opts);

#endif
