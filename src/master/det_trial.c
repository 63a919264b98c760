/*
 * det_trial.c — the reference's trial and checkpoint routes (det_impl.h): a trial, its
 * workloads, its log as a stream of JSON lines (followed until the trial ends), its
 * checkpoints, one checkpoint, and a checkpoint's files as a gzipped tar.
 */
#define _GNU_SOURCE
#include "det_impl.h"

#include "master/det_pack.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

json_t *m_det_trial_full(master *m, const json_t *row) {
    json_t *t = m_det_trial(row), *rows = NULL;
    if (dt_store_metrics_query(m->store, json_integer_value(json_object_get(row, "id")), NULL, 0, 0,
                               &rows) == DT_OK)
        json_object_set_new(t, "summaryMetrics", m_det_summary(rows));
    dt_clear_error();
    json_decref(rows);
    return t;
}

void m_det_get_trial(master *m, const dt_http_req *req, dt_http_resp *resp) {
    int64_t id;
    pthread_mutex_lock(&m->lock);
    json_t *row = m_det_row(m, M_OWNER_TRIAL, req, &id, resp);
    if (row) resp->json = json_pack("{s:o}", "trial", m_det_trial_full(m, row));
    pthread_mutex_unlock(&m->lock);
    json_decref(row);
}

/* The resolved checkpoint root of experiment `exp_row` (malloc'd), or NULL. */
static char *ckpt_root(master *m, const json_t *exp_row) {
    dt_expconf *cfg = NULL;
    char *root = NULL;
    if (dt_expconf_from_json(json_object_get(exp_row, "config"), DT_EXPCONF_MAX_LENGTH_OPTIONAL,
                             &cfg) == DT_OK)
        root = m_exp_ckpt_root(m, cfg);
    dt_expconf_free(cfg);
    dt_clear_error();
    return root;
}

/* qsort order of checkpoint copies (json_t *) carrying their sort key: "_none" (no metric:
 * last), then the number "_key", then the time "_t" (ISO 8601 text sorts as time). */
static int by_key(const void *a, const void *b) {
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    bool nx = json_is_true(json_object_get(x, "_none")),
         ny = json_is_true(json_object_get(y, "_none"));
    if (nx != ny) return nx ? 1 : -1;
    double kx = json_number_value(json_object_get(x, "_key")),
           ky = json_number_value(json_object_get(y, "_key"));
    if (kx != ky) return kx < ky ? -1 : 1;
    const char *tx = json_string_value(json_object_get(x, "_t")),
               *ty = json_string_value(json_object_get(y, "_t"));
    return strcmp(tx ? tx : "", ty ? ty : "");
}

void m_det_ckpt_answer(master *m, const json_t *exp_row, dt_status st, json_t *rows,
                       const dt_http_req *req, dt_http_resp *resp) {
    if (st != DT_OK) {
        m_det_fail(resp, st);
        return;
    }
    const char *attr = dt_http_query(req, "sortByAttr"), *order = dt_http_query(req, "orderBy");
    bool by_metric = attr && !strcmp(attr, "SORT_BY_SEARCHER_METRIC");
    bool smaller = !json_is_false(json_object_get(exp_row, "smaller_is_better"));
    /* the metric without orderBy: best first; with it, by value; else by report time */
    double sign = !order ? (smaller ? 1 : -1) : !strcmp(order, "ORDER_BY_DESC") ? -1 : 1;
    size_t n = json_array_size(rows), k = 0;
    json_t **v = calloc(n ? n : 1, sizeof *v), *r;
    size_t i;
    json_array_foreach(rows, i, r) {
        if (!m_det_state_wanted(req, json_string_value(json_object_get(r, "state")))) continue;
        json_t *c = json_deep_copy(r);
        json_t *vm = json_object_get(r, "validation_metric");
        json_t *t = json_object_get(r, "report_time");
        json_object_set_new(
            c, "_key",
            json_real(by_metric && json_is_number(vm) ? json_number_value(vm) * sign : 0));
        json_object_set(c, "_t", t ? t : json_null());
        json_object_set_new(c, "_none", json_boolean(by_metric && !json_is_number(vm)));
        if (v)
            v[k++] = c;
        else
            json_decref(c);
    }
    if (v) qsort(v, k, sizeof *v, by_key);
    if (v && !by_metric && order && sign < 0) /* by time, newest first */
        for (size_t a = 0, b = k; a + 1 < b--; a++) {
            json_t *x = v[a];
            v[a] = v[b];
            v[b] = x;
        }
    char *root = ckpt_root(m, exp_row);
    json_t *list = json_array();
    for (size_t j = 0; j < k; j++) {
        json_array_append_new(list, m_det_checkpoint(v[j], exp_row, root));
        json_decref(v[j]);
    }
    free(v);
    free(root);
    json_decref(rows);
    resp->json = m_det_page(req, "checkpoints", list);
}

