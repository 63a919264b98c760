/*
 * det_exp.c — the reference's experiment routes (det_impl.h): create from an uploaded model
 * definition, list, describe, patch, the state changes, an experiment's trials and
 * checkpoints, and its model definition back as a gzipped tar.
 */
#define _GNU_SOURCE
#include "det_impl.h"

#include "master/det_pack.h"
#include "master/store_impl.h"
#include "master/store_modeldef.h"

#include "base/base_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The create is one sequence (validate, unpack, create, keep the files, answer) whose
 * every failure must leave nothing behind. */
void m_det_create_experiment(master *m, const dt_http_req *req, dt_http_resp *resp) {
    const char *config = json_string_value(json_object_get(req->body, "config"));
    json_t *files = json_object_get(req->body, "modelDefinition");
    if (!config) {
        m_det_error(resp, 400, "the request needs config (the experiment's YAML text)");
        return;
    }
    dt__buf tar = {0};
    dt_status st = dt__tar_from_upload(files ? files : json_array(), DT_HTTP_MAX_BODY, &tar);
    if (st != DT_OK) {
        dt__buf_free(&tar);
        m_det_fail(resp, st);
        return;
    }
    json_t *body = json_pack("{s:s,s:b}", "config_text", config, "activate",
                             !json_is_false(json_object_get(req->body, "activate")));
    int64_t id = 0;
    json_t *warnings = NULL, *row = NULL;
    pthread_mutex_lock(&m->lock);
    st = m_exp_create_from(m, body, &tar, &id, &warnings);
    json_decref(body);
    json_decref(warnings); /* dtrain's text warnings are not the reference's enum */
    if (st == DT_OK) st = dt_store_exp_get(m->store, id, &row);
    pthread_mutex_unlock(&m->lock);
    dt__buf_free(&tar);
    if (st != DT_OK) {
        m_det_fail(resp, st);
        return;
    }
    resp->json = json_pack("{s:o,s:O,s:[]}", "experiment", m_det_experiment(row), "config",
                           json_object_get(row, "config"), "warnings");
    json_decref(row);
}

void m_det_list_experiments(master *m, const dt_http_req *req, dt_http_resp *resp) {
    json_t *rows = NULL, *r;
    pthread_mutex_lock(&m->lock);
    dt_status st = dt_store_exp_list(m->store, &rows);
    pthread_mutex_unlock(&m->lock);
    if (st != DT_OK) {
        m_det_fail(resp, st);
        return;
    }
    json_t *list = json_array();
    /* dtrain lists newest first; the reference's client shows them by id */
    for (size_t i = json_array_size(rows); i-- > 0;) {
        r = json_array_get(rows, i);
        if (m_det_state_wanted(req, json_string_value(json_object_get(r, "state"))))
            json_array_append_new(list, m_det_experiment(r));
    }
    json_decref(rows);
    resp->json = m_det_page(req, "experiments", list);
}

void m_det_get_experiment(master *m, const dt_http_req *req, dt_http_resp *resp) {
    int64_t id;
    pthread_mutex_lock(&m->lock);
    json_t *row = m_det_row(m, M_OWNER_EXPERIMENT, req, &id, resp);
    pthread_mutex_unlock(&m->lock);
    if (!row) return;
    resp->json = json_pack("{s:o,s:n}", "experiment", m_det_experiment(row), "jobSummary");
    json_decref(row);
}

void m_det_experiment_action(master *m, const dt_http_req *req, dt_http_resp *resp) {
    m_action a;
    if (!m_action_parse(req->params[1], &a)) {
        m_det_error(resp, 404,
                    "dtrain does not implement POST %s; hint: experiments take "
                    "pause, activate, cancel or kill",
                    req->path);
        return;
    }
    int64_t id;
    pthread_mutex_lock(&m->lock);
    json_t *row = m_det_row(m, M_OWNER_EXPERIMENT, req, &id, resp);
    m_exp *e = row ? m_exp_find(m, id) : NULL;
    bool ended =
        row && m_state_terminal(m_state_of(json_string_value(json_object_get(row, "state"))));
    dt_status st = DT_OK;
    if (e && !ended)
        st = m_exp_action(m, e, a);
    else if (row && (a == M_ACT_PAUSE || a == M_ACT_ACTIVATE)) /* cancel, kill: nothing to do */
        st = dt_error(DT_ERR_STATE, "experiment %lld has ended: it cannot %s", (long long)id,
                      m_action_name(a));
    pthread_mutex_unlock(&m->lock);
    if (row && st != DT_OK)
        m_det_fail(resp, st);
    else if (row)
        resp->json = json_object();
    json_decref(row);
}

void m_det_experiment_trials(master *m, const dt_http_req *req, dt_http_resp *resp) {
    int64_t id;
    json_t *rows = NULL, *r;
    pthread_mutex_lock(&m->lock);
    json_t *row = m_det_row(m, M_OWNER_EXPERIMENT, req, &id, resp);
    dt_status st = row ? dt_store_trial_list(m->store, id, &rows) : DT_OK;
    json_t *list = json_array();
    size_t i;
    json_array_foreach(rows, i, r) {
        if (m_det_state_wanted(req, json_string_value(json_object_get(r, "state"))))
            json_array_append_new(list, m_det_trial_full(m, r));
    }
    pthread_mutex_unlock(&m->lock);
    if (row && st != DT_OK) m_det_fail(resp, st);
    if (row && st == DT_OK) {
        if (!strcmp(dt_http_query(req, "orderBy") ? dt_http_query(req, "orderBy") : "",
                    "ORDER_BY_DESC")) {
            json_t *rev = json_array();
            for (size_t k = json_array_size(list); k-- > 0;)
                json_array_append(rev, json_array_get(list, k));
            json_decref(list);
            list = rev;
        }
        resp->json = m_det_page(req, "trials", list);
        list = NULL;
    }
    json_decref(list);
    json_decref(rows);
    json_decref(row);
}

