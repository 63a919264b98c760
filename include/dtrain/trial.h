/*
 * dtrain/trial.h — the Trial API: a trial definition the platform drives, the trial context
 * it hands the trial, metrics and reducers, callbacks, and the Trainer's fit loop.
 *
 * A trial is a `const dt_trial_def` exported from the user's shared object. The platform
 * calls init (which builds models/optimisers and wraps them through the context), builds the
 * data loaders, then calls train_batch for each batch and evaluate_batch (or
 * evaluate_full_dataset) at validation time; it owns the loop, checkpoints and resume.
 *
 *   static void *init(dt_trial_ctx *c) {
 *       my_trial *t = calloc(1, sizeof *t);
 *       t->net = dt_wrap_model(c, dt_model_mlp(784, dt_hparam_int(c, "hidden", 512), 2, 10));
 *       dt_optim_config oc = dt_optim_defaults(DT_OPTIM_ADAMW);
 *       oc.lr = (float)dt_hparam_double(c, "lr", 1e-3);
 *       t->opt = dt_wrap_optimizer(c, dt_optim_new_for_module(&oc, t->net), t->net);
 *       return t;   // NULL on error, with dt_last_error() set
 *   }
 *   static dt_metrics train_batch(void *self, dt_batch *b, int64_t epoch, int64_t batch) {
 *       my_trial *t = self;
 *       dt_tensor *loss = dt_cross_entropy(dt_module_forward(t->net, dt_batch_get(b, "x")),
 *                                          dt_batch_get(b, "y"), -100);
 *       if (dt_trial_backward(t->ctx, loss) || dt_step_optimizer(t->ctx, t->opt, NULL))
 *           return dt_metrics_error();
 *       return dt_metrics_scalar("loss", dt_item(loss));
 *   }
 */
#ifndef DTRAIN_TRIAL_H
#define DTRAIN_TRIAL_H

#include "dtrain/data.h"
#include "dtrain/nn.h"
#include "dtrain/optim.h"

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_trial_ctx dt_trial_ctx;
typedef struct dt_loader dt_loader;           /* data.h */
typedef struct dt_batch dt_batch;             /* data.h */
typedef struct dt_dist_ctx dt_dist_ctx;       /* dist.h */
typedef struct dt_tb_writer dt_tb_writer;     /* trialio.h */
typedef struct dt_engine dt_engine;           /* engine.h */
typedef struct dt_pipe_engine dt_pipe_engine; /* pipe.h */
typedef struct dt_core dt_core;               /* core.h */
/* The micro-batch stream an engine-based trial pulls from (see "engine-based trials"). */
typedef struct dt_batch_iter dt_batch_iter;

/* ---- metrics ----------------------------------------------------------------------------
 * A small by-value map of named scalars. A batch function reports failure by returning
 * dt_metrics_error() after an API call failed (the message stays in dt_last_error()). */

#define DT_METRICS_MAX 32
#define DT_METRIC_NAME_MAX 48

typedef struct dt_metrics {
    int n;
    dt_status status;
    struct {
        char name[DT_METRIC_NAME_MAX];
        double value;
    } m[DT_METRICS_MAX];
} dt_metrics;

DT_API dt_metrics dt_metrics_empty(void);
DT_API dt_metrics dt_metrics_scalar(const char *name, double value);
/* Failed batch: status = dt_last_status() (DT_ERR_STATE if none was set). */
DT_API dt_metrics dt_metrics_error(void);
/* Set (or replace) a metric; false when the map is full or the name too long. */
DT_API bool dt_metrics_set(dt_metrics *m, const char *name, double value);
DT_API bool dt_metrics_get(const dt_metrics *m, const char *name, double *value);
/* {name: value} (non-finite values as null): a new object, NULL on OOM. */
DT_API json_t *dt_metrics_to_json(const dt_metrics *m);
/* Fraction of rows of logits (N, C) whose highest score is at label y (N, i64); labels
 * outside [0, C) count as misses. NAN with DT_ERR_INVALID for other shapes or dtypes. */
