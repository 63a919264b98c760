/*
 * gc.c — checkpoint garbage collection (gc.h): which checkpoints a policy deletes, and
 * deleting them.
 *
 * The selection follows Determined's query for it: each checkpoint gets three ranks — among
 * its trial's checkpoints by batches (latest first; equal batches share a rank), among its
 * trial's by the validation metric and among the experiment's by the validation metric (best
 * first, equal metrics in list order) — and is deleted when its latest-rank is above
 * save_trial_latest and it either has no validation metric or both metric ranks are above
 * their counts. Whatever the policy says, a checkpoint that dt_gc_ckpt_holder finds held (a
 * model version, an active experiment's warm start) stays; the user's delete asks the same.
 */
#include "master/gc.h"
#include "master/states.h"
#include "master/store_models.h"
#include "base/path.h"
#include "dtrain/trialio.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

dt_gc_policy dt_gc_policy_of(const dt_expconf *cfg) {
    dt_gc_policy p = {
        .save_experiment_best = cfg->checkpoint_storage.save_experiment_best,
        .save_trial_best = cfg->checkpoint_storage.save_trial_best,
        .save_trial_latest = cfg->checkpoint_storage.save_trial_latest,
        .smaller_is_better = cfg->searcher.smaller_is_better,
    };
    return p;
}

typedef struct gc_ck {
    int64_t trial, batches;
    bool has_metric;
    double key; /* the metric, negated when larger is better: smaller keys are better */
    size_t idx; /* position in the input */
} gc_ck;

static int cmp_i64(int64_t a, int64_t b) {
    return a < b ? -1 : a > b;
}

