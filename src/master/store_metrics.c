/*
 * store_metrics.c — metric rows in the store (store.h): checked, upserted per trial, kind and
 * batch (with the packed chart series in the same transaction), queried and counted as
 * reported; and the charts' series and metric names, read through the series cache
 * (series_cache.h).
 */
#include "master/store_impl.h"
#include "master/series_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const METRIC_KINDS[] = {"training", "validation", "profiler", NULL};

/* NULL when row i is a well-formed metric row, else what is wrong with it. */
static const char *metric_row_problem(const json_t *row) {
    if (!json_is_object(row)) return "it is not an object";
    if (!dt__store_in_list(json_string_value(json_object_get(row, "kind")), METRIC_KINDS))
        return "\"kind\" must be \"training\", \"validation\" or \"profiler\"";
    const json_t *b = json_object_get(row, "batches");
    if (!json_is_integer(b) || json_integer_value(b) < 0)
        return "\"batches\" must be an integer >= 0";
    static const char *const counts[] = {"epochs", "records"};
    for (int i = 0; i < 2; i++) {
        const json_t *v = json_object_get(row, counts[i]);
        if (v && !json_is_null(v) && (!json_is_number(v) || json_number_value(v) < 0))
            return i ? "\"records\" must be a number >= 0" : "\"epochs\" must be a number >= 0";
    }
    const json_t *m = json_object_get(row, "metrics");
    if (!json_is_object(m)) return "\"metrics\" must be an object";
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)m, k, v) {
        if (!json_is_number(v) && !json_is_null(v)) return "every metric must be a number or null";
    }
    return NULL;
}

dt_status dt_store_metrics_insert(dt_store *st, int64_t trial_id, const json_t *rows,
                                  int64_t *n_written) {
    if (n_written) *n_written = 0;
    if (!json_is_array(rows))
        return dt_error(DT_ERR_INVALID, "store: metric rows must be an array; nothing written");
    size_t i;
    const json_t *row;
    json_array_foreach(rows, i, row) {
        const char *why = metric_row_problem(row);
        if (why)
            return dt_error(DT_ERR_INVALID,
                            "metric row %zu of %zu for trial %lld: %s; nothing of the batch was "
                            "written",
                            i, json_array_size(rows), (long long)trial_id, why);
    }
    dt_status status = dt__store_write_begin(st);
    if (status != DT_OK) return status;
    st->metrics_gen++;
    /* the searcher metric's name (and the trial's existence) */
    sqlite3_stmt *s;
    char *metric = NULL;
    status = dt__store_first_row(st,
                                 "SELECT e.searcher_metric FROM trials t JOIN experiments e"
                                 " ON e.id = t.experiment_id WHERE t.id = ?1",
                                 "looking up a trial", "trial", ID_KEY(trial_id),
                                 ARGS(V_INT(trial_id)), &s);
    if (s) {
        metric = strdup((const char *)sqlite3_column_text(s, 0));
        dt__store_done(s);
        if (!metric) status = dt_error(DT_ERR_OOM, "store %s", st->path);
    }
    json_array_foreach(rows, i, row) {
        if (status != DT_OK) break;
        /* a cached series that read this batch or later ones may hold what the row replaces */
        dt__series_cache_invalidate(st->series, trial_id,
                                    json_string_value(json_object_get(row, "kind")),
                                    json_integer_value(json_object_get(row, "batches")));
        const json_t *v = json_object_get(json_object_get(row, "metrics"), metric);
        status = dt__store_exec_args(
            st,
            "INSERT INTO metrics (trial_id, kind, batches, searcher_value, body)"
            " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (trial_id, kind, batches)"
            " DO UPDATE SET searcher_value = excluded.searcher_value,"
            " body = excluded.body",
            "writing metrics",
            ARGS(V_INT(trial_id), V_TEXT(json_string_value(json_object_get(row, "kind"))),
                 V_INT(json_integer_value(json_object_get(row, "batches"))),
                 json_is_number(v) ? V_REAL(json_number_value(v)) : V_NULL, V_JSON(row)));
    }
    free(metric);
    if (status == DT_OK) { /* the charts' packed series, in the same transaction */
        int rc = dt__packed_append(st->db, trial_id, rows);
        if (rc != SQLITE_OK) status = dt__store_sql_error(st, rc, "packing the chart series");
    }
    if (status == DT_OK && n_written) *n_written = (int64_t)json_array_size(rows);
    status = dt__store_write_end(st, status);
    if (status != DT_OK && n_written) *n_written = 0;
    return status;
}

