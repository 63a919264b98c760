/*
 * dtrain/engine.h — the DeepSpeed-style training engine: a JSON config with DeepSpeed's keys
 * and defaults, batch arithmetic, ZeRO stages 0-3, optimizer / parameter offload (cpu, nvme),
 * fp16 loss scaling and bf16, gradient accumulation boundaries and engine checkpoints.
 *
 * Life of an engine (every rank of the data-parallel group runs the same calls):
 *
 *   json_t *cfg = dt_ds_config_load("ds_config.json");     // or JSON text "{...}"
 *   dt_engine *e = dt_engine_init(net, cfg);               // net built with dt_module_build
 *   for (...) {                                            // one micro-batch per iteration
 *       dt_tensor *loss = dt_cross_entropy(dt_engine_forward(e, x), y);
 *       dt_engine_backward(e, loss);                       // loss / gradient_accumulation_steps
 *       dt_engine_step(e);                                 // acts at accumulation boundaries
 *   }
 *   dt_engine_save_checkpoint(e, "ckpt", NULL, NULL);      // DIR/global_step<N>/ + DIR/latest
 *   dt_engine_free(e);
 *
 * The config section of this header (dt_ds_config) is the parsed, validated form of the JSON;
 * docs/engine.md lists every key. The engine section is the runtime.
 */
#ifndef DTRAIN_ENGINE_H
#define DTRAIN_ENGINE_H

#include "dtrain/dist.h"
#include "dtrain/optim.h"

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the DeepSpeed config ------------------------------------------------------------------ */

/* Where offloaded state lives. */
typedef enum dt_offload_device {
    DT_OFFLOAD_NONE = 0,
    DT_OFFLOAD_CPU,
    DT_OFFLOAD_NVME,
} dt_offload_device;

typedef struct dt_zero_config {
    int stage;                     /* 0..3 (default 0) */
    bool overlap_comm;             /* default: false; true at stage 3 (DeepSpeed's defaults) */
    bool contiguous_gradients;     /* default true */
    bool reduce_scatter;           /* default true */
    int64_t reduce_bucket_size;    /* elements (default 5e8) */
    int64_t allgather_bucket_size; /* elements (default 5e8) */
    dt_offload_device offload_optimizer;
    char offload_optimizer_nvme_path[512];
    dt_offload_device offload_param; /* stage 3 only */
    char offload_param_nvme_path[512];
    int64_t param_persistence_threshold; /* stage3_param_persistence_threshold (default 1e5) */
    int64_t prefetch_bucket_size;        /* stage3_prefetch_bucket_size (default 5e7) */
    int64_t max_live_parameters;         /* stage3_max_live_parameters (default 1e9) */
} dt_zero_config;

typedef struct dt_activation_ckpt_config {
    bool partition_activations;
    bool cpu_checkpointing;
    bool contiguous_memory_optimization;
    int64_t number_checkpoints; /* -1 = None */
    bool synchronize_checkpoint_boundary;
    bool profile;
} dt_activation_ckpt_config;

typedef struct dt_flops_profiler_config {
    bool enabled;
    int64_t profile_step;  /* default 1 */
    int64_t module_depth;  /* default -1 */
    int64_t top_modules;   /* default 1 */
    bool detailed;         /* default true */
    char output_file[512]; /* "" = stdout */
} dt_flops_profiler_config;

typedef struct dt_ds_config {
    /* batch arithmetic, resolved with DeepSpeed's inference rules for `dp_world_size`:
     * train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * W */
    int64_t train_batch_size;
    int64_t train_micro_batch_size_per_gpu;
    int64_t gradient_accumulation_steps;
    int dp_world_size;

    bool has_optimizer; /* an "optimizer" section was given */
    dt_optim_config optimizer;
    bool has_scheduler;
    dt_sched_config scheduler;

    double gradient_clipping; /* default 1.0 (DeepSpeed's); 0 = off */
    bool prescale_gradients;
    double gradient_predivide_factor; /* default 1 */

    dt_loss_scaler_config fp16; /* fp16.enabled and DeepSpeed's dynamic scaler settings */
    bool bf16;                  /* bf16.enabled (or "bfloat16") */

    dt_zero_config zero;
    dt_activation_ckpt_config activation_checkpointing;
    int64_t steps_per_print;   /* 0 = never (DeepSpeed's default, None) */
    bool wall_clock_breakdown; /* default false */
    dt_flops_profiler_config flops_profiler;
    int64_t memory_budget_bytes; /* "memory_budget" (dtrain's own key; 0 = none) */
    /* "deterministic" (dtrain's own key; default false): every ZeRO stage sums the gradients
     * in one order (each micro-batch reduced, the reduced sums accumulated) and the clipping
     * norm in one partition-independent order, so the stage changes memory, not bits */
    bool deterministic;
} dt_ds_config;

