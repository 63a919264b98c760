/*
 * api_exp.c — the experiment routes of docs/api.md: create, list, describe, the state
 * changes, delete, and an experiment's trials and checkpoints. Reads come from the
 * store (which the master keeps current); changes go through exp.c.
 */
#include "api_impl.h"

#include "master/det_pack.h"

#include <string.h>

void m_api_create_experiment(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    if (!json_is_object(req->body)) {
        dt_http_error(resp, 400,
                      "the request needs a JSON object with config_text and "
                      "model_dir");
        return;
    }
    int64_t id = 0;
    json_t *warnings = NULL;
    dt__buf tar = {0};
    dt_status st = m_snapshot_pack(req->body, &tar); /* files, not the store: outside the lock */
    if (st == DT_OK) {
        pthread_mutex_lock(&m->lock);
        st = m_exp_create_from(m, req->body, &tar, &id, &warnings);
        pthread_mutex_unlock(&m->lock);
    }
    dt__buf_free(&tar);
    if (st != DT_OK) {
        dt_http_error(resp, st == DT_ERR_OOM || st == DT_ERR_IO ? 500 : 400, "%s", dt_last_error());
        return;
    }
    resp->status = 201;
    resp->json =
        json_pack("{sI,so}", "id", (json_int_t)id, "warnings", warnings ? warnings : json_array());
}

void m_api_list_experiments(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_list_store(app, req, resp, "experiments", dt_store_exp_list);
}

/* row.actions: what its state allows (the state machine's table), for the pages' buttons. */
void m_api_exp_actions(json_t *row) {
    const char *state = json_string_value(json_object_get(row, "state"));
    m_state s;
    json_object_set_new(row, "actions",
                        state && m_state_parse(state, &s) ? m_actions_json(s) : json_array());
}

static void describe(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                     dt_http_resp *resp) {
    (void)req;
    json_t *trials = NULL;
    dt_status st = dt_store_trial_list(m->store, id, &trials);
    /* where its trials' and its searcher's files are (the dsat runner's best config) */
    dt_expconf *cfg = NULL;
    char *dir = NULL;
    if (dt_expconf_from_json(json_object_get(row, "config"), DT_EXPCONF_MAX_LENGTH_OPTIONAL,
                             &cfg) == DT_OK &&
        (dir = m_api_exp_dir(m, cfg, id)))
        json_object_set_new((json_t *)row, "checkpoint_dir", json_string(dir));
    free(dir);
    dt_expconf_free(cfg);
    dt_clear_error();
    m_api_exp_actions((json_t *)row);
    m_api_status(resp, st,
                 st == DT_OK ? json_pack("{sOso}", "experiment", row, "trials", trials) : NULL);
}

void m_api_get_experiment(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_EXPERIMENT, describe);
}

static void delete_it(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                      dt_http_resp *resp) {
    (void)row, (void)req;
    m_api_status(resp, m_exp_delete(m, id), NULL);
}

void m_api_delete_experiment(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_EXPERIMENT, delete_it);
}

static void trials_of(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                      dt_http_resp *resp) {
    (void)row;
    json_t *list = NULL;
    dt_status st = dt_store_trial_list(m->store, id, &list);
    m_api_list(req, resp, st, "trials", list);
}

void m_api_experiment_trials(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_EXPERIMENT, trials_of);
}

static void checkpoints_of(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                           dt_http_resp *resp) {
    (void)row;
    json_t *list = NULL;
    dt_status st = dt_store_ckpt_list(m->store, id, 0, &list);
    m_api_list(req, resp, st, "checkpoints", list);
}

void m_api_experiment_checkpoints(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_EXPERIMENT, checkpoints_of);
}

static void act(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                dt_http_resp *resp) {
    (void)row;
    const char *name = req->params[1];
    m_action action;
    m_exp *e = m_exp_find(m, id);
    dt_status st = !m_action_parse(name, &action)
                       ? dt_error(DT_ERR_INVALID,
                                  "unknown action '%s'; hint: use pause, activate, cancel or kill",
                                  name)
                   : e ? m_exp_action(m, e, action)
                       : dt_error(DT_ERR_STATE, "experiment %lld has ended: it cannot %s",
                                  (long long)id, name);
    json_t *now = NULL;
    if (st == DT_OK) st = dt_store_exp_get(m->store, id, &now);
    if (st == DT_OK) m_api_exp_actions(now);
    m_api_status(resp, st, st == DT_OK ? json_pack("{so}", "experiment", now) : NULL);
}

void m_api_experiment_action(void *app, const dt_http_req *req, dt_http_resp *resp) {
    static const char *const actions[] = {"pause", "activate", "cancel", "kill"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(req->params[1], actions[i])) {
            m_api_read(app, req, resp, M_OWNER_EXPERIMENT, act);
            return;
        }
    dt_http_error(resp, 404,
                  "no route POST %s; hint: experiments take pause, activate, cancel "
                  "or kill",
                  req->path);
}
