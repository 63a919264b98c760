/*
 * api_trial.c — the trial and checkpoint routes of docs/api.md: what users read (a trial,
 * its metrics and checkpoints; a kill) and what a trial run reports (its spec, metrics,
 * progress, searcher operations, checkpoints, preemption, an early exit, heartbeats).
 *
 * Reports carry the run id the master gave the run; a report from a run that is no longer
 * the trial's current one is answered 409, which makes that process stop without writing
 * anything more (core_master.c).
 */
#define _GNU_SOURCE
#include "api_impl.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PROGRESS_WRITE_S 1.0 /* a trial's batch count goes to the store at most this often */

/* ---- lookups ---- */

/* The live trial of a run's report, checked against the run id (query or body "run"). */
static m_trial *run_trial(master *m, const dt_http_req *req, dt_http_resp *resp) {
    int64_t id;
    if (!m_api_id(req, 0, &id, resp)) return NULL;
    m_trial *t = m_trial_find(m, id, NULL);
    if (!t) {
        dt_http_error(resp, 404, "no live trial %lld", (long long)id);
        return NULL;
    }
    int64_t run = req->body ? json_integer_value(json_object_get(req->body, "run"))
                            : m_api_query_int(req, "run", 0);
    if (run != t->run_id || !t->run) {
        dt_http_error(resp, 409,
                      "run %lld of trial %lld has been replaced (the current run is "
                      "%lld): this process must stop",
                      (long long)run, (long long)id, (long long)t->run_id);
        return NULL;
    }
    return t;
}

/* ---- read by users ---- */

static void describe(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                     dt_http_resp *resp) {
    (void)m, (void)id, (void)req;
    resp->json = json_pack("{sO}", "trial", row);
}

void m_api_get_trial(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_TRIAL, describe);
}

static void metrics_of(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                       dt_http_resp *resp) {
    (void)row;
    const char *kind = dt_http_query(req, "kind");
    if (kind && strcmp(kind, "training") && strcmp(kind, "validation") &&
        strcmp(kind, "profiler")) {
        dt_http_error(resp, 400,
                      "unknown metric kind '%s'; hint: use training, validation or "
                      "profiler",
                      kind);
        return;
    }
    json_t *rows = NULL;
    dt_status st = dt_store_metrics_query(m->store, id, kind, m_api_query_int(req, "after", -1),
                                          m_api_query_int(req, "limit", 0), &rows);
    m_api_list(NULL, resp, st, "metrics", rows);
}

void m_api_trial_metrics(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_TRIAL, metrics_of);
}

static void checkpoints_of(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                           dt_http_resp *resp) {
    (void)row, (void)req;
    json_t *list = NULL;
    dt_status st = dt_store_ckpt_list(m->store, 0, id, &list);
    m_api_list(req, resp, st, "checkpoints", list);
}

void m_api_trial_checkpoints(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_TRIAL, checkpoints_of);
}

static void kill_it(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                    dt_http_resp *resp) {
    (void)row, (void)req;
    m_trial *t = m_trial_find(m, id, NULL);
    if (t) m_trial_kill(m, t);
    json_t *now = NULL;
    dt_status st = dt_store_trial_get(m->store, id, &now);
    m_api_status(resp, st, st == DT_OK ? json_pack("{so}", "trial", now) : NULL);
}

void m_api_kill_trial(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_TRIAL, kill_it);
}

void m_api_get_checkpoint(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    json_t *c = NULL;
    pthread_mutex_lock(&m->lock);
    dt_status st = dt_store_ckpt_get(m->store, req->params[0], &c);
    if (st == DT_ERR_INVALID)
        dt_http_error(resp, 404,
                      "no checkpoint %s; hint: dtrain checkpoint list EXPERIMENT "
                      "shows them",
                      req->params[0]);
    else
        m_api_status(resp, st, st == DT_OK ? json_pack("{so}", "checkpoint", c) : NULL);
    pthread_mutex_unlock(&m->lock);
}

/* ---- reported by a trial run ---- */

/* The path of checkpoint `uuid` (COMPLETED), or NULL. */
static char *ckpt_path(master *m, const char *uuid) {
    json_t *c = NULL;
    if (!uuid || dt_store_ckpt_get(m->store, uuid, &c) != DT_OK) return NULL;
    const char *p = json_string_value(json_object_get(c, "path"));
    const char *state = json_string_value(json_object_get(c, "state"));
    char *out = p && state && m_ckpt_state_usable(state) ? strdup(p) : NULL;
    json_decref(c);
    return out;
}

/* Where the run starts from: the trial's latest checkpoint, else the searcher's warm start
 * (source_checkpoint_uuid, or the latest checkpoint of source_trial_id), else nothing. */
