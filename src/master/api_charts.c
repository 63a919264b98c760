/*
 * api_charts.c — the read routes the web UI's views need beyond the CLI's (docs/api.md):
 * a metric of every trial of an experiment downsampled for a chart (the store keeps each
 * bucket's minimum and maximum, so spikes survive), and the searcher's snapshot (adaptive_asha's
 * brackets and rungs).
 */
#include "api_impl.h"

#include <string.h>

#define CHART_POINTS 500 /* per trial, by default */

static void series_of(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                      dt_http_resp *resp) {
    const char *kind = dt_http_query(req, "kind"), *name = dt_http_query(req, "name"),
               *x = dt_http_query(req, "x");
    if (!kind) kind = "validation";
    if (!x) x = "batches";
    int64_t points = m_api_query_int(req, "points", CHART_POINTS),
            trial = m_api_query_int(req, "trial", 0);
    json_t *names = NULL, *series = NULL;
    dt_status st = dt_store_metric_names(m->store, id, trial, kind, &names);
    if (st == DT_OK && !name) {
        /* the searcher metric when it is among them, else the first */
        const char *sm = json_string_value(json_object_get(row, "searcher_metric"));
        size_t i;
        json_t *v;
        json_array_foreach(names, i, v) if (sm && !strcmp(json_string_value(v), sm)) name = sm;
        if (!name) name = json_string_value(json_array_get(names, 0));
    }
    if (st == DT_OK)
        st = dt_store_metric_series(m->store, id, trial, kind, name, x, points, &series);
    m_api_status(resp, st,
                 st == DT_OK
                     ? json_pack("{sssssssIsoso}", "kind", kind, "name", name ? name : "", "x", x,
                                 "points", (json_int_t)points, "names", names, "series", series)
                     : NULL);
    if (st != DT_OK) json_decref(names), json_decref(series);
}

void m_api_experiment_metrics(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_EXPERIMENT, series_of);
}

static void searcher_of(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                        dt_http_resp *resp) {
    (void)row, (void)req;
    json_t *snap = NULL;
    dt_status st = dt_store_searcher_load(m->store, id, &snap);
    m_api_status(resp, st,
                 st == DT_OK ? json_pack("{so}", "searcher", snap ? snap : json_null()) : NULL);
}

void m_api_experiment_searcher(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_EXPERIMENT, searcher_of);
}
