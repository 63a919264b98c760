/* tokenizer_merge.c — one word through the BPE model: the per-word cache, the word's first
 * symbols, and the merges applied as `tokenizers`' Word::merge_all applies them — a min-heap of
 * (rank, position) over a linked list of symbols, an entry skipped when its symbol is gone or
 * the pair there no longer merges into the entry's token. */
#include "lm_tok_impl.h"

#include <stdlib.h>
#include <string.h>

enum { CACHE_SLOTS = 1 << 17, CACHE_MAX = 1 << 16, CACHE_WORD_MAX = 256 };

typedef struct dt__heap_item {
    uint32_t rank, pos;
    int32_t id;
} dt__heap_item;

static bool heap_less(const dt__heap_item *a, const dt__heap_item *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(dt__heap_item *h, size_t *n, dt__heap_item it) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&it, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

static dt__heap_item heap_pop(dt__heap_item *h, size_t *n) {
    dt__heap_item top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static const dt__merge_slot *merge_get(const dt__bpe *m, int32_t a, int32_t b) {
    const dt__merge_slot *s = dt__merge_slot_of(m, a, b);
    return s->key == UINT64_MAX ? NULL : s;
}

static dt_status enc_reserve(dt__enc *e, size_t n) {
    if (n <= e->cap) return DT_OK;
    size_t c = e->cap ? e->cap : 64;
    while (c < n) c *= 2;
    int32_t *sym = realloc(e->sym, c * sizeof *sym);
    if (sym) e->sym = sym;
    int32_t *prev = realloc(e->prev, c * sizeof *prev);
    if (prev) e->prev = prev;
    int32_t *next = realloc(e->next, c * sizeof *next);
    if (next) e->next = next;
    uint32_t *slen = realloc(e->slen, c * sizeof *slen);
    if (slen) e->slen = slen;
    dt__heap_item *heap = realloc(e->heap, 2 * c * sizeof *heap);
    if (heap) e->heap = heap;
    if (!sym || !prev || !next || !slen || !heap)
        return dt_error(DT_ERR_OOM, "tokenizer: out of memory for a word of %zu bytes", n);
    e->cap = c;
    return DT_OK;
}

static void sym_add(dt__enc *e, size_t *n, int32_t id, uint32_t len) {
    e->sym[*n] = id;
    e->slen[*n] = len;
    (*n)++;
}

/* The character walk of BPE::merge_word — vocabulary hit, byte fallback, or the unknown
 * token (fused or not), with the pending unknown flushed exactly where `tokenizers` does. */
static size_t word_symbols(dt__enc *e, const char *s, size_t n, bool mapped) {
    const dt__bpe *m = &e->t->bpe;
    size_t ns = 0, i = 0;
    int32_t unk_pending = -1; /* byte length of the pending unknown, -1 none */
    while (i < n) {
        const uint8_t *u = (const uint8_t *)s + i;
        char ch[4];
        const char *cs = s + i;
        size_t clen = 1, cslen = 1;
        int32_t id;
        if (mapped) {
            id = m->mapped_tok[u[0]];
            cs = ch;
            cslen = dt__utf8_put(ch, dt__byte_to_cp(u[0]));
        } else if (u[0] < 0x80) {
            id = m->ascii_tok[u[0]];
        } else {
            uint32_t cp;
            clen = cslen = dt__utf8_char(u, n - i, &cp);
            id = dt__vocab_get(&m->vocab, s + i, clen);
        }
        i += clen;
        if (id >= 0) {
            if (unk_pending >= 0) sym_add(e, &ns, m->unk, (uint32_t)unk_pending);
            unk_pending = -1;
            sym_add(e, &ns, id, (uint32_t)clen);
            continue;
        }
        if (m->byte_fallback) {
            bool all = true;
            for (size_t k = 0; k < cslen; k++) all = all && m->byte_tok[(uint8_t)cs[k]] >= 0;
            if (all) {
                for (size_t k = 0; k < cslen; k++) sym_add(e, &ns, m->byte_tok[(uint8_t)cs[k]], 1);
                continue;
            }
        }
        if (m->unk < 0) continue;
        if (unk_pending >= 0 && m->fuse_unk) {
            unk_pending += (int32_t)cslen;
        } else {
            if (unk_pending >= 0) sym_add(e, &ns, m->unk, (uint32_t)unk_pending);
            unk_pending = (int32_t)cslen;
        }
    }
    if (unk_pending >= 0) sym_add(e, &ns, m->unk, (uint32_t)unk_pending);
    return ns;
}

static void push_pair(dt__enc *e, size_t *hn, int32_t pos) {
    int32_t nx = e->next[pos];
    if (nx < 0) return;
    const dt__merge_slot *mg = merge_get(&e->t->bpe, e->sym[pos], e->sym[nx]);
    if (mg) heap_push(e->heap, hn, (dt__heap_item){mg->rank, (uint32_t)pos, mg->id});
}

/* Merge the ns symbols in place; returns how many are left (compacted to the front). */
static size_t merge_all(dt__enc *e, size_t ns) {
    if (ns < 2) return ns;
    size_t hn = 0;
    for (size_t k = 0; k < ns; k++) {
        e->prev[k] = (int32_t)k - 1;
        e->next[k] = k + 1 < ns ? (int32_t)k + 1 : -1;
    }
    for (size_t k = 0; k + 1 < ns; k++) push_pair(e, &hn, (int32_t)k);
    while (hn) {
        dt__heap_item top = heap_pop(e->heap, &hn);
        int32_t p = (int32_t)top.pos, nx = e->next[p];
        if (!e->slen[p] || nx < 0) continue;
        const dt__merge_slot *mg = merge_get(&e->t->bpe, e->sym[p], e->sym[nx]);
        if (!mg || mg->id != top.id) continue; /* a stale entry */
        e->sym[p] = top.id;
        e->slen[p] += e->slen[nx];
        e->slen[nx] = 0;
        e->next[p] = e->next[nx];
        if (e->next[nx] >= 0) e->prev[e->next[nx]] = p;
        if (e->prev[p] >= 0) push_pair(e, &hn, e->prev[p]);
        push_pair(e, &hn, p);
    }
    size_t out = 0;
    for (int32_t k = 0; k >= 0; k = e->next[k]) e->sym[out++] = e->sym[k];
    return out;
}

/* ---- the cache --------------------------------------------------------------------------- */

static const int32_t *cache_get(const dt__wcache *c, uint64_t h, const char *s, size_t n,
                                size_t *nids) {
    if (!c->hash) return NULL;
    for (size_t i = h & c->mask; c->hash[i]; i = (i + 1) & c->mask) {
        uint32_t en = c->entry[i];
        if (c->hash[i] == h && c->key_len[en] == n && !memcmp(c->keys.p + c->key_off[en], s, n)) {
            *nids = c->ids_len[en];
            return c->ids.p + c->ids_off[en];
        }
    }
    return NULL;
}

static dt_status cache_put(dt__wcache *c, uint64_t h, const char *s, size_t n, const int32_t *ids,
                           size_t nids) {
    if (!c->hash) {
        c->mask = CACHE_SLOTS - 1;
        c->hash = calloc(CACHE_SLOTS, sizeof *c->hash);
        c->entry = malloc(CACHE_SLOTS * sizeof *c->entry);
        c->key_off = malloc(CACHE_MAX * sizeof *c->key_off);
        c->ids_off = malloc(CACHE_MAX * sizeof *c->ids_off);
        c->key_len = malloc(CACHE_MAX * sizeof *c->key_len);
        c->ids_len = malloc(CACHE_MAX * sizeof *c->ids_len);
        if (!c->hash || !c->entry || !c->key_off || !c->ids_off || !c->key_len || !c->ids_len)
            return dt_error(DT_ERR_OOM, "tokenizer: out of memory for the word cache");
    }
    if (c->n >= CACHE_MAX) return DT_OK; /* full: later words are not cached */
    size_t en = c->n;
    c->key_off[en] = c->keys.n;
    c->ids_off[en] = c->ids.n;
    c->key_len[en] = (uint32_t)n;
    c->ids_len[en] = (uint32_t)nids;
    dt_status st = dt__tbuf_put(&c->keys, s, n);
    if (!st) st = dt__tids_put(&c->ids, ids, nids);
    if (st) return st;
    size_t i = h & c->mask;
    while (c->hash[i]) i = (i + 1) & c->mask;
    c->hash[i] = h;
    c->entry[i] = (uint32_t)en;
    c->n++;
    return DT_OK;
}

void dt__wcache_free(dt__wcache *c) {
    free(c->hash);
    free(c->entry);
    free(c->key_off);
    free(c->ids_off);
    free(c->key_len);
    free(c->ids_len);
    free(c->keys.p);
    free(c->ids.p);
    memset(c, 0, sizeof *c);
}

/* With ignore_merges a word that is a token is that token. */
static int32_t whole_word(dt__enc *e, const char *s, size_t n, bool mapped, dt_status *st) {
    *st = DT_OK;
    if (!mapped) return dt__vocab_get(&e->t->bpe.vocab, s, n);
    e->mapped.n = 0;
    for (size_t i = 0; i < n && !*st; i++) {
        char ch[4];
        *st = dt__tbuf_put(&e->mapped, ch, dt__utf8_put(ch, dt__byte_to_cp((uint8_t)s[i])));
    }
    return *st ? -1 : dt__vocab_get(&e->t->bpe.vocab, e->mapped.p, e->mapped.n);
}

dt_status dt__bpe_word(dt__enc *e, const char *s, size_t n, bool mapped) {
    dt_status st;
    if (e->t->bpe.ignore_merges) {
        int32_t id = whole_word(e, s, n, mapped, &st);
        if (st) return st;
        if (id >= 0) return dt__tids_put(e->out, &id, 1);
    }
    bool cacheable = n <= CACHE_WORD_MAX;
    uint64_t h = cacheable ? dt__tok_hash(s, n) : 0;
    size_t nids;
    const int32_t *hit = cacheable ? cache_get(&e->t->cache, h, s, n, &nids) : NULL;
    if (hit) return dt__tids_put(e->out, hit, nids);
    if ((st = enc_reserve(e, 4 * n + 1))) return st;
    size_t ns = merge_all(e, word_symbols(e, s, n, mapped));
    if (cacheable && (st = cache_put(&e->t->cache, h, s, n, e->sym, ns))) return st;
    return dt__tids_put(e->out, e->sym, ns);
}

void dt__enc_free(dt__enc *e) {
    for (int i = 0; i < 8; i++) free(e->scratch[i].p);
    free(e->norm[0].p);
    free(e->norm[1].p);
    free(e->mapped.p);
    free(e->sym);
    free(e->prev);
    free(e->next);
    free(e->slen);
    free(e->heap);
}