void m_det_trial_checkpoints(master *m, const dt_http_req *req, dt_http_resp *resp) {
    int64_t id;
    json_t *rows = NULL, *exp_row = NULL;
    pthread_mutex_lock(&m->lock);
    json_t *row = m_det_row(m, M_OWNER_TRIAL, req, &id, resp);
    dt_status st =
        row ? dt_store_exp_get(m->store, json_integer_value(json_object_get(row, "experiment_id")),
                               &exp_row)
            : DT_OK;
    if (row && st == DT_OK) st = dt_store_ckpt_list(m->store, 0, id, &rows);
    if (row) m_det_ckpt_answer(m, exp_row, st, rows, req, resp);
    pthread_mutex_unlock(&m->lock);
    json_decref(exp_row);
    json_decref(row);
}

/* The checkpoint of the path's uuid and its experiment's row, or false with a 404 / 500. */
static bool ckpt_of(master *m, const dt_http_req *req, json_t **ck, json_t **exp_row,
                    dt_http_resp *resp) {
    *ck = *exp_row = NULL;
    dt_status st = dt_store_ckpt_get(m->store, req->params[0], ck);
    if (st == DT_OK)
        st = dt_store_exp_get(m->store, json_integer_value(json_object_get(*ck, "experiment_id")),
                              exp_row);
    if (st == DT_OK) return true;
    if (st == DT_ERR_INVALID)
        m_det_error(resp, 404, "checkpoint %s not found", req->params[0]);
    else
        m_det_fail(resp, st);
    json_decref(*ck);
    *ck = NULL;
    return false;
}

void m_det_get_checkpoint(master *m, const dt_http_req *req, dt_http_resp *resp) {
    json_t *ck, *exp_row;
    pthread_mutex_lock(&m->lock);
    if (ckpt_of(m, req, &ck, &exp_row, resp)) {
        char *root = ckpt_root(m, exp_row);
        resp->json = json_pack("{s:o}", "checkpoint", m_det_checkpoint(ck, exp_row, root));
        free(root);
    }
    pthread_mutex_unlock(&m->lock);
    json_decref(ck);
    json_decref(exp_row);
}

void m_det_download_checkpoint(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    if (!m_det_authed(m, req, resp)) return;
    json_t *ck, *exp_row;
    char path[4096] = "";
    pthread_mutex_lock(&m->lock);
    bool ok = ckpt_of(m, req, &ck, &exp_row, resp);
    if (ok) snprintf(path, sizeof path, "%s", json_string_value(json_object_get(ck, "path")));
    bool gone = ok && strcmp(json_string_value(json_object_get(ck, "state")), "COMPLETED");
    pthread_mutex_unlock(&m->lock);
    json_decref(ck);
    json_decref(exp_row);
    if (!ok) return;
    if (gone) {
        m_det_error(resp, 404, "checkpoint %s was deleted", req->params[0]);
        return;
    }
    dt__buf tar = {0}, gz = {0};
    dt_status st = dt__tar_from_dir(path, &tar); /* outside the lock: files, not the store */
    if (st == DT_OK) dt__gzip_put(&gz, tar.p, tar.len);
    dt__buf_free(&tar);
    if (st != DT_OK || gz.oom) {
        dt__buf_free(&gz);
        m_det_error(resp, 500, "%s", st != DT_OK ? dt_last_error() : "out of memory");
        return;
    }
    resp->raw = gz.p;
    resp->raw_len = gz.len;
    resp->content_type = "application/gzip";
}
