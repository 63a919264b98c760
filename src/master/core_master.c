/* core_master.c — the master-backed core context (dtrain/core.h, dt_core_master_new in
 * master/master.h): the fit loop's (and the Core API's) reports sent to the master over the
 * trial-facing routes of docs/api.md, for a trial run the master started.
 *
 * Only the chief talks to the master; the other slots' reports are ignored, and the answers
 * every slot must share (the searcher operation, the outcome of completing one) are asked on
 * the chief and broadcast over core->comm.
 *
 *   metrics      rows {"kind","batches","epochs","records",[timing],"metrics"} gathered and
 *                sent with each training or validation report (profiler rows wait for the
 *                next one); rows that could not be delivered are kept and sent with the
 *                next report (up to MAX_PENDING rows).
 *   progress     at most once a second.
 *   heartbeat    POST .../heartbeat at most every $DTRAIN_HEARTBEAT_S (the master sets it to a
 *                quarter of resources.max_silence; HEARTBEAT_DEFAULT_S without it), from
 *                dt_core_heartbeat; every other report counts as one on the master too.
 *   preemption   GET .../preempt at most every PREEMPT_POLL_S (the answer is cached between);
 *                SIGTERM / SIGINT (Slurm's scancel and time limit send SIGTERM first) too: the
 *                loop finishes the batch, checkpoints and stops.
 *   checkpoints  reported with resources = the checkpoint's files and sizes.
 *   TensorBoard  files under the checkpoint directory, as the local core writes them.
 *   lost         a 409 (this run was replaced) or a master unreachable for lost_after_s of
 *                retries marks the core lost (core->lost): should_preempt answers true,
 *                checkpoint_stored and every later report refuse with DT_ERR_STATE.
 */
#include "dtrain/core.h"
#include "master/master.h"
#include "master/trial_env.h"
#include "dtrain/trialio.h"
#include "trial/trial_iface.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PREEMPT_POLL_S 0.5
#define PROGRESS_EVERY_S 1.0
#define MAX_PENDING 100000
#define HEARTBEAT_DEFAULT_S 30.0
/* The master unreachable this long makes a run lost (its slots go to a replacement). */
#define LOST_AFTER_S 10.0
/* No call waits less than this: a master busy with a large transaction is not lost. */
#define CALL_TIMEOUT_MIN_S 30.0

typedef struct mcore {
    dt_core core;
    dt_client *client;
    int64_t trial_id, run;
    double lost_after_s, retry_s;
    char base[64];          /* "/api/v1/trials/<id>" */
    json_t *pending;        /* metric rows not yet delivered */
    double next_preempt;    /* when to ask again */
    bool preempt;           /* the last answer */
    double comm_fail_since; /* first failed call of a run of failures (0: none) */
    double next_progress;
    dt_preempt_signals saved_signals;
} mcore;

static mcore *M(dt_core *core) {
    return core->impl;
}

static dt_status lost_error(mcore *m) {
    return dt_error(DT_ERR_STATE,
                    "trial %lld run %lld no longer reports to the master (it was replaced or the "
                    "master is gone): nothing more is written",
                    (long long)m->trial_id, (long long)m->run);
}

