/*
 * store_sql.c — the lock and the statements every table's file of the store runs through
 * (store_impl.h): the statement cache keyed by SQL text, one bound-value list (ARGS), rows that
 * must exist (first_row, need), the savepoint write path (write_stmt) and the locked read path
 * turning rows into the API's JSON (select_json, one row_json over a table of columns).
 */
#include "master/store_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dt__store_lock(dt_store *st) {
    pthread_mutex_lock(&st->mu);
}
void dt__store_unlock(dt_store *st) {
    pthread_mutex_unlock(&st->mu);
}

void dt__store_metrics_changed(dt_store *st) {
    dt__series_cache_clear(st->series);
    st->metrics_gen++;
}

dt_status dt__store_sql_error(dt_store *st, int rc, const char *what) {
    return dt__store_sqlite_error(st->db, rc, st->path, what);
}

/* ---- the statement cache ---- */

static uint64_t hash_sql(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static stmt_slot *cache_find(stmt_slot *slots, int cap, const char *sql) {
    uint64_t h = hash_sql(sql);
    for (int i = 0; i < cap; i++) {
        stmt_slot *e = &slots[(h + (uint64_t)i) & (uint64_t)(cap - 1)];
        if (!e->sql || !strcmp(e->sql, sql)) return e;
    }
    return NULL; /* full: never, the table grows at half load */
}

static dt_status cache_grow(dt_store *st) {
    int cap = st->cache_cap ? st->cache_cap * 2 : 64;
    stmt_slot *slots = calloc((size_t)cap, sizeof *slots);
    if (!slots) return dt_error(DT_ERR_OOM, "store %s: statement cache", st->path);
    for (int i = 0; i < st->cache_cap; i++)
        if (st->cache[i].sql) *cache_find(slots, cap, st->cache[i].sql) = st->cache[i];
    free(st->cache);
    st->cache = slots;
    st->cache_cap = cap;
    return DT_OK;
}

dt_status dt__store_prep(dt_store *st, const char *sql, sqlite3_stmt **out) {
    *out = NULL;
    if (2 * (st->cache_n + 1) > st->cache_cap && cache_grow(st) != DT_OK) return DT_ERR_OOM;
    stmt_slot *e = cache_find(st->cache, st->cache_cap, sql);
    if (!e->sql) {
        sqlite3_stmt *s = NULL;
        int rc = sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL);
        if (rc != SQLITE_OK) return dt__store_sql_error(st, rc, "preparing a statement");
        e->sql = strdup(sql);
        if (!e->sql) {
            sqlite3_finalize(s);
            return dt_error(DT_ERR_OOM, "store %s: statement cache", st->path);
        }
        e->stmt = s;
        st->cache_n++;
    }
    *out = e->stmt;
    return DT_OK;
}

