/*
 * ds_config_warn.c — the DeepSpeed keys that dtrain's reader accepts but that change nothing
 * here (each a warning saying why) and the features it refuses because it does not have them (an
 * error saying so); ds_config.c's reader and its dt_ds_config_check call it.
 *
 * A section asks for something unless it is null, false, empty, or has "enabled": false; only
 * what is asked for is reported. Monitoring sections map to dtrain's own recording: every
 * trial's metrics go to the master and to TensorBoard event files, whatever the section says.
 */
#include "engine/ds_config_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Does v ask for anything? */
static bool asks(const json_t *v) {
    if (!v || json_is_null(v) || json_is_false(v)) return false;
    if (json_is_integer(v) && json_integer_value(v) == 0) return false;
    if (json_is_object(v)) {
        const json_t *en = json_object_get(v, "enabled");
        if (en && (json_is_false(en) || (json_is_integer(en) && !json_integer_value(en))))
            return false;
        return json_object_size(v) > 0;
    }
    if (json_is_array(v)) return json_array_size(v) > 0;
    return true;
}

#define TB                                                                                         \
    "dtrain records every trial's metrics in the master and as TensorBoard event files "           \
    "under the trial's checkpoint directory (tensorboard/)"

/* Top-level keys without effect here, and why. */
static const struct {
    const char *key, *why;
} NO_EFFECT[] = {
    {"tensorboard", TB " (output_path and job_name are not used)"},
    {"csv_monitor", TB "; it writes no CSV files"},
    {"wandb", TB "; it does not send to Weights & Biases"},
    {"comet", TB "; it does not send to Comet"},
    {"comms_logger", "dtrain's communicator does not log each collective"},
    {"zero_allow_untested_optimizer", "every dtrain optimizer runs under ZeRO"},
    {"zero_force_ds_cpu_optimizer", "dtrain's optimizers are CPU optimizers already"},
    {"allgather_size", "a bucket size of DeepSpeed's GPU all-gather"},
    {"disable_allgather", "a switch of DeepSpeed's legacy ZeRO"},
    {"managed_gradient_accumulation", "dtrain's engine accumulates gradients itself"},
    {"dump_state", "dtrain does not print the engine's state at start"},
    {"disable_python_gc", "there is no Python interpreter here"},
    {"seq_parallel_communication_data_type", "dtrain has no sequence parallelism"},
    {"memory_breakdown", "dtrain has no GPU memory to break down"},
    {"dataloader_drop_last", "the trial's data loader decides (dt_data_loader)"},
    {"vocabulary_size", "the model defines its vocabulary"},
    {"log_level", "dtrain's log level is its own"},
    {"torch_autocast", "precision follows the fp16 and bf16 sections"},
    {"autotuning", "DeepSpeed's autotuner does not run; dtrain's is `dtrain dsat`"},
    {"checkpoint", "dtrain writes its own checkpoint layout (docs/checkpoints.md)"},
    {"data_types", "gradients accumulate in fp32"},
    {"aio", "dtrain's NVMe swapper uses its own reads and writes"},
    {"datastates_ckpt", "dtrain writes its own checkpoint layout (docs/checkpoints.md)"},
    {"compile", "dtrain's kernels are compiled C (there is no torch.compile)"},
    {"timers", "dtrain's timers are wall_clock_breakdown's"},
    {"use_data_before_expert_parallelism", "dtrain has no expert parallelism"},
    {"pipeline", "the pipeline engine takes its layout from the trial (dt_pipe_engine_opts)"},
    {"weight_quantization", "a post-training quantization of inference"},
};

/* Features asked for that dtrain does not have: refused. `path` may be dotted; a number > 1
 * or an enabled section asks for the feature. */
static const struct {
    const char *path, *what;
} MISSING[] = {
    {"sequence_parallel_size", "Ulysses sequence parallelism"},
    {"tensor_parallel.autotp_size", "automatic tensor parallelism"},
    {"autotp_size", "automatic tensor parallelism"},
    {"expert_parallel", "expert (mixture-of-experts) parallelism"},
    {"hybrid_engine", "the hybrid training/inference engine"},
    {"data_efficiency", "the data efficiency library (curriculum sampling, random-LTD)"},
    {"random_ltd", "random layer-token dropping (random-LTD)"},
};

