/*
 * store_schema.c — the store's schema, in one place, and its forward migrations.
 *
 * PRAGMA user_version is the schema version; MIGRATIONS[k] takes a store from version k to
 * k + 1 and runs in its own transaction together with the new user_version, so a store is
 * always at exactly one version. A new version is a new entry at the end; entries are never
 * edited once released (old stores replay them).
 *
 *   1  experiments, searcher snapshots, trials, metrics (one row per (trial, kind, batches):
 *      indexed columns plus the row's JSON), checkpoints.
 *   2  trial logs; checkpoints' resources (the file list with sizes); indexes for the metric
 *      queries (batch order across kinds, the best validation of an experiment).
 *   3  the best-metric index covers kind: (trial_id, kind, searcher_value) answers an
 *      experiment's and a trial's best validation from the index alone (it replaces the partial
 *      index of version 2).
 *   4  the model definitions of experiments (a tar of the files, store_modeldef.c) and the
 *      login tokens of users (det_auth.c).
 *   5  experiments' config_name: the config file's name as the user gave it (store_modeldef.c).
 *   6  the model registry: models and their versions, each naming a checkpoint by uuid
 *      (store_models.c).
 *   7  a trial's run_start: its run's leader's start time (/proc stat field 22), recorded with
 *      pgid so that a restarted master never signals a pid the kernel gave to another process.
 *   8  chart series packed per (trial, kind, metric name): chunks of (batches, value) doubles
 *      kept by the metric writes, and per (trial, kind) the last batch packed
 *      (series_packed.c).
 *
 * Times are ISO 8601 UTC text; JSON members are stored as compact JSON text.
 */
#include "master/store_impl.h"

#include <stdio.h>
#include <string.h>

static const char *const MIGRATIONS[] = {
    /* 0 -> 1: the core tables (experiment and trial ids are never reused: a deleted
     * experiment's id and paths never name another) */
    "CREATE TABLE experiments ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " name TEXT NOT NULL,"
    " description TEXT NOT NULL,"
    " state TEXT NOT NULL,"
    " config TEXT NOT NULL,"
    " config_text TEXT NOT NULL,"
    " model_dir TEXT NOT NULL,"
    " so_path TEXT,"
    " progress REAL NOT NULL DEFAULT 0,"
    " start_time TEXT NOT NULL,"
    " end_time TEXT,"
    " searcher_metric TEXT NOT NULL,"
    " smaller_is_better INTEGER NOT NULL);"
    "CREATE TABLE searcher_snapshots ("
    " experiment_id INTEGER PRIMARY KEY REFERENCES experiments(id) ON DELETE CASCADE,"
    " snapshot TEXT NOT NULL,"
    " time TEXT NOT NULL);"
    "CREATE TABLE trials ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,"
    " request_id INTEGER NOT NULL,"
    " state TEXT NOT NULL,"
    " hparams TEXT NOT NULL,"
    " seed INTEGER NOT NULL,"
    " restarts INTEGER NOT NULL DEFAULT 0,"
    " run_id INTEGER NOT NULL DEFAULT 0,"
    " pgid INTEGER NOT NULL DEFAULT 0,"
    " batches INTEGER NOT NULL DEFAULT 0,"
    " total_batches INTEGER NOT NULL DEFAULT 0,"
    " start_time TEXT NOT NULL,"
    " end_time TEXT,"
    " best_validation REAL,"
    " ops TEXT,"
    " exit_reason TEXT);"
    "CREATE INDEX trials_experiment ON trials(experiment_id, id);"
    "CREATE TABLE metrics ("
    " id INTEGER PRIMARY KEY,"
    " trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,"
    " kind TEXT NOT NULL,"
    " batches INTEGER NOT NULL,"
    " searcher_value REAL," /* the experiment's searcher metric in this row, or NULL */
    " body TEXT NOT NULL,"  /* the row as reported */
    " UNIQUE (trial_id, kind, batches));"
    "CREATE TABLE checkpoints ("
    " uuid TEXT PRIMARY KEY,"
    " trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,"
    " batches INTEGER NOT NULL,"
    " state TEXT NOT NULL,"
    " path TEXT NOT NULL,"
    " metadata TEXT NOT NULL,"
    " report_time TEXT NOT NULL);"
    "CREATE INDEX checkpoints_trial ON checkpoints(trial_id, batches);",

    /* 1 -> 2: logs, checkpoint resources, metric query indexes */
    "CREATE TABLE logs ("
    " id INTEGER PRIMARY KEY,"
    " trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,"
    " rank INTEGER NOT NULL,"
    " time TEXT NOT NULL,"
    " line TEXT NOT NULL);"
    "CREATE INDEX logs_trial ON logs(trial_id, id);"
    "ALTER TABLE checkpoints ADD COLUMN resources TEXT NOT NULL DEFAULT '{}';"
    "CREATE INDEX metrics_trial_batches ON metrics(trial_id, batches);"
    "CREATE INDEX metrics_validation ON metrics(trial_id, searcher_value)"
    " WHERE kind = 'validation';",

    /* 2 -> 3: the best-metric index with kind in it */
    "CREATE INDEX metrics_kind_value ON metrics(trial_id, kind, searcher_value);"
    "DROP INDEX metrics_validation;",
    /* 3 -> 4: an experiment's model definition as uploaded (a tar of its files), and the
     * tokens handed out by logins */
    "CREATE TABLE model_defs ("
    " experiment_id INTEGER PRIMARY KEY REFERENCES experiments(id) ON DELETE CASCADE,"
    " tar BLOB NOT NULL,"
    " time TEXT NOT NULL);"
    "CREATE TABLE auth_tokens ("
    " token TEXT PRIMARY KEY,"
    " username TEXT NOT NULL,"
    " time TEXT NOT NULL);",
    /* 4 -> 5: the name of the config file an experiment was created from (its messages name
     * it), NULL when the request gave none */
    "ALTER TABLE experiments ADD COLUMN config_name TEXT;",
    /* 5 -> 6: the model registry (a version names its checkpoint by uuid, without a foreign
     * key: deleting an experiment leaves the version, shown as missing its checkpoint) */
    "CREATE TABLE models ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " name TEXT NOT NULL UNIQUE,"
    " description TEXT NOT NULL,"
    " labels TEXT NOT NULL,"
    " creation_time TEXT NOT NULL);"
    "CREATE TABLE model_versions ("
    " model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,"
    " version INTEGER NOT NULL,"
    " checkpoint_uuid TEXT NOT NULL,"
    " creation_time TEXT NOT NULL,"
    " PRIMARY KEY (model_id, version));"
    "CREATE INDEX model_versions_checkpoint ON model_versions(checkpoint_uuid);",
    /* 6 -> 7: with a run's process group, its leader's start time */
    "ALTER TABLE trials ADD COLUMN run_start INTEGER NOT NULL DEFAULT 0;",
    /* 7 -> 8: chart series packed by the metric writes (series_packed.c) */
    "CREATE TABLE metric_series ("
    " trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,"
    " kind TEXT NOT NULL,"
    " name TEXT NOT NULL,"
    " chunk INTEGER NOT NULL,"
    " last_batches INTEGER NOT NULL,"
    " points BLOB NOT NULL,"
    " PRIMARY KEY (trial_id, kind, name, chunk)) WITHOUT ROWID;"
    "CREATE TABLE metric_series_ok ("
    " trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,"
    " kind TEXT NOT NULL,"
    " last_batches INTEGER NOT NULL,"
    " PRIMARY KEY (trial_id, kind)) WITHOUT ROWID;",
};

