/*
 * dtrain/optim.h — optimisers over flat f32 buffers, LR schedules with DeepSpeed's formulas,
 * gradient clipping, fp16 loss scaling, and the step at an accumulation boundary that strings
 * them together.
 *
 * An optimiser owns its state (moments, momentum) for `n` elements, charged to DT_MEM_OPTIM on
 * the device it was made on. It is handed the parameter and gradient pointers at each step, so
 * the same object serves a whole flat buffer or one ZeRO shard of it ([lo, hi) of the flat
 * buffer). Lamb needs tensor boundaries (its trust ratio is per tensor): give them with
 * dt_optim_set_segments, or use dt_optim_new_for_module which does it.
 */
#ifndef DTRAIN_OPTIM_H
#define DTRAIN_OPTIM_H

#include "dtrain/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_optim_type {
    DT_OPTIM_SGD = 0,
    DT_OPTIM_ADAM,  /* DeepSpeed "Adam": L2 weight decay added to the gradient unless adam_w_mode */
    DT_OPTIM_ADAMW, /* decoupled weight decay (Adam with adam_w_mode = true) */
    DT_OPTIM_LAMB,
} dt_optim_type;

typedef struct dt_optim_config {
    dt_optim_type type;
    float lr;
    float weight_decay;
    /* SGD */
    float momentum, dampening;
    bool nesterov;
    /* Adam / AdamW / Lamb */
    float beta1, beta2, eps;
    bool bias_correction; /* default true */
    bool adam_w_mode;     /* Adam only: true turns it into AdamW (DeepSpeed's flag) */
    /* Lamb: trust ratio clamped to [min_coeff, max_coeff] (DeepSpeed defaults 0.01, 10) */
    float max_coeff, min_coeff;
} dt_optim_config;

/* Defaults of PyTorch / DeepSpeed for `type` (lr 1e-3, betas 0.9/0.999, eps 1e-8, ...;
 * AdamW weight_decay 0.01 as torch.optim.AdamW; Adam has adam_w_mode true as DeepSpeed's
 * config does — set it false for torch.optim.Adam's L2 decay). */
DT_API dt_optim_config dt_optim_defaults(dt_optim_type type);

typedef struct dt_optimizer dt_optimizer;

/* State for n elements on `dev`. NULL on error (DT_ERR_OOM, DT_ERR_CONFIG for bad values such
 * as a negative lr, betas outside [0, 1), nesterov without momentum). */
DT_API dt_optimizer *dt_optim_new(dt_device *dev, const dt_optim_config *cfg, int64_t n);
/* Over a built module's whole flat buffer, with per-tensor segments. */
DT_API dt_optimizer *dt_optim_new_for_module(const dt_optim_config *cfg, dt_module *root);
DT_API void dt_optim_free(dt_optimizer *o);
/* Tensor boundaries inside the n elements (offsets relative to the buffer start). */
DT_API dt_status dt_optim_set_segments(dt_optimizer *o, int count, const int64_t *offsets,
                                       const int64_t *sizes);
/* One update of params[0..n) from grads[0..n) at the optimiser's current lr. */
DT_API dt_status dt_optim_step(dt_optimizer *o, float *params, const float *grads, int64_t n);
/* dt_optim_step, leaving grads[0..n) zeroed: each chunk is zeroed right after the update has
 * read it, while it is in cache, instead of in a pass of its own (step, then zero_grad). */
DT_API dt_status dt_optim_step_zero_grad(dt_optimizer *o, float *params, float *grads, int64_t n);
/* Step using a module's flat buffers (optimizer made with dt_optim_new_for_module). */
DT_API dt_status dt_optim_step_module(dt_optimizer *o, dt_module *root);
/* The same, then the module's gradients zeroed without a pass over them
 * (dt_module_zero_grad_lazy): the next backward stores the first gradients instead of adding
 * them to zeros. */