DT_API double dt_accuracy(const dt_tensor *logits, const dt_tensor *y);
/* Fraction of rows whose label is among the k highest scores (ties: the lower index first). */
DT_API double dt_topk_accuracy(const dt_tensor *logits, const dt_tensor *y, int k);
/* A classifier's validation: its loss ("validation_loss", cross-entropy) and "accuracy" over
 * epoch 0 of `val` (fields "x", "y"), weighted by batch records, in evaluation mode without
 * gradients (both restored after); dt_metrics_error() on an error. */
DT_API dt_metrics dt_validate_classifier(dt_module *net, dt_loader *val);

/* ---- reducers ----------------------------------------------------------------------------- */

typedef enum dt_reducer {
    DT_REDUCER_AVG = 0, /* default */
    DT_REDUCER_SUM,
    DT_REDUCER_MAX,
    DT_REDUCER_MIN,
} dt_reducer;

/* A custom metric reducer (the reference's MetricReducer). The trial feeds it values in its own
 * way (its own update function); at the end of a training or validation workload the platform
 * calls per_slot_reduce on every slot, gathers the bytes to the chief and calls
 * cross_slot_reduce there with every slot's bytes. */
typedef struct dt_metric_reducer {
    void *self;
    void (*reset)(void *self);
    /* This slot's contribution as malloc'd bytes (*len set); NULL with *len 0 is allowed. */
    void *(*per_slot_reduce)(void *self, size_t *len);
    /* Combine n slots' contributions. With a name given to dt_wrap_reducer, set exactly that
     * metric; without one, set any number of metrics. */
    dt_status (*cross_slot_reduce)(void *self, int n, void *const *parts, const size_t *lens,
                                   dt_metrics *out);
} dt_metric_reducer;

/* ---- callbacks ---------------------------------------------------------------------------
 * Every hook is optional. state_dict returns a new JSON value saved in checkpoints under the
 * callback's name; load_state_dict receives it on resume. */

typedef struct dt_callback {
    void *self;
    void (*on_trial_startup)(void *self, int64_t first_batch_idx, const char *checkpoint);
    void (*on_training_start)(void *self);
    void (*on_training_epoch_start)(void *self, int64_t epoch_idx);
    void (*on_training_epoch_end)(void *self, int64_t epoch_idx);
    void (*on_training_workload_end)(void *self, const dt_metrics *avg, const dt_metrics *last);
    void (*on_validation_start)(void *self);
    void (*on_validation_epoch_start)(void *self);
    void (*on_validation_epoch_end)(void *self);
    void (*on_validation_end)(void *self, const dt_metrics *metrics);
    void (*on_checkpoint_load_start)(void *self, const json_t *state);
    void (*on_checkpoint_save_start)(void *self, json_t *state);
    void (*on_checkpoint_write_end)(void *self, const char *dir);
    void (*on_checkpoint_upload_end)(void *self, const char *uuid);
    void (*on_trial_shutdown)(void *self);
    json_t *(*state_dict)(void *self);
    dt_status (*load_state_dict)(void *self, const json_t *state);
} dt_callback;

/* ---- the trial definition ---------------------------------------------------------------- */

