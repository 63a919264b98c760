/*
 * search_asha.c — dsat's asha method: asynchronous successive halving where the arms are
 * lineages (a random configuration and the binary search on its micro-batch, as binary's) and
 * the resource is the number of binary-search trials.
 *
 * A lineage in rung r may use min_binary_search_trials × divisor^(asha_early_stopping + r)
 * trials in total (3, 6, 12, 24, 48 by default). It has completed rung r once it is past r,
 * has used that budget, or (in rung r) its binary search is over (lo > hi). After each result
 * the lineage continues while its rung is not complete; otherwise, from the highest rung below
 * the top down, the lineages that completed the rung are ranked by their best metric over
 * trials up to that rung, and the first of the top ⌊n / divisor⌋ that is not yet promoted is
 * promoted (rung + 1) and continues; if none, a new lineage starts. Unlike the reference, a
 * lineage whose binary search is over is not promotable (it would get no trial, and in the
 * reference it kept its rung from promoting anyone else).
 */
#include "dsat_search_impl.h"

#include <stdlib.h>

static int64_t budget(const dt__dsat_method *m, int64_t rung) {
    int64_t b = m->o.min_binary_search_trials;
    for (int64_t i = 0; i < m->o.asha_early_stopping + rung; i++) {
        if (b > INT64_MAX / m->o.divisor) return INT64_MAX;
        b *= m->o.divisor;
    }
    return b;
}

static bool completed(const dt__dsat_method *m, const dt__dsat_lineage *l, int32_t r) {
    return l->rung > r || l->n_done >= budget(m, r) || (l->rung == r && l->lo > l->hi);
}

static bool asha_cont(dt__dsat_method *m, int32_t L) {
    return !completed(m, &m->l[L], m->l[L].rung);
}

static int by_key(const void *a, const void *b) {
    const dt__dsat_ranked *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->lineage > y->lineage) - (x->lineage < y->lineage); /* stable */
}

/* The lineage to promote from rung r, or -1. */
static int32_t promotable(dt__dsat_method *m, int32_t r) {
    int32_t n = 0, nr = 0;
    for (int32_t i = 0; i < m->nl; i++) {
        bool in = true;
        for (int32_t j = 0; in && j <= r; j++) in = completed(m, &m->l[i], j);
        if (!in) continue;
        n++;
        int64_t b = dt__dsat_best_of(m, -1, i, r);
        if (b < 0) continue; /* no success: counted, never ranked */
        double v = m->t[b].metric;
        m->rank[nr++] = (dt__dsat_ranked){m->o.smaller_is_better ? v : -v, i};
    }
    int64_t k = n / m->o.divisor;
    qsort(m->rank, (size_t)nr, sizeof *m->rank, by_key);
    for (int32_t i = 0; i < nr && i < k; i++) {
        const dt__dsat_lineage *l = &m->l[m->rank[i].lineage];
        if (l->rung <= r && !l->running && l->lo <= l->hi) return m->rank[i].lineage;
    }
    return -1;
}

static int32_t asha_fresh(dt__dsat_method *m) {
    for (int32_t r = (int32_t)m->o.max_rungs - 2; r >= 0; r--) {
        int32_t L = promotable(m, r);
        if (L >= 0) {
            m->l[L].rung = r + 1;
            return L;
        }
    }
    return dt__dsat_fresh_uniform(m);
}

const dt__dsat_rules dt__dsat_asha_rules = {
    .name = "asha",
    .update = dt__dsat_update_halving,
    .cont = asha_cont,
    .fresh = asha_fresh,
    .pick = dt__dsat_pick_mid,
};