/* a metric row is the object the trial reported, stored whole */
static const row_kind METRIC_ROWS = {"metric row", NULL, 0};

/* Check the kind of a metric query. */
static dt_status metric_kind_arg(const char *kind) {
    if (kind && !dt__store_in_list(kind, METRIC_KINDS))
        return dt_error(DT_ERR_INVALID,
                        "unknown metric kind \"%s\"; hint: training, validation or profiler", kind);
    return DT_OK;
}

dt_status dt_store_metrics_query(dt_store *st, int64_t trial_id, const char *kind,
                                 int64_t after_batches, int64_t limit, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    if (limit < 0) return dt_error(DT_ERR_INVALID, "store: negative limit %lld", (long long)limit);
    dt_status status = metric_kind_arg(kind);
    if (status != DT_OK) return status;
    return dt__store_select_json(
        st, &METRIC_ROWS, OF_TRIAL(trial_id), NULL,
        "SELECT body FROM metrics WHERE trial_id = ?1"
        " AND (?2 IS NULL OR kind = ?2) AND batches > ?3"
        " ORDER BY batches, id LIMIT ?4",
        ARGS(V_INT(trial_id), V_TEXT(kind), V_INT(after_batches), V_INT(limit ? limit : -1)), out);
}

dt_status dt_store_metrics_count(dt_store *st, int64_t trial_id, const char *kind, int64_t *n) {
    if (!n) return dt_error(DT_ERR_INVALID, "store: NULL n");
    *n = 0;
    dt_status status = metric_kind_arg(kind);
    if (status != DT_OK) return status;
    dt__store_lock(st);
    status = dt__store_need(st, OF_TRIAL(trial_id));
    sqlite3_stmt *s = NULL;
    if (status == DT_OK)
        status = dt__store_first_row(st,
                                     "SELECT count(*) FROM metrics WHERE trial_id = ?1"
                                     " AND (?2 IS NULL OR kind = ?2)",
                                     "counting metrics", NULL, NULL,
                                     ARGS(V_INT(trial_id), V_TEXT(kind)), &s);
    if (s) *n = sqlite3_column_int64(s, 0);
    dt__store_done(s);
    dt__store_unlock(st);
    return status;
}

/* ---- metric series (charts) ---- */

/* The ids of an experiment's trials (or of its trial `trial_id` when not 0), in id order. */
static dt_status trial_ids(dt_store *st, int64_t exp_id, int64_t trial_id, int64_t **ids,
                           int *count) {
    sqlite3_stmt *s;
    dt_status status = dt__store_prep_args(st,
                                           "SELECT id FROM trials WHERE experiment_id = ?1"
                                           " AND (?2 = 0 OR id = ?2) ORDER BY id",
                                           ARGS(V_INT(exp_id), V_INT(trial_id)), &s);
    return status == DT_OK ? dt__store_read_ids(st, s, "listing trials", ids, count) : status;
}

/* x and y of a stored row by SQLite's JSON functions, for what dt__row_number cannot tell. */
static dt_status row_point_sql(dt_store *st, const char *body, const char *ypath, const char *xpath,
                               bool *has, double *x, double *y) {
    sqlite3_stmt *s;
    dt_status status = dt__store_prep_args(st, "SELECT json_extract(?1, ?2), json_extract(?1, ?3)",
                                           ARGS(V_TEXT(body), V_TEXT(xpath), V_TEXT(ypath)), &s);
    if (status != DT_OK) return status;
    int rc = sqlite3_step(s);
    *has = rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL &&
           sqlite3_column_type(s, 1) != SQLITE_NULL;
    if (*has) *x = sqlite3_column_double(s, 0), *y = sqlite3_column_double(s, 1);
    if (rc != SQLITE_ROW) status = dt__store_sql_error(st, rc, "reading a metric row");
    dt__store_done(s);
    return status;
}

