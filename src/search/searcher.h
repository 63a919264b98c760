/*
 * search/searcher.h — the searcher driver the master runs for every experiment: one search
 * method (built-in or custom, dtrain/search.h) with request ids, counts, the RNG, checks of
 * each event and one JSON snapshot (search.c). Method authors never call it.
 */
#ifndef DTRAIN_SEARCHER_H
#define DTRAIN_SEARCHER_H

#include "dtrain/search.h"

/* ---- the driver (search.c, builtin.c) ---- */
/* The searcher the config's `searcher.name` names (single, random, grid, adaptive_asha),
 * seeded with `seed` (the experiment seed). DT_ERR_CONFIG naming the searcher and the
 * choices for an unknown name or settings it cannot run (e.g. grid without a count). */
DT_API dt_status dt_searcher_new(const dt_expconf *cfg, uint64_t seed, dt_searcher **out);
DT_API void dt_searcher_free(dt_searcher *s);
DT_API void dt_searcher_set_metrics_source(dt_searcher *s, dt_search_metrics_fn fn, void *arg);
DT_API dt_status dt_searcher_initial_operations(dt_searcher *s, dt_search_ops *out);
DT_API dt_status dt_searcher_trial_created(dt_searcher *s, int64_t request_id, dt_search_ops *out);
DT_API dt_status dt_searcher_validation_completed(dt_searcher *s, int64_t request_id, double metric,
                                                  dt_length length, dt_search_ops *out);
DT_API dt_status dt_searcher_trial_closed(dt_searcher *s, int64_t request_id, dt_search_ops *out);
DT_API dt_status dt_searcher_trial_exited_early(dt_searcher *s, int64_t request_id,
                                                dt_search_exit why, dt_search_ops *out);
DT_API double dt_searcher_progress(dt_searcher *s);
DT_API json_t *dt_searcher_save(const dt_searcher *s);
DT_API dt_status dt_searcher_load(dt_searcher *s, const json_t *snapshot);
/* What the config's searcher will do, before it runs (`dtrain config check` prints it; plan.c):
 * a new object {searcher, unit, length, trials, brackets: [{rungs: [lengths], trials: [per
 * rung], max_concurrent}]} (brackets for adaptive_asha only; lengths in the unit trials train
 * in). DT_ERR_CONFIG when the searcher could not be built from the config. */
DT_API dt_status dt_searcher_plan(const dt_expconf *cfg, json_t **out);

DT_API void dt_search_ops_free(dt_search_ops *ops);

#endif
