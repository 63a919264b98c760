/*
 * series_packed.c — chart series kept packed in the store (table metric_series, schema 8): per
 * trial, kind and metric name, the points (batches, value) as native doubles, 16 bytes a point,
 * in chunks of up to PACK_CHUNK points, written by the metric writes in the same transaction.
 * A first chart reads these blobs instead of parsing every metric row's JSON.
 *
 * metric_series_ok holds, per (trial, kind), the last batch packed: a kind is packed only when
 * its series were started with the trial's first rows of that kind and every row since came
 * after the last one. A row at or before it (a rewrite after a restart from a checkpoint) drops
 * the kind's packed series, and readers go back to the rows (series_extend in store_metrics.c); so do
 * the trials of a store written before schema 8.
 */
#include "master/series_cache.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PACK_CHUNK 1024 /* points a chunk: 16 KB */

typedef struct pt {
    double b, v;
} pt;

static int step_done(sqlite3_stmt *s) {
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* sql with ?1 = trial, ?2 = kind, run; with n, its first row's first column into *n (0 and
 * SQLITE_DONE when there is no row). */
static int exec_tk(sqlite3 *db, const char *sql, int64_t trial, const char *kind, int64_t *n) {
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    if (rc != SQLITE_OK) return rc;
    sqlite3_bind_int64(s, 1, trial);
    sqlite3_bind_text(s, 2, kind, -1, SQLITE_STATIC);
    if (n) {
        rc = sqlite3_step(s);
        *n = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
        sqlite3_finalize(s);
        return rc == SQLITE_ROW ? SQLITE_OK : rc;
    }
    return step_done(s);
}

/* The last batch packed for (trial, kind) into *last; SQLITE_DONE when the kind is not packed. */
static int packed_last(sqlite3 *db, int64_t trial, const char *kind, int64_t *last) {
    return exec_tk(db,
                   "SELECT last_batches FROM metric_series_ok"
                   " WHERE trial_id = ?1 AND kind = ?2",
                   trial, kind, last);
}

/* Append pts to the chunks of (trial, kind, name): the last chunk filled up, then new ones. */
static int append(sqlite3 *db, int64_t trial, const char *kind, const char *name, const pt *pts,
                  size_t n) {
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT chunk, points FROM metric_series WHERE trial_id = ?1"
                                " AND kind = ?2 AND name = ?3 ORDER BY chunk DESC LIMIT 1",
                                -1, &s, NULL);
    if (rc != SQLITE_OK) return rc;
    sqlite3_bind_int64(s, 1, trial);
    sqlite3_bind_text(s, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_STATIC);
    pt *buf = malloc(PACK_CHUNK * sizeof *buf);
    int64_t chunk = 0;
    size_t have = 0;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW && buf) {
        chunk = sqlite3_column_int64(s, 0);
        have = (size_t)sqlite3_column_bytes(s, 1) / sizeof *buf;
        if (have > PACK_CHUNK) have = PACK_CHUNK;
        if (have) memcpy(buf, sqlite3_column_blob(s, 1), have * sizeof *buf);
        if (have == PACK_CHUNK) chunk++, have = 0;
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_finalize(s);
    s = NULL;
    if (!buf) return SQLITE_NOMEM;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db,
                                "INSERT OR REPLACE INTO metric_series (trial_id, kind, name, chunk,"
                                " last_batches, points) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                                -1, &s, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < n;) {
        while (i < n && have < PACK_CHUNK) buf[have++] = pts[i++];
        sqlite3_bind_int64(s, 1, trial);
        sqlite3_bind_text(s, 2, kind, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, chunk);
        sqlite3_bind_int64(s, 5, (int64_t)buf[have - 1].b);
        sqlite3_bind_blob(s, 6, buf, (int)(have * sizeof *buf), SQLITE_STATIC);
        rc = sqlite3_step(s) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
        sqlite3_reset(s);
        if (have == PACK_CHUNK) chunk++, have = 0;
    }
    sqlite3_finalize(s);
    free(buf);
    return rc;
}

