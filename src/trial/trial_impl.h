/* trial_impl.h — internals of the trial layer shared by its files (context.c, fit.c,
 * trial_ckpt.c, ds_trial.c, core_local.c). */
#ifndef DT_TRIAL_IMPL_H
#define DT_TRIAL_IMPL_H

#include "dtrain/dist.h"
#include "dtrain/trial.h"
#include "trial_iface.h"

#define DT_TRIAL_MAX_MODELS 8
#define DT_TRIAL_MAX_OPTIMS 8
#define DT_TRIAL_MAX_SCHEDS 8
#define DT_TRIAL_MAX_REDUCERS 16

typedef struct wrapped_optim {
    dt_optimizer *opt;
    dt_module *model;
    float *acc; /* optimizations.deterministic: the window's averaged gradients (acc_n floats) */
    int64_t acc_n;
} wrapped_optim;

typedef struct wrapped_sched {
    dt_lr_schedule *sched;
    dt_lr_step_mode mode;
    int frequency;
    int64_t units; /* epochs / batches / optimizer steps seen, for the frequency */
} wrapped_sched;

typedef struct wrapped_reducer {
    dt_metric_reducer r;
    char name[DT_METRIC_NAME_MAX]; /* "" = the reducer names its own metrics */
    bool for_training;
} wrapped_reducer;

struct dt_trial_ctx {
    dt_ctx *rt;
    json_t *config; /* owned */
    uint64_t seed;
    int64_t trial_id, experiment_id;
    int rank, size;
    dt_comm *comm;     /* world communicator (self backend with one process) */
    dt_dist_ctx *dist; /* the reference's distributed context over comm */
    int n_models, n_optims, n_scheds, n_reducers;
    dt_module *models[DT_TRIAL_MAX_MODELS];
    wrapped_optim optims[DT_TRIAL_MAX_OPTIMS];
    wrapped_sched scheds[DT_TRIAL_MAX_SCHEDS];
    wrapped_reducer reducers[DT_TRIAL_MAX_REDUCERS];
    dt_amp amp;
    dt_loss_scaler *scaler; /* DT_AMP_FP16 */
    int64_t skipped_steps;  /* optimiser steps skipped on overflow */
    int aggregation_frequency;
    bool average_aggregated;
    bool deterministic; /* optimizations.deterministic: average each batch, then accumulate */
    /* position, maintained by the fit loop */
    int64_t batches_trained; /* index of the batch being trained */
    int64_t batches_per_epoch;
    bool in_fit;
    bool stop_requested;
    bool repro_disabled;
    char tb_path[1024];
    dt_tb_writer *tb; /* the fit loop's writer (chief only), lent to the trial */
    bool profile;
    int64_t profile_begin, profile_end;
    int n_fn_reducers;
    struct dt_fn_reducer *fn_reducers[DT_TRIAL_MAX_REDUCERS];
    int64_t optimizer_steps; /* completed optimiser steps (all optimisers stepped together) */
    struct dt_ds_state *ds;  /* engine-based trials (ds_trial.c); NULL for plain trials */
};

/* ---- a trial's checkpoint contents (trial_ckpt.c) ---- */

/* The fit loop's own record, saved in state.json and restored on resume. */
typedef struct dt__fit_record {
    int64_t records_trained;
    int64_t last_val_batch; /* -1: none yet */
    dt_metrics last_val;
    bool have_best; /* best: the best searcher metric seen */
    double best;
} dt__fit_record;

/* Hyperparameter `name` (dotted for nested ones) of a hyperparameters object, a const
 * hyperparameter's {type: const, val: X} read as X (hparams.c). */
const json_t *dt__hparam_lookup(const json_t *hparams, const char *name);

typedef struct dt_ckpt_writer dt_ckpt_writer; /* trialio.h */
/* Weights and optimiser states as safetensors files in `dir` (param_files.c): model.safetensors
 * (model_<i>.safetensors for i > 0) and optimizer.safetensors ("opt<i>.<state>", with each
 * optimiser's step count and lr), written and read alike by trial and Core-API checkpoints.
 * `rt` lends tensor headers for the optimiser buffers (reset on return). */
void dt__params_model_file(int i, char *buf, size_t n);
dt_status dt__params_save(const char *dir, dt_ctx *rt, int n_models, dt_module *const *models,
                          int n_optims, dt_optimizer *const *optims);
dt_status dt__params_load(const char *dir, dt_ctx *rt, int n_models, dt_module *const *models,
                          int n_optims, dt_optimizer *const *optims);
/* state.json of the trial's current state (a new object): position, RNG, optimisers,
 * schedules, loss scaler, skipped steps, every callback's state_dict under its name, and the
 * fit record. */
json_t *dt__trial_ckpt_state(dt_trial_ctx *c, const dt__fit_record *fit, int n_cb,
                             const dt_callback *cb, const char *const *cb_name);
