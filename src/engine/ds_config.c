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
 */
#include "dtrain/engine.h"
#include "base/base_impl.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
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

/* ---- small helpers ----------------------------------------------------------------------- */

/* dt_edit_distance ignoring case (DeepSpeed matches optimizer and scheduler names so). */
static int edit_distance(const char *a, const char *b) {
    char la[64], lb[64];
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63) return (int)(n > m ? n : m); /* not a plausible typo */
    for (size_t i = 0; i <= n; i++) la[i] = (char)tolower((unsigned char)a[i]);
    for (size_t j = 0; j <= m; j++) lb[j] = (char)tolower((unsigned char)b[j]);
    return dt_edit_distance(la, lb);
}

/* The closest name in the NULL-terminated lists if it is close enough to be a typo. */
static const char *suggest(const char *key, const char *const *l1, const char *const *l2) {
    const char *best = NULL;
    int best_d = INT_MAX;
    const char *const *lists[2] = {l1, l2};
    for (int k = 0; k < 2; k++)
        for (const char *const *c = lists[k]; c && *c; c++) {
            int d = edit_distance(key, *c);
            if (d < best_d) best_d = d, best = *c;
        }
    int len = (int)strlen(key);
    int limit = len <= 3 ? 1 : len / 3 < 2 ? 2 : len / 3 > 4 ? 4 : len / 3;
    if (best && best_d <= limit) return best;
    /* a shortened or extended name ("train_micro_batch_size") */
    for (int k = 0; k < 2; k++)
        for (const char *const *c = lists[k]; c && *c; c++) {
            size_t lc = strlen(*c), lk = strlen(key);
            size_t shorter = lc < lk ? lc : lk;
            if (shorter >= 6 && !strncasecmp(key, *c, shorter)) return *c;
        }
    return NULL;
}

static bool in_list(const char *s, const char *const *list) {
    for (; list && *list; list++)
        if (!strcmp(s, *list)) return true;
    return false;
}

static const char *describe(const json_t *v, char *buf, size_t n) {
    return dt__json_describe(v, false, buf, n);
}

/* ---- typed access to one section --------------------------------------------------------- */

typedef struct sec {
    const json_t *obj; /* the section's object (NULL: the section is absent) */
    const char *path;  /* "zero_optimization.offload_param", "" for the root */
    bool auto_default; /* "auto" means the default (DeepSpeed's pydantic sections) */
} sec;

static dt_status errf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static dt_status errf(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return dt_error(DT_ERR_CONFIG, "ds_config: %s%s", buf,
                    strstr(buf, "hint:") ? ""
                                         : "; hint: docs/engine.md lists every key with its "
                                           "range and default");
}

/* "path.key" into buf. */
static const char *kp(const sec *s, const char *key, char *buf, size_t n) {
    snprintf(buf, n, "%s%s%s", s->path, *s->path ? "." : "", key);
    return buf;
}

/* The value of `key`, or NULL when absent, null, or "auto" in a section where it means the
 * default. */
static const json_t *sget(const sec *s, const char *key) {
    if (!s->obj) return NULL;
    const json_t *v = json_object_get(s->obj, key);
    if (!v || json_is_null(v)) return NULL;
    if (s->auto_default && json_is_string(v) && !strcmp(json_string_value(v), "auto")) return NULL;
    return v;
}

static dt_status bad(const sec *s, const char *key, const json_t *v, const char *want,
                     const char *hint) {
    char p[256], d[96];
    const char *extra = "";
    if (json_is_string(v) && !strcmp(json_string_value(v), "auto"))
        extra = " (\"auto\" is filled in by the Hugging Face integration, not by DeepSpeed "
                "itself)";
    return errf("%s must be %s, got %s%s; hint: %s", kp(s, key, p, sizeof p), want,
                describe(v, d, sizeof d), extra, hint);
}

static dt_status get_bool(const sec *s, const char *key, bool *out) {
    const json_t *v = sget(s, key);
    if (!v) return DT_OK;
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return DT_OK;
    }
    if (json_is_number(v)) {
        double x = json_number_value(v);
        if (x == 0 || x == 1) {
            *out = x == 1;
            return DT_OK;
        }
    }
    return bad(s, key, v, "a boolean", "write true or false (without quotes)");
}