/* The rows of `kind` (indices idx[0..n)), batches increasing: packed when the kind is. */
static int pack_kind(sqlite3 *db, int64_t trial, const char *kind, const json_t *rows,
                     const size_t *idx, size_t n) {
    bool rising = true;
    for (size_t i = 1; i < n; i++)
        rising &= json_integer_value(json_object_get(json_array_get(rows, idx[i]), "batches")) >
                  json_integer_value(json_object_get(json_array_get(rows, idx[i - 1]), "batches"));
    int64_t first = json_integer_value(json_object_get(json_array_get(rows, idx[0]), "batches"));
    int64_t last = INT64_MIN, stored = 0;
    int rc = packed_last(db, trial, kind, &last);
    if (rc == SQLITE_DONE) { /* not packed: start only with the trial's first rows of the kind */
        rc = exec_tk(db, "SELECT count(*) FROM metrics WHERE trial_id = ?1 AND kind = ?2", trial,
                     kind, &stored);
        if (rc != SQLITE_OK || !rising || stored != (int64_t)n) return rc;
        last = INT64_MIN;
    } else if (rc != SQLITE_OK) {
        return rc;
    } else if (!rising || first <= last) { /* a rewrite: back to reading the rows */
        rc = exec_tk(db, "DELETE FROM metric_series WHERE trial_id = ?1 AND kind = ?2", trial, kind,
                     NULL);
        if (rc == SQLITE_OK)
            rc = exec_tk(db, "DELETE FROM metric_series_ok WHERE trial_id = ?1 AND kind = ?2",
                         trial, kind, NULL);
        return rc;
    }
    pt *pts = malloc(n * sizeof *pts);
    json_t *done = json_object(); /* the names packed */
    if (!pts || !done) rc = SQLITE_NOMEM;
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        const char *name;
        json_t *v;
        json_object_foreach(json_object_get(json_array_get(rows, idx[i]), "metrics"), name, v) {
            if (rc != SQLITE_OK || json_object_get(done, name)) continue;
            json_object_set(done, name, json_true());
            size_t m = 0;
            for (size_t j = i; j < n; j++) {
                const json_t *r = json_array_get(rows, idx[j]);
                const json_t *y = json_object_get(json_object_get(r, "metrics"), name);
                if (json_is_number(y))
                    pts[m++] = (pt){(double)json_integer_value(json_object_get(r, "batches")),
                                    json_number_value(y)};
            }
            if (m) rc = append(db, trial, kind, name, pts, m);
        }
    }
    free(pts);
    json_decref(done);
    int64_t end = json_integer_value(json_object_get(json_array_get(rows, idx[n - 1]), "batches"));
    sqlite3_stmt *s;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db,
                                "INSERT OR REPLACE INTO metric_series_ok (trial_id, kind,"
                                " last_batches) VALUES (?1, ?2, ?3)",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, trial);
        sqlite3_bind_text(s, 2, kind, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, end);
        rc = step_done(s);
    }
    return rc;
}

int dt__packed_append(sqlite3 *db, int64_t trial_id, const json_t *rows) {
    static const char *const kinds[] = {"training", "validation", "profiler"};
    /* a store opened at an older schema (tests build those) has no packed series */
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE name = 'metric_series_ok'",
                                -1, &s, NULL);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW) return rc == SQLITE_DONE ? SQLITE_OK : rc;
    rc = SQLITE_OK;
    size_t n = json_array_size(rows);
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    if (!idx) return SQLITE_NOMEM;
    for (int k = 0; rc == SQLITE_OK && k < 3; k++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(json_string_value(json_object_get(json_array_get(rows, i), "kind")),
                        kinds[k]))
                idx[m++] = i;
        if (m) rc = pack_kind(db, trial_id, kinds[k], rows, idx, m);
    }
    free(idx);
    return rc;
}

int dt__packed_read(sqlite3 *db, dt__series *e, bool *packed) {
    *packed = false;
    int64_t last = 0;
    int rc = packed_last(db, e->trial_id, e->kind, &last);
    if (rc == SQLITE_DONE) return SQLITE_OK;
    if (rc != SQLITE_OK) return rc;
    sqlite3_stmt *s;
    rc = sqlite3_prepare_v2(db,
                            "SELECT points FROM metric_series WHERE trial_id = ?1 AND kind = ?2"
                            " AND name = ?3 AND last_batches > ?4 ORDER BY chunk",
                            -1, &s, NULL);
    if (rc != SQLITE_OK) return rc;
    sqlite3_bind_int64(s, 1, e->trial_id);
    sqlite3_bind_text(s, 2, e->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, e->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, e->last_batches);
    bool ok = true;
    while (ok && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        const unsigned char *p = sqlite3_column_blob(s, 0);
        size_t n = (size_t)sqlite3_column_bytes(s, 0) / sizeof(pt);
        for (size_t i = 0; ok && i < n; i++) {
            pt q;
            memcpy(&q, p + i * sizeof q, sizeof q);
            if (q.b > (double)e->last_batches) ok = dt__series_push(e, q.b, q.v);
        }
    }
    sqlite3_finalize(s);
    if (!ok) return SQLITE_NOMEM;
    if (rc != SQLITE_DONE) return rc;
    if (last > e->last_batches) e->last_batches = last, e->rows++;
    *packed = true;
    return SQLITE_OK;
}
