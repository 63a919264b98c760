/*
 * det_logs.c — a trial's workloads and its log stream for the reference's client.
 *
 * The log route answers one JSON object per line ({"result": LOG}), sent chunked as it is
 * produced (http.h resp->stream): the stored lines, then with follow=true the new ones as the
 * trial prints them, ending once the trial has stopped (terminal or paused) and every line is
 * out. The stream is produced on its connection's own thread; it takes the master's lock only
 * to read a page of lines and waits between polls without it, so it holds up nobody.
 */
#include "det_impl.h"

#include "master/det_pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POLL_US 200000 /* how often a followed trial's new lines are looked for */
#define PAGE 500

static int by_batches(const void *a, const void *b) {
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "_b")),
               y = json_integer_value(json_object_get(*(json_t *const *)b, "_b"));
    return x < y ? -1 : x > y;
}

void m_det_workloads(void *app, const dt_http_req *req, dt_http_resp *resp) {
    master *m = app;
    if (!m_det_authed(m, req, resp)) return;
    int64_t id;
    json_t *rows = NULL, *cks = NULL, *r;
    pthread_mutex_lock(&m->lock);
    json_t *row = m_det_row(m, M_OWNER_TRIAL, req, &id, resp);
    dt_status st = row ? dt_store_metrics_query(m->store, id, NULL, 0, 0, &rows) : DT_OK;
    if (row && st == DT_OK) st = dt_store_ckpt_list(m->store, 0, id, &cks);
    pthread_mutex_unlock(&m->lock);
    if (row && st != DT_OK) m_det_fail(resp, st);
    if (row && st == DT_OK) {
        json_t *list = json_array(), *when = json_object_get(row, "end_time");
        if (!json_is_string(when)) when = json_object_get(row, "start_time");
        size_t i;
        json_array_foreach(rows, i, r) {
            const char *kind = json_string_value(json_object_get(r, "kind"));
            if (!kind || !strcmp(kind, "profiler")) continue;
            json_t *w = m_det_workload(r, when);
            json_object_set_new(w, "_b",
                                json_integer(json_integer_value(json_object_get(r, "batches"))));
            json_array_append_new(list, w);
        }
        json_array_foreach(cks, i, r) {
            json_int_t b = json_integer_value(json_object_get(r, "batches"));
            json_array_append_new(
                list,
                json_pack("{s:{s:I,s:s,s:O,s:O,s:O},s:I}", "checkpoint", "totalBatches", b, "state",
                          m_det_state(json_string_value(json_object_get(r, "state"))), "uuid",
                          json_object_get(r, "uuid"), "endTime", json_object_get(r, "report_time"),
                          "resources", json_object_get(r, "resources"), "_b", b));
        }
        /* by batches, a checkpoint after the metrics of its batch (a stable sort by hand) */
        size_t n = json_array_size(list);
        json_t **v = malloc((n ? n : 1) * sizeof *v);
        for (size_t k = 0; v && k < n; k++) v[k] = json_incref(json_array_get(list, k));
        if (v) qsort(v, n, sizeof *v, by_batches);
        json_t *sorted = json_array();
        for (size_t k = 0; v && k < n; k++) {
            json_object_del(v[k], "_b");
            json_array_append_new(sorted, v[k]);
        }
        free(v);
        json_decref(list);
        resp->json = m_det_page(req, "workloads", sorted);
    }
    json_decref(cks);
    json_decref(rows);
    json_decref(row);
}

/* ---- the log stream ---- */

typedef struct stream {
    master *m;
    int64_t trial, after;
    bool follow, done;
    int quiet_after_end; /* empty polls since the trial stopped */
    dt__buf out;
    size_t pos;
} stream;

/* One page of new lines into s->out; false when the stream is over. */
static bool refill(stream *s) {
    s->out.len = s->pos = 0;
    json_t *rows = NULL, *trial = NULL, *r;
    pthread_mutex_lock(&s->m->lock);
    dt_status st = dt_store_logs_query(s->m->store, 0, s->trial, s->after, PAGE, &rows);
    if (st == DT_OK) st = dt_store_trial_get(s->m->store, s->trial, &trial);
    pthread_mutex_unlock(&s->m->lock);
    if (st != DT_OK) {
        json_t *e = json_pack("{s:{s:s}}", "error", "message", dt_last_error());
        char *text = json_dumps(e, JSON_COMPACT);
        if (text) dt__buf_put(&s->out, text, strlen(text)), dt__buf_put(&s->out, "\n", 1);
        free(text);
        json_decref(e);
        s->done = true;
        return s->out.len > 0;
    }
    size_t i;
    json_array_foreach(rows, i, r) {
        s->after = json_integer_value(json_object_get(r, "id"));
        json_t *line = m_det_log(r);
        char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
        if (text) dt__buf_put(&s->out, text, strlen(text)), dt__buf_put(&s->out, "\n", 1);
        free(text);
        json_decref(line);
    }
    const char *state = json_string_value(json_object_get(trial, "state"));
    bool stopped = !state || m_state_terminal(m_state_of(state)) || m_state_of(state) == M_PAUSED;
    bool empty = json_array_size(rows) == 0;
    json_decref(rows);
    json_decref(trial);
    /* a stopped trial's last lines may still be on their way to the store: two more polls */
    if (empty && (!s->follow || s->m->stop || (stopped && ++s->quiet_after_end > 2)))
        s->done = true;
    return !s->out.oom;
}

static long stream_next(void *arg, char *buf, size_t max) {
    stream *s = arg;
    while (s->pos == s->out.len) {
        if (s->done || !refill(s)) return -1;
        if (s->pos == s->out.len && !s->done) usleep(POLL_US);
    }
    size_t n = s->out.len - s->pos < max ? s->out.len - s->pos : max;
    memcpy(buf, s->out.p + s->pos, n);
    s->pos += n;
    return (long)n;
}

static void stream_free(void *arg) {
    stream *s = arg;
    dt__buf_free(&s->out);
    free(s);
}

void m_det_trial_logs(master *m, const dt_http_req *req, dt_http_resp *resp) {
    int64_t id;
    pthread_mutex_lock(&m->lock);
    json_t *row = m_det_row(m, M_OWNER_TRIAL, req, &id, resp);
    pthread_mutex_unlock(&m->lock);
    if (!row) return;
    json_decref(row);
    stream *s = calloc(1, sizeof *s);
    if (!s) {
        m_det_error(resp, 500, "out of memory");
        return;
    }
    const char *f = dt_http_query(req, "follow");
    *s = (stream){.m = m, .trial = id, .follow = f && !strcmp(f, "true")};
    resp->stream = stream_next;
    resp->stream_arg = s;
    resp->stream_free = stream_free;
    resp->content_type = "application/json";
}