static const json_t *at_path(const json_t *j, const char *path) {
    char key[64];
    const json_t *cur = j;
    for (const char *p = path; cur;) {
        size_t l = strcspn(p, ".");
        snprintf(key, sizeof key, "%.*s", (int)l, p);
        cur = json_is_object(cur) ? json_object_get(cur, key) : NULL;
        if (!p[l]) break;
        p += l + 1;
    }
    return cur;
}

static dt_status note(json_t *out, const char *fmt, const char *a, const char *b) {
    char buf[600];
    snprintf(buf, sizeof buf, fmt, a, b);
    return json_array_append_new(out, json_string(buf)) ? dt_error(DT_ERR_OOM, "out of memory")
                                                        : DT_OK;
}

/* A feature dtrain does not have, asked for: one error. */
static dt_status refuse_missing(const json_t *j) {
    for (size_t i = 0; i < sizeof MISSING / sizeof *MISSING; i++) {
        const json_t *v = at_path(j, MISSING[i].path);
        bool wants = json_is_number(v) ? json_number_value(v) > 1 : asks(v);
        if (!wants) continue;
        return dt_error(DT_ERR_CONFIG,
                        "ds_config: %s asks for %s, which dtrain does not have; hint: remove it "
                        "(or set it to 1 / \"enabled\": false) to train without it",
                        MISSING[i].path, MISSING[i].what);
    }
    return DT_OK;
}

dt_status dt__ds_notes(const json_t *j, const dt__ds_ignored *ignored, json_t *out) {
    if (!json_is_object(j)) return DT_OK;
    if (refuse_missing(j)) return DT_ERR_CONFIG;
    for (size_t i = 0; i < sizeof NO_EFFECT / sizeof *NO_EFFECT; i++)
        if (asks(json_object_get(j, NO_EFFECT[i].key)) &&
            note(out, "%s has no effect: %s", NO_EFFECT[i].key, NO_EFFECT[i].why))
            return DT_ERR_OOM;
    for (const dt__ds_ignored *s = ignored; s && s->path; s++) {
        const json_t *sec = at_path(j, s->path);
        for (const char *const *k = s->keys; json_is_object(sec) && k && *k; k++) {
            char path[200];
            snprintf(path, sizeof path, "%s.%s", s->path, *k);
            if (asks(json_object_get(sec, *k)) && note(out, "%s has no effect: %s", path, s->why))
                return DT_ERR_OOM;
        }
    }
    const json_t *z = json_object_get(j, "zero_optimization");
    const json_t *op = json_is_object(z) ? json_object_get(z, "offload_param") : NULL;
    const json_t *dev = json_is_object(op) ? json_object_get(op, "device") : NULL;
    int64_t stage = 0;
    dt_conf_as_int(json_is_object(z) ? json_object_get(z, "stage") : NULL, &stage);
    if (json_is_string(dev) && strcmp(json_string_value(dev), "none") && stage < 3 &&
        note(out,
             "zero_optimization.offload_param has no effect below ZeRO stage 3%s%s: "
             "parameters are not partitioned there, so DeepSpeed ignores it too",
             "", ""))
        return DT_ERR_OOM;
    const json_t *fp16 = json_object_get(j, "fp16");
    if (asks(fp16) && json_is_true(json_object_get(fp16, "enabled")) &&
        note(out,
             "fp16.enabled: dtrain's fp16 rounds every matmul's inputs and outputs to fp16 "
             "(F16C, f32 sums; large values overflow to inf as on a GPU) but keeps norms, "
             "softmax, attention scores and the loss in f32, over fp32 master weights, with "
             "DeepSpeed's dynamic loss scaling (overflow checks, skipped steps, the scale "
             "schedule)%s%s; a CPU without F16C refuses it (bf16.enabled trains in bf16)",
             "", ""))
        return DT_ERR_OOM;
    return DT_OK;
}
