/*
 * grid.c — the grid search method: one trial per point of the cartesian product of the
 * hyperparameters' axes (hparams.c), in order, max_concurrent_trials at a time.
 *
 * Each trial: CREATE with its point, VALIDATE_AFTER max_length, CLOSE once that validation is
 * in. A closed trial makes room for the next point. A trial that exits early (invalid
 * hyperparameters included) is not replaced: its point was tried. SHUTDOWN once every point's
 * trial has closed. Progress: closed / points.
 */
#include "search_impl.h"

#include <stdlib.h>

enum { C_SIZE, C_NEXT, C_OPEN, C_CLOSED, C_N };
static const char *const KEYS[C_N] = {"size", "next", "open", "closed"};

typedef struct grid {
    const dt_expconf *cfg;
    int64_t max_concurrent;
    int64_t c[C_N];
} grid;

static dt_status grid_start(grid *g, dt_search_ctx *sc, dt_search_ops *out) {
    json_t *hp;
    dt_status st = dt__hp_grid_point(g->cfg, g->c[C_NEXT], &hp);
    if (st) return st;
    st = dt__search_start(sc, hp, g->cfg->searcher.max_length, out, NULL);
    json_decref(hp);
    if (!st) {
        g->c[C_NEXT]++;
        g->c[C_OPEN]++;
    }
    return st;
}

static dt_status grid_initial(void *state, dt_search_ctx *sc, dt_search_ops *out) {
    grid *g = state;
    dt_status st = DT_OK;
    while (!st && g->c[C_NEXT] < g->c[C_SIZE] && g->c[C_OPEN] < g->max_concurrent)
        st = grid_start(g, sc, out);
    return st;
}

static dt_status grid_validated(void *state, dt_search_ctx *sc, int64_t id, double metric,
                                dt_length length, dt_search_ops *out) {
    grid *g = state;
    (void)sc, (void)metric;
    return g->cfg->searcher.max_length.n > 0 && length.n >= g->cfg->searcher.max_length.n
               ? dt_search_close(out, id)
               : DT_OK;
}

static dt_status grid_closed(void *state, dt_search_ctx *sc, int64_t id, dt_search_ops *out) {
    grid *g = state;
    (void)id;
    g->c[C_OPEN]--;
    g->c[C_CLOSED]++;
    if (g->c[C_NEXT] < g->c[C_SIZE]) return grid_start(g, sc, out);
    return g->c[C_OPEN] == 0 ? dt_search_shutdown(out, false, false) : DT_OK;
}

static double grid_progress(void *state, dt_search_ctx *sc) {
    grid *g = state;
    (void)sc;
    return (double)g->c[C_CLOSED] / (double)g->c[C_SIZE];
}

static json_t *grid_save(void *state) {
    grid *g = state;
    return dt__search_counters_save(KEYS, g->c, C_N);
}

static dt_status grid_load(void *state, const json_t *saved) {
    grid *g = state;
    int64_t c[C_N];
    dt_status st = dt__search_counters_load(saved, "grid", KEYS, c, C_N);
    if (st) return st;
    if (c[C_SIZE] != g->c[C_SIZE] || c[C_NEXT] > c[C_SIZE])
        return dt_error(DT_ERR_FORMAT,
                        "searcher snapshot: its grid has %lld points, this config's %lld; hint: "
                        "load it into a searcher made from the experiment's own config",
                        (long long)c[C_SIZE], (long long)g->c[C_SIZE]);
    for (int i = 0; i < C_N; i++) g->c[i] = c[i];
    return DT_OK;
}

dt_status dt__search_grid_new(const dt_expconf *cfg, dt_search_method *out) {
    int64_t size;
    if (cfg->searcher.max_length.n <= 0 && !cfg->entry_command) /* a command sets its own */
        return dt_error(DT_ERR_CONFIG, "the grid searcher needs searcher.max_length; hint: e.g. "
                                       "`max_length: {batches: 1000}`");
    dt_status st = dt__hp_grid_size(cfg, &size);
    if (st) return st;
    grid *g = calloc(1, sizeof *g);
    if (!g) return dt_error(DT_ERR_OOM, "out of memory creating the grid searcher");
    g->cfg = cfg;
    g->max_concurrent = dt__search_max_concurrent(cfg);
    g->c[C_SIZE] = size;
    *out = (dt_search_method){.name = "grid",
                              .state = g,
                              .initial_operations = grid_initial,
                              .on_validation_completed = grid_validated,
                              .on_trial_closed = grid_closed,
                              .progress = grid_progress,
                              .save = grid_save,
                              .load = grid_load,
                              .free = free};
    return DT_OK;
}