/* Note a call's outcome: a 409 or DT_ERR_COMM lasting over lost_after_s makes the core lost. */
static dt_status note(mcore *m, dt_status st, long http) {
    if (st == DT_OK) {
        m->comm_fail_since = 0;
        return st;
    }
    if (http == 409) {
        m->core.lost = true;
        return st;
    }
    if (st == DT_ERR_COMM) {
        double now = dt_now_sec();
        if (m->comm_fail_since == 0) m->comm_fail_since = now;
        if (now - m->comm_fail_since >= m->lost_after_s) m->core.lost = true;
    }
    return st;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Call the master, retrying while it cannot be reached, until it answers or the core is lost.
 * `body` gets "run"; *out as dt_client_call. */
static dt_status call(mcore *m, const char *method, const char *route, json_t *body, json_t **out) {
    if (m->core.lost) return lost_error(m);
    char path[256];
    if (body) json_object_set_new(body, "run", json_integer(m->run));
    if (!body || strcmp(method, "GET") == 0)
        snprintf(path, sizeof path, "%s%s?run=%lld", m->base, route, (long long)m->run);
    else
        snprintf(path, sizeof path, "%s%s", m->base, route);
    for (;;) {
        long http = 0;
        dt_status st = dt_client_call(m->client, method, path, body, out, &http);
        st = note(m, st, http);
        if (st != DT_ERR_COMM || m->core.lost) return st;
        sleep_s(m->retry_s);
    }
}

/* One try, no retry (reports that may wait for the next one). */
static dt_status try_call(mcore *m, const char *route, json_t *body) {
    if (m->core.lost) return lost_error(m);
    char path[256];
    snprintf(path, sizeof path, "%s%s", m->base, route);
    json_object_set_new(body, "run", json_integer(m->run));
    long http = 0;
    dt_status st = dt_client_call(m->client, "POST", path, body, NULL, &http);
    return note(m, st, http);
}

/* ---- metrics ---- */

static void add_row(mcore *m, const char *kind, const dt_core_at *at, const dt_metrics *mt,
                    const dt_core_timing *tm) {
    if (json_array_size(m->pending) >= MAX_PENDING) return; /* (logged when sent) */
    json_t *row = json_pack("{s:s,s:I,s:f,s:I}", "kind", kind, "batches", (json_int_t)at->batches,
                            "epochs", at->epochs, "records", (json_int_t)at->records);
    if (tm && tm->records_per_s > 0) {
        json_object_set_new(row, "records_per_s", json_real(tm->records_per_s));
        if (tm->batches > 0) {
            json_object_set_new(row, "data_ms", json_real(tm->data_ms));
            json_object_set_new(row, "train_batch_ms", json_real(tm->train_batch_ms));
        }
    }
    json_object_set_new(row, "metrics", dt_metrics_to_json(mt));
    json_array_append_new(m->pending, row);
}

/* Send the pending rows; on failure they stay for the next report (a note on stderr). */
static dt_status flush_rows(mcore *m) {
    if (!json_array_size(m->pending)) return DT_OK;
    json_t *body = json_pack("{s:O}", "rows", m->pending);
    dt_status st = try_call(m, "/metrics", body);
    json_decref(body);
    if (st == DT_OK)
        json_array_clear(m->pending);
    else if (!m->core.lost)
        fprintf(stderr, "warning: %zu metric rows not delivered yet: %s\n",
                json_array_size(m->pending), dt_last_error());
    return st;
}

static dt_status m_start(dt_core *core, int64_t steps_completed) {
    (void)steps_completed;
    return dt_core_tb_open(core);
}

static dt_status m_training(dt_core *core, const dt_core_at *at, const dt_metrics *mt,
                            const dt_core_timing *tm) {
    if (!core->chief) return DT_OK;
    dt_core_print_metrics(stderr, "training", at, mt, tm ? tm->records_per_s : 0); /* its log */
    dt_core_tb_write(core, "training", at->batches, mt, true);
    add_row(M(core), "training", at, mt, tm);
    return flush_rows(M(core));
}

static dt_status m_validation(dt_core *core, const dt_core_at *at, const dt_metrics *mt) {
    if (!core->chief) return DT_OK;
    dt_core_print_metrics(stderr, "validation", at, mt, 0);
    dt_core_tb_write(core, "validation", at->batches, mt, true);
    add_row(M(core), "validation", at, mt, NULL);
    return flush_rows(M(core));
}

static dt_status m_profiler(dt_core *core, const dt_core_at *at, const dt_metrics *mt) {
    if (!core->chief) return DT_OK;
    dt_core_tb_write(core, "profiler", at->batches, mt, false);
    add_row(M(core), "profiler", at, mt, NULL); /* goes with the next report */
    return DT_OK;
}

static void m_progress(dt_core *core, const dt_core_progress *p) {
    mcore *m = M(core);
    double now = dt_now_sec();
    if (!core->chief || core->lost || (now < m->next_progress && p->batches < p->total_batches))
        return;
    m->next_progress = now + PROGRESS_EVERY_S;
    json_t *body = json_pack("{s:I,s:I}", "batches", (json_int_t)p->batches, "total_batches",
                             (json_int_t)p->total_batches);
    if (try_call(m, "/progress", body) != DT_OK) dt_clear_error(); /* the next one will do */
    json_decref(body);
}

static void m_heartbeat(dt_core *core) {
    mcore *m = M(core);
    if (!core->chief || core->lost) return;
    json_t *body = json_object();
    if (body && try_call(m, "/heartbeat", body) != DT_OK) dt_clear_error(); /* the next will do */
    json_decref(body);
}

/* How often heartbeats go: $DTRAIN_HEARTBEAT_S, or the default when unset or not a number. */
static double heartbeat_every(void) {
    const char *v = getenv(DT__HEARTBEAT_ENV);
    char *end = NULL;
    double s = v ? strtod(v, &end) : 0;
    return v && end != v && !*end && s > 0 && s < 1e6 ? s : HEARTBEAT_DEFAULT_S;
}

/* ---- checkpoints ---- */

/* {file: bytes} of the checkpoint at `path` (its metadata's list), or an empty object. */
static json_t *resources(const char *path) {
    json_t *r = json_object();
    dt_ckpt *ck = dt_ckpt_open(path);
    if (!ck) {
        dt_clear_error();
        return r;
    }
    for (int i = 0; i < dt_ckpt_file_count(ck); i++)
        json_object_set_new(r, dt_ckpt_file_name(ck, i), json_integer(dt_ckpt_file_size(ck, i)));
    dt_ckpt_close(ck);
    return r;
}

static dt_status m_checkpoint_stored(dt_core *core, const dt_core_checkpoint *ck) {
    mcore *m = M(core);
    if (!core->chief) return DT_OK;
    if (core->lost) return lost_error(m);
    flush_rows(m); /* the metrics up to the checkpoint go first */
    dt_clear_error();
    json_t *body = json_pack("{s:s,s:s,s:I,s:O?,s:o}", "uuid", ck->uuid, "path", ck->path,
                             "batches", (json_int_t)ck->steps_completed, "metadata",
                             (json_t *)ck->metadata, "resources", resources(ck->path));
    dt_status st = call(m, "POST", "/checkpoints", body, NULL);
    json_decref(body);
    if (st != DT_OK)
        return dt_error(st, "cannot report checkpoint %s to the master: %s", ck->uuid,
                        dt_last_error());
    return DT_OK;
}

/* ---- preemption ---- */

static bool m_should_preempt(dt_core *core) {
    mcore *m = M(core);
    if (!core->chief) return false;
    if (core->lost || dt_preempt_signal()) return true;
    double now = dt_now_sec();
    if (now < m->next_preempt) return m->preempt;
    m->next_preempt = now + PREEMPT_POLL_S;
    char path[256];
    snprintf(path, sizeof path, "%s/preempt?run=%lld", m->base, (long long)m->run);
    json_t *ans = NULL;
    long http = 0;
    dt_status st = dt_client_call(m->client, "GET", path, NULL, &ans, &http);
    st = note(m, st, http);
    if (st == DT_OK) m->preempt = json_is_true(json_object_get(ans, "preempt"));
    json_decref(ans);
    if (st != DT_OK) dt_clear_error(); /* asked again at the next poll; lost when it lasts */
    return m->preempt || core->lost;
}

/* ---- the searcher (asked on the chief, shared with every slot) ---- */

typedef struct op_msg {
    int32_t status;
    int32_t unit;
    int64_t n;
} op_msg;

static dt_status share(dt_core *core, op_msg *msg, const char *what) {
    if (!core->comm || dt_comm_size(core->comm) < 2) return (dt_status)msg->status;
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", dt_last_error());
    dt_status st = dt_comm_broadcast(core->comm, msg, sizeof *msg, 0);
    if (st != DT_OK) return st;
    if (msg->status == DT_OK) return DT_OK;
    return core->chief ? dt_error((dt_status)msg->status, "%s", keep)
                       : dt_error((dt_status)msg->status, "%s failed on the chief", what);
}

static const char *UNIT_KEY[] = {"batches", "epochs", "records"};

static dt_status m_searcher_op(dt_core *core, dt_core_op *op) {
    op_msg msg = {0};
    if (core->chief) {
        json_t *ans = NULL;
        msg.status = call(M(core), "GET", "/searcher/operation", NULL, &ans);
        json_t *len = json_object_get(json_object_get(ans, "op"), "length");
        for (int u = 0; msg.status == DT_OK && len && u < 3; u++) {
            json_t *v = json_object_get(len, UNIT_KEY[u]);
            if (json_is_integer(v)) {
                msg.unit = u;
                msg.n = json_integer_value(v);
            }
        }
        if (msg.status == DT_OK && len && msg.n <= 0)
            msg.status = dt_error(DT_ERR_FORMAT, "the master sent a searcher operation without a "
                                                 "length in batches, epochs or records");
        json_decref(ans);
    }
    dt_status st = share(core, &msg, "asking the master for the searcher operation");
    if (st == DT_OK) op->length = (dt_length){(dt_unit)msg.unit, msg.n};
    return st;
}

static dt_status m_searcher_complete(dt_core *core, const dt_core_op *op, double metric) {
    op_msg msg = {0};
    if (core->chief) {
        mcore *m = M(core);
        flush_rows(m);
        dt_clear_error();
        json_t *body = json_pack("{s:{s:I},s:o}", "length", UNIT_KEY[op->length.unit],
                                 (json_int_t)op->length.n, "metric",
                                 isfinite(metric) ? json_real(metric) : json_null());
        msg.status = call(m, "POST", "/searcher/completed", body, NULL);
        json_decref(body);
    }
    return share(core, &msg, "completing the searcher operation");
}

static void m_stopped(dt_core *core, int64_t steps_completed) {
    mcore *m = M(core);
    if (!core->chief || core->lost) return;
    flush_rows(m);
    json_t *body = json_pack("{s:I}", "batches", (json_int_t)steps_completed);
    if (call(m, "POST", "/stopped", body, NULL) != DT_OK)
        fprintf(stderr, "warning: cannot tell the master the trial stopped: %s\n", dt_last_error());
    json_decref(body);
}

static void m_free(dt_core *core) {
    mcore *m = M(core);
    dt_preempt_signals_restore(&m->saved_signals);
    if (core->chief && !core->lost && json_array_size(m->pending)) flush_rows(m);
    dt_core_tb_close(core);
    json_decref(m->pending);
    dt_client_free(m->client);
    free(m);
}

static const dt_core_ops MASTER_OPS = {
    .name = "master",
    .start = m_start,
    .report_training_metrics = m_training,
    .report_validation_metrics = m_validation,
    .report_profiler_metrics = m_profiler,
    .report_progress = m_progress,
    .checkpoint_stored = m_checkpoint_stored,
    .should_preempt = m_should_preempt,
    .searcher_op = m_searcher_op,
    .searcher_complete = m_searcher_complete,
    .report_stopped = m_stopped,
    .heartbeat = m_heartbeat,
    .free = m_free,
};

dt_core *dt_core_master_new(const dt_core_master_opts *o) {
    mcore *m = calloc(1, sizeof *m);
    if (!m || !(m->pending = json_array())) {
        free(m);
        dt_error(DT_ERR_OOM, "out of memory creating the master-backed core");
        return NULL;
    }
    if (!(m->client = dt_client_new(o->url))) {
        json_decref(m->pending);
        free(m);
        return NULL;
    }
    m->trial_id = o->trial_id;
    m->run = o->run;
    m->lost_after_s = o->lost_after_s > 0 ? o->lost_after_s : LOST_AFTER_S;
    m->retry_s = m->lost_after_s / 20 < 0.5 ? m->lost_after_s / 20 : 0.5;
    snprintf(m->base, sizeof m->base, "/api/v1/trials/%lld", (long long)o->trial_id);
    m->core.ops = &MASTER_OPS;
    m->core.impl = m;
    m->core.chief = o->chief;
    m->core.heartbeat_s = heartbeat_every();
    if (o->checkpoint_dir)
        snprintf(m->core.tb_path, sizeof m->core.tb_path, "%s/tensorboard", o->checkpoint_dir);
    /* a single call waits no longer than the core may stay without its master */
    dt_client_set_timeout(m->client, m->lost_after_s > CALL_TIMEOUT_MIN_S ? m->lost_after_s
                                                                          : CALL_TIMEOUT_MIN_S);
    dt_preempt_signals_catch(&m->saved_signals);
    return &m->core;
}
