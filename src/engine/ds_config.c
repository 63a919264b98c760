/*
 * ds_config.c — the DeepSpeed config: loading (a file or JSON text), recursive merging, and
 * parsing into dt_ds_config with DeepSpeed's defaults, batch arithmetic and checks.
 *
 * DeepSpeed's own config code is the specification (deepspeed/runtime/config.py,
 * runtime/zero/config.py, runtime/zero/offload_config.py, runtime/precision_config.py, the
 * optimizer and LR-scheduler constructors the engine calls). tools/golden_ds_config.py runs
 * that code over a table of configs and tests/engine/test_ds_config.c checks that this file
 * resolves every row to the same numbers, or refuses it. The few deliberate differences are
 * marked in the golden rows and listed in docs/engine.md ("Where dtrain differs").
 *
 * Conventions of the parse:
 *   - An absent key and a key whose value is null take the default. Inside the sections that
 *     DeepSpeed validates with pydantic (fp16, bf16, zero_optimization, offload_*), the string
 *     "auto" also means the default, as there.
 *   - Integer keys accept JSON integers and reals with an integral value (5e8); booleans accept
 *     true/false and the numbers 0/1 (pydantic's reading).
 *   - Unknown keys are not errors: one warning (dt_log) names all of them, each with the closest
 *     known key when it looks like a typo. Keys DeepSpeed knows but dtrain does not use are
 *     accepted silently; keys DeepSpeed has removed are errors, as there.
 *   - The first error stops the parse: DT_ERR_CONFIG "ds_config: <key path> <what is wrong>;
 *     hint: <what to do>".
 * Typed reads, messages, suggestions and the unknown-key list are base's config toolkit
 * (base/confcheck.h) in its JSON dialect; this file holds DeepSpeed's keys and rules.
 */
#include "dtrain/engine.h"
#include "base/confcheck.h"
#include "engine/ds_config_impl.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- loading ----------------------------------------------------------------------------- */

static const char *json_hint(const char *text) {
    if (strstr(text, "duplicate object key"))
        return "each key may appear only once in an object (DeepSpeed refuses duplicates too)";
    if (strstr(text, "end of file") || strstr(text, "premature end"))
        return "an object or string is not closed: check that every '{', '[' and '\"' has its "
               "closing partner";
    if (strstr(text, "invalid token") || strstr(text, "string or '}' expected"))
        return "dtrain reads strict JSON: keys and strings in double quotes, no comments, no "
               "trailing comma before '}' or ']'";
    return "check the JSON near that position (a missing comma, quote or bracket is the usual "
           "cause)";
}

static json_t *finish_load(json_t *root, const json_error_t *err, const char *name) {
    if (!root) {
        dt_error(DT_ERR_CONFIG, "%s:%d:%d: malformed JSON: %s; hint: %s", name, err->line,
                 err->column, err->text, json_hint(err->text));
        return NULL;
    }
    if (!json_is_object(root)) {
        dt_error(DT_ERR_CONFIG,
                 "%s: a DeepSpeed config must be a JSON object ({...}) at its root, got %s; "
                 "hint: wrap the settings in {} with keys such as \"train_batch_size\"",
                 name, json_is_array(root) ? "an array" : "a scalar");
        json_decref(root);
        return NULL;
    }
    return root;
}

json_t *dt_ds_config_load(const char *src) {
    if (!src) {
        dt_error(DT_ERR_INVALID, "dt_ds_config_load: src is NULL; hint: pass a file path or "
                                 "JSON text");
        return NULL;
    }
    const char *p = src;
    while (*p && isspace((unsigned char)*p)) p++;
    json_error_t err;
    if (*p == '{') {
        json_t *root = json_loads(src, JSON_REJECT_DUPLICATES, &err);
        return finish_load(root, &err, "<config text>");
    }
    if (!*p) {
        dt_error(DT_ERR_CONFIG, "dt_ds_config_load: empty config; hint: pass a file path or "
                                "JSON text starting with '{'");
        return NULL;
    }
    FILE *f = fopen(src, "rb");
    if (!f) {
        dt_error(DT_ERR_IO,
                 "cannot read DeepSpeed config '%s': %s; hint: check the path (JSON text must "
                 "start with '{')",
                 src, strerror(errno));
        return NULL;
    }
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
    bool read_error = ferror(f) != 0;
    fclose(f);
    if (read_error) {
        json_decref(root);
        dt_error(DT_ERR_IO,
                 "cannot read DeepSpeed config '%s': read error; hint: is it a "
                 "regular file?",
                 src);
        return NULL;
    }
    return finish_load(root, &err, src);
}

/* ---- merging ----------------------------------------------------------------------------- */

/* Merge `over` into `dst` (both objects; dst is owned and modified). */
static int merge_into(json_t *dst, const json_t *over) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)over, key, v) {
        json_t *cur = json_object_get(dst, key);
        if (json_is_object(cur) && json_is_object(v)) {
            if (merge_into(cur, v) != 0) return -1;
        } else {
            json_t *copy = json_deep_copy(v);
            if (!copy || json_object_set_new(dst, key, copy) != 0) return -1;
        }
    }
    return 0;
}

json_t *dt_overwrite_config(const json_t *base, const json_t *overrides) {
    if ((base && !json_is_object(base)) || (overrides && !json_is_object(overrides))) {
        dt_error(DT_ERR_CONFIG,
                 "dt_overwrite_config: the %s is not a JSON object; hint: both configs must be "
                 "objects ({...}) or NULL",
                 base && !json_is_object(base) ? "base config" : "overrides");
        return NULL;
    }
    json_t *out = base ? json_deep_copy(base) : json_object();
    if (!out || (overrides && merge_into(out, overrides) != 0)) {
        json_decref(out);
        dt_error(DT_ERR_OOM, "dt_overwrite_config: out of memory");
        return NULL;
    }
    return out;
}

/* ---- messages ---------------------------------------------------------------------------- */

/* The words of every message (base's toolkit, base/confcheck.h, in its JSON dialect). */
static const dt_conf k_words = {
    .dialect = DT_CONF_JSON,
    .prefix = "ds_config: ",
    .hint = "docs/engine.md lists every key with its range and default",
    .auto_note = " (\"auto\" is filled in by the Hugging Face integration, not by DeepSpeed "
                 "itself)",
};

/* DT_ERR_CONFIG "ds_config: <message>[; hint: docs/engine.md ...]". */
#define errf(...) dt_conf_error_at(&k_words, (dt_yaml_pos){0, 0}, __VA_ARGS__)

typedef dt_conf_sec sec;

#define TRY(x)                                                                                     \
    do {                                                                                           \
        dt_status st_ = (x);                                                                       \
        if (st_ != DT_OK) return st_;                                                              \
    } while (0)

/* ---- the keys ---------------------------------------------------------------------------- */

// clang-format off
/* Top-level keys dtrain reads. */
static const char *const k_top[] = {"train_batch_size", "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps", "optimizer", "scheduler", "gradient_clipping",
    "prescale_gradients", "gradient_predivide_factor", "fp16", "bf16", "bfloat16",
    "zero_optimization", "activation_checkpointing", "steps_per_print", "wall_clock_breakdown",
    "flops_profiler", "memory_budget", "communication_data_type", "gradient_allreduce_op",
    "deterministic", NULL};
/* Top-level keys DeepSpeed knows and dtrain accepts without using them. */
static const char *const k_top_ignored[] = {"zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer", "allgather_size", "managed_gradient_accumulation", "dump_state",
    "disable_python_gc", "disable_allgather", "seq_parallel_communication_data_type",
    "memory_breakdown", "dataloader_drop_last", "vocabulary_size", "log_level", "tensorboard",
    "wandb", "csv_monitor", "comet", "comms_logger", "torch_autocast", "autotuning",
    "use_data_before_expert_parallelism", "hybrid_engine", "pipeline", "data_efficiency",
    "checkpoint", "data_types", "aio", "datastates_ckpt", "weight_quantization", "compile",
    "timers", "tensor_parallel", "expert_parallel", "sequence_parallel_size", NULL};