typedef struct dt_trial_def {
    const char *name;
    /* Build models, optimisers, schedulers; wrap them. Returns the trial's state, NULL on error. */
    void *(*init)(dt_trial_ctx *ctx);
    dt_loader *(*build_training_data_loader)(void *self);
    dt_loader *(*build_validation_data_loader)(void *self);
    dt_metrics (*train_batch)(void *self, dt_batch *batch, int64_t epoch_idx, int64_t batch_idx);
    /* One of evaluate_batch (preferred: distributable) and evaluate_full_dataset. */
    dt_metrics (*evaluate_batch)(void *self, dt_batch *batch, int64_t batch_idx);
    dt_metrics (*evaluate_full_dataset)(void *self, dt_loader *loader);
    /* Reducer of an evaluate_batch metric (default AVG for all). */
    dt_reducer (*evaluation_reducer)(void *self, const char *metric);
    /* Records in a batch (default: the batch's record count). */
    int64_t (*get_batch_length)(void *self, const dt_batch *batch);
    /* Fill up to max callbacks and their names (unique; keys of their checkpoint state). */
    int (*build_callbacks)(void *self, dt_callback *out, const char **names, int max);
    /* Extra state of the trial itself, in its own files inside the checkpoint directory. */
    dt_status (*save)(void *self, const char *dir);
    dt_status (*load)(void *self, const char *dir);
    void (*free)(void *self);

    /* ---- engine-based trials (the reference's DeepSpeedTrial; docs/trial.md) ----------------
     * A trial that sets ds_train_batch is engine-based: init builds engines with
     * dt_engine_init and registers them with dt_wrap_model_engine; train_batch and
     * evaluate_batch are replaced by these two, which pull micro-batches themselves from `it`
     * (dt_batch_iter_next) and drive dt_engine_forward / _backward / _step. Leave train_batch,
     * evaluate_batch and evaluate_full_dataset NULL in such a trial.
     *   ds_train_batch     called gradient_accumulation_steps times per global batch (the
     *                      first wrapped engine's), once with dt_disable_auto_grad_accumulation
     *                      or a wrapped pipeline engine (dt_wrap_pipe_engine);
     *                      epoch_idx / batch_idx count global batches. The iterator's stream
     *                      runs on across epochs of the training loader.
     *   ds_evaluate_batch  called until the validation loader of this slot is exhausted, one
     *                      micro-batch per call being the usual use; metrics are averaged
     *                      weighted by the records the call pulled (evaluation_reducer applies).
     * For engine-based trials `save` and `load` REPLACE the default, which saves every wrapped
     * engine with dt_engine_save_checkpoint(engine, dir, "model<i>") (dt_pipe_save_checkpoint
     * for a pipeline engine; dt_save_model_engines),
     * and they run on every slot (each writes its own shards into the same directory). */
    dt_metrics (*ds_train_batch)(void *self, dt_batch_iter *it, int64_t epoch_idx,
                                 int64_t batch_idx);
    dt_metrics (*ds_evaluate_batch)(void *self, dt_batch_iter *it, int64_t batch_idx);
} dt_trial_def;

/* ---- the trial context ------------------------------------------------------------------ */

/* The tensor runtime of the trial (arena, tape, RNG): reset by the platform after every
 * batch. Make the trial's own tensors here. */
DT_API dt_ctx *dt_trial_runtime(dt_trial_ctx *c);

/* Register a model: built (dt_module_build with the trial seed) if not yet, saved in
 * checkpoints (the first as model.safetensors, then model_1.safetensors, ...). Returns m, or
 * NULL on error (a NULL m passes the constructor's error on). Wrapped models, optimisers and
 * schedules belong to the context from then on: the trial's free must not free them. The
 * loaders a trial builds belong to the platform too. */
DT_API dt_module *dt_wrap_model(dt_trial_ctx *c, dt_module *m);
/* Register an optimiser over a wrapped model's flat buffers (gradient aggregation, AMP,
 * distributed averaging and checkpointing follow). Returns o, or NULL. */
DT_API dt_optimizer *dt_wrap_optimizer(dt_trial_ctx *c, dt_optimizer *o, dt_module *model);

typedef enum dt_lr_step_mode {
    DT_LR_STEP_EVERY_EPOCH = 0,
    DT_LR_STEP_EVERY_BATCH,
    DT_LR_STEP_EVERY_OPTIMIZER_STEP,
    DT_LR_MANUAL_STEP,
} dt_lr_step_mode;
/* Register a schedule; the platform steps it per `mode` every `frequency` units and saves it. */
DT_API dt_lr_schedule *dt_wrap_lr_scheduler(dt_trial_ctx *c, dt_lr_schedule *s,
                                            dt_lr_step_mode mode, int frequency);
/* Register a custom reducer: `name` set → it produces that one metric; NULL → any metrics. */
DT_API dt_status dt_wrap_reducer(dt_trial_ctx *c, const dt_metric_reducer *r, const char *name,
                                 bool for_training);

/* A function reducer (the reference's wrap_reducer with a function): the trial feeds values
 * with dt_fn_reducer_update during a training or validation workload; at its end every slot's
 * values are gathered and fn(values, n, user) gives the metric `name`. Owned by the context. */
typedef struct dt_fn_reducer dt_fn_reducer;
typedef double (*dt_reduce_fn)(const double *values, int64_t n, void *user);
DT_API dt_fn_reducer *dt_wrap_reducer_fn(dt_trial_ctx *c, dt_reduce_fn fn, void *user,
                                         const char *name, bool for_training);
DT_API dt_status dt_fn_reducer_update(dt_fn_reducer *r, double value);

