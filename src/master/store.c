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
 * (first_row, need, write_stmt), so "no <thing> <id>" reads the same everywhere.
 */
#define _GNU_SOURCE /* PTHREAD_MUTEX_RECURSIVE */
#include "master/store_impl.h"
#include "master/states.h"
#include "master/series_cache.h"
#include "base/base_impl.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOW "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

typedef struct stmt_slot {
    char *sql; /* NULL: free slot */
    sqlite3_stmt *stmt;
} stmt_slot;

struct dt_store {
    sqlite3 *db;
    char *path;
    pthread_mutex_t mu; /* recursive: public calls nest (a write checks a row first) */
    bool in_group;      /* between dt_store_begin and commit / rollback (mu held meanwhile) */
    stmt_slot *cache;   /* open addressing on the SQL text's hash; cap a power of two */
    int cache_n, cache_cap;
    dt__series_cache *series; /* chart series read so far (series_cache.h) */
    uint64_t metrics_gen;     /* dt_store_metrics_generation */
};

/* The chart series cache's budget: 16 bytes a point, 64 MB (100 trials x 10 000 points of two
 * metrics and x axes) */
#define SERIES_CACHE_POINTS ((size_t)4 << 20)

sqlite3 *dt__store_db(dt_store *st) {
    return st ? st->db : NULL;
}

static void lock(dt_store *st) {
    pthread_mutex_lock(&st->mu);
}
static void unlock(dt_store *st) {
    pthread_mutex_unlock(&st->mu);
}

/* Metric rows may have changed (a write or an undo): forget what was read of them. */
static void metrics_changed(dt_store *st) {
    dt__series_cache_clear(st->series);
    st->metrics_gen++;
}

uint64_t dt_store_metrics_generation(dt_store *st) {
    lock(st);
    uint64_t g = st->metrics_gen;
    unlock(st);
    return g;
}

static dt_status sql_error(dt_store *st, int rc, const char *what) {
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

/* The prepared statement for `sql` (prepared on first use). On error *out = NULL. */
static dt_status prep(dt_store *st, const char *sql, sqlite3_stmt **out) {
    *out = NULL;
    if (2 * (st->cache_n + 1) > st->cache_cap && cache_grow(st) != DT_OK) return DT_ERR_OOM;
    stmt_slot *e = cache_find(st->cache, st->cache_cap, sql);
    if (!e->sql) {
        sqlite3_stmt *s = NULL;
        int rc = sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL);
        if (rc != SQLITE_OK) return sql_error(st, rc, "preparing a statement");
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

/* Ready a used statement for its next use. */
static void done(sqlite3_stmt *s) {
    if (!s) return;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

/* ---- statements with bound values ---- */

/* A value for one ?N of a statement: V_INT(x), V_REAL(x), V_TEXT(s) (NULL binds NULL),
 * V_JSON(v) (stored as compact JSON text), V_NULL. Texts are bound without a copy: every
 * helper below finishes the statement (done) before it returns. */
typedef struct bval {
    enum { B_NULL, B_INT, B_REAL, B_TEXT, B_JSON } kind;
    int64_t i;
    double r;
    const char *t;
    const json_t *j;
} bval;

#define V_NULL ((bval){.kind = B_NULL})
#define V_INT(x) ((bval){.kind = B_INT, .i = (x)})
#define V_REAL(x) ((bval){.kind = B_REAL, .r = (x)})
#define V_TEXT(x) ((bval){.kind = B_TEXT, .t = (x)})
#define V_JSON(x) ((bval){.kind = B_JSON, .j = (x)})
/* The values for ?1, ?2, ... as the (array, count) pair the helpers take. */
#define ARGS(...)                                                                                  \
    (const bval[]){__VA_ARGS__}, (int)(sizeof(const bval[]){__VA_ARGS__} / sizeof(bval))

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
                done(s);
                return dt_error(DT_ERR_OOM, "store %s: encoding JSON", st->path);
            }
            rc = sqlite3_bind_text(s, i + 1, text, -1, SQLITE_TRANSIENT);
            free(text);
            break;
        }
        }
    }
    if (rc == SQLITE_OK) return DT_OK;
    dt_status status = sql_error(st, rc, "binding a value");
    done(s);
    return status;
}

/* The prepared statement for `sql` with v[0..n) bound. On error *out = NULL. */
static dt_status prep_args(dt_store *st, const char *sql, const bval *v, int n,
                           sqlite3_stmt **out) {
    dt_status status = prep(st, sql, out);
    if (status == DT_OK) status = bind_args(st, *out, v, n);
    if (status != DT_OK) *out = NULL;
    return status;
}

/* Run a statement that returns no rows (or ignores them); `doing` names it in errors. */
static dt_status run(dt_store *st, sqlite3_stmt *s, const char *doing) {
    int rc = sqlite3_step(s);
    while (rc == SQLITE_ROW) rc = sqlite3_step(s);
    dt_status status = rc == SQLITE_DONE ? DT_OK : sql_error(st, rc, doing);
    done(s);
    return status;
}

/* Run `sql` with v[0..n) bound; errors name `doing`, or the SQL itself when it is NULL. */
static dt_status exec_args(dt_store *st, const char *sql, const char *doing, const bval *v, int n) {
    sqlite3_stmt *s;
    dt_status status = prep_args(st, sql, v, n, &s);
    return status == DT_OK ? run(st, s, doing ? doing : sql) : status;
}

static dt_status exec(dt_store *st, const char *sql) {
    return exec_args(st, sql, NULL, NULL, 0);
}

/* ---- rows that must exist ---- */