/* Top-level keys DeepSpeed has removed (its config refuses them). */
static const struct {
    const char *key, *what;
} k_removed[] = {
    {"nebula", "Nebula checkpointing"},
    {"compression_training", "the compression library"},
    {"amp", "the NVIDIA Apex AMP integration (use fp16 or bf16)"},
    {"quantize_training", "Mixture-of-Quantization"},
    {"sparse_gradients", "sparse compression of dense embedding gradients"},
    {"eigenvalue", "eigenvalue-based Mixture-of-Quantization"},
    {"sparse_attention", "sparse attention"},
    {"elasticity", "elastic training (set the batch sizes directly)"},
    {"graph_harvesting", "graph harvesting"},
    {"curriculum_learning", "the top-level curriculum_learning block"},
    {"progressive_layer_drop", "progressive layer dropping"},
    {"zero_optimization.mics_shard_size", "MiCS sharding"},
    {"zero_optimization.mics_hierarchical_params_gather", "MiCS sharding"},
    {"zero_optimization.zeropp_loco_param", "LoCo-ZeRO++"},
};

static const char *const k_fp16[] = {"enabled", "loss_scale", "initial_scale_power",
    "loss_scale_window", "hysteresis", "consecutive_hysteresis", "min_loss_scale",
    "fp16_master_weights_and_grads", NULL};
static const char *const k_fp16_ignored[] = {"auto_cast", NULL};
static const char *const k_bf16[] = {"enabled", "bf16_master_weights_and_grads",
    "bf16_optimizer_states", NULL};
static const char *const k_bf16_ignored[] = {"immediate_grad_update", "check_grad_overflow", NULL};
static const char *const k_zero[] = {"stage", "overlap_comm", "contiguous_gradients",
    "reduce_scatter", "reduce_bucket_size", "allgather_bucket_size", "offload_optimizer",
    "offload_param", "stage3_param_persistence_threshold", "stage3_prefetch_bucket_size",
    "stage3_max_live_parameters", "param_persistence_threshold", "prefetch_bucket_size",
    "max_live_parameters", "cpu_offload", "cpu_offload_param", "compute_grad_norm", NULL};
static const char *const k_zero_ignored[] = {"use_multi_rank_bucket_allreduce",
    "allgather_partitions", "load_from_fp32_weights", "elastic_checkpoint", "zenflow",
    "sub_group_size", "cpu_offload_use_pin_memory", "stage3_model_persistence_threshold",
    "model_persistence_threshold", "stage3_max_reuse_distance", "max_reuse_distance",
    "stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save", "stage3_module_granularity_threshold",
    "module_granularity_threshold", "stage3_use_all_reduce_for_fetch_params",
    "use_all_reduce_for_fetch_params", "stage3_allgather_sequential", "allgather_sequential",
    "ignore_unused_parameters", "legacy_stage1", "round_robin_gradients", "parameter_alignment",
    "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_nontrainable_weights",
    "zero_quantized_gradients", "memory_efficient_linear", "pipeline_loading_checkpoint",
    "override_module_apply", "log_trace_cache_warnings", "enable_sanity_checks",
    "save_muon_momentum_buffer_in_memory", "leaf_module", NULL};
static const char *const k_offload_opt[] = {"device", "nvme_path", "buffer_count", "pin_memory",
    "ratio", NULL};
static const char *const k_offload_opt_ignored[] = {"pipeline_read", "pipeline_write", "fast_init",
    "super_offload", "cpuadam_cores_perc", NULL};
static const char *const k_offload_param[] = {"device", "nvme_path", "buffer_count", "buffer_size",
    "max_in_cpu", "pin_memory", NULL};
static const char *const k_act[] = {"partition_activations", "cpu_checkpointing",
    "contiguous_memory_optimization", "number_checkpoints", "synchronize_checkpoint_boundary",
    "profile", NULL};
static const char *const k_flops[] = {"enabled", "profile_step", "module_depth", "top_modules",
    "detailed", "output_file", NULL};
static const char *const k_flops_ignored[] = {"recompute_fwd_factor", NULL};
static const char *const k_optimizer[] = {"type", "params", NULL};
static const char *const k_optimizer_ignored[] = {"legacy_fusion", NULL};
static const char *const k_scheduler[] = {"type", "params", NULL};

/* Optimizer params by type (what DeepSpeed's engine passes to the optimizer it builds). */
static const char *const k_adam[] = {"lr", "betas", "eps", "weight_decay", "bias_correction",
    "adam_w_mode", "torch_adam", "amsgrad", "max_grad_norm", NULL};
static const char *const k_adam_ignored[] = {"set_grad_none", "fp32_optimizer_states", "foreach",
    NULL};
static const char *const k_lamb[] = {"lr", "betas", "eps", "weight_decay", "bias_correction",
    "max_coeff", "min_coeff", "amsgrad", "eps_inside_sqrt", "max_grad_norm", NULL};
static const char *const k_sgd[] = {"lr", "momentum", "dampening", "weight_decay", "nesterov",
    "maximize", "max_grad_norm", NULL};
static const char *const k_sgd_ignored[] = {"foreach", "differentiable", "fused", NULL};

/* Scheduler params by type (the constructors' arguments). */
static const char *const k_warmup[] = {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps",
    "warmup_type", "last_batch_iteration", NULL};
static const char *const k_warmup_decay[] = {"total_num_steps", "warmup_min_lr", "warmup_max_lr",
    "warmup_num_steps", "warmup_type", "last_batch_iteration", NULL};
static const char *const k_warmup_cosine[] = {"total_num_steps", "warmup_min_ratio",
    "warmup_num_steps", "cos_min_ratio", "warmup_type", "last_batch_iteration", NULL};
static const char *const k_one_cycle[] = {"cycle_min_lr", "cycle_max_lr", "decay_lr_rate",
    "cycle_first_step_size", "cycle_second_step_size", "cycle_first_stair_count",
    "cycle_second_stair_count", "decay_step_size", "cycle_momentum", "cycle_min_mom",
    "cycle_max_mom", "decay_mom_rate", "last_batch_iteration", NULL};
static const char *const k_lr_range[] = {"lr_range_test_min_lr", "lr_range_test_step_size",
    "lr_range_test_step_rate", "lr_range_test_staircase", "last_batch_iteration", NULL};
static const char *const k_step_lr[] = {"step_size", "gamma", "last_epoch", NULL};
static const char *const k_cosine[] = {"T_max", "eta_min", "last_epoch", NULL};

static const struct {
    const char *name;
    dt_sched_type type;
    const char *const *keys;
} k_sched_types[] = {
    {"WarmupLR", DT_SCHED_WARMUP_LR, k_warmup},
    {"WarmupDecayLR", DT_SCHED_WARMUP_DECAY_LR, k_warmup_decay},
    {"WarmupCosineLR", DT_SCHED_WARMUP_COSINE_LR, k_warmup_cosine},
    {"OneCycle", DT_SCHED_ONE_CYCLE, k_one_cycle},
    {"LRRangeTest", DT_SCHED_LR_RANGE_TEST, k_lr_range},
    {"StepLR", DT_SCHED_STEP_LR, k_step_lr},
    {"CosineAnnealingLR", DT_SCHED_COSINE_ANNEALING, k_cosine},
};
// clang-format on

