/*
 * schedule.c — learning-rate schedules: DeepSpeed's (deepspeed/runtime/lr_schedules.py:
 * WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest), torch's StepLR and
 * CosineAnnealingLR, a constant and a user function.
 *
 * Indexing. A schedule keeps `last` = DeepSpeed's last_batch_iteration (torch's last_epoch)
 * and its current lr is always dt_sched_lr_at(s, last). dt_sched_step() does last += 1 and
 * pushes the new lr into the optimiser (and, for OneCycle, the momentum); the training loop
 * calls it after each optimiser step, as DeepSpeed's engine does. So training step t (0-based)
 * runs with the lr the schedule held when that step started:
 *
 *   DeepSpeed family (WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest): created
 *     with last = -1 and the lr of get_lr() at -1 applied, exactly like their constructors
 *     (they do not call step()): WarmupLR/WarmupDecayLR -> warmup_min_lr (which is also the
 *     value at 0), WarmupCosineLR -> 0 (DeepSpeed returns 0.0 before it has started),
 *     OneCycle -> cycle_min_lr and momentum cycle_min_mom, LRRangeTest -> its min lr.
 *     Training step t runs with lr_at(t - 1).
 *   torch family (Constant, StepLR, CosineAnnealingLR, user function): torch's constructor
 *     calls step() once, so they are created with last = 0 and lr_at(0) = the base lr.
 *     Training step t runs with lr_at(t).
 *
 * Formulas, with k = last (the step index) and W = max(2, warmup_num_steps):
 *   WarmupLR        k < 0: min. k < W: min + (max - min) g, g = log(k + 1) / log(W) ("log") or
 *                   k / W ("linear"); k >= W: max.
 *   WarmupDecayLR   as WarmupLR during warmup; k >= W: min + (max - min) *
 *                   max(0, (T - k) / max(1, T - W)), T = total_num_steps (0 from k = T on).
 *   WarmupCosineLR  base lr (the optimiser's lr at creation) times a ratio: k < 0: 0; k < W:
 *                   wmin + (1 - wmin) g with g as above; k >= W: p = min(1, (k - W + 1) /
 *                   max(1, T - W)), max(0, cmin + (1 - cmin) (1 + cos(pi p)) / 2). The clamp of
 *                   p (current DeepSpeed) keeps cos_min_ratio after the end instead of rising.
 *   OneCycle        i = k + 1, S = first + second step sizes, r = first / S; while k < S:
 *                   x = 1 + i/S - floor(1 + i/S), f = x / r if x <= r else (x - 1) / (r - 1);
 *                   with a stair count c > 0 for that half, f = floor(pos) / c where pos =
 *                   (i mod S) c / first (rising half) or (S - i mod S) c / second (falling);
 *                   lr = min_lr + (max_lr - min_lr) f, mom = max_mom - (max_mom - min_mom) f.
 *                   k >= S: d = k - S + 1; lr = min_lr / (1 + decay_lr_rate d / decay_step_size)
 *                   and mom = max_mom (1 + decay_mom_rate d / decay_step_size); a zero
 *                   decay_step_size or rate leaves min_lr / max_mom.
 *   LRRangeTest     min_lr (1 + step_rate q), q = (k + 1) / step_size, floored if staircase.
 *   StepLR          base gamma^floor(k / step_size).
 *   CosineAnnealing eta_min + (base - eta_min) (1 + cos(pi k / T_max)) / 2 (torch's closed form,
 *                   periodic past T_max like torch's).
 *   User            fn(k, base, user).
 * Negative steps given to torch-family schedules are treated as 0.
 *
 * Momentum: OneCycle with cycle_momentum sets the optimiser's momentum — beta1 for Adam, AdamW
 * and Lamb, the SGD momentum for SGD (DeepSpeed only cycles betas and disables cycling for
 * optimisers without them). DeepSpeed also forces beta2 to 0.99 while cycling; dtrain leaves
 * beta2 alone.
 */
#include "dtrain/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct dt_lr_schedule {
    dt_sched_config cfg;
    dt_optimizer *opt;
    double base_lr;
    int64_t last; /* last_batch_iteration */
    float lr, mom;
};