/* A missing row: DT_ERR_INVALID "no <what> <key>" (key: "with id N", or a uuid). */
static dt_status no_row(const char *what, const char *key) {
    return dt_error(DT_ERR_INVALID, "no %s %s; hint: list them to see which exist", what, key);
}

static const char *id_key(char *buf, size_t size, int64_t id) {
    snprintf(buf, size, "with id %lld", (long long)id);
    return buf;
}
/* "with id N" for no_row, in a buffer that lives to the end of the enclosing block. */
#define ID_KEY(id) id_key((char[32]){0}, 32, (id))

/* Run `sql` with v[0..n) bound up to its first row. DT_OK with *row the statement on that row
 * (the caller reads it and calls done(*row)); no row: with `what`, DT_ERR_INVALID naming
 * `what` and `key`, without, DT_OK and *row = NULL. SQLite's errors name `doing`. On an error
 * *row = NULL. */
static dt_status first_row(dt_store *st, const char *sql, const char *doing, const char *what,
                           const char *key, const bval *v, int n, sqlite3_stmt **row) {
    *row = NULL;
    sqlite3_stmt *s;
    dt_status status = prep_args(st, sql, v, n, &s);
    if (status != DT_OK) return status;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *row = s;
        return DT_OK;
    }
    status = rc != SQLITE_DONE ? sql_error(st, rc, doing) : what ? no_row(what, key) : DT_OK;
    done(s);
    return status;
}

/* The row a call is about: an experiment or a trial, by id. */
typedef struct owner {
    bool trial;
    int64_t id;
} owner;
#define OF_EXP(id) (&(owner){false, (id)})
#define OF_TRIAL(id) (&(owner){true, (id)})

/* DT_OK when the owner row exists, else DT_ERR_INVALID naming it. */
static dt_status need(dt_store *st, const owner *o) {
    sqlite3_stmt *s;
    dt_status status = first_row(st,
                                 o->trial ? "SELECT 1 FROM trials WHERE id = ?"
                                          : "SELECT 1 FROM experiments WHERE id = ?",
                                 "looking up a row", o->trial ? "trial" : "experiment",
                                 ID_KEY(o->id), ARGS(V_INT(o->id)), &s);
    done(s);
    return status;
}

/* ---- writes: a savepoint each ---- */

/* Lock and open the write's savepoint. On error the lock is released. */
static dt_status write_begin(dt_store *st) {
    lock(st);
    dt_status status = exec(st, "SAVEPOINT w");
    if (status != DT_OK) unlock(st);
    return status;
}

/* Keep the write when status is DT_OK (commit, outside a group), else undo it; unlock. Returns
 * the status of the write, or of the commit when that fails. */
static dt_status write_end(dt_store *st, dt_status status) {
    if (status == DT_OK) status = exec(st, "RELEASE w");
    if (status != DT_OK) {
        DT_KEEP_ERROR(exec(st, "ROLLBACK TO w"); exec(st, "RELEASE w"));
        metrics_changed(st); /* the cache may hold rows read before the undo */
    }
    unlock(st);
    return status;
}

/* One write statement in its own savepoint: check the owner row (o, may be NULL), run `sql`
 * with v[0..n) bound (SQLite's errors name `doing`, or the SQL when NULL); with `what`, a run
 * that changed no row fails with DT_ERR_INVALID naming `what` and `key`. *id (may be NULL)
 * gets the new rowid. A failed write changes nothing. */
static dt_status write_stmt(dt_store *st, const owner *o, const char *sql, const char *doing,
                            const char *what, const char *key, int64_t *id, const bval *v, int n) {
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    if (o) status = need(st, o);
    if (status == DT_OK) status = exec_args(st, sql, doing, v, n);
    if (status == DT_OK && what && sqlite3_changes(st->db) == 0) status = no_row(what, key);
    if (status == DT_OK && id) *id = sqlite3_last_insert_rowid(st->db);
    return write_end(st, status);
}

/* Insert a row (of owner o, may be NULL); *id (may be NULL) gets its rowid. */
#define WRITE_NEW(st, o, sql, doing, id, ...)                                                      \
    write_stmt(st, o, sql, doing, NULL, NULL, id, ARGS(__VA_ARGS__))
/* Update or delete the existing row `what` `key`. */
#define WRITE_ROW(st, sql, doing, what, key, ...)                                                  \
    write_stmt(st, NULL, sql, doing, what, key, NULL, ARGS(__VA_ARGS__))

/* ---- rows as JSON ---- */

/* How a column turns into a JSON member: integer, real (SQL NULL: null), text (NULL: null),
 * stored JSON text (NULL or unparsable: null), boolean (from an integer). */
typedef enum { COL_INT, COL_REAL, COL_TEXT, COL_JSON, COL_BOOL } col_type;

typedef struct col_def {
    const char *name;
    col_type type;
} col_def;

/* A kind of row: its columns in SELECT order, named as the API shows them (docs/api.md); a
 * kind without columns is a JSON object stored whole in column 0 (metric rows). `what` names
 * the kind in errors. */
typedef struct row_kind {
    const char *what;
    const col_def *cols;
    int n;
} row_kind;

#define ROW_KIND(what, cols)                                                                       \
    { what, cols, (int)(sizeof cols / sizeof cols[0]) }

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
    if (status == DT_OK && rc != SQLITE_DONE) status = sql_error(st, rc, "reading rows");
    done(s);
    if (status == DT_OK && key && json_array_size(arr) == 0) status = no_row(k->what, key);
    if (status != DT_OK) {
        json_decref(arr);
        return status;
    }
    *out = key ? json_incref(json_array_get(arr, 0)) : arr;
    if (key) json_decref(arr);
    return DT_OK;
}