/* Keys of a section DeepSpeed knows and dtrain accepts without using, and why (warnings). */
static const dt__ds_ignored k_ignored_sections[] = {
    {"fp16", k_fp16_ignored, "the fp16 section's scaler settings are what dtrain uses"},
    {"bf16", k_bf16_ignored, "a GPU tuning of DeepSpeed's bf16 optimizer"},
    {"bfloat16", k_bf16_ignored, "a GPU tuning of DeepSpeed's bf16 optimizer"},
    {"zero_optimization", k_zero_ignored,
     "a memory or communication tuning of DeepSpeed's GPU ZeRO that dtrain's ZeRO does not have"},
    {"zero_optimization.offload_optimizer", k_offload_opt_ignored,
     "a tuning of DeepSpeed's offload pipeline that dtrain's swapper does not have"},
    {"flops_profiler", k_flops_ignored, "dtrain's profiler counts the FLOPs of its own kernels"},
    {"optimizer", k_optimizer_ignored, "a PyTorch implementation detail"},
    {"optimizer.params", k_adam_ignored, "a PyTorch implementation detail"},
    {"optimizer.params", k_sgd_ignored, "a PyTorch implementation detail"},
    {NULL, NULL, NULL},
};

/* ---- unknown keys ------------------------------------------------------------------------ */

/* Record the unknown keys of `obj`; keys DeepSpeed has removed are not unknown (the parse
 * refuses them with its own message). */
static dt_status check_keys(dt_conf *c, const json_t *obj, const char *path,
                            const char *const *used, const char *const *ignored) {
    const char *accepted[96];
    size_t n = 0;
    for (const char *const *k = ignored; k && *k && n + 1 < NELEM(accepted); k++)
        accepted[n++] = *k;
    for (size_t i = 0; i < NELEM(k_removed) && n + 1 < NELEM(accepted); i++) {
        const char *dot = strrchr(k_removed[i].key, '.');
        size_t plen = dot ? (size_t)(dot - k_removed[i].key) : 0;
        if (strlen(path) == plen && !strncmp(path, k_removed[i].key, plen))
            accepted[n++] = dot ? dot + 1 : k_removed[i].key;
    }
    accepted[n] = NULL;
    return dt_conf_check_keys(c, obj, path, used, accepted);
}

static const char *const *optim_keys(const char *type, const char *const **ignored) {
    *ignored = NULL;
    if (!type) return NULL;
    if (!strcasecmp(type, "adam") || !strcasecmp(type, "adamw")) {
        *ignored = k_adam_ignored;
        return k_adam;
    }
    if (!strcasecmp(type, "lamb")) return k_lamb;
    if (!strcmp(type, "SGD")) {
        *ignored = k_sgd_ignored;
        return k_sgd;
    }
    return NULL;
}

static const char *const *sched_keys(const char *type) {
    for (size_t i = 0; type && i < NELEM(k_sched_types); i++)
        if (!strcmp(type, k_sched_types[i].name)) return k_sched_types[i].keys;
    return NULL;
}

static const json_t *obj_get(const json_t *o, const char *k) {
    return json_is_object(o) ? json_object_get(o, k) : NULL;
}

/* Every unknown key of the config, in order (sections of the wrong type are skipped: the
 * parse reports them). */
static dt_status collect_unknowns(dt_conf *c, const json_t *j) {
    const json_t *z = obj_get(j, "zero_optimization"), *o = obj_get(j, "optimizer");
    const json_t *s = obj_get(j, "scheduler");
    const char *const *ign;
    const char *const *ok = optim_keys(json_string_value(obj_get(o, "type")), &ign);
    const char *const *sk = sched_keys(json_string_value(obj_get(s, "type")));
    TRY(check_keys(c, j, "", k_top, k_top_ignored));
    TRY(check_keys(c, obj_get(j, "fp16"), "fp16", k_fp16, k_fp16_ignored));
    TRY(check_keys(c, obj_get(j, "bf16"), "bf16", k_bf16, k_bf16_ignored));
    TRY(check_keys(c, obj_get(j, "bfloat16"), "bfloat16", k_bf16, k_bf16_ignored));
    TRY(check_keys(c, z, "zero_optimization", k_zero, k_zero_ignored));
    TRY(check_keys(c, obj_get(z, "offload_optimizer"), "zero_optimization.offload_optimizer",
                   k_offload_opt, k_offload_opt_ignored));
    TRY(check_keys(c, obj_get(z, "offload_param"), "zero_optimization.offload_param",
                   k_offload_param, NULL));
    TRY(check_keys(c, obj_get(j, "activation_checkpointing"), "activation_checkpointing", k_act,
                   NULL));
    TRY(check_keys(c, obj_get(j, "flops_profiler"), "flops_profiler", k_flops, k_flops_ignored));
    TRY(check_keys(c, o, "optimizer", k_optimizer, k_optimizer_ignored));
    if (ok) TRY(check_keys(c, obj_get(o, "params"), "optimizer.params", ok, ign));
    TRY(check_keys(c, s, "scheduler", k_scheduler, NULL));
    if (sk) TRY(check_keys(c, obj_get(s, "params"), "scheduler.params", sk, NULL));
    return DT_OK;
}

/* ---- batch arithmetic -------------------------------------------------------------------- */

static const char k_batch3[] =
    "train_micro_batch_size_per_gpu * gradient_accumulation_steps * world size";

/* A product of batch settings past 64 bits: `names` spells the factors, v[0..n) are their
 * values. Always DT_ERR_CONFIG. */
static dt_status batch_overflow(const char *names, int n, const int64_t *v) {
    char vals[96];
    if (n == 3)
        snprintf(vals, sizeof vals, "%lld * %lld * %lld", (long long)v[0], (long long)v[1],
                 (long long)v[2]);
    else
        snprintf(vals, sizeof vals, "%lld * %lld", (long long)v[0], (long long)v[1]);
    return errf("%s (%s) does not fit in 64 bits (the product must be at most %lld); hint: use "
                "smaller batch settings: train_batch_size, the global batch, is "
                "train_micro_batch_size_per_gpu * gradient_accumulation_steps * world size",
                names, vals, (long long)INT64_MAX);
}

/* "(e.g. 8 or 12)": the multiples of unit (>= 1) nearest t, leaving out one past 64 bits. */
static void multiples_near(int64_t t, int64_t unit, char *buf, size_t n) {
    int64_t lo = t / unit * unit, hi;
    if (lo == 0)
        snprintf(buf, n, "(e.g. %lld)", (long long)unit);
    else if (__builtin_add_overflow(lo, unit, &hi))
        snprintf(buf, n, "(e.g. %lld)", (long long)lo);
    else
        snprintf(buf, n, "(e.g. %lld or %lld)", (long long)lo, (long long)hi);
}

/* The error for batch settings that do not multiply out; m * g * w must fit in 64 bits (the
 * caller checked). A hint's unit past 64 bits is reported as such. Always DT_ERR_CONFIG. */
static dt_status batch_mismatch(int64_t t, int64_t m, int64_t g, int w, bool ht, bool hm, bool hg) {
    const char *inf_m = hm ? "" : " (inferred)", *inf_g = hg ? "" : " (inferred)";
    const char *inf_t = ht ? "" : " (inferred)";
    char hint[512], eg[64];
    int64_t unit;
    if (ht && hm && hg) {
        snprintf(hint, sizeof hint,
                 "change one of them: with these micro-batch and accumulation settings "
                 "train_batch_size must be %lld, or drop one of the three keys and let it be "
                 "inferred",
                 (long long)(m * g * w));
    } else if (ht && hm) {
        if (__builtin_mul_overflow(m, (int64_t)w, &unit))
            return batch_overflow("train_micro_batch_size_per_gpu * world size", 2,
                                  (int64_t[]){m, w});
        multiples_near(t, unit, eg, sizeof eg);
        snprintf(hint, sizeof hint,
                 "train_batch_size must be a multiple of train_micro_batch_size_per_gpu * world "
                 "size = %lld %s; change train_batch_size or train_micro_batch_size_per_gpu",
                 (long long)unit, eg);
    } else if (ht && hg) {
        if (__builtin_mul_overflow(g, (int64_t)w, &unit))
            return batch_overflow("gradient_accumulation_steps * world size", 2, (int64_t[]){g, w});
        multiples_near(t, unit, eg, sizeof eg);
        snprintf(hint, sizeof hint,
                 "train_batch_size must be a multiple of gradient_accumulation_steps * world "
                 "size = %lld %s; change train_batch_size or gradient_accumulation_steps",
                 (long long)unit, eg);
    } else {
        multiples_near(t, w, eg, sizeof eg);
        snprintf(hint, sizeof hint,
                 "train_batch_size must be a multiple of the world size %d %s; change "
                 "train_batch_size, or set train_micro_batch_size_per_gpu instead",
                 w, eg);
    }
    return errf("batch sizes do not multiply out: train_batch_size %lld%s != "
                "train_micro_batch_size_per_gpu %lld%s * gradient_accumulation_steps %lld%s * "
                "data-parallel world size %d; hint: %s",
                (long long)t, inf_t, (long long)m, inf_m, (long long)g, inf_g, w, hint);
}