dt_sched_config dt_sched_defaults(dt_sched_type type) {
    dt_sched_config c;
    memset(&c, 0, sizeof c);
    c.type = type;
    c.base_lr = 1e-3f;
    /* WarmupLR / WarmupDecayLR (total_num_steps has no default: it must be set) */
    c.warmup_min_lr = 0.0f;
    c.warmup_max_lr = 1e-3f;
    c.warmup_num_steps = 1000;
    c.warmup_linear = false;
    /* WarmupCosineLR */
    c.warmup_min_ratio = 0.0f;
    c.cos_min_ratio = 1e-4f;
    /* OneCycle (cycle_min/max_lr have no class default: DeepSpeed's argparse defaults) */
    c.cycle_min_lr = 0.01f;
    c.cycle_max_lr = 0.1f;
    c.decay_lr_rate = 0.0f;
    c.cycle_first_step_size = 2000;
    c.cycle_second_step_size = 0;    /* same as first */
    c.cycle_first_stair_count = 0;   /* continuous */
    c.cycle_second_stair_count = -1; /* same as first (DeepSpeed's None) */
    c.decay_step_size = 0;
    c.cycle_momentum = true;
    c.cycle_min_mom = 0.8f;
    c.cycle_max_mom = 0.9f;
    c.decay_mom_rate = 0.0f;
    /* LRRangeTest */
    c.lr_range_test_min_lr = 1e-3f;
    c.lr_range_test_step_size = 2000;
    c.lr_range_test_step_rate = 1.0f;
    c.lr_range_test_staircase = false;
    /* StepLR (step_size has no default), CosineAnnealingLR (t_max has no default) */
    c.gamma = 0.1f;
    c.eta_min = 0.0f;
    return c;
}

int dt_sched_type_from_name(const char *name) {
    static const struct {
        const char *name;
        dt_sched_type type;
    } names[] = {
        {"Constant", DT_SCHED_CONSTANT},
        {"WarmupLR", DT_SCHED_WARMUP_LR},
        {"WarmupDecayLR", DT_SCHED_WARMUP_DECAY_LR},
        {"WarmupCosineLR", DT_SCHED_WARMUP_COSINE_LR},
        {"OneCycle", DT_SCHED_ONE_CYCLE},
        {"LRRangeTest", DT_SCHED_LR_RANGE_TEST},
        {"StepLR", DT_SCHED_STEP_LR},
        {"CosineAnnealingLR", DT_SCHED_COSINE_ANNEALING},
    };
    if (!name) return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(name, names[i].name)) return (int)names[i].type;
    return -1;
}

static bool deepspeed_family(dt_sched_type t) {
    return t == DT_SCHED_WARMUP_LR || t == DT_SCHED_WARMUP_DECAY_LR ||
           t == DT_SCHED_WARMUP_COSINE_LR || t == DT_SCHED_ONE_CYCLE || t == DT_SCHED_LR_RANGE_TEST;
}

static dt_status check_config(const dt_sched_config *c) {
    switch (c->type) {
    case DT_SCHED_CONSTANT:
        return DT_OK;
    case DT_SCHED_WARMUP_LR:
    case DT_SCHED_WARMUP_DECAY_LR:
    case DT_SCHED_WARMUP_COSINE_LR:
        if (c->warmup_num_steps <= 0)
            return dt_error(DT_ERR_CONFIG,
                            "lr schedule: warmup_num_steps must be a positive integer (got "
                            "%lld); hint: DeepSpeed's default is 1000",
                            (long long)c->warmup_num_steps);
        if (c->type != DT_SCHED_WARMUP_LR && c->total_num_steps <= 0)
            return dt_error(DT_ERR_CONFIG,
                            "lr schedule: %s needs total_num_steps > 0 (got %lld); hint: set it "
                            "to the number of optimizer steps of the run",
                            c->type == DT_SCHED_WARMUP_DECAY_LR ? "WarmupDecayLR"
                                                                : "WarmupCosineLR",
                            (long long)c->total_num_steps);
        return DT_OK;
    case DT_SCHED_ONE_CYCLE:
        if (c->cycle_first_step_size <= 0 || c->cycle_second_step_size < 0)
            return dt_error(DT_ERR_CONFIG,
                            "lr schedule: OneCycle needs cycle_first_step_size > 0 and "
                            "cycle_second_step_size >= 0 (got %lld, %lld); hint: 0 for the "
                            "second means the same as the first",
                            (long long)c->cycle_first_step_size,
                            (long long)c->cycle_second_step_size);
        if (c->decay_step_size < 0)
            return dt_error(DT_ERR_CONFIG,
                            "lr schedule: OneCycle decay_step_size must be >= 0 (got %lld); "
                            "hint: 0 disables the post-cycle decay",
                            (long long)c->decay_step_size);
        return DT_OK;
    case DT_SCHED_LR_RANGE_TEST:
        if (c->lr_range_test_step_size <= 0)
            return dt_error(DT_ERR_CONFIG,
                            "lr schedule: LRRangeTest needs lr_range_test_step_size > 0 (got "
                            "%lld)",
                            (long long)c->lr_range_test_step_size);
        return DT_OK;
    case DT_SCHED_STEP_LR:
        if (c->step_size <= 0)
            return dt_error(DT_ERR_CONFIG,
                            "lr schedule: StepLR needs step_size > 0 (got %lld); hint: the "
                            "number of steps between decays by gamma",
                            (long long)c->step_size);
        return DT_OK;
    case DT_SCHED_COSINE_ANNEALING:
        if (c->t_max <= 0)
            return dt_error(DT_ERR_CONFIG,
                            "lr schedule: CosineAnnealingLR needs t_max > 0 (got %lld); hint: "
                            "the number of steps of one half cosine",
                            (long long)c->t_max);
        return DT_OK;
    case DT_SCHED_USER:
        if (!c->fn)
            return dt_error(DT_ERR_CONFIG,
                            "lr schedule: the user schedule has no function; hint: set fn");
        return DT_OK;
    }
    return dt_error(DT_ERR_CONFIG,
                    "lr schedule: unknown type %d; hint: see dt_sched_type_from_name for the "
                    "names",
                    (int)c->type);
}