/* Under the lock: check the owner row (o, may be NULL), then select_rows of `sql` with
 * v[0..n) bound. */
static dt_status select_json(dt_store *st, const row_kind *k, const owner *o, const char *key,
                             const char *sql, const bval *v, int n, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    lock(st);
    dt_status status = o ? need(st, o) : DT_OK;
    sqlite3_stmt *s;
    if (status == DT_OK) status = prep_args(st, sql, v, n, &s);
    if (status == DT_OK) status = select_rows(st, s, k, key, out);
    unlock(st);
    return status;
}

/* ---- states ---- */

static bool in_list(const char *s, const char *const *list) {
    for (; s && *list; list++)
        if (!strcmp(s, *list)) return true;
    return false;
}

/* An experiment's state name (states.h): every state. */
static bool exp_state(const char *name, m_state *s) {
    return m_state_parse(name, s);
}

/* A trial's state name: every state but DELETING, which only an experiment passes through. */
static bool trial_state(const char *name, m_state *s) {
    return m_state_parse(name, s) && *s != M_DELETING;
}

static const char *const METRIC_KINDS[] = {"training", "validation", "profiler", NULL};

static dt_status bad_state(const char *what, const char *state) {
    return dt_error(DT_ERR_INVALID, "store: \"%s\" is not a%s %s state", state ? state : "(null)",
                    what[0] == 'e' ? "n" : "", what);
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
        status = sql_error(st, rc, "cannot open it");
        dt_store_close(st);
        return status;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, 10000);
    /* the version is checked before anything is written: a foreign or newer file stays as it
     * is */
    int v = 0;
    status = dt__store_schema_probe(st->db, path, &v);
    if (status == DT_OK) status = exec(st, "PRAGMA journal_mode = WAL");
    if (status == DT_OK) status = exec(st, "PRAGMA synchronous = NORMAL");
    if (status == DT_OK) status = exec(st, "PRAGMA foreign_keys = ON");
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
    lock(st);
    sqlite3_stmt *s;
    dt_status status =
        first_row(st, "PRAGMA integrity_check", "integrity check", NULL, NULL, NULL, 0, &s);
    if (s && strcmp((const char *)sqlite3_column_text(s, 0), "ok"))
        status = dt_error(DT_ERR_FORMAT,
                          "store %s fails its integrity check: %s; hint: restore it from a "
                          "backup or move it aside",
                          st->path, (const char *)sqlite3_column_text(s, 0));
    done(s);
    unlock(st);
    return status;
}

/* ---- groups ---- */

dt_status dt_store_begin(dt_store *st) {
    lock(st);
    if (st->in_group) {
        unlock(st);
        return dt_error(DT_ERR_STATE,
                        "store %s: dt_store_begin inside a group (nesting is not "
                        "supported)",
                        st->path);
    }
    dt_status status = exec(st, "BEGIN IMMEDIATE");
    if (status != DT_OK) {
        unlock(st);
        return status;
    }
    st->in_group = true; /* the lock stays held until commit / rollback */
    return DT_OK;
}

dt_status dt_store_commit(dt_store *st) {
    lock(st);
    if (!st->in_group) {
        unlock(st);
        return dt_error(DT_ERR_STATE, "store %s: dt_store_commit without dt_store_begin", st->path);
    }
    dt_status status = exec(st, "COMMIT");
    if (status != DT_OK) {
        DT_KEEP_ERROR(exec(st, "ROLLBACK"));
        metrics_changed(st);
    }
    st->in_group = false;
    unlock(st);
    unlock(st); /* the group's */
    return status;
}

void dt_store_rollback(dt_store *st) {
    lock(st);
    if (st->in_group) {
        DT_KEEP_ERROR(exec(st, "ROLLBACK"));
        metrics_changed(st);
        st->in_group = false;
        unlock(st); /* the group's */
    }
    unlock(st);
}

/* Step `s` to its end (then done with it), collecting its first column: *ids (malloc'd) and
 * *count. On error *ids is NULL and *count 0; SQLite's errors name `doing`. */
static dt_status read_ids(dt_store *st, sqlite3_stmt *s, const char *doing, int64_t **ids,
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
    if (status == DT_OK && rc != SQLITE_DONE) status = sql_error(st, rc, doing);
    done(s);
    if (status != DT_OK) free(v);
    *ids = status == DT_OK ? v : NULL;
    *count = status == DT_OK ? k : 0;
    return status;
}

/* ---- experiments ---- */

#define EXP_SELECT                                                                                 \
    "SELECT e.id, e.name, e.description, e.state, e.config, e.config_text, e.model_dir,"           \
    " e.progress, e.start_time, e.end_time, e.searcher_metric, e.smaller_is_better,"               \
    " (SELECT count(*) FROM trials t WHERE t.experiment_id = e.id)," /* per trial first: each      \
                                                                        inner min / max is one     \
                                                                        look-up in                 \
                                                                        metrics_kind_value */      \
    " CASE WHEN e.smaller_is_better THEN"                                                          \
    "  (SELECT min((SELECT min(m.searcher_value) FROM metrics m WHERE m.trial_id = t.id"           \
    "   AND m.kind = 'validation')) FROM trials t WHERE t.experiment_id = e.id)"                   \
    " ELSE"                                                                                        \
    "  (SELECT max((SELECT max(m.searcher_value) FROM metrics m WHERE m.trial_id = t.id"           \
    "   AND m.kind = 'validation')) FROM trials t WHERE t.experiment_id = e.id) END,"              \
    " e.so_path,"                                                                                  \
    " (SELECT count(*) FROM trials t WHERE t.experiment_id = e.id"                                 \
    "  AND t.state NOT IN ('COMPLETED', 'CANCELED', 'ERROR')),"                                    \
    " (SELECT count(*) FROM checkpoints c JOIN trials t ON c.trial_id = t.id"                      \
    "  WHERE t.experiment_id = e.id AND c.state = 'COMPLETED'),"                                   \
    " (SELECT coalesce(sum(r.value), 0) FROM checkpoints c JOIN trials t ON c.trial_id = t.id,"    \
    "  json_each(c.resources) r WHERE t.experiment_id = e.id AND c.state = 'COMPLETED'),"          \
    " e.config_name"                                                                               \
    " FROM experiments e"