DT_API dt_status dt_optim_step_module_zero_grad(dt_optimizer *o, dt_module *root);
DT_API void dt_optim_set_lr(dt_optimizer *o, float lr);
DT_API float dt_optim_lr(const dt_optimizer *o);
/* Momentum / beta1 (OneCycle cycles it). */
DT_API void dt_optim_set_momentum(dt_optimizer *o, float m);
DT_API const dt_optim_config *dt_optim_config_of(const dt_optimizer *o);
DT_API int64_t dt_optim_step_count(const dt_optimizer *o);
DT_API void dt_optim_set_step_count(dt_optimizer *o, int64_t steps);
/* State buffers for checkpoints: i in [0, count); name e.g. "exp_avg", "exp_avg_sq",
 * "momentum_buffer"; each holds n floats. */
DT_API int dt_optim_state_count(const dt_optimizer *o);
DT_API float *dt_optim_state(dt_optimizer *o, int i, const char **name);
DT_API int64_t dt_optim_numel(const dt_optimizer *o);

/* ---- LR schedules ---------------------------------------------------------------------- */

typedef enum dt_sched_type {
    DT_SCHED_CONSTANT = 0,
    DT_SCHED_WARMUP_LR,
    DT_SCHED_WARMUP_DECAY_LR,
    DT_SCHED_WARMUP_COSINE_LR,
    DT_SCHED_ONE_CYCLE,
    DT_SCHED_LR_RANGE_TEST,
    DT_SCHED_STEP_LR,
    DT_SCHED_COSINE_ANNEALING,
    DT_SCHED_USER,
} dt_sched_type;

typedef float (*dt_lr_fn)(int64_t step, float base_lr, void *user);

typedef struct dt_sched_config {
    dt_sched_type type;
    /* WarmupLR / WarmupDecayLR */
    float warmup_min_lr, warmup_max_lr;
    int64_t warmup_num_steps;
    bool warmup_linear; /* warmup_type "linear" (default "log") */
    int64_t total_num_steps; /* WarmupDecayLR, WarmupCosineLR */
    /* WarmupCosineLR (ratios of the optimiser's base lr) */
    float warmup_min_ratio, cos_min_ratio;
    /* OneCycle */
    float cycle_min_lr, cycle_max_lr, decay_lr_rate;
    int64_t cycle_first_step_size, cycle_second_step_size; /* second 0 = same as first */
    /* stair counts: 0 = continuous; second < 0 = same as first (DeepSpeed's None) */
    int64_t cycle_first_stair_count, cycle_second_stair_count, decay_step_size;
    bool cycle_momentum;
    float cycle_min_mom, cycle_max_mom, decay_mom_rate;
    /* LRRangeTest */
    float lr_range_test_min_lr, lr_range_test_step_rate;
    int64_t lr_range_test_step_size;
    bool lr_range_test_staircase;
    /* StepLR */
    int64_t step_size;
    float gamma;
    /* CosineAnnealing */
    int64_t t_max;
    float eta_min;
    /* User */
    dt_lr_fn fn;
    void *user;
    /* base lr when the schedule drives no optimiser (opt NULL); else the optimiser's lr */
    float base_lr;
} dt_sched_config;

/* DeepSpeed's defaults for each schedule's parameters. */
DT_API dt_sched_config dt_sched_defaults(dt_sched_type type);
/* "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest", "StepLR",
 * "CosineAnnealingLR". -1 if unknown. */
DT_API int dt_sched_type_from_name(const char *name);

typedef struct dt_lr_schedule dt_lr_schedule;

/* A schedule driving `opt` (may be NULL: then it only computes). base_lr is the optimiser's lr
 * at creation. The lr of step 0 is applied at creation, as DeepSpeed's schedulers do.
 * (Indexing, exactly: DeepSpeed-family schedules start at last step -1 with the lr their
 * constructors apply; torch-family ones (constant, StepLR, CosineAnnealingLR, user) at last
 * step 0; see src/optim/schedule.c.) NULL with DT_ERR_CONFIG for a bad configuration. */
