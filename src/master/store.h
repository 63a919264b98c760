/*
 * store.h — the experiment store: one SQLite file, written by the master only.
 *
 * WAL journal, foreign keys on, a busy timeout; the schema is versioned with PRAGMA
 * user_version and brought forward by migrations (store_schema.c) when opened. Reads return
 * jansson values shaped as the REST API sends them (docs/api.md), so handlers pass them on.
 * Every write is one transaction (dt_store_begin / dt_store_commit group several); metric
 * and log rows arrive in batches and go in together.
 *
 * States are strings, as the API shows them: experiments ACTIVE, PAUSED, STOPPING_COMPLETED,
 * STOPPING_CANCELED, STOPPING_KILLED, STOPPING_ERROR, COMPLETED, CANCELED, ERROR, DELETING;
 * trials ACTIVE, PAUSED, STOPPING_COMPLETED, STOPPING_CANCELED, STOPPING_KILLED,
 * STOPPING_ERROR, COMPLETED, CANCELED, ERROR; checkpoints COMPLETED, DELETED.
 *
 * Errors: DT_ERR_IO with SQLite's message and the file name; DT_ERR_FORMAT for a file that
 * is not a SQLite database or holds a newer schema than this dtrain knows; DT_ERR_INVALID
 * for an unknown id (the message names it). A failed write changes nothing.
 */
#ifndef DTRAIN_MASTER_STORE_H
#define DTRAIN_MASTER_STORE_H

#include "dtrain/base.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct dt_store dt_store;

/* The schema version this build writes. */
int dt_store_schema_version(void);

/* Open (creating it and its directory if missing) and migrate the store at `path`. */
dt_status dt_store_open(const char *path, dt_store **out);
void dt_store_close(dt_store *st);
/* PRAGMA integrity_check: DT_OK when "ok", else DT_ERR_FORMAT with its first line. */
dt_status dt_store_check(dt_store *st);

/* Group writes into one transaction (nesting is not supported). */
dt_status dt_store_begin(dt_store *st);
dt_status dt_store_commit(dt_store *st);
void dt_store_rollback(dt_store *st);

/* ---- experiments ----
 * An experiment row: {"id","name","description","state","config" (object),"config_text"
 * (the YAML as submitted),"model_dir","progress","start_time","end_time" (ISO 8601 UTC, end
 * null while running),"searcher_metric","smaller_is_better","num_trials","best_metric"
 * (the best searcher metric of its trials or null)}. */
dt_status dt_store_exp_insert(dt_store *st, const json_t *config, const char *config_text,
                              const char *model_dir, int64_t *id);
dt_status dt_store_exp_get(dt_store *st, int64_t id, json_t **out);
/* All experiments, newest first (an array). */
dt_status dt_store_exp_list(dt_store *st, json_t **out);
/* Ids of experiments in any of the `n` states. */
dt_status dt_store_exp_ids(dt_store *st, const char *const *states, int n, int64_t **ids,
                           int *count);
/* A terminal state also sets end_time. */
dt_status dt_store_exp_set_state(dt_store *st, int64_t id, const char *state);
dt_status dt_store_exp_set_progress(dt_store *st, int64_t id, double progress);
/* Where the model directory was built (the .so every trial of it runs). */
dt_status dt_store_exp_set_build(dt_store *st, int64_t id, const char *so_path);
/* Delete the experiment and everything of it (trials, metrics, checkpoint rows, logs,
 * snapshots). The caller removes the files first. */
dt_status dt_store_exp_delete(dt_store *st, int64_t id);

/* The searcher snapshot of an experiment (dt_searcher_save) and its pending operations. */
dt_status dt_store_searcher_save(dt_store *st, int64_t exp_id, const json_t *snapshot);
/* *out = NULL when none was saved. */
dt_status dt_store_searcher_load(dt_store *st, int64_t exp_id, json_t **out);

/* ---- trials ----
 * A trial row: {"id","experiment_id","request_id","state","hparams" (object),"seed",
 * "restarts","run_id","pgid" (the run's launcher handle: local process group or Slurm job
 * id; the column keeps its first name),"batches" (steps completed as last reported),
 * "total_batches","start_time","end_time","best_validation" (searcher metric or null),
 * "latest_checkpoint" (uuid or null),"ops" (the master's per-trial searcher state, opaque
 * JSON),"exit_reason" (null or text)}. */
dt_status dt_store_trial_insert(dt_store *st, int64_t exp_id, int64_t request_id,
                                const json_t *hparams, uint64_t seed, int64_t *id);
dt_status dt_store_trial_get(dt_store *st, int64_t id, json_t **out);
/* The trials of an experiment in id order (an array). */
dt_status dt_store_trial_list(dt_store *st, int64_t exp_id, json_t **out);
dt_status dt_store_trial_set_state(dt_store *st, int64_t id, const char *state,
                                   const char *exit_reason /* NULL: unchanged */);
/* A new run of the trial starts: run_id, and its launcher handle to clean up after a crash. */
dt_status dt_store_trial_set_run(dt_store *st, int64_t id, int64_t run_id, int64_t pgid);
/* As dt_store_trial_set_run, with the start time that names the run's process with its pgid
 * (the launcher's handle_start; 0: none needed). DT_ERR_INVALID beyond 2^63. */