void dt__store_done(sqlite3_stmt *s) {
    if (!s) return;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

/* ---- statements with bound values ---- */

/* Bind v[0..n) to ?1..?n of `s`. On error `s` is reset (done) and the error returned. */
static dt_status bind_args(dt_store *st, sqlite3_stmt *s, const bval *v, int n) {
    int rc = SQLITE_OK;
    for (int i = 0; rc == SQLITE_OK && i < n; i++) {
        switch (v[i].kind) {
        case B_NULL:
            rc = sqlite3_bind_null(s, i + 1);
            break;
        case B_INT:
            rc = sqlite3_bind_int64(s, i + 1, v[i].i);
            break;
        case B_REAL:
            rc = sqlite3_bind_double(s, i + 1, v[i].r);
            break;
        case B_TEXT:
            rc = sqlite3_bind_text(s, i + 1, v[i].t, -1, SQLITE_STATIC);
            break;
        case B_JSON: {
            char *text = json_dumps(v[i].j, JSON_COMPACT | JSON_ENCODE_ANY);
            if (!text) {
                dt__store_done(s);
                return dt_error(DT_ERR_OOM, "store %s: encoding JSON", st->path);
            }
            rc = sqlite3_bind_text(s, i + 1, text, -1, SQLITE_TRANSIENT);
            free(text);
            break;
        }
        }
    }
    if (rc == SQLITE_OK) return DT_OK;
    dt_status status = dt__store_sql_error(st, rc, "binding a value");
    dt__store_done(s);
    return status;
}

dt_status dt__store_prep_args(dt_store *st, const char *sql, const bval *v, int n,
                              sqlite3_stmt **out) {
    dt_status status = dt__store_prep(st, sql, out);
    if (status == DT_OK) status = bind_args(st, *out, v, n);
    if (status != DT_OK) *out = NULL;
    return status;
}

dt_status dt__store_run(dt_store *st, sqlite3_stmt *s, const char *doing) {
    int rc = sqlite3_step(s);
    while (rc == SQLITE_ROW) rc = sqlite3_step(s);
    dt_status status = rc == SQLITE_DONE ? DT_OK : dt__store_sql_error(st, rc, doing);
    dt__store_done(s);
    return status;
}

dt_status dt__store_exec_args(dt_store *st, const char *sql, const char *doing, const bval *v,
                              int n) {
    sqlite3_stmt *s;
    dt_status status = dt__store_prep_args(st, sql, v, n, &s);
    return status == DT_OK ? dt__store_run(st, s, doing ? doing : sql) : status;
}

dt_status dt__store_exec(dt_store *st, const char *sql) {
    return dt__store_exec_args(st, sql, NULL, NULL, 0);
}

/* ---- rows that must exist ---- */

dt_status dt__store_no_row(const char *what, const char *key) {
    return dt_error(DT_ERR_INVALID, "no %s %s; hint: list them to see which exist", what, key);
}

const char *dt__store_id_key(char *buf, size_t size, int64_t id) {
    snprintf(buf, size, "with id %lld", (long long)id);
    return buf;
}

dt_status dt__store_first_row(dt_store *st, const char *sql, const char *doing, const char *what,
                              const char *key, const bval *v, int n, sqlite3_stmt **row) {
    *row = NULL;
    sqlite3_stmt *s;
    dt_status status = dt__store_prep_args(st, sql, v, n, &s);
    if (status != DT_OK) return status;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *row = s;
        return DT_OK;
    }
    status = rc != SQLITE_DONE ? dt__store_sql_error(st, rc, doing)
             : what            ? dt__store_no_row(what, key)
                               : DT_OK;
    dt__store_done(s);
    return status;
}

dt_status dt__store_need(dt_store *st, const owner *o) {
    sqlite3_stmt *s;
    dt_status status = dt__store_first_row(st,
                                           o->trial ? "SELECT 1 FROM trials WHERE id = ?"
                                                    : "SELECT 1 FROM experiments WHERE id = ?",
                                           "looking up a row", o->trial ? "trial" : "experiment",
                                           ID_KEY(o->id), ARGS(V_INT(o->id)), &s);
    dt__store_done(s);
    return status;
}

/* ---- writes: a savepoint each ---- */

dt_status dt__store_write_begin(dt_store *st) {
    dt__store_lock(st);
    dt_status status = dt__store_exec(st, "SAVEPOINT w");
    if (status != DT_OK) dt__store_unlock(st);
    return status;
}

dt_status dt__store_write_end(dt_store *st, dt_status status) {
    if (status == DT_OK) status = dt__store_exec(st, "RELEASE w");
    if (status != DT_OK) {
        DT_KEEP_ERROR(dt__store_exec(st, "ROLLBACK TO w"); dt__store_exec(st, "RELEASE w"));
        dt__store_metrics_changed(st); /* the cache may hold rows read before the undo */
    }
    dt__store_unlock(st);
    return status;
}

dt_status dt__store_write_stmt(dt_store *st, const owner *o, const char *sql, const char *doing,
                               const char *what, const char *key, int64_t *id, const bval *v,
                               int n) {
    dt_status status = dt__store_write_begin(st);
    if (status != DT_OK) return status;
    if (o) status = dt__store_need(st, o);
    if (status == DT_OK) status = dt__store_exec_args(st, sql, doing, v, n);
    if (status == DT_OK && what && sqlite3_changes(st->db) == 0)
        status = dt__store_no_row(what, key);
    if (status == DT_OK && id) *id = sqlite3_last_insert_rowid(st->db);
    return dt__store_write_end(st, status);
}

/* ---- rows as JSON ---- */