/* Read the rows of the entry's trial and kind after its last batch into it. The numbers are
 * picked out of each row's text here (SQLite's json_extract parses the whole row, twice: most
 * of a first chart's time); rows this cannot read go through json_extract. */
static dt_status series_extend(dt_store *st, dt__series *e, const char *ypath, const char *xpath) {
    sqlite3_stmt *s;
    dt_status status =
        dt__store_prep(st,
                       "SELECT batches, body FROM metrics"
                       " WHERE trial_id = ?1 AND kind = ?2 AND batches > ?3 ORDER BY batches",
                       &s);
    if (status != DT_OK) return status;
    sqlite3_bind_int64(s, 1, e->trial_id);
    sqlite3_bind_text(s, 2, e->kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, e->last_batches);
    bool by_batches = !strcmp(e->x, "batches");
    int rc = SQLITE_DONE;
    bool ok = true;
    while (ok && status == DT_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        e->last_batches = sqlite3_column_int64(s, 0);
        e->rows++;
        const char *body = (const char *)sqlite3_column_text(s, 1);
        size_t len = (size_t)sqlite3_column_bytes(s, 1);
        double x = (double)e->last_batches, y = 0;
        int hy = dt__row_number(body, len, "metrics", e->name, &y),
            hx = by_batches ? 1 : dt__row_number(body, len, e->x, NULL, &x);
        bool has = hx == 1 && hy == 1;
        if ((hx < 0 || hy < 0) && hx != 0 && hy != 0)
            status = row_point_sql(st, body, ypath, xpath, &has, &x, &y);
        if (status == DT_OK && has) ok = dt__series_push(e, x, y);
    }
    if (!ok)
        status = dt_error(DT_ERR_OOM, "store %s: out of memory reading a series", st->path);
    else if (status == DT_OK && rc != SQLITE_DONE)
        status = dt__store_sql_error(st, rc, "reading a metric series");
    dt__store_done(s);
    return status;
}

dt_status dt_store_metric_series_text(dt_store *st, int64_t exp_id, int64_t trial_id,
                                      const char *kind, const char *name, const char *x,
                                      int64_t points, dt_series_format format, char **out,
                                      size_t *len) {
    bool json = format == DT_SERIES_JSON;
    *out = NULL;
    *len = 0;
    if (!dt__store_in_list(kind, METRIC_KINDS))
        return dt_error(DT_ERR_INVALID,
                        "unknown metric kind \"%s\"; hint: training, validation or profiler", kind);
    if (strcmp(x, "batches") && strcmp(x, "epochs") && strcmp(x, "records"))
        return dt_error(DT_ERR_INVALID, "x must be batches, epochs or records, not \"%s\"", x);
    if (name && (!*name || strpbrk(name, "\"\\")))
        return dt_error(DT_ERR_INVALID,
                        "metric name \"%s\" cannot be charted; hint: pass name=METRIC", name);
    if (points < 2 || points > 100000)
        return dt_error(DT_ERR_INVALID, "points must be 2..100000, not %lld", (long long)points);
    dt__buf t = {0};
    if (!name) {
        dt__buf_put(&t, "[]", json ? 2 : 0);
        if (!t.p) t.p = calloc(1, 1); /* (binary: no series, no bytes) */
        if (!t.p) return dt_error(DT_ERR_OOM, "out of memory");
        *out = t.p;
        *len = t.len;
        return DT_OK;
    }
    char path[512], xpath[16];
    snprintf(path, sizeof path, "$.metrics.\"%s\"", name);
    snprintf(xpath, sizeof xpath, "$.%s", x);
    dt__store_lock(st);
    int64_t *trials = NULL;
    int n_trials = 0;
    dt_status status = dt__store_need(st, OF_EXP(exp_id));
    if (status == DT_OK) status = trial_ids(st, exp_id, trial_id, &trials, &n_trials);
    dt__buf_put(&t, "[", json);
    if (status == DT_OK && t.oom)
        status = dt_error(DT_ERR_OOM, "store %s", st->path);
    /* each trial's series from the cache, extended with the rows stored since */
    bool first = true;
    for (int i = 0; status == DT_OK && i < n_trials; i++) {
        dt__series *e = dt__series_cache_get(st->series, trials[i], kind, name, x);
        if (!e) status = dt_error(DT_ERR_OOM, "store %s: out of memory reading a series", st->path);
        bool packed = false; /* x = batches: from the packed series when the kind is packed */
        if (status == DT_OK && !strcmp(x, "batches")) {
            int rc = dt__packed_read(st->db, e, &packed);
            if (rc != SQLITE_OK) status = dt__store_sql_error(st, rc, "reading a packed series");
        }
        if (status == DT_OK && !packed) status = series_extend(st, e, path, xpath);
        if (status != DT_OK || e->rows == 0) continue;
        if (json && !first) dt__buf_put(&t, ",", 1);
        if (json ? !dt__series_text(e, points, &t) : !dt__series_f64(e, points, &t))
            status = dt_error(DT_ERR_OOM, "store %s: out of memory reading a series", st->path);
        first = false;
    }
    dt__buf_put(&t, "]", json);
    if (status == DT_OK && !t.p && !t.oom) t.p = calloc(1, 1); /* (binary: no series) */
    if (status == DT_OK && (t.oom || !t.p)) status = dt_error(DT_ERR_OOM, "store %s", st->path);
    free(trials);
    dt__series_cache_trim(st->series);
    dt__store_unlock(st);
    if (status != DT_OK) {
        free(t.p);
        return status;
    }
    *out = t.p;
    *len = t.len;
    return DT_OK;
}