dt_status dt_store_trial_set_run_handle(dt_store *st, int64_t id, int64_t run_id, int64_t pgid,
                                        uint64_t start);
dt_status dt_store_trial_add_restart(dt_store *st, int64_t id, int64_t *restarts);
dt_status dt_store_trial_set_progress(dt_store *st, int64_t id, int64_t batches,
                                      int64_t total_batches);
dt_status dt_store_trial_set_ops(dt_store *st, int64_t id, const json_t *ops);
dt_status dt_store_trial_set_best(dt_store *st, int64_t id, double best_validation);

/* ---- metrics ----
 * `rows` is an array of {"kind":"training"|"validation"|"profiler","batches":N,"epochs":E,
 * "records":R,"metrics":{name: number|null}, ...} (extra members kept). One transaction;
 * a row for the same (trial, kind, batches) as an earlier one replaces it (a trial resumed
 * from a checkpoint reports the batches after it again, with the same values). *n_written
 * gets the number of rows. DT_ERR_INVALID (nothing written) naming the first malformed row. */
dt_status dt_store_metrics_insert(dt_store *st, int64_t trial_id, const json_t *rows,
                                  int64_t *n_written);
/* Rows of one trial in batch order, with batches > after_batches, at most `limit` (0: all),
 * of `kind` (NULL: every kind). An array of the row objects as inserted. */
dt_status dt_store_metrics_query(dt_store *st, int64_t trial_id, const char *kind,
                                 int64_t after_batches, int64_t limit, json_t **out);
dt_status dt_store_metrics_count(dt_store *st, int64_t trial_id, const char *kind, int64_t *n);
/* One metric of `kind` against x ("batches", "epochs", "records") for every trial of an
 * experiment (trial_id 0) or one of its trials: an array of {"trial_id","total" (points
 * stored),"sampled","data":[[x,y],...]}, trials in id order, rows without the metric skipped. A
 * trial with more than `points` (2..100000) points is down-sampled (series_cache.h's
 * dt__series_sample: first, last, each x span's minimum and maximum). DT_ERR_INVALID for an unknown experiment, kind or x, or a bad name; name NULL
 * checks the rest and gives an empty array. Each trial's points stay in memory (a 64 MB budget,
 * least recently used out first) and the next call reads only the rows stored after them. */
dt_status dt_store_metric_series(dt_store *st, int64_t exp_id, int64_t trial_id, const char *kind,
                                 const char *name, const char *x, int64_t points, json_t **out);
/* How dt_store_metric_series_text writes the series. */
typedef enum dt_series_format {
    DT_SERIES_JSON, /* the array as compact JSON text, NUL-terminated */
    DT_SERIES_F64,  /* each series as dt__series_f64's binary64 block, one after another */
} dt_series_format;
/* The same series as text in `format` (*out malloc'd, *len bytes): what the metrics route
 * sends, without building JSON values. */
dt_status dt_store_metric_series_text(dt_store *st, int64_t exp_id, int64_t trial_id,
                                      const char *kind, const char *name, const char *x,
                                      int64_t points, dt_series_format format, char **out,
                                      size_t *len);
/* A number that changes whenever a metric row may have changed (a metrics write, an undone
 * transaction, a deleted experiment): equal numbers mean metric reads answer the same. */
uint64_t dt_store_metrics_generation(dt_store *st);
/* The metric names of `kind` in each trial's latest row (experiment or one trial), sorted. */
dt_status dt_store_metric_names(dt_store *st, int64_t exp_id, int64_t trial_id, const char *kind,
                                json_t **out);

/* ---- checkpoints ----
 * A checkpoint row: {"uuid","trial_id","experiment_id","batches","state","path",
 * "metadata" (object),"resources" ({relative file: bytes}),"report_time",
 * "validation_metric" (the searcher metric of a validation at the same batches, or null)}. */
dt_status dt_store_ckpt_insert(dt_store *st, int64_t trial_id, const char *uuid, const char *path,
                               int64_t batches, const json_t *metadata, const json_t *resources);
dt_status dt_store_ckpt_get(dt_store *st, const char *uuid, json_t **out);
/* Of an experiment (trial_id 0) or of one trial (exp_id 0), in batch order per trial. */
dt_status dt_store_ckpt_list(dt_store *st, int64_t exp_id, int64_t trial_id, json_t **out);
dt_status dt_store_ckpt_set_state(dt_store *st, const char *uuid, const char *state);

/* ---- logs ----
 * Lines of a trial's run: one transaction for the batch. */
dt_status dt_store_logs_insert(dt_store *st, int64_t trial_id, const int *ranks,
                               const char *const *lines, int n);
/* {"id","trial_id","rank","time","line"} rows with id > after_id, at most `limit` (0: all),
 * of one trial (trial_id) or of every trial of an experiment (exp_id, trial_id 0). */
dt_status dt_store_logs_query(dt_store *st, int64_t exp_id, int64_t trial_id, int64_t after_id,
                              int64_t limit, json_t **out);

#endif
