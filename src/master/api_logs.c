/*
 * api_logs.c — the log routes of docs/api.md: the lines an experiment's trials, or one
 * trial, printed (stored by sched.c), a page at a time after a log id; "done" tells a
 * follower that the owner has ended and nothing is left.
 */
#include "api_impl.h"

/* Log lines after `after`; done when the owner is terminal and nothing more is left. */
static void logs(master *m, int64_t exp_id, int64_t trial_id, bool terminal, const dt_http_req *req,
                 dt_http_resp *resp) {
    int64_t after = m_api_query_int(req, "after", 0), limit = m_api_query_int(req, "limit", 1000);
    if (limit <= 0 || limit > 100000) limit = 1000;
    json_t *lines = NULL;
    dt_status st = dt_store_logs_query(m->store, exp_id, trial_id, after, limit, &lines);
    if (st == DT_OK) {
        bool done = terminal && (int64_t)json_array_size(lines) < limit;
        resp->json = json_pack("{sosb}", "logs", lines, "done", done);
    } else {
        m_api_fail(resp, st);
    }
}

static bool row_terminal(const json_t *row) {
    m_state s;
    return m_state_parse(json_string_value(json_object_get(row, "state")), &s) &&
           m_state_terminal(s);
}

static void logs_of_experiment(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                               dt_http_resp *resp) {
    logs(m, id, 0, row_terminal(row), req, resp);
}

void m_api_experiment_logs(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_EXPERIMENT, logs_of_experiment);
}

static void logs_of_trial(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                          dt_http_resp *resp) {
    logs(m, 0, id, row_terminal(row), req, resp);
}

void m_api_trial_logs(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_TRIAL, logs_of_trial);
}
