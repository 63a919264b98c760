/*
 * search_space.c — the knob space the dsat methods search, and the draws and bookkeeping the
 * three methods share.
 *
 * Knobs per stage (cumulative, as the reference's autotuner): stage 0 none (the user's
 * config); stage 1 reduce_bucket_size and allgather_bucket_size in {1e6, 5e6, 1e7, 5e7, 1e8,
 * 5e8, 1e9, 5e9}; stage 2 adds overlap_comm, reduce_scatter, contiguous_gradients in {true,
 * false}; stage 3 adds allgather_partitions. A knob set is a combination index c: the reduce
 * bucket is c % 8, the allgather bucket c / 8 % 8, then one bit each in that order.
 *
 * Feasible sets: a knob set is feasible when it fits at micro-batch 1; from stage 2 on, a set
 * that does not fit is tried again with the optimizer offloaded (DeepSpeed offloads the
 * optimizer from stage 2), so offload is only ever proposed where the model says it is needed.
 * The random configuration draw is uniform over the feasible sets of a stage, and the stage is
 * drawn among the stages that have one: nothing that cannot fit is ever proposed.
 */
#include "dsat_search_impl.h"
#include "base/base_impl.h"

#include <math.h>
#include <stdlib.h>

#define N_BUCKETS 8
#define OFFLOAD_BIT (1 << 12) /* above every combination index */

static const int64_t BUCKETS[N_BUCKETS] = {1000000,   5000000,   10000000,   50000000,
                                           100000000, 500000000, 1000000000, 5000000000};

/* Knob sets of a stage. */
static int32_t n_combos(int stage) {
    static const int32_t N[4] = {1, N_BUCKETS * N_BUCKETS, N_BUCKETS * N_BUCKETS * 8,
                                 N_BUCKETS * N_BUCKETS * 16};
    return N[stage];
}

static dt_dsat_knobs decode(int stage, int32_t c) {
    dt_dsat_knobs k = {.zero_stage = stage,
                       .mbs = 1,
                       .overlap_comm = -1,
                       .reduce_scatter = -1,
                       .contiguous_gradients = -1,
                       .allgather_partitions = -1,
                       .offload_optimizer = (c & OFFLOAD_BIT) != 0};
    c &= OFFLOAD_BIT - 1;
    if (stage >= 1) {
        k.reduce_bucket_size = BUCKETS[c % N_BUCKETS];
        k.allgather_bucket_size = BUCKETS[c / N_BUCKETS % N_BUCKETS];
    }
    int bits = c / (N_BUCKETS * N_BUCKETS);
    if (stage >= 2) {
        k.overlap_comm = bits & 1;
        k.reduce_scatter = bits >> 1 & 1;
        k.contiguous_gradients = bits >> 2 & 1;
    }
    if (stage >= 3) k.allgather_partitions = bits >> 3 & 1;
    return k;
}

bool dt__dsat_fits(const dt__dsat_method *m, const dt_dsat_knobs *k) {
    return m->sp.fits(m->sp.arg, k);
}

dt_status dt__dsat_feasible_init(dt__dsat_method *m) {
    for (int i = 0; i < m->sp.n_stages; i++) {
        int s = m->sp.zero_stages[i];
        int32_t n = n_combos(s);
        dt__dsat_feasible *f = &m->feas[s];
        f->v = malloc((size_t)n * sizeof *f->v);
        if (!f->v) return dt_error(DT_ERR_OOM, "out of memory listing the dsat knob sets");
        for (int32_t c = 0; c < n; c++) {
            dt_dsat_knobs k = decode(s, c);
            if (dt__dsat_fits(m, &k)) {
                f->v[f->n++] = c;
            } else if (s >= 2) {
                k.offload_optimizer = true;
                if (dt__dsat_fits(m, &k)) f->v[f->n++] = c | OFFLOAD_BIT;
            }
        }
    }
    return DT_OK;
}

void dt__dsat_feasible_free(dt__dsat_method *m) {
    for (int s = 0; s < 4; s++) {
        free(m->feas[s].v);
        m->feas[s] = (dt__dsat_feasible){0};
    }
}