static const col_def EXP_COLS[] = {
    {"id", COL_INT},
    {"name", COL_TEXT},
    {"description", COL_TEXT},
    {"state", COL_TEXT},
    {"config", COL_JSON},
    {"config_text", COL_TEXT},
    {"model_dir", COL_TEXT},
    {"progress", COL_REAL},
    {"start_time", COL_TEXT},
    {"end_time", COL_TEXT},
    {"searcher_metric", COL_TEXT},
    {"smaller_is_better", COL_BOOL},
    {"num_trials", COL_INT},
    {"best_metric", COL_REAL},
    {"so_path", COL_TEXT},
    {"active_trials", COL_INT},
    {"checkpoint_count", COL_INT},
    {"checkpoint_bytes", COL_INT},
    {"config_name", COL_TEXT},
};
static const row_kind EXP_ROWS = ROW_KIND("experiment", EXP_COLS);

dt_status dt_store_exp_insert(dt_store *st, const json_t *config, const char *config_text,
                              const char *model_dir, int64_t *id) {
    const json_t *searcher = json_object_get(config, "searcher");
    const char *metric = json_string_value(json_object_get(searcher, "metric"));
    const json_t *sib = json_object_get(searcher, "smaller_is_better");
    if (!json_is_object(config) || !metric)
        return dt_error(DT_ERR_INVALID, "store: an experiment config needs searcher.metric");
    if (sib && !json_is_boolean(sib))
        return dt_error(DT_ERR_INVALID, "store: searcher.smaller_is_better must be a boolean");
    const char *name = json_string_value(json_object_get(config, "name"));
    if (!name) { /* Determined's default: the entrypoint's symbol */
        const char *ep = json_string_value(json_object_get(config, "entrypoint"));
        name = ep && strchr(ep, ':') ? strchr(ep, ':') + 1 : ep ? ep : "";
    }
    const char *desc = json_string_value(json_object_get(config, "description"));
    return WRITE_NEW(st, NULL,
                     "INSERT INTO experiments (name, description, state, config, config_text,"
                     " model_dir, start_time, searcher_metric, smaller_is_better)"
                     " VALUES (?1, ?2, 'ACTIVE', ?3, ?4, ?5, " NOW ", ?6, ?7)",
                     "adding an experiment", id, V_TEXT(name), V_TEXT(desc ? desc : ""),
                     V_JSON(config), V_TEXT(config_text ? config_text : ""),
                     V_TEXT(model_dir ? model_dir : ""), V_TEXT(metric),
                     V_INT(sib ? json_is_true(sib) : 1));
}

dt_status dt_store_exp_get(dt_store *st, int64_t id, json_t **out) {
    return select_json(st, &EXP_ROWS, NULL, ID_KEY(id), EXP_SELECT " WHERE e.id = ?1",
                       ARGS(V_INT(id)), out);
}

dt_status dt_store_exp_list(dt_store *st, json_t **out) {
    return select_json(st, &EXP_ROWS, NULL, NULL, EXP_SELECT " ORDER BY e.id DESC", NULL, 0, out);
}

dt_status dt_store_exp_ids(dt_store *st, const char *const *states, int n, int64_t **ids,
                           int *count) {
    if (!ids || !count || n < 0 || (n > 0 && !states))
        return dt_error(DT_ERR_INVALID, "store_exp_ids: bad arguments");
    *ids = NULL;
    *count = 0;
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        m_state s;
        if (!exp_state(states[i], &s)) {
            json_decref(arr);
            return bad_state("experiment", states[i]);
        }
        json_array_append_new(arr, json_string(states[i]));
    }
    if (!arr) return dt_error(DT_ERR_OOM, "store %s", st->path);
    lock(st);
    sqlite3_stmt *s;
    dt_status status = prep_args(st,
                                 "SELECT id FROM experiments WHERE state IN"
                                 " (SELECT value FROM json_each(?1)) ORDER BY id",
                                 ARGS(V_JSON(arr)), &s);
    if (status == DT_OK) status = read_ids(st, s, "listing experiments", ids, count);
    unlock(st);
    json_decref(arr);
    return status;
}

dt_status dt_store_exp_set_state(dt_store *st, int64_t id, const char *state) {
    m_state s;
    if (!exp_state(state, &s)) return bad_state("experiment", state);
    const char *sql = s == M_DELETING ? "UPDATE experiments SET state = ?2 WHERE id = ?1"
                      : m_state_terminal(s)
                          ? "UPDATE experiments SET state = ?2, end_time = " NOW " WHERE id = ?1"
                          : "UPDATE experiments SET state = ?2, end_time = NULL WHERE id = ?1";
    return WRITE_ROW(st, sql, NULL, "experiment", ID_KEY(id), V_INT(id), V_TEXT(state));
}

