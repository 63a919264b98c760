/* tokenizer_decode.c — ids back to text: each id's token string, then the decoders in turn
 * (each a row of the table below, rewriting a list of strings as `tokenizers`' decode_chain
 * does), then the strings joined; with no decoder the tokens are joined with spaces. */
#include "lm_tok_impl.h"

#include <stdlib.h>
#include <string.h>

dt_status dt__toklist_add(dt__toklist *l, const char *s, size_t n) {
    if (l->n == l->cap) {
        size_t c = l->cap ? 2 * l->cap : 64;
        size_t *off = realloc(l->off, c * sizeof *off);
        if (off) l->off = off;
        size_t *len = realloc(l->len, c * sizeof *len);
        if (len) l->len = len;
        if (!off || !len) return dt_error(DT_ERR_OOM, "tokenizer: out of memory decoding");
        l->cap = c;
    }
    l->off[l->n] = l->bytes.n;
    l->len[l->n] = n;
    l->n++;
    return dt__tbuf_put(&l->bytes, s, n);
}

static void toklist_free(dt__toklist *l) {
    free(l->bytes.p);
    free(l->off);
    free(l->len);
}

#define TOK(l, i) ((l)->bytes.p + (l)->off[i])

static dt_status parse_none(dt__stage *st, const json_t *node, const char *where,
                            const char *file) {
    (void)st, (void)node, (void)where, (void)file;
    return DT_OK;
}

/* ByteLevel: each token's characters back to bytes (a token with a character outside the map
 * keeps its own bytes), all of it one string, invalid UTF-8 replaced. */
static dt_status dec_bytelevel(const dt__stage *st, const dt__toklist *in, dt__toklist *out) {
    (void)st;
    dt__tbuf raw = {0}, fixed = {0};
    dt_status r = DT_OK;
    for (size_t i = 0; i < in->n && !r; i++) {
        const uint8_t *s = (const uint8_t *)TOK(in, i);
        size_t n = in->len[i], at = raw.n;
        for (size_t k = 0; k < n && !r;) {
            uint32_t cp;
            size_t len = dt__utf8_char(s + k, n - k, &cp);
            int b = dt__cp_to_byte(cp);
            if (b < 0) { /* not all mapped: the token's own bytes */
                raw.n = at;
                r = dt__tbuf_put(&raw, s, n);
                break;
            }
            r = dt__tbuf_put(&raw, &(uint8_t){(uint8_t)b}, 1);
            k += len;
        }
    }
    if (!r) r = dt__utf8_lossy(&fixed, (const uint8_t *)(raw.p ? raw.p : ""), raw.n);
    if (!r) r = dt__toklist_add(out, fixed.p ? fixed.p : "", fixed.n);
    free(raw.p);
    free(fixed.p);
    return r;
}

/* Replace (a String pattern) in every token; Metaspace's replacement character becomes a space,
 * and in the first token (unless the prepend scheme is never) it is dropped. */
static dt_status replace_each(const dt__stage *st, const dt__toklist *in, dt__toklist *out,
                              bool metaspace) {
    dt__tbuf b = {0};
    dt_status r = DT_OK;
    for (size_t i = 0; i < in->n && !r; i++) {
        bool drop = metaspace && i == 0 && st->prepend;
        const char *with = metaspace ? (drop ? "" : " ") : st->b;
        b.n = 0;
        r = dt__replace_all(&b, TOK(in, i), in->len[i], st->a, st->alen, with,
                            metaspace ? !drop : st->blen);
        if (!r) r = dt__toklist_add(out, b.p, b.n);
    }
    free(b.p);
    return r;
}

static dt_status dec_replace(const dt__stage *st, const dt__toklist *in, dt__toklist *out) {
    return replace_each(st, in, out, false);
}

static dt_status dec_metaspace(const dt__stage *st, const dt__toklist *in, dt__toklist *out) {
    return replace_each(st, in, out, true);
}

