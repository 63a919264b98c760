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
 * metric is also kept in a column, for the best-metric queries).
 */
#define _GNU_SOURCE /* PTHREAD_MUTEX_RECURSIVE */
#include "master/store_impl.h"
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
};

sqlite3 *dt__store_db(dt_store *st) {
    return st ? st->db : NULL;
}

static void lock(dt_store *st) {
    pthread_mutex_lock(&st->mu);
}
static void unlock(dt_store *st) {
    pthread_mutex_unlock(&st->mu);
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

/* Run a statement that returns no rows (or ignores them); `what` names it in errors. */
static dt_status run(dt_store *st, sqlite3_stmt *s, const char *what) {
    int rc = sqlite3_step(s);
    while (rc == SQLITE_ROW) rc = sqlite3_step(s);
    dt_status status = rc == SQLITE_DONE ? DT_OK : sql_error(st, rc, what);
    done(s);
    return status;
}

static dt_status exec(dt_store *st, const char *sql) {
    sqlite3_stmt *s;
    dt_status status = prep(st, sql, &s);
    return status == DT_OK ? run(st, s, sql) : status;
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
    }
    unlock(st);
    return status;
}

/* ---- small helpers ---- */

static dt_status bind_json(dt_store *st, sqlite3_stmt *s, int i, const json_t *v) {
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text) return dt_error(DT_ERR_OOM, "store %s: encoding JSON", st->path);
    int rc = sqlite3_bind_text(s, i, text, -1, SQLITE_TRANSIENT);
    free(text);
    return rc == SQLITE_OK ? DT_OK : sql_error(st, rc, "binding JSON");
}

static json_t *col_text(sqlite3_stmt *s, int i) {
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? json_string((const char *)t) : json_null();
}

static json_t *col_json(sqlite3_stmt *s, int i) {
    const char *t = (const char *)sqlite3_column_text(s, i);
    json_t *v = t ? json_loads(t, JSON_DECODE_ANY, NULL) : NULL;
    return v ? v : json_null();
}

static json_t *col_real(sqlite3_stmt *s, int i) {
    if (sqlite3_column_type(s, i) == SQLITE_NULL) return json_null();
    return json_real(sqlite3_column_double(s, i));
}

static json_t *col_int(sqlite3_stmt *s, int i) {
    return json_integer((json_int_t)sqlite3_column_int64(s, i));
}

static bool in_list(const char *s, const char *const *list) {
    for (; s && *list; list++)
        if (!strcmp(s, *list)) return true;
    return false;
}

static const char *const EXP_STATES[] = {"ACTIVE",
                                         "PAUSED",
                                         "STOPPING_COMPLETED",
                                         "STOPPING_CANCELED",
                                         "STOPPING_KILLED",
                                         "STOPPING_ERROR",
                                         "COMPLETED",
                                         "CANCELED",
                                         "ERROR",
                                         "DELETING",
                                         NULL};
static const char *const TRIAL_STATES[] = {"ACTIVE",
                                           "PAUSED",
                                           "STOPPING_COMPLETED",
                                           "STOPPING_CANCELED",
                                           "STOPPING_KILLED",
                                           "STOPPING_ERROR",
                                           "COMPLETED",
                                           "CANCELED",
                                           "ERROR",
                                           NULL};
static const char *const TERMINAL[] = {"COMPLETED", "CANCELED", "ERROR", NULL};
static const char *const CKPT_STATES[] = {"COMPLETED", "DELETED", NULL};
static const char *const METRIC_KINDS[] = {"training", "validation", "profiler", NULL};

static dt_status bad_state(const char *what, const char *state) {
    return dt_error(DT_ERR_INVALID, "store: \"%s\" is not a%s %s state", state ? state : "(null)",
                    what[0] == 'e' ? "n" : "", what);
}

/* DT_OK when row `id` exists in the table `sql` selects from ("SELECT 1 FROM t WHERE id = ?"),
 * else DT_ERR_INVALID naming `what` and the id. */
static dt_status need(dt_store *st, const char *sql, const char *what, int64_t id) {
    sqlite3_stmt *s;
    dt_status status = prep(st, sql, &s);
    if (status != DT_OK) return status;
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    done(s);
    if (rc == SQLITE_ROW) return DT_OK;
    if (rc != SQLITE_DONE) return sql_error(st, rc, "looking up a row");
    return dt_error(DT_ERR_INVALID, "no %s with id %lld; hint: list them to see which exist", what,
                    (long long)id);
}

#define NEED_EXP "SELECT 1 FROM experiments WHERE id = ?"
#define NEED_TRIAL "SELECT 1 FROM trials WHERE id = ?"