/* Read a DeepSpeed config: `src` is a file path, or JSON text when its first non-blank
 * character is '{'. Returns a new reference (json_decref it). On error NULL with DT_ERR_IO
 * (unreadable file) or DT_ERR_CONFIG ("ds_config.json:3:17: malformed JSON: ..."; the root
 * must be an object). */
DT_API json_t *dt_ds_config_load(const char *src);

/* A new object: `base` with `overrides` merged in recursively (objects merge key by key,
 * every other value replaces). Either may be NULL (= {}). Neither argument is modified.
 * NULL with DT_ERR_CONFIG if a non-NULL argument is not an object. */
DT_API json_t *dt_overwrite_config(const json_t *base, const json_t *overrides);

/* Validate `j` and fill *out with DeepSpeed's semantics and defaults for a data-parallel group
 * of `dp_world_size` ranks. Unknown keys are logged as one warning naming them (with a "did
 * you mean" suggestion when close to a known key). Errors (DT_ERR_CONFIG, *out undefined)
 * name the key and say what to change, e.g. batch sizes that do not multiply out (the message
 * shows all four numbers), an unknown optimizer or scheduler type, a value of the wrong type,
 * and the combinations DeepSpeed refuses (fp16 with bf16, offload_param below stage 3,
 * offload_optimizer at stage 0, nvme offload without nvme_path). */
DT_API dt_status dt_ds_config_parse(const json_t *j, int dp_world_size, dt_ds_config *out);
/* dt_ds_config_parse for a check: *warnings (a new array, also on error) gets one string per key
 * that is unknown or has no effect here ("NAME: tensorboard has no effect: ..."); errors are
 * prefixed with `name` (the file). */
DT_API dt_status dt_ds_config_check(const json_t *j, const char *name, int dp_world_size,
                                    json_t **warnings);

/* ---- the engine ---------------------------------------------------------------------------- */

typedef struct dt_engine dt_engine;

typedef struct dt_engine_opts {
    /* The data-parallel group (borrowed; must outlive the engine). NULL: the engine calls
     * dt_comm_init and owns the world it gets. */
    dt_comm *comm;
    /* Ranks of a pipeline or model-parallel layout may restrict the group; 0 = no pipeline. */
    int pipeline_stages;
} dt_engine_opts;

/* An engine over `model` (built with dt_module_build; every rank builds the same model and the
 * engine broadcasts rank 0's weights). `config` is a DeepSpeed config object (not kept).
 * Collective over the data-parallel group. NULL on error (dt_last_error says why; the model is
 * left as it was). The engine does not own the model: free the engine first. */
DT_API dt_engine *dt_engine_init(dt_module *model, const json_t *config);
/* The same from a config file path or JSON text (dt_ds_config_load's rules). */
DT_API dt_engine *dt_engine_init_file(dt_module *model, const char *src);
DT_API dt_engine *dt_engine_init_opts(dt_module *model, const json_t *config,
                                      const dt_engine_opts *opts);
DT_API void dt_engine_free(dt_engine *e);

/* The model's forward with the engine's hooks (ZeRO-3 gathers each module's parameters around
 * its forward) and the config's autocast (bf16). */
DT_API dt_tensor *dt_engine_forward(dt_engine *e, dt_tensor *x);
/* Backward of `loss` scaled by 1/gradient_accumulation_steps (and by the fp16 loss scale).
 * ZeRO-2/3 reduce gradient buckets to their owners as backward produces them. */
