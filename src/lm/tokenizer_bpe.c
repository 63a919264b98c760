/* tokenizer_bpe.c — the BPE model: the vocabulary and merge ranks in open-addressing hash maps,
 * a word's first symbols (its characters, or their <0xNN> byte tokens, or the unknown token),
 * and the merges applied lowest rank first through a binary heap over a linked list of symbols,
 * as `tokenizers` applies them (its stale-entry rule included), so long words cost n log n. */
#include "lm_tok_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the vocabulary ---------------------------------------------------------------------- */

int32_t dt__vocab_get(const dt__vocab *v, const char *s, size_t n) {
    size_t i = dt__tok_hash(s, n) & v->mask;
    for (;; i = (i + 1) & v->mask) {
        uint32_t e = v->slots[i];
        if (!e) return -1;
        int32_t id = (int32_t)(e - 1);
        if (v->len[id] == n && !memcmp(v->strs + v->off[id], s, n)) return id;
    }
}

static dt_status vocab_load(dt__vocab *v, const json_t *vocab, const char *file) {
    if (!json_is_object(vocab))
        return dt_error(DT_ERR_FORMAT, "%s: model.vocab is missing or not an object", file);
    size_t count = json_object_size(vocab), bytes = 0;
    int64_t maxid = -1;
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)vocab, k, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 ||
            json_integer_value(val) >= INT32_MAX - 1)
            return dt_error(DT_ERR_FORMAT, "%s: model.vocab[\"%s\"] is not an id in [0, 2^31)",
                            file, k);
        if (json_integer_value(val) > maxid) maxid = json_integer_value(val);
        bytes += strlen(k);
    }
    if (maxid >= (int64_t)(2 * count + 65536)) /* ids index arrays: they must be dense */
        return dt_error(DT_ERR_FORMAT,
                        "%s: model.vocab has %zu tokens but an id of %lld; "
                        "hint: ids must number the tokens from 0",
                        file, count, (long long)maxid);
    v->nid = (int32_t)(maxid + 1);
    v->count = (int32_t)count;
    size_t nslots = 16;
    while (nslots < count * 2) nslots *= 2;
    v->mask = nslots - 1;
    v->strs = malloc(bytes + 1);
    v->off = malloc(((size_t)v->nid + 1) * sizeof *v->off);
    v->len = calloc((size_t)v->nid + 1, sizeof *v->len);
    v->slots = calloc(nslots, sizeof *v->slots);
    if (!v->strs || !v->off || !v->len || !v->slots)
        return dt_error(DT_ERR_OOM, "%s: out of memory for the vocabulary", file);
    memset(v->off, 0xFF, ((size_t)v->nid + 1) * sizeof *v->off);
    size_t pos = 0;
    json_object_foreach((json_t *)vocab, k, val) {
        int32_t id = (int32_t)json_integer_value(val);
        size_t n = strlen(k);
        if (v->off[id] != UINT64_MAX)
            return dt_error(DT_ERR_FORMAT, "%s: model.vocab gives id %d to two tokens", file, id);
        memcpy(v->strs + pos, k, n);
        v->off[id] = pos;
        v->len[id] = (uint32_t)n;
        pos += n;
        size_t i = dt__tok_hash(k, n) & v->mask;
        while (v->slots[i]) i = (i + 1) & v->mask;
        v->slots[i] = (uint32_t)id + 1;
    }
    return DT_OK;
}

/* ---- merges ------------------------------------------------------------------------------ */

dt__merge_slot *dt__merge_slot_of(const dt__bpe *m, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & m->merge_mask;
    for (;; i = (i + 1) & m->merge_mask) {
        dt__merge_slot *s = &m->merges[i];
        if (s->key == key || s->key == UINT64_MAX) return s;
    }
}

/* The two sides of merge i: "a b" (one space) or ["a", "b"]. */
static dt_status merge_sides(const json_t *mg, size_t i, const char *file, const char **a,
                             size_t *an, const char **b, size_t *bn) {
    if (json_is_string(mg)) {
        const char *s = json_string_value(mg), *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return dt_error(DT_ERR_FORMAT,
                            "%s: model.merges[%zu] \"%s\" is not two tokens "
                            "separated by one space",
                            file, i, s);
        *a = s, *an = (size_t)(sp - s), *b = sp + 1, *bn = strlen(sp + 1);
        return DT_OK;
    }
    if (json_is_array(mg) && json_array_size(mg) == 2 && json_is_string(json_array_get(mg, 0)) &&
        json_is_string(json_array_get(mg, 1))) {
        *a = json_string_value(json_array_get(mg, 0)), *an = strlen(*a);
        *b = json_string_value(json_array_get(mg, 1)), *bn = strlen(*b);
        return DT_OK;
    }
    return dt_error(DT_ERR_FORMAT, "%s: model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]",
                    file, i);
}