/* An UPDATE / DELETE of row `id` changed nothing: DT_ERR_INVALID naming it. */
static dt_status changed_one(dt_store *st, dt_status status, const char *what, int64_t id) {
    if (status == DT_OK && sqlite3_changes(st->db) == 0)
        return dt_error(DT_ERR_INVALID, "no %s with id %lld; hint: list them to see which exist",
                        what, (long long)id);
    return status;
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
    if (!st || !(st->path = strdup(path))) {
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
    dt_status status = prep(st, "PRAGMA integrity_check", &s);
    if (status == DT_OK) {
        int rc = sqlite3_step(s);
        if (rc != SQLITE_ROW)
            status = sql_error(st, rc, "integrity check");
        else if (strcmp((const char *)sqlite3_column_text(s, 0), "ok"))
            status = dt_error(DT_ERR_FORMAT,
                              "store %s fails its integrity check: %s; hint: restore it from a "
                              "backup or move it aside",
                              st->path, (const char *)sqlite3_column_text(s, 0));
        done(s);
    }
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
    if (status != DT_OK) DT_KEEP_ERROR(exec(st, "ROLLBACK"));
    st->in_group = false;
    unlock(st);
    unlock(st); /* the group's */
    return status;
}

void dt_store_rollback(dt_store *st) {
    lock(st);
    if (st->in_group) {
        DT_KEEP_ERROR(exec(st, "ROLLBACK"));
        st->in_group = false;
        unlock(st); /* the group's */
    }
    unlock(st);
}

/* ---- experiments ---- */

#define EXP_SELECT                                                                                 \
    "SELECT e.id, e.name, e.description, e.state, e.config, e.config_text, e.model_dir,"           \
    " e.progress, e.start_time, e.end_time, e.searcher_metric, e.smaller_is_better,"               \
    " (SELECT count(*) FROM trials t WHERE t.experiment_id = e.id),"                               \
    " CASE WHEN e.smaller_is_better THEN"                                                          \
    "  (SELECT min(m.searcher_value) FROM trials t JOIN metrics m ON m.trial_id = t.id"            \
    "   WHERE t.experiment_id = e.id AND m.kind = 'validation')"                                   \
    " ELSE"                                                                                        \
    "  (SELECT max(m.searcher_value) FROM trials t JOIN metrics m ON m.trial_id = t.id"            \
    "   WHERE t.experiment_id = e.id AND m.kind = 'validation') END,"                              \
    " e.so_path,"                                                                                  \
    " (SELECT count(*) FROM trials t WHERE t.experiment_id = e.id"                                 \
    "  AND t.state NOT IN ('COMPLETED', 'CANCELED', 'ERROR')),"                                    \
    " (SELECT count(*) FROM checkpoints c JOIN trials t ON c.trial_id = t.id"                      \
    "  WHERE t.experiment_id = e.id AND c.state = 'COMPLETED'),"                                   \
    " (SELECT coalesce(sum(r.value), 0) FROM checkpoints c JOIN trials t ON c.trial_id = t.id,"    \
    "  json_each(c.resources) r WHERE t.experiment_id = e.id AND c.state = 'COMPLETED')"           \
    " FROM experiments e"

static json_t *exp_row(sqlite3_stmt *s) {
    json_t *o = json_object();
    if (!o) return NULL;
    static const char *const names[] = {"id",
                                        "name",
                                        "description",
                                        "state",
                                        "config",
                                        "config_text",
                                        "model_dir",
                                        "progress",
                                        "start_time",
                                        "end_time",
                                        "searcher_metric",
                                        "smaller_is_better",
                                        "num_trials",
                                        "best_metric",
                                        "so_path",
                                        "active_trials",
                                        "checkpoint_count",
                                        "checkpoint_bytes"};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
        json_t *v;
        switch (i) {
        case 0:
        case 12:
        case 15:
        case 16:
        case 17:
            v = col_int(s, i);
            break;
        case 4:
            v = col_json(s, i);
            break;
        case 7:
        case 13:
            v = col_real(s, i);
            break;
        case 11:
            v = json_boolean(sqlite3_column_int(s, i));
            break;
        default:
            v = col_text(s, i);
            break;
        }
        if (json_object_set_new(o, names[i], v)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* Run a SELECT whose rows `conv` turns into objects: an array of them (*out), or with `one`
 * the single row (DT_ERR_INVALID naming `what` and `id` when there is none). */
static dt_status select_rows(dt_store *st, sqlite3_stmt *s, json_t *(*conv)(sqlite3_stmt *),
                             bool one, const char *what, const char *id, json_t **out) {
    json_t *arr = json_array();
    dt_status status = arr ? DT_OK : dt_error(DT_ERR_OOM, "store %s", st->path);
    int rc;
    while (status == DT_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *row = conv(s);
        if (!row || json_array_append_new(arr, row))
            status = dt_error(DT_ERR_OOM, "store %s: building a %s", st->path, what);
    }
    if (status == DT_OK && rc != SQLITE_DONE) status = sql_error(st, rc, "reading rows");
    done(s);
    if (status == DT_OK && one) {
        if (json_array_size(arr) == 0) {
            status =
                dt_error(DT_ERR_INVALID, "no %s %s; hint: list them to see which exist", what, id);
        } else {
            *out = json_incref(json_array_get(arr, 0));
            json_decref(arr);
            return DT_OK;
        }
    }
    if (status != DT_OK) {
        json_decref(arr);
        return status;
    }
    *out = arr;
    return DT_OK;
}

static dt_status select_by_id(dt_store *st, const char *sql, json_t *(*conv)(sqlite3_stmt *),
                              const char *what, int64_t id, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    char ids[32];
    snprintf(ids, sizeof ids, "with id %lld", (long long)id);
    lock(st);
    sqlite3_stmt *s;
    dt_status status = prep(st, sql, &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, id);
        status = select_rows(st, s, conv, true, what, ids, out);
    }
    unlock(st);
    return status;
}

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
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    sqlite3_stmt *s;
    status = prep(st,
                  "INSERT INTO experiments (name, description, state, config, config_text,"
                  " model_dir, start_time, searcher_metric, smaller_is_better)"
                  " VALUES (?1, ?2, 'ACTIVE', ?3, ?4, ?5, " NOW ", ?6, ?7)",
                  &s);
    if (status == DT_OK) {
        sqlite3_bind_text(s, 1, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 2, desc ? desc : "", -1, SQLITE_TRANSIENT);
        status = bind_json(st, s, 3, config);
        sqlite3_bind_text(s, 4, config_text ? config_text : "", -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 5, model_dir ? model_dir : "", -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 6, metric, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(s, 7, sib ? json_is_true(sib) : 1);
        if (status == DT_OK)
            status = run(st, s, "adding an experiment");
        else
            done(s);
    }
    if (status == DT_OK && id) *id = sqlite3_last_insert_rowid(st->db);
    return write_end(st, status);
}

dt_status dt_store_exp_get(dt_store *st, int64_t id, json_t **out) {
    return select_by_id(st, EXP_SELECT " WHERE e.id = ?1", exp_row, "experiment", id, out);
}

dt_status dt_store_exp_list(dt_store *st, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    lock(st);
    sqlite3_stmt *s;
    dt_status status = prep(st, EXP_SELECT " ORDER BY e.id DESC", &s);
    if (status == DT_OK) status = select_rows(st, s, exp_row, false, "experiment", NULL, out);
    unlock(st);
    return status;
}

dt_status dt_store_exp_ids(dt_store *st, const char *const *states, int n, int64_t **ids,
                           int *count) {
    if (!ids || !count || n < 0 || (n > 0 && !states))
        return dt_error(DT_ERR_INVALID, "store_exp_ids: bad arguments");
    *ids = NULL;
    *count = 0;
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        if (!in_list(states[i], EXP_STATES)) {
            json_decref(arr);
            return bad_state("experiment", states[i]);
        }
        json_array_append_new(arr, json_string(states[i]));
    }
    if (!arr) return dt_error(DT_ERR_OOM, "store %s", st->path);
    lock(st);
    sqlite3_stmt *s;
    dt_status status = prep(st,
                            "SELECT id FROM experiments WHERE state IN"
                            " (SELECT value FROM json_each(?1)) ORDER BY id",
                            &s);
    int64_t *v = NULL;
    int k = 0, cap = 0, rc = SQLITE_DONE;
    if (status == DT_OK) status = bind_json(st, s, 1, arr);
    while (status == DT_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
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
    if (status == DT_OK && rc != SQLITE_DONE) status = sql_error(st, rc, "listing experiments");
    done(s);
    unlock(st);
    json_decref(arr);
    if (status != DT_OK) {
        free(v);
        return status;
    }
    *ids = v;
    *count = k;
    return DT_OK;
}

/* UPDATE statement `sql` with ?1 = id and ?2 = a text (may be NULL), on an existing row. */
static dt_status update_text(dt_store *st, const char *sql, int64_t id, const char *text,
                             const char *what) {
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    sqlite3_stmt *s;
    status = prep(st, sql, &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, id);
        if (text) sqlite3_bind_text(s, 2, text, -1, SQLITE_TRANSIENT);
        status = changed_one(st, run(st, s, sql), what, id);
    }
    return write_end(st, status);
}

dt_status dt_store_exp_set_state(dt_store *st, int64_t id, const char *state) {
    if (!in_list(state, EXP_STATES)) return bad_state("experiment", state);
    if (in_list(state, TERMINAL))
        return update_text(st,
                           "UPDATE experiments SET state = ?2, end_time = " NOW " WHERE id = ?1",
                           id, state, "experiment");
    if (!strcmp(state, "DELETING"))
        return update_text(st, "UPDATE experiments SET state = ?2 WHERE id = ?1", id, state,
                           "experiment");
    return update_text(st, "UPDATE experiments SET state = ?2, end_time = NULL WHERE id = ?1", id,
                       state, "experiment");
}

/* UPDATE `sql` with ?1 = id and ?2, ?3 = two numbers (real when is_real). */
static dt_status update_nums(dt_store *st, const char *sql, int64_t id, bool is_real, double r,
                             int64_t a, int64_t b, const char *what) {
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    sqlite3_stmt *s;
    status = prep(st, sql, &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, id);
        if (is_real) {
            sqlite3_bind_double(s, 2, r);
        } else {
            sqlite3_bind_int64(s, 2, a);
            sqlite3_bind_int64(s, 3, b);
        }
        status = changed_one(st, run(st, s, sql), what, id);
    }
    return write_end(st, status);
}

