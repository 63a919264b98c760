/* lm_tok_impl.h — what the tokenizer files share: byte buffers, the vocabulary and merge hash
 * maps, the stages of a pipeline (each found by its JSON `type` in a table), the per-word cache
 * and the Unicode classes the byte-level split needs. */
#ifndef DT_LM_TOK_IMPL_H
#define DT_LM_TOK_IMPL_H

#include "dtrain/tokenizer.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- growable buffers -------------------------------------------------------------------- */

typedef struct dt__tbuf {
    char *p;
    size_t n, cap;
} dt__tbuf;

typedef struct dt__tids {
    int32_t *p;
    size_t n, cap;
} dt__tids;

dt_status dt__tbuf_put(dt__tbuf *b, const void *s, size_t n);
/* Append s with every occurrence of pat (plen > 0, left to right, not overlapping) replaced. */
dt_status dt__replace_all(dt__tbuf *out, const char *s, size_t n, const char *pat, size_t plen,
                          const char *with, size_t wlen);
dt_status dt__tids_put(dt__tids *v, const int32_t *ids, size_t n);
/* The bytes of a text file, or of a directory's regular files in name order (text_bytes.c):
 * *out (heap, *n_out bytes). DT_ERR_IO naming the file; an empty directory is one. */
dt_status dt__text_bytes(const char *path, char **out, size_t *n_out);

/* ---- Unicode ----------------------------------------------------------------------------- */

/* Character classes of the byte-level split: letter (\p{L}), number (\p{N}), white space
 * (\s), anything else (including a byte that is not UTF-8). */
enum { DT__UC_OTHER = 0, DT__UC_LETTER, DT__UC_NUMBER, DT__UC_SPACE };

/* Length (1-4) of the character at s[0] (n > 0 bytes left) and its class; a byte that does not
 * start a complete, shortest-form UTF-8 sequence of a scalar value is one character of class
 * OTHER. *cp gets the code point (or 0xFFFFFFFF for such a byte). */
size_t dt__utf8_char(const uint8_t *s, size_t n, uint32_t *cp);
int dt__uclass(uint32_t cp);
/* Append s as UTF-8 with every invalid sequence replaced by U+FFFD, as Rust's
 * String::from_utf8_lossy does. */
dt_status dt__utf8_lossy(dt__tbuf *out, const uint8_t *s, size_t n);

/* GPT-2's byte <-> character map (printable bytes map to themselves, the rest to U+0100...). */
uint32_t dt__byte_to_cp(uint8_t b);
int dt__cp_to_byte(uint32_t cp); /* -1 if cp is not one of the 256 */
size_t dt__utf8_put(char out[4], uint32_t cp);

/* ---- the BPE model ----------------------------------------------------------------------- */

typedef struct dt__vocab {
    char *strs;      /* every token's bytes, one after another */
    uint64_t *off;   /* by id: offset into strs; UINT64_MAX for an id with no token */
    uint32_t *len;   /* by id */
    int32_t nid;     /* one past the largest id */
    int32_t count;   /* tokens (nid when the ids are dense, as they are in practice) */
    uint32_t *slots; /* open addressing: id + 1, 0 empty */
    size_t mask;
} dt__vocab;

int32_t dt__vocab_get(const dt__vocab *v, const char *s, size_t n);

typedef struct dt__merge_slot {
    uint64_t key; /* (left id << 32) | right id; UINT64_MAX empty */
    uint32_t rank;
    int32_t id;
} dt__merge_slot;

typedef struct dt__bpe {
    dt__vocab vocab;
    dt__merge_slot *merges;
    size_t merge_mask;
    int32_t unk; /* -1 if none */
    bool fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_tok[256];   /* <0xNN> ids, -1 if absent */
    int32_t mapped_tok[256]; /* the byte-level character of each byte as a token, -1 if absent */
    int32_t ascii_tok[128];  /* one-byte tokens */
} dt__bpe;

