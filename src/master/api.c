/*
 * api.c — the REST API's route table (docs/api.md) and the handlers for the master itself.
 * The experiment handlers are in api_exp.c, the log handlers in api_logs.c, the trial and
 * checkpoint handlers in api_trial.c, the chart data and searcher snapshot in api_charts.c, a
 * dsat search's results in api_dsat.c. Every handler takes the master's lock for its whole run.
 * The reference platform's client shares the table (det_impl.h, docs/det-client.md): its own
 * routes are m_det_*, and on a path both clients use m_det_or_* answers a login token's
 * request in the reference's shapes and every other request with dtrain's handler.
 */
#define _GNU_SOURCE
#include "api_impl.h"
#include "det_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- shared by the handlers ---- */

void m_api_fail(dt_http_resp *resp, dt_status st) {
    int code = st == DT_ERR_CONFIG || st == DT_ERR_INVALID ? 400 : st == DT_ERR_STATE ? 409 : 500;
    dt_http_error(resp, code, "%s", dt_last_error());
}

void m_api_status(dt_http_resp *resp, dt_status st, json_t *ok) {
    if (st != DT_OK) {
        json_decref(ok);
        m_api_fail(resp, st);
        return;
    }
    resp->json = ok ? ok : json_object();
}

bool m_api_id(const dt_http_req *req, int i, int64_t *id, dt_http_resp *resp) {
    const char *s = i < req->n_params ? req->params[i] : NULL;
    char *end = NULL;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v <= 0) {
        dt_http_error(resp, 400, "'%s' is not an id; hint: ids are positive integers", s ? s : "");
        return false;
    }
    *id = v;
    return true;
}

int64_t m_api_query_int(const dt_http_req *req, const char *key, int64_t dflt) {
    const char *s = dt_http_query(req, key);
    char *end = NULL;
    long long v = s ? strtoll(s, &end, 10) : 0;
    return s && *s && !*end ? v : dflt;
}

/* The experiment or trial row `id`, or NULL with a 404 (unknown) or 500 answer. */
static json_t *owner_row(master *m, m_owner kind, int64_t id, dt_http_resp *resp) {
    json_t *row = NULL;
    dt_status st = kind == M_OWNER_EXPERIMENT ? dt_store_exp_get(m->store, id, &row)
                                              : dt_store_trial_get(m->store, id, &row);
    if (st == DT_OK) return row;
    if (st == DT_ERR_INVALID)
        dt_http_error(resp, 404, "no %s %lld; hint: %s",
                      kind == M_OWNER_EXPERIMENT ? "experiment" : "trial", (long long)id,
                      kind == M_OWNER_EXPERIMENT ? "dtrain experiment list shows them"
                                                 : "dtrain trial list EXPERIMENT shows them");
    else
        m_api_fail(resp, st);
    return NULL;
}

void m_api_read(void *app, const dt_http_req *req, dt_http_resp *resp, m_owner kind,
                m_read_fn read) {
    master *m = app;
    int64_t id;
    if (!m_api_id(req, 0, &id, resp)) return;
    pthread_mutex_lock(&m->lock);
    json_t *row = owner_row(m, kind, id, resp);
    if (row) read(m, id, row, req, resp);
    json_decref(row);
    pthread_mutex_unlock(&m->lock);
}

void m_api_list(const dt_http_req *req, dt_http_resp *resp, dt_status st, const char *key,
                json_t *list) {
    if (st != DT_OK) {
        m_api_fail(resp, st);
        return;
    }
    int64_t total = (int64_t)json_array_size(list),
            offset = req ? m_api_query_int(req, "offset", 0) : 0,
            limit = req ? m_api_query_int(req, "limit", 0) : 0;
    if (offset < 0 || limit < 0) {
        json_decref(list);
        dt_http_error(resp, 400, "offset and limit must be >= 0");
        return;
    }
    if (offset > 0 || limit > 0) {
        json_t *page = json_array();
        for (int64_t i = offset; page && i < total && (!limit || i < offset + limit); i++)
            json_array_append(page, json_array_get(list, (size_t)i));
        json_decref(list);
        list = page;
    }
    m_api_status(resp, list ? DT_OK : dt_error(DT_ERR_OOM, "out of memory paging %s", key),
                 list ? json_pack("{sosI}", key, list, "total", (json_int_t)total) : NULL);
}