static dt_status parse_batch(const sec *root, int w, const char *near_miss, dt_ds_config *out) {
    int64_t t = 0, m = 0, g = 0;
    TRY(dt_conf_int(root, "train_batch_size", 1, INT64_MAX, &t));
    TRY(dt_conf_int(root, "train_micro_batch_size_per_gpu", 1, INT64_MAX, &m));
    TRY(dt_conf_int(root, "gradient_accumulation_steps", 1, INT64_MAX, &g));
    bool ht = t > 0, hm = m > 0, hg = g > 0;
    /* DeepSpeed's inference: floor divisions, then the product is checked */
    if (ht && hm && hg) {
    } else if (ht && hm) {
        g = t / m / w;
    } else if (ht && hg) {
        m = t / w / g;
    } else if (hm && hg) {
        if (__builtin_mul_overflow(m, g, &t) || __builtin_mul_overflow(t, (int64_t)w, &t))
            return batch_overflow(k_batch3, 3, (int64_t[]){m, g, w});
    } else if (ht) {
        g = 1;
        m = t / w;
    } else if (hm) {
        g = 1;
        if (__builtin_mul_overflow(m, (int64_t)w, &t))
            return batch_overflow("train_micro_batch_size_per_gpu * world size", 2,
                                  (int64_t[]){m, w});
    } else {
        return errf("neither train_batch_size nor train_micro_batch_size_per_gpu is set%s%s%s; "
                    "hint: set train_batch_size (the global batch) or "
                    "train_micro_batch_size_per_gpu (the batch of one rank per step)",
                    near_miss ? " (is '" : "", near_miss ? near_miss : "",
                    near_miss ? "' a misspelling?)" : "");
    }
    int64_t prod;
    if (__builtin_mul_overflow(m, g, &prod) || __builtin_mul_overflow(prod, (int64_t)w, &prod))
        return batch_overflow(k_batch3, 3, (int64_t[]){m, g, w});
    if (m < 1 || g < 1 || prod != t) return batch_mismatch(t, m, g, w, ht, hm, hg);
    out->train_batch_size = t;
    out->train_micro_batch_size_per_gpu = m;
    out->gradient_accumulation_steps = g;
    out->dp_world_size = w;
    return DT_OK;
}

/* ---- sections ---------------------------------------------------------------------------- */

static dt_status check_removed(const json_t *j) {
    for (size_t i = 0; i < NELEM(k_removed); i++) {
        const char *k = k_removed[i].key;
        const json_t *where = j;
        const char *dot = strchr(k, '.');
        if (dot) {
            where = obj_get(j, "zero_optimization");
            k = dot + 1;
        }
        if (obj_get(where, k))
            return errf("%s is no longer supported: DeepSpeed has removed %s; hint: delete the "
                        "key",
                        k_removed[i].key, k_removed[i].what);
    }
    return DT_OK;
}

static dt_status parse_fp16(const sec *root, bool *fp16_master, dt_loss_scaler_config *c) {
    sec s;
    TRY(dt_conf_section(root, "fp16", DT_CONF_AUTO, NULL, &s));
    *c = dt_loss_scaler_defaults();
    c->enabled = false;
    TRY(dt_conf_bool(&s, "enabled", &c->enabled));
    const json_t *ls = dt_conf_get(&s, "loss_scale");
    if (ls && (!json_is_number(ls) || !isfinite(json_number_value(ls))))
        return dt_conf_expected(&s, "loss_scale", "a finite number",
                                "0 selects dynamic loss scaling, a positive value a static scale");
    TRY(dt_conf_real(&s, "loss_scale", 0, false, &c->loss_scale));
    TRY(dt_conf_int32(&s, "initial_scale_power", INT_MIN, INT_MAX, &c->initial_scale_power));
    TRY(dt_conf_int(&s, "loss_scale_window", INT64_MIN, INT64_MAX, &c->loss_scale_window));
    TRY(dt_conf_int32(&s, "hysteresis", INT_MIN, INT_MAX, &c->hysteresis));
    TRY(dt_conf_bool(&s, "consecutive_hysteresis", &c->consecutive_hysteresis));
    int64_t min_scale = 1;
    TRY(dt_conf_int(&s, "min_loss_scale", INT64_MIN, INT64_MAX, &min_scale));
    c->min_loss_scale = (double)min_scale;
    *fp16_master = false;
    TRY(dt_conf_bool(&s, "fp16_master_weights_and_grads", fp16_master));
    if (c->enabled) {
        /* dtrain's loss scaler checks the rest (window and min scale > 0 as DeepSpeed does;
         * hysteresis >= 1 and a representable first scale on top) */
        dt_loss_scaler *probe = dt_loss_scaler_new(c);
        if (!probe) {
            char keep[512];
            snprintf(keep, sizeof keep, "%s", dt_last_error());
            const char *msg = strncmp(keep, "dt_loss_scaler_new: ", 20) ? keep : keep + 20;
            return errf("%s", msg);
        }
        dt_loss_scaler_free(probe);
    }
    return DT_OK;
}

static dt_status parse_bf16(const sec *root, bool *enabled, bool *master, bool *opt_states) {
    sec s;
    const char *name = dt_conf_get(root, "bf16") ? "bf16" : "bfloat16";
    TRY(dt_conf_section(root, name, DT_CONF_AUTO, NULL, &s));
    *enabled = *master = *opt_states = false;
    TRY(dt_conf_bool(&s, "enabled", enabled));
    TRY(dt_conf_bool(&s, "bf16_master_weights_and_grads", master));
    TRY(dt_conf_bool(&s, "bf16_optimizer_states", opt_states));
    return DT_OK;
}

static dt_status get_device(const sec *s, dt_offload_device *out) {
    static const char *const names[] = {"none", "cpu", "nvme", NULL};
    int i = -1;
    TRY(dt_conf_enum(s, "device", names,
                     "\"cpu\" keeps the state in host memory, \"nvme\" in files under nvme_path",
                     &i));
    if (i >= 0) *out = i == 0 ? DT_OFFLOAD_NONE : i == 1 ? DT_OFFLOAD_CPU : DT_OFFLOAD_NVME;
    return DT_OK;
}

static dt_status get_path(const sec *s, char *dst, size_t n) {
    const char *p = NULL;
    TRY(dt_conf_str(s, "nvme_path", false, &p));
    if (!p) return DT_OK;
    if (strlen(p) >= n) {
        char kb[256];
        return errf("%s is too long (%zu bytes, at most %zu); hint: use a shorter directory",
                    dt_conf_path(s, "nvme_path", kb, sizeof kb), strlen(p), n - 1);
    }
    snprintf(dst, n, "%s", p);
    return DT_OK;
}