/* An integer (or an integral real such as 5e8) in [lo, hi]. */
static dt_status get_int(const sec *s, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    const json_t *v = sget(s, key);
    if (!v) return DT_OK;
    int64_t x;
    if (json_is_integer(v)) {
        x = (int64_t)json_integer_value(v);
    } else if (json_is_real(v) && isfinite(json_real_value(v)) &&
               json_real_value(v) == floor(json_real_value(v)) &&
               fabs(json_real_value(v)) < 9.2e18) {
        x = (int64_t)json_real_value(v);
    } else {
        return bad(s, key, v, "an integer", "write a whole number such as 8 or 5e8");
    }
    if (x < lo || x > hi) {
        char p[256], range[96];
        if (hi == INT64_MAX)
            snprintf(range, sizeof range, ">= %lld", (long long)lo);
        else
            snprintf(range, sizeof range, "in [%lld, %lld]", (long long)lo, (long long)hi);
        return errf("%s must be %s, got %lld; hint: use a value %s", kp(s, key, p, sizeof p), range,
                    (long long)x, range);
    }
    *out = x;
    return DT_OK;
}

static dt_status get_int32(const sec *s, const char *key, int lo, int hi, int *out) {
    int64_t x = *out;
    dt_status st = get_int(s, key, lo, hi, &x);
    if (st == DT_OK) *out = (int)x;
    return st;
}

/* A finite number >= lo (> lo when `open`). */
static dt_status get_real(const sec *s, const char *key, double lo, bool open, double *out) {
    const json_t *v = sget(s, key);
    if (!v) return DT_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return bad(s, key, v, "a number", "write a number such as 1.0 or 1e-3 (without quotes)");
    double x = json_number_value(v);
    if (open ? !(x > lo) : !(x >= lo)) {
        char p[256];
        return errf("%s must be %s %g, got %g; hint: use a value %s %g", kp(s, key, p, sizeof p),
                    open ? ">" : ">=", lo, x, open ? ">" : ">=", lo);
    }
    *out = x;
    return DT_OK;
}

static dt_status get_float(const sec *s, const char *key, double lo, bool open, float *out) {
    double x = *out;
    dt_status st = get_real(s, key, lo, open, &x);
    if (st == DT_OK) *out = (float)x;
    return st;
}

static dt_status get_str(const sec *s, const char *key, const char **out) {
    const json_t *v = sget(s, key);
    if (!v) return DT_OK;
    if (!json_is_string(v)) return bad(s, key, v, "a string", "write the value in double quotes");
    *out = json_string_value(v);
    return DT_OK;
}

/* A sub-section: absent or null -> obj NULL; an object -> that object; anything else is an
 * error. */
static dt_status get_section(const sec *parent, const char *key, bool auto_default, char *pathbuf,
                             size_t n, sec *out) {
    out->obj = NULL;
    out->path = kp(parent, key, pathbuf, n);
    out->auto_default = auto_default;
    const json_t *v = sget(parent, key);
    if (!v) return DT_OK;
    if (!json_is_object(v))
        return bad(parent, key, v, "an object", "write the section as {\"key\": value, ...}");
    out->obj = v;
    return DT_OK;
}

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
    "flops_profiler", "memory_budget", "communication_data_type", "gradient_allreduce_op", NULL};
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

/* ---- unknown keys ------------------------------------------------------------------------ */

typedef struct unknowns {
    char text[1800];
    size_t used;
    int count, shown;
} unknowns;

static void note_unknown(unknowns *u, const char *path, const char *key, const char *const *l1,
                         const char *const *l2) {
    u->count++;
    if (u->used > sizeof u->text - 200) return; /* the rest is counted, not listed */
    const char *s = suggest(key, l1, l2);
    int w = snprintf(u->text + u->used, sizeof u->text - u->used, "%s%s%s%s%s%s%s",
                     u->shown ? ", " : "", path, *path ? "." : "", key, s ? " (did you mean '" : "",
                     s ? s : "", s ? "'?)" : "");
    if (w > 0) u->used += (size_t)w < sizeof u->text - u->used ? (size_t)w : 0;
    u->shown++;
}

static void check_keys(unknowns *u, const json_t *obj, const char *path, const char *const *used,
                       const char *const *ignored) {
    if (!json_is_object(obj)) return;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        (void)v;
        if (in_list(key, used) || in_list(key, ignored)) continue;
        bool removed = false;
        for (size_t i = 0; i < NELEM(k_removed); i++) {
            char full[256];
            snprintf(full, sizeof full, "%s%s%s", path, *path ? "." : "", key);
            if (!strcmp(full, k_removed[i].key)) removed = true;
        }
        if (!removed) note_unknown(u, path, key, used, ignored);
    }
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

/* Every unknown key of the config, in one list (sections of the wrong type are skipped: the
 * parse reports them). */
