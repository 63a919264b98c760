/*
 * api.c — the REST API's route table (docs/api.md) and the handlers for the master itself.
 * The experiment handlers are in api_exp.c, the log handlers in api_logs.c, the trial and
 * checkpoint handlers in api_trial.c, the chart data and searcher snapshot in api_charts.c, a
 * dsat search's results in api_dsat.c, the model registry and checkpoint delete in
 * api_models.c; what the handlers share in api_request.c. Every handler takes the master's
 * lock for its whole run. The reference platform's client has routes of its
 * own on the same server (det_impl.h, docs/det-client.md), put before these by master.c.
 */
#define _GNU_SOURCE
#include "api_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the master ---- */

void m_api_get_master(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)req;
    master *m = app;
    pthread_mutex_lock(&m->lock);
    int used = 0;
    for (int i = 0; i < m->slots; i++) used += m->slot_busy[i] != 0;
    resp->json =
        json_pack("{ss,si,si,si,ss,ss}", "version", "0.1.0", "pid", (int)getpid(), "slots",
                  m->slots, "slots_used", used, "store", m->store_path, "started", m->started_utc);
    pthread_mutex_unlock(&m->lock);
}

static void post_shutdown(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)req;
    master *m = app;
    m->stop = 1;
    resp->json = json_object();
}

const dt_http_route m_routes[] = {
    {"GET", "/api/v1/master", m_api_get_master},
    {"POST", "/api/v1/master/shutdown", post_shutdown},
    {"POST", "/api/v1/experiments", m_api_create_experiment},
    {"GET", "/api/v1/experiments", m_api_list_experiments},
    {"GET", "/api/v1/experiments/{}", m_api_get_experiment},
    {"DELETE", "/api/v1/experiments/{}", m_api_delete_experiment_kept},
    {"GET", "/api/v1/experiments/{}/trials", m_api_experiment_trials},
    {"GET", "/api/v1/experiments/{}/checkpoints", m_api_experiment_checkpoints},
    {"GET", "/api/v1/experiments/{}/logs", m_api_experiment_logs},
    {"GET", "/api/v1/experiments/{}/metrics", m_api_experiment_metrics},
    {"GET", "/api/v1/experiments/{}/searcher", m_api_experiment_searcher},
    {"GET", "/api/v1/experiments/{}/dsat", m_api_experiment_dsat},
    {"GET", "/api/v1/experiments/{}/model_def", m_api_experiment_model_def},
    {"POST", "/api/v1/experiments/{}/{}", m_api_experiment_action},
    {"GET", "/api/v1/trials/{}", m_api_get_trial},
    {"GET", "/api/v1/trials/{}/metrics", m_api_trial_metrics},
    {"GET", "/api/v1/trials/{}/logs", m_api_trial_logs},
    {"GET", "/api/v1/trials/{}/checkpoints", m_api_trial_checkpoints},
    {"POST", "/api/v1/trials/{}/kill", m_api_kill_trial},
    {"GET", "/api/v1/checkpoints/{}", m_api_get_checkpoint},
    {"DELETE", "/api/v1/checkpoints/{}", m_api_delete_checkpoint},
    {"GET", "/api/v1/models", m_api_list_models},
    {"POST", "/api/v1/models", m_api_create_model},
    {"GET", "/api/v1/models/{}", m_api_get_model},
    {"GET", "/api/v1/models/{}/versions", m_api_model_versions},
    {"POST", "/api/v1/models/{}/versions", m_api_register_version},
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
    {"POST", "/api/v1/trials/{}/heartbeat", m_api_heartbeat},
};
const int m_n_routes = (int)(sizeof m_routes / sizeof *m_routes);