/* The slot of the pair (a, b): its merge, or the empty slot where it would go. */
dt__merge_slot *dt__merge_slot_of(const dt__bpe *m, int32_t a, int32_t b);

/* Parse the "model" object (a BPE). On error a DT_ERR_FORMAT naming `file` and the part. */
dt_status dt__bpe_load(dt__bpe *m, const json_t *model, const char *file);
void dt__bpe_free(dt__bpe *m);

/* ---- stages ------------------------------------------------------------------------------ */

struct dt__enc;
typedef struct dt__stage dt__stage;

/* Normalizer: append s transformed to out. */
typedef dt_status (*dt__norm_fn)(const dt__stage *st, const char *s, size_t n, dt__tbuf *out);
/* Pre-tokenizer number `idx`: split s into pieces and hand each to dt__pretok_run(idx + 1).
 * head: how many leading bytes of s stand for the text's first character (0: none). */
typedef dt_status (*dt__pretok_fn)(struct dt__enc *e, int idx, const char *s, size_t n,
                                   size_t head);

/* A list of token strings the decoders rewrite in turn. */
typedef struct dt__toklist {
    dt__tbuf bytes;
    size_t *off, *len;
    size_t n, cap;
} dt__toklist;
dt_status dt__toklist_add(dt__toklist *l, const char *s, size_t n);
typedef dt_status (*dt__dec_fn)(const dt__stage *st, const dt__toklist *in, dt__toklist *out);

/* A split pattern written out by hand: the end of its match at i (i < n; always > i). */
typedef size_t (*dt__split_fn)(const char *s, size_t n, size_t i);
/* The hand-written form of a Split pre-tokenizer's regex, NULL if it is not one we know. */
dt__split_fn dt__split_find(const char *regex);
/* GPT-2's pattern (also the ByteLevel pre-tokenizer's). */
size_t dt__split_gpt2(const char *s, size_t n, size_t i);

/* One stage of any kind: its table row's function and the settings it reads. */
struct dt__stage {
    const char *type;
    dt__norm_fn norm;
    dt__pretok_fn pretok;
    dt__dec_fn dec;
    char *a, *b; /* strings: Prepend's text, Replace's pattern / content, Metaspace's
                    replacement, Strip's content */
    size_t alen, blen;
    int prepend;        /* Metaspace: 0 never, 1 always, 2 first; ByteLevel: add_prefix_space */
    bool flag;          /* Metaspace: split; ByteLevel: use_regex */
    int start, stop;    /* Strip */
    dt__split_fn split; /* Split */
};

typedef enum { DT__STAGE_NORM, DT__STAGE_PRETOK, DT__STAGE_DEC } dt__stage_kind;

/* A row of a stage table: the JSON type, how its settings are read (`where` names the stage in
 * messages), and its function. */
typedef struct dt__stage_row {
    const char *type;
    dt_status (*parse)(dt__stage *st, const json_t *node, const char *where, const char *file);
    dt__norm_fn norm;
    dt__pretok_fn pretok;
    dt__dec_fn dec;
} dt__stage_row;

/* Replace's settings, {"pattern": {"String": a}, "content": b}, for the normalizer and the
 * decoder alike; a Regex pattern is refused. */
dt_status dt__parse_replace(dt__stage *st, const json_t *node, const char *where, const char *file);
/* Metaspace's replacement character (default U+2581), pre-tokenizer and decoder alike. */
dt_status dt__parse_replacement(dt__stage *st, const json_t *node, const char *where,
                                const char *file);
/* The decoders' table (tokenizer_decode.c). */
const dt__stage_row *dt__dec_rows(size_t *n);    /* tokenizer_decode.c's table */
const dt__stage_row *dt__norm_rows(size_t *n);   /* tokenizer_stages.c's tables */
const dt__stage_row *dt__pretok_rows(size_t *n);
/* A string member `key` of a stage, copied to *out (NULL member: def, or an error if NULL). */
dt_status dt__stage_str(char **out, size_t *n, const json_t *node, const char *key, const char *def,
                        const char *where, const char *file);

