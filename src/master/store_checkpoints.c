/*
 * store_checkpoints.c — checkpoints in the store (store.h): reported by uuid (a retried report
 * updates the row), read with their validation metric, listed per experiment or trial, and
 * their state.
 */
#include "master/store_impl.h"
#include "master/states.h"

#include <stdio.h>

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
    dt_status status = dt__store_write_begin(st);
    if (status != DT_OK) return status;
    status = dt__store_need(st, OF_TRIAL(trial_id));
    /* the same report again (a retried request) updates the row; another trial's uuid fails */
    json_t *empty = json_object();
    if (status == DT_OK)
        status = dt__store_exec_args(
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
    return dt__store_write_end(st, status);
}

dt_status dt_store_ckpt_get(dt_store *st, const char *uuid, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    if (!uuid) return dt_error(DT_ERR_INVALID, "store: NULL checkpoint uuid");
    char key[96];
    snprintf(key, sizeof key, "%.80s", uuid);
    return dt__store_select_json(st, &CKPT_ROWS, NULL, key, CKPT_SELECT " WHERE c.uuid = ?1",
                                 ARGS(V_TEXT(uuid)), out);
}

dt_status dt_store_ckpt_list(dt_store *st, int64_t exp_id, int64_t trial_id, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    if ((exp_id != 0) == (trial_id != 0))
        return dt_error(DT_ERR_INVALID, "store_ckpt_list: give an experiment or a trial");
    return dt__store_select_json(st, &CKPT_ROWS, exp_id ? OF_EXP(exp_id) : OF_TRIAL(trial_id), NULL,
                                 exp_id ? CKPT_SELECT " WHERE t.experiment_id = ?1"
                                                      " ORDER BY c.trial_id, c.batches, c.rowid"
                                        : CKPT_SELECT
                                     " WHERE c.trial_id = ?1 ORDER BY c.batches, c.rowid",
                                 ARGS(V_INT(exp_id ? exp_id : trial_id)), out);
}

dt_status dt_store_ckpt_set_state(dt_store *st, const char *uuid, const char *state) {
    if (!uuid) return dt_error(DT_ERR_INVALID, "store: NULL checkpoint uuid");
    m_ckpt_state cs;
    if (!m_ckpt_state_parse(state, &cs)) return dt__store_bad_state("checkpoint", state);
    return WRITE_ROW(st, "UPDATE checkpoints SET state = ?2 WHERE uuid = ?1",
                     "setting a checkpoint's state", "checkpoint", uuid, V_TEXT(uuid),
                     V_TEXT(state));
}