DT_API dt_status dt_engine_backward(dt_engine *e, dt_tensor *loss);
/* End of a micro-batch. At an accumulation boundary: reduce gradients per the ZeRO stage,
 * unscale and check for overflow (fp16: an overflow skips the update and moves the scale),
 * clip, update the owned parameters, gather them, step the LR schedule and zero the gradients.
 * Always resets the model's tensor context: tensors of this micro-batch are gone afterwards. */
DT_API dt_status dt_engine_step(dt_engine *e);

DT_API bool dt_engine_is_gradient_accumulation_boundary(const dt_engine *e);
DT_API int64_t dt_engine_train_batch_size(const dt_engine *e);
DT_API int64_t dt_engine_train_micro_batch_size_per_gpu(const dt_engine *e);
DT_API int64_t dt_engine_gradient_accumulation_steps(const dt_engine *e);
DT_API int64_t dt_engine_global_steps(const dt_engine *e); /* optimizer steps taken or skipped */
DT_API int64_t dt_engine_skipped_steps(const dt_engine *e); /* fp16 overflows */
DT_API float dt_engine_get_lr(const dt_engine *e);
DT_API double dt_engine_loss_scale(const dt_engine *e); /* 1 unless fp16 */
DT_API dt_module *dt_engine_module(const dt_engine *e);
DT_API dt_comm *dt_engine_comm(const dt_engine *e);
/* Norm of the (unscaled, reduced) gradient at the last boundary, before clipping. */
DT_API float dt_engine_grad_norm(const dt_engine *e);

/* Memory of this rank by category: the compute device and the host / nvme stores offloaded
 * state lives on (zeros when nothing is offloaded). */
typedef struct dt_engine_memory {
    dt_mem_stats device;
    dt_mem_stats host;
    int64_t nvme_bytes; /* bytes in files under nvme_path */
} dt_engine_memory;
DT_API void dt_engine_memory_stats(const dt_engine *e, dt_engine_memory *out);

/* Timers and FLOPs (what wall_clock_breakdown prints and dsat reads): seconds summed over the
 * micro-batches since the last reset, and the model FLOPs counted by the tensor context. */
typedef struct dt_engine_timers {
    double forward_s, backward_s, step_s;
    double reduce_s;  /* gradient reduction inside backward and step */
    double gather_s;  /* ZeRO-3 parameter gathers */
    double offload_s; /* offload transfers (nvme reads/writes, host copies) */
    int64_t micro_steps, steps;
    int64_t flops_fwd, flops_bwd;
} dt_engine_timers;
DT_API void dt_engine_get_timers(const dt_engine *e, dt_engine_timers *out);
DT_API void dt_engine_reset_timers(dt_engine *e);

/* ---- engine checkpoints -------------------------------------------------------------------
 * DIR/TAG/ holds model.safetensors (the consolidated weights whatever the stage, by parameter
 * name), optim_shard_<r>_of_<W>.safetensors (each rank's fp32 master and optimizer state over
 * its range of the flat buffer) and engine_state.json (steps, schedule, loss scaler, world size,
 * stage, the shard ranges, client state); DIR/latest names the last tag. Files are written to
 * temporary names and renamed, `latest` last. Collective. TAG NULL = "global_step<N>". */
DT_API dt_status dt_engine_save_checkpoint(dt_engine *e, const char *dir, const char *tag,
                                           const json_t *client_state);

typedef struct dt_engine_load_opts {
    bool load_optimizer_states;    /* default true */
    bool load_lr_scheduler_states; /* default true */
    bool load_module_only;         /* weights only: no optimizer, schedule or counters */
} dt_engine_load_opts;

/* Load DIR/TAG (TAG NULL = the tag named by DIR/latest). Works for any saved data-parallel
 * world size and ZeRO stage: optimizer shards are re-sliced to this engine's ranges. On error
 * the engine is unchanged. *client_state (may be NULL) gets the saved client state (a new
 * reference, or NULL when none was saved). */
DT_API dt_status dt_engine_load_checkpoint(dt_engine *e, const char *dir, const char *tag,
                                           const dt_engine_load_opts *opts, json_t **client_state);

#ifdef __cplusplus
}
#endif
#endif