static void collect_unknowns(const json_t *j, unknowns *u) {
    check_keys(u, j, "", k_top, k_top_ignored);
    check_keys(u, obj_get(j, "fp16"), "fp16", k_fp16, k_fp16_ignored);
    check_keys(u, obj_get(j, "bf16"), "bf16", k_bf16, k_bf16_ignored);
    check_keys(u, obj_get(j, "bfloat16"), "bfloat16", k_bf16, k_bf16_ignored);
    const json_t *z = obj_get(j, "zero_optimization");
    check_keys(u, z, "zero_optimization", k_zero, k_zero_ignored);
    check_keys(u, obj_get(z, "offload_optimizer"), "zero_optimization.offload_optimizer",
               k_offload_opt, k_offload_opt_ignored);
    check_keys(u, obj_get(z, "offload_param"), "zero_optimization.offload_param", k_offload_param,
               NULL);
    check_keys(u, obj_get(j, "activation_checkpointing"), "activation_checkpointing", k_act, NULL);
    check_keys(u, obj_get(j, "flops_profiler"), "flops_profiler", k_flops, k_flops_ignored);
    const json_t *o = obj_get(j, "optimizer");
    check_keys(u, o, "optimizer", k_optimizer, k_optimizer_ignored);
    const char *const *ign;
    const char *const *ok = optim_keys(json_string_value(obj_get(o, "type")), &ign);
    if (ok) check_keys(u, obj_get(o, "params"), "optimizer.params", ok, ign);
    const json_t *s = obj_get(j, "scheduler");
    check_keys(u, s, "scheduler", k_scheduler, NULL);
    ok = sched_keys(json_string_value(obj_get(s, "type")));
    if (ok) check_keys(u, obj_get(s, "params"), "scheduler.params", ok, NULL);
}

/* ---- batch arithmetic -------------------------------------------------------------------- */

static dt_status batch_mismatch(int64_t t, int64_t m, int64_t g, int w, bool ht, bool hm, bool hg) {
    int64_t per = m * g; /* micro * gas: overflow was checked by the caller's inputs */
    const char *inf_m = hm ? "" : " (inferred)", *inf_g = hg ? "" : " (inferred)";
    const char *inf_t = ht ? "" : " (inferred)";
    char hint[512];
    if (ht && hm && hg) {
        snprintf(hint, sizeof hint,
                 "change one of them: with these micro-batch and accumulation settings "
                 "train_batch_size must be %lld, or drop one of the three keys and let it be "
                 "inferred",
                 (long long)(per * w));
    } else if (ht && hm) {
        int64_t unit = m * w;
        snprintf(hint, sizeof hint,
                 "train_batch_size must be a multiple of train_micro_batch_size_per_gpu * world "
                 "size = %lld (e.g. %lld or %lld); change train_batch_size or "
                 "train_micro_batch_size_per_gpu",
                 (long long)unit, (long long)(t / unit > 0 ? t / unit * unit : unit),
                 (long long)((t / unit + 1) * unit));
    } else if (ht && hg) {
        int64_t unit = g * (int64_t)w;
        snprintf(hint, sizeof hint,
                 "train_batch_size must be a multiple of gradient_accumulation_steps * world "
                 "size = %lld (e.g. %lld or %lld); change train_batch_size or "
                 "gradient_accumulation_steps",
                 (long long)unit, (long long)(t / unit > 0 ? t / unit * unit : unit),
                 (long long)((t / unit + 1) * unit));
    } else {
        snprintf(hint, sizeof hint,
                 "train_batch_size must be a multiple of the world size %d (e.g. %lld or %lld); "
                 "change train_batch_size, or set train_micro_batch_size_per_gpu instead",
                 w, (long long)(t / w > 0 ? t / w * w : w), (long long)((t / w + 1) * w));
    }
    return errf("batch sizes do not multiply out: train_batch_size %lld%s != "
                "train_micro_batch_size_per_gpu %lld%s * gradient_accumulation_steps %lld%s * "
                "data-parallel world size %d; hint: %s",
                (long long)t, inf_t, (long long)m, inf_m, (long long)g, inf_g, w, hint);
}

