/*
 * api_charts.c — the read routes the web UI's views need beyond the CLI's (docs/api.md):
 * a metric of every trial of an experiment down-sampled on the server to the points the chart
 * can show (`max_points`: per span of the x range the minimum and the maximum, and the first and
 * last points, so spikes survive; series_cache.h's dt__series_sample), and the searcher's
 * snapshot (adaptive_asha's brackets and rungs).
 *
 * A chart's answer is large (100 trials x 500 points is 1.5 MB of JSON) and pages poll it: the
 * store encodes each trial's series itself (and keeps it encoded while the trial gets no new
 * point), and the last M_CHART_ANSWERS answers are kept whole, each with the store's metrics
 * generation, and sent again while no metric row changed. The page asks for the binary form
 * (format=f64, docs/api.md): no number is written as text or parsed, half the bytes.
 */
#include "api_impl.h"

#include "master/series_cache.h"

#include <stdlib.h>
#include <string.h>

#define CHART_POINTS 1000 /* per trial, by default (a chart about 1000 pixels wide) */

/* The points a chart can show per trial: `max_points` (the page sends its plot width), else the
 * older name `points`, else CHART_POINTS. */
static int64_t chart_points(const dt_http_req *req) {
    if (dt_http_query(req, "max_points")) return m_api_query_int(req, "max_points", CHART_POINTS);
    return m_api_query_int(req, "points", CHART_POINTS);
}

/* The body's format: `format=json` (the default) or `format=f64`; -1 for another. */
static int chart_format(const dt_http_req *req) {
    const char *f = dt_http_query(req, "format");
    if (!f || !strcmp(f, "json")) return DT_SERIES_JSON;
    return !strcmp(f, "f64") ? DT_SERIES_F64 : -1;
}

/* The answer as text: the header members encoded by jansson, the series spliced in as the
 * store wrote them (no JSON value per point). */
static void series_of(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                      dt_http_resp *resp) {
    const char *kind = dt_http_query(req, "kind"), *name = dt_http_query(req, "name"),
               *x = dt_http_query(req, "x");
    if (!kind) kind = "validation";
    if (!x) x = "batches";
    int64_t points = chart_points(req), trial = m_api_query_int(req, "trial", 0);
    int format = chart_format(req);
    json_t *names = NULL;
    char *series = NULL, *head = NULL;
    size_t series_len = 0;
    dt_status st = DT_OK;
    if (format < 0)
        st = dt_error(DT_ERR_INVALID, "format must be json or f64, not \"%s\"",
                      dt_http_query(req, "format"));
    else if (points < 2 || points > 100000)
        st = dt_error(DT_ERR_INVALID,
                      "max_points must be 2..100000, not %lld; hint: the points a chart can show "
                      "per trial, e.g. its width in pixels",
                      (long long)points);
    else
        st = dt_store_metric_names(m->store, id, trial, kind, &names);
    if (st == DT_OK && !name) {
        /* the searcher metric when it is among them, else the first */
        const char *sm = json_string_value(json_object_get(row, "searcher_metric"));
        size_t i;
        json_t *v;
        json_array_foreach(names, i, v) if (sm && !strcmp(json_string_value(v), sm)) name = sm;
        if (!name) name = json_string_value(json_array_get(names, 0));
    }
    if (st == DT_OK)
        st = dt_store_metric_series_text(m->store, id, trial, kind, name, x, points,
                                         (dt_series_format)format, &series, &series_len);
    if (st == DT_OK) {
        json_t *h = json_pack("{sssssssIsIso}", "kind", kind, "name", name ? name : "", "x", x,
                              "max_points", (json_int_t)points, "points", (json_int_t)points,
                              "names", names);
        names = NULL;
        head = h ? json_dumps(h, JSON_COMPACT) : NULL; /* {...} */
        json_decref(h);
        if (head && (resp->raw = dt__chart_frame(format == DT_SERIES_F64, head, series,
                                                 series_len, &resp->raw_len)))
            resp->content_type = format == DT_SERIES_F64 ? "application/octet-stream" : NULL;
        else
            st = dt_error(DT_ERR_OOM, "out of memory answering a chart");
    }
    json_decref(names);
    free(head);
    free(series);
    if (st != DT_OK) m_api_status(resp, st, NULL);
}

void m_charts_free(master *m) {
    for (int i = 0; i < M_CHART_ANSWERS; i++) {
        free(m->charts[i].key);
        free(m->charts[i].body);
        m->charts[i] = (m_chart_answer){0};
    }
}

/* The kept answer of `key` made at generation `gen`, or NULL. */
static m_chart_answer *kept_answer(master *m, const char *key, uint64_t gen) {
    for (int i = 0; i < M_CHART_ANSWERS; i++) {
        m_chart_answer *a = &m->charts[i];
        if (a->key && a->gen == gen && !strcmp(a->key, key)) {
            a->used = ++m->charts_clock;
            return a;
        }
    }
    return NULL;
}

/* Keep a copy of `body` as the answer of `key` in the least recently used slot (nothing is kept
 * when out of memory). */
static void keep_answer(master *m, const char *key, uint64_t gen, const dt_http_resp *resp) {
    m_chart_answer *a = &m->charts[0];
    for (int i = 1; i < M_CHART_ANSWERS; i++)
        if (m->charts[i].used < a->used) a = &m->charts[i];
    free(a->key);
    free(a->body);
    size_t len = resp->raw_len;
    *a = (m_chart_answer){.key = strdup(key),
                          .gen = gen,
                          .used = ++m->charts_clock,
                          .body = malloc(len),
                          .len = len,
                          .type = resp->content_type};
    if (a->key && a->body) {
        memcpy(a->body, resp->raw, len);
    } else {
        free(a->key);
        free(a->body);
        *a = (m_chart_answer){0};
    }
}

/* Answer with a copy of a kept answer; false when out of memory. */
static bool send_kept(dt_http_resp *resp, const m_chart_answer *a) {
    if (!(resp->raw = malloc(a->len))) return false;
    memcpy(resp->raw, a->body, a->len);
    resp->raw_len = a->len;
    resp->content_type = a->type;
    return true;
}

static void kept_series_of(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                           dt_http_resp *resp) {
    /* the key: every query argument the answer depends on */
    json_t *k = json_pack("[Is?s?s?s?s?s?s?]", (json_int_t)id, dt_http_query(req, "kind"),
                          dt_http_query(req, "name"), dt_http_query(req, "x"),
                          dt_http_query(req, "max_points"), dt_http_query(req, "points"),
                          dt_http_query(req, "trial"), dt_http_query(req, "format"));
    char *key = k ? json_dumps(k, JSON_COMPACT) : NULL;
    json_decref(k);
    uint64_t gen = dt_store_metrics_generation(m->store);
    m_chart_answer *a = key ? kept_answer(m, key, gen) : NULL;
    if (!a || !send_kept(resp, a)) {
        series_of(m, id, row, req, resp);
        if (resp->raw && key) keep_answer(m, key, gen, resp);
    }
    free(key);
}

void m_api_experiment_metrics(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_EXPERIMENT, kept_series_of);
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
