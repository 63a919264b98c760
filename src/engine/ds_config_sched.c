/*
 * ds_config_sched.c — the DeepSpeed config's optimizer and scheduler sections (ds_config.c reads
 * the rest): the optimizer's type and params, each checked by building the optimizer once; the
 * schedule's type, its required arguments and its params (a table of keys per schedule), each
 * checked by building the schedule once. DeepSpeed's engine (the optimizers it builds) and
 * runtime/lr_schedules.py are the specification.
 */
#include "engine/ds_config_impl.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

// clang-format off
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

const char *const *dt__ds_sched_keys(const char *type) {
    for (size_t i = 0; type && i < NELEM(k_sched_types); i++)
        if (!strcmp(type, k_sched_types[i].name)) return k_sched_types[i].keys;
    return NULL;
}

/* ---- optimizer ---- */

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

dt_status dt__ds_parse_optimizer(const sec *root, dt_ds_config *out) {
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
        dt_status st = dt__ds_refused("dt_optim_new: ", "optimizer.params: ");
        DT_KEEP_ERROR(dt_device_free(dev));
        return st;
    }
    dt_optim_free(probe);
    dt_device_free(dev);
    out->has_optimizer = true;
    out->optimizer = c;
    return DT_OK;
}

/* ---- scheduler ---- */

/* The row of k_sched_types named `type` (NULL: the key is missing); DT_ERR_CONFIG naming it,
 * with the closest name, when there is none. */
