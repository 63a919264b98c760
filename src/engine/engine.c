/*
 * engine.c — the engine's API: set-up from a DeepSpeed config, forward / backward / step with
 * DeepSpeed's accumulation-boundary semantics, fp16 overflow skipping, clipping, the LR
 * schedule, counters, timers and memory statistics. Where the state lives per ZeRO stage is
 * zero.c's business; checkpoints are engine_ckpt.c.
 *
 * One optimiser step (at a boundary), as DeepSpeed orders it:
 *   reduce gradients (per stage) -> fp16: any Inf/NaN on any rank? skip the update, lower the
 *   scale, count a skipped step (the LR schedule does not advance) -> unscale -> global norm,
 *   clip -> update the owned weights, publish them -> LR schedule step -> zero gradients ->
 *   global_steps += 1, global_samples += train_batch_size.
 * The sequence is dt_boundary_step's (src/optim/step.c), which the trial context runs too;
 * the engine brings its reduction, overflow agreement, norm and partitioned update.
 */
#include "engine/engine_impl.h"
#include "base/base_impl.h"
#include "engine/engine_iface.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

static dt_status check_combination(const dt_engine *e) {
    const dt_ds_config *c = &e->cfg;
    if (!c->has_optimizer)
        return dt_error(DT_ERR_CONFIG,
                        "engine: the config has no \"optimizer\" section; hint: add e.g. "
                        "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}}");
    if (c->optimizer.type == DT_OPTIM_LAMB && c->zero.stage >= 1)
        return dt_error(DT_ERR_CONFIG,
                        "engine: Lamb with ZeRO stage %d: Lamb's trust ratio needs each "
                        "tensor whole, but ZeRO splits tensors across ranks; hint: use stage 0 "
                        "with Lamb, or Adam/AdamW with ZeRO",
                        c->zero.stage);
    if (c->zero.offload_optimizer == DT_OFFLOAD_NVME && c->optimizer.type == DT_OPTIM_LAMB)
        return dt_error(DT_ERR_CONFIG, "engine: Lamb cannot stream its state from nvme; hint: "
                                       "use Adam/AdamW");
    return DT_OK;
}

dt_engine_load_opts dt_engine_load_defaults(void) {
    return (dt_engine_load_opts){.load_optimizer_states = true, .load_lr_scheduler_states = true};
}

dt_engine *dt_engine_init(dt_module *model, const json_t *config) {
    return dt_engine_init_opts(model, config, NULL);
}

dt_engine *dt_engine_init_file(dt_module *model, const char *src) {
    if (!src) {
        dt_error(DT_ERR_INVALID, "dt_engine_init_file: the config path is NULL");
        return NULL;
    }
    json_t *j = dt_ds_config_load(src);
    if (!j) return NULL;
    dt_engine *e = dt_engine_init_opts(model, j, NULL);
    json_decref(j);
    return e;
}

/* The communicator (the caller's, or one of our own), the parsed config and its checks. */
static dt_status engine_config(dt_engine *e, const json_t *config, const dt_engine_opts *opts) {
    dt_status st = DT_OK;
    if (opts && opts->comm) {
        e->comm = opts->comm;
    } else {
        st = dt_comm_init(&e->comm);
        e->own_comm = st == DT_OK;
    }
    if (st != DT_OK) return st;
    e->W = dt_comm_size(e->comm);
    e->rank = dt_comm_rank(e->comm);
    if ((st = dt_ds_config_parse(config, e->W, &e->cfg)) != DT_OK) return st;
    if ((st = check_combination(e)) != DT_OK) return st;
    if (opts && opts->pipeline_stages > 0)
        return e->cfg.zero.stage >= 2
                   ? dt_error(DT_ERR_CONFIG,
                              "dt_engine_init: pipeline parallelism works with ZeRO stage 0 or "
                              "1, not %d: stage 2 and 3 partition gradients and parameters "
                              "across the data-parallel ranks while every pipeline stage "
                              "accumulates its own micro-batches; hint: set "
                              "zero_optimization.stage to 0 or 1",
                              e->cfg.zero.stage)
                   : dt_error(DT_ERR_CONFIG, "dt_engine_init: pipeline parallelism is not "
                                             "available yet; hint: set pipeline_stages to 0");
    return DT_OK;
}

