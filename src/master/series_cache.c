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