char *m_api_exp_dir(master *m, const dt_expconf *cfg, int64_t id) {
    char *root = m_exp_ckpt_root(m, cfg), *dir = NULL;
    if (root && asprintf(&dir, "%s/exp-%lld", root, (long long)id) < 0) dir = NULL;
    free(root);
    return dir;
}

/* ---- the master ---- */

void m_api_get_master(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)req;
    master *m = app;
    pthread_mutex_lock(&m->lock);
    int used = 0;
    for (int i = 0; i < m->slots; i++) used += m->slot_busy[i] != 0;
    resp->json =
        json_pack("{ss,si,si,si,ss,sf}", "version", "0.1.0", "pid", (int)getpid(), "slots",
                  m->slots, "slots_used", used, "home", m->home, "uptime_s", m_now() - m->started);
    pthread_mutex_unlock(&m->lock);
}

static void post_shutdown(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)req;
    master *m = app;
    m->stop = 1;
    resp->json = json_object();
}

const dt_http_route m_routes[] = {
    {"GET", "/api/v1/master", m_det_or_get_master},
    {"POST", "/api/v1/master/shutdown", post_shutdown},
    {"POST", "/api/v1/experiments", m_det_or_create_experiment},
    {"GET", "/api/v1/experiments", m_det_or_list_experiments},
    {"GET", "/api/v1/experiments/{}", m_det_or_get_experiment},
    {"DELETE", "/api/v1/experiments/{}", m_api_delete_experiment},
    {"GET", "/api/v1/experiments/{}/trials", m_det_or_experiment_trials},
    {"GET", "/api/v1/experiments/{}/checkpoints", m_det_or_experiment_checkpoints},
    {"GET", "/api/v1/experiments/{}/logs", m_api_experiment_logs},
    {"GET", "/api/v1/experiments/{}/metrics", m_api_experiment_metrics},
    {"GET", "/api/v1/experiments/{}/searcher", m_api_experiment_searcher},
    {"GET", "/api/v1/experiments/{}/dsat", m_api_experiment_dsat},
    {"POST", "/api/v1/experiments/{}/{}", m_det_or_experiment_action},
    {"GET", "/api/v1/trials/{}", m_det_or_get_trial},
    {"GET", "/api/v1/trials/{}/metrics", m_api_trial_metrics},
    {"GET", "/api/v1/trials/{}/logs", m_det_or_trial_logs},
    {"GET", "/api/v1/trials/{}/checkpoints", m_det_or_trial_checkpoints},
    {"POST", "/api/v1/trials/{}/kill", m_api_kill_trial},
    {"GET", "/api/v1/checkpoints/{}", m_det_or_get_checkpoint},
    /* only the reference's client (det_impl.h) */
    {"GET", "/info", m_det_info},
    {"POST", "/api/v1/auth/login", m_det_post_login},
    {"POST", "/api/v1/auth/logout", m_det_post_logout},
    {"GET", "/api/v1/me", m_det_get_me},
    {"PATCH", "/api/v1/experiments/{}", m_det_patch_experiment},
    {"GET", "/api/v1/experiments/{}/model_def", m_det_model_def},
    {"GET", "/api/v1/trials/{}/workloads", m_det_workloads},
    {"GET", "/checkpoints/{}", m_det_download_checkpoint},
    /* from a trial run */
    {"GET", "/api/v1/trials/{}/spec", m_api_trial_spec},
    {"POST", "/api/v1/trials/{}/metrics", m_api_post_metrics},
    {"POST", "/api/v1/trials/{}/progress", m_api_post_progress},
    {"GET", "/api/v1/trials/{}/searcher/operation", m_api_searcher_op},
    {"POST", "/api/v1/trials/{}/searcher/completed", m_api_searcher_completed},
    {"POST", "/api/v1/trials/{}/checkpoints", m_api_post_checkpoint},
    {"GET", "/api/v1/trials/{}/preempt", m_api_preempt},
    {"POST", "/api/v1/trials/{}/early_exit", m_api_early_exit},
    {"POST", "/api/v1/trials/{}/stopped", m_api_stopped},
};
const int m_n_routes = (int)(sizeof m_routes / sizeof *m_routes);
