/*
 * store_modeldef.c — the model_defs table (store_schema.c version 4): an experiment's model
 * definition as one tar, put and got by experiment id (store_modeldef.h), and the name of the
 * config file it was created from (store_schema.c version 5). Each call runs in
 * one store group (dt_store_begin), which also holds the store's lock over the raw SQL.
 */
#include "master/store_impl.h"
#include "master/store_modeldef.h"

#include <stdlib.h>
#include <string.h>

/* Prepare `sql` inside the open group; DT_ERR_IO naming `what` when SQLite refuses. */
static dt_status prepare(dt_store *st, const char *sql, const char *what, sqlite3_stmt **s) {
    sqlite3 *db = dt__store_db(st);
    int rc = sqlite3_prepare_v2(db, sql, -1, s, NULL);
    return rc == SQLITE_OK ? DT_OK : dt__store_sqlite_error(db, rc, "(the store)", what);
}

/* One write in its own group: `sql` with ?1 the experiment's id and ?2 the value (len bytes,
 * text or a blob). DT_ERR_INVALID when it changed no row (no such experiment). */
static dt_status write_one(dt_store *st, const char *sql, const char *what, int64_t exp_id,
                           const void *v, size_t len, bool text) {
    dt_status status = dt_store_begin(st);
    if (status != DT_OK) return status;
    sqlite3_stmt *s = NULL;
    status = prepare(st, sql, what, &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, exp_id);
        if (text)
            sqlite3_bind_text64(s, 2, v, len, SQLITE_STATIC, SQLITE_UTF8);
        else
            sqlite3_bind_blob64(s, 2, v ? v : "", len, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc != SQLITE_DONE)
            status = dt__store_sqlite_error(dt__store_db(st), rc, "(the store)", what);
        else if (sqlite3_changes(dt__store_db(st)) == 0)
            status = dt_error(DT_ERR_INVALID, "no experiment %lld", (long long)exp_id);
    }
    sqlite3_finalize(s);
    if (status != DT_OK) {
        DT_KEEP_ERROR(dt_store_rollback(st));
        return status;
    }
    return dt_store_commit(st);
}

dt_status dt_store_modeldef_put(dt_store *st, int64_t exp_id, const void *tar, size_t len) {
    if (!tar && len) return dt_error(DT_ERR_INVALID, "model definition: NULL tar");
    return write_one(st,
                     "INSERT OR REPLACE INTO model_defs (experiment_id, tar, time) "
                     "SELECT id, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM experiments "
                     "WHERE id = ?1",
                     "keeping a model definition", exp_id, tar, len, false);
}

dt_status dt_store_modeldef_get(dt_store *st, int64_t exp_id, void **tar, size_t *len) {
    *tar = NULL;
    *len = 0;
    dt_status status = dt_store_begin(st);
    if (status != DT_OK) return status;
    sqlite3_stmt *s = NULL;
    status = prepare(st, "SELECT tar FROM model_defs WHERE experiment_id = ?1",
                     "reading a model definition", &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, exp_id);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            size_t n = (size_t)sqlite3_column_bytes(s, 0);
            const void *b = sqlite3_column_blob(s, 0);
            if (!(*tar = malloc(n ? n : 1)))
                status = dt_error(DT_ERR_OOM, "out of memory reading a model definition");
            else if (n)
                memcpy(*tar, b, n);
            *len = n;
        } else if (rc == SQLITE_DONE) {
            status = dt_error(DT_ERR_INVALID,
                              "experiment %lld has no stored model definition; hint: it was "
                              "created from a directory on the master's machine",
                              (long long)exp_id);
        } else {
            status = dt__store_sqlite_error(dt__store_db(st), rc, "(the store)",
                                            "reading a model definition");
        }
    }
    sqlite3_finalize(s);
    DT_KEEP_ERROR(dt_store_rollback(st));
    return status;
}

dt_status dt_store_exp_set_config_name(dt_store *st, int64_t exp_id, const char *name) {
    return write_one(st, "UPDATE experiments SET config_name = ?2 WHERE id = ?1",
                     "recording a config file's name", exp_id, name, strlen(name), true);
}