static dt_status parse_batch(const sec *root, int w, const char *near_miss, dt_ds_config *out) {
    int64_t t = 0, m = 0, g = 0;
    TRY(get_int(root, "train_batch_size", 1, INT64_MAX, &t));
    TRY(get_int(root, "train_micro_batch_size_per_gpu", 1, INT64_MAX, &m));
    TRY(get_int(root, "gradient_accumulation_steps", 1, INT64_MAX, &g));
    bool ht = t > 0, hm = m > 0, hg = g > 0;
    /* DeepSpeed's inference: floor divisions, then the product is checked */
    if (ht && hm && hg) {
    } else if (ht && hm) {
        g = t / m / w;
    } else if (ht && hg) {
        m = t / w / g;
    } else if (hm && hg) {
        if (__builtin_mul_overflow(m, g, &t) || __builtin_mul_overflow(t, (int64_t)w, &t))
            return errf("train_micro_batch_size_per_gpu %lld * gradient_accumulation_steps %lld "
                        "* world size %d overflows; hint: use smaller batch settings",
                        (long long)m, (long long)g, w);
    } else if (ht) {
        g = 1;
        m = t / w;
    } else if (hm) {
        g = 1;
        if (__builtin_mul_overflow(m, (int64_t)w, &t))
            return errf("train_micro_batch_size_per_gpu %lld * world size %d overflows; hint: "
                        "use a smaller micro-batch",
                        (long long)m, w);
    } else {
        return errf("neither train_batch_size nor train_micro_batch_size_per_gpu is set%s%s%s; "
                    "hint: set train_batch_size (the global batch) or "
                    "train_micro_batch_size_per_gpu (the batch of one rank per step)",
                    near_miss ? " (is '" : "", near_miss ? near_miss : "",
                    near_miss ? "' a misspelling?)" : "");
    }
    int64_t prod;
    if (m < 1 || g < 1 || __builtin_mul_overflow(m, g, &prod) ||
        __builtin_mul_overflow(prod, (int64_t)w, &prod) || prod != t)
        return batch_mismatch(t, m, g, w, ht, hm, hg);
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
    char pb[64];
    sec s;
    TRY(get_section(root, "fp16", true, pb, sizeof pb, &s));
    *c = dt_loss_scaler_defaults();
    c->enabled = false;
    TRY(get_bool(&s, "enabled", &c->enabled));
    const json_t *ls = sget(&s, "loss_scale");
    if (ls && (!json_is_number(ls) || !isfinite(json_number_value(ls))))
        return bad(&s, "loss_scale", ls, "a finite number",
                   "0 selects dynamic loss scaling, a positive value a static scale");
    TRY(get_real(&s, "loss_scale", 0, false, &c->loss_scale));
    TRY(get_int32(&s, "initial_scale_power", INT_MIN, INT_MAX, &c->initial_scale_power));
    TRY(get_int(&s, "loss_scale_window", INT64_MIN, INT64_MAX, &c->loss_scale_window));
    TRY(get_int32(&s, "hysteresis", INT_MIN, INT_MAX, &c->hysteresis));
    TRY(get_bool(&s, "consecutive_hysteresis", &c->consecutive_hysteresis));
    int64_t min_scale = 1;
    TRY(get_int(&s, "min_loss_scale", INT64_MIN, INT64_MAX, &min_scale));
    c->min_loss_scale = (double)min_scale;
    *fp16_master = false;
    TRY(get_bool(&s, "fp16_master_weights_and_grads", fp16_master));
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
    char pb[64];
    sec s;
    const char *name = sget(root, "bf16") ? "bf16" : "bfloat16";
    TRY(get_section(root, name, true, pb, sizeof pb, &s));
    *enabled = *master = *opt_states = false;
    TRY(get_bool(&s, "enabled", enabled));
    TRY(get_bool(&s, "bf16_master_weights_and_grads", master));
    TRY(get_bool(&s, "bf16_optimizer_states", opt_states));
    return DT_OK;
}

static dt_status get_device(const sec *s, dt_offload_device *out) {
    const json_t *v = sget(s, "device");
    if (!v) return DT_OK;
    if (json_is_string(v)) {
        const char *d = json_string_value(v);
        if (!strcmp(d, "none")) return *out = DT_OFFLOAD_NONE, DT_OK;
        if (!strcmp(d, "cpu")) return *out = DT_OFFLOAD_CPU, DT_OK;
        if (!strcmp(d, "nvme")) return *out = DT_OFFLOAD_NVME, DT_OK;
    }
    return bad(s, "device", v, "one of \"none\", \"cpu\", \"nvme\"",
               "\"cpu\" keeps the state in host memory, \"nvme\" in files under nvme_path");
}

