/*
 * series_cache.c — the chart series the store has read, kept to be extended (series_cache.h).
 *
 * Entries live in one array searched linearly: a chart asks for one series per trial, so the
 * cache holds a few hundred entries and a look-up is cheap next to one SQLite step.
 */
#include "master/series_cache.h"

#include "base/numtext.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dt__series_cache {
    dt__series **e;
    size_t n, cap;
    size_t max_points;
    uint64_t clock;
};

dt__series_cache *dt__series_cache_new(size_t max_points) {
    dt__series_cache *c = calloc(1, sizeof *c);
    if (c) c->max_points = max_points;
    return c;
}

static void series_free(dt__series *s) {
    free(s->kind);
    free(s->name);
    free(s->x);
    free(s->xs);
    free(s->ys);
    free(s->enc);
    free(s);
}

/* Remove entry i (the last one takes its place). */
static void drop(dt__series_cache *c, size_t i) {
    series_free(c->e[i]);
    c->e[i] = c->e[--c->n];
}

void dt__series_cache_clear(dt__series_cache *c) {
    while (c && c->n) drop(c, c->n - 1);
}

void dt__series_cache_free(dt__series_cache *c) {
    if (!c) return;
    dt__series_cache_clear(c);
    free(c->e);
    free(c);
}

dt__series *dt__series_cache_get(dt__series_cache *c, int64_t trial_id, const char *kind,
                                 const char *name, const char *x) {
    c->clock++;
    for (size_t i = 0; i < c->n; i++) {
        dt__series *s = c->e[i];
        if (s->trial_id == trial_id && !strcmp(s->kind, kind) && !strcmp(s->name, name) &&
            !strcmp(s->x, x)) {
            s->used = c->clock;
            return s;
        }
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        dt__series **e = realloc(c->e, cap * sizeof *e);
        if (!e) return NULL;
        c->e = e;
        c->cap = cap;
    }
    dt__series *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->trial_id = trial_id;
    s->last_batches = -1;
    s->used = c->clock;
    s->kind = strdup(kind);
    s->name = strdup(name);
    s->x = strdup(x);
    if (!s->kind || !s->name || !s->x) {
        series_free(s);
        return NULL;
    }
    c->e[c->n++] = s;
    return s;
}

bool dt__series_push(dt__series *s, double x, double y) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        double *nx = realloc(s->xs, cap * sizeof *nx);
        if (!nx) return false;
        s->xs = nx;
        double *ny = realloc(s->ys, cap * sizeof *ny);
        if (!ny) return false;
        s->ys = ny;
        s->cap = cap;
    }
    s->xs[s->n] = x;
    s->ys[s->n++] = y;
    return true;
}

void dt__series_cache_invalidate(dt__series_cache *c, int64_t trial_id, const char *kind,
                                 int64_t batches) {
    for (size_t i = c ? c->n : 0; i-- > 0;) {
        dt__series *s = c->e[i];
        if (s->trial_id == trial_id && !strcmp(s->kind, kind) && s->last_batches >= batches)
            drop(c, i);
    }
}

/* An entry's memory in points (16 bytes each), its kept encoding included. */
static size_t weight(const dt__series *s) {
    return s->n + s->enc_len / 16;
}

void dt__series_cache_trim(dt__series_cache *c) {
    /* counted here, after a request has extended its entries */
    size_t points = 0;
    for (size_t i = 0; i < c->n; i++) points += weight(c->e[i]);
    while (points > c->max_points && c->n) {
        size_t lru = 0;
        for (size_t i = 1; i < c->n; i++)
            if (c->e[i]->used < c->e[lru]->used) lru = i;
        points -= weight(c->e[lru]);
        drop(c, lru);
    }
}

bool dt__text_add(dt__text *t, const char *s, size_t n) {
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + n + 1) cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) return false;
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
    return true;
}

int dt__real_text(double v, char buf[32]) {
    /* integral values below 1e16 print all their digits under %.17g: the common x (batches,
     * records) without snprintf */
    if (v > -1e16 && v < 1e16 && v == (double)(int64_t)v && !(v == 0 && signbit(v)))
        return snprintf(buf, 32, "%" PRId64 ".0", (int64_t)v);
    return dt_json_real_text(v, buf);
}

