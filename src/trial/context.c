/* context.c — the trial context: wrapped models / optimisers / schedules / reducers, backward
 * with loss scaling and aggregation, step_optimizer, what a trial asks of its run. Metrics
 * maps are metrics.c's, hyperparameters hparams.c's. */
#include "trial_impl.h"

#include "dtrain/engine.h"
#include "base/base_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- context life ---- */

static void fn_reducer_free(dt_fn_reducer *r); /* below, with the function reducers */

static int64_t cfg_int(const json_t *root, const char *a, const char *b, int64_t dflt) {
    const json_t *o = json_object_get(root, a);
    const json_t *v = b ? json_object_get(o, b) : o;
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

dt_trial_ctx *dt_trial_ctx_new(const json_t *config, uint64_t seed) {
    dt_trial_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        dt_error(DT_ERR_OOM, "trial context");
        return NULL;
    }
    c->config = config ? json_deep_copy(config) : json_object();
    c->rt = dt_ctx_new(NULL, seed);
    if (!c->config || !c->rt) {
        dt_trial_ctx_free(c);
        return NULL;
    }
    c->seed = seed;
    /* the world: mpi under mpirun, self otherwise (dist.h says how it is chosen) */
    if (dt_comm_init(&c->comm) != DT_OK || dt_dist_ctx_new(c->comm, &c->dist) != DT_OK) {
        dt_trial_ctx_free(c);
        return NULL;
    }
    c->rank = dt_comm_rank(c->comm);
    c->size = dt_comm_size(c->comm);
    c->aggregation_frequency = (int)cfg_int(c->config, "optimizations", "aggregation_frequency", 1);
    if (c->aggregation_frequency < 1) c->aggregation_frequency = 1;
    const json_t *avg = json_object_get(json_object_get(c->config, "optimizations"),
                                        "average_aggregated_gradients");
    c->average_aggregated = avg ? json_is_true(avg) : true;
    c->deterministic =
        json_is_true(json_object_get(json_object_get(c->config, "optimizations"), "deterministic"));
    c->trial_id = 1;
    c->experiment_id = 1;
    return c;
}

void dt_trial_ctx_free(dt_trial_ctx *c) {
    if (!c) return;
    dt__ds_free(c); /* engines first: they hold on to their models */
    for (int i = 0; i < c->n_scheds; i++) dt_sched_free(c->scheds[i].sched);
    for (int i = 0; i < c->n_optims; i++) {
        dt_optim_free(c->optims[i].opt);
        if (c->optims[i].acc)
            dt_mem_free(dt_ctx_device(c->rt), DT_MEM_GRADS, c->optims[i].acc,
                        (size_t)c->optims[i].acc_n * sizeof(float));
    }
    for (int i = 0; i < c->n_models; i++) dt_module_free(c->models[i]);
    dt_loss_scaler_free(c->scaler);
    for (int i = 0; i < c->n_fn_reducers; i++) fn_reducer_free(c->fn_reducers[i]);
    dt_dist_ctx_free(c->dist);
    if (c->comm) dt_comm_finalize(c->comm);
    dt_ctx_free(c->rt);
    json_decref(c->config);
    free(c);
}

dt_ctx *dt_trial_runtime(dt_trial_ctx *c) {
    return c->rt;
}

/* ---- wrapping ---- */

dt_module *dt_wrap_model(dt_trial_ctx *c, dt_module *m) {
    if (!m) return NULL; /* the constructor's error stays in dt_last_error */
    if (c->n_models == DT_TRIAL_MAX_MODELS) {
        dt_error(DT_ERR_STATE, "wrap_model: at most %d models per trial", DT_TRIAL_MAX_MODELS);
        return NULL;
    }
    if (!dt_module_ctx(m) &&
        dt_module_build(m, c->rt, c->seed ^ (0x9E37u * (uint64_t)(c->n_models + 1))) != DT_OK)
        return NULL;
    if (dt_module_ctx(m) != c->rt) {
        dt_error(DT_ERR_STATE, "wrap_model: the model was built on another context; hint: build "
                               "it on dt_trial_runtime(ctx) or let wrap_model build it");
        return NULL;
    }
    c->models[c->n_models++] = m;
    return m;
}