static dt_status get_path(const sec *s, char *dst, size_t n) {
    const char *p = NULL;
    TRY(get_str(s, "nvme_path", &p));
    if (!p) return DT_OK;
    if (strlen(p) >= n) {
        char kb[256];
        return errf("%s is too long (%zu bytes, at most %zu); hint: use a shorter directory",
                    kp(s, "nvme_path", kb, sizeof kb), strlen(p), n - 1);
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
    const json_t *zv = sget(root, "zero_optimization");
    if (zv && json_is_boolean(zv)) { /* DeepSpeed's old form: true = stage 1 */
        z->stage = json_is_true(zv) ? 1 : 0;
        z->overlap_comm = false;
        sec top = *root;
        top.auto_default = false;
        return get_int(&top, "allgather_size", 0, INT64_MAX, &z->allgather_bucket_size);
    }
    char pb[64];
    sec s;
    TRY(get_section(root, "zero_optimization", true, pb, sizeof pb, &s));
    const json_t *stage = sget(&s, "stage");
    int64_t st = 0;
    double sx = stage && json_is_number(stage) ? json_number_value(stage) : -1;
    if (stage && !(sx == 0 || sx == 1 || sx == 2 || sx == 3))
        return bad(&s, "stage", stage, "0, 1, 2 or 3",
                   "0 = plain data parallel, 1 = partition the optimizer state, 2 = also the "
                   "gradients, 3 = also the parameters");
    TRY(get_int(&s, "stage", 0, 3, &st));
    z->stage = (int)st;
    z->overlap_comm = z->stage == 3;
    TRY(get_bool(&s, "overlap_comm", &z->overlap_comm));
    TRY(get_bool(&s, "contiguous_gradients", &z->contiguous_gradients));
    TRY(get_bool(&s, "reduce_scatter", &z->reduce_scatter));
    TRY(get_int(&s, "reduce_bucket_size", 1, INT64_MAX, &z->reduce_bucket_size));
    TRY(get_int(&s, "allgather_bucket_size", 0, INT64_MAX, &z->allgather_bucket_size));
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
        TRY(get_int(&s, sget(&s, s3[i].alias) ? s3[i].alias : s3[i].name, 0, INT64_MAX, dst));
    }
    bool compute_grad_norm = true;
    TRY(get_bool(&s, "compute_grad_norm", &compute_grad_norm));
    if (!compute_grad_norm && z->stage != 1 && z->stage != 2)
        return errf("zero_optimization.compute_grad_norm = false needs ZeRO stage 1 or 2 (stage "
                    "is %d); hint: remove the key",
                    z->stage);

    /* offload sections (and the deprecated booleans that stand for them) */
    char po[96], pp[96];
    sec so, sp;
    TRY(get_section(&s, "offload_optimizer", true, po, sizeof po, &so));
    TRY(get_section(&s, "offload_param", true, pp, sizeof pp, &sp));
    bool dep = false;
    TRY(get_bool(&s, "cpu_offload", &dep));
    if (dep) {
        if (so.obj)
            return errf("zero_optimization.cpu_offload (deprecated) and offload_optimizer are both "
                        "set; hint: keep only offload_optimizer {\"device\": \"cpu\"}");
        z->offload_optimizer = DT_OFFLOAD_CPU;
    }
    dep = false;
    TRY(get_bool(&s, "cpu_offload_param", &dep));
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
    TRY(get_int(&so, "buffer_count", 0, INT64_MAX, &ignored_int));
    TRY(get_bool(&so, "pin_memory", &ignored_bool));
    TRY(get_real(&so, "ratio", 0, false, &ratio));
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
    TRY(get_int(&sp, "buffer_count", 0, INT64_MAX, &ignored_int));
    TRY(get_int(&sp, "buffer_size", 0, INT64_MAX, &ignored_int));
    TRY(get_int(&sp, "max_in_cpu", 0, INT64_MAX, &ignored_int));
    TRY(get_bool(&sp, "pin_memory", &ignored_bool));

    if (z->offload_param != DT_OFFLOAD_NONE && z->stage != 3)
        return errf("zero_optimization.offload_param needs ZeRO stage 3 (stage is %d); hint: set "
                    "zero_optimization.stage to 3, or remove offload_param (stages 1-2 can "
                    "offload the optimizer state with offload_optimizer)",
                    z->stage);
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
    char pb[64];
    sec s;
    TRY(get_section(root, "activation_checkpointing", false, pb, sizeof pb, &s));
    memset(a, 0, sizeof *a);
    a->number_checkpoints = -1;
    TRY(get_bool(&s, "partition_activations", &a->partition_activations));
    TRY(get_bool(&s, "cpu_checkpointing", &a->cpu_checkpointing));
    TRY(get_bool(&s, "contiguous_memory_optimization", &a->contiguous_memory_optimization));
    TRY(get_int(&s, "number_checkpoints", 0, INT64_MAX, &a->number_checkpoints));
    TRY(get_bool(&s, "synchronize_checkpoint_boundary", &a->synchronize_checkpoint_boundary));
    TRY(get_bool(&s, "profile", &a->profile));
    return DT_OK;
}

