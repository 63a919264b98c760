/* api_request.c — what every REST handler shares: ids and query values from a request, a row
 * read with its owner checked, statuses mapped to HTTP answers, pages of lists. The route
 * table (api.c) and the handlers (api_*.c) call it; it calls none of them. */
#define _GNU_SOURCE
#include "api_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void m_api_list_store(master *m, const dt_http_req *req, dt_http_resp *resp, const char *key,
                      dt_status (*list)(dt_store *s, json_t **out)) {
    json_t *rows = NULL;
    pthread_mutex_lock(&m->lock);
    dt_status st = list(m->store, &rows);
    pthread_mutex_unlock(&m->lock);
    m_api_list(req, resp, st, key, rows);
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
