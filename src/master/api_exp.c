/*
 * api_exp.c — the experiment routes of docs/api.md: create, list, describe, the state
 * changes, delete, and an experiment's trials, checkpoints and logs. Reads come from the
 * store (which the master keeps current); changes go through exp.c.
 */
#include "api_impl.h"

#include <string.h>

void m_api_create_experiment(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    if (!json_is_object(req->body)) {
        dt_http_error(resp, 400,
                      "the request needs a JSON object with config_text and "
                      "model_dir");
        return;
    }
    pthread_mutex_lock(&m->lock);
    int64_t id = 0;
    json_t *warnings = NULL;
    dt_status st = m_exp_create(m, req->body, &id, &warnings);
    pthread_mutex_unlock(&m->lock);
    if (st != DT_OK) {
        dt_http_error(resp, st == DT_ERR_OOM || st == DT_ERR_IO ? 500 : 400, "%s", dt_last_error());
        return;
    }
    resp->status = 201;
    resp->json =
        json_pack("{sI,so}", "id", (json_int_t)id, "warnings", warnings ? warnings : json_array());
}

void m_api_list_experiments(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)req;
    master *m = app;
    json_t *list = NULL;
    pthread_mutex_lock(&m->lock);
    dt_status st = dt_store_exp_list(m->store, &list);
    pthread_mutex_unlock(&m->lock);
    m_api_status(resp, st, st == DT_OK ? json_pack("{so}", "experiments", list) : NULL);
}

/* The experiment `id` from the store, or a 404 answer. */
static json_t *experiment(master *m, int64_t id, dt_http_resp *resp) {
    json_t *e = NULL;
    if (dt_store_exp_get(m->store, id, &e) == DT_OK) return e;
    if (dt_last_status() == DT_ERR_INVALID)
        dt_http_error(resp, 404, "no experiment %lld; hint: dtrain experiment list shows them",
                      (long long)id);
    else
        m_api_fail(resp, dt_last_status());
    return NULL;
}

void m_api_get_experiment(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    int64_t id;
    if (!m_api_id(req, 0, &id, resp)) return;
    pthread_mutex_lock(&m->lock);
    json_t *e = experiment(m, id, resp), *trials = NULL;
    if (e) {
        dt_status st = dt_store_trial_list(m->store, id, &trials);
        m_api_status(resp, st,
                     st == DT_OK ? json_pack("{soso}", "experiment", e, "trials", trials)
                                 : (json_decref(e), NULL));
    }
    pthread_mutex_unlock(&m->lock);
}

void m_api_delete_experiment(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    int64_t id;
    if (!m_api_id(req, 0, &id, resp)) return;
    pthread_mutex_lock(&m->lock);
    json_t *e = experiment(m, id, resp);
    if (e) {
        json_decref(e);
        m_api_status(resp, m_exp_delete(m, id), NULL);
    }
    pthread_mutex_unlock(&m->lock);
}

void m_api_experiment_trials(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    int64_t id;
    if (!m_api_id(req, 0, &id, resp)) return;
    pthread_mutex_lock(&m->lock);
    json_t *e = experiment(m, id, resp), *trials = NULL;
    if (e) {
        json_decref(e);
        dt_status st = dt_store_trial_list(m->store, id, &trials);
        m_api_status(resp, st, st == DT_OK ? json_pack("{so}", "trials", trials) : NULL);
    }
    pthread_mutex_unlock(&m->lock);
}

void m_api_experiment_checkpoints(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    int64_t id;
    if (!m_api_id(req, 0, &id, resp)) return;
    pthread_mutex_lock(&m->lock);
    json_t *e = experiment(m, id, resp), *list = NULL;
    if (e) {
        json_decref(e);
        dt_status st = dt_store_ckpt_list(m->store, id, 0, &list);
        m_api_status(resp, st, st == DT_OK ? json_pack("{so}", "checkpoints", list) : NULL);
    }
    pthread_mutex_unlock(&m->lock);
}

/* Log lines after `after`; done when the owner is terminal and nothing more is left. */
void m_api_logs(master *m, int64_t exp_id, int64_t trial_id, bool terminal, const dt_http_req *req,
                dt_http_resp *resp) {
    int64_t after = m_api_query_int(req, "after", 0), limit = m_api_query_int(req, "limit", 1000);
    if (limit <= 0 || limit > 100000) limit = 1000;
    json_t *logs = NULL;
    dt_status st = dt_store_logs_query(m->store, exp_id, trial_id, after, limit, &logs);
    if (st == DT_OK) {
        bool done = terminal && (int64_t)json_array_size(logs) < limit;
        resp->json = json_pack("{sosb}", "logs", logs, "done", done);
    } else {
        m_api_fail(resp, st);
    }
}

void m_api_experiment_logs(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    int64_t id;
    if (!m_api_id(req, 0, &id, resp)) return;
    pthread_mutex_lock(&m->lock);
    json_t *e = experiment(m, id, resp);
    if (e) {
        const char *state = json_string_value(json_object_get(e, "state"));
        m_api_logs(m, id, 0, state && m_state_terminal(state), req, resp);
        json_decref(e);
    }
    pthread_mutex_unlock(&m->lock);
}

void m_api_experiment_action(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    int64_t id;
    if (!m_api_id(req, 0, &id, resp)) return;
    const char *action = req->params[1];
    static const char *const actions[] = {"pause", "activate", "cancel", "kill"};
    bool known = false;
    for (int i = 0; i < 4; i++) known |= !strcmp(action, actions[i]);
    if (!known) {
        dt_http_error(resp, 404,
                      "no route POST %s; hint: experiments take pause, activate, "
                      "cancel or kill",
                      req->path);
        return;
    }
    pthread_mutex_lock(&m->lock);
    json_t *row = experiment(m, id, resp);
    if (row) {
        json_decref(row);
        m_exp *e = m_exp_find(m, id);
        dt_status st = e ? m_exp_action(m, e, action)
                         : dt_error(DT_ERR_STATE, "experiment %lld has ended: it cannot %s",
                                    (long long)id, action);
        json_t *now = NULL;
        if (st == DT_OK) st = dt_store_exp_get(m->store, id, &now);
        m_api_status(resp, st, st == DT_OK ? json_pack("{so}", "experiment", now) : NULL);
    }
    pthread_mutex_unlock(&m->lock);
}