dt_status dt_store_exp_set_progress(dt_store *st, int64_t id, double progress) {
    if (!(progress >= 0 && progress <= 1))
        return dt_error(DT_ERR_INVALID, "store: progress %g is not in [0, 1]", progress);
    return WRITE_ROW(st, "UPDATE experiments SET progress = ?2 WHERE id = ?1", NULL, "experiment",
                     ID_KEY(id), V_INT(id), V_REAL(progress));
}

dt_status dt_store_exp_set_build(dt_store *st, int64_t id, const char *so_path) {
    if (!so_path) return dt_error(DT_ERR_INVALID, "store: NULL so_path");
    return WRITE_ROW(st, "UPDATE experiments SET so_path = ?2 WHERE id = ?1", NULL, "experiment",
                     ID_KEY(id), V_INT(id), V_TEXT(so_path));
}

dt_status dt_store_exp_delete(dt_store *st, int64_t id) {
    lock(st);
    dt_status status = WRITE_ROW(st, "DELETE FROM experiments WHERE id = ?1", NULL, "experiment",
                                 ID_KEY(id), V_INT(id));
    if (status == DT_OK) metrics_changed(st); /* its trials' rows are gone */
    unlock(st);
    return status;
}

dt_status dt_store_searcher_save(dt_store *st, int64_t exp_id, const json_t *snapshot) {
    if (!snapshot) return dt_error(DT_ERR_INVALID, "store: NULL searcher snapshot");
    return WRITE_NEW(st, OF_EXP(exp_id),
                     "INSERT INTO searcher_snapshots (experiment_id, snapshot, time)"
                     " VALUES (?1, ?2, " NOW ") ON CONFLICT (experiment_id) DO UPDATE"
                     " SET snapshot = excluded.snapshot, time = excluded.time",
                     "saving a searcher snapshot", NULL, V_INT(exp_id), V_JSON(snapshot));
}

dt_status dt_store_searcher_load(dt_store *st, int64_t exp_id, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    lock(st);
    dt_status status = need(st, OF_EXP(exp_id));
    sqlite3_stmt *s = NULL;
    if (status == DT_OK)
        status = first_row(st, "SELECT snapshot FROM searcher_snapshots WHERE experiment_id = ?1",
                           "loading a searcher snapshot", NULL, NULL, ARGS(V_INT(exp_id)), &s);
    if (s) {
        const char *t = (const char *)sqlite3_column_text(s, 0);
        json_error_t jerr;
        *out = t ? json_loads(t, JSON_DECODE_ANY, &jerr) : NULL;
        if (!*out)
            status =
                dt_error(DT_ERR_FORMAT, "store %s: experiment %lld's searcher snapshot is not JSON",
                         st->path, (long long)exp_id);
        done(s);
    }
    unlock(st);
    return status;
}

/* ---- trials ---- */

#define TRIAL_SELECT                                                                               \
    "SELECT t.id, t.experiment_id, t.request_id, t.state, t.hparams, t.seed, t.restarts,"          \
    " t.run_id, t.pgid, t.batches, t.total_batches, t.start_time, t.end_time,"                     \
    " t.best_validation,"                                                                          \
    " (SELECT c.uuid FROM checkpoints c WHERE c.trial_id = t.id AND c.state = 'COMPLETED'"         \
    "  ORDER BY c.batches DESC, c.rowid DESC LIMIT 1),"                                            \
    " t.ops, t.exit_reason,"                                                                       \
    " (SELECT m.searcher_value FROM metrics m WHERE m.trial_id = t.id AND m.kind = 'validation'"   \
    "  ORDER BY m.batches DESC LIMIT 1), t.run_start FROM trials t"

static const col_def TRIAL_COLS[] = {
    {"id", COL_INT},        {"experiment_id", COL_INT},    {"request_id", COL_INT},
    {"state", COL_TEXT},    {"hparams", COL_JSON},         {"seed", COL_INT},
    {"restarts", COL_INT},  {"run_id", COL_INT},           {"pgid", COL_INT},
    {"batches", COL_INT},   {"total_batches", COL_INT},    {"start_time", COL_TEXT},
    {"end_time", COL_TEXT}, {"best_validation", COL_REAL}, {"latest_checkpoint", COL_TEXT},
    {"ops", COL_JSON},      {"exit_reason", COL_TEXT},     {"latest_validation", COL_REAL},
    {"run_start", COL_INT},
};
static const row_kind TRIAL_ROWS = ROW_KIND("trial", TRIAL_COLS);

dt_status dt_store_trial_insert(dt_store *st, int64_t exp_id, int64_t request_id,
                                const json_t *hparams, uint64_t seed, int64_t *id) {
    if (!json_is_object(hparams))
        return dt_error(DT_ERR_INVALID, "store: a trial's hyperparameters must be an object");
    if (seed > (uint64_t)INT64_MAX)
        return dt_error(DT_ERR_INVALID, "store: trial seed %llu is out of range (< 2^63)",
                        (unsigned long long)seed);
    return WRITE_NEW(st, OF_EXP(exp_id),
                     "INSERT INTO trials (experiment_id, request_id, state, hparams, seed,"
                     " start_time) VALUES (?1, ?2, 'ACTIVE', ?3, ?4, " NOW ")",
                     "adding a trial", id, V_INT(exp_id), V_INT(request_id), V_JSON(hparams),
                     V_INT((int64_t)seed));
}

dt_status dt_store_trial_get(dt_store *st, int64_t id, json_t **out) {
    return select_json(st, &TRIAL_ROWS, NULL, ID_KEY(id), TRIAL_SELECT " WHERE t.id = ?1",
                       ARGS(V_INT(id)), out);
}

