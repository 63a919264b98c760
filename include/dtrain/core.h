/*
 * dtrain/core.h — the core context: the one interface through which a training loop talks to
 * the platform (the reference platform's Core API). The fit loop reports metrics, progress and
 * stored checkpoints through it, asks it whether to stop and how long to train, and never
 * talks to a file, a store or a searcher itself.
 *
 * A dt_core is a table of operations over an implementation's state, like dt_comm's backends:
 *   - local (dt_core_local_new, src/trial/core_local.c): `dtrain train` — the JSON-lines
 *     metrics file, the progress bar and plain lines on stderr, TensorBoard event files, the
 *     "latest" / "best" pointers and checkpoint pruning in the checkpoint directory, SIGINT /
 *     SIGTERM as the preemption signal, and one searcher operation: max_length;
 *   - master-backed (dt_core_master_new, src/master/core_master.c; master/master.h): the same
 *     operations over the master's REST API (docs/api.md), for a trial the master runs.
 * The fit loop takes one in dt_fit_opts.core and is the same for both. A training loop of
 * the user's own gets one from dt_core_init (below) and calls the same operations: the
 * Core API (docs/core_api.md).
 *
 * Every slot of a trial holds a dt_core; what reaches the platform is the chief's (rank 0).
 * Implementations ignore reports on other slots, so a loop may call them everywhere. Calls are
 * made by one thread. An operation an implementation leaves NULL is a no-op (should_preempt:
 * false; searcher_op: no operation). searcher_op must answer the same on every slot (an
 * implementation that asks a server does so on the chief and broadcasts); should_preempt may
 * differ (the fit loop agrees on it across slots). The fit loop does not stop for a failed
 * metrics or progress report: an implementation logs what it could not deliver.
 */
#ifndef DTRAIN_CORE_H
#define DTRAIN_CORE_H

#include "dtrain/dist.h"
#include "dtrain/trial.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_core dt_core;

/* Where training is when something is reported. */
typedef struct dt_core_at {
    int64_t batches; /* steps completed (batches of this trial) */
    double epochs;   /* batches / the training loader's batches per epoch */
    int64_t records; /* records trained, over all slots */
} dt_core_at;

/* A training report's throughput over its window; zeros = not measured. */
typedef struct dt_core_timing {
    double records_per_s;
    int64_t batches;       /* batches in the window: 0 = no per-batch times below */
    double data_ms;        /* mean ms per batch getting it from the loader */
    double train_batch_ms; /* mean ms per batch inside train_batch */
} dt_core_timing;

/* Progress after a batch. */
typedef struct dt_core_progress {
    int64_t batches, total_batches, records;
    double elapsed_s; /* since training started in this process */
    double loss;      /* the last batch's "loss" metric, NaN without one */
} dt_core_progress;

/* A checkpoint the loop has stored. */
typedef struct dt_core_checkpoint {
    const char *uuid;       /* its storage id: local mode uses the directory name */
    const char *path;       /* its directory */
    const json_t *metadata; /* metadata.json's extra members; NULL when it was stored before */
    int64_t steps_completed;
    bool best; /* it holds the best validation so far (by the searcher metric) */
} dt_core_checkpoint;

/* A searcher operation: train until `length` in total, validate, report the searcher metric.
 * length.n == 0: no (more) operation. */
typedef struct dt_core_op {
    dt_length length;
} dt_core_op;