/* Better metric first; rows without one last; then input order. */
static int cmp_metric(const gc_ck *a, const gc_ck *b) {
    if (a->has_metric != b->has_metric) return a->has_metric ? -1 : 1;
    if (a->has_metric && a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int by_exp_metric(const void *x, const void *y) {
    return cmp_metric(x, y);
}

static int by_trial_metric(const void *x, const void *y) {
    const gc_ck *a = x, *b = y;
    int c = cmp_i64(a->trial, b->trial);
    return c ? c : cmp_metric(a, b);
}

static int by_trial_latest(const void *x, const void *y) {
    const gc_ck *a = x, *b = y;
    int c = cmp_i64(a->trial, b->trial);
    return c ? c : cmp_i64(b->batches, a->batches);
}

/* keep[idx] = the policy keeps input row idx (rows not COMPLETED are marked kept). */
static dt_status gc_mark(const json_t *ckpts, const dt_gc_policy *p, bool *keep) {
    if (p->save_experiment_best < 0 || p->save_trial_best < 0 || p->save_trial_latest < 0)
        return dt_error(DT_ERR_INVALID,
                        "checkpoint GC: negative count in the policy (experiment best %lld, "
                        "trial best %lld, trial latest %lld)",
                        (long long)p->save_experiment_best, (long long)p->save_trial_best,
                        (long long)p->save_trial_latest);
    size_t n = json_array_size(ckpts), m = 0;
    gc_ck *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return dt_error(DT_ERR_OOM, "checkpoint GC: %zu checkpoints", n);
    size_t i;
    const json_t *row;
    json_array_foreach(ckpts, i, row) {
        const json_t *trial = json_object_get(row, "trial_id");
        const json_t *batches = json_object_get(row, "batches");
        const char *state = json_string_value(json_object_get(row, "state"));
        keep[i] = true;
        if (!json_string_value(json_object_get(row, "uuid")) || !json_is_integer(trial) ||
            !json_is_integer(batches)) {
            free(v);
            return dt_error(DT_ERR_INVALID,
                            "checkpoint GC: row %zu needs a uuid, an integer trial_id and "
                            "batches",
                            i);
        }
        if (!m_ckpt_state_usable(state)) continue;
        const json_t *metric = json_object_get(row, "validation_metric");
        double x = json_number_value(metric);
        v[m++] = (gc_ck){.trial = json_integer_value(trial),
                         .batches = json_integer_value(batches),
                         .has_metric = json_is_number(metric),
                         .key = p->smaller_is_better ? x : -x,
                         .idx = i};
        keep[i] = false;
    }
    /* the latest of each trial: rank = 1 + the number of its checkpoints with more batches */
    qsort(v, m, sizeof *v, by_trial_latest);
    for (size_t a = 0, first = 0, rank_at = 0; a < m; a++) {
        if (a == 0 || v[a].trial != v[a - 1].trial)
            first = rank_at = a;
        else if (v[a].batches != v[a - 1].batches)
            rank_at = a;
        if ((int64_t)(rank_at - first) < p->save_trial_latest) keep[v[a].idx] = true;
    }
    /* the best of each trial */
    qsort(v, m, sizeof *v, by_trial_metric);
    for (size_t a = 0, first = 0; a < m; a++) {
        if (a == 0 || v[a].trial != v[a - 1].trial) first = a;
        if (v[a].has_metric && (int64_t)(a - first) < p->save_trial_best) keep[v[a].idx] = true;
    }
    /* the best of the experiment */
    qsort(v, m, sizeof *v, by_exp_metric);
    for (size_t a = 0; a < m; a++)
        if (v[a].has_metric && (int64_t)a < p->save_experiment_best) keep[v[a].idx] = true;
    free(v);
    return DT_OK;
}

dt_status dt_gc_select(const json_t *ckpts, const dt_gc_policy *p, json_t **delete_uuids) {
    if (!delete_uuids) return dt_error(DT_ERR_INVALID, "checkpoint GC: NULL out");
    *delete_uuids = NULL;
    if (!json_is_array(ckpts) || !p)
        return dt_error(DT_ERR_INVALID, "checkpoint GC: the checkpoints must be an array");
    size_t n = json_array_size(ckpts);
    bool *keep = malloc(n ? n : 1);
    json_t *out = json_array();
    dt_status status =
        keep && out ? gc_mark(ckpts, p, keep) : dt_error(DT_ERR_OOM, "checkpoint GC");
    for (size_t i = 0; status == DT_OK && i < n; i++) {
        if (keep[i]) continue;
        const json_t *uuid = json_object_get(json_array_get(ckpts, i), "uuid");
        if (json_array_append(out, (json_t *)uuid)) status = dt_error(DT_ERR_OOM, "checkpoint GC");
    }
    free(keep);
    if (status != DT_OK) {
        json_decref(out);
        return status;
    }
    *delete_uuids = out;
    return DT_OK;
}

/* Remove one selected checkpoint's directory and mark its row. DT_OK also when the path is
 * refused (logged, nothing changed). */
static dt_status gc_one(dt_store *st, const json_t *row, const char *root, const char *root_norm) {
    const char *uuid = json_string_value(json_object_get(row, "uuid"));
    const char *path = json_string_value(json_object_get(row, "path"));
    char full[PATH_MAX];
    dt_status status = path ? dt_path_within(root, path, DT_PATH_NOFOLLOW, full, sizeof full)
                            : dt_error(DT_ERR_INVALID, "checkpoint %s has no path", uuid);
    if (status == DT_OK && !strcmp(full, root_norm))
        status = dt_error(DT_ERR_INVALID, "%s is the checkpoint storage root itself", path);
    struct stat sb;
    bool gone = status == DT_OK && lstat(full, &sb) != 0 && errno == ENOENT;
    if (status == DT_OK && !gone) status = dt_ckpt_remove(full);
    if (status == DT_ERR_INVALID) { /* outside the root, a link, or not a checkpoint */
        dt_log(DT_LOG_WARN, "checkpoint GC: refusing to remove checkpoint %s: %s", uuid,
               dt_last_error());
        return DT_OK;
    }
    if (status != DT_OK) return status;
    return dt_store_ckpt_set_state(st, uuid, m_ckpt_state_name(M_CKPT_DELETED));
}

dt_status dt_gc_run(dt_store *st, int64_t exp_id, const dt_gc_policy *p, const char *storage_root) {
    if (!st || !p || !storage_root) return dt_error(DT_ERR_INVALID, "checkpoint GC: NULL argument");
    char root_norm[PATH_MAX];
    dt_status status =
        dt_path_within(storage_root, ".", DT_PATH_LEXICAL, root_norm, sizeof root_norm);
    if (status != DT_OK) return status;
    json_t *ckpts = NULL;
    status = dt_store_ckpt_list(st, exp_id, 0, &ckpts);
    if (status != DT_OK) return status;
    size_t n = json_array_size(ckpts);
    bool *keep = malloc(n ? n : 1);
    status = keep ? gc_mark(ckpts, p, keep) : dt_error(DT_ERR_OOM, "checkpoint GC");
    dt_error_saved first = {.status = DT_OK};
    for (size_t i = 0; status == DT_OK && i < n; i++) {
        if (keep[i]) continue;
        const char *uuid = json_string_value(json_object_get(json_array_get(ckpts, i), "uuid"));
        char why[512];
        if (dt_gc_ckpt_holder(st, uuid, why, sizeof why) != DT_OK || why[0]) {
            /* held, or unknown because the store failed: kept either way */
            dt_log(DT_LOG_INFO, "checkpoint GC: keeping checkpoint %s: %s", uuid,
                   why[0] ? why : dt_last_error());
            continue;
        }
        if (gc_one(st, json_array_get(ckpts, i), storage_root, root_norm) != DT_OK &&
            first.status == DT_OK)
            dt_error_save(&first); /* the others are still tried */
    }
    free(keep);
    json_decref(ckpts);
    if (status == DT_OK && first.status != DT_OK) status = dt_error_restore(&first);
    return status;
}

dt_status dt_gc_ckpt_holder(dt_store *st, const char *uuid, char *why, size_t cap) {
    if (cap) why[0] = 0;
    json_t *holders = NULL;
    dt_status status = dt_store_ckpt_holders(st, uuid, &holders);
    if (status != DT_OK) return status;
    size_t i, len = 0;
    const json_t *h;
    json_array_foreach(holders, i, h) {
        const char *model = json_string_value(json_object_get(h, "model"));
        int w = model
                    ? snprintf(why + len, cap - len, "%smodel %s version %lld", i ? ", " : "",
                               model, (long long)json_integer_value(json_object_get(h, "version")))
                    : snprintf(why + len, cap - len, "%sexperiment %lld (%s)", i ? ", " : "",
                               (long long)json_integer_value(json_object_get(h, "experiment_id")),
                               json_string_value(json_object_get(h, "key")));
        if (w < 0 || (size_t)w >= cap - len) break; /* cut: the first holders are named */
        len += (size_t)w;
    }
    json_decref(holders);
    return DT_OK;
}

dt_status dt_gc_delete_ckpt(dt_store *st, const char *uuid, const char *storage_root) {
    if (!st || !uuid || !storage_root)
        return dt_error(DT_ERR_INVALID, "checkpoint delete: NULL argument");
    json_t *row = NULL;
    dt_status status = dt_store_ckpt_get(st, uuid, &row);
    if (status != DT_OK) {
        if (status == DT_ERR_INVALID)
            dt_error(DT_ERR_INVALID,
                     "no checkpoint has the uuid '%s'; hint: dtrain checkpoint list EXP shows "
                     "an experiment's checkpoints",
                     uuid);
        return status;
    }
    char why[512];
    status = dt_gc_ckpt_holder(st, uuid, why, sizeof why);
    if (status == DT_OK && why[0])
        status = dt_error(DT_ERR_STATE,
                          "checkpoint %s is held by %s; hint: a model version keeps its "
                          "checkpoint for good, an experiment until it ends (or is canceled)",
                          uuid, why);
    const char *path = json_string_value(json_object_get(row, "path"));
    if (status == DT_OK && path) status = dt_path_remove_tree(storage_root, path);
    if (status == DT_OK) status = dt_store_ckpt_delete(st, uuid);
    json_decref(row);
    return status;
}