static char *resume_path(master *m, m_trial *t) {
    json_t *row = NULL;
    char *p = NULL;
    if (dt_store_trial_get(m->store, t->id, &row) == DT_OK)
        p = ckpt_path(m, json_string_value(json_object_get(row, "latest_checkpoint")));
    json_decref(row);
    const dt_searcher_conf *s = &t->exp->cfg->searcher;
    if (!p && s->source_checkpoint_uuid) p = ckpt_path(m, s->source_checkpoint_uuid);
    if (!p && s->source_trial_id > 0 &&
        dt_store_trial_get(m->store, s->source_trial_id, &row) == DT_OK) {
        p = ckpt_path(m, json_string_value(json_object_get(row, "latest_checkpoint")));
        json_decref(row);
    }
    return p;
}

static void spec(master *m, m_trial *t, const dt_http_req *req, dt_http_resp *resp) {
    (void)req;
    m_exp *e = t->exp;
    char dir[4600];
    m_trial_ckpt_dir(t, dir, sizeof dir);
    char *resume = resume_path(m, t);
    resp->json = json_pack(
        "{sI,sI,sI,sO,sO,sI,ss,so,ss,ss,ss,sI}", "experiment_id", (json_int_t)e->id, "trial_id",
        (json_int_t)t->id, "run", (json_int_t)t->run_id, "config", e->cfg->json, "hparams",
        t->hparams, "seed", (json_int_t)t->seed, "checkpoint_dir", dir, "resume",
        resume ? json_string(resume) : json_null(), "so_path", e->so_path ? e->so_path : "",
        "model_dir", e->model_dir, "entry_symbol", e->cfg->entry_symbol ? e->cfg->entry_symbol : "",
        "slots", (json_int_t)e->cfg->slots_per_trial);
    free(resume);
}

/* The best searcher metric among validation rows updates the trial's best. */
static void note_validation(master *m, m_trial *t, const json_t *rows) {
    const dt_searcher_conf *s = &t->exp->cfg->searcher;
    size_t i;
    const json_t *r;
    json_array_foreach(rows, i, r) {
        const char *kind = json_string_value(json_object_get(r, "kind"));
        json_t *v = json_object_get(json_object_get(r, "metrics"), s->metric);
        if (!kind || strcmp(kind, "validation") || !json_is_number(v)) continue;
        double x = json_number_value(v);
        if (isnan(t->best) || (s->smaller_is_better ? x < t->best : x > t->best)) {
            t->best = x;
            dt_store_trial_set_best(m->store, t->id, x);
        }
    }
}

static void metrics(master *m, m_trial *t, const dt_http_req *req, dt_http_resp *resp) {
    const json_t *rows = json_object_get(req->body, "rows");
    if (!json_is_array(rows)) {
        dt_http_error(resp, 400, "the request needs \"rows\": an array of metric rows");
        return;
    }
    int64_t n = 0;
    dt_status st = dt_store_metrics_insert(m->store, t->id, rows, &n);
    if (st == DT_OK) note_validation(m, t, rows);
    if (st == DT_OK) m_trial_reported_time(m, t, rows);
    m_api_status(resp, st, st == DT_OK ? json_pack("{sI}", "written", (json_int_t)n) : NULL);
}

static void progress(master *m, m_trial *t, const dt_http_req *req, dt_http_resp *resp) {
    t->batches = json_integer_value(json_object_get(req->body, "batches"));
    t->total_batches = json_integer_value(json_object_get(req->body, "total_batches"));
    if (!t->first_batch_seen) {
        /* how long a run takes from launch to training (bench/master_overhead.sh) */
        t->first_batch_seen = true;
        char line[160];
        snprintf(line, sizeof line,
                 "dtrain master: run %lld trained its first batch %.0f ms after launch",
                 (long long)t->run_id, (dt_now_sec() - t->started) * 1e3);
        m_sched_on_log(m, t->id, 0, line);
    }
    if (dt_now_sec() - t->last_progress_write >= PROGRESS_WRITE_S) {
        t->last_progress_write = dt_now_sec();
        dt_store_trial_set_progress(m->store, t->id, t->batches, t->total_batches);
    }
    resp->json = json_object();
}

static void operation(master *m, m_trial *t, const dt_http_req *req, dt_http_resp *resp) {
    (void)m, (void)req;
    json_t *op = t->n_ops > 0 ? json_pack("{so}", "length", m_length_json(t->ops[0])) : json_null();
    resp->json = json_pack("{so}", "op", op);
}

static void completed(master *m, m_trial *t, const dt_http_req *req, dt_http_resp *resp) {
    dt_length len;
    if (m_length_from_json(json_object_get(req->body, "length"), &len) != DT_OK) {
        dt_http_error(resp, 400, "%s", dt_last_error());
        return;
    }
    const json_t *v = json_object_get(req->body, "metric");
    double metric = json_is_number(v) ? json_number_value(v) : NAN;
    m_api_status(resp, m_trial_completed_op(m, t, len, metric), NULL);
}