dt_optimizer *dt_wrap_optimizer(dt_trial_ctx *c, dt_optimizer *o, dt_module *model) {
    if (!o) return NULL;
    bool known = false;
    for (int i = 0; i < c->n_models; i++) known |= c->models[i] == model;
    if (!known) {
        dt_error(DT_ERR_STATE, "wrap_optimizer: its model is not wrapped; hint: call "
                               "dt_wrap_model(ctx, model) first and pass the same model");
        return NULL;
    }
    int64_t n;
    dt_module_flat_params(model, &n);
    if (dt_optim_numel(o) != n) {
        dt_error(DT_ERR_STATE,
                 "wrap_optimizer: the optimiser covers %lld elements but the model "
                 "has %lld; hint: create it with dt_optim_new_for_module(cfg, model)",
                 (long long)dt_optim_numel(o), (long long)n);
        return NULL;
    }
    if (c->n_optims == DT_TRIAL_MAX_OPTIMS) {
        dt_error(DT_ERR_STATE, "wrap_optimizer: at most %d optimisers", DT_TRIAL_MAX_OPTIMS);
        return NULL;
    }
    c->optims[c->n_optims++] = (wrapped_optim){o, model, NULL, 0};
    return o;
}

dt_lr_schedule *dt_wrap_lr_scheduler(dt_trial_ctx *c, dt_lr_schedule *s, dt_lr_step_mode mode,
                                     int frequency) {
    if (!s) return NULL;
    if (frequency < 1 || mode < DT_LR_STEP_EVERY_EPOCH || mode > DT_LR_MANUAL_STEP) {
        dt_error(DT_ERR_CONFIG,
                 "wrap_lr_scheduler: frequency must be >= 1 (got %d) and the step "
                 "mode one of every epoch / batch / optimizer step / manual",
                 frequency);
        return NULL;
    }
    if (c->n_scheds == DT_TRIAL_MAX_SCHEDS) {
        dt_error(DT_ERR_STATE, "wrap_lr_scheduler: at most %d schedules", DT_TRIAL_MAX_SCHEDS);
        return NULL;
    }
    c->scheds[c->n_scheds++] = (wrapped_sched){s, mode, frequency, 0};
    return s;
}

dt_status dt_wrap_reducer(dt_trial_ctx *c, const dt_metric_reducer *r, const char *name,
                          bool for_training) {
    if (!r || !r->per_slot_reduce || !r->cross_slot_reduce)
        return dt_error(DT_ERR_INVALID, "wrap_reducer: per_slot_reduce and cross_slot_reduce are "
                                        "required");
    if (name && strlen(name) >= DT_METRIC_NAME_MAX)
        return dt_error(DT_ERR_INVALID, "wrap_reducer: metric name '%s' is longer than %d", name,
                        DT_METRIC_NAME_MAX - 1);
    if (c->n_reducers == DT_TRIAL_MAX_REDUCERS)
        return dt_error(DT_ERR_STATE, "wrap_reducer: at most %d reducers", DT_TRIAL_MAX_REDUCERS);
    wrapped_reducer *w = &c->reducers[c->n_reducers++];
    w->r = *r;
    snprintf(w->name, sizeof w->name, "%s", name ? name : "");
    w->for_training = for_training;
    return DT_OK;
}

/* ---- function reducers: values gathered from every slot, then one function ---- */

struct dt_fn_reducer {
    char name[DT_METRIC_NAME_MAX];
    dt_reduce_fn fn;
    void *user;
    double *values;
    int64_t n, cap;
};

static void fn_reset(void *self) {
    ((dt_fn_reducer *)self)->n = 0;
}

static void fn_reducer_free(dt_fn_reducer *r) {
    free(r->values);
    free(r);
}

static void *fn_per_slot(void *self, size_t *len) {
    dt_fn_reducer *r = self;
    *len = (size_t)r->n * sizeof(double);
    void *out = malloc(*len ? *len : 1);
    if (out && *len) memcpy(out, r->values, *len);
    return out;
}

static dt_status fn_cross_slot(void *self, int n, void *const *parts, const size_t *lens,
                               dt_metrics *out);

dt_fn_reducer *dt_wrap_reducer_fn(dt_trial_ctx *c, dt_reduce_fn fn, void *user, const char *name,
                                  bool for_training) {
    if (!fn || !name || !*name) {
        dt_error(DT_ERR_INVALID, "wrap_reducer_fn: a function and a metric name are required");
        return NULL;
    }
    if (c->n_fn_reducers == DT_TRIAL_MAX_REDUCERS) {
        dt_error(DT_ERR_STATE, "wrap_reducer_fn: at most %d function reducers",
                 DT_TRIAL_MAX_REDUCERS);
        return NULL;
    }
    dt_fn_reducer *r = calloc(1, sizeof *r);
    if (!r) {
        dt_error(DT_ERR_OOM, "function reducer");
        return NULL;
    }
    snprintf(r->name, sizeof r->name, "%s", name);
    r->fn = fn;
    r->user = user;
    dt_metric_reducer mr = {.self = r,
                            .reset = fn_reset,
                            .per_slot_reduce = fn_per_slot,
                            .cross_slot_reduce = fn_cross_slot};
    if (dt_wrap_reducer(c, &mr, name, for_training) != DT_OK) {
        free(r);
        return NULL;
    }
    c->fn_reducers[c->n_fn_reducers++] = r;
    return r;
}