dt_status dt_store_exp_set_progress(dt_store *st, int64_t id, double progress) {
    if (!(progress >= 0 && progress <= 1))
        return dt_error(DT_ERR_INVALID, "store: progress %g is not in [0, 1]", progress);
    return update_nums(st, "UPDATE experiments SET progress = ?2 WHERE id = ?1", id, true, progress,
                       0, 0, "experiment");
}

dt_status dt_store_exp_set_build(dt_store *st, int64_t id, const char *so_path) {
    if (!so_path) return dt_error(DT_ERR_INVALID, "store: NULL so_path");
    return update_text(st, "UPDATE experiments SET so_path = ?2 WHERE id = ?1", id, so_path,
                       "experiment");
}

dt_status dt_store_exp_delete(dt_store *st, int64_t id) {
    return update_text(st, "DELETE FROM experiments WHERE id = ?1", id, NULL, "experiment");
}

dt_status dt_store_searcher_save(dt_store *st, int64_t exp_id, const json_t *snapshot) {
    if (!snapshot) return dt_error(DT_ERR_INVALID, "store: NULL searcher snapshot");
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    status = need(st, NEED_EXP, "experiment", exp_id);
    sqlite3_stmt *s;
    if (status == DT_OK)
        status = prep(st,
                      "INSERT INTO searcher_snapshots (experiment_id, snapshot, time)"
                      " VALUES (?1, ?2, " NOW ") ON CONFLICT (experiment_id) DO UPDATE"
                      " SET snapshot = excluded.snapshot, time = excluded.time",
                      &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, exp_id);
        status = bind_json(st, s, 2, snapshot);
        status = status == DT_OK ? run(st, s, "saving a searcher snapshot") : (done(s), status);
    }
    return write_end(st, status);
}

