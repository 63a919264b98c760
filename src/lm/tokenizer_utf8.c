/* tokenizer_utf8.c — the bytes under the tokenizer: growable buffers, the hash its maps use,
 * UTF-8 decoding that takes any bytes, the Unicode classes of GPT-2's split (tables generated
 * into tokenizer_uclass.h), lossy UTF-8 repair and GPT-2's byte <-> character map. */
#include "lm_tok_impl.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer_uclass.h"

static dt_status grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return DT_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return dt_error(DT_ERR_OOM, "tokenizer: out of memory (%zu bytes)", c * elem);
    *p = q;
    *cap = c;
    return DT_OK;
}

dt_status dt__tbuf_put(dt__tbuf *b, const void *s, size_t n) {
    dt_status st = grow((void **)&b->p, &b->cap, b->n + n + 1, 1);
    if (st) return st;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return DT_OK;
}

dt_status dt__tids_put(dt__tids *v, const int32_t *ids, size_t n) {
    if (!n) return DT_OK;
    dt_status st = grow((void **)&v->p, &v->cap, v->n + n, sizeof(int32_t));
    if (st) return st;
    memcpy(v->p + v->n, ids, n * sizeof(int32_t));
    v->n += n;
    return DT_OK;
}

uint64_t dt__tok_hash(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, s, n);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h ? h : 1;
}

/* Bytes of a well-formed sequence starting with lead byte b (0: not a lead byte), and the range
 * its second byte must fall in. */
static int seq_len(uint8_t b, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) *lo = 0xA0;
        if (b == 0xED) *hi = 0x9F;
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) *lo = 0x90;
        if (b == 0xF4) *hi = 0x8F;
        return 4;
    }
    return 0;
}

/* How many bytes from s[0] form a valid prefix of a sequence (the whole sequence when it is
 * complete: then *complete is set). */
static size_t valid_prefix(const uint8_t *s, size_t n, bool *complete) {
    uint8_t lo, hi;
    int len = seq_len(s[0], &lo, &hi);
    *complete = len == 1;
    if (len <= 1) return 1;
    size_t k = 1;
    while (k < (size_t)len && k < n) {
        uint8_t c = s[k];
        if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) break;
        k++;
    }
    *complete = k == (size_t)len;
    return k;
}

size_t dt__utf8_char(const uint8_t *s, size_t n, uint32_t *cp) {
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    bool complete;
    size_t k = valid_prefix(s, n, &complete);
    if (!complete) {
        *cp = 0xFFFFFFFFu;
        return 1;
    }
    uint32_t c = s[0] & (k == 2 ? 0x1F : k == 3 ? 0x0F : 0x07);
    for (size_t i = 1; i < k; i++) c = (c << 6) | (s[i] & 0x3F);
    *cp = c;
    return k;
}

int dt__uclass(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return DT__UC_LETTER;
        if (cp >= '0' && cp <= '9') return DT__UC_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return DT__UC_SPACE;
        return DT__UC_OTHER;
    }
    if (cp == 0xFFFFFFFFu) return DT__UC_OTHER;
    /* White_Space, Oniguruma's \s */
    if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
        cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
        return DT__UC_SPACE;
    size_t lo = 0, hi = sizeof uclass_ranges / sizeof uclass_ranges[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < uclass_ranges[mid][0])
            hi = mid;
        else if (cp > uclass_ranges[mid][1])
            lo = mid + 1;
        else
            return (int)uclass_ranges[mid][2];
    }
    return DT__UC_OTHER;
}

dt_status dt__utf8_lossy(dt__tbuf *out, const uint8_t *s, size_t n) {
    size_t i = 0, run = 0; /* s[run, i) is valid and not yet copied */
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        bool complete;
        size_t k = valid_prefix(s + i, n - i, &complete);
        if (complete) {
            i += k;
            continue;
        }
        dt_status st = dt__tbuf_put(out, s + run, i - run);
        if (!st) st = dt__tbuf_put(out, "\xEF\xBF\xBD", 3);
        if (st) return st;
        i += k;
        run = i;
    }
    return dt__tbuf_put(out, s + run, n - run);
}

dt_status dt__replace_all(dt__tbuf *out, const char *s, size_t n, const char *pat, size_t plen,
                          const char *with, size_t wlen) {
    if (!plen) return dt__tbuf_put(out, s, n);
    size_t i = 0, run = 0;
    dt_status r = DT_OK;
    while (i + plen <= n && !r) {
        if (s[i] == pat[0] && !memcmp(s + i, pat, plen)) {
            if (!(r = dt__tbuf_put(out, s + run, i - run))) r = dt__tbuf_put(out, with, wlen);
            i += plen;
            run = i;
        } else {
            i++;
        }
    }
    return r ? r : dt__tbuf_put(out, s + run, n - run);
}

static bool printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t dt__byte_to_cp(uint8_t b) {
    if (printable(b)) return b;
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7F && b <= 0xA0) return 289u + (b - 0x7Fu);
    return 323; /* 0xAD */
}

int dt__cp_to_byte(uint32_t cp) {
    if (cp < 256) return printable(cp) ? (int)cp : -1;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 289 + 0x7F);
    return cp == 323 ? 0xAD : -1;
}

size_t dt__utf8_put(char out[4], uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}