/* Backpropagate a loss: applies the AMP loss scale and 1/aggregation_frequency (when
 * optimizations.average_aggregated_gradients), accumulating into the wrapped models'
 * gradients. */
DT_API dt_status dt_trial_backward(dt_trial_ctx *c, dt_tensor *loss);

typedef struct dt_step_opts {
    /* Called with the model's flat gradient buffer before the step (after unscaling). */
    void (*clip_grads)(float *grads, int64_t n, void *user);
    void *clip_user;
    bool keep_grads; /* true = do not zero the gradients after stepping (auto_zero_grads off) */
} dt_step_opts;
/* Step an optimiser at the end of each aggregation window (a no-op in between): average
 * gradients across slots, unscale and skip on overflow (fp16), clip, step, step schedules in
 * DT_LR_STEP_EVERY_OPTIMIZER_STEP mode, zero gradients. opts may be NULL. */
DT_API dt_status dt_step_optimizer(dt_trial_ctx *c, dt_optimizer *o, const dt_step_opts *opts);

typedef enum dt_amp {
    DT_AMP_NONE = 0,
    DT_AMP_BF16, /* matmuls in bf16 (autocast), no loss scaling */
    DT_AMP_FP16, /* matmuls round to fp16 (autocast; refused without F16C) with DeepSpeed's
                  * dynamic loss scaling (scale the loss, skip steps whose gradients overflow,
                  * unscale). One scaler update per dt_step_optimizer call. */
} dt_amp;
/* The reference's use_amp: set before training starts. */
DT_API dt_status dt_trial_use_amp(dt_trial_ctx *c, dt_amp mode);

/* Hyperparameters (const values in local mode). Missing or wrongly typed → `dflt`, with a
 * warning for the wrong type. A name is the config's: "optimizer.lr" reads lr in the group
 * optimizer (or a key written "optimizer.lr"). */
DT_API const json_t *dt_hparams(const dt_trial_ctx *c);
DT_API const json_t *dt_hparam_json(const dt_trial_ctx *c, const char *name);
DT_API int64_t dt_hparam_int(const dt_trial_ctx *c, const char *name, int64_t dflt);
DT_API double dt_hparam_double(const dt_trial_ctx *c, const char *name, double dflt);
DT_API const char *dt_hparam_str(const dt_trial_ctx *c, const char *name, const char *dflt);
DT_API bool dt_hparam_bool(const dt_trial_ctx *c, const char *name, bool dflt);

DT_API int64_t dt_trial_global_batch_size(const dt_trial_ctx *c);
DT_API int64_t dt_trial_per_slot_batch_size(const dt_trial_ctx *c);
/* Batches trained so far (the index of the batch being trained, inside train_batch). */
DT_API int64_t dt_trial_current_train_batch(const dt_trial_ctx *c);
DT_API bool dt_trial_is_epoch_start(const dt_trial_ctx *c);
DT_API bool dt_trial_is_epoch_end(const dt_trial_ctx *c);
DT_API const json_t *dt_trial_experiment_config(const dt_trial_ctx *c);
DT_API const json_t *dt_trial_data_config(const dt_trial_ctx *c);
/* The string data.<key> of the experiment config, or dflt. */
DT_API const char *dt_trial_data_str(const dt_trial_ctx *c, const char *key, const char *dflt);
/* A loader over ds (taken) with the trial's seed and its per-slot batch size (an engine-based
 * trial's: the micro-batch); train: shuffled, the last partial batch dropped. NULL with the
 * error of dt_loader_new (or ds's, when NULL). */
DT_API dt_loader *dt_trial_loader(dt_trial_ctx *c, dt_dataset *ds, bool train);
DT_API int64_t dt_trial_id(const dt_trial_ctx *c);
DT_API int64_t dt_trial_experiment_id(const dt_trial_ctx *c);
DT_API uint64_t dt_trial_seed(const dt_trial_ctx *c);
DT_API int dt_trial_rank(const dt_trial_ctx *c);
DT_API int dt_trial_size(const dt_trial_ctx *c);
/* The distributed context (rank/size/local/cross, gather/allgather/broadcast; dist.h). With
 * one process it runs on the self backend. */