static dt_status parse_zero(const sec *root, dt_zero_config *z) {
    memset(z, 0, sizeof *z);
    z->contiguous_gradients = true;
    z->reduce_scatter = true;
    z->reduce_bucket_size = 500000000;
    z->allgather_bucket_size = 500000000;
    z->param_persistence_threshold = 100000;
    z->prefetch_bucket_size = 50000000;
    z->max_live_parameters = 1000000000;
    const json_t *zv = dt_conf_get(root, "zero_optimization");
    if (zv && json_is_boolean(zv)) { /* DeepSpeed's old form: true = stage 1 */
        z->stage = json_is_true(zv) ? 1 : 0;
        z->overlap_comm = false;
        sec top = *root;
        top.flags = 0;
        return dt_conf_int(&top, "allgather_size", 0, INT64_MAX, &z->allgather_bucket_size);
    }
    sec s;
    TRY(dt_conf_section(root, "zero_optimization", DT_CONF_AUTO, NULL, &s));
    const json_t *stage = dt_conf_get(&s, "stage");
    int64_t st = 0;
    double sx = stage && json_is_number(stage) ? json_number_value(stage) : -1;
    if (stage && !(sx == 0 || sx == 1 || sx == 2 || sx == 3))
        return dt_conf_expected(
            &s, "stage", "0, 1, 2 or 3",
            "0 = plain data parallel, 1 = partition the optimizer state, 2 = also the "
            "gradients, 3 = also the parameters");
    TRY(dt_conf_int(&s, "stage", 0, 3, &st));
    z->stage = (int)st;
    z->overlap_comm = z->stage == 3;
    TRY(dt_conf_bool(&s, "overlap_comm", &z->overlap_comm));
    TRY(dt_conf_bool(&s, "contiguous_gradients", &z->contiguous_gradients));
    TRY(dt_conf_bool(&s, "reduce_scatter", &z->reduce_scatter));
    TRY(dt_conf_int(&s, "reduce_bucket_size", 1, INT64_MAX, &z->reduce_bucket_size));
    TRY(dt_conf_int(&s, "allgather_bucket_size", 0, INT64_MAX, &z->allgather_bucket_size));
    /* the stage-3 keys under DeepSpeed's names or the field names pydantic also accepts */
    static const struct {
        const char *alias, *name;
        size_t off;
    } s3[] = {
        {"stage3_param_persistence_threshold", "param_persistence_threshold",
         offsetof(dt_zero_config, param_persistence_threshold)},
        {"stage3_prefetch_bucket_size", "prefetch_bucket_size",
         offsetof(dt_zero_config, prefetch_bucket_size)},
        {"stage3_max_live_parameters", "max_live_parameters",
         offsetof(dt_zero_config, max_live_parameters)},
    };
    for (size_t i = 0; i < NELEM(s3); i++) {
        int64_t *dst = (int64_t *)((char *)z + s3[i].off);
        TRY(dt_conf_int(&s, dt_conf_get(&s, s3[i].alias) ? s3[i].alias : s3[i].name, 0, INT64_MAX,
                        dst));
    }
    bool compute_grad_norm = true;
    TRY(dt_conf_bool(&s, "compute_grad_norm", &compute_grad_norm));
    if (!compute_grad_norm && z->stage != 1 && z->stage != 2)
        return errf("zero_optimization.compute_grad_norm = false needs ZeRO stage 1 or 2 (stage "
                    "is %d); hint: remove the key",
                    z->stage);

    /* offload sections (and the deprecated booleans that stand for them) */
    sec so, sp;
    TRY(dt_conf_section(&s, "offload_optimizer", DT_CONF_AUTO, NULL, &so));
    TRY(dt_conf_section(&s, "offload_param", DT_CONF_AUTO, NULL, &sp));
    bool dep = false;
    TRY(dt_conf_bool(&s, "cpu_offload", &dep));
    if (dep) {
        if (so.obj)
            return errf("zero_optimization.cpu_offload (deprecated) and offload_optimizer are both "
                        "set; hint: keep only offload_optimizer {\"device\": \"cpu\"}");
        z->offload_optimizer = DT_OFFLOAD_CPU;
    }
    dep = false;
    TRY(dt_conf_bool(&s, "cpu_offload_param", &dep));
    if (dep) {
        if (sp.obj)
            return errf("zero_optimization.cpu_offload_param (deprecated) and offload_param are "
                        "both set; hint: keep only offload_param {\"device\": \"cpu\"}");
        z->offload_param = DT_OFFLOAD_CPU;
    }
    int64_t ignored_int = 0;
    bool ignored_bool = false;
    double ratio = 1.0;
    TRY(get_device(&so, &z->offload_optimizer));
    TRY(get_path(&so, z->offload_optimizer_nvme_path, sizeof z->offload_optimizer_nvme_path));
    TRY(dt_conf_int(&so, "buffer_count", 0, INT64_MAX, &ignored_int));
    TRY(dt_conf_bool(&so, "pin_memory", &ignored_bool));
    TRY(dt_conf_real(&so, "ratio", 0, false, &ratio));
    if (ratio > 1)
        return errf("zero_optimization.offload_optimizer.ratio must be in [0, 1], got %g; hint: "
                    "1 offloads the whole optimizer state",
                    ratio);
    if (ratio < 1 && z->stage != 3)
        return errf("zero_optimization.offload_optimizer.ratio %g (partial offload) needs ZeRO "
                    "stage 3 (stage is %d); hint: remove ratio or use stage 3",
                    ratio, z->stage);
    TRY(get_device(&sp, &z->offload_param));
    TRY(get_path(&sp, z->offload_param_nvme_path, sizeof z->offload_param_nvme_path));
    TRY(dt_conf_int(&sp, "buffer_count", 0, INT64_MAX, &ignored_int));
    TRY(dt_conf_int(&sp, "buffer_size", 0, INT64_MAX, &ignored_int));
    TRY(dt_conf_int(&sp, "max_in_cpu", 0, INT64_MAX, &ignored_int));
    TRY(dt_conf_bool(&sp, "pin_memory", &ignored_bool));

    /* below stage 3 there are no partitioned parameters to offload: DeepSpeed keeps the setting
     * and ignores it, and so does the engine (the warning is dt__ds_notes') */
    if (z->offload_optimizer != DT_OFFLOAD_NONE && z->stage == 0)
        return errf("zero_optimization.offload_optimizer needs ZeRO stage 1, 2 or 3 (stage is 0); "
                    "hint: set zero_optimization.stage, or remove offload_optimizer");
    if (z->offload_optimizer == DT_OFFLOAD_NVME && !z->offload_optimizer_nvme_path[0])
        return errf("zero_optimization.offload_optimizer.device is \"nvme\" but nvme_path is not "
                    "set; hint: add \"nvme_path\": \"/a/fast/local/dir\" or use device \"cpu\"");
    if (z->offload_param == DT_OFFLOAD_NVME && !z->offload_param_nvme_path[0])
        return errf("zero_optimization.offload_param.device is \"nvme\" but nvme_path is not set; "
                    "hint: add \"nvme_path\": \"/a/fast/local/dir\" or use device \"cpu\"");
    return DT_OK;
}

static dt_status parse_activation_ckpt(const sec *root, dt_activation_ckpt_config *a) {
    sec s;
    TRY(dt_conf_section(root, "activation_checkpointing", 0, NULL, &s));
    memset(a, 0, sizeof *a);
    a->number_checkpoints = -1;
    TRY(dt_conf_bool(&s, "partition_activations", &a->partition_activations));
    TRY(dt_conf_bool(&s, "cpu_checkpointing", &a->cpu_checkpointing));
    TRY(dt_conf_bool(&s, "contiguous_memory_optimization", &a->contiguous_memory_optimization));
    TRY(dt_conf_int(&s, "number_checkpoints", 0, INT64_MAX, &a->number_checkpoints));
    TRY(dt_conf_bool(&s, "synchronize_checkpoint_boundary", &a->synchronize_checkpoint_boundary));
    TRY(dt_conf_bool(&s, "profile", &a->profile));
    return DT_OK;
}

