/*
 * store.c — the experiment store (store.h): one SQLite connection behind one lock.
 *
 * The connection runs in WAL mode with synchronous=NORMAL: a committed transaction is in the
 * WAL file before the commit returns, so it survives the process being killed at any instant
 * (only a power loss can lose the last few commits, and the database stays consistent even
 * then). FULL would add an fsync per commit: bench_store_ingest measured about 120 000 rows/s
 * with NORMAL and 70 000 with FULL in batches of 1 000, and the master's batches are smaller.
 * Foreign keys are on (deleting an experiment cascades to everything of it) and a busy timeout
 * covers a second process reading the file.
 *
 * Threads: the master's HTTP thread and its scheduler thread share one store. A recursive
 * mutex is held for each call, and from dt_store_begin until dt_store_commit/rollback by the
 * thread that began, so a group of writes is never interleaved with another thread's.
 *
 * Every write runs under a SAVEPOINT: alone it is its own transaction, inside a group it is
 * undone on failure without ending the group. Statements are prepared once, kept in a small
 * cache keyed by their SQL text, and reset after each use.
 *
 * Rows are returned as the REST API shows them (docs/api.md): JSON members are parsed back,
 * times are ISO 8601 UTC strings, a metric row is the object the trial reported (its searcher
 * metric is also kept in a column, for the best-metric queries). Each kind of row is a table of
 * its columns (member name and JSON type) read by one row_json; every statement gets its values
 * through one bound-value list (ARGS), and a row that must exist is checked in one place
 * (first_row, need, write_stmt), so "no <thing> <id>" reads the same everywhere: those helpers
 * are store_sql.c's (store_impl.h). Each kind of row has a file of its own: store_exps.c
 * (with the searcher's snapshot), store_trials.c, store_metrics.c (with the charts' series),
 * store_checkpoints.c and store_logs.c; this file opens, checks and closes the store and holds
 * its groups.
 */
#define _GNU_SOURCE /* PTHREAD_MUTEX_RECURSIVE */
#include "master/store_impl.h"
#include "master/series_cache.h"
#include "base/base_impl.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The chart series cache's budget: 16 bytes a point, 64 MB (100 trials x 10 000 points of two
 * metrics and x axes) */
#define SERIES_CACHE_POINTS ((size_t)4 << 20)

sqlite3 *dt__store_db(dt_store *st) {
    return st ? st->db : NULL;
}

uint64_t dt_store_metrics_generation(dt_store *st) {
    dt__store_lock(st);
    uint64_t g = st->metrics_gen;
    dt__store_unlock(st);
    return g;
}

/* ---- open / close ---- */

static dt_status make_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return DT_OK;
    size_t n = (size_t)(slash - path);
    char *dir = malloc(n + 1);
    if (!dir) return dt_error(DT_ERR_OOM, "store %s", path);
    memcpy(dir, path, n);
    dir[n] = 0;
    char failed[PATH_MAX];
    int err = dt__mkdir_p(dir, failed, sizeof failed);
    free(dir);
    if (err)
        return dt_error(DT_ERR_IO,
                        "store %s: cannot make its directory %s: %s; hint: set DTRAIN_HOME to a "
                        "writable directory",
                        path, failed, strerror(err));
    return DT_OK;
}

void dt_store_close(dt_store *st) {
    if (!st) return;
    for (int i = 0; i < st->cache_cap; i++) {
        sqlite3_finalize(st->cache[i].stmt);
        free(st->cache[i].sql);
    }
    free(st->cache);
    dt__series_cache_free(st->series);
    sqlite3_close(st->db); /* a group left open is rolled back */
    pthread_mutex_destroy(&st->mu);
    free(st->path);
    free(st);
}

dt_status dt__store_open_at_version(const char *path, int version, dt_store **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store_open: NULL out");
    *out = NULL;
    if (!path || !*path) return dt_error(DT_ERR_INVALID, "store_open: empty path");
    dt_status status = make_parent_dir(path);
    if (status != DT_OK) return status;
    dt_store *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path)) ||
        !(st->series = dt__series_cache_new(SERIES_CACHE_POINTS))) {
        if (st) free(st->path);
        free(st);
        return dt_error(DT_ERR_OOM, "store %s", path);
    }
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&st->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    /* our mutex serialises every use of the connection: SQLite needs no lock of its own */
    int rc = sqlite3_open_v2(
        path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        status = dt__store_sql_error(st, rc, "cannot open it");
        dt_store_close(st);
        return status;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, 10000);
    /* the version is checked before anything is written: a foreign or newer file stays as it
     * is */
    int v = 0;
    status = dt__store_schema_probe(st->db, path, &v);
    if (status == DT_OK) status = dt__store_exec(st, "PRAGMA journal_mode = WAL");
    if (status == DT_OK) status = dt__store_exec(st, "PRAGMA synchronous = NORMAL");
    if (status == DT_OK) status = dt__store_exec(st, "PRAGMA foreign_keys = ON");
    if (status == DT_OK && v < version) status = dt__store_schema_migrate(st->db, path, version);
    if (status != DT_OK) {
        DT_KEEP_ERROR(dt_store_close(st));
        return status;
    }
    *out = st;
    return DT_OK;
}

dt_status dt_store_open(const char *path, dt_store **out) {
    return dt__store_open_at_version(path, dt_store_schema_version(), out);
}

dt_status dt_store_check(dt_store *st) {
    dt__store_lock(st);
    sqlite3_stmt *s;
    dt_status status = dt__store_first_row(st, "PRAGMA integrity_check", "integrity check", NULL,
                                           NULL, NULL, 0, &s);
    if (s && strcmp((const char *)sqlite3_column_text(s, 0), "ok"))
        status = dt_error(DT_ERR_FORMAT,
                          "store %s fails its integrity check: %s; hint: restore it from a "
                          "backup or move it aside",
                          st->path, (const char *)sqlite3_column_text(s, 0));
    dt__store_done(s);
    dt__store_unlock(st);
    return status;
}

/* ---- groups ---- */

dt_status dt_store_begin(dt_store *st) {
    dt__store_lock(st);
    if (st->in_group) {
        dt__store_unlock(st);
        return dt_error(DT_ERR_STATE,
                        "store %s: dt_store_begin inside a group (nesting is not "
                        "supported)",
                        st->path);
    }
    dt_status status = dt__store_exec(st, "BEGIN IMMEDIATE");
    if (status != DT_OK) {
        dt__store_unlock(st);
        return status;
    }
    st->in_group = true; /* the lock stays held until commit / rollback */
    return DT_OK;
}

dt_status dt_store_commit(dt_store *st) {
    dt__store_lock(st);
    if (!st->in_group) {
        dt__store_unlock(st);
        return dt_error(DT_ERR_STATE, "store %s: dt_store_commit without dt_store_begin", st->path);
    }
    dt_status status = dt__store_exec(st, "COMMIT");
    if (status != DT_OK) {
        DT_KEEP_ERROR(dt__store_exec(st, "ROLLBACK"));
        dt__store_metrics_changed(st);
    }
    st->in_group = false;
    dt__store_unlock(st);
    dt__store_unlock(st); /* the group's */
    return status;
}

void dt_store_rollback(dt_store *st) {
    dt__store_lock(st);
    if (st->in_group) {
        DT_KEEP_ERROR(dt__store_exec(st, "ROLLBACK"));
        dt__store_metrics_changed(st);
        st->in_group = false;
        dt__store_unlock(st); /* the group's */
    }
    dt__store_unlock(st);
}