static dt_status parse_flops(const sec *root, dt_flops_profiler_config *f) {
    char pb[64];
    sec s;
    TRY(get_section(root, "flops_profiler", false, pb, sizeof pb, &s));
    memset(f, 0, sizeof *f);
    f->profile_step = 1;
    f->module_depth = -1;
    f->top_modules = 1;
    f->detailed = true;
    TRY(get_bool(&s, "enabled", &f->enabled));
    TRY(get_int(&s, "profile_step", 1, INT64_MAX, &f->profile_step));
    TRY(get_int(&s, "module_depth", -1, INT64_MAX, &f->module_depth));
    TRY(get_int(&s, "top_modules", 1, INT64_MAX, &f->top_modules));
    TRY(get_bool(&s, "detailed", &f->detailed));
    const char *out = NULL;
    TRY(get_str(&s, "output_file", &out));
    if (out) {
        if (strlen(out) >= sizeof f->output_file)
            return errf("flops_profiler.output_file is too long (%zu bytes, at most %zu); hint: "
                        "use a shorter path",
                        strlen(out), sizeof f->output_file - 1);
        snprintf(f->output_file, sizeof f->output_file, "%s", out);
    }
    double ignored = 0;
    TRY(get_real(&s, "recompute_fwd_factor", 0, false, &ignored));
    return DT_OK;
}

/* ---- optimizer and scheduler ------------------------------------------------------------- */

static dt_status get_betas(const sec *s, float *b1, float *b2) {
    const json_t *v = sget(s, "betas");
    if (!v) return DT_OK;
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) ||
        !json_is_number(json_array_get(v, 1)))
        return bad(s, "betas", v, "a list of two numbers", "write e.g. [0.9, 0.999]");
    *b1 = (float)json_number_value(json_array_get(v, 0));
    *b2 = (float)json_number_value(json_array_get(v, 1));
    return DT_OK;
}

/* A key that must be false if present (a variant DeepSpeed's optimizer refuses or dtrain lacks). */
static dt_status must_be_false(const sec *s, const char *key, const char *why) {
    bool b = false;
    TRY(get_bool(s, key, &b));
    if (b) {
        char kb[256];
        return errf("%s = true is not supported: %s; hint: remove the key",
                    kp(s, key, kb, sizeof kb), why);
    }
    return DT_OK;
}