/* This rank's block of the n parameters and the optimizer over it: the whole model at
 * stage 0, else the block, on the device, the host, or in NVMe-sized chunks. */
static dt_status engine_optimizer(dt_engine *e, int64_t n) {
    e->n = n;
    e->block = round_up((n + e->W - 1) / e->W, 16);
    e->npad = e->block * e->W;
    e->lo = e->block * e->rank;
    const dt_zero_config *z = &e->cfg.zero;
    if (z->stage == 0) {
        e->opt = dt_optim_new_for_module(&e->cfg.optimizer, e->model);
    } else if (z->offload_optimizer == DT_OFFLOAD_NVME) {
        /* chunks of 1 Mi elements; a small block still goes in about four, so the
         * read-ahead and write-behind overlap something */
        int64_t ch = round_up((e->block + 3) / 4, 16);
        ch = ch < 1024 ? 1024 : ch > ((int64_t)1 << 20) ? (int64_t)1 << 20 : ch;
        e->nv_chunk = ch < e->block ? ch : e->block;
        e->opt = dt_optim_new(e->host, &e->cfg.optimizer, e->nv_chunk);
    } else {
        e->opt = dt_optim_new(z->offload_optimizer == DT_OFFLOAD_CPU ? e->host : e->dev,
                              &e->cfg.optimizer, e->block);
    }
    return e->opt ? DT_OK : dt_last_status();
}

/* The scheduler, the loss scaler and the autocast dtype the config asks for. */
static dt_status engine_precision(dt_engine *e) {
    e->n_opt_states = dt_optim_state_count(e->opt);
    if (e->cfg.has_scheduler && !(e->sched = dt_sched_new(&e->cfg.scheduler, e->opt)))
        return dt_last_status();
    if (e->cfg.fp16.enabled && !(e->scaler = dt_loss_scaler_new(&e->cfg.fp16)))
        return dt_last_status();
    dt_status st = DT_OK;
    if (e->cfg.bf16 && (st = dt_ctx_set_autocast(e->ctx, DT_DTYPE_BF16)) != DT_OK) return st;
    /* fp16: the model's GEMMs round to fp16 (overflowing as on a GPU), the parameters stay the
     * optimiser's fp32 masters; refused where fp16 cannot run, never f32 in silence */
    if (e->cfg.fp16.enabled && dt_ctx_set_autocast(e->ctx, DT_DTYPE_F16))
        return dt_error(DT_ERR_CONFIG, "engine: fp16.enabled: %s", dt_last_error());
    return DT_OK;
}

dt_engine *dt_engine_init_opts(dt_module *model, const json_t *config, const dt_engine_opts *opts) {
    if (!model || !config) {
        dt_error(DT_ERR_INVALID, "dt_engine_init: %s is NULL (an earlier call failed: %s)",
                 model ? "the config" : "the model", dt_last_error());
        return NULL;
    }
    int64_t n = 0;
    if (!dt_module_flat_params(model, &n) || !dt_module_ctx(model)) {
        dt_error(DT_ERR_STATE, "dt_engine_init: the model is not built; hint: call "
                               "dt_module_build(model, ctx, seed) first");
        return NULL;
    }
    dt_engine *e = calloc(1, sizeof *e);
    if (!e) {
        dt_error(DT_ERR_OOM, "dt_engine_init: out of memory");
        return NULL;
    }
    e->model = model;
    e->ctx = dt_module_ctx(model);
    e->dev = dt_ctx_device(e->ctx);
    dt_status st = engine_config(e, config, opts);
    if (st == DT_OK && e->cfg.memory_budget_bytes > 0)
        dt_device_set_budget(e->dev, e->cfg.memory_budget_bytes);
    if (st == DT_OK && !(e->host = dt_device_new("host", 0)))
        st = dt_error(DT_ERR_OOM, "dt_engine_init: host device");
    /* every rank starts from rank 0's weights */
    if (st == DT_OK && e->W > 1)
        st = dt_comm_broadcast(e->comm, dt_module_flat_params(model, NULL), (size_t)n * 4, 0);
    if (st == DT_OK) st = engine_optimizer(e, n);
    if (st == DT_OK) st = engine_precision(e);
    if (st == DT_OK) st = dt__zero_setup(e);
    if (st != DT_OK) {
        DT_KEEP_ERROR(dt_engine_free(e));
        return NULL;
    }
    dt_engine_reset_timers(e);
    return e;
}