dt_status dt_store_searcher_load(dt_store *st, int64_t exp_id, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    lock(st);
    dt_status status = need(st, NEED_EXP, "experiment", exp_id);
    sqlite3_stmt *s;
    if (status == DT_OK)
        status = prep(st, "SELECT snapshot FROM searcher_snapshots WHERE experiment_id = ?1", &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, exp_id);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            const char *t = (const char *)sqlite3_column_text(s, 0);
            json_error_t jerr;
            *out = t ? json_loads(t, JSON_DECODE_ANY, &jerr) : NULL;
            if (!*out)
                status = dt_error(DT_ERR_FORMAT,
                                  "store %s: experiment %lld's searcher snapshot "
                                  "is not JSON",
                                  st->path, (long long)exp_id);
        } else if (rc != SQLITE_DONE) {
            status = sql_error(st, rc, "loading a searcher snapshot");
        }
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
    "  ORDER BY m.batches DESC LIMIT 1) FROM trials t"

static json_t *trial_row(sqlite3_stmt *s) {
    json_t *o = json_object();
    if (!o) return NULL;
    static const char *const names[] = {"id",       "experiment_id",   "request_id",
                                        "state",    "hparams",         "seed",
                                        "restarts", "run_id",          "pgid",
                                        "batches",  "total_batches",   "start_time",
                                        "end_time", "best_validation", "latest_checkpoint",
                                        "ops",      "exit_reason",     "latest_validation"};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
        json_t *v;
        switch (i) {
        case 3:
        case 11:
        case 12:
        case 14:
        case 16:
            v = col_text(s, i);
            break;
        case 4:
        case 15:
            v = col_json(s, i);
            break;
        case 13:
        case 17:
            v = col_real(s, i);
            break;
        default:
            v = col_int(s, i);
            break;
        }
        if (json_object_set_new(o, names[i], v)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

dt_status dt_store_trial_insert(dt_store *st, int64_t exp_id, int64_t request_id,
                                const json_t *hparams, uint64_t seed, int64_t *id) {
    if (!json_is_object(hparams))
        return dt_error(DT_ERR_INVALID, "store: a trial's hyperparameters must be an object");
    if (seed > (uint64_t)INT64_MAX)
        return dt_error(DT_ERR_INVALID, "store: trial seed %llu is out of range (< 2^63)",
                        (unsigned long long)seed);
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    status = need(st, NEED_EXP, "experiment", exp_id);
    sqlite3_stmt *s;
    if (status == DT_OK)
        status = prep(st,
                      "INSERT INTO trials (experiment_id, request_id, state, hparams, seed,"
                      " start_time) VALUES (?1, ?2, 'ACTIVE', ?3, ?4, " NOW ")",
                      &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, exp_id);
        sqlite3_bind_int64(s, 2, request_id);
        sqlite3_bind_int64(s, 4, (int64_t)seed);
        status = bind_json(st, s, 3, hparams);
        status = status == DT_OK ? run(st, s, "adding a trial") : (done(s), status);
    }
    if (status == DT_OK && id) *id = sqlite3_last_insert_rowid(st->db);
    return write_end(st, status);
}

dt_status dt_store_trial_get(dt_store *st, int64_t id, json_t **out) {
    return select_by_id(st, TRIAL_SELECT " WHERE t.id = ?1", trial_row, "trial", id, out);
}

dt_status dt_store_trial_list(dt_store *st, int64_t exp_id, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    lock(st);
    dt_status status = need(st, NEED_EXP, "experiment", exp_id);
    sqlite3_stmt *s;
    if (status == DT_OK)
        status = prep(st, TRIAL_SELECT " WHERE t.experiment_id = ?1 ORDER BY t.id", &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, exp_id);
        status = select_rows(st, s, trial_row, false, "trial", NULL, out);
    }
    unlock(st);
    return status;
}

