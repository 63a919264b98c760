/*
 * asha_state.c — the helpers that keep adaptive_asha's state (asha_impl.h): a rung's sorted
 * results, a trial by request id, a new trial in a bracket.
 */
#include "asha_impl.h"

#include <stdlib.h>
#include <string.h>

/* Insert (id, m) into the rung, before any equal metric; returns its index or -1 (OOM). */
int64_t dt__asha_rung_insert(rung *g, int64_t id, double m) {
    if (g->n == g->cap) {
        int64_t cap = g->cap ? 2 * g->cap : 16;
        entry *v = realloc(g->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        g->v = v;
        g->cap = cap;
    }
    int64_t lo = 0, hi = g->n; /* the first index whose metric >= m */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (g->v[mid].metric >= m)
            hi = mid;
        else
            lo = mid + 1;
    }
    memmove(g->v + lo + 1, g->v + lo, (size_t)(g->n - lo) * sizeof *g->v);
    g->v[lo] = (entry){id, m};
    g->n++;
    return lo;
}

void dt__asha_rung_remove(rung *g, int64_t id) {
    for (int64_t i = 0; i < g->n; i++)
        if (g->v[i].id == id) {
            memmove(g->v + i, g->v + i + 1, (size_t)(g->n - i - 1) * sizeof *g->v);
            g->n--;
            return;
        }
}

/* The trial of request `id`, or NULL with DT_ERR_STATE. */
trial *dt__asha_trial_of(asha *a, int64_t id) {
    if (id >= 1 && id <= a->nt) return &a->t[id - 1];
    dt_error(DT_ERR_STATE, "adaptive_asha: request %lld is not one of its trials", (long long)id);
    return NULL;
}

/* A new trial in bracket k. */
dt_status dt__asha_start(asha *a, int k, dt_search_ctx *sc, dt_search_ops *out) {
    if (a->nt == a->tcap) {
        int64_t cap = a->tcap ? 2 * a->tcap : 64;
        trial *t = realloc(a->t, (size_t)cap * sizeof *t);
        if (!t) return dt_error(DT_ERR_OOM, "out of memory adding an adaptive_asha trial");
        a->t = t;
        a->tcap = cap;
    }
    bracket *b = &a->b[k];
    int64_t id;
    dt_status st = dt__search_start(sc, NULL, dt__asha_units(a, b->rungs[0].units), out, &id);
    if (st) return st;
    if (id != a->nt + 1)
        return dt_error(DT_ERR_STATE, "adaptive_asha: request %lld was made outside the method",
                        (long long)id);
    a->t[a->nt++] = (trial){.bracket = k};
    b->c[B_CREATED]++;
    b->c[B_OPEN]++;
    return DT_OK;
}

bool dt__asha_bracket_done(const bracket *b) {
    return b->c[B_OPEN] == 0 && b->c[B_CREATED] - b->c[B_INVALID] >= b->max_trials;
}