static dt_status parse_optimizer(const sec *root, dt_ds_config *out) {
    char pb[64], pp[96];
    sec s, p;
    TRY(get_section(root, "optimizer", false, pb, sizeof pb, &s));
    out->has_optimizer = false;
    out->optimizer = dt_optim_defaults(DT_OPTIM_ADAM);
    out->optimizer.weight_decay = 0;
    if (!s.obj) return DT_OK;
    const char *type = NULL;
    TRY(get_str(&s, "type", &type));
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
        const char *sug = suggest(type, names, NULL);
        if (!sug && !strcasecmp(type, "sgd")) sug = "SGD";
        return errf("optimizer.type \"%s\" is not supported%s%s%s; hint: dtrain has Adam, AdamW "
                    "and Lamb (any case) and SGD (as torch.optim spells it)",
                    type, sug ? " (did you mean \"" : "", sug ? sug : "", sug ? "\"?)" : "");
    }
    TRY(get_section(&s, "params", false, pp, sizeof pp, &p));
    if (sget(&p, "max_grad_norm"))
        return errf("optimizer.params.max_grad_norm is not supported as an optimizer parameter "
                    "(DeepSpeed refuses it too); hint: use the top-level \"gradient_clipping\"");
    dt_optim_config c = dt_optim_defaults(t);
    TRY(get_float(&p, "lr", 0, false, &c.lr));
    TRY(get_float(&p, "weight_decay", 0, false, &c.weight_decay));
    if (t == DT_OPTIM_SGD) {
        TRY(get_float(&p, "momentum", 0, false, &c.momentum));
        TRY(get_float(&p, "dampening", -INFINITY, false, &c.dampening));
        TRY(get_bool(&p, "nesterov", &c.nesterov));
        TRY(must_be_false(&p, "maximize", "dtrain's SGD always minimises"));
    } else {
        TRY(get_betas(&p, &c.beta1, &c.beta2));
        TRY(get_float(&p, "eps", 0, false, &c.eps));
        TRY(get_bool(&p, "bias_correction", &c.bias_correction));
        TRY(must_be_false(&p, "amsgrad", "DeepSpeed's fused Adam and Lamb have no AMSGrad"));
    }
    if (t == DT_OPTIM_ADAM || t == DT_OPTIM_ADAMW) {
        /* DeepSpeed: "Adam" is AdamW unless adam_w_mode is false; "AdamW" always is. Its fused
         * Adam defaults weight_decay to 0; torch_adam selects torch.optim.Adam(W), whose
         * AdamW defaults it to 0.01. */
        bool w_mode = true, torch_adam = false;
        TRY(get_bool(&p, "adam_w_mode", &w_mode));
        TRY(get_bool(&p, "torch_adam", &torch_adam));
        c.adam_w_mode = t == DT_OPTIM_ADAMW || w_mode;
        c.weight_decay = torch_adam && c.adam_w_mode ? 0.01f : 0.0f;
        TRY(get_float(&p, "weight_decay", 0, false, &c.weight_decay));
    }
    if (t == DT_OPTIM_LAMB) {
        TRY(get_float(&p, "max_coeff", 0, false, &c.max_coeff));
        TRY(get_float(&p, "min_coeff", 0, false, &c.min_coeff));
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
    char pb[64], pp[96], kb[256];
    sec s, p;
    TRY(get_section(root, "scheduler", false, pb, sizeof pb, &s));
    out->has_scheduler = false;
    out->scheduler = dt_sched_defaults(DT_SCHED_CONSTANT);
    out->scheduler.base_lr = out->optimizer.lr;
    if (!s.obj) return DT_OK;
    const char *type = NULL;
    TRY(get_str(&s, "type", &type));
    int ti = -1;
    for (size_t i = 0; type && i < NELEM(k_sched_types); i++)
        if (!strcmp(type, k_sched_types[i].name)) ti = (int)i;
    if (ti < 0) {
        const char *names[NELEM(k_sched_types) + 1];
        for (size_t i = 0; i < NELEM(k_sched_types); i++) names[i] = k_sched_types[i].name;
        names[NELEM(k_sched_types)] = NULL;
        const char *sug = type ? suggest(type, names, NULL) : NULL;
        return errf("scheduler.type %s%s%s is not supported%s%s%s; hint: use WarmupLR, "
                    "WarmupDecayLR, WarmupCosineLR, OneCycle or LRRangeTest (DeepSpeed's "
                    "schedules), StepLR or CosineAnnealingLR; names are case-sensitive",
                    type ? "\"" : "", type ? type : "(missing)", type ? "\"" : "",
                    sug ? " (did you mean \"" : "", sug ? sug : "", sug ? "\"?)" : "");
    }
    dt_sched_type t = k_sched_types[ti].type;
    TRY(get_section(&s, "params", false, pp, sizeof pp, &p));
    dt_sched_config c = dt_sched_defaults(t);
    c.base_lr = out->optimizer.lr;
    /* DeepSpeed's WarmupLR warms up to the optimizer's lr unless warmup_max_lr is given
     * (WarmupDecayLR keeps its own default of 0.001) */
    if (t == DT_SCHED_WARMUP_LR) c.warmup_max_lr = out->optimizer.lr;
    int64_t last = -1;
    TRY(get_int(&p,
                t == DT_SCHED_STEP_LR || t == DT_SCHED_COSINE_ANNEALING ? "last_epoch"
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
        if (required[i] && !sget(&p, required[i]))
            return errf("%s is required by the %s schedule; hint: add it to scheduler.params",
                        kp(&p, required[i], kb, sizeof kb), type);
    switch (t) {
    case DT_SCHED_WARMUP_LR:
    case DT_SCHED_WARMUP_DECAY_LR:
    case DT_SCHED_WARMUP_COSINE_LR: {
        TRY(get_int(&p, "warmup_num_steps", INT64_MIN, INT64_MAX, &c.warmup_num_steps));
        if (t == DT_SCHED_WARMUP_COSINE_LR) {
            TRY(get_float(&p, "warmup_min_ratio", -INFINITY, false, &c.warmup_min_ratio));
            TRY(get_float(&p, "cos_min_ratio", -INFINITY, false, &c.cos_min_ratio));
        } else {
            TRY(get_float(&p, "warmup_min_lr", 0, false, &c.warmup_min_lr));
            TRY(get_float(&p, "warmup_max_lr", 0, false, &c.warmup_max_lr));
        }
        if (t != DT_SCHED_WARMUP_LR)
            TRY(get_int(&p, "total_num_steps", INT64_MIN, INT64_MAX, &c.total_num_steps));
        const char *wt = NULL;
        TRY(get_str(&p, "warmup_type", &wt));
        if (wt && strcmp(wt, "log") && strcmp(wt, "linear"))
            dt_log(DT_LOG_WARN,
                   "ds_config: scheduler.params.warmup_type \"%s\" is neither \"log\" nor "
                   "\"linear\"; using \"log\" as DeepSpeed does",
                   wt);
        c.warmup_linear = wt && !strcmp(wt, "linear");
        break;
    }
    case DT_SCHED_ONE_CYCLE: {
        TRY(get_float(&p, "cycle_min_lr", 0, false, &c.cycle_min_lr));
        TRY(get_float(&p, "cycle_max_lr", 0, false, &c.cycle_max_lr));
        TRY(get_float(&p, "decay_lr_rate", -INFINITY, false, &c.decay_lr_rate));
        TRY(get_int(&p, "cycle_first_step_size", INT64_MIN, INT64_MAX, &c.cycle_first_step_size));
        TRY(get_int(&p, "cycle_second_step_size", INT64_MIN, INT64_MAX, &c.cycle_second_step_size));
        TRY(get_int(&p, "cycle_first_stair_count", 0, INT64_MAX, &c.cycle_first_stair_count));
        TRY(get_int(&p, "cycle_second_stair_count", 0, INT64_MAX, &c.cycle_second_stair_count));
        TRY(get_int(&p, "decay_step_size", INT64_MIN, INT64_MAX, &c.decay_step_size));
        TRY(get_bool(&p, "cycle_momentum", &c.cycle_momentum));
        TRY(get_float(&p, "cycle_min_mom", -INFINITY, false, &c.cycle_min_mom));
        TRY(get_float(&p, "cycle_max_mom", -INFINITY, false, &c.cycle_max_mom));
        TRY(get_float(&p, "decay_mom_rate", -INFINITY, false, &c.decay_mom_rate));
        break;
    }
    case DT_SCHED_LR_RANGE_TEST:
        TRY(get_float(&p, "lr_range_test_min_lr", 0, false, &c.lr_range_test_min_lr));
        TRY(get_int(&p, "lr_range_test_step_size", INT64_MIN, INT64_MAX,
                    &c.lr_range_test_step_size));
        TRY(get_float(&p, "lr_range_test_step_rate", -INFINITY, false, &c.lr_range_test_step_rate));
        TRY(get_bool(&p, "lr_range_test_staircase", &c.lr_range_test_staircase));
        break;
    case DT_SCHED_STEP_LR:
        TRY(get_int(&p, "step_size", INT64_MIN, INT64_MAX, &c.step_size));
        TRY(get_float(&p, "gamma", -INFINITY, false, &c.gamma));
        break;
    case DT_SCHED_COSINE_ANNEALING:
        TRY(get_int(&p, "T_max", INT64_MIN, INT64_MAX, &c.t_max));
        TRY(get_float(&p, "eta_min", -INFINITY, false, &c.eta_min));
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
    TRY(get_real(root, "gradient_clipping", 0, false, &out->gradient_clipping));
    TRY(get_bool(root, "prescale_gradients", &out->prescale_gradients));
    TRY(get_real(root, "gradient_predivide_factor", 0, true, &out->gradient_predivide_factor));
    TRY(get_int(root, "steps_per_print", 1, INT64_MAX, &out->steps_per_print));
    TRY(get_bool(root, "wall_clock_breakdown", &out->wall_clock_breakdown));

    const json_t *mb = sget(root, "memory_budget");
    if (mb && json_is_string(mb)) {
        int64_t b = dt_parse_bytes(json_string_value(mb));
        if (b < 0)
            return bad(root, "memory_budget", mb, "a byte count",
                       "write bytes as a number, or a string such as \"512M\" or \"2GiB\"");
        out->memory_budget_bytes = b;
    } else if (mb) {
        if (!json_is_number(mb))
            return bad(root, "memory_budget", mb, "a byte count",
                       "write bytes as a number, or a string such as \"512M\" or \"2GiB\"");
        TRY(get_int(root, "memory_budget", 0, INT64_MAX, &out->memory_budget_bytes));
    }

    const char *cdt = NULL;
    TRY(get_str(root, "communication_data_type", &cdt));
    if (cdt && strcasecmp(cdt, "fp32") && strcasecmp(cdt, "fp16") && strcasecmp(cdt, "bf16"))
        return errf("communication_data_type must be \"fp16\", \"bf16\" or \"fp32\", got \"%s\"; "
                    "hint: remove it (dtrain reduces gradients in fp32)",
                    cdt);
    const char *op = NULL;
    TRY(get_str(root, "gradient_allreduce_op", &op));
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
    sec root = {j, "", false};

    /* unknown keys: one warning, whatever happens next */
    unknowns u;
    memset(&u, 0, sizeof u);
    collect_unknowns(j, &u);
    if (u.count)
        dt_log(DT_LOG_WARN, "ds_config: %d unknown key%s ignored: %s%s", u.count,
               u.count == 1 ? "" : "s", u.text, u.shown < u.count ? ", ..." : "");
    /* an unknown top-level key close to a batch key, for the "no batch size" error */
    const char *near_miss = NULL;
    static const char *const batch_keys[] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                             NULL};
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        (void)v;
        if (!in_list(key, k_top) && !in_list(key, k_top_ignored) && suggest(key, batch_keys, NULL))
            near_miss = key;
    }

    TRY(check_removed(j));
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