typedef struct dt_core_ops {
    const char *name; /* "local", ... */
    /* Training starts (or resumes) at steps_completed: open what the reports need. Errors are
     * the implementation's (local: DT_ERR_IO naming the metrics file or TensorBoard
     * directory). */
    dt_status (*start)(dt_core *core, int64_t steps_completed);
    /* The mean training metrics of a reporting window (timing may be NULL). */
    dt_status (*report_training_metrics)(dt_core *core, const dt_core_at *at, const dt_metrics *m,
                                         const dt_core_timing *timing);
    dt_status (*report_validation_metrics)(dt_core *core, const dt_core_at *at,
                                           const dt_metrics *m);
    /* One profiled batch (step_ms, data_ms, gflops, activation_peak_mb; trial.h). */
    dt_status (*report_profiler_metrics)(dt_core *core, const dt_core_at *at, const dt_metrics *m);
    void (*report_progress)(dt_core *core, const dt_core_progress *p);
    /* The checkpoint is complete on storage and is now the trial's latest. */
    dt_status (*checkpoint_stored)(dt_core *core, const dt_core_checkpoint *ck);
    /* Should the trial checkpoint and stop now (preemption, a signal, a user's kill)? */
    bool (*should_preempt)(dt_core *core);
    /* The current searcher operation (the same one until it is completed). */
    dt_status (*searcher_op)(dt_core *core, dt_core_op *op);
    /* Complete the current operation with the searcher metric's value (NaN: not reported). */
    dt_status (*searcher_complete)(dt_core *core, const dt_core_op *op, double metric);
    /* The trial stopped before its operations were done (preempted or asked to), with its
     * checkpoint stored at steps_completed. */
    void (*report_stopped)(dt_core *core, int64_t steps_completed);
    /* The run is alive (the platform kills a run silent for longer than resources.max_silence).
     * Called at most every core->heartbeat_s by dt_core_heartbeat. */
    void (*heartbeat)(dt_core *core);
    /* Close and free the implementation's state and `core` itself. */
    void (*free)(dt_core *core);
} dt_core_ops;

struct dt_core {
    const dt_core_ops *ops;
    void *impl;              /* the implementation's state */
    bool chief;              /* this slot reports (rank 0) */
    dt_tb_writer *tb;        /* the trial's TensorBoard writer (chief, after start) or NULL: lent to
                              * the trial through dt_trial_tensorboard_writer */
    char tb_path[1024];      /* where TensorBoard files go ("" = none) */
    dt_comm *comm;           /* the trial's slots (set by the fit loop, or dt_core_init, before
                              * start): an implementation that asks a server on the chief
                              * broadcasts the answer over it; NULL: one slot */
    bool lost;               /* the platform has disowned this run (replaced, or its master is
                              * gone): it must write nothing more. should_preempt answers true and
                              * checkpoint_stored refuses; the fit loop then stops without a
                              * checkpoint and fails (DT_ERR_STATE), so the process exits non-zero */
    double heartbeat_s;      /* dt_core_heartbeat sends at most this often (set by the
                              * implementation; 0: never) */
    double heartbeat_next;   /* when the next one may go (monotonic s) */
    struct dt_core_api *api; /* the Core API's state (dt_core_init), freed with the core */
    void (*api_free)(struct dt_core_api *api); /* how: set by whoever attached api */
};

/* ---- calls (NULL-safe in core; a NULL operation is a no-op returning DT_OK) ---- */
DT_API dt_status dt_core_report_training_metrics(dt_core *core, const dt_core_at *at,
                                                 const dt_metrics *m, const dt_core_timing *timing);
DT_API dt_status dt_core_report_validation_metrics(dt_core *core, const dt_core_at *at,
                                                   const dt_metrics *m);
DT_API void dt_core_report_progress(dt_core *core, const dt_core_progress *p);
DT_API bool dt_core_should_preempt(dt_core *core);
/* op->length.n == 0 when there is no operation. */
DT_API dt_status dt_core_searcher_op(dt_core *core, dt_core_op *op);
DT_API dt_status dt_core_searcher_complete(dt_core *core, const dt_core_op *op, double metric);
DT_API void dt_core_report_stopped(dt_core *core, int64_t steps_completed);
/* Tell the platform the run is alive, between steps and during long work (cheap: a clock read
 * unless core->heartbeat_s has passed since the last one; every report counts as one too). */
DT_API void dt_core_heartbeat(dt_core *core);
/* Free core (NULL is fine). */
DT_API void dt_core_free(dt_core *core);

/* ---- for implementations: TensorBoard files in core->tb_path, shared by all of them ---- */

