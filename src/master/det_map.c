/*
 * det_map.c — the one place where dtrain's rows, states and ids become the reference
 * platform's spellings (docs/det-client.md has the same tables): states both ways, error
 * codes, and each object the reference's client reads, built from dtrain's store rows.
 * Ids, checkpoint uuids, metric names and times are dtrain's own values; only names change.
 */
#include "det_impl.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* dtrain state -> the reference's. Experiments and trials share the names; checkpoints are
 * COMPLETED or DELETED. */
static const char *const STATES[][2] = {
    {"ACTIVE", "STATE_ACTIVE"},
    {"PAUSED", "STATE_PAUSED"},
    {"STOPPING_COMPLETED", "STATE_STOPPING_COMPLETED"},
    {"STOPPING_CANCELED", "STATE_STOPPING_CANCELED"},
    {"STOPPING_KILLED", "STATE_STOPPING_KILLED"},
    {"STOPPING_ERROR", "STATE_STOPPING_ERROR"},
    {"COMPLETED", "STATE_COMPLETED"},
    {"CANCELED", "STATE_CANCELED"},
    {"ERROR", "STATE_ERROR"},
    {"DELETING", "STATE_DELETING"},
    {"DELETED", "STATE_DELETED"},
};
#define N_STATES ((int)(sizeof STATES / sizeof STATES[0]))

const char *m_det_state(const char *s) {
    for (int i = 0; s && i < N_STATES; i++)
        if (!strcmp(STATES[i][0], s)) return STATES[i][1];
    return "STATE_UNSPECIFIED";
}

const char *m_det_state_back(const char *s) {
    for (int i = 0; s && i < N_STATES; i++)
        if (!strcmp(STATES[i][1], s)) return STATES[i][0];
    return s && !strcmp(s, "STATE_RUNNING") ? "ACTIVE" : NULL;
}

/* HTTP status -> gRPC code (what the reference's error bodies carry). */
static const int CODES[][2] = {
    {400, 3}, {401, 16}, {403, 7}, {404, 5}, {405, 12}, {409, 9}, {413, 3},
};

int m_det_code(int status) {
    for (size_t i = 0; i < sizeof CODES / sizeof CODES[0]; i++)
        if (CODES[i][0] == status) return CODES[i][1];
    return 13;
}

json_t *m_det_user(const char *username) {
    return json_pack("{s:s,s:b,s:b,s:i,s:s}", "username", username, "admin", 1, "active", 1, "id",
                     !strcmp(username, "admin") ? 2 : 1, "displayName", username);
}

/* row[key] (borrowed), or JSON null (new) when absent: for "o" in json_pack. */
static json_t *get(const json_t *row, const char *key) {
    json_t *v = json_object_get(row, key);
    return v ? json_incref(v) : json_null();
}

static json_int_t get_int(const json_t *row, const char *key) {
    return json_integer_value(json_object_get(row, key));
}

json_t *m_det_experiment(const json_t *row) {
    const json_t *cfg = json_object_get(row, "config");
    const json_t *searcher = json_object_get(cfg, "searcher");
    char job[40];
    snprintf(job, sizeof job, "exp-%lld", (long long)get_int(row, "id"));
    json_t *e =
        json_pack("{s:I,s:o,s:s,s:b,s:o,s:o,s:s,s:I,s:i,s:i,s:o,s:o,s:o,s:s,s:o,s:o,s:o,s:[],s:s}",
                  "id", get_int(row, "id"), "name", get(row, "name"), "state",
                  m_det_state(json_string_value(json_object_get(row, "state"))), "archived", 0,
                  "config", get(row, "config"), "originalConfig", get(row, "config_text"), "jobId",
                  job, "numTrials", get_int(row, "num_trials"), "projectId", 1, "projectOwnerId", 1,
                  "searcherType", get(searcher, "name"), "startTime", get(row, "start_time"),
                  "endTime", get(row, "end_time"), "username", "determined", "progress",
                  get(row, "progress"), "description", get(row, "description"), "searcherMetric",
                  get(row, "searcher_metric"), "labels", "resourcePool", "default");
    if (e) json_object_set(e, "bestTrialSearcherMetric", json_object_get(row, "best_metric"));
    return e;
}

json_t *m_det_trial(const json_t *row) {
    json_t *best = json_object_get(row, "best_validation");
    json_t *t = json_pack("{s:I,s:I,s:o,s:I,s:o,s:o,s:s,s:I}", "id", get_int(row, "id"),
                          "experimentId", get_int(row, "experiment_id"), "hparams",
                          get(row, "hparams"), "restarts", get_int(row, "restarts"), "startTime",
                          get(row, "start_time"), "endTime", get(row, "end_time"), "state",
                          m_det_state(json_string_value(json_object_get(row, "state"))),
                          "totalBatchesProcessed", get_int(row, "batches"));
    if (t && json_is_number(best)) json_object_set(t, "searcherMetricValue", best);
    return t;
}