/* Parse the tokenizer.json member `key` (null or a stage or a Sequence of them) into a flat
 * list of stages, each type looked up in the kind's table; an unknown type is refused by name. */
dt_status dt__stages_load(dt__stage **out, int *n, const json_t *node, dt__stage_kind kind,
                          const char *file);
void dt__stages_free(dt__stage *s, int n);

/* ---- the tokenizer ----------------------------------------------------------------------- */

typedef struct dt__added {
    char *text;
    size_t len;
    char *match; /* what is matched: text, or for a normalized token text normalized */
    size_t mlen;
    int32_t id;
    bool special, normalized, lstrip, rstrip, single_word;
    bool matched; /* split out of text (not when a special token has the same content) */
} dt__added;

/* The per-word cache: word bytes -> ids. */
typedef struct dt__wcache {
    uint64_t *hash;  /* by slot; 0 empty */
    uint32_t *entry; /* by slot: entry index */
    dt__tbuf keys;
    dt__tids ids;
    size_t *key_off, *ids_off; /* by entry (n + 1 offsets) */
    uint32_t *key_len, *ids_len;
    size_t n, cap, mask;
} dt__wcache;

/* The scratch state of one encode call. */
typedef struct dt__enc {
    dt_tokenizer *t;
    dt__tids *out;
    dt__tbuf scratch[8]; /* one per pre-tokenizer stage */
    dt__tbuf norm[2];    /* the normalizers' input and output */
    dt__tbuf mapped;
    /* BPE symbols and heap */
    int32_t *sym, *prev, *next;
    uint32_t *slen;
    struct dt__heap_item *heap;
    size_t cap, hcap;
} dt__enc;

struct dt_tokenizer {
    char *path;
    dt__bpe bpe;
    dt__stage *norm, *pretok, *dec;
    int nnorm, npretok, ndec;
    dt__added *added;
    int nadded;
    int32_t *added_of;        /* by id (vocab_size): index into added, -1 none */
    bool added_first[2][256]; /* [normalized] first bytes of the added tokens */
    bool has_added[2];        /* [normalized] any added token of that kind */
    int32_t bos, eos, vocab_size;
    uint64_t digest; /* of the vocabulary, merges and stages: the text dataset's cache key */
    dt__wcache cache;
};

/* head: how many leading bytes of the piece stand for the text's first character (they keep
 * its original offset 0, as `tokenizers` aligns them); 0 for a piece that starts later. */
typedef dt_status (*dt__gap_fn)(dt__enc *e, const char *s, size_t n, size_t head);
/* Split the set of added tokens (normalized or not) out of s, each one's id to e->out, the
 * text between them to gap() (tokenizer_added.c). */
dt_status dt__split_added(dt__enc *e, const char *s, size_t n, bool norm, size_t head,
                          dt__gap_fn gap);
/* Read added_tokens (null: none) with the library's id rules; sets t->vocab_size. */
dt_status dt__added_load(dt_tokenizer *t, const json_t *list, const char *file);
/* Run the normalizers on s (n > 0) through the two buffers; *out points at the result. */
dt_status dt__normalize(const dt_tokenizer *t, const char *s, size_t n, dt__tbuf bufs[2],
                        const char **out, size_t *nout);

/* Run pre-tokenizer stage idx (or the model when idx == npretok) on a piece. */
dt_status dt__pretok_run(dt__enc *e, int idx, const char *s, size_t n, size_t head);
/* BPE of one word (mapped: through GPT-2's byte map) appended to e->out, via the cache. */
dt_status dt__bpe_word(dt__enc *e, const char *s, size_t n, bool mapped);
void dt__wcache_free(dt__wcache *c);
void dt__enc_free(dt__enc *e);

uint64_t dt__tok_hash(const void *p, size_t n);

#endif