dt_status dt_store_trial_set_state(dt_store *st, int64_t id, const char *state,
                                   const char *exit_reason) {
    if (!in_list(state, TRIAL_STATES)) return bad_state("trial", state);
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    sqlite3_stmt *s;
    status = prep(st,
                  "UPDATE trials SET state = ?2, exit_reason = coalesce(?3, exit_reason),"
                  " end_time = CASE WHEN ?4 THEN " NOW " ELSE NULL END WHERE id = ?1",
                  &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_text(s, 2, state, -1, SQLITE_TRANSIENT);
        if (exit_reason) sqlite3_bind_text(s, 3, exit_reason, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(s, 4, in_list(state, TERMINAL));
        status = changed_one(st, run(st, s, "setting a trial's state"), "trial", id);
    }
    return write_end(st, status);
}

dt_status dt_store_trial_set_run(dt_store *st, int64_t id, int64_t run_id, int64_t pgid) {
    return update_nums(st, "UPDATE trials SET run_id = ?2, pgid = ?3 WHERE id = ?1", id, false, 0,
                       run_id, pgid, "trial");
}

dt_status dt_store_trial_add_restart(dt_store *st, int64_t id, int64_t *restarts) {
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    sqlite3_stmt *s;
    status =
        prep(st, "UPDATE trials SET restarts = restarts + 1 WHERE id = ?1 RETURNING restarts", &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, id);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            if (restarts) *restarts = sqlite3_column_int64(s, 0);
            rc = sqlite3_step(s);
            if (rc != SQLITE_DONE) status = sql_error(st, rc, "counting a restart");
        } else if (rc == SQLITE_DONE) {
            status = dt_error(DT_ERR_INVALID,
                              "no trial with id %lld; hint: list them to see "
                              "which exist",
                              (long long)id);
        } else {
            status = sql_error(st, rc, "counting a restart");
        }
        done(s);
    }
    return write_end(st, status);
}

dt_status dt_store_trial_set_progress(dt_store *st, int64_t id, int64_t batches,
                                      int64_t total_batches) {
    if (batches < 0 || total_batches < 0)
        return dt_error(DT_ERR_INVALID, "store: negative progress (%lld of %lld batches)",
                        (long long)batches, (long long)total_batches);
    return update_nums(st, "UPDATE trials SET batches = ?2, total_batches = ?3 WHERE id = ?1", id,
                       false, 0, batches, total_batches, "trial");
}

dt_status dt_store_trial_set_ops(dt_store *st, int64_t id, const json_t *ops) {
    if (!ops) return dt_error(DT_ERR_INVALID, "store: NULL trial ops");
    char *text = json_dumps(ops, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text) return dt_error(DT_ERR_OOM, "store %s: encoding JSON", st->path);
    dt_status status =
        update_text(st, "UPDATE trials SET ops = ?2 WHERE id = ?1", id, text, "trial");
    free(text);
    return status;
}

dt_status dt_store_trial_set_best(dt_store *st, int64_t id, double best_validation) {
    return update_nums(st, "UPDATE trials SET best_validation = ?2 WHERE id = ?1", id, true,
                       best_validation, 0, 0, "trial");
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
    /* the searcher metric's name (and the trial's existence) */
    sqlite3_stmt *s;
    char *metric = NULL;
    status = prep(st,
                  "SELECT e.searcher_metric FROM trials t JOIN experiments e"
                  " ON e.id = t.experiment_id WHERE t.id = ?1",
                  &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, trial_id);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW)
            metric = strdup((const char *)sqlite3_column_text(s, 0));
        else if (rc == SQLITE_DONE)
            status = dt_error(DT_ERR_INVALID,
                              "no trial with id %lld; hint: list them to see "
                              "which exist",
                              (long long)trial_id);
        else
            status = sql_error(st, rc, "looking up a trial");
        done(s);
        if (status == DT_OK && !metric) status = dt_error(DT_ERR_OOM, "store %s", st->path);
    }
    if (status == DT_OK)
        status = prep(st,
                      "INSERT INTO metrics (trial_id, kind, batches, searcher_value, body)"
                      " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (trial_id, kind, batches)"
                      " DO UPDATE SET searcher_value = excluded.searcher_value,"
                      " body = excluded.body",
                      &s);
    json_array_foreach(rows, i, row) {
        if (status != DT_OK) break;
        sqlite3_bind_int64(s, 1, trial_id);
        sqlite3_bind_text(s, 2, json_string_value(json_object_get(row, "kind")), -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, json_integer_value(json_object_get(row, "batches")));
        const json_t *v = json_object_get(json_object_get(row, "metrics"), metric);
        if (json_is_number(v))
            sqlite3_bind_double(s, 4, json_number_value(v));
        else
            sqlite3_bind_null(s, 4);
        status = bind_json(st, s, 5, row);
        status = status == DT_OK ? run(st, s, "writing metrics") : (done(s), status);
    }
    free(metric);
    if (status == DT_OK && n_written) *n_written = (int64_t)json_array_size(rows);
    status = write_end(st, status);
    if (status != DT_OK && n_written) *n_written = 0;
    return status;
}

