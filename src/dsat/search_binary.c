/*
 * search_binary.c — dsat's binary method: a random configuration (a stage drawn uniformly
 * from --zero-stages, its knobs drawn uniformly from the stage's feasible sets) and a binary
 * search on its micro-batch over [1, max(⌊search_range_factor × approx_max_mbs⌋, 1)]: try
 * mbs = (lo + hi) / 2; success -> lo = mbs + 1, OOM or failure -> hi = mbs − 1; when lo > hi
 * the lineage is over and a new random configuration takes its place.
 */
#include "dsat_search_impl.h"

static bool binary_cont(dt__dsat_method *m, int32_t L) {
    return m->l[L].lo <= m->l[L].hi;
}

const dt__dsat_rules dt__dsat_binary_rules = {
    .name = "binary",
    .update = dt__dsat_update_halving,
    .cont = binary_cont,
    .fresh = dt__dsat_fresh_uniform,
    .pick = dt__dsat_pick_mid,
};