DT_API dt_dist_ctx *dt_trial_distributed(dt_trial_ctx *c);
/* Ask the platform to finish the current batch, checkpoint and stop. */
DT_API void dt_trial_set_stop_requested(dt_trial_ctx *c, bool stop);
DT_API bool dt_trial_get_stop_requested(const dt_trial_ctx *c);
/* The reference's disable_dataset_reproducibility_checks: the trial's loaders are used as
 * given (no sharding, seeding or resume positioning by the platform). */
DT_API void dt_trial_disable_dataset_reproducibility_checks(dt_trial_ctx *c);
/* Where TensorBoard files go (inside the checkpoint storage); the writer is opened on first
 * use. Returns NULL outside the fit loop. */
DT_API const char *dt_trial_tensorboard_path(const dt_trial_ctx *c);
/* The fit loop's TensorBoard writer (its event file under the checkpoint directory): scalars a
 * trial adds appear next to the platform's. NULL outside the fit loop and on non-chief slots. */
DT_API dt_tb_writer *dt_trial_tensorboard_writer(dt_trial_ctx *c);
/* The profiler: for training batches begin..end (inclusive, 0-based) the fit loop records each
 * batch's wall time, model FLOP rate and activation memory peak as TensorBoard scalars
 * "profiler/step_ms", "profiler/gflops", "profiler/activation_peak_mb" and as "profiler" lines
 * in the metrics file; the lines also carry "data_ms", the time the fit loop spent getting
 * that batch from the training loader. Call in init; enabled false turns it off. The
 * experiment config's profiling section (enabled, begin_on_batch, end_after_batch) sets the
 * same before init. */
DT_API dt_status dt_trial_set_profiler(dt_trial_ctx *c, bool enabled, int64_t begin_batch,
                                       int64_t end_batch);
/* Data on the CPU needs no move; kept for API parity with the reference (returns t). */
DT_API dt_tensor *dt_to_device(dt_trial_ctx *c, dt_tensor *t);

/* ---- engine-based trials (the reference's DeepSpeedTrialContext) --------------------------- */

/* The next micro-batch of the stream (owned by the platform's loader; valid until the next
 * dt_batch_iter_next on this iterator). Training streams never end: at the end of an epoch of
 * the training loader the next epoch starts (a shard's empty padding batch is skipped).
 * Validation streams end with NULL when the validation loader of this slot is exhausted.
 * NULL with the error set (dt_last_error) when the loader fails, and on a slot that builds no
 * data loader (dt_set_mpu); it is NULL-safe (it = NULL gives NULL with DT_ERR_STATE). */
DT_API dt_batch *dt_batch_iter_next(dt_batch_iter *it);

/* Register an engine (the reference's wrap_model_engine). The first wrapped engine sets the
 * batch accounting: records and searcher units per global batch follow its train_batch_size,
 * the data loaders should hand out its train_micro_batch_size_per_gpu samples per batch, and
 * train_batch runs its gradient_accumulation_steps times per global batch. Engines are saved in
 * checkpoints (tag "model<i>" in the checkpoint directory) and loaded on resume. Returns e. The
 * context owns the engine and its model (dt_engine_module) from then on — also on error, when
 * both are freed: NULL is returned with DT_ERR_STATE (too many engines, a model not built on
 * dt_trial_runtime(c), an engine wrapped twice). A NULL e passes dt_engine_init's error on. */
DT_API dt_engine *dt_wrap_model_engine(dt_trial_ctx *c, dt_engine *e);
/* Register a pipeline engine (pipe.h; the reference's wrap_model_engine of a PipelineEngine).
 * It must be the first engine wrapped. Then:
 *   - engine 0 (dt_trial_engine(c, 0)) is this rank's stage engine (dt_pipe_stage_engine):
 *     records per global batch follow its train_batch_size (micro x gas x data-parallel
 *     size), the loaders hand out its train_micro_batch_size_per_gpu samples per batch;
 *   - ds_train_batch is called ONCE per global batch: it calls dt_pipe_train_batch, which
 *     pulls gradient_accumulation_steps micro-batches from the iterator (dt_batch_iter_pipe_data);
 *     ds_evaluate_batch calls dt_pipe_eval_batch likewise, floor(validation micro-batches / gas)
 *     times per validation (the stages' contexts are in evaluation mode meanwhile);
 *   - the pipeline grid is the model-parallel unit (dt_set_mpu): the data is sharded over the
 *     data-parallel rank / size (dt_pipe_dp_rank / _dp_size), only the first and the last stage
 *     build data loaders (the others get it == NULL), only the last stage reports metrics;
 *   - checkpoints hold it as "model<i>" (dt_pipe_save_checkpoint / _load_checkpoint).
 * Returns p. The context owns p from then on, also on error, when it is freed and NULL is
 * returned with DT_ERR_STATE (not the first engine, too many engines). A NULL p passes
 * dt_pipe_engine_init's error on. Wrapping a stage's engine with dt_wrap_model_engine is
 * refused (DT_ERR_STATE; the stage engine is left to its pipeline). */
