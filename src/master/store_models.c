/*
 * store_models.c — the model registry's tables (store_schema.c version 5) and the questions GC
 * and checkpoint delete ask of the store: what holds a checkpoint, and removing its row
 * (store_models.h). Each call runs in one store group (dt_store_begin), which also holds the
 * store's lock over the raw SQL; reads end in a rollback, writes in a commit.
 */
#include "master/store_impl.h"
#include "master/store_models.h"
#include "master/states.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOW "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
#define MAX_NAME 128

/* A bound value: text when s is set, else the integer. */
typedef struct arg {
    const char *s;
    int64_t i;
} arg;
#define T(text)                                                                                    \
    { (text), 0 }
#define I(n)                                                                                       \
    { NULL, (n) }

/* Prepare `sql` and bind args[0..n) as ?1..?n; DT_ERR_IO naming `what` when SQLite refuses. */
static dt_status prepare(dt_store *st, const char *sql, const char *what, const arg *args, int n,
                         sqlite3_stmt **s) {
    sqlite3 *db = dt__store_db(st);
    int rc = sqlite3_prepare_v2(db, sql, -1, s, NULL);
    if (rc != SQLITE_OK) return dt__store_sqlite_error(db, rc, "(the store)", what);
    for (int k = 0; k < n; k++)
        if (args[k].s)
            sqlite3_bind_text(*s, k + 1, args[k].s, -1, SQLITE_STATIC);
        else
            sqlite3_bind_int64(*s, k + 1, args[k].i);
    return DT_OK;
}

/* Column k as JSON: numbers and text as such (text parsed when `parse`), NULL as null. */
static json_t *column(sqlite3_stmt *s, int k, bool parse) {
    switch (sqlite3_column_type(s, k)) {
    case SQLITE_INTEGER:
        return json_integer(sqlite3_column_int64(s, k));
    case SQLITE_FLOAT:
        return json_real(sqlite3_column_double(s, k));
    case SQLITE_TEXT: {
        const char *t = (const char *)sqlite3_column_text(s, k);
        json_t *v = parse ? json_loads(t, JSON_DECODE_ANY, NULL) : NULL;
        return v ? v : json_string(t);
    }
    default:
        return json_null();
    }
}

/* Every row of `sql` as an object keyed by the column names; columns named in `parsed`
 * (space-separated) hold JSON text. The statement is finalized. */
static dt_status query(dt_store *st, const char *sql, const char *what, const arg *args, int n,
                       const char *parsed, json_t **out) {
    *out = NULL;
    sqlite3_stmt *s = NULL;
    dt_status status = prepare(st, sql, what, args, n, &s);
    json_t *rows = json_array();
    int rc = SQLITE_DONE;
    while (status == DT_OK && rows && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *row = json_object();
        for (int k = 0; row && k < sqlite3_column_count(s); k++) {
            const char *name = sqlite3_column_name(s, k);
            size_t len = strlen(name);
            const char *hit = strstr(parsed, name);
            bool parse = hit && (hit[len] == ' ' || hit[len] == 0);
            json_object_set_new(row, name, column(s, k, parse));
        }
        if (!row || json_array_append_new(rows, row))
            status = dt_error(DT_ERR_OOM, "out of memory %s", what);
    }
    if (status == DT_OK && !rows) status = dt_error(DT_ERR_OOM, "out of memory %s", what);
    if (status == DT_OK && rc != SQLITE_DONE)
        status = dt__store_sqlite_error(dt__store_db(st), rc, "(the store)", what);
    sqlite3_finalize(s);
    if (status == DT_OK)
        *out = rows;
    else
        json_decref(rows);
    return status;
}

/* query() inside a read group. */
static dt_status read_rows(dt_store *st, const char *sql, const char *what, const arg *args, int n,
                           const char *parsed, json_t **out) {
    *out = NULL;
    dt_status status = dt_store_begin(st);
    if (status != DT_OK) return status;
    status = query(st, sql, what, args, n, parsed, out);
    DT_KEEP_ERROR(dt_store_rollback(st));
    return status;
}

