/* fake_master.h — a fake master for the tests of a trial run's side (tests/master/): the
 * trial-facing routes of docs/api.md over http.c, for trial TRIAL run RUN, recording what it
 * hears in a `fake` (handlers run on the server's thread, one at a time; read the record
 * after the trial is done). A report from another run, or once `replaced`, is answered 409. */
#ifndef DT_TEST_FAKE_MASTER_H
#define DT_TEST_FAKE_MASTER_H

#include "master/http.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRIAL 5
#define RUN 2

typedef struct fake {
    int64_t ops[3]; /* the operations handed out, in batches (0 ends) */
    int n_ops_given, n_completed;
    double completed[4];
    int n_train_rows, n_val_rows, n_bad_rows;
    int64_t last_train_batches;
    int n_ckpt;
    int64_t ckpt_batches[16];
    size_t ckpt_files[16];
    bool preempt;       /* answer preempt: true */
    int64_t replace_at; /* from a metric row at this batch on, the run is replaced (409) */
    bool replaced;
    int n_409;
    int64_t stopped_at;
    int n_progress;
    json_t *spec;        /* GET .../spec answers it (borrowed), 404 without */
    char early_exit[32]; /* the reason of POST .../early_exit */
} fake;

static bool run_ok(fake *f, const dt_http_req *req, dt_http_resp *resp) {
    const char *q = dt_http_query(req, "run");
    json_int_t run = q ? atoll(q) : json_integer_value(json_object_get(req->body, "run"));
    if (atoll(req->params[0]) != TRIAL) {
        dt_http_error(resp, 404, "no trial %s", req->params[0]);
        return false;
    }
    if (f->replaced || run != RUN) {
        f->n_409++;
        dt_http_error(resp, 409, "trial %d run %lld was replaced", TRIAL, (long long)run);
        return false;
    }
    return true;
}

static void op_get(void *a, const dt_http_req *req, dt_http_resp *resp) {
    fake *f = a;
    if (!run_ok(f, req, resp)) return;
    int64_t n = f->n_ops_given < 3 ? f->ops[f->n_ops_given] : 0;
    f->n_ops_given++;
    resp->json = n ? json_pack("{s:{s:{s:I}}}", "op", "length", "batches", (json_int_t)n)
                   : json_pack("{s:n}", "op");
}

static void op_done(void *a, const dt_http_req *req, dt_http_resp *resp) {
    fake *f = a;
    if (!run_ok(f, req, resp)) return;
    json_t *m = json_object_get(req->body, "metric");
    if (f->n_completed < 4)
        f->completed[f->n_completed] = json_is_number(m) ? json_number_value(m) : NAN;
    f->n_completed++;
}

static void metrics_post(void *a, const dt_http_req *req, dt_http_resp *resp) {
    fake *f = a;
    json_t *rows = json_object_get(req->body, "rows"), *row;
    size_t i;
    json_array_foreach(rows, i, row) {
        if (f->replace_at && json_integer_value(json_object_get(row, "batches")) >= f->replace_at)
            f->replaced = true;
    }
    if (!run_ok(f, req, resp)) return;
    json_array_foreach(rows, i, row) {
        const char *kind = json_string_value(json_object_get(row, "kind"));
        if (!kind || !json_is_object(json_object_get(row, "metrics")) ||
            !json_is_integer(json_object_get(row, "records")))
            f->n_bad_rows++;
        else if (!strcmp(kind, "training")) {
            f->n_train_rows++;
            f->last_train_batches = json_integer_value(json_object_get(row, "batches"));
        } else if (!strcmp(kind, "validation"))
            f->n_val_rows++;
    }
    resp->json = json_pack("{s:i}", "written", (int)json_array_size(rows));
}

static void progress_post(void *a, const dt_http_req *req, dt_http_resp *resp) {
    fake *f = a;
    if (run_ok(f, req, resp)) f->n_progress++;
}

static void ckpt_post(void *a, const dt_http_req *req, dt_http_resp *resp) {
    fake *f = a;
    if (!run_ok(f, req, resp)) return;
    if (f->n_ckpt < 16) {
        f->ckpt_batches[f->n_ckpt] = json_integer_value(json_object_get(req->body, "batches"));
        f->ckpt_files[f->n_ckpt] = json_object_size(json_object_get(req->body, "resources"));
    }
    f->n_ckpt++;
}

static void preempt_get(void *a, const dt_http_req *req, dt_http_resp *resp) {
    fake *f = a;
    if (run_ok(f, req, resp)) resp->json = json_pack("{s:b}", "preempt", f->preempt);
}

static void stopped_post(void *a, const dt_http_req *req, dt_http_resp *resp) {
    fake *f = a;
    if (run_ok(f, req, resp))
        f->stopped_at = json_integer_value(json_object_get(req->body, "batches"));
}

static void spec_get(void *a, const dt_http_req *req, dt_http_resp *resp) {
    fake *f = a;
    if (!run_ok(f, req, resp)) return;
    if (!f->spec) dt_http_error(resp, 404, "no spec");
    resp->json = f->spec ? json_incref(f->spec) : resp->json;
}

static void early_exit_post(void *a, const dt_http_req *req, dt_http_resp *resp) {
    fake *f = a;
    if (!run_ok(f, req, resp)) return;
    const char *r = json_string_value(json_object_get(req->body, "reason"));
    snprintf(f->early_exit, sizeof f->early_exit, "%s", r ? r : "?");
}

static const dt_http_route FAKE_ROUTES[] = {
    {"GET", "/api/v1/trials/{}/spec", spec_get},
    {"GET", "/api/v1/trials/{}/searcher/operation", op_get},
    {"POST", "/api/v1/trials/{}/searcher/completed", op_done},
    {"POST", "/api/v1/trials/{}/metrics", metrics_post},
    {"POST", "/api/v1/trials/{}/progress", progress_post},
    {"POST", "/api/v1/trials/{}/checkpoints", ckpt_post},
    {"GET", "/api/v1/trials/{}/preempt", preempt_get},
    {"POST", "/api/v1/trials/{}/stopped", stopped_post},
    {"POST", "/api/v1/trials/{}/early_exit", early_exit_post},
};

#define FAKE_N_ROUTES ((int)(sizeof FAKE_ROUTES / sizeof *FAKE_ROUTES))

/* Serve `f` on a free loopback port; its URL into url (64 bytes). NULL on failure. */
static dt_http_server *fake_start(fake *f, char *url) {
    dt_http_server *s = NULL;
    if (dt_http_start("127.0.0.1", 0, FAKE_ROUTES, FAKE_N_ROUTES, f, &s) != DT_OK) {
        fprintf(stderr, "fake master: %s\n", dt_last_error());
        return NULL;
    }
    snprintf(url, 64, "http://127.0.0.1:%d", dt_http_port(s));
    return s;
}

#endif