DT_API dt_pipe_engine *dt_wrap_pipe_engine(dt_trial_ctx *c, dt_pipe_engine *p);
/* The pipeline engine wrapped as engine i, or NULL when engine i is a plain engine. */
DT_API dt_pipe_engine *dt_trial_pipe_engine(const dt_trial_ctx *c, int i);
/* A dt_pipe_data_fn (pipe.h) over an engine-based trial's iterator, passed as its `user`:
 *     float loss = dt_pipe_train_batch(pipe, dt_batch_iter_pipe_data, it, &st);
 * Each call takes the iterator's next micro-batch and copies field "x" (else the first field)
 * as the inputs and field "y" (else the second) as the labels into `ctx`. Errors: the
 * iterator's (no slot data, validation exhausted, a loader failure), DT_ERR_INVALID for a
 * batch without such a field (e.g. a user collate's: write a data function of your own). */
DT_API dt_status dt_batch_iter_pipe_data(void *iter, int64_t micro, dt_ctx *ctx, bool want_inputs,
                                         dt_tensor **inputs, bool want_labels, dt_tensor **labels);
DT_API dt_engine *dt_trial_engine(const dt_trial_ctx *c, int i);
/* train_micro_batch_size_per_gpu of the first wrapped engine: the batch size the data loaders
 * of an engine-based trial use. 0 (with DT_ERR_STATE set) before an engine is wrapped. */
DT_API int64_t dt_trial_train_micro_batch_size(const dt_trial_ctx *c);

/* train_batch is called once per global batch instead of gradient_accumulation_steps times:
 * the trial then pulls and trains all of the first engine's micro-batches itself. Call in init. */
DT_API void dt_disable_auto_grad_accumulation(dt_trial_ctx *c);
/* The reference's name for dt_trial_disable_dataset_reproducibility_checks. */
DT_API void dt_disable_dataset_reproducibility_checks(dt_trial_ctx *c);

/* A model-parallel unit (the reference's ModelParallelUnit): who is who in the data-parallel
 * group when a trial uses model parallelism of its own. Every callback is optional; a NULL one
 * answers the data-parallel default (this rank of all slots, true, true).
 *   data_parallel_rank / _world_size   the training data is sharded over these.
 *   should_report_metrics              this slot's metrics count in the reduced metrics.
 *   should_build_data_loader           this slot builds data loaders; on the others the
 *                                      build_* functions are not called and the iterators
 *                                      hand out nothing (NULL). */
typedef struct dt_model_parallel_unit {
    void *user;
    int (*data_parallel_rank)(void *user);
    int (*data_parallel_world_size)(void *user);
    bool (*should_report_metrics)(void *user);
    bool (*should_build_data_loader)(void *user);
} dt_model_parallel_unit;
/* Use `mpu` (copied; its user pointer must stay valid) for the data loaders and metrics; with
 * several engines it applies to all of them. Call in init. DT_ERR_STATE after training started,
 * DT_ERR_INVALID when the rank it reports is outside [0, world size). */
DT_API dt_status dt_set_mpu(dt_trial_ctx *c, const dt_model_parallel_unit *mpu);

/* The DeepSpeed config a trial's hyperparameters name (the reference's
 * overwrite_deepspeed_config(hparams.deepspeed_config, hparams.overwrite_deepspeed_args)):
 * hyperparameter `deepspeed_config` is a path — absolute, or relative to the model directory
 * (dt_fit_opts.model_dir; the working directory when none is known) — or an object holding
 * the config itself; the object `overwrite_deepspeed_args` (optional) is merged into it with
 * dt_overwrite_config. Returns a new reference (json_decref it). NULL with DT_ERR_CONFIG when
 * deepspeed_config is missing or of the wrong type, or overwrite_deepspeed_args is not an
 * object; DT_ERR_IO / DT_ERR_CONFIG from reading the file (the message names it). */