/* ---- formulas ------------------------------------------------------------------------ */

static int64_t warmup_steps(const dt_sched_config *c) {
    return c->warmup_num_steps > 2 ? c->warmup_num_steps : 2;
}

/* warmup progress g in [0, 1) for 0 <= k < W */
static double warmup_gamma(const dt_sched_config *c, int64_t k) {
    int64_t w = warmup_steps(c);
    if (c->warmup_linear) return (double)k / (double)w;
    return log((double)(k + 1)) / log((double)w);
}

static double one_cycle_total(const dt_sched_config *c, double *first, double *second) {
    *first = (double)c->cycle_first_step_size;
    *second = c->cycle_second_step_size > 0 ? (double)c->cycle_second_step_size : *first;
    return *first + *second;
}

/* OneCycle scale factor f in [0, 1] for k < S */
static double one_cycle_scale(const dt_sched_config *c, int64_t k) {
    double first, second, total = one_cycle_total(c, &first, &second);
    double ratio = first / total;
    double bi = (double)(k + 1);
    double cycle = floor(1.0 + bi / total);
    double x = 1.0 + bi / total - cycle, f;
    int64_t stairs;
    if (x <= ratio) {
        f = x / ratio;
        stairs = c->cycle_first_stair_count;
    } else {
        f = (x - 1.0) / (ratio - 1.0);
        stairs = c->cycle_second_stair_count < 0 ? c->cycle_first_stair_count
                                                 : c->cycle_second_stair_count;
    }
    if (stairs > 0) { /* quantise from the integer offset inside the cycle */
        double ci = fmod(bi, total), pos;
        if (ci <= first)
            pos = ci * (double)stairs / first;
        else
            pos = (total - ci) * (double)stairs / second;
        f = floor(pos) / (double)stairs;
    }
    return f;
}