dt_status dt_fn_reducer_update(dt_fn_reducer *r, double value) {
    if (r->n == r->cap) {
        int64_t cap = r->cap ? r->cap * 2 : 64;
        double *v = realloc(r->values, (size_t)cap * sizeof *v);
        if (!v) return dt_error(DT_ERR_OOM, "function reducer values");
        r->values = v;
        r->cap = cap;
    }
    r->values[r->n++] = value;
    return DT_OK;
}

/* ---- AMP ---- */

dt_status dt_trial_use_amp(dt_trial_ctx *c, dt_amp mode) {
    if (c->in_fit && c->batches_trained > 0)
        return dt_error(DT_ERR_STATE, "use_amp must be called in init, before training starts");
    if (mode != DT_AMP_NONE && mode != DT_AMP_BF16 && mode != DT_AMP_FP16)
        return dt_error(DT_ERR_CONFIG,
                        "use_amp: unknown mode %d (DT_AMP_NONE, DT_AMP_BF16 or "
                        "DT_AMP_FP16)",
                        (int)mode);
    dt_loss_scaler_free(c->scaler);
    c->scaler = NULL;
    if (mode == DT_AMP_FP16) {
        /* DeepSpeed's dynamic scaler with its defaults (2^16, window 1000, hysteresis 2) */
        c->scaler = dt_loss_scaler_new(NULL);
        if (!c->scaler) return dt_last_status();
    }
    c->amp = mode;
    /* fp16: matmuls round to fp16 as on a GPU (refused on a CPU without F16C) */
    return dt_ctx_set_autocast(c->rt, mode == DT_AMP_BF16   ? DT_DTYPE_BF16
                                      : mode == DT_AMP_FP16 ? DT_DTYPE_F16
                                                            : DT_DTYPE_F32);
}

/* ---- backward / step ---- */

bool dt__trial_at_boundary(const dt_trial_ctx *c) {
    return (c->batches_trained + 1) % c->aggregation_frequency == 0;
}

dt_status dt_trial_backward(dt_trial_ctx *c, dt_tensor *loss) {
    if (!loss)
        return dt_error(DT_ERR_INVALID, "backward: the loss is NULL (an earlier op failed: %s)",
                        dt_last_error());
    if (!isfinite(dt_item(loss)))
        return dt_error(DT_ERR_INVALID,
                        "backward: the loss is %g at batch %lld; hint: lower the "
                        "learning rate or check the inputs",
                        dt_item(loss), (long long)c->batches_trained);
    float scale = c->scaler ? dt_loss_scaler_scale(c->scaler) : 1.f;
    if (c->average_aggregated && c->aggregation_frequency > 1)
        scale /= (float)c->aggregation_frequency;
    if (scale == 1.f) return dt_backward(loss);
    dt_tensor *g = dt_scalar(c->rt, scale);
    if (!g) return dt_last_status();
    return dt_backward_with(loss, g);
}

void dt__trial_step_scheds(dt_trial_ctx *c, dt_lr_step_mode mode) {
    for (int i = 0; i < c->n_scheds; i++) {
        wrapped_sched *w = &c->scheds[i];
        if (w->mode != mode) continue;
        if (++w->units % w->frequency == 0) dt_sched_step(w->sched);
    }
}

/* The plain trial's side of dt_boundary_step: one model's flat buffers, the world's comm. */
typedef struct trial_step {
    dt_trial_ctx *c;
    wrapped_optim *w;
    const dt_step_opts *opts;
} trial_step;

/* optimizations.deterministic with aggregation: the engine's "deterministic" order. Each
 * batch's gradients are averaged over the slots as the batch ends and the averages are added
 * up, instead of adding up locally and averaging once per window. */
static bool det_aggregates(const dt_trial_ctx *c) {
    return c->deterministic && c->aggregation_frequency > 1;
}

