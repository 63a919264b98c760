/* unicode_nfc.c — canonical normalization of UTF-8 text (UAX #15): a quick check that copies
 * text already normalized, otherwise from the last safe starter on: decompose each character
 * canonically (Hangul syllables by arithmetic, the rest from unicode_nfc_tables.c), put runs
 * of combining marks in combining-class order, and for NFC compose the primary composites
 * back. Bytes that are not UTF-8 pass through as they are. */
#include "unicode_nfc_impl.h"

#include <stdlib.h>
#include <string.h>

/* Hangul syllables: S = SBASE + (L * VCOUNT + V) * TCOUNT + T */
enum {
    SBASE = 0xAC00,
    LBASE = 0x1100,
    VBASE = 0x1161,
    TBASE = 0x11A7,
    LCOUNT = 19,
    VCOUNT = 21,
    TCOUNT = 28,
    SCOUNT = LCOUNT * VCOUNT * TCOUNT,
    FIRST_MARK = 0x300 /* below it every character is a starter with quick-check Yes */
};
#define RAW 0x80000000u /* a byte that is not UTF-8, kept as RAW | byte */

/* The row of a table sorted by its first column whose first column is cp, or NULL. */
static const uint32_t *row_of(const uint32_t (*t)[3], size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t[mid][0] < cp) lo = mid + 1;
        else if (t[mid][0] > cp) hi = mid;
        else return t[mid];
    }
    return NULL;
}

/* The row {lo, hi, ...} (width values each, sorted, not overlapping) with lo <= cp <= hi. */
static const uint32_t *run_of(const uint32_t *t, size_t n, size_t width, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *r = t + mid * width;
        if (r[1] < cp) lo = mid + 1;
        else if (r[0] > cp) hi = mid;
        else return r;
    }
    return NULL;
}

int dt__unicode_ccc(uint32_t cp) {
    if (cp < FIRST_MARK || cp > 0x10FFFF) return 0;
    const uint32_t *r = run_of(dt__nfc_ccc[0], dt__nfc_ccc_n, 3, cp);
    return r ? (int)r[2] : 0;
}

/* Whether cp may stay as it is in normalized text whatever follows it (the quick check). */
static bool quick_yes(uint32_t cp, bool compose) {
    if (cp < 0xC0 || cp > 0x10FFFF) return true; /* ~0u: a byte that is not UTF-8 */
    if (!compose) return cp - SBASE >= SCOUNT && !row_of(dt__nfc_decomp, dt__nfc_decomp_n, cp);
    if (cp < FIRST_MARK) return true;
    return !run_of(dt__nfc_qc[0], dt__nfc_qc_n, 2, cp);
}

size_t dt__unicode_quick(const char *s, size_t n, bool compose) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0, safe = 0;
    int last = 0;
    while (i < n) {
        if (u[i] < 0x80) { /* ASCII: eight bytes at a time */
            uint64_t w;
            while (i + 8 <= n && (memcpy(&w, u + i, 8), !(w & 0x8080808080808080ull))) i += 8;
            while (i < n && u[i] < 0x80) i++;
            safe = i - 1, last = 0;
            continue;
        }
        uint32_t cp;
        size_t k = dt__utf8_char(u + i, n - i, &cp);
        int ccc = cp == ~0u ? 0 : dt__unicode_ccc(cp);
        if ((ccc && last > ccc) || !quick_yes(cp, compose)) return safe;
        if (!ccc) safe = i;
        last = ccc, i += k;
    }
    return n;
}

typedef struct cpbuf {
    uint32_t *p;
    size_t n, cap;
} cpbuf;

/* Append cp, moving a combining mark back past the marks of a higher class (a stable sort). */
static dt_status put_ordered(cpbuf *b, uint32_t cp) {
    if (b->n == b->cap) {
        size_t c = b->cap ? 2 * b->cap : 64;
        uint32_t *q = realloc(b->p, c * sizeof *q);
        if (!q) return dt_error(DT_ERR_OOM, "tokenizer: out of memory (normalizer)");
        b->p = q, b->cap = c;
    }
    size_t i = b->n++;
    int ccc = dt__unicode_ccc(cp);
    for (; ccc && i > 0 && dt__unicode_ccc(b->p[i - 1]) > ccc; i--) b->p[i] = b->p[i - 1];
    b->p[i] = cp;
    return DT_OK;
}

/* The full canonical decomposition of cp appended to b in order. */
static dt_status decompose(cpbuf *b, uint32_t cp) {
    if (cp - SBASE < SCOUNT) {
        uint32_t s = cp - SBASE, t = s % TCOUNT;
        dt_status r = put_ordered(b, LBASE + s / (VCOUNT * TCOUNT));
        if (!r) r = put_ordered(b, VBASE + (s % (VCOUNT * TCOUNT)) / TCOUNT);
        return r || !t ? r : put_ordered(b, TBASE + t);
    }
    const uint32_t *d = cp >= 0xC0 && cp <= 0x10FFFF
                            ? row_of(dt__nfc_decomp, dt__nfc_decomp_n, cp)
                            : NULL;
    if (!d) return put_ordered(b, cp);
    dt_status r = decompose(b, d[1]);
    return r || !d[2] ? r : decompose(b, d[2]);
}

/* The primary composite of the pair (a, b), 0 if none. */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a - LBASE < LCOUNT && b - VBASE < VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a - SBASE < SCOUNT && (a - SBASE) % TCOUNT == 0 && b - TBASE - 1 < TCOUNT - 1)
        return a + (b - TBASE);
    size_t lo = 0, hi = dt__nfc_comp_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *c = dt__nfc_comp[mid];
        if (c[0] < a || (c[0] == a && c[1] < b)) lo = mid + 1;
        else if (c[0] > a || c[1] > b) hi = mid;
        else return c[2];
    }
    return 0;
}

/* Compose b in place: each character joins the last starter when nothing between them has a
 * combining class as high as its own (it is not blocked). */
static void compose_all(cpbuf *b) {
    if (!b->n) return;
    size_t starter = 0, out = 1;
    int last = dt__unicode_ccc(b->p[0]) ? 256 : 0;
    for (size_t i = 1; i < b->n; i++) {
        uint32_t cp = b->p[i], c;
        int ccc = dt__unicode_ccc(cp);
        if ((last < ccc || last == 0) && (c = compose_pair(b->p[starter], cp))) {
            b->p[starter] = c;
            continue;
        }
        if (!ccc) starter = out;
        last = ccc;
        b->p[out++] = cp;
    }
    b->n = out;
}

dt_status dt__unicode_normalize(dt__tbuf *out, const char *s, size_t n, bool compose) {
    size_t from = dt__unicode_quick(s, n, compose);
    dt_status r = dt__tbuf_put(out, s, from);
    if (r || from == n) return r;
    cpbuf b = {0};
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = from, k; i < n && !r; i += k) {
        uint32_t cp;
        k = dt__utf8_char(u + i, n - i, &cp);
        r = decompose(&b, cp == ~0u ? RAW | u[i] : cp);
    }
    if (!r && compose) compose_all(&b);
    for (size_t i = 0; i < b.n && !r; i++) {
        char c[4] = {(char)(b.p[i] & 0xFF)};
        r = dt__tbuf_put(out, c, b.p[i] & RAW ? 1 : dt__utf8_put(c, b.p[i]));
    }
    free(b.p);
    return r;
}