/* A new checkpoint uuid (version 4). */
static void new_uuid(char out[37]) {
    unsigned char b[16] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, b, sizeof b) != (ssize_t)sizeof b)
        for (int i = 0; i < 16; i++) b[i] = (unsigned char)(rand() >> 7); /* (no /dev/urandom) */
    if (fd >= 0) close(fd);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

static void checkpoint(master *m, m_trial *t, const dt_http_req *req, dt_http_resp *resp) {
    const char *path = json_string_value(json_object_get(req->body, "path"));
    const json_t *batches = json_object_get(req->body, "batches");
    if (!path || !json_is_integer(batches)) {
        dt_http_error(resp, 400, "a checkpoint report needs \"path\" and \"batches\"");
        return;
    }
    /* a run resumed from an older checkpoint may report one it finds already there */
    json_t *list = NULL, *c;
    const char *uuid = NULL;
    size_t i;
    dt_status st = dt_store_ckpt_list(m->store, 0, t->id, &list);
    json_array_foreach(list, i, c) {
        const char *p = json_string_value(json_object_get(c, "path"));
        if (p && !strcmp(p, path)) uuid = json_string_value(json_object_get(c, "uuid"));
    }
    char fresh[37];
    if (st == DT_OK && !uuid) {
        new_uuid(fresh);
        uuid = fresh;
        const json_t *meta = json_object_get(req->body, "metadata");
        const json_t *res = json_object_get(req->body, "resources");
        st = dt_store_ckpt_insert(m->store, t->id, uuid, path, json_integer_value(batches),
                                  json_is_object(meta) ? meta : NULL,
                                  json_is_object(res) ? res : NULL);
    }
    m_api_status(resp, st, st == DT_OK ? json_pack("{ss}", "uuid", uuid) : NULL);
    json_decref(list);
}

static void preempt(master *m, m_trial *t, const dt_http_req *req, dt_http_resp *resp) {
    (void)req;
    resp->json = json_pack("{sb}", "preempt", t->preempt || m->stop);
}

static void early_exit(master *m, m_trial *t, const dt_http_req *req, dt_http_resp *resp) {
    (void)m;
    const char *reason = json_string_value(json_object_get(req->body, "reason"));
    if (!reason || (strcmp(reason, "invalid_hp") && strcmp(reason, "errored"))) {
        dt_http_error(resp, 400, "reason must be \"invalid_hp\" or \"errored\"");
        return;
    }
    if (!strcmp(reason, "invalid_hp")) t->invalid_hp = true;
    resp->json = json_object();
}

static void stopped(master *m, m_trial *t, const dt_http_req *req, dt_http_resp *resp) {
    t->batches = json_integer_value(json_object_get(req->body, "batches"));
    dt_store_trial_set_progress(m->store, t->id, t->batches, t->total_batches);
    resp->json = json_object();
}

/* A heartbeat: the run is alive (every report is one too, see with_run). */
static void heartbeat(master *m, m_trial *t, const dt_http_req *req, dt_http_resp *resp) {
    (void)m, (void)t, (void)req;
    resp->json = json_object();
}

/* Every report of a run: the live trial checked against the run id, under the lock; the run
 * was heard from (sched.c kills runs silent for longer than resources.max_silence). */
static void with_run(void *app, const dt_http_req *req, dt_http_resp *resp,
                     void (*fn)(master *, m_trial *, const dt_http_req *, dt_http_resp *)) {
    master *m = app;
    pthread_mutex_lock(&m->lock);
    m_trial *t = run_trial(m, req, resp);
    if (t) t->last_heard = dt_now_sec();
    if (t) fn(m, t, req, resp);
    pthread_mutex_unlock(&m->lock);
}

#define RUN_ROUTE(route, fn)                                                                       \
    void route(void *app, const dt_http_req *req, dt_http_resp *resp) {                            \
        with_run(app, req, resp, fn);                                                              \
    }
RUN_ROUTE(m_api_trial_spec, spec)
RUN_ROUTE(m_api_post_metrics, metrics)
RUN_ROUTE(m_api_post_progress, progress)
RUN_ROUTE(m_api_searcher_op, operation)
RUN_ROUTE(m_api_searcher_completed, completed)
RUN_ROUTE(m_api_post_checkpoint, checkpoint)
RUN_ROUTE(m_api_preempt, preempt)
RUN_ROUTE(m_api_early_exit, early_exit)
RUN_ROUTE(m_api_stopped, stopped)
RUN_ROUTE(m_api_heartbeat, heartbeat)