static json_t *metric_row(sqlite3_stmt *s) {
    const char *t = (const char *)sqlite3_column_text(s, 0);
    return t ? json_loads(t, 0, NULL) : NULL;
}

/* Check the trial and the kind of a metric query. */
static dt_status metric_query_args(dt_store *st, int64_t trial_id, const char *kind) {
    if (kind && !in_list(kind, METRIC_KINDS))
        return dt_error(DT_ERR_INVALID,
                        "unknown metric kind \"%s\"; hint: training, validation or profiler", kind);
    return need(st, NEED_TRIAL, "trial", trial_id);
}

dt_status dt_store_metrics_query(dt_store *st, int64_t trial_id, const char *kind,
                                 int64_t after_batches, int64_t limit, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    if (limit < 0) return dt_error(DT_ERR_INVALID, "store: negative limit %lld", (long long)limit);
    lock(st);
    dt_status status = metric_query_args(st, trial_id, kind);
    sqlite3_stmt *s;
    if (status == DT_OK)
        status = prep(st,
                      "SELECT body FROM metrics WHERE trial_id = ?1"
                      " AND (?2 IS NULL OR kind = ?2) AND batches > ?3"
                      " ORDER BY batches, id LIMIT ?4",
                      &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, trial_id);
        if (kind) sqlite3_bind_text(s, 2, kind, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(s, 3, after_batches);
        sqlite3_bind_int64(s, 4, limit ? limit : -1);
        status = select_rows(st, s, metric_row, false, "metric row", NULL, out);
    }
    unlock(st);
    return status;
}

dt_status dt_store_metrics_count(dt_store *st, int64_t trial_id, const char *kind, int64_t *n) {
    if (!n) return dt_error(DT_ERR_INVALID, "store: NULL n");
    *n = 0;
    lock(st);
    dt_status status = metric_query_args(st, trial_id, kind);
    sqlite3_stmt *s;
    if (status == DT_OK)
        status = prep(st,
                      "SELECT count(*) FROM metrics WHERE trial_id = ?1"
                      " AND (?2 IS NULL OR kind = ?2)",
                      &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, trial_id);
        if (kind) sqlite3_bind_text(s, 2, kind, -1, SQLITE_TRANSIENT);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW)
            *n = sqlite3_column_int64(s, 0);
        else
            status = sql_error(st, rc, "counting metrics");
        done(s);
    }
    unlock(st);
    return status;
}

/* ---- checkpoints ---- */

/* One trial's points while a series is read: x and y in batch order. */
typedef struct series_buf {
    double *x, *y;
    size_t n, cap;
} series_buf;

static bool series_push(series_buf *b, double x, double y) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        double *nx = realloc(b->x, cap * sizeof *nx);
        if (!nx) return false;
        b->x = nx;
        double *ny = realloc(b->y, cap * sizeof *ny);
        if (!ny) return false;
        b->y = ny;
        b->cap = cap;
    }
    b->x[b->n] = x;
    b->y[b->n++] = y;
    return true;
}

static bool point_append(json_t *data, double x, double y) {
    return !json_array_append_new(data, json_pack("[ff]", x, y));
}

/* {"trial_id","total","data":[[x,y],...]}: every point when they fit in `points`, else per
 * bucket of consecutive points its minimum and its maximum, in x order. NULL when out of
 * memory. */
static json_t *series_json(int64_t trial_id, const series_buf *b, int64_t points) {
    json_t *data = json_array();
    json_t *o = json_pack("{sIsIso}", "trial_id", (json_int_t)trial_id, "total", (json_int_t)b->n,
                          "data", data);
    if (!o) return NULL;
    bool ok = true;
    if ((int64_t)b->n <= points) {
        for (size_t i = 0; ok && i < b->n; i++) ok = point_append(data, b->x[i], b->y[i]);
    } else {
        size_t buckets = (size_t)(points / 2 > 0 ? points / 2 : 1);
        for (size_t k = 0; ok && k < buckets; k++) {
            size_t lo = b->n * k / buckets, hi = b->n * (k + 1) / buckets, imin = lo, imax = lo;
            for (size_t i = lo; i < hi; i++) {
                if (b->y[i] < b->y[imin]) imin = i;
                if (b->y[i] > b->y[imax]) imax = i;
            }
            if (hi == lo) continue;
            size_t first = imin < imax ? imin : imax, second = imin < imax ? imax : imin;
            ok = point_append(data, b->x[first], b->y[first]) &&
                 (first == second || point_append(data, b->x[second], b->y[second]));
        }
    }
    if (!ok) json_decref(o);
    return ok ? o : NULL;
}

