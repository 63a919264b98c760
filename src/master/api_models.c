/*
 * api_models.c — the model registry's routes (docs/models.md, docs/api.md) and the deletion
 * of a checkpoint: list and create models, one model with its versions, register a version,
 * DELETE a checkpoint, and the guard in front of DELETE of an experiment (whose delete removes
 * every checkpoint of it). The store answers (store_models.c); gc.c decides what a delete may
 * remove, by the same rule GC follows. Unknown names and uuids are 404, duplicates and
 * protected or deleted checkpoints 409.
 */
#define _GNU_SOURCE
#include "api_impl.h"
#include "master/gc.h"
#include "master/states.h"
#include "master/store_models.h"

#include <stdlib.h>
#include <string.h>

/* 404 when the message says `missing` ("no model", "no checkpoint") was not found, else the
 * usual mapping. */
static void fail(dt_http_resp *resp, dt_status st, const char *missing) {
    if (st == DT_ERR_INVALID && !strncmp(dt_last_error(), missing, strlen(missing)))
        dt_http_error(resp, 404, "%s", dt_last_error());
    else
        m_api_fail(resp, st);
}

void m_api_list_models(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_list_store(app, req, resp, "models", dt_store_model_list);
}

void m_api_create_model(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    const json_t *b = req->body, *desc = json_object_get(b, "description");
    const char *name = json_string_value(json_object_get(b, "name"));
    if (!name || (desc && !json_is_string(desc))) {
        dt_http_error(resp, 400,
                      "the request needs a JSON object {\"name\": text, \"description\": text, "
                      "\"labels\": [text]} (description and labels optional)");
        return;
    }
    pthread_mutex_lock(&m->lock);
    json_t *row = NULL;
    dt_status st = dt_store_model_create(m->store, name, json_string_value(desc),
                                         json_object_get(b, "labels"), NULL);
    if (st == DT_OK) st = dt_store_model_get(m->store, name, &row);
    pthread_mutex_unlock(&m->lock);
    m_api_status(resp, st, st == DT_OK ? json_pack("{so}", "model", row) : NULL);
    if (st == DT_OK) resp->status = 201;
}

void m_api_get_model(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    json_t *row = NULL, *versions = NULL;
    pthread_mutex_lock(&m->lock);
    dt_status st = dt_store_model_get(m->store, req->params[0], &row);
    if (st == DT_OK) st = dt_store_model_versions(m->store, req->params[0], &versions);
    pthread_mutex_unlock(&m->lock);
    if (st != DT_OK) {
        json_decref(row);
        fail(resp, st, "no model");
        return;
    }
    resp->json = json_pack("{soso}", "model", row, "versions", versions);
}

void m_api_model_versions(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    json_t *versions = NULL;
    pthread_mutex_lock(&m->lock);
    dt_status st = dt_store_model_versions(m->store, req->params[0], &versions);
    pthread_mutex_unlock(&m->lock);
    if (st == DT_OK)
        m_api_list(req, resp, st, "versions", versions);
    else
        fail(resp, st, "no model");
}

void m_api_register_version(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    const char *uuid = json_string_value(json_object_get(req->body, "checkpoint_uuid"));
    if (!uuid) {
        dt_http_error(resp, 400, "the request needs a JSON object {\"checkpoint_uuid\": text}");
        return;
    }
    pthread_mutex_lock(&m->lock);
    int64_t version = 0;
    json_t *versions = NULL;
    dt_status st = dt_store_model_register(m->store, req->params[0], uuid, &version);
    if (st == DT_OK) st = dt_store_model_versions(m->store, req->params[0], &versions);
    pthread_mutex_unlock(&m->lock);
    if (st != DT_OK) {
        fail(resp, st, "no model");
        return;
    }
    /* the new version is the last */
    resp->json =
        json_pack("{sO}", "version", json_array_get(versions, json_array_size(versions) - 1));
    resp->status = 201;
    json_decref(versions);
}

/* The checkpoint storage root of experiment `exp_id` (malloc'd), or NULL with the error set. */
static char *storage_root(master *m, int64_t exp_id) {
    json_t *row = NULL;
    dt_expconf *cfg = NULL;
    char *root = NULL;
    if (dt_store_exp_get(m->store, exp_id, &row) == DT_OK &&
        dt_expconf_from_json(json_object_get(row, "config"), DT_EXPCONF_MAX_LENGTH_OPTIONAL,
                             &cfg) == DT_OK &&
        !(root = m_exp_ckpt_root(m, cfg)))
        dt_error(DT_ERR_OOM, "out of memory");
    dt_expconf_free(cfg);
    json_decref(row);
    return root;
}

void m_api_delete_checkpoint(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    const char *uuid = req->params[0];
    json_t *row = NULL;
    char *root = NULL;
    pthread_mutex_lock(&m->lock);
    dt_status st = dt_store_ckpt_get(m->store, uuid, &row);
    if (st == DT_ERR_INVALID)
        dt_error(st,
                 "no checkpoint has the uuid '%s'; hint: dtrain checkpoint list EXP shows an "
                 "experiment's checkpoints",
                 uuid);
    if (st == DT_OK &&
        !(root = storage_root(m, json_integer_value(json_object_get(row, "experiment_id")))))
        st = dt_last_status() != DT_OK
                 ? dt_last_status()
                 : dt_error(DT_ERR_IO, "checkpoint %s: its experiment's storage is unknown", uuid);
    if (st == DT_OK) st = dt_gc_delete_ckpt(m->store, uuid, root);
    pthread_mutex_unlock(&m->lock);
    if (st == DT_OK) {
        dt_log(DT_LOG_INFO, "checkpoint %s deleted (files under %s)", uuid, root);
        resp->json = json_pack("{ss}", "deleted", uuid);
    } else {
        fail(resp, st, "no checkpoint");
    }
    free(root);
    json_decref(row);
}

/* The read step of a guarded experiment delete: a 409 naming the first held checkpoint of
 * experiment `id`, else nothing (the delete goes on). */
static void refuse_if_held(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                           dt_http_resp *resp) {
    (void)row;
    (void)req;
    json_t *list = NULL;
    dt_status st = dt_store_ckpt_list(m->store, id, 0, &list);
    size_t i;
    const json_t *c;
    char why[512] = "";
    json_array_foreach(list, i, c) {
        const char *uuid = json_string_value(json_object_get(c, "uuid"));
        if (st != DT_OK || !m_ckpt_state_usable(json_string_value(json_object_get(c, "state"))))
            continue;
        if ((st = dt_gc_ckpt_holder(m->store, uuid, why, sizeof why)) == DT_OK && why[0]) {
            dt_http_error(resp, 409,
                          "experiment %lld cannot be deleted: its checkpoint %s is held by %s; "
                          "hint: deleting an experiment removes its checkpoints' files, and a "
                          "registered or warm-start checkpoint must stay (docs/models.md)",
                          (long long)id, uuid, why);
            break;
        }
    }
    json_decref(list);
    if (st != DT_OK) m_api_fail(resp, st);
}

void m_api_delete_experiment_kept(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_EXPERIMENT, refuse_if_held);
    if (resp->status == 200 && !resp->json) m_api_delete_experiment(app, req, resp);
}