/* ---- the local implementation ---- */

typedef struct dt_core_local_opts {
    bool chief;                 /* rank 0: the only slot that writes or prints */
    dt_length max_length;       /* the one searcher operation (n == 0: none) */
    const char *checkpoint_dir; /* "latest", "best", pruning; TensorBoard in <dir>/tensorboard */
    const char *metrics_out;    /* JSON-lines metrics file, or NULL */
    bool progress;              /* a progress bar instead of plain training lines on stderr */
    bool quiet;                 /* nothing on stderr */
    int save_trial_best, save_trial_latest; /* checkpoints kept (latest: at least 1) */
} dt_core_local_opts;

/* The core of `dtrain train` (strings are copied). It catches SIGINT and SIGTERM until freed
 * (the previous handlers are restored then) and reports them as preemption; one local core
 * may exist at a time. The files it writes are described in docs/trial.md ("Outputs").
 * NULL with DT_ERR_OOM. */
DT_API dt_core *dt_core_local_new(const dt_core_local_opts *o);

/* ---- the Core API: a training loop of the user's own (docs/core_api.md) ----
 *
 *   dt_core *core;
 *   dt_core_init(&(dt_core_init_opts){.max_length = {DT_UNIT_BATCHES, 1000}}, &core);
 *   dt_core_checkpoint_restore_path(core, "latest", path, &meta)   (when resuming)
 *   dt_core_op op;
 *   while (dt_core_searcher_op(core, &op) == DT_OK && op.length.n > 0) {
 *       train to op.length, dt_core_report_training_metrics / _validation_metrics,
 *       checkpoint with dt_core_checkpoint_store_path + _store_done,
 *       stop when dt_core_should_preempt_all says so (after a checkpoint);
 *       dt_core_searcher_complete(core, &op, searcher_metric);
 *   }
 *   dt_core_free(core);
 *
 * Every call is made on every slot of the trial; what reaches the platform is the chief's. */

#define DT_CORE_PATH_MAX 1024
#define DT_CORE_UUID_MAX 40

typedef struct dt_core_init_opts {
    /* the local fallback (no DTRAIN_TRIAL_ID in the environment), as `dtrain train`: */
    dt_length max_length;       /* its one searcher operation (required there) */
    const char *checkpoint_dir; /* default "checkpoints" */
    const char *metrics_out;    /* JSON-lines metrics file, or NULL */
    bool resume;                /* start from the checkpoint the directory's `latest` names */
    const json_t *hparams;      /* the hyperparameters it reports (NULL: {}) */
    bool quiet;                 /* nothing on stderr */
} dt_core_init_opts;

/* The local fallback's options from a program's command line: --max-batches N (max_length
 * in batches), --checkpoint-dir DIR, --metrics-out FILE, --resume and --quiet are taken out of
 * argv; *argc and argv keep the rest in order. DT_ERR_CONFIG naming a flag without its value
 * or a count that is not a positive integer. */
DT_API dt_status dt_core_init_args(dt_core_init_opts *o, int *argc, char **argv);

/* The core of this process, in *out. Started by the master (DTRAIN_TRIAL_ID,
 * DTRAIN_TRIAL_RUN and DTRAIN_MASTER in the environment): the master-backed core over the
 * trial's spec (its hyperparameters, checkpoint directory and resume point); otherwise the
 * local core (dt_core_local_new) over `o`. The slots are this process's MPI world under
 * mpirun, else one. Implemented in the master layer (src/master/core_init.c; link
 * libdtrain). Errors: DT_ERR_CONFIG (no max_length in local mode, a bad DTRAIN_* value),
 * DT_ERR_COMM (the master cannot be reached), the spec's own error; *out = NULL. */
DT_API dt_status dt_core_init(const dt_core_init_opts *o, dt_core **out);