dt_status dt_store_metric_series(dt_store *st, int64_t exp_id, int64_t trial_id, const char *kind,
                                 const char *name, const char *x, int64_t points, json_t **out) {
    *out = NULL;
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
    *out = NULL;
    if (!name) return (*out = json_array()) ? DT_OK : dt_error(DT_ERR_OOM, "out of memory");
    char path[512], xpath[16];
    snprintf(path, sizeof path, "$.metrics.\"%s\"", name);
    snprintf(xpath, sizeof xpath, "$.%s", x);
    lock(st);
    sqlite3_stmt *s;
    dt_status status = need(st, NEED_EXP, "experiment", exp_id);
    if (status == DT_OK)
        status = prep(st,
                      "SELECT m.trial_id, CASE WHEN ?4 = '$.batches' THEN m.batches ELSE"
                      " json_extract(m.body, ?4) END, json_extract(m.body, ?3) FROM trials t"
                      " JOIN metrics m ON m.trial_id = t.id AND m.kind = ?2"
                      " WHERE t.experiment_id = ?1 AND (?5 = 0 OR t.id = ?5)"
                      " ORDER BY m.trial_id, m.batches",
                      &s);
    json_t *series = json_array();
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, exp_id);
        sqlite3_bind_text(s, 2, kind, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, path, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, xpath, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 5, trial_id);
        series_buf b = {0};
        int64_t cur = 0;
        int rc;
        bool ok = series != NULL;
        while (ok && (rc = sqlite3_step(s)) == SQLITE_ROW) {
            int64_t t = sqlite3_column_int64(s, 0);
            if (t != cur && cur) {
                ok = !json_array_append_new(series, series_json(cur, &b, points));
                b.n = 0;
            }
            cur = t;
            if (sqlite3_column_type(s, 1) != SQLITE_NULL &&
                sqlite3_column_type(s, 2) != SQLITE_NULL)
                ok =
                    ok && series_push(&b, sqlite3_column_double(s, 1), sqlite3_column_double(s, 2));
        }
        if (ok && cur) ok = !json_array_append_new(series, series_json(cur, &b, points));
        if (!ok)
            status = dt_error(DT_ERR_OOM, "store %s: out of memory reading a series", st->path);
        else if (rc != SQLITE_DONE)
            status = sql_error(st, rc, "reading a metric series");
        free(b.x);
        free(b.y);
        done(s);
    }
    unlock(st);
    if (status == DT_OK)
        *out = series;
    else
        json_decref(series);
    return status;
}