/* One statement that changes rows; *changes gets how many. */
static dt_status exec(dt_store *st, const char *sql, const char *what, const arg *args, int n,
                      int *changes) {
    sqlite3_stmt *s = NULL;
    dt_status status = prepare(st, sql, what, args, n, &s);
    int rc = status == DT_OK ? sqlite3_step(s) : SQLITE_DONE;
    if (status == DT_OK && rc != SQLITE_DONE)
        status = dt__store_sqlite_error(dt__store_db(st), rc, "(the store)", what);
    sqlite3_finalize(s);
    if (changes) *changes = sqlite3_changes(dt__store_db(st));
    return status;
}

static dt_status check_name(const char *name) {
    size_t n = name ? strlen(name) : 0;
    bool ok = n > 0 && n <= MAX_NAME && name[0] != '.';
    for (size_t k = 0; ok && k < n; k++) {
        char c = name[k];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-';
    }
    if (ok) return DT_OK;
    return dt_error(DT_ERR_INVALID,
                    "'%.*s' is not a model name; hint: use 1 to %d letters, digits, '.', '_' "
                    "or '-', not starting with '.'",
                    MAX_NAME, name ? name : "", MAX_NAME);
}

dt_status dt_store_model_create(dt_store *st, const char *name, const char *description,
                                const json_t *labels, int64_t *id) {
    dt_status status = check_name(name);
    if (status != DT_OK) return status;
    size_t i;
    const json_t *l;
    if (labels && !json_is_array(labels))
        return dt_error(DT_ERR_INVALID, "model %s: labels must be a list of strings", name);
    json_array_foreach(labels, i, l) {
        if (!json_is_string(l) || !*json_string_value(l))
            return dt_error(DT_ERR_INVALID, "model %s: label %zu is not a non-empty string", name,
                            i);
    }
    char *text = labels ? json_dumps(labels, JSON_COMPACT) : strdup("[]");
    if (!text) return dt_error(DT_ERR_OOM, "out of memory creating model %s", name);
    if ((status = dt_store_begin(st)) != DT_OK) {
        free(text);
        return status;
    }
    json_t *dup = NULL;
    const arg a[] = {T(name), T(description ? description : ""), T(text)};
    status =
        query(st, "SELECT id FROM models WHERE name = ?1", "looking up a model", a, 1, "", &dup);
    if (status == DT_OK && json_array_size(dup))
        status = dt_error(DT_ERR_STATE,
                          "a model named %s already exists; hint: pick another name, or add a "
                          "version to it with dtrain model register-version %s UUID",
                          name, name);
    if (status == DT_OK)
        status = exec(st,
                      "INSERT INTO models (name, description, labels, creation_time)"
                      " VALUES (?1, ?2, ?3, " NOW ")",
                      "creating a model", a, 3, NULL);
    if (status == DT_OK && id) *id = sqlite3_last_insert_rowid(dt__store_db(st));
    json_decref(dup);
    free(text);
    if (status != DT_OK) {
        DT_KEEP_ERROR(dt_store_rollback(st));
        return status;
    }
    return dt_store_commit(st);
}

#define MODEL_SELECT                                                                               \
    "SELECT m.id AS id, m.name AS name, m.description AS description, m.labels AS labels,"         \
    " m.creation_time AS creation_time,"                                                           \
    " (SELECT count(*) FROM model_versions v WHERE v.model_id = m.id) AS num_versions,"            \
    " coalesce((SELECT max(v.creation_time) FROM model_versions v WHERE v.model_id = m.id),"       \
    " m.creation_time) AS last_updated FROM models m"

dt_status dt_store_model_list(dt_store *st, json_t **out) {
    return read_rows(st, MODEL_SELECT " ORDER BY m.name", "listing models", NULL, 0, "labels", out);
}