dt_status dt_store_trial_list(dt_store *st, int64_t exp_id, json_t **out) {
    return select_json(st, &TRIAL_ROWS, OF_EXP(exp_id), NULL,
                       TRIAL_SELECT " WHERE t.experiment_id = ?1 ORDER BY t.id",
                       ARGS(V_INT(exp_id)), out);
}

dt_status dt_store_trial_set_state(dt_store *st, int64_t id, const char *state,
                                   const char *exit_reason) {
    m_state s;
    if (!trial_state(state, &s)) return bad_state("trial", state);
    return WRITE_ROW(st,
                     "UPDATE trials SET state = ?2, exit_reason = coalesce(?3, exit_reason),"
                     " end_time = CASE WHEN ?4 THEN " NOW " ELSE NULL END WHERE id = ?1",
                     "setting a trial's state", "trial", ID_KEY(id), V_INT(id), V_TEXT(state),
                     V_TEXT(exit_reason), V_INT(m_state_terminal(s)));
}

dt_status dt_store_trial_set_run(dt_store *st, int64_t id, int64_t run_id, int64_t pgid) {
    return WRITE_ROW(st, "UPDATE trials SET run_id = ?2, pgid = ?3 WHERE id = ?1", NULL, "trial",
                     ID_KEY(id), V_INT(id), V_INT(run_id), V_INT(pgid));
}

dt_status dt_store_trial_set_run_handle(dt_store *st, int64_t id, int64_t run_id, int64_t pgid,
                                        uint64_t start) {
    if (start > (uint64_t)INT64_MAX)
        return dt_error(DT_ERR_INVALID, "store: start time %llu is out of range",
                        (unsigned long long)start);
    return WRITE_ROW(st, "UPDATE trials SET run_id = ?2, pgid = ?3, run_start = ?4 WHERE id = ?1",
                     NULL, "trial", ID_KEY(id), V_INT(id), V_INT(run_id), V_INT(pgid),
                     V_INT((int64_t)start));
}

dt_status dt_store_trial_add_restart(dt_store *st, int64_t id, int64_t *restarts) {
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    sqlite3_stmt *s;
    status =
        first_row(st, "UPDATE trials SET restarts = restarts + 1 WHERE id = ?1 RETURNING restarts",
                  "counting a restart", "trial", ID_KEY(id), ARGS(V_INT(id)), &s);
    if (s) {
        if (restarts) *restarts = sqlite3_column_int64(s, 0);
        status = run(st, s, "counting a restart");
    }
    return write_end(st, status);
}

dt_status dt_store_trial_set_progress(dt_store *st, int64_t id, int64_t batches,
                                      int64_t total_batches) {
    if (batches < 0 || total_batches < 0)
        return dt_error(DT_ERR_INVALID, "store: negative progress (%lld of %lld batches)",
                        (long long)batches, (long long)total_batches);
    return WRITE_ROW(st, "UPDATE trials SET batches = ?2, total_batches = ?3 WHERE id = ?1", NULL,
                     "trial", ID_KEY(id), V_INT(id), V_INT(batches), V_INT(total_batches));
}

dt_status dt_store_trial_set_ops(dt_store *st, int64_t id, const json_t *ops) {
    if (!ops) return dt_error(DT_ERR_INVALID, "store: NULL trial ops");
    return WRITE_ROW(st, "UPDATE trials SET ops = ?2 WHERE id = ?1", NULL, "trial", ID_KEY(id),
                     V_INT(id), V_JSON(ops));
}

dt_status dt_store_trial_set_best(dt_store *st, int64_t id, double best_validation) {
    return WRITE_ROW(st, "UPDATE trials SET best_validation = ?2 WHERE id = ?1", NULL, "trial",
                     ID_KEY(id), V_INT(id), V_REAL(best_validation));
}

/* ---- metrics ---- */

