/*
 * dsat/dsat.h — the DeepSpeed autotuner's engine-facing half: what a profile trial measures,
 * the memory model that predicts a configuration's peak device bytes (and so an OOM) before it
 * is launched, the DeepSpeed config and trial hyperparameters of a knob set, and how a dsat
 * trial runs and measures itself. The search methods and the search runner build on these;
 * docs/dsat.md describes the model, the metrics and the hyperparameter keys.
 *
 *   dt_dsat_profile p;                            // from the profile trial (mode "profile")
 *   dt_dsat_knobs k = dt_dsat_knobs_default();    // stage 1, mbs 1, the user's settings
 *   k.zero_stage = 2;
 *   int64_t mbs = dt_dsat_max_mbs(&p, &k);        // the largest micro-batch predicted to fit
 *   json_t *ds = dt_dsat_ds_config(user_ds, &k, p.slots);
 */
#ifndef DTRAIN_DSAT_H
#define DTRAIN_DSAT_H

#include "dtrain/engine.h"
#include "launch/launch.h"
#include "dtrain/search.h"

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_dsat_profile { /* what the profile trial measured */
    int64_t params, trainable_params;
    int64_t device_budget;             /* bytes one slot may use: the accounting's budget */
    int64_t activation_per_example;    /* bytes, from the engine's exact accounting */
    int64_t measured_peak;             /* the profile step's peak device bytes */
    int64_t optimizer_bytes_per_param; /* the engine's optimizer state per trainable param */
    int slots;
    dt_dtype compute; /* DT_DTYPE_F32 / BF16 / F16 */
    /* activation bytes that do not grow with the micro-batch: the arena's first block when
     * one example left it partly empty (then activation_per_example is the exact bytes an
     * example needs), else 0 (then it is the category's peak, block slack included) */
    int64_t activation_floor;
    int64_t activation_base;       /* activations = max(floor, base + mbs x per example); base is 0
                                    * from one profile, set by dt_dsat_profile_refine */
    int64_t micro_batch;           /* the profile's micro-batch and what its step's arena saw: */
    int64_t activation_peak;       /* the activation category's peak (what the budget sees) */
    int64_t activation_high_water; /* the bytes the step's activations used */
    int64_t other_bytes;           /* the step's peak of the "other" category (GEMM scratch, tape,
                                    * batches), taken as a constant */
    int64_t largest_group;         /* elements of the largest module's own parameters: a ZeRO
                                    * bucket or gather holds at least one */
    int64_t reduce_bucket_size;    /* the user's zero_optimization.reduce_bucket_size */
    int64_t stage3_live_params;    /* elements gathered at once at stage 3 besides the partition:
                                    * the persistent groups and the largest prefetch run, from the
                                    * module tree and the user's stage3 settings */
    int user_stage;                /* the user's ZeRO stage, the one the profile ran at */
    /* set by dt_dsat_profile_refine (0 from one profile): the growth per example of the
     * arena's high-water mark when the peak grew less (the second step fit in the first's
     * blocks, so the tails a much larger first step leaves, up to as much again, are unseen;
     * else 0: the peaks' growth shows them), and of the "other" category (GEMM operand
     * buffers and scratch grow with the rows) */
    int64_t activation_hw_per_example;
    int64_t other_per_example;
} dt_dsat_profile;

typedef struct dt_dsat_knobs {                         /* one configuration to try */
    int zero_stage;                                    /* 0..3 */
    int64_t mbs;                                       /* train_micro_batch_size_per_gpu */
    int64_t reduce_bucket_size, allgather_bucket_size; /* 0: the user's */
    int overlap_comm, reduce_scatter, contiguous_gradients, allgather_partitions; /* -1: user's */
    bool offload_optimizer;
} dt_dsat_knobs;

/* Stage 1, micro-batch 1, every other knob the user's. */
DT_API dt_dsat_knobs dt_dsat_knobs_default(void);

/* The memory model: per-stage model-state bytes (the reference's formula corrected for bf16,
 * fp16 master weights, offload and the optimizer's real state size) + activations x mbs. */
DT_API int64_t dt_dsat_model_state_bytes(const dt_dsat_profile *p, const dt_dsat_knobs *k);
/* Activation bytes of k->mbs examples (the activation term of dt_dsat_predict_bytes). */
DT_API int64_t dt_dsat_activation_bytes(const dt_dsat_profile *p, int64_t mbs);
DT_API int64_t dt_dsat_predict_bytes(const dt_dsat_profile *p, const dt_dsat_knobs *k);
DT_API int64_t dt_dsat_max_mbs(const dt_dsat_profile *p, const dt_dsat_knobs *k); /* >= 1 */

/* The DeepSpeed config of a knob set: the user's JSON with the knobs merged in,
 * train_batch_size = mbs x gas x slots, autotuning keys removed (new reference). NULL with
 * DT_ERR_CONFIG when `user` is not an object, DT_ERR_INVALID for knobs out of range. */
DT_API json_t *dt_dsat_ds_config(const json_t *user, const dt_dsat_knobs *k, int slots);

/* ---- dsat trials ----------------------------------------------------------------------------
 * A dsat trial is the user's engine-based trial with two hyperparameters set by the search:
 *   overwrite_deepspeed_args  the knob set's keys merged over the user's own overrides (so
 *                             dt_ds_config_from_hparams gives the trial the knob set's config);
 *   dsat                      {mode: "profile" | "trial", start_profile_step, end_profile_step,
 *                             predicted_bytes (optional)}.
 * It trains end_profile_step global batches (profile: 1) and reports its measurements as
 * validation metrics (docs/dsat.md names them). */