static dt_status no_model(const char *name) {
    return dt_error(DT_ERR_INVALID,
                    "no model named %s; hint: dtrain model list shows the models, dtrain model "
                    "create %s makes it",
                    name, name);
}

dt_status dt_store_model_get(dt_store *st, const char *name, json_t **out) {
    *out = NULL;
    json_t *rows = NULL;
    const arg a[] = {T(name ? name : "")};
    dt_status status =
        read_rows(st, MODEL_SELECT " WHERE m.name = ?1", "reading a model", a, 1, "labels", &rows);
    if (status == DT_OK && !json_array_size(rows)) status = no_model(name ? name : "");
    if (status == DT_OK) *out = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    return status;
}

dt_status dt_store_model_versions(dt_store *st, const char *name, json_t **out) {
    *out = NULL;
    json_t *model = NULL;
    dt_status status = dt_store_model_get(st, name, &model);
    json_decref(model);
    if (status != DT_OK) return status;
    const arg a[] = {T(name)};
    return read_rows(
        st,
        "SELECT m.name AS model, v.version AS version, v.checkpoint_uuid AS checkpoint_uuid,"
        " v.creation_time AS creation_time, c.state AS checkpoint_state, c.trial_id AS trial_id,"
        " t.experiment_id AS experiment_id, c.batches AS batches,"
        " json_extract(mt.body, '$.metrics') AS metrics"
        " FROM model_versions v JOIN models m ON m.id = v.model_id"
        " LEFT JOIN checkpoints c ON c.uuid = v.checkpoint_uuid"
        " LEFT JOIN trials t ON t.id = c.trial_id"
        " LEFT JOIN metrics mt ON mt.trial_id = c.trial_id AND mt.kind = 'validation'"
        "  AND mt.batches = c.batches"
        " WHERE m.name = ?1 ORDER BY v.version",
        "listing a model's versions", a, 1, "metrics", out);
}

/* Inside a write group: the checkpoint exists and is COMPLETED. */
static dt_status registrable(dt_store *st, const char *uuid) {
    json_t *rows = NULL;
    const arg a[] = {T(uuid)};
    dt_status status = query(st, "SELECT state FROM checkpoints WHERE uuid = ?1",
                             "looking up a checkpoint", a, 1, "", &rows);
    const char *state = json_string_value(json_object_get(json_array_get(rows, 0), "state"));
    if (status == DT_OK && !state)
        status = dt_error(DT_ERR_INVALID,
                          "no checkpoint has the uuid '%s'; hint: dtrain checkpoint list EXP "
                          "shows an experiment's checkpoints",
                          uuid);
    else if (status == DT_OK && !m_ckpt_state_usable(state))
        status = dt_error(DT_ERR_STATE,
                          "checkpoint %s is %s, not COMPLETED: its files are gone; hint: "
                          "register a COMPLETED checkpoint (dtrain checkpoint list EXP)",
                          uuid, state);
    json_decref(rows);
    return status;
}

dt_status dt_store_model_register(dt_store *st, const char *name, const char *uuid,
                                  int64_t *version) {
    if (!name || !uuid || !*uuid)
        return dt_error(DT_ERR_INVALID, "registering a version needs a model name and a uuid");
    dt_status status = dt_store_begin(st);
    if (status != DT_OK) return status;
    json_t *rows = NULL;
    const arg a[] = {T(name)};
    status = query(st,
                   "SELECT m.id AS id, coalesce(max(v.version), 0) + 1 AS next FROM models m"
                   " LEFT JOIN model_versions v ON v.model_id = m.id WHERE m.name = ?1"
                   " GROUP BY m.id",
                   "looking up a model", a, 1, "", &rows);
    const json_t *row = json_array_get(rows, 0);
    if (status == DT_OK && !row) status = no_model(name);
    if (status == DT_OK) status = registrable(st, uuid);
    int64_t next = json_integer_value(json_object_get(row, "next"));
    const arg b[] = {I(json_integer_value(json_object_get(row, "id"))), I(next), T(uuid)};
    if (status == DT_OK)
        status = exec(st,
                      "INSERT INTO model_versions (model_id, version, checkpoint_uuid,"
                      " creation_time) VALUES (?1, ?2, ?3, " NOW ")",
                      "registering a model version", b, 3, NULL);
    json_decref(rows);
    if (status != DT_OK) {
        DT_KEEP_ERROR(dt_store_rollback(st));
        return status;
    }
    if (version) *version = next;
    return dt_store_commit(st);
}

