/*
 * det_api.c — the second client's door (det_impl.h): /info, login / logout / me, the
 * reference's view of the master, the reference's error shape, and the routes both clients
 * use, each answered in the shapes of the client that asks (a login token: the reference's).
 */
#include "det_impl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *const m_det_open_paths[] = {"/info", "/api/v1/auth/login", NULL};

void m_det_filter(void *app, const dt_http_req *req, dt_http_resp *resp) {
    const char *msg = json_string_value(json_object_get(resp->json, "error"));
    if (!msg || resp->status < 400 || !m_det_session(app, req)) return;
    char keep[2048];
    snprintf(keep, sizeof keep, "%s", msg);
    if (resp->status == 404 && !strncmp(keep, "no route ", 9))
        m_det_error(resp, 404,
                    "dtrain does not implement %s %s; hint: docs/det-client.md lists the "
                    "commands that work",
                    req->method, req->path);
    else if (resp->status == 405)
        m_det_error(resp, 405,
                    "dtrain does not implement %s %s; hint: docs/det-client.md lists "
                    "the commands that work",
                    req->method, req->path);
    else if (resp->status == 413)
        m_det_error(resp, 413,
                    "the request is over %u MiB (a model directory that large?); hint: leave "
                    "data, checkpoints and build outputs out with a .detignore file",
                    DT_HTTP_MAX_BODY >> 20);
    else
        m_det_error(resp, resp->status, "%s", keep);
}

/* ---- /info, login, logout, me, master ---- */

void m_det_info(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)app, (void)req;
    char id[32];
    snprintf(id, sizeof id, "dtrain-%d", (int)getpid());
    resp->json = json_pack("{s:s,s:s,s:s,s:s,s:s}", "version", M_DET_VERSION, "master_id", id,
                           "cluster_id", "dtrain", "cluster_name", "dtrain", "product", "dtrain");
}

void m_det_post_login(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    const char *user = json_string_value(json_object_get(req->body, "username"));
    const char *pass = json_string_value(json_object_get(req->body, "password"));
    char token[80];
    bool hashed = !json_is_false(json_object_get(req->body, "isHashed"));
    dt_status st = m_det_login(m, user, pass ? pass : "", hashed && pass && *pass, token);
    if (st == DT_ERR_INVALID)
        m_det_error(resp, 403, "%s", dt_last_error());
    else if (st != DT_OK)
        m_det_fail(resp, st);
    else
        resp->json = json_pack("{s:s,s:o}", "token", token, "user", m_det_user(user));
}

void m_det_post_logout(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    if (!m_det_authed(m, req, resp)) return;
    dt_status st = m_det_token_ok(m, dt_http_bearer(req)) ? m_det_logout(m, dt_http_bearer(req))
                                                          : DT_OK; /* the master's: kept */
    if (st != DT_OK)
        m_det_fail(resp, st);
    else
        resp->json = json_object();
}

void m_det_get_me(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    if (!m_det_authed(m, req, resp)) return;
    char user[64] = "admin"; /* the master's token is the admin's */
    m_det_token_user(m, dt_http_bearer(req), user, sizeof user);
    resp->json = json_pack("{s:o}", "user", m_det_user(user));
}

void m_det_get_master(master *m, const dt_http_req *req, dt_http_resp *resp) {
    (void)req;
    char id[32];
    snprintf(id, sizeof id, "dtrain-%d", (int)getpid());
    pthread_mutex_lock(&m->lock);
    int used = 0;
    for (int i = 0; i < m->slots; i++) used += m->slot_busy[i] != 0;
    resp->json =
        json_pack("{s:s,s:s,s:s,s:s,s:b,s:b,s:i,s:i}", "version", M_DET_VERSION, "masterId", id,
                  "clusterId", "dtrain", "clusterName", "dtrain", "hasCustomLogo", 0,
                  "strictJobQueueControl", 0, "slots", m->slots, "slotsUsed", used);
    pthread_mutex_unlock(&m->lock);
}

/* ---- the shared routes: the reference's answer for a login token, dtrain's otherwise ---- */

#define SHARED(name, native)                                                                       \
    void m_det_or_##name(void *app, const dt_http_req *req, dt_http_resp *resp) {                  \
        if (m_det_session(app, req))                                                               \
            m_det_##name(app, req, resp);                                                          \
        else                                                                                       \
            native(app, req, resp);                                                                \
    }

SHARED(get_master, m_api_get_master)
SHARED(create_experiment, m_api_create_experiment)
SHARED(list_experiments, m_api_list_experiments)
SHARED(get_experiment, m_api_get_experiment)
SHARED(experiment_action, m_api_experiment_action)
SHARED(experiment_trials, m_api_experiment_trials)
SHARED(experiment_checkpoints, m_api_experiment_checkpoints)
SHARED(get_trial, m_api_get_trial)
SHARED(trial_logs, m_api_trial_logs)
SHARED(trial_checkpoints, m_api_trial_checkpoints)
SHARED(get_checkpoint, m_api_get_checkpoint)
SHARED(model_def, m_api_experiment_model_def)

/* The reference's routes, served before dtrain's (api.c) on the same server: on a path both
 * use, m_det_or_* answers here; dtrain's own entry for it is then never reached by routing,
 * and its handler is called from here for every request without a login token. */
const dt_http_route m_det_routes[] = {
    {"GET", "/info", m_det_info},
    {"POST", "/api/v1/auth/login", m_det_post_login},
    {"POST", "/api/v1/auth/logout", m_det_post_logout},
    {"GET", "/api/v1/me", m_det_get_me},
    {"GET", "/api/v1/master", m_det_or_get_master},
    {"POST", "/api/v1/experiments", m_det_or_create_experiment},
    {"GET", "/api/v1/experiments", m_det_or_list_experiments},
    {"GET", "/api/v1/experiments/{}", m_det_or_get_experiment},
    {"PATCH", "/api/v1/experiments/{}", m_det_patch_experiment},
    {"POST", "/api/v1/experiments/{}/{}", m_det_or_experiment_action},
    {"GET", "/api/v1/experiments/{}/trials", m_det_or_experiment_trials},
    {"GET", "/api/v1/experiments/{}/checkpoints", m_det_or_experiment_checkpoints},
    {"GET", "/api/v1/experiments/{}/model_def", m_det_or_model_def},
    {"GET", "/api/v1/trials/{}", m_det_or_get_trial},
    {"GET", "/api/v1/trials/{}/workloads", m_det_workloads},
    {"GET", "/api/v1/trials/{}/logs", m_det_or_trial_logs},
    {"GET", "/api/v1/trials/{}/checkpoints", m_det_or_trial_checkpoints},
    {"GET", "/api/v1/checkpoints/{}", m_det_or_get_checkpoint},
    {"GET", "/checkpoints/{}", m_det_download_checkpoint},
};
const int m_det_n_routes = (int)(sizeof m_det_routes / sizeof *m_det_routes);
