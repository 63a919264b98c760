/*
 * series_encode.c — a chart's series as the metrics route sends them (series_cache.h): the
 * points picked for the chart's width (dt__series_sample), written as compact JSON with the
 * shortest digits that read back, or as little-endian binary64 (format=f64, docs/api.md).
 */
#include "master/series_cache.h"

#include "base/numtext.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dt__real_text(double v, char buf[32]) {
    /* integral values below 1e16 print all their digits under %.17g: the common x (batches,
     * records) without snprintf */
    if (v > -1e16 && v < 1e16 && v == (double)(int64_t)v && !(v == 0 && signbit(v)))
        return snprintf(buf, 32, "%" PRId64 ".0", (int64_t)v);
    return dt_json_real_text(v, buf);
}

static bool point_add(dt__buf *t, double x, double y, bool first) {
    char b[72];
    size_t n = 0;
    if (!first) b[n++] = ',';
    b[n++] = '[';
    n += (size_t)dt__real_text(x, b + n);
    b[n++] = ',';
    n += (size_t)dt__real_text(y, b + n);
    b[n++] = ']';
    dt__buf_put(t, b, n);
    return !t->oom;
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
static bool series_encode(const dt__series *s, int64_t points, dt__buf *t) {
    bool sampled = (int64_t)s->n > points;
    size_t *idx = sampled ? malloc(((size_t)points + 2) * sizeof *idx) : NULL;
    if (sampled && !idx) return false;
    size_t m = sampled ? dt__series_sample(s->xs, s->ys, s->n, points, idx) : s->n;
    char head[128];
    int hn = snprintf(head, sizeof head,
                      "{\"trial_id\":%" PRId64 ",\"total\":%zu,\"sampled\":%s,\"data\":[",
                      s->trial_id, s->n, sampled ? "true" : "false");
    dt__buf_put(t, head, (size_t)hn);
    bool ok = !t->oom;
    for (size_t j = 0; ok && j < m; j++) {
        size_t i = sampled ? idx[j] : j;
        ok = point_add(t, s->xs[i], s->ys[i], j == 0);
    }
    free(idx);
    dt__buf_put(t, "]}", 2);
    return ok && !t->oom;
}

/* Append n doubles to t as little-endian IEEE binary64. */
static bool f64_add(dt__buf *t, const double *v, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        unsigned char b[8];
        memcpy(b, &v[i], 8);
        for (int k = 0; k < 4; k++) {
            unsigned char c = b[k];
            b[k] = b[7 - k], b[7 - k] = c;
        }
        dt__buf_put(t, b, 8);
    }
    return !t->oom;
#else
    dt__buf_put(t, v, n * sizeof *v);
    return !t->oom;
#endif
}

bool dt__series_f64(const dt__series *s, int64_t points, dt__buf *out) {
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

bool dt__series_text(dt__series *s, int64_t points, dt__buf *out) {
    if (!s->enc || s->enc_points != points || s->enc_n != s->n) {
        dt__buf t = {0};
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
    dt__buf_put(out, s->enc, s->enc_len);
    return !out->oom;
}

char *dt__chart_frame(bool f64, const char *head, const char *series, size_t len, size_t *out_len) {
    size_t hl = strlen(head), pad = (8 - hl % 8) % 8;
    size_t total = f64 ? 16 + hl + pad + len : hl + 10 + len;
    char *p = malloc(total);
    if (!p) return NULL;
    *out_len = total;
    if (!f64) { /* {...,"series":[...]} */
        memcpy(p, head, hl - 1);
        memcpy(p + hl - 1, ",\"series\":", 10);
        memcpy(p + hl + 9, series, len);
        p[hl + 9 + len] = '}';
        return p;
    }
    memcpy(p, "DTCHART1", 8);
    for (int k = 0; k < 8; k++) p[8 + k] = k < 4 ? (char)(((hl + pad) >> (8 * k)) & 0xff) : 0;
    memcpy(p + 16, head, hl);
    memset(p + 16 + hl, ' ', pad);
    memcpy(p + 16 + hl + pad, series, len);
    return p;
}
