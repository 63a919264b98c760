/*
 * search_random.c — dsat's random method: lineages of a random configuration whose
 * micro-batch is drawn as lo + Binomial(hi − lo, 1/2) (a wider look than the midpoint, still
 * centred on it), with the reference's early-stopping rules built on what the search has seen.
 *
 * A new lineage: the stage is drawn among stages 1 and 2 once either has succeeded (stage 3
 * only costs more), else among all; its range is [best mbs + 1, max(2 × best mbs, that trial's
 * hi)] when the stage already has a best trial, else the common range [1, max(⌊f × approx⌋,
 * 1)]. After a success lo = mbs + 1 (and when lo > hi, hi doubles: the estimate was low); after
 * an OOM or failure hi = mbs − 1.
 * A lineage stops after a failure at mbs <= lo, after trials_per_random_config results, when it
 * is stage 3 while stage 1 or 2 succeeded, or when it has failed and a trial of its stage
 * already succeeded at mbs >= its hi. A proposal is dropped (counted as discarded, and a new
 * lineage drawn) when a trial of the same stage already succeeded at a larger micro-batch or
 * its lineage should stop. The driver stops the search after early_stopping trials without a
 * new best.
 */
#include "dsat_search_impl.h"

/* A success at stage `stage` with a micro-batch above mbs (or equal, when `or_equal`). */
static bool success_beyond(const dt__dsat_method *m, int stage, int64_t mbs, bool or_equal) {
    for (int64_t i = 0; i < m->nt; i++) {
        const dt__dsat_trial *t = &m->t[i];
        if (t->outcome == DT__T_OK && t->k.zero_stage == stage &&
            (t->k.mbs > mbs || (or_equal && t->k.mbs == mbs)))
            return true;
    }
    return false;
}

/* Should lineage L stop, given its latest result `last` (NULL: judging a new proposal)? */
static bool stop_lineage(const dt__dsat_method *m, int32_t L, const dt__dsat_trial *last) {
    const dt__dsat_lineage *l = &m->l[L];
    int stage = l->k.zero_stage;
    if (last && last->outcome != DT__T_OK && last->k.mbs <= last->lo) return true;
    if (l->n_done >= m->o.trials_per_random_config) return true;
    if (stage == 3 && (m->ok_stages & 6u)) return true;

    return l->failed && success_beyond(m, stage, l->hi, true);
}

static void random_update(dt__dsat_method *m, dt__dsat_lineage *L, const dt__dsat_trial *t) {
    (void)m;
    if (t->outcome != DT__T_OK) {
        L->hi = t->k.mbs - 1;
        return;
    }
    L->lo = t->k.mbs + 1;
    if (L->lo > L->hi) L->hi = L->hi > INT64_MAX / 2 ? INT64_MAX : 2 * L->hi;
}

static bool random_cont(dt__dsat_method *m, int32_t L) {
    const dt__dsat_lineage *l = &m->l[L];
    return l->lo <= l->hi && !stop_lineage(m, L, &m->t[l->last]);
}

static int32_t random_fresh(dt__dsat_method *m) {
    int s = dt__dsat_draw_stage(m, m->ok_stages & 6u);
    if (s < 0) return -1;
    int64_t b = dt__dsat_best_of(m, s, -1, -1);
    if (b < 0) return dt__dsat_lineage_new(m, s, 0, 0);
    int64_t mbs = m->t[b].k.mbs, hi = m->t[b].hi;
    return dt__dsat_lineage_new(m, s, mbs + 1, 2 * mbs > hi ? 2 * mbs : hi);
}

static int64_t random_pick(dt__dsat_method *m, const dt__dsat_lineage *L) {
    return dt__dsat_binomial_pick(m, L->lo, L->hi);
}

static bool random_discard(dt__dsat_method *m, int32_t L, int64_t mbs) {
    return stop_lineage(m, L, NULL) || success_beyond(m, m->l[L].k.zero_stage, mbs, false);
}

const dt__dsat_rules dt__dsat_random_rules = {
    .name = "random",
    .update = random_update,
    .cont = random_cont,
    .fresh = random_fresh,
    .pick = random_pick,
    .discard = random_discard,
};