static dt_status parse_flops(const sec *root, dt_flops_profiler_config *f) {
    sec s;
    TRY(dt_conf_section(root, "flops_profiler", 0, NULL, &s));
    memset(f, 0, sizeof *f);
    f->profile_step = 1;
    f->module_depth = -1;
    f->top_modules = 1;
    f->detailed = true;
    TRY(dt_conf_bool(&s, "enabled", &f->enabled));
    TRY(dt_conf_int(&s, "profile_step", 1, INT64_MAX, &f->profile_step));
    TRY(dt_conf_int(&s, "module_depth", -1, INT64_MAX, &f->module_depth));
    TRY(dt_conf_int(&s, "top_modules", 1, INT64_MAX, &f->top_modules));
    TRY(dt_conf_bool(&s, "detailed", &f->detailed));
    const char *out = NULL;
    TRY(dt_conf_str(&s, "output_file", false, &out));
    if (out) {
        if (strlen(out) >= sizeof f->output_file)
            return errf("flops_profiler.output_file is too long (%zu bytes, at most %zu); hint: "
                        "use a shorter path",
                        strlen(out), sizeof f->output_file - 1);
        snprintf(f->output_file, sizeof f->output_file, "%s", out);
    }
    double ignored = 0;
    TRY(dt_conf_real(&s, "recompute_fwd_factor", 0, false, &ignored));
    return DT_OK;
}

/* ---- optimizer and scheduler ------------------------------------------------------------- */

static dt_status get_betas(const sec *s, float *b1, float *b2) {
    const json_t *v = dt_conf_get(s, "betas");
    if (!v) return DT_OK;
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) ||
        !json_is_number(json_array_get(v, 1)))
        return dt_conf_expected(s, "betas", "a list of two numbers", "write e.g. [0.9, 0.999]");
    *b1 = (float)json_number_value(json_array_get(v, 0));
    *b2 = (float)json_number_value(json_array_get(v, 1));
    return DT_OK;
}

/* A key that must be false if present (a variant DeepSpeed's optimizer refuses or dtrain lacks). */
static dt_status must_be_false(const sec *s, const char *key, const char *why) {
    bool b = false;
    TRY(dt_conf_bool(s, key, &b));
    if (b) {
        char kb[256];
        return errf("%s = true is not supported: %s; hint: remove the key",
                    dt_conf_path(s, key, kb, sizeof kb), why);
    }
    return DT_OK;
}

static dt_status parse_optimizer(const sec *root, dt_ds_config *out) {
    sec s, p;
    TRY(dt_conf_section(root, "optimizer", 0, NULL, &s));
    out->has_optimizer = false;
    out->optimizer = dt_optim_defaults(DT_OPTIM_ADAM);
    out->optimizer.weight_decay = 0;
    if (!s.obj) return DT_OK;
    const char *type = NULL;
    TRY(dt_conf_str(&s, "type", false, &type));
    if (!type)
        return errf("optimizer has no \"type\"; hint: set optimizer.type to Adam, AdamW, Lamb or "
                    "SGD, or remove the optimizer section");
    dt_optim_type t;
    if (!strcasecmp(type, "adam"))
        t = DT_OPTIM_ADAM;
    else if (!strcasecmp(type, "adamw"))
        t = DT_OPTIM_ADAMW;
    else if (!strcasecmp(type, "lamb"))
        t = DT_OPTIM_LAMB;
    else if (!strcmp(type, "SGD"))
        t = DT_OPTIM_SGD;
    else {
        static const char *const names[] = {"Adam", "AdamW", "Lamb", "SGD", NULL};
        const char *sug = dt_conf_suggest(type, names);
        return errf("optimizer.type \"%s\" is not supported%s%s%s; hint: dtrain has Adam, AdamW "
                    "and Lamb (any case) and SGD (as torch.optim spells it)",
                    type, sug ? " (did you mean \"" : "", sug ? sug : "", sug ? "\"?)" : "");
    }
    TRY(dt_conf_section(&s, "params", 0, NULL, &p));
    if (dt_conf_get(&p, "max_grad_norm"))
        return errf("optimizer.params.max_grad_norm is not supported as an optimizer parameter "
                    "(DeepSpeed refuses it too); hint: use the top-level \"gradient_clipping\"");
    dt_optim_config c = dt_optim_defaults(t);
    TRY(dt_conf_float(&p, "lr", 0, false, &c.lr));
    TRY(dt_conf_float(&p, "weight_decay", 0, false, &c.weight_decay));
    if (t == DT_OPTIM_SGD) {
        TRY(dt_conf_float(&p, "momentum", 0, false, &c.momentum));
        TRY(dt_conf_float(&p, "dampening", -INFINITY, false, &c.dampening));
        TRY(dt_conf_bool(&p, "nesterov", &c.nesterov));
        TRY(must_be_false(&p, "maximize", "dtrain's SGD always minimises"));
    } else {
        TRY(get_betas(&p, &c.beta1, &c.beta2));
        TRY(dt_conf_float(&p, "eps", 0, false, &c.eps));
        TRY(dt_conf_bool(&p, "bias_correction", &c.bias_correction));
        TRY(must_be_false(&p, "amsgrad", "DeepSpeed's fused Adam and Lamb have no AMSGrad"));
    }
    if (t == DT_OPTIM_ADAM || t == DT_OPTIM_ADAMW) {
        /* DeepSpeed: "Adam" is AdamW unless adam_w_mode is false; "AdamW" always is. Its fused
         * Adam defaults weight_decay to 0; torch_adam selects torch.optim.Adam(W), whose
         * AdamW defaults it to 0.01. */
        bool w_mode = true, torch_adam = false;
        TRY(dt_conf_bool(&p, "adam_w_mode", &w_mode));
        TRY(dt_conf_bool(&p, "torch_adam", &torch_adam));
        c.adam_w_mode = t == DT_OPTIM_ADAMW || w_mode;
        c.weight_decay = torch_adam && c.adam_w_mode ? 0.01f : 0.0f;
        TRY(dt_conf_float(&p, "weight_decay", 0, false, &c.weight_decay));
    }
    if (t == DT_OPTIM_LAMB) {
        TRY(dt_conf_float(&p, "max_coeff", 0, false, &c.max_coeff));
        TRY(dt_conf_float(&p, "min_coeff", 0, false, &c.min_coeff));
        TRY(must_be_false(&p, "eps_inside_sqrt", "dtrain's Lamb adds eps outside the square root"));
    }
    /* the optimiser's own checks (betas in [0, 1), nesterov with momentum, ...) */
    dt_device *dev = dt_device_new("ds_config", 0);
    if (!dev) return dt_last_status();
    dt_optimizer *probe = dt_optim_new(dev, &c, 0);
    if (!probe) {
        char keep[512];
        snprintf(keep, sizeof keep, "%s", dt_last_error());
        dt_device_free(dev);
        const char *msg = strncmp(keep, "dt_optim_new: ", 14) ? keep : keep + 14;
        return errf("optimizer.params: %s", msg);
    }
    dt_optim_free(probe);
    dt_device_free(dev);
    out->has_optimizer = true;
    out->optimizer = c;
    return DT_OK;
}