void dt_engine_free(dt_engine *e) {
    if (!e) return;
    dt__profiler_end(e, false); /* a profile step cut short: its hooks go before the engine's */
    if (e->cfg.bf16 || e->cfg.fp16.enabled) dt_ctx_set_autocast(e->ctx, DT_DTYPE_F32);
    dt__zero_teardown(e);
    dt_sched_free(e->sched);
    dt_optim_free(e->opt);
    dt_loss_scaler_free(e->scaler);
    dt_device_free(e->host);
    if (e->own_comm) dt_comm_finalize(e->comm);
    free(e);
}

/* A pipeline stage's engine runs only under dt_pipe_train_batch / dt_pipe_eval_batch. */
static dt_status not_a_pipe_stage(const dt_engine *e, const char *fn) {
    if (!e->pipe_stage || e->pipe_busy) return DT_OK;
    return dt_error(DT_ERR_STATE,
                    "%s on a pipeline stage's engine; hint: a pipeline runs a whole "
                    "global batch with dt_pipe_train_batch (and dt_pipe_eval_batch)",
                    fn);
}

dt_tensor *dt_engine_forward(dt_engine *e, dt_tensor *x) {
    if (!e) {
        dt_error(DT_ERR_INVALID, "dt_engine_forward: the engine is NULL");
        return NULL;
    }
    if (not_a_pipe_stage(e, "dt_engine_forward") != DT_OK) return NULL;
    /* flops_profiler: the profile step starts with its first forward */
    const dt_flops_profiler_config *fp = &e->cfg.flops_profiler;
    if (fp->enabled && !e->profile && e->global_steps + 1 == fp->profile_step &&
        e->micro_steps % e->cfg.gradient_accumulation_steps == 0 && dt__profiler_begin(e) != DT_OK)
        dt_log(DT_LOG_WARN, "flops profiler: %s", dt_last_error());
    double t0 = dt_now_sec();
    e->mark_err = DT_OK;
    dt_tensor *y = dt_module_forward(e->model, x);
    if (y && e->mark_err != DT_OK) {
        dt_error(e->mark_err, "engine forward: %s", e->mark_msg);
        y = NULL;
    }
    e->t.forward_s += dt_now_sec() - t0;
    return y;
}

dt_status dt_engine_backward(dt_engine *e, dt_tensor *loss) {
    if (!e) return dt_error(DT_ERR_INVALID, "dt_engine_backward: the engine is NULL");
    if (not_a_pipe_stage(e, "dt_engine_backward") != DT_OK) return DT_ERR_STATE;
    if (!loss)
        return dt_error(DT_ERR_INVALID,
                        "dt_engine_backward: the loss is NULL (an earlier op "
                        "failed: %s)",
                        dt_last_error());
    double t0 = dt_now_sec();
    float scale = 1.0f / (float)e->cfg.gradient_accumulation_steps;
    if (e->scaler) scale *= dt_loss_scaler_scale(e->scaler);
    e->mark_err = DT_OK;
    dt_status st;
    if (scale == 1.0f) {
        st = dt_backward(loss);
    } else {
        dt_tensor *g = dt_scalar(e->ctx, scale);
        st = g ? dt_backward_with(loss, g) : dt_last_status();
    }
    if (st == DT_OK && e->mark_err != DT_OK)
        st = dt_error(e->mark_err, "engine backward: %s", e->mark_msg);
    /* the collectives of the remaining buckets run even after a local error, so the other
     * ranks are not left waiting; the first error is returned */
    st = dt_status_first(st, dt__zero_after_backward(e));
    e->t.backward_s += dt_now_sec() - t0;
    return st;
}

bool dt_engine_is_gradient_accumulation_boundary(const dt_engine *e) {
    return (e->micro_steps + 1) % e->cfg.gradient_accumulation_steps == 0;
}

/* ---- the boundary: the engine's side of dt_boundary_step ---- */

