/*
 * store_impl.h — the store's internals shared by its files (store.c: the connection, open,
 * groups; store_sql.c: the lock, statements, bound values, the savepoint write path, rows as
 * JSON; store_exps.c, store_trials.c, store_metrics.c, store_checkpoints.c, store_logs.c: one
 * kind of row each), store_schema.c, gc.c and the tests: the schema steps, building a store at
 * an older schema version, and the SQLite handle.
 */
#ifndef DTRAIN_MASTER_STORE_IMPL_H
#define DTRAIN_MASTER_STORE_IMPL_H

#include "master/store.h"
#include "master/series_cache.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

/* DT_ERR_FORMAT for a file that is not a database (or is damaged), else DT_ERR_IO; the message
 * names the store file, what was being done and SQLite's reason. Returns the status. */
dt_status dt__store_sqlite_error(sqlite3 *db, int rc, const char *path, const char *what);

/* The schema version of the open database `db` (at `path`, for messages), checked before
 * anything is written: DT_ERR_FORMAT for a file that is not SQLite, a SQLite database that is
 * not a dtrain store, or a schema newer than this build knows; the file is left untouched. */
dt_status dt__store_schema_probe(sqlite3 *db, const char *path, int *version);

/* Bring `db` forward from its version to `target` (<= dt_store_schema_version()), one migration
 * per transaction; a failed step is rolled back and leaves the store at the step before it. */
dt_status dt__store_schema_migrate(sqlite3 *db, const char *path, int target);

/* dt_store_open, migrating no further than schema `version` (tests build old stores with it). */
dt_status dt__store_open_at_version(const char *path, int version, dt_store **out);

/* The SQLite connection (for tests: raw SQL on an old schema, integrity checks). */
sqlite3 *dt__store_db(dt_store *st);

/* ---- what the store's files share ---- */

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

void dt__store_lock(dt_store *st);
void dt__store_unlock(dt_store *st);
/* Metric rows may have changed (a write or an undo): forget what was read of them. */
void dt__store_metrics_changed(dt_store *st);

/* SQLite's error `rc` while `what`, naming the store (dt__store_sqlite_error). */
dt_status dt__store_sql_error(dt_store *st, int rc, const char *what);

/* ---- statements ---- */

/* The prepared statement for `sql` (prepared on first use). On error *out = NULL. */
dt_status dt__store_prep(dt_store *st, const char *sql, sqlite3_stmt **out);
/* Ready a used statement for its next use. */
void dt__store_done(sqlite3_stmt *s);

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

/* The prepared statement for `sql` with v[0..n) bound. On error *out = NULL. */
dt_status dt__store_prep_args(dt_store *st, const char *sql, const bval *v, int n,
                              sqlite3_stmt **out);
/* Run a statement that returns no rows (or ignores them); `doing` names it in errors. */
dt_status dt__store_run(dt_store *st, sqlite3_stmt *s, const char *doing);
/* Run `sql` with v[0..n) bound; errors name `doing`, or the SQL itself when it is NULL. */
dt_status dt__store_exec_args(dt_store *st, const char *sql, const char *doing, const bval *v,
                              int n);
/* exec_args without values, errors naming the SQL. */
dt_status dt__store_exec(dt_store *st, const char *sql);

/* ---- rows that must exist ---- */

/* A missing row: DT_ERR_INVALID "no <what> <key>" (key: "with id N", or a uuid). */
dt_status dt__store_no_row(const char *what, const char *key);
const char *dt__store_id_key(char *buf, size_t size, int64_t id);
/* "with id N" for no_row, in a buffer that lives to the end of the enclosing block. */
#define ID_KEY(id) dt__store_id_key((char[32]){0}, 32, (id))

/* Run `sql` with v[0..n) bound up to its first row. DT_OK with *row the statement on that row
 * (the caller reads it and calls dt__store_done(*row)); no row: with `what`, DT_ERR_INVALID naming
 * `what` and `key`, without, DT_OK and *row = NULL. SQLite's errors name `doing`. On an error
 * *row = NULL. */
dt_status dt__store_first_row(dt_store *st, const char *sql, const char *doing, const char *what,
                              const char *key, const bval *v, int n, sqlite3_stmt **row);

/* The row a call is about: an experiment or a trial, by id. */
typedef struct owner {
    bool trial;
    int64_t id;
} owner;
#define OF_EXP(id) (&(owner){false, (id)})
#define OF_TRIAL(id) (&(owner){true, (id)})

/* DT_OK when the owner row exists, else DT_ERR_INVALID naming it. */
dt_status dt__store_need(dt_store *st, const owner *o);

/* ---- writes: a savepoint each ---- */

/* Lock and open the write's savepoint. On error the lock is released. */
dt_status dt__store_write_begin(dt_store *st);
/* Keep the write when status is DT_OK (commit, outside a group), else undo it; unlock. Returns
 * the status of the write, or of the commit when that fails. */
dt_status dt__store_write_end(dt_store *st, dt_status status);
/* One write statement in its own savepoint: check the owner row (o, may be NULL), run `sql`
 * with v[0..n) bound (SQLite's errors name `doing`, or the SQL when NULL); with `what`, a run
 * that changed no row fails with DT_ERR_INVALID naming `what` and `key`. *id (may be NULL)
 * gets the new rowid. A failed write changes nothing. */
dt_status dt__store_write_stmt(dt_store *st, const owner *o, const char *sql, const char *doing,
                               const char *what, const char *key, int64_t *id, const bval *v,
                               int n);

/* Insert a row (of owner o, may be NULL); *id (may be NULL) gets its rowid. */
#define WRITE_NEW(st, o, sql, doing, id, ...)                                                      \
    dt__store_write_stmt(st, o, sql, doing, NULL, NULL, id, ARGS(__VA_ARGS__))
/* Update or delete the existing row `what` `key`. */
#define WRITE_ROW(st, sql, doing, what, key, ...)                                                  \
    dt__store_write_stmt(st, NULL, sql, doing, what, key, NULL, ARGS(__VA_ARGS__))

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

/* Under the lock: check the owner row (o, may be NULL), then select_rows of `sql` with
 * v[0..n) bound. */
dt_status dt__store_select_json(dt_store *st, const row_kind *k, const owner *o, const char *key,
                                const char *sql, const bval *v, int n, json_t **out);

/* ---- states and lists ---- */

/* s is one of the NULL-terminated list's strings. */
bool dt__store_in_list(const char *s, const char *const *list);
/* DT_ERR_INVALID: `state` is not a `what` ("experiment", "trial", "checkpoint") state. */
dt_status dt__store_bad_state(const char *what, const char *state);

/* Step `s` to its end (then done with it), collecting its first column: *ids (malloc'd) and
 * *count. On error *ids is NULL and *count 0; SQLite's errors name `doing`. */
dt_status dt__store_read_ids(dt_store *st, sqlite3_stmt *s, const char *doing, int64_t **ids,
                             int *count);

#endif