/* One query whose three parts are the three kinds of holder (store_models.h), in one place. */
dt_status dt_store_ckpt_holders(dt_store *st, const char *uuid, json_t **out) {
    *out = NULL;
    if (!uuid) return dt_error(DT_ERR_INVALID, "store: NULL checkpoint uuid");
    /* the terminal states, from the one table of them (states.c) */
    char terminal[160] = "";
    for (int s = 0; s < M_N_STATES; s++)
        if (m_state_terminal((m_state)s))
            snprintf(terminal + strlen(terminal), sizeof terminal - strlen(terminal), "%s'%s'",
                     *terminal ? "," : "", m_state_name((m_state)s));
    char sql[2048];
    snprintf(sql, sizeof sql,
             "SELECT m.name AS model, v.version AS version, NULL AS experiment_id, NULL AS key"
             " FROM model_versions v JOIN models m ON m.id = v.model_id"
             " WHERE v.checkpoint_uuid = ?1"
             " UNION ALL"
             " SELECT NULL, NULL, e.id, 'searcher.source_checkpoint_uuid' FROM experiments e"
             " WHERE e.state NOT IN (%s)"
             " AND json_extract(e.config, '$.searcher.source_checkpoint_uuid') = ?1"
             " UNION ALL"
             " SELECT NULL, NULL, e.id, 'searcher.source_trial_id'"
             " FROM experiments e JOIN checkpoints c ON c.uuid = ?1"
             " WHERE e.state NOT IN (%s)"
             " AND json_extract(e.config, '$.searcher.source_trial_id') = c.trial_id"
             " AND c.uuid = (SELECT l.uuid FROM checkpoints l WHERE l.trial_id = c.trial_id"
             "  AND l.state = 'COMPLETED' ORDER BY l.batches DESC, l.rowid DESC LIMIT 1)"
             " ORDER BY 3, 1, 2",
             terminal, terminal);
    json_t *rows = NULL;
    const arg a[] = {T(uuid)};
    dt_status status = read_rows(st, sql, "finding what holds a checkpoint", a, 1, "", &rows);
    if (status != DT_OK) return status;
    /* each row keeps only the members of its kind */
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r) {
        bool model = json_is_string(json_object_get(r, "model"));
        json_object_del(r, model ? "experiment_id" : "model");
        json_object_del(r, model ? "key" : "version");
    }
    *out = rows;
    return DT_OK;
}

dt_status dt_store_ckpt_delete(dt_store *st, const char *uuid) {
    if (!uuid) return dt_error(DT_ERR_INVALID, "store: NULL checkpoint uuid");
    dt_status status = dt_store_begin(st);
    if (status != DT_OK) return status;
    int n = 0;
    const arg a[] = {T(uuid)};
    status = exec(st, "DELETE FROM checkpoints WHERE uuid = ?1", "deleting a checkpoint", a, 1, &n);
    if (status == DT_OK && n == 0)
        status = dt_error(DT_ERR_INVALID, "no checkpoint has the uuid '%s'", uuid);
    if (status != DT_OK) {
        DT_KEEP_ERROR(dt_store_rollback(st));
        return status;
    }
    return dt_store_commit(st);
}