void m_det_experiment_checkpoints(master *m, const dt_http_req *req, dt_http_resp *resp) {
    int64_t id;
    json_t *rows = NULL;
    pthread_mutex_lock(&m->lock);
    json_t *row = m_det_row(m, M_OWNER_EXPERIMENT, req, &id, resp);
    dt_status st = row ? dt_store_ckpt_list(m->store, id, 0, &rows) : DT_OK;
    if (row) m_det_ckpt_answer(m, row, st, rows, req, resp);
    pthread_mutex_unlock(&m->lock);
    json_decref(row);
}

void m_det_model_def(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    if (!m_det_authed(m, req, resp)) return;
    int64_t id;
    void *tar = NULL;
    size_t len = 0;
    pthread_mutex_lock(&m->lock);
    json_t *row = m_det_row(m, M_OWNER_EXPERIMENT, req, &id, resp);
    dt_status st = row ? dt_store_modeldef_get(m->store, id, &tar, &len) : DT_OK;
    pthread_mutex_unlock(&m->lock);
    if (row && st != DT_OK) {
        m_det_error(resp, st == DT_ERR_INVALID ? 404 : 500, "%s", dt_last_error());
    } else if (row) {
        dt__buf gz = {0}, b64 = {0};
        dt__gzip_put(&gz, tar, len);
        dt__base64_put(&b64, gz.p, gz.len);
        dt__buf_put(&b64, "", 1);
        if (gz.oom || b64.oom)
            m_det_error(resp, 500, "out of memory packing the model definition");
        else
            resp->json = json_pack("{s:s}", "b64Tgz", b64.p);
        dt__buf_free(&gz);
        dt__buf_free(&b64);
    }
    free(tar);
    json_decref(row);
}

/* Set the experiment's description, name and config text (each NULL: unchanged), in one
 * store group. */
static dt_status set_fields(dt_store *st, int64_t id, const char *desc, const char *name,
                            const char *config) {
    dt_status status = dt_store_begin(st);
    if (status != DT_OK) return status;
    sqlite3 *db = dt__store_db(st);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "UPDATE experiments SET description = coalesce(?2, description), "
                                "name = coalesce(?3, name), config = coalesce(?4, config) "
                                "WHERE id = ?1",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_text(s, 2, desc, -1, SQLITE_STATIC); /* NULL binds NULL */
        sqlite3_bind_text(s, 3, name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, config, -1, SQLITE_STATIC);
        rc = sqlite3_step(s);
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        status = dt__store_sqlite_error(db, rc, "(the store)", "changing an experiment");
        DT_KEEP_ERROR(dt_store_rollback(st));
        return status;
    }
    return dt_store_commit(st);
}

/* resources.maxSlots: the live experiment's max_slots (the scheduler reads it) and its stored
 * config; *config the new config text (malloc'd). */
static dt_status set_max_slots(master *m, int64_t id, const json_t *v, char **config) {
    m_exp *e = m_exp_find(m, id);
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return dt_error(DT_ERR_INVALID, "resources.maxSlots must be a positive integer");
    if (!e || m_state_terminal(e->state))
        return dt_error(DT_ERR_STATE, "experiment %lld has ended", (long long)id);
    if (json_integer_value(v) < e->cfg->slots_per_trial)
        return dt_error(DT_ERR_INVALID,
                        "max_slots %lld is below the experiment's slots_per_trial %lld; hint: "
                        "give at least slots_per_trial",
                        (long long)json_integer_value(v), (long long)e->cfg->slots_per_trial);
    e->cfg->max_slots = json_integer_value(v);
    json_t *r = json_object_get(e->cfg->json, "resources");
    if (!json_is_object(r)) json_object_set_new(e->cfg->json, "resources", r = json_object());
    json_object_set_new(r, "max_slots", json_integer(e->cfg->max_slots));
    *config = json_dumps(e->cfg->json, JSON_COMPACT);
    return *config ? DT_OK : dt_error(DT_ERR_OOM, "out of memory");
}

void m_det_patch_experiment(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    if (!m_det_authed(m, req, resp)) return;
    const char *desc = json_string_value(json_object_get(req->body, "description"));
    const char *name = json_string_value(json_object_get(req->body, "name"));
    json_t *slots = json_object_get(json_object_get(req->body, "resources"), "maxSlots");
    int64_t id;
    char *config = NULL;
    pthread_mutex_lock(&m->lock);
    json_t *row = m_det_row(m, M_OWNER_EXPERIMENT, req, &id, resp), *now = NULL;
    dt_status st = DT_OK;
    if (row && slots && !json_is_null(slots)) st = set_max_slots(m, id, slots, &config);
    if (row && st == DT_OK && (desc || name || config))
        st = set_fields(m->store, id, desc, name, config);
    if (row && st == DT_OK) st = dt_store_exp_get(m->store, id, &now);
    pthread_mutex_unlock(&m->lock);
    if (row && st != DT_OK)
        m_det_fail(resp, st);
    else if (row)
        resp->json = json_pack("{s:o}", "experiment", m_det_experiment(now));
    free(config);
    json_decref(now);
    json_decref(row);
}