dt_status dt_store_metric_series(dt_store *st, int64_t exp_id, int64_t trial_id, const char *kind,
                                 const char *name, const char *x, int64_t points, json_t **out) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    dt_status status =
        dt_store_metric_series_text(st, exp_id, trial_id, kind, name, x, points, DT_SERIES_JSON,
                                    &text, &len);
    if (status != DT_OK) return status;
    *out = json_loadb(text, len, 0, NULL);
    free(text);
    return *out ? DT_OK
                : dt_error(DT_ERR_OOM, "store %s: out of memory reading a series", st->path);
}

dt_status dt_store_metric_names(dt_store *st, int64_t exp_id, int64_t trial_id, const char *kind,
                                json_t **out) {
    *out = NULL;
    if (!dt__store_in_list(kind, METRIC_KINDS))
        return dt_error(DT_ERR_INVALID,
                        "unknown metric kind \"%s\"; hint: training, validation or profiler", kind);
    dt__store_lock(st);
    sqlite3_stmt *s;
    dt_status status = dt__store_need(st, OF_EXP(exp_id));
    if (status == DT_OK)
        status = dt__store_prep(
            st,
            "SELECT DISTINCT j.key FROM trials t, json_each((SELECT m.body FROM metrics m"
            " WHERE m.trial_id = t.id AND m.kind = ?2 ORDER BY m.batches DESC LIMIT 1),"
            " '$.metrics') j WHERE t.experiment_id = ?1 AND (?3 = 0 OR t.id = ?3)"
            " ORDER BY j.key",
            &s);
    json_t *names = json_array();
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, exp_id);
        sqlite3_bind_text(s, 2, kind, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, trial_id);
        int rc;
        bool ok = names != NULL;
        while (ok && (rc = sqlite3_step(s)) == SQLITE_ROW)
            ok =
                !json_array_append_new(names, json_string((const char *)sqlite3_column_text(s, 0)));
        if (!ok)
            status = dt_error(DT_ERR_OOM, "store %s: out of memory", st->path);
        else if (rc != SQLITE_DONE)
            status = dt__store_sql_error(st, rc, "reading metric names");
        dt__store_done(s);
    }
    dt__store_unlock(st);
    if (status == DT_OK)
        *out = names;
    else
        json_decref(names);
    return status;
}