static dt_status parse_scheduler(const sec *root, dt_ds_config *out) {
    char kb[256];
    sec s, p;
    TRY(dt_conf_section(root, "scheduler", 0, NULL, &s));
    out->has_scheduler = false;
    out->scheduler = dt_sched_defaults(DT_SCHED_CONSTANT);
    out->scheduler.base_lr = out->optimizer.lr;
    if (!s.obj) return DT_OK;
    const char *type = NULL;
    TRY(dt_conf_str(&s, "type", false, &type));
    int ti = -1;
    for (size_t i = 0; type && i < NELEM(k_sched_types); i++)
        if (!strcmp(type, k_sched_types[i].name)) ti = (int)i;
    if (ti < 0) {
        const char *names[NELEM(k_sched_types) + 1];
        for (size_t i = 0; i < NELEM(k_sched_types); i++) names[i] = k_sched_types[i].name;
        names[NELEM(k_sched_types)] = NULL;
        const char *sug = type ? dt_conf_suggest(type, names) : NULL;
        return errf("scheduler.type %s%s%s is not supported%s%s%s; hint: use WarmupLR, "
                    "WarmupDecayLR, WarmupCosineLR, OneCycle or LRRangeTest (DeepSpeed's "
                    "schedules), StepLR or CosineAnnealingLR; names are case-sensitive",
                    type ? "\"" : "", type ? type : "(missing)", type ? "\"" : "",
                    sug ? " (did you mean \"" : "", sug ? sug : "", sug ? "\"?)" : "");
    }
    dt_sched_type t = k_sched_types[ti].type;
    TRY(dt_conf_section(&s, "params", 0, NULL, &p));
    dt_sched_config c = dt_sched_defaults(t);
    c.base_lr = out->optimizer.lr;
    /* DeepSpeed's WarmupLR warms up to the optimizer's lr unless warmup_max_lr is given
     * (WarmupDecayLR keeps its own default of 0.001) */
    if (t == DT_SCHED_WARMUP_LR) c.warmup_max_lr = out->optimizer.lr;
    int64_t last = -1;
    TRY(dt_conf_int(&p,
                    t == DT_SCHED_STEP_LR || t == DT_SCHED_COSINE_ANNEALING
                        ? "last_epoch"
                        : "last_batch_iteration",
                    -1, INT64_MAX, &last));
    if (last != -1)
        return errf("%s.%s is not supported; hint: remove it (an engine checkpoint restores the "
                    "schedule's position)",
                    p.path,
                    t == DT_SCHED_STEP_LR || t == DT_SCHED_COSINE_ANNEALING
                        ? "last_epoch"
                        : "last_batch_iteration");
    /* required arguments of the constructors */
    const char *required[2] = {NULL, NULL};
    if (t == DT_SCHED_WARMUP_DECAY_LR || t == DT_SCHED_WARMUP_COSINE_LR)
        required[0] = "total_num_steps";
    if (t == DT_SCHED_ONE_CYCLE) required[0] = "cycle_min_lr", required[1] = "cycle_max_lr";
    if (t == DT_SCHED_STEP_LR) required[0] = "step_size";
    if (t == DT_SCHED_COSINE_ANNEALING) required[0] = "T_max";
    for (int i = 0; i < 2; i++)
        if (required[i] && !dt_conf_get(&p, required[i]))
            return errf("%s is required by the %s schedule; hint: add it to scheduler.params",
                        dt_conf_path(&p, required[i], kb, sizeof kb), type);
    switch (t) {
    case DT_SCHED_WARMUP_LR:
    case DT_SCHED_WARMUP_DECAY_LR:
    case DT_SCHED_WARMUP_COSINE_LR: {
        TRY(dt_conf_int(&p, "warmup_num_steps", INT64_MIN, INT64_MAX, &c.warmup_num_steps));
        if (t == DT_SCHED_WARMUP_COSINE_LR) {
            TRY(dt_conf_float(&p, "warmup_min_ratio", -INFINITY, false, &c.warmup_min_ratio));
            TRY(dt_conf_float(&p, "cos_min_ratio", -INFINITY, false, &c.cos_min_ratio));
        } else {
            TRY(dt_conf_float(&p, "warmup_min_lr", 0, false, &c.warmup_min_lr));
            TRY(dt_conf_float(&p, "warmup_max_lr", 0, false, &c.warmup_max_lr));
        }
        if (t != DT_SCHED_WARMUP_LR)
            TRY(dt_conf_int(&p, "total_num_steps", INT64_MIN, INT64_MAX, &c.total_num_steps));
        const char *wt = NULL;
        TRY(dt_conf_str(&p, "warmup_type", false, &wt));
        if (wt && strcmp(wt, "log") && strcmp(wt, "linear"))
            dt_log(DT_LOG_WARN,
                   "ds_config: scheduler.params.warmup_type \"%s\" is neither \"log\" nor "
                   "\"linear\"; using \"log\" as DeepSpeed does",
                   wt);
        c.warmup_linear = wt && !strcmp(wt, "linear");
        break;
    }
    case DT_SCHED_ONE_CYCLE: {
        TRY(dt_conf_float(&p, "cycle_min_lr", 0, false, &c.cycle_min_lr));
        TRY(dt_conf_float(&p, "cycle_max_lr", 0, false, &c.cycle_max_lr));
        TRY(dt_conf_float(&p, "decay_lr_rate", -INFINITY, false, &c.decay_lr_rate));
        TRY(dt_conf_int(&p, "cycle_first_step_size", INT64_MIN, INT64_MAX,
                        &c.cycle_first_step_size));
        TRY(dt_conf_int(&p, "cycle_second_step_size", INT64_MIN, INT64_MAX,
                        &c.cycle_second_step_size));
        TRY(dt_conf_int(&p, "cycle_first_stair_count", 0, INT64_MAX, &c.cycle_first_stair_count));
        TRY(dt_conf_int(&p, "cycle_second_stair_count", 0, INT64_MAX, &c.cycle_second_stair_count));
        TRY(dt_conf_int(&p, "decay_step_size", INT64_MIN, INT64_MAX, &c.decay_step_size));
        TRY(dt_conf_bool(&p, "cycle_momentum", &c.cycle_momentum));
        TRY(dt_conf_float(&p, "cycle_min_mom", -INFINITY, false, &c.cycle_min_mom));
        TRY(dt_conf_float(&p, "cycle_max_mom", -INFINITY, false, &c.cycle_max_mom));
        TRY(dt_conf_float(&p, "decay_mom_rate", -INFINITY, false, &c.decay_mom_rate));
        break;
    }
    case DT_SCHED_LR_RANGE_TEST:
        TRY(dt_conf_float(&p, "lr_range_test_min_lr", 0, false, &c.lr_range_test_min_lr));
        TRY(dt_conf_int(&p, "lr_range_test_step_size", INT64_MIN, INT64_MAX,
                        &c.lr_range_test_step_size));
        TRY(dt_conf_float(&p, "lr_range_test_step_rate", -INFINITY, false,
                          &c.lr_range_test_step_rate));
        TRY(dt_conf_bool(&p, "lr_range_test_staircase", &c.lr_range_test_staircase));
        break;
    case DT_SCHED_STEP_LR:
        TRY(dt_conf_int(&p, "step_size", INT64_MIN, INT64_MAX, &c.step_size));
        TRY(dt_conf_float(&p, "gamma", -INFINITY, false, &c.gamma));
        break;
    case DT_SCHED_COSINE_ANNEALING:
        TRY(dt_conf_int(&p, "T_max", INT64_MIN, INT64_MAX, &c.t_max));
        TRY(dt_conf_float(&p, "eta_min", -INFINITY, false, &c.eta_min));
        break;
    default:
        break;
    }
    /* the schedule's own checks (positive step counts, ...) */
    dt_lr_schedule *probe = dt_sched_new(&c, NULL);
    if (!probe) {
        char keep[512];
        snprintf(keep, sizeof keep, "%s", dt_last_error());
        const char *msg = strncmp(keep, "lr schedule: ", 13) ? keep : keep + 13;
        return errf("scheduler.params: %s", msg);
    }
    dt_sched_free(probe);
    out->has_scheduler = true;
    out->scheduler = c;
    return DT_OK;
}

/* ---- top level --------------------------------------------------------------------------- */