/* NULL when row i is a well-formed metric row, else what is wrong with it. */
static const char *metric_row_problem(const json_t *row) {
    if (!json_is_object(row)) return "it is not an object";
    if (!in_list(json_string_value(json_object_get(row, "kind")), METRIC_KINDS))
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
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    st->metrics_gen++;
    /* the searcher metric's name (and the trial's existence) */
    sqlite3_stmt *s;
    char *metric = NULL;
    status = first_row(st,
                       "SELECT e.searcher_metric FROM trials t JOIN experiments e"
                       " ON e.id = t.experiment_id WHERE t.id = ?1",
                       "looking up a trial", "trial", ID_KEY(trial_id), ARGS(V_INT(trial_id)), &s);
    if (s) {
        metric = strdup((const char *)sqlite3_column_text(s, 0));
        done(s);
        if (!metric) status = dt_error(DT_ERR_OOM, "store %s", st->path);
    }
    json_array_foreach(rows, i, row) {
        if (status != DT_OK) break;
        /* a cached series that read this batch or later ones may hold what the row replaces */
        dt__series_cache_invalidate(st->series, trial_id,
                                    json_string_value(json_object_get(row, "kind")),
                                    json_integer_value(json_object_get(row, "batches")));
        const json_t *v = json_object_get(json_object_get(row, "metrics"), metric);
        status =
            exec_args(st,
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
        if (rc != SQLITE_OK) status = sql_error(st, rc, "packing the chart series");
    }
    if (status == DT_OK && n_written) *n_written = (int64_t)json_array_size(rows);
    status = write_end(st, status);
    if (status != DT_OK && n_written) *n_written = 0;
    return status;
}

/* a metric row is the object the trial reported, stored whole */
static const row_kind METRIC_ROWS = {"metric row", NULL, 0};

/* Check the kind of a metric query. */
static dt_status metric_kind_arg(const char *kind) {
    if (kind && !in_list(kind, METRIC_KINDS))
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
    return select_json(
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
    lock(st);
    status = need(st, OF_TRIAL(trial_id));
    sqlite3_stmt *s = NULL;
    if (status == DT_OK)
        status = first_row(st,
                           "SELECT count(*) FROM metrics WHERE trial_id = ?1"
                           " AND (?2 IS NULL OR kind = ?2)",
                           "counting metrics", NULL, NULL, ARGS(V_INT(trial_id), V_TEXT(kind)), &s);
    if (s) *n = sqlite3_column_int64(s, 0);
    done(s);
    unlock(st);
    return status;
}

/* ---- metric series (charts) ---- */

/* The ids of an experiment's trials (or of its trial `trial_id` when not 0), in id order. */
static dt_status trial_ids(dt_store *st, int64_t exp_id, int64_t trial_id, int64_t **ids,
                           int *count) {
    sqlite3_stmt *s;
    dt_status status = prep_args(st,
                                 "SELECT id FROM trials WHERE experiment_id = ?1"
                                 " AND (?2 = 0 OR id = ?2) ORDER BY id",
                                 ARGS(V_INT(exp_id), V_INT(trial_id)), &s);
    return status == DT_OK ? read_ids(st, s, "listing trials", ids, count) : status;
}

/* x and y of a stored row by SQLite's JSON functions, for what dt__row_number cannot tell. */
static dt_status row_point_sql(dt_store *st, const char *body, const char *ypath, const char *xpath,
                               bool *has, double *x, double *y) {
    sqlite3_stmt *s;
    dt_status status = prep_args(st, "SELECT json_extract(?1, ?2), json_extract(?1, ?3)",
                                 ARGS(V_TEXT(body), V_TEXT(xpath), V_TEXT(ypath)), &s);
    if (status != DT_OK) return status;
    int rc = sqlite3_step(s);
    *has = rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL &&
           sqlite3_column_type(s, 1) != SQLITE_NULL;
    if (*has) *x = sqlite3_column_double(s, 0), *y = sqlite3_column_double(s, 1);
    if (rc != SQLITE_ROW) status = sql_error(st, rc, "reading a metric row");
    done(s);
    return status;
}

/* Read the rows of the entry's trial and kind after its last batch into it. The numbers are
 * picked out of each row's text here (SQLite's json_extract parses the whole row, twice: most
 * of a first chart's time); rows this cannot read go through json_extract. */
static dt_status series_extend(dt_store *st, dt__series *e, const char *ypath, const char *xpath) {
    sqlite3_stmt *s;
    dt_status status = prep(st,
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
        status = sql_error(st, rc, "reading a metric series");
    done(s);
    return status;
}

dt_status dt_store_metric_series_text(dt_store *st, int64_t exp_id, int64_t trial_id,
                                      const char *kind, const char *name, const char *x,
                                      int64_t points, dt_series_format format, char **out,
                                      size_t *len) {
    bool json = format == DT_SERIES_JSON;
    *out = NULL;
    *len = 0;
    if (!in_list(kind, METRIC_KINDS))
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
    lock(st);
    int64_t *trials = NULL;
    int n_trials = 0;
    dt_status status = need(st, OF_EXP(exp_id));
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
            if (rc != SQLITE_OK) status = sql_error(st, rc, "reading a packed series");
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
    unlock(st);
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
    if (!in_list(kind, METRIC_KINDS))
        return dt_error(DT_ERR_INVALID,
                        "unknown metric kind \"%s\"; hint: training, validation or profiler", kind);
    lock(st);
    sqlite3_stmt *s;
    dt_status status = need(st, OF_EXP(exp_id));
    if (status == DT_OK)
        status = prep(st,
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
            status = sql_error(st, rc, "reading metric names");
        done(s);
    }
    unlock(st);
    if (status == DT_OK)
        *out = names;
    else
        json_decref(names);
    return status;
}

/* ---- checkpoints ---- */

#define CKPT_SELECT                                                                                \
    "SELECT c.uuid, c.trial_id, t.experiment_id, c.batches, c.state, c.path, c.metadata,"          \
    " c.resources, c.report_time,"                                                                 \
    " (SELECT m.searcher_value FROM metrics m WHERE m.trial_id = c.trial_id"                       \
    "  AND m.kind = 'validation' AND m.batches = c.batches)"                                       \
    " FROM checkpoints c JOIN trials t ON t.id = c.trial_id"

static const col_def CKPT_COLS[] = {
    {"uuid", COL_TEXT},         {"trial_id", COL_INT},
    {"experiment_id", COL_INT}, {"batches", COL_INT},
    {"state", COL_TEXT},        {"path", COL_TEXT},
    {"metadata", COL_JSON},     {"resources", COL_JSON},
    {"report_time", COL_TEXT},  {"validation_metric", COL_REAL},
};
static const row_kind CKPT_ROWS = ROW_KIND("checkpoint", CKPT_COLS);

dt_status dt_store_ckpt_insert(dt_store *st, int64_t trial_id, const char *uuid, const char *path,
                               int64_t batches, const json_t *metadata, const json_t *resources) {
    if (!uuid || !*uuid || !path || !*path)
        return dt_error(DT_ERR_INVALID, "store: a checkpoint needs a uuid and a path");
    if (batches < 0)
        return dt_error(DT_ERR_INVALID, "store: checkpoint %s at negative batches %lld", uuid,
                        (long long)batches);
    if ((metadata && !json_is_object(metadata)) || (resources && !json_is_object(resources)))
        return dt_error(DT_ERR_INVALID,
                        "store: checkpoint %s: metadata and resources must be objects", uuid);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)resources, k, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return dt_error(DT_ERR_INVALID,
                            "store: checkpoint %s: resources[\"%s\"] must be a byte count", uuid,
                            k);
    }
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    status = need(st, OF_TRIAL(trial_id));
    /* the same report again (a retried request) updates the row; another trial's uuid fails */
    json_t *empty = json_object();
    if (status == DT_OK)
        status = exec_args(
            st,
            "INSERT INTO checkpoints (uuid, trial_id, batches, state, path, metadata,"
            " resources, report_time) VALUES (?1, ?2, ?3, 'COMPLETED', ?4, ?5, ?6, " NOW
            ") ON CONFLICT (uuid) DO UPDATE SET batches = excluded.batches,"
            " path = excluded.path, metadata = excluded.metadata,"
            " resources = excluded.resources WHERE trial_id = excluded.trial_id",
            "adding a checkpoint",
            ARGS(V_TEXT(uuid), V_INT(trial_id), V_INT(batches), V_TEXT(path),
                 V_JSON(metadata ? metadata : empty), V_JSON(resources ? resources : empty)));
    json_decref(empty);
    if (status == DT_OK && sqlite3_changes(st->db) == 0)
        status = dt_error(DT_ERR_INVALID,
                          "checkpoint %s is already recorded for another trial; hint: "
                          "every checkpoint needs its own uuid",
                          uuid);
    return write_end(st, status);
}

dt_status dt_store_ckpt_get(dt_store *st, const char *uuid, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    if (!uuid) return dt_error(DT_ERR_INVALID, "store: NULL checkpoint uuid");
    char key[96];
    snprintf(key, sizeof key, "%.80s", uuid);
    return select_json(st, &CKPT_ROWS, NULL, key, CKPT_SELECT " WHERE c.uuid = ?1",
                       ARGS(V_TEXT(uuid)), out);
}

dt_status dt_store_ckpt_list(dt_store *st, int64_t exp_id, int64_t trial_id, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    if ((exp_id != 0) == (trial_id != 0))
        return dt_error(DT_ERR_INVALID, "store_ckpt_list: give an experiment or a trial");
    return select_json(st, &CKPT_ROWS, exp_id ? OF_EXP(exp_id) : OF_TRIAL(trial_id), NULL,
                       exp_id ? CKPT_SELECT " WHERE t.experiment_id = ?1"
                                            " ORDER BY c.trial_id, c.batches, c.rowid"
                              : CKPT_SELECT " WHERE c.trial_id = ?1 ORDER BY c.batches, c.rowid",
                       ARGS(V_INT(exp_id ? exp_id : trial_id)), out);
}

dt_status dt_store_ckpt_set_state(dt_store *st, const char *uuid, const char *state) {
    if (!uuid) return dt_error(DT_ERR_INVALID, "store: NULL checkpoint uuid");
    m_ckpt_state cs;
    if (!m_ckpt_state_parse(state, &cs)) return bad_state("checkpoint", state);
    return WRITE_ROW(st, "UPDATE checkpoints SET state = ?2 WHERE uuid = ?1",
                     "setting a checkpoint's state", "checkpoint", uuid, V_TEXT(uuid),
                     V_TEXT(state));
}

/* ---- logs ---- */

static const col_def LOG_COLS[] = {
    {"id", COL_INT},    {"trial_id", COL_INT}, {"rank", COL_INT},
    {"time", COL_TEXT}, {"line", COL_TEXT},
};
static const row_kind LOG_ROWS = ROW_KIND("log line", LOG_COLS);

dt_status dt_store_logs_insert(dt_store *st, int64_t trial_id, const int *ranks,
                               const char *const *lines, int n) {
    if (n < 0 || (n > 0 && !lines))
        return dt_error(DT_ERR_INVALID, "store_logs_insert: bad arguments");
    for (int i = 0; i < n; i++)
        if (!lines[i])
            return dt_error(DT_ERR_INVALID, "store: log line %d of %d is NULL; nothing written", i,
                            n);
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    status = need(st, OF_TRIAL(trial_id));
    for (int i = 0; status == DT_OK && i < n; i++)
        status = exec_args(
            st, "INSERT INTO logs (trial_id, rank, time, line) VALUES (?1, ?2, " NOW ", ?3)",
            "writing log lines",
            ARGS(V_INT(trial_id), V_INT(ranks ? ranks[i] : 0), V_TEXT(lines[i])));
    return write_end(st, status);
}

dt_status dt_store_logs_query(dt_store *st, int64_t exp_id, int64_t trial_id, int64_t after_id,
                              int64_t limit, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    if (!exp_id && !trial_id)
        return dt_error(DT_ERR_INVALID, "store_logs_query: give an experiment or a trial");
    if (limit < 0) return dt_error(DT_ERR_INVALID, "store: negative limit %lld", (long long)limit);
    return select_json(
        st, &LOG_ROWS, trial_id ? OF_TRIAL(trial_id) : OF_EXP(exp_id), NULL,
        trial_id ? "SELECT id, trial_id, rank, time, line FROM logs"
                   " WHERE trial_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3"
                 : "SELECT l.id, l.trial_id, l.rank, l.time, l.line FROM logs l"
                   " JOIN trials t ON t.id = l.trial_id WHERE t.experiment_id = ?1"
                   " AND l.id > ?2 ORDER BY l.id LIMIT ?3",
        ARGS(V_INT(trial_id ? trial_id : exp_id), V_INT(after_id), V_INT(limit ? limit : -1)), out);
}
