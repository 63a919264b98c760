/*
 * det_reply.c — what the reference's handlers share (det_impl.h): its error shape, the
 * experiment or trial a path names, a page of a list, and the token check of its own routes.
 */
#include "det_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void m_det_error(dt_http_resp *resp, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dt_http_verror(resp, status, fmt, ap); /* drops what the answer held: {"error": msg} */
    va_end(ap);
    json_t *ours = resp->json;
    const char *msg = json_string_value(json_object_get(ours, "error"));
    resp->json = json_pack("{s:i,s:s,s:{s:s}}", "code", m_det_code(status), "message",
                           msg ? msg : "", "error", "error", msg ? msg : "");
    json_decref(ours);
}

void m_det_fail(dt_http_resp *resp, dt_status st) {
    int code = st == DT_ERR_CONFIG || st == DT_ERR_INVALID ? 400 : st == DT_ERR_STATE ? 409 : 500;
    m_det_error(resp, code, "%s", dt_last_error());
}

json_t *m_det_row(master *m, m_owner kind, const dt_http_req *req, int64_t *id,
                  dt_http_resp *resp) {
    const char *what = kind == M_OWNER_EXPERIMENT ? "experiment" : "trial";
    const char *s = req->params[0];
    char *end = NULL;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || v <= 0) {
        m_det_error(resp, 400, "'%s' is not a%s %s id", s ? s : "",
                    kind == M_OWNER_EXPERIMENT ? "n" : "", what);
        return NULL;
    }
    *id = v;
    json_t *row = NULL;
    dt_status st = kind == M_OWNER_EXPERIMENT ? dt_store_exp_get(m->store, v, &row)
                                              : dt_store_trial_get(m->store, v, &row);
    if (st == DT_ERR_INVALID)
        m_det_error(resp, 404, "%s %lld not found", what, v);
    else if (st != DT_OK)
        m_det_fail(resp, st);
    return st == DT_OK ? row : NULL;
}

json_t *m_det_page(const dt_http_req *req, const char *key, json_t *list) {
    int64_t total = (int64_t)json_array_size(list);
    int64_t offset = m_api_query_int(req, "offset", 0), limit = m_api_query_int(req, "limit", 0);
    if (offset < 0) offset = 0;
    if (limit < 0) limit = 0;
    json_t *page = json_array();
    for (int64_t i = offset; i < total && (!limit || i < offset + limit); i++)
        json_array_append(page, json_array_get(list, (size_t)i));
    json_decref(list);
    int64_t n = (int64_t)json_array_size(page);
    return json_pack("{s:o,s:o}", key, page, "pagination",
                     m_det_pagination(offset, limit, n, total));
}

bool m_det_authed(master *m, const dt_http_req *req, dt_http_resp *resp) {
    const char *t = dt_http_bearer(req);
    if (m_det_token_valid(m, t)) return true;
    m_det_error(resp, 401, "%s; hint: log in first (det user login determined)",
                t ? "the token is not valid (expired or logged out)" : "no token");
    return false;
}
