/*
 * series_cache.c — the chart series the store has read, kept to be extended (series_cache.h).
 *
 * Entries live in one array searched linearly: a chart asks for one series per trial, so the
 * cache holds a few hundred entries and a look-up is cheap next to one SQLite step.
 */
#include "master/series_cache.h"

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

void dt__series_cache_trim(dt__series_cache *c) {
    /* counted here, after a request has extended its entries */
    size_t points = 0;
    for (size_t i = 0; i < c->n; i++) points += c->e[i]->n;
    while (points > c->max_points && c->n) {
        size_t lru = 0;
        for (size_t i = 1; i < c->n; i++)
            if (c->e[i]->used < c->e[lru]->used) lru = i;
        points -= c->e[lru]->n;
        drop(c, lru);
    }
}

static bool point_append(json_t *data, double x, double y) {
    return !json_array_append_new(data, json_pack("[ff]", x, y));
}

json_t *dt__series_json(const dt__series *s, int64_t points) {
    json_t *data = json_array();
    json_t *o = json_pack("{sIsIso}", "trial_id", (json_int_t)s->trial_id, "total",
                          (json_int_t)s->n, "data", data);
    if (!o) return NULL;
    bool ok = true;
    if ((int64_t)s->n <= points) {
        for (size_t i = 0; ok && i < s->n; i++) ok = point_append(data, s->xs[i], s->ys[i]);
    } else {
        size_t buckets = (size_t)(points / 2 > 0 ? points / 2 : 1);
        for (size_t k = 0; ok && k < buckets; k++) {
            size_t lo = s->n * k / buckets, hi = s->n * (k + 1) / buckets, imin = lo, imax = lo;
            for (size_t i = lo; i < hi; i++) {
                if (s->ys[i] < s->ys[imin]) imin = i;
                if (s->ys[i] > s->ys[imax]) imax = i;
            }
            if (hi == lo) continue;
            size_t first = imin < imax ? imin : imax, second = imin < imax ? imax : imin;
            ok = point_append(data, s->xs[first], s->ys[first]) &&
                 (first == second || point_append(data, s->xs[second], s->ys[second]));
        }
    }
    if (!ok) json_decref(o);
    return ok ? o : NULL;
}