DT_API json_t *dt_ds_config_from_hparams(const dt_trial_ctx *c);
/* The usual init of an engine-based trial in one call: net (taken, not built) built with the
 * trial's seed, an engine made from dt_ds_config_from_hparams, wrapped (dt_wrap_model_engine).
 * NULL with the first error; net is freed then. */
DT_API dt_engine *dt_trial_engine_from_hparams(dt_trial_ctx *c, dt_module *net);
/* The model directory of the trial (dt_fit_opts.model_dir), or NULL when not known. */
DT_API const char *dt_trial_model_dir(const dt_trial_ctx *c);

/* The default checkpoint behaviour of an engine-based trial, for save / load hooks that add to
 * it: every wrapped engine i saved to (loaded from) `dir`/model<i> with
 * dt_engine_save_checkpoint / dt_engine_load_checkpoint (dt_pipe_save_checkpoint /
 * dt_pipe_load_checkpoint for a pipeline engine). Collective: every slot calls them. */
DT_API dt_status dt_save_model_engines(dt_trial_ctx *c, const char *dir);
DT_API dt_status dt_load_model_engines(dt_trial_ctx *c, const char *dir);

/* A context for running a trial's code outside the platform (debugging, notebooks, tests):
 * `config` is an experiment config as JSON (hyperparameters, data, optimizations, ...), may be
 * NULL. Free with dt_trial_ctx_free. */
DT_API dt_trial_ctx *dt_trial_ctx_new(const json_t *config, uint64_t seed);
DT_API void dt_trial_ctx_free(dt_trial_ctx *c);

/* ---- the Trainer --------------------------------------------------------------------------- */

typedef enum dt_unit { DT_UNIT_BATCHES = 0, DT_UNIT_EPOCHS, DT_UNIT_RECORDS } dt_unit;
typedef struct dt_length {
    dt_unit unit;
    int64_t n; /* 0 = unset */
} dt_length;

/* ---- lengths (src/trial/length.c) ---------------------------------------------------------
 * A length is {batches|epochs|records: N} in a config. Converting one to batches follows one
 * rule, Determined's: records become floor(records / global batch size) batches (a partial
 * batch is dropped, never added); epochs are the training loader's batches per epoch when
 * that is known (the fit loop: exact), else records_per_epoch records converted as records
 * (the experiment config, before any loader exists). Uses differ only in what a non-zero
 * length that comes to less than one batch means: */
typedef enum dt_length_min {
    DT_LENGTH_MIN_ERROR = 0, /* DT_ERR_CONFIG saying so: a searcher's max_length in the config,
                              * where such a length is a mistake to report, not to train */
    DT_LENGTH_MIN_ONE,       /* one batch: the fit loop's lengths and periods (Determined's
                              * trial harness: max(records // global_batch_size, 1)) */
} dt_length_min;

/* What epochs and records are measured in; 0 = not known. */
typedef struct dt_length_scale {
    int64_t global_batch_size; /* records per batch over all slots */
    int64_t batches_per_epoch; /* the training loader's; wins over records_per_epoch */
    int64_t records_per_epoch; /* the experiment config's records_per_epoch */
} dt_length_scale;

/* "batches", "epochs", "records". */
DT_API const char *dt_unit_name(dt_unit u);
/* Parse a command-line length: "100b", "5e", "20000r" (also "100batches", "5 epochs",
 * "20000records", any case). A bare number ("100") is batches, the unit Determined's
 * searchers count in. n must be > 0. DT_ERR_CONFIG on a bad string. */
DT_API dt_status dt_length_parse(const char *s, dt_length *out);
/* "100 batches", "1 epoch", "(unset)". Returns buf. */
DT_API const char *dt_length_format(dt_length len, char *buf, size_t n);
/* Convert to batches by the rule above. An unset length (n == 0) gives 0. `what` names the
 * setting for messages ("searcher.max_length"). DT_ERR_CONFIG saying what is missing when the
 * unit needs a scale that is 0 (records: global_batch_size; epochs: batches_per_epoch, or
 * records_per_epoch and global_batch_size), when the product overflows, and (with
 * DT_LENGTH_MIN_ERROR) for a length under one batch; DT_ERR_INVALID for a bad unit. *out is 0
 * on error. */
