/*
 * random.c — the random and single search methods (single is random with max_trials 1).
 *
 * random runs min(max_trials, max_concurrent_trials) trials at once, each with values drawn
 * from the config (CREATE, then VALIDATE_AFTER max_length; CLOSE once that validation is in;
 * without max_length, for a command entrypoint that decides its own, CLOSE at once).
 * Each closed trial makes room for a new one while requested − invalid < max_trials, so a trial
 * that exits with invalid hyperparameters is replaced; an errored or canceled one counts as one
 * of the max_trials. SHUTDOWN once every trial has closed and no more will be created.
 * Progress: (closed − invalid) / max_trials.
 */
#include "search_impl.h"

#include <stdlib.h>

enum { C_REQUESTED, C_INVALID, C_OPEN, C_CLOSED, C_N };
static const char *const KEYS[C_N] = {"requested", "invalid", "open", "closed"};

typedef struct rnd {
    const char *name;
    int64_t max_trials, max_concurrent;
    dt_length length;
    int64_t c[C_N];
} rnd;

static dt_status rnd_start(rnd *r, dt_search_ctx *sc, dt_search_ops *out) {
    dt_status st = dt__search_start(sc, NULL, r->length, out, NULL);
    if (!st) {
        r->c[C_REQUESTED]++;
        r->c[C_OPEN]++;
    }
    return st;
}

static dt_status rnd_initial(void *state, dt_search_ctx *sc, dt_search_ops *out) {
    rnd *r = state;
    int64_t n = r->max_trials < r->max_concurrent ? r->max_trials : r->max_concurrent;
    dt_status st = DT_OK;
    for (int64_t i = 0; i < n && !st; i++) st = rnd_start(r, sc, out);
    return st;
}

static dt_status rnd_validated(void *state, dt_search_ctx *sc, int64_t id, double metric,
                               dt_length length, dt_search_ops *out) {
    rnd *r = state;
    (void)sc, (void)metric;
    return r->length.n > 0 && length.n >= r->length.n ? dt_search_close(out, id) : DT_OK;
}

static dt_status rnd_closed(void *state, dt_search_ctx *sc, int64_t id, dt_search_ops *out) {
    rnd *r = state;
    (void)id;
    r->c[C_OPEN]--;
    r->c[C_CLOSED]++;
    if (r->c[C_REQUESTED] - r->c[C_INVALID] < r->max_trials) return rnd_start(r, sc, out);
    return r->c[C_OPEN] == 0 ? dt_search_shutdown(out, false, false) : DT_OK;
}

static dt_status rnd_exited(void *state, dt_search_ctx *sc, int64_t id, dt_search_exit why,
                            dt_search_ops *out) {
    rnd *r = state;
    (void)sc, (void)id, (void)out;
    if (why == DT_SEARCH_EXIT_INVALID_HP) r->c[C_INVALID]++;
    return DT_OK;
}

static double rnd_progress(void *state, dt_search_ctx *sc) {
    rnd *r = state;
    (void)sc;
    return (double)(r->c[C_CLOSED] - r->c[C_INVALID]) / (double)r->max_trials;
}

static json_t *rnd_save(void *state) {
    rnd *r = state;
    return dt__search_counters_save(KEYS, r->c, C_N);
}

static dt_status rnd_load(void *state, const json_t *saved) {
    rnd *r = state;
    return dt__search_counters_load(saved, r->name, KEYS, r->c, C_N);
}

static dt_status rnd_new(const dt_expconf *cfg, const char *name, int64_t max_trials,
                         int64_t max_concurrent, dt_search_method *out) {
    if (cfg->searcher.max_length.n <= 0 && !cfg->entry_command) /* a command sets its own */
        return dt_error(DT_ERR_CONFIG,
                        "the %s searcher needs searcher.max_length; hint: e.g. "
                        "`max_length: {batches: 1000}`",
                        name);
    if (max_trials <= 0)
        return dt_error(DT_ERR_CONFIG,
                        "the %s searcher needs searcher.max_trials (the number "
                        "of trials to run)",
                        name);
    rnd *r = calloc(1, sizeof *r);
    if (!r) return dt_error(DT_ERR_OOM, "out of memory creating the %s searcher", name);
    *r = (rnd){.name = name,
               .max_trials = max_trials,
               .max_concurrent = max_concurrent,
               .length = cfg->searcher.max_length};
    *out = (dt_search_method){.name = name,
                              .state = r,
                              .initial_operations = rnd_initial,
                              .on_validation_completed = rnd_validated,
                              .on_trial_closed = rnd_closed,
                              .on_trial_exited_early = rnd_exited,
                              .progress = rnd_progress,
                              .save = rnd_save,
                              .load = rnd_load,
                              .free = free};
    return DT_OK;
}

dt_status dt__search_random_new(const dt_expconf *cfg, dt_search_method *out) {
    return rnd_new(cfg, "random", cfg->searcher.max_trials, dt__search_max_concurrent(cfg), out);
}

dt_status dt__search_single_new(const dt_expconf *cfg, dt_search_method *out) {
    return rnd_new(cfg, "single", 1, 1, out);
}