json_t *m_det_checkpoint(const json_t *row, const json_t *exp_row, const char *ckpt_root) {
    const json_t *cfg = json_object_get(exp_row, "config");
    const char *metric = json_string_value(json_object_get(exp_row, "searcher_metric"));
    json_t *storage = json_object_get(cfg, "checkpoint_storage");
    storage = json_is_object(storage) ? json_deep_copy(storage) : json_object();
    json_object_set_new(storage, "type", json_string("shared_fs"));
    json_object_set_new(storage, "host_path", json_string(ckpt_root ? ckpt_root : ""));
    json_object_del(storage, "storage_path");
    json_t *econf = json_deep_copy(cfg);
    if (!json_is_object(econf)) econf = json_object();
    json_object_set_new(econf, "checkpoint_storage", storage);
    json_t *avg = json_object(), *vm = json_object_get(row, "validation_metric");
    if (metric && json_is_number(vm)) json_object_set(avg, metric, vm);
    json_t *meta = json_object_get(row, "metadata");
    meta = json_is_object(meta) ? json_deep_copy(meta) : json_object();
    if (!json_object_get(meta, "steps_completed"))
        json_object_set_new(meta, "steps_completed", json_integer(get_int(row, "batches")));
    return json_pack("{s:o,s:s,s:o,s:o,s:o,s:{s:I,s:I,s:o,s:{s:o}}}", "uuid", get(row, "uuid"),
                     "state", m_det_state(json_string_value(json_object_get(row, "state"))),
                     "metadata", meta, "resources", get(row, "resources"), "reportTime",
                     get(row, "report_time"), "training", "trialId", get_int(row, "trial_id"),
                     "experimentId", get_int(row, "experiment_id"), "experimentConfig", econf,
                     "validationMetrics", "avgMetrics", avg);
}

json_t *m_det_workload(const json_t *r, const json_t *when) {
    const char *kind = json_string_value(json_object_get(r, "kind"));
    json_t *metrics = json_object_get(r, "metrics");
    json_t *avg = json_object(), *v;
    const char *k;
    json_object_foreach(metrics, k, v) {
        /* NaN and infinities are null in dtrain's rows; the reference's client wants numbers */
        if (json_is_number(v) && isfinite(json_number_value(v))) json_object_set(avg, k, v);
    }
    return json_pack("{s:{s:I,s:I,s:{s:o},s:o}}",
                     kind && !strcmp(kind, "validation") ? "validation" : "training",
                     "totalBatches", get_int(r, "batches"), "numInputs", get_int(r, "records"),
                     "metrics", "avgMetrics", avg, "endTime",
                     json_object_get(r, "time") || !when ? get(r, "time")
                                                         : json_incref((json_t *)when));
}

json_t *m_det_log(const json_t *r) {
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)get_int(r, "id"));
    const char *line = json_string_value(json_object_get(r, "line"));
    size_t n = line ? strlen(line) : 0;
    json_t *msg = json_stringn(line ? line : "", n);
    if (!n || line[n - 1] != '\n') {
        json_decref(msg);
        char *with = malloc(n + 2);
        if (!with) return NULL;
        memcpy(with, line ? line : "", n);
        with[n] = '\n';
        msg = json_stringn(with, n + 1);
        free(with);
    }
    return json_pack("{s:{s:s,s:I,s:o,s:o,s:s,s:I}}", "result", "id", id, "trialId",
                     get_int(r, "trial_id"), "message", msg, "timestamp", get(r, "time"), "level",
                     "LOG_LEVEL_INFO", "rankId", get_int(r, "rank"));
}

json_t *m_det_pagination(int64_t offset, int64_t limit, int64_t returned, int64_t total) {
    return json_pack("{s:I,s:I,s:I,s:I,s:I}", "offset", (json_int_t)offset, "limit",
                     (json_int_t)limit, "startIndex", (json_int_t)offset, "endIndex",
                     (json_int_t)(offset + returned), "total", (json_int_t)total);
}

json_t *m_det_summary(const json_t *metric_rows) {
    json_t *out = json_pack("{s:{},s:{}}", "avg_metrics", "validation_metrics"), *r;
    size_t i;
    json_array_foreach(metric_rows, i, r) {
        const char *kind = json_string_value(json_object_get(r, "kind"));
        json_t *group =
            json_object_get(out, kind && !strcmp(kind, "validation") ? "validation_metrics"
                                 : kind && !strcmp(kind, "training") ? "avg_metrics"
                                                                     : NULL);
        json_t *v;
        const char *k;
        json_object_foreach(json_object_get(r, "metrics"), k, v) {
            if (!group || !json_is_number(v)) continue;
            double x = json_number_value(v);
            json_t *s = json_object_get(group, k);
            if (!s) {
                json_object_set_new(group, k,
                                    json_pack("{s:i,s:f,s:f,s:f,s:f,s:s}", "count", 0, "sum", 0.0,
                                              "min", x, "max", x, "last", x, "type", "number"));
                s = json_object_get(group, k);
            }
            json_object_set_new(s, "count",
                                json_integer(json_integer_value(json_object_get(s, "count")) + 1));
            json_object_set_new(s, "sum",
                                json_real(json_number_value(json_object_get(s, "sum")) + x));
            if (x < json_number_value(json_object_get(s, "min")))
                json_object_set_new(s, "min", json_real(x));
            if (x > json_number_value(json_object_get(s, "max")))
                json_object_set_new(s, "max", json_real(x));
            json_object_set_new(s, "last", json_real(x));
        }
    }
    return out;
}

bool m_det_state_wanted(const dt_http_req *req, const char *s) {
    bool any = false;
    for (int i = 0; i < req->n_args; i++) {
        if (strcmp(req->args[i][0], "states")) continue;
        any = true;
        const char *back = m_det_state_back(req->args[i][1]);
        if (back && s && !strcmp(back, s)) return true;
    }
    return !any;
}