DT_API dt_status dt_length_batches(dt_length len, const dt_length_scale *scale, dt_length_min min,
                                   const char *what, int64_t *out);
/* The config side's conversion: dt_length_batches with DT_LENGTH_MIN_ERROR and no loader
 * (epochs need records_per_epoch). Pass 0 for a value that is not known. */
DT_API dt_status dt_length_to_batches(dt_length len, int64_t global_batch_size,
                                      int64_t records_per_epoch, const char *what, int64_t *out);

typedef enum dt_ckpt_policy { DT_CKPT_BEST = 0, DT_CKPT_ALL, DT_CKPT_NONE } dt_ckpt_policy;

typedef struct dt_fit_opts {
    dt_length max_length;        /* required */
    dt_length validation_period; /* 0 = only at the end */
    dt_length checkpoint_period; /* 0 = only at the end (and on stop) */
    dt_length reporting_period;  /* default 100 batches */
    dt_ckpt_policy checkpoint_policy;
    const char *checkpoint_dir;    /* where checkpoints go (created) */
    const char *latest_checkpoint; /* resume from this checkpoint directory (or NULL) */
    bool step_zero_validation;
    bool test_mode;              /* one batch of training and of validation */
    const char *searcher_metric; /* for "best" (default "validation_loss") */
    bool smaller_is_better;      /* default true: set larger_is_better to flip */
    bool larger_is_better;
    int save_trial_best, save_trial_latest; /* checkpoints kept (defaults 1, 1) */
    const char *metrics_out;                /* JSON-lines metrics file (or NULL) */
    bool progress; /* progress bar (on a terminal) instead of plain lines */
    bool quiet;
    const char *model_dir; /* the trial's model directory (relative paths in its
                            * hyperparameters, e.g. deepspeed_config), or NULL */
    bool profile;          /* the profiler for batches profile_begin..profile_end (as
                            * dt_trial_set_profiler; a trial's own call wins) */
    int64_t profile_begin, profile_end;
    /* Where metrics, progress and checkpoints are reported and how long to train (core.h;
     * borrowed). NULL: a local core (dt_core_local_new) made from max_length, metrics_out,
     * progress, quiet, checkpoint_dir and save_trial_*, which are then not used otherwise. */
    dt_core *core;
    /* Called on every slot after each training batch (its metrics reported, before the
     * validation, checkpoint and stop checks of that batch), with batch_user; NULL: none. A
     * status other than DT_OK stops the loop with that error. (dsat reads the engine's timers
     * here and asks the loop to stop with dt_trial_set_stop_requested.) */
    dt_status (*on_batch_end)(void *batch_user, dt_trial_ctx *c);
    void *batch_user;
} dt_fit_opts;

/* Run a trial to completion (or until stopped by dt_trial_set_stop_requested, SIGINT or
 * SIGTERM: the current batch finishes, a checkpoint is written, DT_OK is returned). The trial
 * state is created with def->init on a context made from `config` (see dt_trial_ctx_new). */
DT_API dt_status dt_trainer_fit(const dt_trial_def *def, const json_t *config, uint64_t seed,
                                const dt_fit_opts *opts);

/* Load a trial from a checkpoint for inference or export (the reference's
 * load_trial_from_checkpoint_path): verifies the checkpoint, runs def->init on a new context
 * (hyperparameters from `config`, or, with config NULL, those saved in the checkpoint; the
 * saved trial seed), then loads weights, optimiser state and the trial's own files. The
 * context comes back in *ctx_out with gradients disabled and evaluation mode on. Free with
 * def->free(self) then dt_trial_ctx_free(ctx). NULL on error (DT_ERR_IO / DT_ERR_FORMAT for a
 * missing or corrupted checkpoint, or the init's own error). */
DT_API void *dt_trial_load_from_checkpoint(const dt_trial_def *def, const char *path,
                                           const json_t *config, dt_trial_ctx **ctx_out);

#ifdef __cplusplus
}
#endif
#endif