static dt_status average_slots(dt_trial_ctx *c, float *g, int64_t n) {
    if (c->size == 1) return DT_OK;
    /* data parallelism: every slot steps with the average of all slots' gradients (one call
     * over the flat buffer; the reduction order is fixed, so every rank gets the same bits,
     * and the overflow check needs no agreement) */
    return dt_comm_allreduce(c->comm, g, n, DT_COMM_DTYPE_F32, DT_REDUCE_OP_AVG);
}

/* A batch inside the window (deterministic): its average added to the window's, the model's
 * gradients zeroed for the next batch. DT_ERR_OOM or the collective's error. */
static dt_status det_accumulate(dt_trial_ctx *c, wrapped_optim *w) {
    int64_t n;
    float *g = dt_module_flat_grads(w->model, &n);
    if (!w->acc) {
        w->acc = dt_mem_alloc(dt_ctx_device(c->rt), DT_MEM_GRADS, (size_t)n * sizeof(float));
        if (!w->acc)
            return dt_error(DT_ERR_OOM,
                            "step_optimizer: no memory for the deterministic aggregation's "
                            "gradients (%lld floats): %s; hint: turn optimizations.deterministic "
                            "off",
                            (long long)n, dt_last_error());
        w->acc_n = n;
        memset(w->acc, 0, (size_t)n * sizeof(float));
    }
    dt_status st = average_slots(c, g, n);
    if (st != DT_OK) return st;
    float *acc = w->acc;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) acc[i] += g[i];
    dt_module_zero_grad(w->model);
    return DT_OK;
}

static dt_status trial_reduce(void *self, float **g, int64_t *n) {
    trial_step *s = self;
    *g = dt_module_flat_grads(s->w->model, n);
    dt_status st = average_slots(s->c, *g, *n);
    float *acc = s->w->acc, *out = *g;
    if (st != DT_OK || !acc || !det_aggregates(s->c)) return st;
    /* deterministic: the window's earlier averages plus this batch's, in the same addition */
    const int64_t len = *n;
#pragma omp parallel for schedule(static) if (len > 65536)
    for (int64_t i = 0; i < len; i++) {
        out[i] = acc[i] + out[i];
        acc[i] = 0;
    }
    return DT_OK;
}

static dt_status trial_clip(void *self, float *g, int64_t n) {
    trial_step *s = self;
    s->opts->clip_grads(g, n, s->opts->clip_user);
    return DT_OK;
}

static bool keep_grads(const trial_step *s) {
    return s->opts && s->opts->keep_grads;
}

static dt_status trial_update(void *self, float *g, int64_t n) {
    (void)g, (void)n; /* the module's own buffers */
    trial_step *s = self;
    /* the gradients are zeroed in the step's own pass over them, unless kept */
    return keep_grads(s) ? dt_optim_step_module(s->w->opt, s->w->model)
                         : dt_optim_step_module_zero_grad(s->w->opt, s->w->model);
}

static void trial_discard(void *self) {
    trial_step *s = self;
    if (!keep_grads(s)) dt_module_zero_grad(s->w->model);
}

/* with and without the user's clipping function */
static const dt_boundary_ops clip_ops = {
    .reduce = trial_reduce,
    .clip = trial_clip,
    .update = trial_update,
    .discard = trial_discard,
};
static const dt_boundary_ops plain_ops = {
    .reduce = trial_reduce,
    .update = trial_update,
    .discard = trial_discard,
};

dt_status dt_step_optimizer(dt_trial_ctx *c, dt_optimizer *o, const dt_step_opts *opts) {
    wrapped_optim *w = NULL;
    for (int i = 0; i < c->n_optims; i++)
        if (c->optims[i].opt == o) w = &c->optims[i];
    if (!w)
        return dt_error(DT_ERR_STATE, "step_optimizer: the optimiser is not wrapped; hint: "
                                      "register it with dt_wrap_optimizer in init");
    if (!dt__trial_at_boundary(c)) /* still aggregating gradients */
        return det_aggregates(c) ? det_accumulate(c, w) : DT_OK;
    trial_step s = {c, w, opts};
    bool skipped = false;
    dt_status st = dt_boundary_step(opts && opts->clip_grads ? &clip_ops : &plain_ops, &s,
                                    c->scaler, &skipped);
    if (st != DT_OK) return st;
    if (skipped) {
        /* fp16: the scaled gradients overflowed */
        c->skipped_steps++;
        dt_log(DT_LOG_INFO, "fp16 overflow at batch %lld: step skipped, loss scale now %g",
               (long long)c->batches_trained, (double)dt_loss_scaler_scale(c->scaler));
        return DT_OK;
    }
    if (w == &c->optims[0]) {
        c->optimizer_steps++;
        dt__trial_step_scheds(c, DT_LR_STEP_EVERY_OPTIMIZER_STEP);
    }
    return DT_OK;
}