/* The trial's hyperparameters (borrowed; NULL for a core dt_core_init did not make). */
DT_API const json_t *dt_core_hparams(const dt_core *core);
/* The master's trial id, 0 in local mode. */
DT_API int64_t dt_core_trial_id(const dt_core *core);
/* The distributed context of the trial's slots (rank, size, ...; dist.h). */
DT_API dt_dist_ctx *dt_core_distributed(dt_core *core);
/* The uuid of the checkpoint to resume from, or NULL when the trial starts fresh. */
DT_API const char *dt_core_latest_checkpoint(const dt_core *core);
/* should_preempt asked on the chief and shared: the same answer on every slot (collective). */
DT_API bool dt_core_should_preempt_all(dt_core *core);

/* Start a checkpoint (collective): path_out (DT_CORE_PATH_MAX) gets a new temporary
 * directory in the checkpoint directory for every slot to write its files into, uuid_out
 * (DT_CORE_UUID_MAX) its uuid. `metadata` (an object, copied) needs "steps_completed"
 * (batches trained); its members go into metadata.json. DT_ERR_INVALID without it,
 * DT_ERR_STATE while another checkpoint is open, DT_ERR_IO from the file system. */
DT_API dt_status dt_core_checkpoint_store_path(dt_core *core, const json_t *metadata,
                                               char *path_out, char *uuid_out);
/* Finish it (collective): the files are committed under <checkpoint dir>/<uuid> with
 * metadata.json (their names, sizes and checksums) and reported as the trial's latest.
 * DT_ERR_INVALID for another uuid than the open one; the commit's or the report's error
 * (the checkpoint is then not the latest; a lost core refuses with DT_ERR_STATE). */
DT_API dt_status dt_core_checkpoint_store_done(dt_core *core, const char *uuid);
/* The directory of checkpoint `uuid` ("latest": dt_core_latest_checkpoint) in path_out,
 * verified (dt_ckpt_open), and its metadata.json in *metadata_out (may be NULL; a new
 * reference). DT_ERR_STATE for "latest" with none, DT_ERR_IO / DT_ERR_FORMAT as dt_ckpt_open. */
DT_API dt_status dt_core_checkpoint_restore_path(dt_core *core, const char *uuid, char *path_out,
                                                 json_t **metadata_out);

/* A hand-written loop's model and optimizer (may be NULL) stored as one checkpoint
 * (collective; the chief writes model.safetensors and optimizer.safetensors, the format of a
 * trial checkpoint's): `metadata` as in dt_core_checkpoint_store_path (NULL:
 * {"steps_completed": the optimizer's step count}, for a loop stepping it once a batch); the
 * uuid in uuid_out (DT_CORE_UUID_MAX, may be NULL). A failure on any slot stores nothing. */
DT_API dt_status dt_core_save_module(dt_core *core, const json_t *metadata, dt_module *model,
                                     dt_optimizer *opt, char *uuid_out);
/* Load them back from checkpoint `uuid` ("latest"), with its metadata.json in *metadata_out
 * (may be NULL; a new reference). The optimizer's state, step count and lr come back too. */
DT_API dt_status dt_core_load_module(dt_core *core, const char *uuid, dt_module *model,
                                     dt_optimizer *opt, json_t **metadata_out);
/* Asked to stop (dt_core_should_preempt_all; collective)? Then true, with the model and
 * optimizer saved at `steps` and the stop reported (*st: the save's status), or, for a lost
 * run, nothing written and *st = DT_ERR_STATE. false: train on. */
DT_API bool dt_core_preempt_save(dt_core *core, int64_t steps, dt_module *model,
                                 dt_optimizer *opt, dt_status *st);

/* What dt_core_init found, handed to the core it made (the master layer's constructor). */
typedef struct dt_core_api_init {
    dt_comm *world;             /* the slots' communicator: owned by the core from now on */
    const char *checkpoint_dir; /* where checkpoints go */
    const char *latest;         /* the uuid to resume from, or NULL */
    const json_t *hparams;      /* copied; NULL: {} */
    int64_t trial_id;
} dt_core_api_init;

#ifdef __cplusplus
}
#endif
#endif