DT_API dt_lr_schedule *dt_sched_new(const dt_sched_config *cfg, dt_optimizer *opt);
DT_API void dt_sched_free(dt_lr_schedule *s);
/* The lr at a given step (pure: no state change). */
DT_API float dt_sched_lr_at(const dt_lr_schedule *s, int64_t step);
/* Advance one step and set the optimiser's lr (and momentum for OneCycle). */
DT_API void dt_sched_step(dt_lr_schedule *s);
/* last_batch_iteration, for checkpoints; set restores the lr too. */
DT_API int64_t dt_sched_last_step(const dt_lr_schedule *s);
DT_API void dt_sched_set_last_step(dt_lr_schedule *s, int64_t step);

/* ---- clipping -------------------------------------------------------------------------- */

/* Scale g so its global L2 norm is at most max_norm (PyTorch's clip_grad_norm_: coefficient
 * max_norm / (norm + 1e-6), applied only when < 1). Returns the norm before clipping
 * (NaN/Inf propagate so callers can detect overflow). Deterministic summation order. */
DT_API float dt_clip_grad_norm(float *g, int64_t n, float max_norm);
/* The global L2 norm of g (deterministic). */
DT_API float dt_grad_norm(const float *g, int64_t n);
/* Clamp every element to [-clip, clip]. */
DT_API void dt_clip_grad_value(float *g, int64_t n, float clip);

/* ---- loss scaling (fp16 mixed precision) ----------------------------------------------- */

/* DeepSpeed's loss scaler (deepspeed/runtime/fp16/loss_scaler.py): DynamicLossScaler, or a
 * static LossScaler when loss_scale > 0. The fields are the engine config's "fp16" section;
 * the exact update rule and its indexing are at the top of src/optim/loss_scaler.c. */
typedef struct dt_loss_scaler_config {
    /* fp16.enabled. false gives DeepSpeed's inert scaler for bf16/fp32: a static scale of 1 */
    bool enabled;
    double loss_scale;           /* fp16.loss_scale: 0 = dynamic, > 0 = this static scale */
    int initial_scale_power;     /* dynamic: the first scale is 2^initial_scale_power (16) */
    int64_t loss_scale_window;   /* good iterations between raises of the scale (1000) */
    int hysteresis;              /* overflows tolerated before lowering (2; "delayed_shift") */
    bool consecutive_hysteresis; /* refill the hysteresis on every good iteration (false) */
    double min_loss_scale;       /* the scale never goes below this (1) */
    /* an overflow when the scale is already min_loss_scale (and the hysteresis is used up) is
     * an error, as DeepSpeed's "Current loss scale already at minimum" exception (true) */
    bool raise_error_at_min_scale;
} dt_loss_scaler_config;

/* DeepSpeed's defaults for an fp16 section with "enabled": true (dynamic, 2^16, window 1000,
 * hysteresis 2, no consecutive hysteresis, min 1, error at the minimum). DeepSpeed's non-ZeRO
 * FP16_Optimizer runs the same rule without hysteresis and without the error: set
 * hysteresis = 1 and raise_error_at_min_scale = false to match it. */
DT_API dt_loss_scaler_config dt_loss_scaler_defaults(void);

typedef struct dt_loss_scaler dt_loss_scaler;

/* The checkpointed state (DeepSpeed's DynamicLossScaler attributes of the same names). */
typedef struct dt_loss_scaler_state {
    double scale;               /* cur_scale */
    int64_t cur_iter;           /* updates so far */
    int64_t last_overflow_iter; /* iteration of the last overflow, -1 if none */
    int cur_hysteresis;         /* overflows left before the scale is lowered (>= 1) */
} dt_loss_scaler_state;

/* A scaler for `cfg` (NULL = dt_loss_scaler_defaults()). Owned by the caller: free with
 * dt_loss_scaler_free. NULL with DT_ERR_CONFIG for a bad value (negative or non-finite
 * loss_scale, window or hysteresis < 1, min_loss_scale <= 0, a first scale that is not a
 * finite f32), DT_ERR_OOM if out of memory. */