static dt_status merges_load(dt__bpe *m, const json_t *merges, const char *file) {
    if (merges && !json_is_array(merges))
        return dt_error(DT_ERR_FORMAT, "%s: model.merges is not an array", file);
    size_t count = merges ? json_array_size(merges) : 0, nslots = 16;
    while (nslots < count * 2) nslots *= 2;
    m->merge_mask = nslots - 1;
    m->merges = malloc(nslots * sizeof *m->merges);
    if (!m->merges) return dt_error(DT_ERR_OOM, "%s: out of memory for the merges", file);
    memset(m->merges, 0xFF, nslots * sizeof *m->merges);
    dt__tbuf joined = {0};
    dt_status st = DT_OK;
    for (size_t i = 0; i < count && !st; i++) {
        const char *a = NULL, *b = NULL;
        size_t an = 0, bn = 0;
        st = merge_sides(json_array_get(merges, i), i, file, &a, &an, &b, &bn);
        if (st) break;
        joined.n = 0;
        if ((st = dt__tbuf_put(&joined, a, an)) || (st = dt__tbuf_put(&joined, b, bn))) break;
        int32_t ia = dt__vocab_get(&m->vocab, a, an), ib = dt__vocab_get(&m->vocab, b, bn);
        int32_t ij = dt__vocab_get(&m->vocab, joined.p, joined.n);
        if (ia < 0 || ib < 0 || ij < 0) {
            st = dt_error(DT_ERR_FORMAT,
                          "%s: model.merges[%zu]: token \"%s\" is not in the "
                          "vocabulary",
                          file, i,
                          ia < 0   ? a
                          : ib < 0 ? b
                                   : joined.p);
            break;
        }
        dt__merge_slot *s = dt__merge_slot_of(m, ia, ib); /* a repeated pair: the later rank wins */
        s->key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
        s->rank = (uint32_t)i;
        s->id = ij;
    }
    free(joined.p);
    return st;
}

static bool null_or(const json_t *v, bool (*ok)(const json_t *)) {
    return !v || json_is_null(v) || ok(v);
}
static bool is_empty_str(const json_t *v) {
    return json_is_string(v) && !json_string_length(v);
}
static bool is_zero(const json_t *v) {
    return json_is_number(v) && json_number_value(v) == 0.0;
}

static bool flag(const json_t *model, const char *key) {
    return json_is_true(json_object_get(model, key));
}

dt_status dt__bpe_load(dt__bpe *m, const json_t *model, const char *file) {
    const char *type = json_string_value(json_object_get(model, "type"));
    if (!json_is_object(model) || !type)
        return dt_error(DT_ERR_FORMAT, "%s: model is missing or has no type", file);
    if (strcmp(type, "BPE"))
        return dt_error(DT_ERR_FORMAT,
                        "%s: model type %s is not supported; hint: dtrain reads "
                        "BPE models (GPT-2 and Llama style)",
                        file, type);
    static const char *unsupported[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2; i++)
        if (!null_or(json_object_get(model, unsupported[i]), is_empty_str))
            return dt_error(DT_ERR_FORMAT, "%s: model.%s is not supported", file, unsupported[i]);
    if (!null_or(json_object_get(model, "dropout"), is_zero))
        return dt_error(DT_ERR_FORMAT,
                        "%s: model.dropout is not supported (encoding would be "
                        "random); hint: set it to null",
                        file);
    dt_status st = vocab_load(&m->vocab, json_object_get(model, "vocab"), file);
    if (!st) st = merges_load(m, json_object_get(model, "merges"), file);
    if (st) return st;
    m->fuse_unk = flag(model, "fuse_unk");
    m->byte_fallback = flag(model, "byte_fallback");
    m->ignore_merges = flag(model, "ignore_merges");
    m->unk = -1;
    const json_t *unk = json_object_get(model, "unk_token");
    if (json_is_string(unk)) {
        m->unk = dt__vocab_get(&m->vocab, json_string_value(unk), json_string_length(unk));
        if (m->unk < 0)
            return dt_error(DT_ERR_FORMAT, "%s: model.unk_token \"%s\" is not in the vocabulary",
                            file, json_string_value(unk));
    }
    for (int b = 0; b < 256; b++) {
        char name[8], ch[4];
        snprintf(name, sizeof name, "<0x%02X>", b);
        m->byte_tok[b] = dt__vocab_get(&m->vocab, name, 6);
        m->mapped_tok[b] =
            dt__vocab_get(&m->vocab, ch, dt__utf8_put(ch, dt__byte_to_cp((uint8_t)b)));
        if (b < 128) m->ascii_tok[b] = dt__vocab_get(&m->vocab, (char *)&(char){(char)b}, 1);
    }
    return DT_OK;
}

void dt__bpe_free(dt__bpe *m) {
    free(m->vocab.strs);
    free(m->vocab.off);
    free(m->vocab.len);
    free(m->vocab.slots);
    free(m->merges);
}
