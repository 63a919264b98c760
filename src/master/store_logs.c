/*
 * store_logs.c — trial log lines in the store (store.h): appended per trial with their rank and
 * time, read after an id per trial or per experiment.
 */
#include "master/store_impl.h"

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
    dt_status status = dt__store_write_begin(st);
    if (status != DT_OK) return status;
    status = dt__store_need(st, OF_TRIAL(trial_id));
    for (int i = 0; status == DT_OK && i < n; i++)
        status = dt__store_exec_args(
            st, "INSERT INTO logs (trial_id, rank, time, line) VALUES (?1, ?2, " NOW ", ?3)",
            "writing log lines",
            ARGS(V_INT(trial_id), V_INT(ranks ? ranks[i] : 0), V_TEXT(lines[i])));
    return dt__store_write_end(st, status);
}

dt_status dt_store_logs_query(dt_store *st, int64_t exp_id, int64_t trial_id, int64_t after_id,
                              int64_t limit, json_t **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "store: NULL out");
    *out = NULL;
    if (!exp_id && !trial_id)
        return dt_error(DT_ERR_INVALID, "store_logs_query: give an experiment or a trial");
    if (limit < 0) return dt_error(DT_ERR_INVALID, "store: negative limit %lld", (long long)limit);
    return dt__store_select_json(
        st, &LOG_ROWS, trial_id ? OF_TRIAL(trial_id) : OF_EXP(exp_id), NULL,
        trial_id ? "SELECT id, trial_id, rank, time, line FROM logs"
                   " WHERE trial_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3"
                 : "SELECT l.id, l.trial_id, l.rank, l.time, l.line FROM logs l"
                   " JOIN trials t ON t.id = l.trial_id WHERE t.experiment_id = ?1"
                   " AND l.id > ?2 ORDER BY l.id LIMIT ?3",
        ARGS(V_INT(trial_id ? trial_id : exp_id), V_INT(after_id), V_INT(limit ? limit : -1)), out);
}