int dt__dsat_draw_stage(dt__dsat_method *m, unsigned prefer) {
    int all[4], pref[4], na = 0, np = 0;
    for (int i = 0; i < m->sp.n_stages; i++) { /* zero_stages is sorted */
        int s = m->sp.zero_stages[i];
        if (!m->feas[s].n) continue;
        all[na++] = s;
        if (prefer >> s & 1) pref[np++] = s;
    }
    if (np) return pref[dt_rng_below(&m->rng, (uint64_t)np)];
    return na ? all[dt_rng_below(&m->rng, (uint64_t)na)] : -1;
}

/* The largest micro-batch that fits with knobs k (at least 1), by doubling then halving. */
static int64_t fit_max(const dt__dsat_method *m, dt_dsat_knobs k) {
    const int64_t cap = (int64_t)1 << 40;
    int64_t lo = 1, hi = 2; /* lo fits (a feasible set fits at 1) */
    for (k.mbs = hi; hi < cap && dt__dsat_fits(m, &k); k.mbs = hi) lo = hi, hi *= 2;
    if (hi >= cap) return lo;
    while (hi - lo > 1) { /* lo fits, hi does not */
        k.mbs = lo + (hi - lo) / 2;
        if (dt__dsat_fits(m, &k))
            lo = k.mbs;
        else
            hi = k.mbs;
    }
    return lo;
}

int32_t dt__dsat_lineage_new(dt__dsat_method *m, int stage, int64_t lo, int64_t hi) {
    const dt__dsat_feasible *f = &m->feas[stage];
    dt_dsat_knobs k = decode(stage, f->v[dt_rng_below(&m->rng, (uint64_t)f->n)]);
    if (hi == 0) {
        int64_t approx = k.offload_optimizer ? fit_max(m, k) : m->sp.approx_max_mbs[stage];
        double h = floor(m->sp.search_range_factor * (double)approx);
        lo = 1;
        hi = h < 1 ? 1 : h > 0x1p62 ? (int64_t)1 << 62 : (int64_t)h;
    }
    m->l[m->nl] = (dt__dsat_lineage){.k = k, .lo = lo, .hi = hi, .last = -1};
    return m->nl;
}

int32_t dt__dsat_fresh_uniform(dt__dsat_method *m) {
    int s = dt__dsat_draw_stage(m, 0);
    return s < 0 ? -1 : dt__dsat_lineage_new(m, s, 0, 0);
}

int64_t dt__dsat_binomial_pick(dt__dsat_method *m, int64_t lo, int64_t hi) {
    int64_t n = hi - lo, x = 0;
    if (n <= 4096) {
        for (int64_t i = 0; i < n; i += 64) {
            uint64_t bits = dt_rng_u64(&m->rng);
            if (n - i < 64) bits &= ((uint64_t)1 << (n - i)) - 1;
            x += __builtin_popcountll(bits);
        }
        return lo + x;
    }
    /* Box–Muller: mean n/2, standard deviation sqrt(n)/2 */
    double u1 = dt_rng_uniform(&m->rng), u2 = dt_rng_uniform(&m->rng);
    double z = sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
    double v = round((double)n / 2 + sqrt((double)n) / 2 * z);
    x = v < 0 ? 0 : v > (double)n ? n : (int64_t)v;
    return lo + x;
}

void dt__dsat_update_halving(dt__dsat_method *m, dt__dsat_lineage *L, const dt__dsat_trial *t) {
    (void)m;
    if (t->outcome == DT__T_OK)
        L->lo = t->k.mbs + 1;
    else
        L->hi = t->k.mbs - 1;
}

int64_t dt__dsat_pick_mid(dt__dsat_method *m, const dt__dsat_lineage *L) {
    (void)m;
    return L->lo + (L->hi - L->lo) / 2;
}

bool dt__dsat_better(const dt__dsat_method *m, double a, double b) {
    return m->o.smaller_is_better ? a < b : a > b;
}

int64_t dt__dsat_best_of(const dt__dsat_method *m, int stage, int32_t lineage, int32_t max_rung) {
    int64_t best = -1;
    for (int64_t i = 0; i < m->nt; i++) {
        const dt__dsat_trial *t = &m->t[i];
        if (t->outcome != DT__T_OK || (stage >= 0 && t->k.zero_stage != stage) ||
            (lineage >= 0 && t->lineage != lineage) || (max_rung >= 0 && t->rung > max_rung))
            continue;
        if (best < 0 || dt__dsat_better(m, t->metric, m->t[best].metric)) best = i;
    }
    return best;
}