/* ---- reading a number out of a stored row ---- */

typedef struct scan {
    const char *p, *end;
} scan;

static void ws(scan *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool ends_token(char ch) {
    return ch == ',' || ch == ':' || ch == ']' || ch == '}' || ch == ' ' || ch == '\t' ||
           ch == '\r' || ch == '\n';
}

static bool in_number(char ch) {
    return (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '+' || ch == 'e' ||
           ch == 'E';
}

/* Past a string at c->p (at its opening quote); *escaped when it holds a backslash. */
static bool skip_string(scan *c, bool *escaped) {
    *escaped = false;
    for (c->p++; c->p < c->end; c->p++) {
        if (*c->p == '\\') {
            *escaped = true;
            c->p++;
        } else if (*c->p == '"') {
            c->p++;
            return true;
        }
    }
    return false;
}

/* Past one value of any type. */
static bool skip_value(scan *c) {
    int depth = 0;
    bool esc;
    do {
        ws(c);
        if (c->p >= c->end) return false;
        char ch = *c->p;
        if (ch == '"') {
            if (!skip_string(c, &esc)) return false;
        } else if (ch == '{' || ch == '[') {
            depth++, c->p++;
        } else if (ch == '}' || ch == ']') {
            depth--, c->p++;
        } else if (ch == ',' || ch == ':') {
            c->p++;
        } else {
            while (c->p < c->end && !ends_token(*c->p)) c->p++;
        }
    } while (depth > 0);
    return depth == 0;
}

/* Move c to the value of member `key` of the object at c->p: 1 found, 0 not there, -1 unsure. */
static int member(scan *c, const char *key) {
    size_t kl = strlen(key);
    ws(c);
    if (c->p >= c->end || *c->p != '{') return -1;
    c->p++;
    for (;;) {
        ws(c);
        if (c->p < c->end && *c->p == '}') return 0;
        if (c->p >= c->end || *c->p != '"') return -1;
        const char *k = c->p + 1;
        bool esc;
        if (!skip_string(c, &esc) || esc) return -1;
        bool match = (size_t)(c->p - 1 - k) == kl && !memcmp(k, key, kl);
        ws(c);
        if (c->p >= c->end || *c->p != ':') return -1;
        c->p++;
        ws(c);
        if (match) return 1;
        if (!skip_value(c)) return -1;
        ws(c);
        if (c->p < c->end && *c->p == ',') c->p++;
    }
}

int dt__row_number(const char *json, size_t len, const char *key, const char *sub, double *out) {
    scan c = {json, json + len};
    int r = member(&c, key);
    if (r == 1 && sub) r = member(&c, sub);
    if (r != 1) return r;
    if (c.p >= c.end) return -1;
    if (!(*c.p == '-' || (*c.p >= '0' && *c.p <= '9'))) return 0;
    char num[64];
    size_t n = 0;
    while (c.p + n < c.end && n < sizeof num - 1 && in_number(c.p[n])) n++;
    if (n == sizeof num - 1) return -1;
    memcpy(num, c.p, n);
    num[n] = '\0';
    char *e;
    *out = strtod(num, &e);
    return *e || !isfinite(*out) ? -1 : 1;
}

static bool point_add(dt__text *t, double x, double y, bool first) {
    char b[72];
    size_t n = 0;
    if (!first) b[n++] = ',';
    b[n++] = '[';
    n += (size_t)dt__real_text(x, b + n);
    b[n++] = ',';
    n += (size_t)dt__real_text(y, b + n);
    b[n++] = ']';
    return dt__text_add(t, b, n);
}

/* Flush one bucket's points lo..hi-1 (hi > lo): the index of its minimum and of its maximum,
 * in x order, one index when they are the same point. */
static size_t bucket_extremes(const double *ys, size_t lo, size_t hi, size_t *idx) {
    size_t imin = lo, imax = lo;
    for (size_t i = lo + 1; i < hi; i++) {
        if (ys[i] < ys[imin]) imin = i;
        if (ys[i] > ys[imax]) imax = i;
    }
    idx[0] = imin < imax ? imin : imax;
    idx[1] = imin < imax ? imax : imin;
    return imin == imax ? 1 : 2;
}

size_t dt__series_sample(const double *xs, const double *ys, size_t n, int64_t points,
                         size_t *idx) {
    if (points < 2 || n <= (size_t)points) {
        for (size_t i = 0; i < n; i++) idx[i] = i;
        return n;
    }
    size_t buckets = (size_t)(points - 2) / 2, m = 0;
    idx[m++] = 0;
    if (buckets > 0) {
        /* the interior points 1..n-2 by x into equal spans of [x0, xlast]; a bucket index never
         * goes back (x out of order joins the current bucket), so at most `buckets` flushes */
        double x0 = xs[0], span = xs[n - 1] - xs[0];
        size_t lo = 1, cur = 0;
        for (size_t i = 1; i < n - 1; i++) {
            double f = span > 0 ? (xs[i] - x0) / span * (double)buckets : 0;
            size_t k = f >= (double)buckets ? buckets - 1 : f > 0 ? (size_t)f : 0;
            if (k > cur) {
                if (i > lo) m += bucket_extremes(ys, lo, i, idx + m);
                lo = i;
                cur = k;
            }
        }
        if (n - 1 > lo) m += bucket_extremes(ys, lo, n - 1, idx + m);
    }
    idx[m++] = n - 1;
    return m;
}

/* The entry's object for `points` into t. */
static bool series_encode(const dt__series *s, int64_t points, dt__text *t) {
    bool sampled = (int64_t)s->n > points;
    size_t *idx = sampled ? malloc(((size_t)points + 2) * sizeof *idx) : NULL;
    if (sampled && !idx) return false;
    size_t m = sampled ? dt__series_sample(s->xs, s->ys, s->n, points, idx) : s->n;
    char head[128];
    int hn = snprintf(head, sizeof head,
                      "{\"trial_id\":%" PRId64 ",\"total\":%zu,\"sampled\":%s,\"data\":[",
                      s->trial_id, s->n, sampled ? "true" : "false");
    bool ok = dt__text_add(t, head, (size_t)hn);
    for (size_t j = 0; ok && j < m; j++) {
        size_t i = sampled ? idx[j] : j;
        ok = point_add(t, s->xs[i], s->ys[i], j == 0);
    }
    free(idx);
    return ok && dt__text_add(t, "]}", 2);
}

/* Append n doubles to t as little-endian IEEE binary64. */
static bool f64_add(dt__text *t, const double *v, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        unsigned char b[8];
        memcpy(b, &v[i], 8);
        for (int k = 0; k < 4; k++) {
            unsigned char c = b[k];
            b[k] = b[7 - k], b[7 - k] = c;
        }
        if (!dt__text_add(t, (const char *)b, 8)) return false;
    }
    return true;
#else
    return dt__text_add(t, (const char *)v, n * sizeof *v);
#endif
}

bool dt__series_f64(const dt__series *s, int64_t points, dt__text *out) {
    bool sampled = (int64_t)s->n > points;
    size_t m = sampled ? (size_t)points + 2 : s->n;
    size_t *idx = sampled ? malloc(m * sizeof *idx) : NULL;
    double *xy = malloc((2 * m + 4) * sizeof *xy);
    bool ok = xy && (!sampled || idx);
    if (ok) {
        if (sampled) m = dt__series_sample(s->xs, s->ys, s->n, points, idx);
        double *xs = xy + 4, *ys = xs + m;
        xy[0] = (double)s->trial_id, xy[1] = (double)s->n, xy[2] = (double)m, xy[3] = sampled;
        for (size_t j = 0; j < m; j++) {
            size_t i = sampled ? idx[j] : j;
            xs[j] = s->xs[i], ys[j] = s->ys[i];
        }
        ok = f64_add(out, xy, 2 * m + 4);
    }
    free(idx);
    free(xy);
    return ok;
}

bool dt__series_text(dt__series *s, int64_t points, dt__text *out) {
    if (!s->enc || s->enc_points != points || s->enc_n != s->n) {
        dt__text t = {0};
        if (!series_encode(s, points, &t)) {
            free(t.p);
            return false;
        }
        free(s->enc);
        s->enc = t.p;
        s->enc_len = t.len;
        s->enc_points = points;
        s->enc_n = s->n;
    }
    return dt__text_add(out, s->enc, s->enc_len);
}
