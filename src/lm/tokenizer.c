/* tokenizer.c — a tokenizer.json loaded into a pipeline and run: the added tokens split out
 * of the raw text (those marked normalized: false), the normalizers on each piece between them,
 * the normalized added tokens split out of that, then the pre-tokenizers and the BPE model
 * (tokenizer_stages.c, tokenizer_bpe.c, tokenizer_merge.c). The post-processor is read but not
 * run: encode adds no special tokens. */
#include "lm_tok_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dt_status gap_pretok(dt__enc *e, const char *s, size_t n, size_t head) {
    return dt__pretok_run(e, 0, s, n, head);
}

/* A piece between raw added tokens: normalized, then split at the normalized added tokens. */
static dt_status gap_normalize(dt__enc *e, const char *s, size_t n, size_t head) {
    if (!n) return DT_OK;
    const char *out;
    dt_status r = DT_OK;
    if (head)
        r = dt__normalize(e->t, s, head, e->norm, &out, &head); /* the first character's form */
    if (!r) r = dt__normalize(e->t, s, n, e->norm, &s, &n);
    return r ? r : dt__split_added(e, s, n, true, head, gap_pretok);
}

dt_status dt_tokenizer_encode(dt_tokenizer *t, const char *text, size_t len, int32_t **ids,
                              size_t *n) {
    dt__tids out = {0};
    dt__enc e = {.t = t, .out = &out};
    uint32_t cp;
    size_t head = text && len ? dt__utf8_char((const uint8_t *)text, len, &cp) : 0;
    dt_status r = dt__split_added(&e, text ? text : "", text ? len : 0, false, head, gap_normalize);
    dt__enc_free(&e);
    if (r) {
        free(out.p);
        *ids = NULL, *n = 0;
        return r;
    }
    *ids = out.p, *n = out.n;
    return DT_OK;
}

/* ---- loading ----------------------------------------------------------------------------- */

/* The post-processor only adds special tokens, which encode never does: known kinds pass. */
static dt_status post_check(const json_t *pp, const char *file) {
    static const char *known[] = {"TemplateProcessing", "ByteLevel", "RobertaProcessing",
                                  "BertProcessing", "Sequence"};
    if (!pp || json_is_null(pp)) return DT_OK;
    const char *type = json_string_value(json_object_get(pp, "type"));
    for (size_t i = 0; type && i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(type, known[i])) return DT_OK;
    return dt_error(DT_ERR_FORMAT, "%s: post_processor type %s is not supported", file,
                    type ? type : "(none)");
}

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    dt__tbuf b = {0};
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (dt__tbuf_put(&b, chunk, got)) break;
    bool bad = ferror(f) || !b.p;
    fclose(f);
    if (bad) {
        free(b.p);
        return NULL;
    }
    *n = b.n;
    return b.p;
}

/* The BOS / EOS from tokenizer_config.json beside the file, else from a list of usual names. */
static int32_t special_token(const dt_tokenizer *t, const json_t *conf, const char *key,
                             const char *const *names) {
    const json_t *v = json_object_get(conf, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    int32_t id = json_is_string(v) ? dt_tokenizer_token_id(t, json_string_value(v)) : -1;
    for (int i = 0; id < 0 && names[i]; i++)
        for (int k = 0; k < t->nadded && id < 0; k++)
            if (t->added[k].special && !strcmp(t->added[k].text, names[i])) id = t->added[k].id;
    return id;
}

static void find_bos_eos(dt_tokenizer *t) {
    static const char *const eos[] = {"</s>", "<|endoftext|>", "<|end_of_text|>", NULL};
    static const char *const bos[] = {"<s>", "<|begin_of_text|>", "<|endoftext|>", NULL};
    char *conf_path = malloc(strlen(t->path) + 32);
    json_t *conf = NULL;
    if (conf_path) {
        strcpy(conf_path, t->path);
        char *slash = strrchr(conf_path, '/');
        strcpy(slash ? slash + 1 : conf_path, "tokenizer_config.json");
        conf = json_load_file(conf_path, 0, NULL);
    }
    t->eos = special_token(t, conf, "eos_token", eos);
    t->bos = special_token(t, conf, "bos_token", bos);
    json_decref(conf);
    free(conf_path);
}

static dt_status load_parts(dt_tokenizer *t, const json_t *root, const char *file) {
    if (!json_is_object(root)) return dt_error(DT_ERR_FORMAT, "%s: not a JSON object", file);
    dt_status r = dt__bpe_load(&t->bpe, json_object_get(root, "model"), file);
    if (!r)
        r = dt__stages_load(&t->norm, &t->nnorm, json_object_get(root, "normalizer"),
                            DT__STAGE_NORM, file);
    if (!r)
        r = dt__stages_load(&t->pretok, &t->npretok, json_object_get(root, "pre_tokenizer"),
                            DT__STAGE_PRETOK, file);
    if (!r)
        r = dt__stages_load(&t->dec, &t->ndec, json_object_get(root, "decoder"), DT__STAGE_DEC,
                            file);
    if (!r) r = post_check(json_object_get(root, "post_processor"), file);
    if (!r) r = dt__added_load(t, json_object_get(root, "added_tokens"), file);
    return r;
}

dt_status dt_tokenizer_load(dt_tokenizer **out, const char *path) {
    *out = NULL;
    size_t n = 0;
    char *text = read_file(path, &n);
    if (!text)
        return dt_error(DT_ERR_IO,
                        "%s: cannot read: %s; hint: a model directory holds its "
                        "tokenizer as tokenizer.json",
                        path, strerror(errno ? errno : EIO));
    json_error_t je;
    json_t *root = json_loadb(text, n, 0, &je);
    dt_tokenizer *t = calloc(1, sizeof *t);
    dt_status r = DT_OK;
    if (!root)
        r = dt_error(DT_ERR_FORMAT, "%s:%d:%d: not JSON: %s", path, je.line, je.column, je.text);
    else if (!t || !(t->path = strdup(path)))
        r = dt_error(DT_ERR_OOM, "%s: out of memory", path);
    else
        r = load_parts(t, root, path);
    if (!r) {
        t->digest = dt__tok_hash(text, n);
        find_bos_eos(t);
    }
    json_decref(root);
    free(text);
    if (r) {
        dt_tokenizer_free(t);
        return r;
    }
    *out = t;
    return DT_OK;
}

void dt_tokenizer_free(dt_tokenizer *t) {
    if (!t) return;
    dt__bpe_free(&t->bpe);
    dt__stages_free(t->norm, t->nnorm);
    dt__stages_free(t->pretok, t->npretok);
    dt__stages_free(t->dec, t->ndec);
    for (int i = 0; i < t->nadded; i++) {
        if (t->added[i].match != t->added[i].text) free(t->added[i].match);
        free(t->added[i].text);
    }
    free(t->added);
    free(t->added_of);
    dt__wcache_free(&t->cache);
    free(t->path);
    free(t);
}

int32_t dt_tokenizer_vocab_size(const dt_tokenizer *t) {
    return t->vocab_size;
}
int32_t dt_tokenizer_eos(const dt_tokenizer *t) {
    return t->eos;
}
int32_t dt_tokenizer_bos(const dt_tokenizer *t) {
    return t->bos;
}

int32_t dt_tokenizer_token_id(const dt_tokenizer *t, const char *token) {
    size_t n = strlen(token);
    for (int k = 0; k < t->nadded; k++)
        if (t->added[k].len == n && !memcmp(t->added[k].text, token, n)) return t->added[k].id;
    return dt__vocab_get(&t->bpe.vocab, token, n);
}
