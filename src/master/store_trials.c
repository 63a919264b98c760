/*
 * store_trials.c — trials in the store (store.h): their rows with the latest checkpoint and
 * validation, state, the run that carries them, restarts, progress and queued operations.
 */
#include "master/store_impl.h"
#include "master/states.h"

#include <stdint.h>

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

/* A trial's state name: every state but DELETING, which only an experiment passes through. */
static bool trial_state(const char *name, m_state *s) {
    return m_state_parse(name, s) && *s != M_DELETING;
}

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
    return dt__store_select_json(st, &TRIAL_ROWS, NULL, ID_KEY(id), TRIAL_SELECT " WHERE t.id = ?1",
                                 ARGS(V_INT(id)), out);
}

dt_status dt_store_trial_list(dt_store *st, int64_t exp_id, json_t **out) {
    return dt__store_select_json(st, &TRIAL_ROWS, OF_EXP(exp_id), NULL,
                                 TRIAL_SELECT " WHERE t.experiment_id = ?1 ORDER BY t.id",
                                 ARGS(V_INT(exp_id)), out);
}

dt_status dt_store_trial_set_state(dt_store *st, int64_t id, const char *state,
                                   const char *exit_reason) {
    m_state s;
    if (!trial_state(state, &s)) return dt__store_bad_state("trial", state);
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
    dt_status status = dt__store_write_begin(st);
    if (status != DT_OK) return status;
    sqlite3_stmt *s;
    status = dt__store_first_row(
        st, "UPDATE trials SET restarts = restarts + 1 WHERE id = ?1 RETURNING restarts",
        "counting a restart", "trial", ID_KEY(id), ARGS(V_INT(id)), &s);
    if (s) {
        if (restarts) *restarts = sqlite3_column_int64(s, 0);
        status = dt__store_run(st, s, "counting a restart");
    }
    return dt__store_write_end(st, status);
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
