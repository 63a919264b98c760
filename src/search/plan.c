/*
 * plan.c — a searcher's plan before it runs: how many trials, how long, and for adaptive_asha
 * each bracket's rungs (lengths in the unit trials train in, or in searcher.time_metric's units
 * when the trial reports it; "unit" is then the metric's name) and how many trials reach each rung
 * when each rung passes on its best 1/divisor (under either rule): T_b at rung 0, then
 * ⌊T_b / d^i⌋ (at least 1).
 * The numbers are asha.c's own functions, so the plan is what the searcher will do.
 */
#include "search_impl.h"
#include "search/searcher.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_MAX_RUNGS 64

static dt_status asha_plan(const dt_expconf *cfg, json_t *plan) {
    const dt_searcher_conf *sc = &cfg->searcher;
    dt_length L;
    dt_status st = dt__asha_length(cfg, &L);
    if (st) return st;
    if (sc->max_trials <= 0 || !(sc->divisor > 1))
        return dt_error(DT_ERR_CONFIG, "%s needs max_trials and a divisor above 1", sc->name);
    int rungs[PLAN_MAX_RUNGS];
    int64_t trials[PLAN_MAX_RUNGS], conc[PLAN_MAX_RUNGS];
    int nb = dt__asha_layout(cfg, L.n, PLAN_MAX_RUNGS, rungs, trials, conc);
    json_t *brackets = json_array();
    const char *tm = dt_searcher_time_metric(cfg);
    json_object_set_new(plan, "unit", json_string(tm ? tm : dt_unit_name(L.unit)));
    if (sc->time_metric) json_object_set_new(plan, "time_metric", json_string(sc->time_metric));
    json_object_set_new(plan, "length", json_integer(L.n));
    json_object_set_new(plan, "brackets", brackets);
    for (int k = 0; k < nb; k++) {
        json_t *lens = json_array(), *per = json_array();
        for (int i = 0; i < rungs[k]; i++) {
            json_array_append_new(lens,
                                  json_integer(dt__asha_rung_units(L.n, sc->divisor, rungs[k], i)));
            int64_t t = (int64_t)((double)trials[k] / pow(sc->divisor, i));
            json_array_append_new(per, json_integer(t > 1 ? t : 1));
        }
        json_array_append_new(brackets, json_pack("{s:o,s:o,s:I,s:I}", "rungs", lens, "trials", per,
                                                  "max_trials", (json_int_t)trials[k],
                                                  "max_concurrent", (json_int_t)conc[k]));
    }
    return DT_OK;
}

dt_status dt_searcher_plan(const dt_expconf *cfg, json_t **out) {
    *out = NULL;
    const dt_searcher_conf *sc = &cfg->searcher;
    json_t *plan = json_pack("{s:s}", "searcher", sc->name ? sc->name : "single");
    if (!plan) return dt_error(DT_ERR_OOM, "out of memory");
    dt_status st = DT_OK;
    if (dt_searcher_is_asha(sc)) {
        json_object_set_new(plan, "trials", json_integer(sc->max_trials));
        st = asha_plan(cfg, plan);
    } else {
        int64_t trials = sc->name && !strcmp(sc->name, "random") ? sc->max_trials : 1;
        if (sc->name && !strcmp(sc->name, "grid")) {
            trials = 1; /* the grid's size: every count and categorical value */
            for (int i = 0; i < cfg->n_hparams; i++) {
                const dt_hparam *h = &cfg->hparams[i];
                int64_t n = h->type == DT_HP_CATEGORICAL ? (int64_t)json_array_size(h->vals)
                            : h->type == DT_HP_INT && h->count > (int64_t)(h->maxval - h->minval)
                                ? (int64_t)(h->maxval - h->minval) + 1
                            : h->type == DT_HP_CONST ? 1
                                                     : h->count;
                trials *= n > 0 ? n : 1;
            }
        }
        bool custom = sc->name && (!strcmp(sc->name, "custom") || !strcmp(sc->name, "dsat"));
        if (!custom) json_object_set_new(plan, "trials", json_integer(trials));
        if (sc->max_length.n > 0) {
            json_object_set_new(plan, "unit", json_string(dt_unit_name(sc->max_length.unit)));
            json_object_set_new(plan, "length", json_integer(sc->max_length.n));
        }
    }
    if (st) {
        json_decref(plan);
        return st;
    }
    *out = plan;
    return DT_OK;
}