#define N_MIGRATIONS ((int)(sizeof MIGRATIONS / sizeof MIGRATIONS[0]))

int dt_store_schema_version(void) {
    return N_MIGRATIONS;
}

dt_status dt__store_sqlite_error(sqlite3 *db, int rc, const char *path, const char *what) {
    int prim = rc & 0xff;
    const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    if (prim == SQLITE_NOTADB || prim == SQLITE_CORRUPT)
        return dt_error(DT_ERR_FORMAT,
                        "store %s: %s: %s; hint: the file is not a dtrain store or is damaged: "
                        "move it aside or point DTRAIN_HOME elsewhere",
                        path, what, msg);
    return dt_error(DT_ERR_IO, "store %s: %s: %s", path, what, msg);
}

/* One integer from `sql` (a PRAGMA or a count). */
static int query_int(sqlite3 *db, const char *sql, int *out) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int(s, 0);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(s);
    return rc;
}

dt_status dt__store_schema_probe(sqlite3 *db, const char *path, int *version) {
    int v = 0, n_objects = 0;
    int rc = query_int(db, "PRAGMA user_version", &v);
    if ((rc & 0xff) == SQLITE_NOTADB)
        return dt_error(DT_ERR_FORMAT,
                        "store %s is not a SQLite database (it was left as it is); hint: move "
                        "it aside or point DTRAIN_HOME elsewhere",
                        path);
    if (rc != SQLITE_OK) return dt__store_sqlite_error(db, rc, path, "reading the schema version");
    if (v > N_MIGRATIONS)
        return dt_error(DT_ERR_FORMAT,
                        "store %s is from a newer dtrain (schema %d, this one knows %d); hint: "
                        "upgrade dtrain or point DTRAIN_HOME elsewhere",
                        path, v, N_MIGRATIONS);
    if (v == 0) {
        rc = query_int(db, "SELECT count(*) FROM sqlite_master", &n_objects);
        if (rc != SQLITE_OK) return dt__store_sqlite_error(db, rc, path, "reading the schema");
        if (n_objects > 0)
            return dt_error(DT_ERR_FORMAT,
                            "store %s is a SQLite database of something else (it has tables "
                            "but no dtrain schema version); hint: point DTRAIN_HOME elsewhere",
                            path);
    }
    *version = v;
    return DT_OK;
}

/* Run migration `k` (version k -> k + 1) in one transaction, unless another connection has
 * already done it (the version is read again under the write lock). */
static dt_status migrate_step(sqlite3 *db, const char *path, int k) {
    char what[64];
    snprintf(what, sizeof what, "migrating to schema %d", k + 1);
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return dt__store_sqlite_error(db, rc, path, what);
    int v = 0;
    rc = query_int(db, "PRAGMA user_version", &v);
    if (rc == SQLITE_OK && v == k) {
        rc = sqlite3_exec(db, MIGRATIONS[k], NULL, NULL, NULL);
        if (rc == SQLITE_OK) {
            char sql[48];
            snprintf(sql, sizeof sql, "PRAGMA user_version = %d", k + 1);
            rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        }
    }
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_OK) return DT_OK;
    dt_status st = dt__store_sqlite_error(db, rc, path, what);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

dt_status dt__store_schema_migrate(sqlite3 *db, const char *path, int target) {
    if (target < 0 || target > N_MIGRATIONS)
        return dt_error(DT_ERR_INVALID, "store %s: no schema version %d (this dtrain knows 1..%d)",
                        path, target, N_MIGRATIONS);
    int v = 0;
    dt_status st = dt__store_schema_probe(db, path, &v);
    for (int k = v; st == DT_OK && k < target; k++) st = migrate_step(db, path, k);
    return st;
}