static json_t *col_value(sqlite3_stmt *s, int i, col_type type) {
    const char *t;
    json_t *v;
    switch (type) {
    case COL_INT:
        return json_integer((json_int_t)sqlite3_column_int64(s, i));
    case COL_REAL:
        if (sqlite3_column_type(s, i) == SQLITE_NULL) return json_null();
        return json_real(sqlite3_column_double(s, i));
    case COL_JSON:
        t = (const char *)sqlite3_column_text(s, i);
        v = t ? json_loads(t, JSON_DECODE_ANY, NULL) : NULL;
        return v ? v : json_null();
    case COL_BOOL:
        return json_boolean(sqlite3_column_int(s, i));
    case COL_TEXT:
        break;
    }
    t = (const char *)sqlite3_column_text(s, i);
    return t ? json_string(t) : json_null();
}

/* The current row of `s` as an object of kind `k`; NULL when out of memory. */
static json_t *row_json(sqlite3_stmt *s, const row_kind *k) {
    if (!k->cols) {
        const char *t = (const char *)sqlite3_column_text(s, 0);
        return t ? json_loads(t, 0, NULL) : NULL;
    }
    json_t *o = json_object();
    for (int i = 0; o && i < k->n; i++) {
        if (json_object_set_new(o, k->cols[i].name, col_value(s, i, k->cols[i].type))) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

/* Run the bound SELECT `s` and turn its rows into objects of kind `k`: an array of them
 * (*out), or with `key` the single row (DT_ERR_INVALID naming the kind and `key` when there is
 * none). */
static dt_status select_rows(dt_store *st, sqlite3_stmt *s, const row_kind *k, const char *key,
                             json_t **out) {
    json_t *arr = json_array();
    dt_status status = arr ? DT_OK : dt_error(DT_ERR_OOM, "store %s", st->path);
    int rc;
    while (status == DT_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *row = row_json(s, k);
        if (!row || json_array_append_new(arr, row))
            status = dt_error(DT_ERR_OOM, "store %s: building a %s", st->path, k->what);
    }
    if (status == DT_OK && rc != SQLITE_DONE) status = dt__store_sql_error(st, rc, "reading rows");
    dt__store_done(s);
    if (status == DT_OK && key && json_array_size(arr) == 0)
        status = dt__store_no_row(k->what, key);
    if (status != DT_OK) {
        json_decref(arr);
        return status;
    }
    *out = key ? json_incref(json_array_get(arr, 0)) : arr;
    if (key) json_decref(arr);
    return DT_OK;
}

dt_status dt__store_select_json(dt_store *st, const row_kind *k, const owner *o, const char *key,
                                const char *sql, const bval *v, int n, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    dt__store_lock(st);
    dt_status status = o ? dt__store_need(st, o) : DT_OK;
    sqlite3_stmt *s;
    if (status == DT_OK) status = dt__store_prep_args(st, sql, v, n, &s);
    if (status == DT_OK) status = select_rows(st, s, k, key, out);
    dt__store_unlock(st);
    return status;
}

/* ---- states and lists ---- */

bool dt__store_in_list(const char *s, const char *const *list) {
    for (; s && *list; list++)
        if (!strcmp(s, *list)) return true;
    return false;
}

dt_status dt__store_bad_state(const char *what, const char *state) {
    return dt_error(DT_ERR_INVALID, "store: \"%s\" is not a%s %s state", state ? state : "(null)",
                    what[0] == 'e' ? "n" : "", what);
}

dt_status dt__store_read_ids(dt_store *st, sqlite3_stmt *s, const char *doing, int64_t **ids,
                             int *count) {
    int64_t *v = NULL;
    int k = 0, cap = 0, rc;
    dt_status status = DT_OK;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *w = realloc(v, (size_t)cap * sizeof *v);
            if (!w) {
                status = dt_error(DT_ERR_OOM, "store %s", st->path);
                break;
            }
            v = w;
        }
        v[k++] = sqlite3_column_int64(s, 0);
    }
    if (status == DT_OK && rc != SQLITE_DONE) status = dt__store_sql_error(st, rc, doing);
    dt__store_done(s);
    if (status != DT_OK) free(v);
    *ids = status == DT_OK ? v : NULL;
    *count = status == DT_OK ? k : 0;
    return status;
}
