/*
 * search_impl.h — the runner layer's internal interface between the searcher driver
 * (search.c), the hyperparameter sampler (hparams.c) and the built-in search methods
 * (random.c, grid.c, asha.c). Nothing outside src/search/ and its tests uses it.
 */
#ifndef DTRAIN_SEARCH_IMPL_H
#define DTRAIN_SEARCH_IMPL_H

#include "dtrain/search.h"

/* ---- hyperparameters (hparams.c) ----------------------------------------------------------- */

/* One trial's values drawn from the config's definitions, in file order (int uniform inclusive,
 * double uniform, log base^uniform(exponents), categorical uniform, const as given), built into
 * an object shaped like `hyperparameters`. *out is a new reference; DT_ERR_OOM on failure. */
dt_status dt__hp_sample(const dt_expconf *cfg, dt_rng *rng, json_t **out);

/* The number of points of the grid over the config's definitions (the product of each axis'
 * size). DT_ERR_CONFIG naming the hyperparameter when an int/double/log one has no `count`, or
 * when the grid has more than DT__GRID_MAX points. */
#define DT__GRID_MAX 1000000
dt_status dt__hp_grid_size(const dt_expconf *cfg, int64_t *out);
/* Grid point `index` (0 <= index < size; the first hyperparameter varies slowest), shaped like
 * `hyperparameters`. *out is a new reference. */
dt_status dt__hp_grid_point(const dt_expconf *cfg, int64_t index, json_t **out);

/* ---- built-in methods ---------------------------------------------------------------------- */

/* Each fills *out (a method table with its own state) from the config, or returns
 * DT_ERR_CONFIG / DT_ERR_OOM with *out untouched. */
dt_status dt__search_single_new(const dt_expconf *cfg, dt_search_method *out);
dt_status dt__search_random_new(const dt_expconf *cfg, dt_search_method *out);
dt_status dt__search_grid_new(const dt_expconf *cfg, dt_search_method *out);
dt_status dt__search_asha_new(const dt_expconf *cfg, dt_search_method *out);

/* A CREATE (with `hparams` copied, or values drawn from the config when NULL) and a
 * VALIDATE_AFTER `len` for the new request, whose id goes to *id (may be NULL). */
dt_status dt__search_start(dt_search_ctx *sc, const json_t *hparams, dt_length len,
                           dt_search_ops *out, int64_t *id);

/* A method state of n named counters as a JSON object, and back: load checks every key is a
 * non-negative integer (DT_ERR_FORMAT naming `who` otherwise) and writes nothing on error. */
json_t *dt__search_counters_save(const char *const *keys, const int64_t *vals, int n);
dt_status dt__search_counters_load(const json_t *saved, const char *who, const char *const *keys,
                                   int64_t *vals, int n);

/* searcher.max_concurrent_trials, or its default (16) when not given. */
int64_t dt__search_max_concurrent(const dt_expconf *cfg);

/* ---- adaptive_asha's arithmetic (asha.c), for its tests ---------------------------------- */

#define DT__ASHA_MAX_BRACKETS 64

/* min(max_rungs, ⌊log_d(max_length)⌋ + 1, ⌊log_d(max_trials)⌋ + 1), the logs computed exactly
 * (d^k compared with the value, not the floating-point quotient of logarithms). */
int dt__asha_max_rungs(int64_t max_rungs, double divisor, int64_t max_length, int64_t max_trials);
/* The rung counts of the brackets of a mode ("aggressive", "standard", "conservative"), sorted
 * descending; returns how many (0 for an unknown mode). */
int dt__asha_brackets(const char *mode, int max_rungs, int *rungs);
/* Trials per bracket: ∝ d^(r−1)/r, at least 1 each, the remainder to the first. */
void dt__asha_bracket_trials(int64_t max_trials, double divisor, int n, const int *rungs,
                             int64_t *trials);
/* Concurrency per bracket: max(conc, n) split evenly, the remainder to the first ones. */
void dt__asha_bracket_concurrency(int64_t max_concurrent, int n, int64_t *conc);
/* The searcher's brackets for a length of L units: async_halving's one bracket of num_rungs
 * rungs, or adaptive_asha's by max_rungs and mode (capped at cap brackets); their rung counts
 * in rungs[], trials and concurrency per bracket. Returns how many, 0 for an unknown mode. */
int dt__asha_layout(const dt_expconf *cfg, int64_t L, int cap, int *rungs, int64_t *trials,
                    int64_t *conc);
/* Rung i of an r-rung bracket: max(⌊L / d^(r−i−1)⌋, 1). */
int64_t dt__asha_rung_units(int64_t max_length, double divisor, int num_rungs, int i);
/* searcher.max_length in the unit trials train in (epochs → records → batches when the batch
 * size is one constant): the L rungs are placed along. DT_ERR_CONFIG when it cannot be. */
dt_status dt__asha_length(const dt_expconf *cfg, dt_length *out);

#endif