/* Add the wrapped models (model.safetensors, model_<i>.safetensors), the optimisers' state
 * (optimizer.safetensors), `state` as state.json and (plain trials) the trial's save hook's
 * files to w. The first failure's status is returned (the writer is then failed, see
 * dt_ckpt_add_tensors); the caller aborts w. */
dt_status dt__trial_ckpt_write(dt_ckpt_writer *w, dt_trial_ctx *c, const dt_trial_def *def,
                               void *self, const json_t *state);
/* metadata.json's extra members: steps_completed, framework, hparams (a new object). */
json_t *dt__trial_ckpt_metadata(const dt_trial_ctx *c);
/* The reverse of the fit record and callbacks' parts of dt__trial_ckpt_state: callbacks'
 * load_state_dict (the first failure is returned; the record is filled anyway). */
dt_status dt__trial_ckpt_restore_fit(const json_t *state, dt__fit_record *fit, int n_cb,
                                     const dt_callback *cb, const char *const *cb_name);
/* Load a checkpoint into a trial whose init has run: weights, optimiser state, schedules, RNG,
 * loss scaler, the trial's load hook (engine-based: every slot loads its engines), and (if
 * state_out) the state.json for the fit loop. Nothing is changed on a verification error; a
 * failure while reading into the live buffers leaves the trial unspecified (abort the run). */
dt_status dt__trial_resume(dt_trial_ctx *c, const dt_trial_def *def, void *self, const char *path,
                           json_t **state_out);

/* ---- what keeps a run from writing checkpoints it no longer owns (launcher_watch.c, ckpt_lock.c) ---- */

/* mkdir -p of a checkpoint directory (checkpoint.c): DT_ERR_IO naming the component that could
 * not be made. */
dt_status dt__ckpt_mkdir(const char *dir);
/* DT_OK unless this process runs under a launcher (DTRAIN_LAUNCHER_PID) that is gone:
 * DT_ERR_STATE saying so, `what` being the refused action. */
dt_status dt__ckpt_launcher_alive(const char *what);
/* Lock checkpoint directory `dir` (made if missing) for this run: *fd holds the lock until
 * dt__ckpt_dir_unlock. DT_ERR_STATE naming the holder's pid and host when another run holds
 * it (after a grace of a few seconds for a holder that is exiting); DT_ERR_IO when the
 * directory or its lock file cannot be made. */
dt_status dt__ckpt_dir_lock(const char *dir, int *fd);
/* Release the lock (fd < 0: nothing), removing the lock file. Cannot fail. */
void dt__ckpt_dir_unlock(const char *dir, int fd);

/* Step schedules registered with `mode` (called by the fit loop per epoch / batch). */
void dt__trial_step_scheds(dt_trial_ctx *c, dt_lr_step_mode mode);
/* True at the last batch of an aggregation window. */
bool dt__trial_at_boundary(const dt_trial_ctx *c);

/* ---- engine-based trials (ds_trial.c): hooks of the context and the fit loop ---- */
typedef struct dt_ds_state dt_ds_state;
void dt__ds_free(dt_trial_ctx *c);
int dt__ds_engine_count(const dt_trial_ctx *c);
bool dt__ds_owns_module(const dt_trial_ctx *c, const dt_module *m);
void dt__ds_set_model_dir(dt_trial_ctx *c, const char *dir);
dt_status dt__ds_check_def(const dt_trial_def *def);
dt_status dt__ds_after_init(dt_trial_ctx *c, const dt_trial_def *def);
bool dt__ds_builds_loaders(const dt_trial_ctx *c);
bool dt__ds_reports_metrics(const dt_trial_ctx *c);
void dt__ds_shard(const dt_trial_ctx *c, int *rank, int *world);
dt_status dt__ds_attach_loaders(dt_trial_ctx *c, dt_loader *train, dt_loader *val,
                                int64_t *batches_per_epoch);
dt_metrics dt__ds_train_batch(dt_trial_ctx *c, const dt_trial_def *def, void *self, int64_t epoch,
                              int64_t batch);
int64_t dt__ds_records_per_batch(const dt_trial_ctx *c);
dt_status dt__ds_eval_begin(dt_trial_ctx *c);
bool dt__ds_eval_more(dt_trial_ctx *c, int64_t vb, dt_status *st);
dt_metrics dt__ds_evaluate_batch(dt_trial_ctx *c, const dt_trial_def *def, void *self, int64_t vb,
                                 int64_t *weight);
json_t *dt__ds_state_json(const dt_trial_ctx *c);
dt_status dt__ds_save(dt_trial_ctx *c, const dt_trial_def *def, void *self, const char *dir);
dt_status dt__ds_resume(dt_trial_ctx *c, const dt_trial_def *def, void *self, const char *dir,
                        const json_t *state, dt_status st);


#endif
