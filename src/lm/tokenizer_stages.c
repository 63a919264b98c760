/* tokenizer_stages.c — the normalizers and pre-tokenizers, each a row of a table found by its
 * tokenizer.json `type`, with the parsing helpers the decoders share; tokenizer_pipeline.c
 * loads them. The split patterns themselves are in tokenizer_split.c. */
#include "lm_tok_impl.h"
#include "unicode_nfc_impl.h"

#include <stdlib.h>
#include <string.h>

dt_status dt__stage_str(char **out, size_t *n, const json_t *node, const char *key, const char *def,
                        const char *where, const char *file) {
    const json_t *v = json_object_get(node, key);
    const char *s = json_is_string(v) ? json_string_value(v) : def;
    if (!s || (v && !json_is_null(v) && !json_is_string(v)))
        return dt_error(DT_ERR_FORMAT, "%s: %s.%s is missing or not a string", file, where, key);
    *n = json_is_string(v) ? json_string_length(v) : strlen(s);
    *out = malloc(*n + 1);
    if (!*out) return dt_error(DT_ERR_OOM, "%s: out of memory", file);
    memcpy(*out, s, *n);
    (*out)[*n] = 0;
    return DT_OK;
}

static bool bool_or(const json_t *node, const char *key, bool def) {
    const json_t *v = json_object_get(node, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

/* ---- normalizers ------------------------------------------------------------------------- */

static dt_status parse_prepend(dt__stage *st, const json_t *node, const char *where,
                               const char *file) {
    return dt__stage_str(&st->a, &st->alen, node, "prepend", NULL, where, file);
}

static dt_status norm_prepend(const dt__stage *st, const char *s, size_t n, dt__tbuf *out) {
    dt_status r = n ? dt__tbuf_put(out, st->a, st->alen) : DT_OK; /* an empty string stays */
    return r ? r : dt__tbuf_put(out, s, n);
}

/* Replace's pattern {"String": ...}; a Regex pattern is refused by name. */
dt_status dt__parse_replace(dt__stage *st, const json_t *node, const char *where,
                            const char *file) {
    const json_t *pat = json_object_get(node, "pattern");
    if (json_object_get(pat, "Regex"))
        return dt_error(DT_ERR_FORMAT,
                        "%s: %s type Replace with a Regex pattern is not "
                        "supported (only String patterns)",
                        file, where);
    dt_status r = dt__stage_str(&st->a, &st->alen, pat, "String", NULL, where, file);
    if (!r && !st->alen)
        return dt_error(DT_ERR_FORMAT, "%s: %s.pattern.String is empty", file, where);
    return r ? r : dt__stage_str(&st->b, &st->blen, node, "content", NULL, where, file);
}

static dt_status norm_replace(const dt__stage *st, const char *s, size_t n, dt__tbuf *out) {
    return dt__replace_all(out, s, n, st->a, st->alen, st->b, st->blen);
}

/* NFC and NFD: canonical normalization (unicode_nfc.c); flag: compose. */
static dt_status parse_nfc(dt__stage *st, const json_t *node, const char *where,
                           const char *file) {
    (void)node, (void)where, (void)file;
    st->flag = true;
    return DT_OK;
}

static dt_status parse_nfd(dt__stage *st, const json_t *node, const char *where,
                           const char *file) {
    (void)node, (void)where, (void)file;
    st->flag = false;
    return DT_OK;
}

static dt_status norm_unicode(const dt__stage *st, const char *s, size_t n, dt__tbuf *out) {
    return dt__unicode_normalize(out, s, n, st->flag);
}

/* NFKC and NFKD need the compatibility mappings, which dtrain does not carry. */
static dt_status parse_compat(dt__stage *st, const json_t *node, const char *where,
                              const char *file) {
    (void)node;
    return dt_error(DT_ERR_FORMAT,
                    "%s: %s type %s is not supported (only the canonical NFC and NFD; "
                    "compatibility mappings are not included); hint: docs/lm.md lists the "
                    "supported normalizers",
                    file, where, st->type);
}

/* ---- pre-tokenizers ---------------------------------------------------------------------- */

dt_status dt__pretok_run(dt__enc *e, int idx, const char *s, size_t n, size_t head) {
    if (!n) return DT_OK; /* empty pieces are dropped */
    if (idx == e->t->npretok) return dt__bpe_word(e, s, n, false);
    return e->t->pretok[idx].pretok(e, idx, s, n, head);
}

static dt_status parse_bytelevel(dt__stage *st, const json_t *node, const char *where,
                                 const char *file) {
    (void)where, (void)file;
    st->prepend = bool_or(node, "add_prefix_space", true);
    st->flag = bool_or(node, "use_regex", true);
    return DT_OK;
}

static dt_status pre_bytelevel(dt__enc *e, int idx, const char *s, size_t n, size_t head) {
    (void)head;
    const dt__stage *st = &e->t->pretok[idx];
    dt_status r = DT_OK;
    if (st->prepend && s[0] != ' ') {
        dt__tbuf *b = &e->scratch[idx];
        b->n = 0;
        if ((r = dt__tbuf_put(b, " ", 1)) || (r = dt__tbuf_put(b, s, n))) return r;
        s = b->p, n = b->n;
    }
    if (!st->flag) return dt__bpe_word(e, s, n, true);
    for (size_t i = 0, j; i < n && !r; i = j) {
        j = dt__split_gpt2(s, n, i);
        r = dt__bpe_word(e, s + i, j - i, true);
    }
    return r;
}

/* Split: a regex known to tokenizer_split.c, matches isolated (every match and every gap a
 * piece); anything else is refused. */
static dt_status parse_split(dt__stage *st, const json_t *node, const char *where,
                             const char *file) {
    const json_t *pat = json_object_get(node, "pattern");
    const char *re = json_string_value(json_object_get(pat, "Regex"));
    const char *behavior = json_string_value(json_object_get(node, "behavior"));
    if (!re)
        return dt_error(DT_ERR_FORMAT,
                        "%s: %s type Split is supported only with a Regex "
                        "pattern",
                        file, where);
    st->split = dt__split_find(re);
    if (!st->split)
        return dt_error(DT_ERR_FORMAT,
                        "%s: %s type Split with the pattern %s is not supported; "
                        "hint: dtrain knows GPT-2's and Llama 3's patterns",
                        file, where, re);
    if (!behavior || strcmp(behavior, "Isolated") || json_is_true(json_object_get(node, "invert")))
        return dt_error(DT_ERR_FORMAT,
                        "%s: %s type Split is supported only with behavior "
                        "Isolated and invert false",
                        file, where);
    return DT_OK;
}

static dt_status pre_split(dt__enc *e, int idx, const char *s, size_t n, size_t head) {
    dt__split_fn end = e->t->pretok[idx].split;
    dt_status r = DT_OK;
    for (size_t i = 0, j; i < n && !r; i = j) {
        j = end(s, n, i);
        r = dt__pretok_run(e, idx + 1, s + i, j - i, head > i ? head - i : 0);
    }
    return r;
}

dt_status dt__parse_replacement(dt__stage *st, const json_t *node, const char *where,
                                const char *file) {
    dt_status r =
        dt__stage_str(&st->a, &st->alen, node, "replacement", "\xE2\x96\x81", where, file);
    if (!r && !st->alen) r = dt_error(DT_ERR_FORMAT, "%s: %s.replacement is empty", file, where);
    return r;
}

static dt_status parse_metaspace(dt__stage *st, const json_t *node, const char *where,
                                 const char *file) {
    dt_status r = dt__parse_replacement(st, node, where, file);
    if (r) return r;
    const char *scheme = json_string_value(json_object_get(node, "prepend_scheme"));
    st->prepend = bool_or(node, "add_prefix_space", true) ? 1 : 0;
    if (scheme) {
        if (!strcmp(scheme, "always") || !strcmp(scheme, "first") || !strcmp(scheme, "never"))
            st->prepend = scheme[0] == 'a' ? 1 : scheme[0] == 'f' ? 2 : 0;
        else
            return dt_error(DT_ERR_FORMAT,
                            "%s: %s.prepend_scheme %s is not one of always, "
                            "first, never",
                            file, where, scheme);
    }
    st->flag = bool_or(node, "split", true);
    return DT_OK;
}

static dt_status pre_metaspace(dt__enc *e, int idx, const char *s, size_t n, size_t head) {
    const dt__stage *st = &e->t->pretok[idx];
    dt__tbuf *b = &e->scratch[idx];
    b->n = 0;
    bool starts = s[0] == ' ' || (n >= st->alen && !memcmp(s, st->a, st->alen));
    dt_status r = DT_OK;
    size_t zb = 0; /* the head in b: the prepended replacement, then the head's bytes replaced */
    if (!starts && (st->prepend == 1 || (st->prepend == 2 && head))) {
        r = dt__tbuf_put(b, st->a, st->alen);
        if (head) zb = st->alen;
    }
    for (size_t i = 0; i < head && i < n; i++) zb += s[i] == ' ' ? st->alen : 1;
    if (!r) r = dt__replace_all(b, s, n, " ", 1, st->a, st->alen);
    if (r) return r;
    if (!st->flag) return dt__pretok_run(e, idx + 1, b->p, b->n, zb);
    size_t start = 0; /* a piece starts at every replacement character (MergedWithNext) */
    for (size_t i = 1; i + st->alen <= b->n && !r; i++) {
        if (!memcmp(b->p + i, st->a, st->alen)) {
            r = dt__pretok_run(e, idx + 1, b->p + start, i - start, zb > start ? zb - start : 0);
            start = i;
        }
    }
    return r ? r
             : dt__pretok_run(e, idx + 1, b->p + start, b->n - start, zb > start ? zb - start : 0);
}

/* ---- the tables ---- */

static const dt__stage_row norm_rows[] = {
    {"Prepend", parse_prepend, norm_prepend, NULL, NULL},
    {"Replace", dt__parse_replace, norm_replace, NULL, NULL},
    {"NFC", parse_nfc, norm_unicode, NULL, NULL},
    {"NFD", parse_nfd, norm_unicode, NULL, NULL},
    {"NFKC", parse_compat, NULL, NULL, NULL},
    {"NFKD", parse_compat, NULL, NULL, NULL},
};
static const dt__stage_row pretok_rows[] = {
    {"ByteLevel", parse_bytelevel, NULL, pre_bytelevel, NULL},
    {"Metaspace", parse_metaspace, NULL, pre_metaspace, NULL},
    {"Split", parse_split, NULL, pre_split, NULL},
};

const dt__stage_row *dt__norm_rows(size_t *n) {
    *n = sizeof norm_rows / sizeof *norm_rows;
    return norm_rows;
}

const dt__stage_row *dt__pretok_rows(size_t *n) {
    *n = sizeof pretok_rows / sizeof *pretok_rows;
    return pretok_rows;
}

/* ---- running the normalizers ---- */

dt_status dt__normalize(const dt_tokenizer *t, const char *s, size_t n, dt__tbuf bufs[2],
                        const char **out, size_t *nout) {
    for (int k = 0, w = 0; k < t->nnorm; k++) {
        if (t->norm[k].norm == norm_unicode && dt__unicode_quick(s, n, t->norm[k].flag) == n)
            continue; /* normalized already: no copy */
        dt__tbuf *b = &bufs[w++ & 1]; /* never the buffer s is in */
        b->n = 0;
        dt_status r = t->norm[k].norm(&t->norm[k], s, n, b);
        if (r) return r;
        s = b->p ? b->p : "", n = b->n;
    }
    *out = s, *nout = n;
    return DT_OK;
}