static dt_status eng_reduce(void *self, float **g, int64_t *gn) {
    return dt__zero_reduce(self, g, gn);
}

/* fp16: did any rank's gradient overflow? (stage >= 1: each rank checked its own shard) */
static dt_status eng_agree_overflow(void *self, double *v) {
    dt_engine *e = self;
    if (e->stage >= 1 && e->W > 1) {
        dt_status st = dt_comm_allreduce(e->comm, v, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_MAX);
        if (st != DT_OK) return st;
    }
    /* pipeline: every stage skips together */
    if (e->mp_comm && dt_comm_size(e->mp_comm) > 1) {
        dt_status st = dt_comm_allreduce(e->mp_comm, v, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_MAX);
        if (st != DT_OK) return st;
    }
    return DT_OK;
}

/* The global norm over every rank's part (reported as the grad norm), then gradient_clipping. */
static dt_status eng_clip(void *self, float *g, int64_t gn) {
    dt_engine *e = self;
    double ss;
    dt_status st = dt__zero_global_sumsq(e, g, gn, &ss);
    if (st != DT_OK) return st;
    e->last_grad_norm = (float)sqrt(ss);
    if (e->cfg.gradient_clipping > 0) {
        float coef = (float)(e->cfg.gradient_clipping / (sqrt(ss) + 1e-6));
        if (coef < 1.0f) {
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < gn; i++) g[i] *= coef;
        }
    }
    return DT_OK;
}

/* Update the owned range and publish it, step the LR schedule, zero the gradients. */
static dt_status eng_update(void *self, float *g, int64_t gn) {
    dt_engine *e = self;
    dt_status st = dt__zero_update(e, g, gn);
    if (st != DT_OK) return st;
    if (e->sched) dt_sched_step(e->sched);
    dt__zero_clear_grads(e);
    return DT_OK;
}

static void eng_discard(void *self) {
    dt__zero_clear_grads(self);
}

static const dt_boundary_ops engine_boundary_ops = {
    .reduce = eng_reduce,
    .agree_overflow = eng_agree_overflow,
    .clip = eng_clip,
    .update = eng_update,
    .discard = eng_discard,
};

static dt_status boundary_step(dt_engine *e) {
    bool skipped = false;
    dt_status st = dt_boundary_step(&engine_boundary_ops, e, e->scaler, &skipped);
    if (skipped) {
        /* fp16 overflow: no update, and the LR schedule does not advance, but the step counts */
        e->skipped_steps++;
        e->last_grad_norm = NAN;
        if (e->rank == 0)
            dt_log(DT_LOG_INFO,
                   "engine: fp16 overflow at step %lld: update skipped, loss "
                   "scale now %g",
                   (long long)e->global_steps, dt_loss_scaler_scale(e->scaler));
    } else if (st != DT_OK) {
        return st;
    }
    e->global_steps++;
    e->global_samples += e->cfg.train_batch_size;
    return st;
}

dt_status dt__engine_backward_from(dt_engine *e, dt_tensor *out, const dt_tensor *grad) {
    double t0 = dt_now_sec();
    e->mark_err = DT_OK;
    dt_status st = dt_backward_with(out, grad);
    if (st == DT_OK && e->mark_err != DT_OK)
        st = dt_error(e->mark_err, "engine backward: %s", e->mark_msg);
    st = dt_status_first(st, dt__zero_after_backward(e));
    e->t.backward_s += dt_now_sec() - t0;
    return st;
}

dt_status dt__engine_boundary(dt_engine *e, int64_t micro_batches) {
    double t0 = dt_now_sec();
    e->micro_steps += micro_batches;
    dt_status st = boundary_step(e);
    e->t.steps++;
    e->t.micro_steps += micro_batches;
    dt_ctx_reset(e->ctx);
    e->t.step_s += dt_now_sec() - t0;
    dt__profiler_end(e, true);
    return st;
}

