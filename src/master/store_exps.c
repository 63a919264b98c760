/*
 * store_exps.c — experiments in the store (store.h): their rows with the counts and best metric
 * the API shows, state and progress, the built model's path, and the searcher's snapshot.
 */
#include "master/store_impl.h"
#include "master/states.h"

#include <stdio.h>
#include <string.h>

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

/* An experiment's state name (states.h): every state. */
static bool exp_state(const char *name, m_state *s) {
    return m_state_parse(name, s);
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
    return dt__store_select_json(st, &EXP_ROWS, NULL, ID_KEY(id), EXP_SELECT " WHERE e.id = ?1",
                                 ARGS(V_INT(id)), out);
}

dt_status dt_store_exp_list(dt_store *st, json_t **out) {
    return dt__store_select_json(st, &EXP_ROWS, NULL, NULL, EXP_SELECT " ORDER BY e.id DESC", NULL,
                                 0, out);
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
            return dt__store_bad_state("experiment", states[i]);
        }
        json_array_append_new(arr, json_string(states[i]));
    }
    if (!arr) return dt_error(DT_ERR_OOM, "store %s", st->path);
    dt__store_lock(st);
    sqlite3_stmt *s;
    dt_status status = dt__store_prep_args(st,
                                           "SELECT id FROM experiments WHERE state IN"
                                           " (SELECT value FROM json_each(?1)) ORDER BY id",
                                           ARGS(V_JSON(arr)), &s);
    if (status == DT_OK) status = dt__store_read_ids(st, s, "listing experiments", ids, count);
    dt__store_unlock(st);
    json_decref(arr);
    return status;
}

dt_status dt_store_exp_set_state(dt_store *st, int64_t id, const char *state) {
    m_state s;
    if (!exp_state(state, &s)) return dt__store_bad_state("experiment", state);
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
    dt__store_lock(st);
    dt_status status = WRITE_ROW(st, "DELETE FROM experiments WHERE id = ?1", NULL, "experiment",
                                 ID_KEY(id), V_INT(id));
    if (status == DT_OK) dt__store_metrics_changed(st); /* its trials' rows are gone */
    dt__store_unlock(st);
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
    dt__store_lock(st);
    dt_status status = dt__store_need(st, OF_EXP(exp_id));
    sqlite3_stmt *s = NULL;
    if (status == DT_OK)
        status = dt__store_first_row(
            st, "SELECT snapshot FROM searcher_snapshots WHERE experiment_id = ?1",
            "loading a searcher snapshot", NULL, NULL, ARGS(V_INT(exp_id)), &s);
    if (s) {
        const char *t = (const char *)sqlite3_column_text(s, 0);
        json_error_t jerr;
        *out = t ? json_loads(t, JSON_DECODE_ANY, &jerr) : NULL;
        if (!*out)
            status =
                dt_error(DT_ERR_FORMAT, "store %s: experiment %lld's searcher snapshot is not JSON",
                         st->path, (long long)exp_id);
        dt__store_done(s);
    }
    dt__store_unlock(st);
    return status;
}