typedef enum dt_dsat_mode { DT_DSAT_PROFILE = 0, DT_DSAT_TRIAL } dt_dsat_mode;

typedef struct dt_dsat_run {
    dt_dsat_mode mode;
    int start_profile_step, end_profile_step; /* global batches, 1-based, inclusive (3, 5) */
    int64_t predicted_bytes; /* the memory model's prediction, reported next to the measured
                              * peak (0: not known) */
} dt_dsat_run;

/* The hyperparameters of a dsat trial: a copy of `user_hparams` with `overwrite_deepspeed_args`
 * and `dsat` set as above. `user_ds` is the user's DeepSpeed config (deepspeed_config merged
 * with their overrides). NULL with the error set (dt_dsat_ds_config's, or DT_ERR_INVALID for a
 * run whose steps are not 1 <= start <= end). */
DT_API json_t *dt_dsat_trial_hparams(const json_t *user_hparams, const json_t *user_ds,
                                     const dt_dsat_knobs *k, int slots, const dt_dsat_run *run);
/* Read hparams.dsat: DT_OK with *is_dsat false when there is none; DT_ERR_CONFIG naming the
 * key when it is malformed. */
DT_API dt_status dt_dsat_run_from_hparams(const json_t *hparams, bool *is_dsat, dt_dsat_run *out);

typedef struct dt_dsat_metrics { /* a trial's result over the profile steps */
    double forward_ms, backward_ms, step_ms, latency_ms, throughput, flops_per_slot;
    int64_t peak_bytes;
    bool oom;
} dt_dsat_metrics;

/* One global batch as the engine's timers saw it (seconds and FLOPs summed over its
 * micro-batches on this slot). */
typedef struct dt_dsat_step {
    double forward_s, backward_s, step_s;
    int64_t flops; /* forward + backward */
} dt_dsat_step;

/* The metrics of steps[start-1 .. end-1] (1-based, inclusive; end <= n): forward, backward
 * and step ms per micro-batch, latency ms per global batch (their sum over its `gas`
 * micro-batches), throughput = train_batch_size / latency (samples/s), FLOPS per slot = FLOPs
 * of a global batch / latency, each from 10% trimmed means over the steps. peak_bytes and oom
 * are left as they are. DT_ERR_INVALID for a range outside [1, n] or gas / batch < 1. */
DT_API dt_status dt_dsat_metrics_compute(const dt_dsat_step *steps, int n, int start, int end,
                                         int64_t gas, int64_t train_batch_size,
                                         dt_dsat_metrics *out);

/* Fill *out from an engine that has just trained one global batch at micro-batch 1 (every
 * rank calls it: the peaks are the largest over the ranks). `budget` is the slot's device
 * budget (0: the engine's device budget, else the host memory per slot). */
DT_API dt_status dt_dsat_profile_engine(dt_engine *e, int64_t budget, dt_dsat_profile *out);

/* Refine `p` with a second profile `q` of the same model at a larger micro-batch: the
 * activations become affine in the micro-batch (a part that does not grow with it, such as bf16
 * autocast's copies of the weights, is no longer taken as growing), with the slope the larger
 * of the two peaks' and the two high-water marks' growth per example. DT_ERR_INVALID when q's
 * micro-batch is not larger. */
DT_API dt_status dt_dsat_profile_refine(dt_dsat_profile *p, const dt_dsat_profile *q);

/* What a dsat trial reports, as validation metrics (names in docs/dsat.md; the profile's keys
 * for a profile trial). predicted_bytes 0: not reported. */
DT_API dt_metrics dt_dsat_metrics_report(const dt_dsat_metrics *m, int64_t predicted_bytes);
DT_API dt_metrics dt_dsat_profile_report(const dt_dsat_profile *p);
/* Back from a profile trial's validation metrics: DT_ERR_FORMAT naming a missing key. */
DT_API dt_status dt_dsat_profile_from_metrics(const dt_metrics *m, dt_dsat_profile *out);

/* Run the prepared trial `t` of `lib` as a dsat trial (its hyperparameters carry `dsat`;
 * every slot calls it): train to end_profile_step global batches (profile: 1) reading the
 * first engine's timers at each accumulation boundary, stop, then report the measurements as
 * validation metrics and complete the searcher operation through t->fit.core when one is set
 * (the searcher metric's value, NaN for an OOM). An OOM (DT_ERR_OOM) is a result
 * (metrics->oom). The measurements go to *metrics (trial) or *profile (profile) too (either
 * may be NULL). A profile that fails returns its cause and what to try; other failures the
 * trial's own error. */
DT_API dt_status dt_dsat_trial_run(const dt_trial_lib *lib, const dt_prepared_trial *t,
                                   dt_dsat_metrics *metrics, dt_dsat_profile *profile);

/* ---- the search runner ---------------------------------------------------------------------
 * The search method of `searcher: {name: dsat, method: binary | random | asha, dsat: {...}}`
 * (docs/dsat.md): profile trials, then the method's configurations as trials, the best config
 * and a summary written to `out_dir` after every trial. `cfg` (borrowed for the method's life)
 * is the experiment config, `model_dir` where hyperparameters.deepspeed_config is found.
 * DT_ERR_CONFIG (nothing created) when the metric, the hyperparameters (const only) or the
 * DeepSpeed config cannot run, saying what to fix. */
DT_API dt_status dt_dsat_runner_new(const dt_expconf *cfg, const char *model_dir,
                                    const char *out_dir, dt_search_method *out);

#ifdef __cplusplus
}
#endif
#endif