static dt_status parse_top(const sec *root, dt_ds_config *out) {
    out->gradient_clipping = 1.0; /* DeepSpeed's GRADIENT_CLIPPING_DEFAULT */
    out->prescale_gradients = false;
    out->gradient_predivide_factor = 1.0;
    out->steps_per_print = 0; /* DeepSpeed's default is None: no progress lines */
    out->wall_clock_breakdown = false;
    out->memory_budget_bytes = 0;
    out->deterministic = false;
    TRY(dt_conf_real(root, "gradient_clipping", 0, false, &out->gradient_clipping));
    TRY(dt_conf_bool(root, "prescale_gradients", &out->prescale_gradients));
    TRY(dt_conf_real(root, "gradient_predivide_factor", 0, true, &out->gradient_predivide_factor));
    TRY(dt_conf_int(root, "steps_per_print", 1, INT64_MAX, &out->steps_per_print));
    TRY(dt_conf_bool(root, "wall_clock_breakdown", &out->wall_clock_breakdown));
    TRY(dt_conf_bool(root, "deterministic", &out->deterministic));

    const json_t *mb = dt_conf_get(root, "memory_budget");
    if (mb && json_is_string(mb)) {
        int64_t b = dt_parse_bytes(json_string_value(mb));
        if (b < 0) {
            char hint[1280];
            snprintf(hint, sizeof hint,
                     "%s; write bytes as a number, or a string such as \"512M\" or \"2GiB\"",
                     dt_last_error());
            return dt_conf_expected(root, "memory_budget",
                                    "a byte count (whole bytes, 0 to 9223372036854775807)", hint);
        }
        out->memory_budget_bytes = b;
    } else if (mb) {
        if (!json_is_number(mb))
            return dt_conf_expected(
                root, "memory_budget", "a byte count",
                "write bytes as a number, or a string such as \"512M\" or \"2GiB\"");
        TRY(dt_conf_int(root, "memory_budget", 0, INT64_MAX, &out->memory_budget_bytes));
    }

    const char *cdt = NULL;
    TRY(dt_conf_str(root, "communication_data_type", false, &cdt));
    if (cdt && strcasecmp(cdt, "fp32") && strcasecmp(cdt, "fp16") && strcasecmp(cdt, "bf16"))
        return errf("communication_data_type must be \"fp16\", \"bf16\" or \"fp32\", got \"%s\"; "
                    "hint: remove it (dtrain reduces gradients in fp32)",
                    cdt);
    const char *op = NULL;
    TRY(dt_conf_str(root, "gradient_allreduce_op", false, &op));
    if (op && strcasecmp(op, "mean")) {
        if (!strcasecmp(op, "sum"))
            return errf("gradient_allreduce_op \"sum\" is not supported: dtrain averages "
                        "gradients over the data-parallel group; hint: remove it or use "
                        "\"mean\"");
        return errf("gradient_allreduce_op must be \"mean\" or \"sum\", got \"%s\"; hint: remove "
                    "it (the default is \"mean\")",
                    op);
    }
    return DT_OK;
}

dt_status dt_ds_config_parse(const json_t *j, int dp_world_size, dt_ds_config *out) {
    if (!j || !out)
        return dt_error(DT_ERR_INVALID, "dt_ds_config_parse: %s is NULL", j ? "out" : "config");
    if (!json_is_object(j))
        return dt_error(DT_ERR_CONFIG, "ds_config: the config must be a JSON object; hint: load "
                                       "it with dt_ds_config_load");
    if (dp_world_size < 1)
        return dt_error(DT_ERR_INVALID, "dt_ds_config_parse: dp_world_size must be >= 1 (got %d)",
                        dp_world_size);
    dt_ds_config c;
    memset(&c, 0, sizeof c);
    dt_conf conf = k_words;
    conf.root = j;
    sec root = dt_conf_root(&conf, 0, NULL);

    /* unknown keys: one warning, whatever happens next */
    dt_status st = collect_unknowns(&conf, j);
    if (st == DT_OK) dt_conf_log_unknowns(&conf);
    dt_conf_clear(&conf);
    if (st != DT_OK) return st;
    /* an unknown top-level key close to a batch key, for the "no batch size" error */
    const char *near_miss = NULL;
    static const char *const batch_keys[] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                             NULL};
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        (void)v;
        if (!dt_conf_in_list(key, k_top) && !dt_conf_in_list(key, k_top_ignored) &&
            dt_conf_suggest(key, batch_keys))
            near_miss = key;
    }

    TRY(check_removed(j));
    json_t *notes = json_array(); /* keys without effect: warnings; features missing: errors */
    st = notes ? dt__ds_notes(j, k_ignored_sections, notes) : dt_error(DT_ERR_OOM, "out of memory");
    size_t ni;
    json_t *nv;
    json_array_foreach(notes, ni, nv) dt_log(DT_LOG_WARN, "ds_config: %s", json_string_value(nv));
    json_decref(notes);
    if (st != DT_OK) return st;
    TRY(parse_batch(&root, dp_world_size, near_miss, &c));
    TRY(parse_top(&root, &c));
    bool fp16_master = false, bf16_master = false, bf16_opt_states = false;
    TRY(parse_fp16(&root, &fp16_master, &c.fp16));
    TRY(parse_bf16(&root, &c.bf16, &bf16_master, &bf16_opt_states));
    if (c.fp16.enabled && c.bf16)
        return errf("fp16.enabled and bf16.enabled are both true; hint: choose one mixed "
                    "precision mode (bf16 needs no loss scaling)");
    TRY(parse_zero(&root, &c.zero));
    if ((fp16_master || bf16_master || bf16_opt_states) && c.zero.stage == 0)
        return errf("%s needs ZeRO stage 1, 2 or 3; hint: set zero_optimization.stage or remove "
                    "the key",
                    fp16_master   ? "fp16.fp16_master_weights_and_grads"
                    : bf16_master ? "bf16.bf16_master_weights_and_grads"
                                  : "bf16.bf16_optimizer_states");
    if (bf16_opt_states && !bf16_master)
        return errf("bf16.bf16_optimizer_states needs bf16.bf16_master_weights_and_grads; hint: "
                    "enable both or remove bf16_optimizer_states");
    TRY(parse_activation_ckpt(&root, &c.activation_checkpointing));
    TRY(parse_flops(&root, &c.flops_profiler));
    c.wall_clock_breakdown = c.wall_clock_breakdown || c.flops_profiler.enabled;
    TRY(parse_optimizer(&root, &c));
    TRY(parse_scheduler(&root, &c));
    *out = c;
    return DT_OK;
}

/* The reader as `dtrain config check` runs it: every warning as a string naming the file. */
dt_status dt_ds_config_check(const json_t *j, const char *name, int dp_world_size,
                             json_t **warnings) {
    json_t *w = *warnings = json_array();
    if (!w) return dt_error(DT_ERR_OOM, "out of memory");
    const char *pre = name ? name : "ds_config";
    dt_conf conf = {.dialect = DT_CONF_JSON, .root = j};
    dt_status st = json_is_object(j) ? collect_unknowns(&conf, j) : DT_OK;
    for (int i = 0; st == DT_OK && i < conf.n_unknown; i++) {
        char buf[1500], line[1700];
        dt_conf_unknown_warning(&conf, i, buf, sizeof buf);
        snprintf(line, sizeof line, "%s: %s", pre, buf);
        if (json_array_append_new(w, json_string(line))) st = dt_error(DT_ERR_OOM, "out of memory");
    }
    dt_conf_clear(&conf);
    json_t *notes = json_array();
    if (st == DT_OK)
        st = notes ? dt__ds_notes(j, k_ignored_sections, notes)
                   : dt_error(DT_ERR_OOM, "out of memory");
    size_t i;
    json_t *n;
    json_array_foreach(notes, i, n) {
        char line[1700];
        snprintf(line, sizeof line, "%s: %s", pre, json_string_value(n));
        json_array_append_new(w, json_string(line));
    }
    json_decref(notes);
    dt_ds_config cfg;
    if (st == DT_OK) st = dt_ds_config_parse(j, dp_world_size > 0 ? dp_world_size : 1, &cfg);
    if (st != DT_OK) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", dt_last_error());
        const char *m = strncmp(msg, "ds_config: ", 11) ? msg : msg + 11;
        return dt_error(st, "%s: %s", pre, m);
    }
    return DT_OK;
}