static double lr_at(const dt_lr_schedule *s, int64_t k) {
    const dt_sched_config *c = &s->cfg;
    double base = s->base_lr;
    if (!deepspeed_family(c->type) && k < 0) k = 0;
    switch (c->type) {
    case DT_SCHED_CONSTANT:
        return base;
    case DT_SCHED_WARMUP_LR:
    case DT_SCHED_WARMUP_DECAY_LR: {
        double lo = c->warmup_min_lr, delta = (double)c->warmup_max_lr - lo;
        if (k < 0) return lo;
        int64_t w = warmup_steps(c);
        if (k < w) return lo + delta * warmup_gamma(c, k);
        if (c->type == DT_SCHED_WARMUP_LR) return lo + delta;
        double span = (double)(c->total_num_steps - w);
        double g = (double)(c->total_num_steps - k) / (span > 1.0 ? span : 1.0);
        return lo + delta * (g > 0.0 ? g : 0.0);
    }
    case DT_SCHED_WARMUP_COSINE_LR: {
        if (k < 0) return 0.0;
        int64_t w = warmup_steps(c);
        double wmin = c->warmup_min_ratio, cmin = c->cos_min_ratio;
        if (k < w) return base * (wmin + warmup_gamma(c, k) * (1.0 - wmin));
        double span = (double)(c->total_num_steps - w);
        double p = (double)(k - w + 1) / (span > 1.0 ? span : 1.0);
        if (p > 1.0) p = 1.0;
        double r = cmin + (1.0 - cmin) * (1.0 + cos(M_PI * p)) / 2.0;
        return base * (r > 0.0 ? r : 0.0);
    }
    case DT_SCHED_ONE_CYCLE: {
        double first, second, total = one_cycle_total(c, &first, &second);
        double lo = c->cycle_min_lr;
        if ((double)k < total) return lo + ((double)c->cycle_max_lr - lo) * one_cycle_scale(c, k);
        if (c->decay_step_size == 0 || c->decay_lr_rate == 0) return lo;
        double d = (double)k - total + 1.0;
        return lo / (1.0 + (double)c->decay_lr_rate * d / (double)c->decay_step_size);
    }
    case DT_SCHED_LR_RANGE_TEST: {
        double q = (double)(k + 1) / (double)c->lr_range_test_step_size;
        if (c->lr_range_test_staircase) q = floor(q);
        return (double)c->lr_range_test_min_lr * (1.0 + (double)c->lr_range_test_step_rate * q);
    }
    case DT_SCHED_STEP_LR:
        return base * pow((double)c->gamma, (double)(k / c->step_size));
    case DT_SCHED_COSINE_ANNEALING: {
        double lo = c->eta_min;
        return lo + (base - lo) * (1.0 + cos(M_PI * (double)k / (double)c->t_max)) / 2.0;
    }
    case DT_SCHED_USER:
        return c->fn(k, (float)base, c->user);
    }
    return base;
}

/* OneCycle momentum at step k (DeepSpeed sets cycle_min_mom at construction, k = -1) */
static double mom_at(const dt_lr_schedule *s, int64_t k) {
    const dt_sched_config *c = &s->cfg;
    if (k < 0) return c->cycle_min_mom;
    double first, second, total = one_cycle_total(c, &first, &second);
    double hi = c->cycle_max_mom;
    if ((double)k < total) return hi - (hi - (double)c->cycle_min_mom) * one_cycle_scale(c, k);
    if (c->decay_step_size == 0 || c->decay_mom_rate == 0) return hi;
    double d = (double)k - total + 1.0;
    return hi * (1.0 + (double)c->decay_mom_rate * d / (double)c->decay_step_size);
}

/* ---- the schedule object ------------------------------------------------------------- */

static void apply(dt_lr_schedule *s) {
    s->lr = (float)lr_at(s, s->last);
    bool cyc = s->cfg.type == DT_SCHED_ONE_CYCLE && s->cfg.cycle_momentum;
    if (cyc) s->mom = (float)mom_at(s, s->last);
    if (s->opt) {
        dt_optim_set_lr(s->opt, s->lr);
        if (cyc) dt_optim_set_momentum(s->opt, s->mom);
    }
}

dt_lr_schedule *dt_sched_new(const dt_sched_config *cfg, dt_optimizer *opt) {
    if (!cfg) {
        dt_error(DT_ERR_INVALID, "dt_sched_new: cfg is NULL");
        return NULL;
    }
    if (check_config(cfg) != DT_OK) return NULL;
    dt_lr_schedule *s = calloc(1, sizeof *s);
    if (!s) {
        dt_error(DT_ERR_OOM, "dt_sched_new: out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    s->opt = opt;
    s->base_lr = opt ? dt_optim_lr(opt) : cfg->base_lr;
    s->last = deepspeed_family(cfg->type) ? -1 : 0;
    apply(s);
    return s;
}

void dt_sched_free(dt_lr_schedule *s) {
    free(s);
}

float dt_sched_lr_at(const dt_lr_schedule *s, int64_t step) {
    return s ? (float)lr_at(s, step) : 0.0f;
}

void dt_sched_step(dt_lr_schedule *s) {
    if (!s) return;
    s->last++;
    apply(s);
}

int64_t dt_sched_last_step(const dt_lr_schedule *s) {
    return s ? s->last : 0;
}

void dt_sched_set_last_step(dt_lr_schedule *s, int64_t step) {
    if (!s) return;
    s->last = step;
    apply(s);
}