/* ---- information ---- */

int64_t dt_trial_global_batch_size(const dt_trial_ctx *c) {
    /* engine-based trials: the first engine's train_batch_size */
    if (dt__ds_engine_count(c) > 0) return dt_engine_train_batch_size(dt_trial_engine(c, 0));
    return dt_hparam_int(c, "global_batch_size", 0);
}

int64_t dt_trial_per_slot_batch_size(const dt_trial_ctx *c) {
    if (dt__ds_engine_count(c) > 0) {
        /* micro-batches of one global batch on one slot */
        const dt_engine *e = dt_trial_engine(c, 0);
        return dt_engine_train_micro_batch_size_per_gpu(e) *
               dt_engine_gradient_accumulation_steps(e);
    }
    int64_t g = dt_trial_global_batch_size(c);
    return c->size > 0 ? g / c->size : g;
}

int64_t dt_trial_current_train_batch(const dt_trial_ctx *c) {
    return c->batches_trained;
}

bool dt_trial_is_epoch_start(const dt_trial_ctx *c) {
    return c->batches_per_epoch > 0 && c->batches_trained % c->batches_per_epoch == 0;
}

bool dt_trial_is_epoch_end(const dt_trial_ctx *c) {
    return c->batches_per_epoch > 0 && (c->batches_trained + 1) % c->batches_per_epoch == 0;
}

const json_t *dt_trial_experiment_config(const dt_trial_ctx *c) {
    return c->config;
}
const json_t *dt_trial_data_config(const dt_trial_ctx *c) {
    return json_object_get(c->config, "data");
}
int64_t dt_trial_id(const dt_trial_ctx *c) {
    return c->trial_id;
}
int64_t dt_trial_experiment_id(const dt_trial_ctx *c) {
    return c->experiment_id;
}
uint64_t dt_trial_seed(const dt_trial_ctx *c) {
    return c->seed;
}
int dt_trial_rank(const dt_trial_ctx *c) {
    return c->rank;
}
int dt_trial_size(const dt_trial_ctx *c) {
    return c->size;
}
dt_dist_ctx *dt_trial_distributed(dt_trial_ctx *c) {
    return c->dist;
}
void dt_trial_set_stop_requested(dt_trial_ctx *c, bool stop) {
    c->stop_requested = stop;
}
bool dt_trial_get_stop_requested(const dt_trial_ctx *c) {
    return c->stop_requested;
}
void dt_trial_disable_dataset_reproducibility_checks(dt_trial_ctx *c) {
    c->repro_disabled = true;
}
const char *dt_trial_tensorboard_path(const dt_trial_ctx *c) {
    return c->tb_path[0] ? c->tb_path : NULL;
}
dt_tensor *dt_to_device(dt_trial_ctx *c, dt_tensor *t) {
    (void)c;
    return t;
}

static dt_status fn_cross_slot(void *self, int n, void *const *parts, const size_t *lens,
                               dt_metrics *out) {
    dt_fn_reducer *r = self;
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += (int64_t)(lens[i] / sizeof(double));
    double *all = malloc((size_t)(total ? total : 1) * sizeof *all);
    if (!all) return dt_error(DT_ERR_OOM, "function reducer gather");
    int64_t k = 0;
    for (int i = 0; i < n; i++) {
        memcpy(all + k, parts[i], lens[i]);
        k += (int64_t)(lens[i] / sizeof(double));
    }
    double v = r->fn(all, total, r->user);
    free(all);
    dt_metrics_set(out, r->name, v);
    return DT_OK;
}

dt_tb_writer *dt_trial_tensorboard_writer(dt_trial_ctx *c) {
    return c->tb;
}

dt_status dt_trial_set_profiler(dt_trial_ctx *c, bool enabled, int64_t begin_batch,
                                int64_t end_batch) {
    if (enabled && (begin_batch < 0 || end_batch < begin_batch))
        return dt_error(DT_ERR_INVALID,
                        "set_profiler: need 0 <= begin_batch <= end_batch, got "
                        "%lld..%lld",
                        (long long)begin_batch, (long long)end_batch);
    c->profile = enabled;
    c->profile_begin = begin_batch;
    c->profile_end = end_batch;
    return DT_OK;
}