dt_status dt_engine_step(dt_engine *e) {
    if (!e) return dt_error(DT_ERR_INVALID, "dt_engine_step: the engine is NULL");
    if (not_a_pipe_stage(e, "dt_engine_step") != DT_OK) return DT_ERR_STATE;
    double t0 = dt_now_sec();
    dt_status st = DT_OK;
    bool boundary = dt_engine_is_gradient_accumulation_boundary(e);
    e->micro_steps++;
    if (boundary) {
        st = boundary_step(e);
        e->t.steps++;
    }
    dt_ctx_reset(e->ctx);
    e->t.micro_steps++;
    e->t.step_s += dt_now_sec() - t0;
    if (boundary) dt__profiler_end(e, true);
    if (st == DT_OK && boundary && e->rank == 0 && e->cfg.steps_per_print > 0 &&
        e->global_steps % e->cfg.steps_per_print == 0) {
        dt_log(DT_LOG_INFO, "engine: step %lld, skipped %lld, lr %g, loss scale %g, grad norm %g",
               (long long)e->global_steps, (long long)e->skipped_steps, (double)dt_engine_get_lr(e),
               dt_engine_loss_scale(e), (double)e->last_grad_norm);
        if (e->cfg.wall_clock_breakdown)
            dt_log(DT_LOG_INFO,
                   "engine: time (ms) forward %.2f backward %.2f step %.2f reduce "
                   "%.2f gather %.2f offload %.2f over %lld micro-steps",
                   e->t.forward_s * 1e3, e->t.backward_s * 1e3, e->t.step_s * 1e3,
                   e->t.reduce_s * 1e3, e->t.gather_s * 1e3, e->t.offload_s * 1e3,
                   (long long)e->t.micro_steps);
    }
    return st;
}

/* ---- getters ------------------------------------------------------------------------------- */

int64_t dt_engine_train_batch_size(const dt_engine *e) {
    return e->cfg.train_batch_size;
}
int64_t dt_engine_train_micro_batch_size_per_gpu(const dt_engine *e) {
    return e->cfg.train_micro_batch_size_per_gpu;
}
int64_t dt_engine_gradient_accumulation_steps(const dt_engine *e) {
    return e->cfg.gradient_accumulation_steps;
}
int64_t dt_engine_global_steps(const dt_engine *e) {
    return e->global_steps;
}
int64_t dt_engine_global_samples(const dt_engine *e) {
    return e->global_samples;
}
int64_t dt_engine_micro_steps(const dt_engine *e) {
    return e->micro_steps;
}
int64_t dt_engine_skipped_steps(const dt_engine *e) {
    return e->skipped_steps;
}
float dt_engine_get_lr(const dt_engine *e) {
    return dt_optim_lr(e->opt);
}
double dt_engine_loss_scale(const dt_engine *e) {
    return e->scaler ? dt_loss_scaler_scale(e->scaler) : 1.0;
}
const dt_ds_config *dt_engine_config(const dt_engine *e) {
    return &e->cfg;
}
dt_module *dt_engine_module(const dt_engine *e) {
    return e->model;
}
dt_comm *dt_engine_comm(const dt_engine *e) {
    return e->comm;
}
int dt_engine_zero_stage(const dt_engine *e) {
    return e->stage;
}
float dt_engine_grad_norm(const dt_engine *e) {
    return e->last_grad_norm;
}

void dt_engine_memory_stats(const dt_engine *e, dt_engine_memory *out) {
    memset(out, 0, sizeof *out);
    dt_device_stats(e->dev, &out->device);
    dt_device_stats(e->host, &out->host);
    dt_swap *s[4] = {e->nv_master, e->nv_m, e->nv_v, e->nv_param};
    for (int i = 0; i < 4; i++)
        if (s[i]) out->nvme_bytes += dt__swap_bytes(s[i]);
}

void dt_engine_get_timers(const dt_engine *e, dt_engine_timers *out) {
    *out = e->t;
    dt_flops f = dt_ctx_flops(e->ctx);
    out->flops_fwd = f.forward - e->t.flops_fwd;
    out->flops_bwd = f.backward - e->t.flops_bwd;
}

void dt_engine_reset_timers(dt_engine *e) {
    memset(&e->t, 0, sizeof e->t);
    dt_flops f = dt_ctx_flops(e->ctx);
    e->t.flops_fwd = f.forward; /* the baseline; dt_engine_get_timers reports the difference */
    e->t.flops_bwd = f.backward;
}