dt_status dt_store_metric_names(dt_store *st, int64_t exp_id, int64_t trial_id, const char *kind,
                                json_t **out) {
    *out = NULL;
    if (!in_list(kind, METRIC_KINDS))
        return dt_error(DT_ERR_INVALID,
                        "unknown metric kind \"%s\"; hint: training, validation or profiler", kind);
    lock(st);
    sqlite3_stmt *s;
    dt_status status = need(st, NEED_EXP, "experiment", exp_id);
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

#define CKPT_SELECT                                                                                \
    "SELECT c.uuid, c.trial_id, t.experiment_id, c.batches, c.state, c.path, c.metadata,"          \
    " c.resources, c.report_time,"                                                                 \
    " (SELECT m.searcher_value FROM metrics m WHERE m.trial_id = c.trial_id"                       \
    "  AND m.kind = 'validation' AND m.batches = c.batches)"                                       \
    " FROM checkpoints c JOIN trials t ON t.id = c.trial_id"

static json_t *ckpt_row(sqlite3_stmt *s) {
    json_t *o = json_object();
    if (!o) return NULL;
    static const char *const names[] = {
        "uuid", "trial_id", "experiment_id", "batches",     "state",
        "path", "metadata", "resources",     "report_time", "validation_metric"};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
        json_t *v;
        switch (i) {
        case 1:
        case 2:
        case 3:
            v = col_int(s, i);
            break;
        case 6:
        case 7:
            v = col_json(s, i);
            break;
        case 9:
            v = col_real(s, i);
            break;
        default:
            v = col_text(s, i);
            break;
        }
        if (json_object_set_new(o, names[i], v)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

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
    status = need(st, NEED_TRIAL, "trial", trial_id);
    sqlite3_stmt *s;
    /* the same report again (a retried request) updates the row; another trial's uuid fails */
    if (status == DT_OK)
        status = prep(st,
                      "INSERT INTO checkpoints (uuid, trial_id, batches, state, path, metadata,"
                      " resources, report_time) VALUES (?1, ?2, ?3, 'COMPLETED', ?4, ?5, ?6, " NOW
                      ") ON CONFLICT (uuid) DO UPDATE SET batches = excluded.batches,"
                      " path = excluded.path, metadata = excluded.metadata,"
                      " resources = excluded.resources WHERE trial_id = excluded.trial_id",
                      &s);
    if (status == DT_OK) {
        json_t *empty = json_object();
        sqlite3_bind_text(s, 1, uuid, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(s, 2, trial_id);
        sqlite3_bind_int64(s, 3, batches);
        sqlite3_bind_text(s, 4, path, -1, SQLITE_TRANSIENT);
        status = bind_json(st, s, 5, metadata ? metadata : empty);
        if (status == DT_OK) status = bind_json(st, s, 6, resources ? resources : empty);
        json_decref(empty);
        status = status == DT_OK ? run(st, s, "adding a checkpoint") : (done(s), status);
        if (status == DT_OK && sqlite3_changes(st->db) == 0)
            status = dt_error(DT_ERR_INVALID,
                              "checkpoint %s is already recorded for another trial; hint: "
                              "every checkpoint needs its own uuid",
                              uuid);
    }
    return write_end(st, status);
}

dt_status dt_store_ckpt_get(dt_store *st, const char *uuid, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    if (!uuid) return dt_error(DT_ERR_INVALID, "store: NULL checkpoint uuid");
    char what[96];
    snprintf(what, sizeof what, "%.80s", uuid);
    lock(st);
    sqlite3_stmt *s;
    dt_status status = prep(st, CKPT_SELECT " WHERE c.uuid = ?1", &s);
    if (status == DT_OK) {
        sqlite3_bind_text(s, 1, uuid, -1, SQLITE_TRANSIENT);
        status = select_rows(st, s, ckpt_row, true, "checkpoint", what, out);
    }
    unlock(st);
    return status;
}

dt_status dt_store_ckpt_list(dt_store *st, int64_t exp_id, int64_t trial_id, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    if ((exp_id != 0) == (trial_id != 0))
        return dt_error(DT_ERR_INVALID, "store_ckpt_list: give an experiment or a trial");
    lock(st);
    dt_status status =
        exp_id ? need(st, NEED_EXP, "experiment", exp_id) : need(st, NEED_TRIAL, "trial", trial_id);
    sqlite3_stmt *s;
    if (status == DT_OK)
        status = prep(st,
                      exp_id ? CKPT_SELECT " WHERE t.experiment_id = ?1"
                                           " ORDER BY c.trial_id, c.batches, c.rowid"
                             : CKPT_SELECT " WHERE c.trial_id = ?1 ORDER BY c.batches, c.rowid",
                      &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, exp_id ? exp_id : trial_id);
        status = select_rows(st, s, ckpt_row, false, "checkpoint", NULL, out);
    }
    unlock(st);
    return status;
}

dt_status dt_store_ckpt_set_state(dt_store *st, const char *uuid, const char *state) {
    if (!uuid) return dt_error(DT_ERR_INVALID, "store: NULL checkpoint uuid");
    if (!in_list(state, CKPT_STATES)) return bad_state("checkpoint", state);
    dt_status status = write_begin(st);
    if (status != DT_OK) return status;
    sqlite3_stmt *s;
    status = prep(st, "UPDATE checkpoints SET state = ?2 WHERE uuid = ?1", &s);
    if (status == DT_OK) {
        sqlite3_bind_text(s, 1, uuid, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 2, state, -1, SQLITE_TRANSIENT);
        status = run(st, s, "setting a checkpoint's state");
        if (status == DT_OK && sqlite3_changes(st->db) == 0)
            status = dt_error(DT_ERR_INVALID,
                              "no checkpoint %s; hint: list them to see which "
                              "exist",
                              uuid);
    }
    return write_end(st, status);
}

/* ---- logs ---- */

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
    status = need(st, NEED_TRIAL, "trial", trial_id);
    sqlite3_stmt *s;
    if (status == DT_OK)
        status = prep(
            st, "INSERT INTO logs (trial_id, rank, time, line) VALUES (?1, ?2, " NOW ", ?3)", &s);
    for (int i = 0; status == DT_OK && i < n; i++) {
        sqlite3_bind_int64(s, 1, trial_id);
        sqlite3_bind_int(s, 2, ranks ? ranks[i] : 0);
        sqlite3_bind_text(s, 3, lines[i], -1, SQLITE_STATIC);
        status = run(st, s, "writing log lines");
    }
    return write_end(st, status);
}

static json_t *log_row(sqlite3_stmt *s) {
    return json_pack("{s:I,s:I,s:i,s:s,s:s}", "id", (json_int_t)sqlite3_column_int64(s, 0),
                     "trial_id", (json_int_t)sqlite3_column_int64(s, 1), "rank",
                     sqlite3_column_int(s, 2), "time", (const char *)sqlite3_column_text(s, 3),
                     "line", (const char *)sqlite3_column_text(s, 4));
}

dt_status dt_store_logs_query(dt_store *st, int64_t exp_id, int64_t trial_id, int64_t after_id,
                              int64_t limit, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    if (!exp_id && !trial_id)
        return dt_error(DT_ERR_INVALID, "store_logs_query: give an experiment or a trial");
    if (limit < 0) return dt_error(DT_ERR_INVALID, "store: negative limit %lld", (long long)limit);
    lock(st);
    dt_status status = trial_id ? need(st, NEED_TRIAL, "trial", trial_id)
                                : need(st, NEED_EXP, "experiment", exp_id);
    sqlite3_stmt *s;
    if (status == DT_OK)
        status = prep(st,
                      trial_id ? "SELECT id, trial_id, rank, time, line FROM logs"
                                 " WHERE trial_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3"
                               : "SELECT l.id, l.trial_id, l.rank, l.time, l.line FROM logs l"
                                 " JOIN trials t ON t.id = l.trial_id WHERE t.experiment_id = ?1"
                                 " AND l.id > ?2 ORDER BY l.id LIMIT ?3",
                      &s);
    if (status == DT_OK) {
        sqlite3_bind_int64(s, 1, trial_id ? trial_id : exp_id);
        sqlite3_bind_int64(s, 2, after_id);
        sqlite3_bind_int64(s, 3, limit ? limit : -1);
        status = select_rows(st, s, log_row, false, "log line", NULL, out);
    }
    unlock(st);
    return status;
}
