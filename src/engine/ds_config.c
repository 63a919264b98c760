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
    const char *const *sk = dt__ds_sched_keys(json_string_value(obj_get(s, "type")));
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
        if (!probe) return dt__ds_refused("dt_loss_scaler_new: ", "");
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
    dt_conf conf = *dt__ds_words();
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
    TRY(dt__ds_parse_zero(&root, &c.zero));
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
    TRY(dt__ds_parse_optimizer(&root, &c));
    TRY(dt__ds_parse_scheduler(&root, &c));
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