static dt_status sched_type(const char *type, int *ti) {
    *ti = -1;
    for (size_t i = 0; type && i < NELEM(k_sched_types); i++)
        if (!strcmp(type, k_sched_types[i].name)) *ti = (int)i;
    if (*ti >= 0) return DT_OK;
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

/* last_batch_iteration (last_epoch for the torch schedules) may only be -1: a schedule starts
 * at its beginning. */
static dt_status sched_no_resume(const sec *p, dt_sched_type t) {
    const char *key = t == DT_SCHED_STEP_LR || t == DT_SCHED_COSINE_ANNEALING
                          ? "last_epoch"
                          : "last_batch_iteration";
    int64_t last = -1;
    TRY(dt_conf_int(p, key, -1, INT64_MAX, &last));
    if (last != -1)
        return errf("%s.%s is not supported; hint: remove it (an engine checkpoint restores the "
                    "schedule's position)",
                    p->path, key);
    return DT_OK;
}

/* The constructors' required arguments. */
static const struct {
    dt_sched_type type;
    const char *keys[2];
} k_sched_required[] = {
    {DT_SCHED_WARMUP_DECAY_LR, {"total_num_steps", NULL}},
    {DT_SCHED_WARMUP_COSINE_LR, {"total_num_steps", NULL}},
    {DT_SCHED_ONE_CYCLE, {"cycle_min_lr", "cycle_max_lr"}},
    {DT_SCHED_STEP_LR, {"step_size", NULL}},
    {DT_SCHED_COSINE_ANNEALING, {"T_max", NULL}},
};

static dt_status sched_required(const sec *p, dt_sched_type t, const char *type) {
    char kb[256];
    for (size_t r = 0; r < NELEM(k_sched_required); r++) {
        for (int i = 0; k_sched_required[r].type == t && i < 2; i++) {
            const char *key = k_sched_required[r].keys[i];
            if (key && !dt_conf_get(p, key))
                return errf("%s is required by the %s schedule; hint: add it to scheduler.params",
                            dt_conf_path(p, key, kb, sizeof kb), type);
        }
    }
    return DT_OK;
}

/* The schedules' numeric and boolean params: a field of dt_sched_config each, read in this
 * order; `types` are the schedules that take it. Integers and floats are unbounded or >= 0. */
#define SCHED(x) (1u << DT_SCHED_##x)
#define WARMUPS (SCHED(WARMUP_LR) | SCHED(WARMUP_DECAY_LR) | SCHED(WARMUP_COSINE_LR))
typedef enum { P_INT, P_FLOAT, P_BOOL } param_kind;
static const struct {
    unsigned types;
    const char *key;
    param_kind kind;
    bool nonneg;
    size_t off;
} k_sched_params[] = {
#define P(types, key, kind, nonneg, field)                                                         \
    { types, key, kind, nonneg, offsetof(dt_sched_config, field) }
    P(WARMUPS, "warmup_num_steps", P_INT, false, warmup_num_steps),
    P(SCHED(WARMUP_COSINE_LR), "warmup_min_ratio", P_FLOAT, false, warmup_min_ratio),
    P(SCHED(WARMUP_COSINE_LR), "cos_min_ratio", P_FLOAT, false, cos_min_ratio),
    P(SCHED(WARMUP_LR) | SCHED(WARMUP_DECAY_LR), "warmup_min_lr", P_FLOAT, true, warmup_min_lr),
    P(SCHED(WARMUP_LR) | SCHED(WARMUP_DECAY_LR), "warmup_max_lr", P_FLOAT, true, warmup_max_lr),
    P(SCHED(WARMUP_DECAY_LR) | SCHED(WARMUP_COSINE_LR), "total_num_steps", P_INT, false,
      total_num_steps),
    P(SCHED(ONE_CYCLE), "cycle_min_lr", P_FLOAT, true, cycle_min_lr),
    P(SCHED(ONE_CYCLE), "cycle_max_lr", P_FLOAT, true, cycle_max_lr),
    P(SCHED(ONE_CYCLE), "decay_lr_rate", P_FLOAT, false, decay_lr_rate),
    P(SCHED(ONE_CYCLE), "cycle_first_step_size", P_INT, false, cycle_first_step_size),
    P(SCHED(ONE_CYCLE), "cycle_second_step_size", P_INT, false, cycle_second_step_size),
    P(SCHED(ONE_CYCLE), "cycle_first_stair_count", P_INT, true, cycle_first_stair_count),
    P(SCHED(ONE_CYCLE), "cycle_second_stair_count", P_INT, true, cycle_second_stair_count),
    P(SCHED(ONE_CYCLE), "decay_step_size", P_INT, false, decay_step_size),
    P(SCHED(ONE_CYCLE), "cycle_momentum", P_BOOL, false, cycle_momentum),
    P(SCHED(ONE_CYCLE), "cycle_min_mom", P_FLOAT, false, cycle_min_mom),
    P(SCHED(ONE_CYCLE), "cycle_max_mom", P_FLOAT, false, cycle_max_mom),
    P(SCHED(ONE_CYCLE), "decay_mom_rate", P_FLOAT, false, decay_mom_rate),
    P(SCHED(LR_RANGE_TEST), "lr_range_test_min_lr", P_FLOAT, true, lr_range_test_min_lr),
    P(SCHED(LR_RANGE_TEST), "lr_range_test_step_size", P_INT, false, lr_range_test_step_size),
    P(SCHED(LR_RANGE_TEST), "lr_range_test_step_rate", P_FLOAT, false, lr_range_test_step_rate),
    P(SCHED(LR_RANGE_TEST), "lr_range_test_staircase", P_BOOL, false, lr_range_test_staircase),
    P(SCHED(STEP_LR), "step_size", P_INT, false, step_size),
    P(SCHED(STEP_LR), "gamma", P_FLOAT, false, gamma),
    P(SCHED(COSINE_ANNEALING), "T_max", P_INT, false, t_max),
    P(SCHED(COSINE_ANNEALING), "eta_min", P_FLOAT, false, eta_min),
#undef P
};

/* Schedule t's params from p into c (the table above, then the warmups' warmup_type). */
static dt_status sched_params(const sec *p, dt_sched_type t, dt_sched_config *c) {
    for (size_t i = 0; i < NELEM(k_sched_params); i++) {
        if (!(k_sched_params[i].types & (1u << t))) continue;
        const char *key = k_sched_params[i].key;
        void *field = (char *)c + k_sched_params[i].off;
        bool nonneg = k_sched_params[i].nonneg;
        switch (k_sched_params[i].kind) {
        case P_INT:
            TRY(dt_conf_int(p, key, nonneg ? 0 : INT64_MIN, INT64_MAX, field));
            break;
        case P_FLOAT:
            TRY(dt_conf_float(p, key, nonneg ? 0 : -INFINITY, false, field));
            break;
        case P_BOOL:
            TRY(dt_conf_bool(p, key, field));
            break;
        }
    }
    if (!(WARMUPS & (1u << t))) return DT_OK;
    const char *wt = NULL;
    TRY(dt_conf_str(p, "warmup_type", false, &wt));
    if (wt && strcmp(wt, "log") && strcmp(wt, "linear"))
        dt_log(DT_LOG_WARN,
               "ds_config: scheduler.params.warmup_type \"%s\" is neither \"log\" nor "
               "\"linear\"; using \"log\" as DeepSpeed does",
               wt);
    c->warmup_linear = wt && !strcmp(wt, "linear");
    return DT_OK;
}

/* The schedule's own checks (positive step counts, ...) by building it once. */
static dt_status sched_probe(const dt_sched_config *c) {
    dt_lr_schedule *probe = dt_sched_new(c, NULL);
    if (!probe) return dt__ds_refused("lr schedule: ", "scheduler.params: ");
    dt_sched_free(probe);
    return DT_OK;
}

dt_status dt__ds_parse_scheduler(const sec *root, dt_ds_config *out) {
    sec s, p;
    TRY(dt_conf_section(root, "scheduler", 0, NULL, &s));
    out->has_scheduler = false;
    out->scheduler = dt_sched_defaults(DT_SCHED_CONSTANT);
    out->scheduler.base_lr = out->optimizer.lr;
    if (!s.obj) return DT_OK;
    const char *type = NULL;
    TRY(dt_conf_str(&s, "type", false, &type));
    int ti;
    TRY(sched_type(type, &ti));
    dt_sched_type t = k_sched_types[ti].type;
    TRY(dt_conf_section(&s, "params", 0, NULL, &p));
    dt_sched_config c = dt_sched_defaults(t);
    c.base_lr = out->optimizer.lr;
    /* DeepSpeed's WarmupLR warms up to the optimizer's lr unless warmup_max_lr is given
     * (WarmupDecayLR keeps its own default of 0.001) */
    if (t == DT_SCHED_WARMUP_LR) c.warmup_max_lr = out->optimizer.lr;
    TRY(sched_no_resume(&p, t));
    TRY(sched_required(&p, t, type));
    TRY(sched_params(&p, t, &c));
    TRY(sched_probe(&c));
    out->has_scheduler = true;
    out->scheduler = c;
    return DT_OK;
}