DT_API dt_loss_scaler *dt_loss_scaler_new(const dt_loss_scaler_config *cfg);
DT_API void dt_loss_scaler_free(dt_loss_scaler *ls);
/* The scale to multiply the loss by before backward (1 for a NULL scaler). */
DT_API float dt_loss_scaler_scale(const dt_loss_scaler *ls);
DT_API const dt_loss_scaler_config *dt_loss_scaler_config_of(const dt_loss_scaler *ls);
/* True when any of g[0..n) is +-Inf or NaN (exact bit test; parallel and vectorised; the
 * answer never depends on the thread count). False for n <= 0. */
DT_API bool dt_grads_have_inf_or_nan(const float *g, int64_t n);
/* g *= 1/scale, with 1/scale rounded to f32 once (as DeepSpeed's grad.mul_(1. / scale)). */
DT_API void dt_loss_scaler_unscale(float *g, int64_t n, float scale);
/* End of an optimiser step: `overflow` says whether the (all-reduced) gradients had Inf/NaN.
 * *skip (may be NULL) is set to whether the optimiser step must be skipped — exactly when
 * overflow is true, static scaling included. A dynamic scaler then moves its scale by
 * DeepSpeed's rule; a static one never changes. Returns DT_ERR_STATE with *skip = true and the
 * state unchanged when an overflow would lower a scale already at min_loss_scale and
 * raise_error_at_min_scale is set (training cannot go on: the gradients overflow at the
 * smallest scale allowed); DT_ERR_INVALID for a NULL scaler. */
DT_API dt_status dt_loss_scaler_update(dt_loss_scaler *ls, bool overflow, bool *skip);
DT_API void dt_loss_scaler_get_state(const dt_loss_scaler *ls, dt_loss_scaler_state *out);
/* Restore a state from dt_loss_scaler_get_state; the following updates then match an
 * uninterrupted run exactly. DT_ERR_INVALID (scaler unchanged) for a scale that is not
 * positive and finite, cur_iter < 0, last_overflow_iter outside [-1, cur_iter) or
 * cur_hysteresis < 1. */
DT_API dt_status dt_loss_scaler_set_state(dt_loss_scaler *ls, const dt_loss_scaler_state *st);

/* ---- the step at an accumulation boundary ---------------------------------------------- */

/* What differs between the callers of dt_boundary_step (the trial context; the engine at each
 * ZeRO stage), as callbacks on their `self`. The order they run in is in src/optim/step.c. */
typedef struct dt_boundary_ops {
    /* Required. Reduce the window's gradients over the data-parallel ranks (nothing on one);
     * *g and *n: this rank's part of the result, which the steps below read and write. */
    dt_status (*reduce)(void *self, float **g, int64_t *n);
    /* fp16: make this rank's overflow flag (1 or 0) every rank's (a MAX over the ranks). NULL
     * when every rank holds the same reduced gradient, so the local answer is everyone's. */
    dt_status (*agree_overflow)(void *self, double *flag);
    /* The unscaled gradient before the update: its norm, clipping. NULL: left as it is. */
    dt_status (*clip)(void *self, float *g, int64_t n);
    /* Required. The optimiser update from g, leaving the gradients ready for the next window. */
    dt_status (*update)(void *self, float *g, int64_t n);
    /* Required with a scaler: drop the gradients of a step skipped on overflow. */
    void (*discard)(void *self);
} dt_boundary_ops;

/* One optimiser step at the end of an accumulation window: reduce, then with a loss scaler
 * (fp16; NULL for none) the overflow check, the scaler update and unscaling, then clip and
 * update. *skipped (may be NULL) says whether an overflow skipped the update (discard has run,
 * the scaler has moved). Returns the first callback error as it is (the steps after it do not
 * run), the scaler's DT_ERR_STATE for an overflow at the minimum scale (after the skip), or
 * DT_ERR_INVALID when a required callback is missing. */
DT_API dt_status dt_boundary_step(const dt_boundary_ops *ops, void *self, dt_loss_scaler *scaler,
                                  bool *skipped);

#ifdef __cplusplus
}
#endif
#endif