static int hexval(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static dt_status flush_bytes(dt__tbuf *bytes, dt__toklist *out) {
    if (!bytes->n) return DT_OK;
    dt__tbuf fixed = {0};
    dt_status r = dt__utf8_lossy(&fixed, (const uint8_t *)bytes->p, bytes->n);
    if (!r && fixed.n == bytes->n && !memcmp(fixed.p, bytes->p, bytes->n)) {
        r = dt__toklist_add(out, bytes->p, bytes->n);
    } else { /* not UTF-8: one U+FFFD per byte */
        for (size_t i = 0; i < bytes->n && !r; i++) r = dt__toklist_add(out, "\xEF\xBF\xBD", 3);
    }
    free(fixed.p);
    bytes->n = 0;
    return r;
}

/* ByteFallback: runs of <0xNN> tokens become their bytes when those are UTF-8. */
static dt_status dec_bytefallback(const dt__stage *st, const dt__toklist *in, dt__toklist *out) {
    (void)st;
    dt__tbuf bytes = {0};
    dt_status r = DT_OK;
    for (size_t i = 0; i < in->n && !r; i++) {
        const char *s = TOK(in, i);
        int hi = in->len[i] == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' ? hexval(s[3]) : -1;
        int lo = hi >= 0 ? hexval(s[4]) : -1;
        if (lo >= 0) {
            r = dt__tbuf_put(&bytes, &(uint8_t){(uint8_t)(hi * 16 + lo)}, 1);
            continue;
        }
        if (!(r = flush_bytes(&bytes, out))) r = dt__toklist_add(out, s, in->len[i]);
    }
    if (!r) r = flush_bytes(&bytes, out);
    free(bytes.p);
    return r;
}

static dt_status dec_fuse(const dt__stage *st, const dt__toklist *in, dt__toklist *out) {
    (void)st;
    return dt__toklist_add(out, in->bytes.p ? in->bytes.p : "", in->bytes.n);
}

static dt_status parse_strip(dt__stage *st, const json_t *node, const char *where,
                             const char *file) {
    dt_status r = dt__stage_str(&st->a, &st->alen, node, "content", NULL, where, file);
    json_t *a = json_object_get(node, "start"), *b = json_object_get(node, "stop");
    if (!r && !st->alen) return dt_error(DT_ERR_FORMAT, "%s: %s.content is empty", file, where);
    if (!r && (!json_is_integer(a) || !json_is_integer(b) || json_integer_value(a) < 0 ||
               json_integer_value(b) < 0 || json_integer_value(a) > 1000000 ||
               json_integer_value(b) > 1000000))
        return dt_error(DT_ERR_FORMAT, "%s: %s Strip needs start and stop counts", file, where);
    if (!r) st->start = (int)json_integer_value(a), st->stop = (int)json_integer_value(b);
    return r;
}

/* Strip: up to `start` leading and `stop` trailing copies of the content character. */
static dt_status dec_strip(const dt__stage *st, const dt__toklist *in, dt__toklist *out) {
    dt_status r = DT_OK;
    for (size_t i = 0; i < in->n && !r; i++) {
        const char *s = TOK(in, i);
        size_t a = 0, b = in->len[i], c = st->alen;
        for (int k = 0; k < st->start && b - a >= c && !memcmp(s + a, st->a, c); k++) a += c;
        for (int k = 0; k < st->stop && b - a >= c && !memcmp(s + b - c, st->a, c); k++) b -= c;
        r = dt__toklist_add(out, s + a, b - a);
    }
    return r;
}

static dt_status parse_metaspace_dec(dt__stage *st, const json_t *node, const char *where,
                                     const char *file) {
    dt_status r = dt__parse_replacement(st, node, where, file);
    const json_t *aps = json_object_get(node, "add_prefix_space");
    const char *scheme = json_string_value(json_object_get(node, "prepend_scheme"));
    st->prepend = scheme ? strcmp(scheme, "never") != 0 : !json_is_false(aps);
    return r;
}

static const dt__stage_row dec_rows[] = {
    {"ByteLevel", parse_none, NULL, NULL, dec_bytelevel},
    {"Metaspace", parse_metaspace_dec, NULL, NULL, dec_metaspace},
    {"Replace", dt__parse_replace, NULL, NULL, dec_replace},
    {"ByteFallback", parse_none, NULL, NULL, dec_bytefallback},
    {"Fuse", parse_none, NULL, NULL, dec_fuse},
    {"Strip", parse_strip, NULL, NULL, dec_strip},
};

const dt__stage_row *dt__dec_rows(size_t *n) {
    *n = sizeof dec_rows / sizeof dec_rows[0];
    return dec_rows;
}

/* The token string of an id: an added token's first (as matched: a normalized token in its
 * normalized form, as `tokenizers` decodes it), then the vocabulary's. */
static const char *id_text(const dt_tokenizer *t, int32_t id, size_t *n) {
    if (id < 0 || id >= t->vocab_size) return NULL;
    int32_t k = t->added_of[id];
    if (k >= 0) return *n = t->added[k].mlen, t->added[k].match;
    const dt__vocab *v = &t->bpe.vocab;
    if (id < 0 || id >= v->nid || v->off[id] == UINT64_MAX) return NULL;
    *n = v->len[id];
    return v->strs + v->off[id];
}

dt_status dt_tokenizer_decode(const dt_tokenizer *t, const int32_t *ids, size_t n, char **text) {
    *text = NULL;
    dt__toklist lists[2];
    memset(lists, 0, sizeof lists);
    dt_status r = DT_OK;
    for (size_t i = 0; i < n && !r; i++) {
        size_t len;
        const char *s = id_text(t, ids[i], &len);
        if (s) r = dt__toklist_add(&lists[0], s, len);
    }
    int cur = 0;
    for (int d = 0; d < t->ndec && !r; d++) {
        dt__toklist *out = &lists[!cur];
        out->n = 0, out->bytes.n = 0;
        r = t->dec[d].dec(&t->dec[d], &lists[cur], out);
        cur = !cur;
    }
    dt__tbuf joined = {0};
    for (size_t i = 0; i < lists[cur].n && !r; i++) {
        if (!t->ndec && i && (r = dt__tbuf_put(&joined, " ", 1))) break;
        r = dt__tbuf_put(&joined, TOK(&lists[cur], i), lists[cur].len[i]);
    }
    if (!r && !joined.p) r = dt__tbuf_put(&joined, "", 0);
    toklist_free(&lists[0]);
    toklist_free(&lists[1]);
    if (r) {
        free(joined.p);
        return r;
    }
    *text = joined.p;
    return DT_OK;
}
